#!/usr/bin/python3
"""A float64 torch reference of QK attribution (`attnviz qk`) and composition scores
(`attnviz compose`), written from the published architectures (Hugging Face transformers'
modeling files) and the contract in docs/why-here.md, not from attnviz's code. qk_test.cpp runs
it at test time:

    /usr/bin/python3 tests/model/qk_reference.py OUT_DIR

It makes random-init checkpoints (F32, the exact HF layout) of gpt2 (learned positions, LayerNorm
with biases, Conv1D), llama (RoPE, GQA, attention and MLP biases; and one without, with a GGUF
twin), qwen2 (q/k/v biases), gemma2 (four norms a layer, (1 + w) gains, sqrt(d) embeddings, softcap, query_pre_attn_scalar, local
layers), gemma3_text (q/k norm per head, local and global RoPE bases), qwen3 (q/k norm per head,
head_dim != d / H), phi3 (fused tensors) and olmo2 (norms after the sub-blocks, q/k norm over the
whole width), runs the model while carrying the residual stream as a list of components (the
embedding, each head through its slice of W_o, each MLP, the biases; post-sub-block norms applied
to each part with the whole output's scale), and splits one score of layer L:
C[a, b] = scale * q_a . k_b, each component carried to q and k with every norm's scale frozen at
the pass's value, then W_Q / W_K without bias, the q/k norm (frozen), RoPE at the position; the
constant terms (LayerNorm's beta, q/k biases) as the last item `const`. It checks that sum(C) is
the score its own plain pass computes, and computes the composition scores from full d x d
matrices.

OUT_DIR/cases.json: {"cases": [{"name", "family", "dir", "ids", "layer", "head", "query", "key",
"ablate", "temperature", "mask", "score", "names", "c", "compose_q", "compose_k",
"compose_v", "gguf", "gguf_q8"}]}; "gguf" and "gguf_q8" are the folder's GGUF twins (F32 and
Q8_0; null for folders without one); "c" is c.npy [n, n] float64, compose_* float64 [L, H, L, H] ([l2, h2, l1, h1],
NaN where l1 >= l2).
"""
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import decoder_families_reference as fam  # noqa: E402
from make_gpt2_fixtures import MERGES, toy_tokenizer, write_safetensors  # noqa: E402
import hf_to_gguf  # noqa: E402
from make_llama_fixtures import spm_tokenizer, write_spm_tokenizer  # noqa: E402

# The folders that also get GGUF twins (tools/gguf/hf_to_gguf.py): F32, whose split is the
# folder's, and Q8_0, which qk_test.cpp runs kept as stored (--max-memory 1K).
# (llama_plain: llama.cpp's `llama` tensors rotate adjacent pairs, q/k rows permuted per head.)
GGUF_TWINS = ("gpt2", "llama_plain", "qwen2_bias", "qwen3", "phi3", "olmo2")


# ---------------------------------------------------------------------------------------------
# One layout for every family: row vectors (x @ W), per layer.


def rows_first(w):
    """An nn.Linear weight [out, in] as the row-vector matrix [in, out]."""
    return w.T.contiguous()


def layout(cfg, w):
    """The model as data: (globals, layers), every matrix [in, out], every norm (kind, w, b)."""
    mt = cfg["model_type"]
    if mt == "gpt2":
        d, H = cfg["n_embd"], cfg["n_head"]
        g = {"embed": w["wte.weight"], "pos": w["wpe.weight"], "norm": "layer",
             "eps": cfg["layer_norm_epsilon"], "offset": 0.0, "H": H, "KV": H, "hd": d // H,
             "d": d, "L": cfg["n_layer"], "scale": (d // H) ** -0.5, "rope": False,
             "act": "gelu_tanh", "gated": False, "placement": "pre", "qknorm": None}
        layers = []
        for l in range(cfg["n_layer"]):
            p = f"h.{l}."
            ca, cb = w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"]
            layers.append({
                "attn_norm": (w[p + "ln_1.weight"], w[p + "ln_1.bias"]),
                "wq": ca[:, :d], "bq": cb[:d], "wk": ca[:, d:2 * d], "bk": cb[d:2 * d],
                "wv": ca[:, 2 * d:], "bv": cb[2 * d:],
                "wo": w[p + "attn.c_proj.weight"], "bo": w[p + "attn.c_proj.bias"],
                "mlp_norm": (w[p + "ln_2.weight"], w[p + "ln_2.bias"]),
                "up": w[p + "mlp.c_fc.weight"], "bup": w[p + "mlp.c_fc.bias"],
                "down": w[p + "mlp.c_proj.weight"], "bdown": w[p + "mlp.c_proj.bias"],
                "window": 0, "inv": None})
        return g, layers
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = fam.head_dim(cfg)
    gemma = mt in fam.GEMMA
    g = {"embed": w["model.embed_tokens.weight"], "pos": None, "norm": "rms",
         "eps": cfg["rms_norm_eps"], "offset": 1.0 if gemma else 0.0, "H": H, "KV": KV, "hd": hd,
         "d": d, "L": L, "scale": (cfg["query_pre_attn_scalar"] if gemma else hd) ** -0.5,
         "rope": True, "act": "gelu_tanh" if gemma else "silu", "gated": True,
         "placement": "sandwich" if gemma else "after" if mt == "olmo2" else "pre",
         "qknorm": "head" if mt in ("qwen3", "gemma3_text") else "whole" if mt == "olmo2" else None,
         "embed_scale": float(torch.tensor(d ** 0.5, dtype=torch.float32)) if gemma else 1.0,
         "softcap": cfg.get("attn_logit_softcapping") if gemma else None}
    local = fam.local_layers(cfg)
    window = cfg.get("sliding_window") or 0
    layers = []
    for l in range(L):
        p = f"model.layers.{l}."
        get = lambda n: w.get(p + n)  # noqa: E731
        lay = {"window": window if local[l] else 0, "inv": fam.inv_freq(cfg, local[l])}
        if mt == "phi3":
            qkv = w[p + "self_attn.qkv_proj.weight"]
            q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=0)
            gate, up = w[p + "mlp.gate_up_proj.weight"].chunk(2, dim=0)
            bq = bk = bv = None
        else:
            q, k, v = (w[p + f"self_attn.{n}_proj.weight"] for n in "qkv")
            bq, bk, bv = (get(f"self_attn.{n}_proj.bias") for n in "qkv")
            gate, up = w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]
        lay.update({"wq": rows_first(q), "bq": bq, "wk": rows_first(k), "bk": bk,
                    "wv": rows_first(v), "bv": bv,
                    "wo": rows_first(w[p + "self_attn.o_proj.weight"]),
                    "bo": get("self_attn.o_proj.bias"),
                    "gate": rows_first(gate), "bgate": get("mlp.gate_proj.bias"),
                    "up": rows_first(up), "bup": get("mlp.up_proj.bias"),
                    "down": rows_first(w[p + "mlp.down_proj.weight"]),
                    "bdown": get("mlp.down_proj.bias"),
                    "qn": get("self_attn.q_norm.weight"), "kn": get("self_attn.k_norm.weight")})
        if mt == "olmo2":
            lay["attn_norm"] = lay["mlp_norm"] = None
            lay["post_attn"] = w[p + "post_attention_layernorm.weight"]
            lay["post_mlp"] = w[p + "post_feedforward_layernorm.weight"]
        elif gemma:
            lay["attn_norm"] = (w[p + "input_layernorm.weight"], None)
            lay["mlp_norm"] = (w[p + "pre_feedforward_layernorm.weight"], None)
            lay["post_attn"] = w[p + "post_attention_layernorm.weight"]
            lay["post_mlp"] = w[p + "post_feedforward_layernorm.weight"]
        else:
            lay["attn_norm"] = (w[p + "input_layernorm.weight"], None)
            lay["mlp_norm"] = (w[p + "post_attention_layernorm.weight"], None)
        layers.append(lay)
    return g, layers


# ---------------------------------------------------------------------------------------------
# Norms, frozen and not


def norm_scale(g, x):
    """The per-row denominator of the block norm for rows x [T, d]."""
    if g["norm"] == "layer":
        return torch.sqrt(((x - x.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + g["eps"])
    return torch.sqrt((x * x).mean(-1, keepdim=True) + g["eps"])


def apply_norm(g, nw, x):
    w, b = nw
    y = x - x.mean(-1, keepdim=True) if g["norm"] == "layer" else x
    y = y / norm_scale(g, x) * (g["offset"] + w)
    return y + b if b is not None else y


def rms_factor(g, w, u):
    """RMSNorm as a per-row factor (offset + w) / sqrt(mean(u^2) + eps) (post norms, q/k)."""
    return (g["offset"] + w) / torch.sqrt((u * u).mean(-1, keepdim=True) + g["eps"])


def act(g, x):
    if g["act"] == "silu":
        return x * torch.sigmoid(x)
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def add_bias(y, b):
    return y + b if b is not None else y


def rope_rows(x, inv, pos):
    """Rotate-half RoPE of rows x [..., hd] at position pos (the angle as float32 pos * inv)."""
    ang = (torch.tensor(float(pos), dtype=torch.float32) * inv.to(torch.float32)).to(torch.float64)
    cos = torch.cat([ang.cos(), ang.cos()])
    sin = torch.cat([ang.sin(), ang.sin()])
    h = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin


# ---------------------------------------------------------------------------------------------
# The pass, carrying the stream as components


def project(g, lay, a, T):
    """q [H, T, hd], k [KV, T, hd] (normed, rotated), v [KV, T, hd] from the block input a."""
    H, KV, hd = g["H"], g["KV"], g["hd"]
    q, k = add_bias(a @ lay["wq"], lay["bq"]), add_bias(a @ lay["wk"], lay["bk"])
    v = add_bias(a @ lay["wv"], lay["bv"])
    if g["qknorm"] == "whole":
        q, k = q * rms_factor(g, lay["qn"], q), k * rms_factor(g, lay["kn"], k)
    q = q.reshape(T, H, hd).transpose(0, 1)
    k = k.reshape(T, KV, hd).transpose(0, 1)
    v = v.reshape(T, KV, hd).transpose(0, 1)
    if g["qknorm"] == "head":
        q, k = q * rms_factor(g, lay["qn"], q), k * rms_factor(g, lay["kn"], k)
    if g["rope"]:
        q = torch.stack([torch.stack([rope_rows(q[h, t], lay["inv"], t) for t in range(T)])
                         for h in range(H)])
        k = torch.stack([torch.stack([rope_rows(k[h, t], lay["inv"], t) for t in range(T)])
                         for h in range(KV)])
    return q, k, v


def run(g, layers, ids, L, ablate, temperature, mask_window):
    """The stream entering layer L as components (names, [n_c, T, d]) and the plain stream."""
    H, KV, hd, d = g["H"], g["KV"], g["hd"], g["d"]
    T = len(ids)
    ids = torch.as_tensor(ids)
    x = g["embed"][ids] * g.get("embed_scale", 1.0)
    if g["pos"] is not None:
        x = x + g["pos"][:T]
    names, comps = ["embed"], [x.clone()]
    bias = torch.zeros(T, d, dtype=torch.float64)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    post = g["placement"] in ("sandwich", "after")
    for l in range(L):
        lay = layers[l]
        a = apply_norm(g, lay["attn_norm"], x) if lay["attn_norm"] is not None else x
        q, k, v = project(g, lay, a, T)
        k, v = k.repeat_interleave(H // KV, 0), v.repeat_interleave(H // KV, 0)
        s = q @ k.transpose(1, 2) * g["scale"]
        if g.get("softcap"):
            s = g["softcap"] * torch.tanh(s / g["softcap"])
        allowed = j <= i
        if lay["window"]:
            allowed = allowed & (j > i - lay["window"])
        if mask_window:
            allowed = allowed & (j > i - mask_window)
        att = torch.softmax(s.masked_fill(~allowed, -math.inf) / temperature, -1)
        o = att @ v  # [H, T, hd]
        for al, ah in ablate:
            if al == l:
                o[ah] = 0.0
        heads = [o[h] @ lay["wo"][h * hd:(h + 1) * hd] for h in range(H)]
        u = add_bias(sum(heads), lay["bo"])
        fa = rms_factor(g, lay["post_attn"], u) if post else 1.0
        for h in range(H):
            names.append(f"L{l}H{h}")
            comps.append(heads[h] * fa)
        if lay["bo"] is not None:
            bias = bias + lay["bo"] * fa
        x = x + u * fa
        m = apply_norm(g, lay["mlp_norm"], x) if lay["mlp_norm"] is not None else x
        if g["gated"]:
            hid = act(g, add_bias(m @ lay["gate"], lay["bgate"])) * add_bias(m @ lay["up"], lay["bup"])
        else:
            hid = act(g, add_bias(m @ lay["up"], lay["bup"]))
        f = add_bias(hid @ lay["down"], lay["bdown"])
        fm = rms_factor(g, lay["post_mlp"], f) if post else 1.0
        names.append(f"L{l}mlp")
        comps.append((f - lay["bdown"] if lay["bdown"] is not None else f) * fm)
        if lay["bdown"] is not None:
            bias = bias + lay["bdown"] * fm
        x = x + f * fm
    names.append("bias")
    comps.append(bias)
    comps = torch.stack(comps)
    err = float((comps.sum(0) - x).abs().max())
    assert err < 1e-9 * float(x.abs().max()), ("components do not sum to the stream", err)
    return names, comps, x


def split(g, layers, ids, L, head, I, J, ablate=(), temperature=1.0, mask_window=0):
    """(names with const, C [n, n], the plain pass's score)."""
    H, KV, hd = g["H"], g["KV"], g["hd"]
    T = len(ids)
    names, comps, x = run(g, layers, ids, L, ablate, temperature, mask_window)
    lay = layers[L]
    kv = head // (H // KV)
    # The plain pass's score.
    a = apply_norm(g, lay["attn_norm"], x) if lay["attn_norm"] is not None else x
    q, k, _ = project(g, lay, a, T)
    score = float(q[head, I] @ k[kv, J]) * g["scale"]

    def carried(pos, wname, bname, nname, unit):
        xs = x[pos]
        c = comps[:, pos]  # [n_c, d]
        const = torch.zeros(g["d"], dtype=torch.float64)
        if lay["attn_norm"] is not None:
            w, b = lay["attn_norm"]
            if g["norm"] == "layer":
                c = c - c.mean(-1, keepdim=True)
            c = c / norm_scale(g, xs[None])[0] * (g["offset"] + w)
            if b is not None:
                const = b
        rows = torch.cat([c, const[None]])
        full = rows @ lay[wname]  # [n, width]
        if lay[bname] is not None:
            full[-1] = full[-1] + lay[bname]
        part = full[:, unit * hd:(unit + 1) * hd]
        if g["qknorm"] == "whole":
            part = part * rms_factor(g, lay[nname], full.sum(0))[unit * hd:(unit + 1) * hd]
        elif g["qknorm"] == "head":
            part = part * rms_factor(g, lay[nname], part.sum(0))
        if g["rope"]:
            part = rope_rows(part, lay["inv"], pos)
        return part

    qs = carried(I, "wq", "bq", "qn", head)
    ks = carried(J, "wk", "bk", "kn", kv)
    C = g["scale"] * (qs @ ks.T)
    assert abs(float(C.sum()) - score) < 1e-9 * max(1.0, abs(score)), (float(C.sum()), score)
    return names + ["const"], C, score


def compose(g, layers, kind):
    """[L, H, L, H] composition scores from the full d x d circuits."""
    H, KV, hd, L = g["H"], g["KV"], g["hd"], g["L"]
    qk, ov = [], []
    for lay in layers:
        gain = (g["offset"] + lay["attn_norm"][0]) if lay["attn_norm"] is not None else 1.0
        wq, wk, wv = (lay[n] * (gain[:, None] if torch.is_tensor(gain) else gain)
                      for n in ("wq", "wk", "wv"))
        qk.append([wq[:, h * hd:(h + 1) * hd] @ wk[:, (h // (H // KV)) * hd:][:, :hd].T
                   for h in range(H)])
        ov.append([wv[:, (h // (H // KV)) * hd:][:, :hd] @ lay["wo"][h * hd:(h + 1) * hd]
                   for h in range(H)])
    out = np.full((L, H, L, H), np.nan)
    for l2 in range(L):
        for h2 in range(H):
            right = {"q": qk[l2][h2], "k": qk[l2][h2].T, "v": ov[l2][h2]}[kind]
            for l1 in range(l2):
                for h1 in range(H):
                    left = ov[l1][h1]
                    out[l2, h2, l1, h1] = float(torch.linalg.norm(left @ right) /
                                                (torch.linalg.norm(left) * torch.linalg.norm(right)))
    return out


def random_composition(d, hd, draws=2000, seed=7):
    """What the score is for random weights of the shapes: full d x d products of W_V W_O and
    W_Q W_K^T with independent N(0, 1) entries, mean and standard deviation over `draws` pairs
    (the kinds share one distribution, so one estimate serves all three)."""
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(draws):
        v1, o1 = rng.standard_normal((d, hd)), rng.standard_normal((hd, d))
        q2, k2 = rng.standard_normal((d, hd)), rng.standard_normal((d, hd))
        ov, qk = v1 @ o1, q2 @ k2.T
        vals.append(np.linalg.norm(ov @ qk) / (np.linalg.norm(ov) * np.linalg.norm(qk)))
    return float(np.mean(vals)), float(np.std(vals, ddof=1)), draws


# ---------------------------------------------------------------------------------------------
# Checkpoints


def gpt2_checkpoint(out, seed):
    gen = torch.Generator().manual_seed(seed)
    vocab, merges = toy_tokenizer(MERGES)
    L, H, d, P, V = 3, 4, 32, 64, len(vocab)
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
           "activation_function": "gelu_new", "n_layer": L, "n_head": H, "n_embd": d,
           "n_positions": P, "n_ctx": P, "n_inner": None, "vocab_size": V,
           "layer_norm_epsilon": 1e-5, "bos_token_id": V - 1, "eos_token_id": V - 1}

    def rnd(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean

    w = {"wte.weight": rnd(V, d, std=0.5), "wpe.weight": rnd(P, d, std=0.3),
         "ln_f.weight": rnd(d, std=0.2, mean=1.0), "ln_f.bias": rnd(d, std=0.1)}
    for l in range(L):
        p = f"h.{l}."
        w[p + "ln_1.weight"] = rnd(d, std=0.2, mean=1.0)
        w[p + "ln_1.bias"] = rnd(d, std=0.1)
        w[p + "attn.c_attn.weight"] = rnd(d, 3 * d, std=1.5 / math.sqrt(d))
        w[p + "attn.c_attn.bias"] = rnd(3 * d, std=0.2)
        w[p + "attn.c_proj.weight"] = rnd(d, d, std=1.0 / math.sqrt(d))
        w[p + "attn.c_proj.bias"] = rnd(d, std=0.1)
        w[p + "ln_2.weight"] = rnd(d, std=0.2, mean=1.0)
        w[p + "ln_2.bias"] = rnd(d, std=0.1)
        w[p + "mlp.c_fc.weight"] = rnd(d, 4 * d, std=1.0 / math.sqrt(d))
        w[p + "mlp.c_fc.bias"] = rnd(4 * d, std=0.1)
        w[p + "mlp.c_proj.weight"] = rnd(4 * d, d, std=1.0 / math.sqrt(4 * d))
        w[p + "mlp.c_proj.bias"] = rnd(d, std=0.1)
    w = {k: v.to(torch.float32).to(torch.float64) for k, v in w.items()}
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), [(n, t, "F32") for n, t in w.items()])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    ids = torch.randint(0, V - 1, (14,), generator=gen).tolist()
    return cfg, w, ids


def llama_config(mt, d, L, H, KV, V, **extra):
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[mt]
    c = {"architectures": [arch], "model_type": mt, "hidden_size": d, "intermediate_size": 96,
         "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
         "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
         "rope_theta": 10000.0, "rope_scaling": None, "vocab_size": V,
         "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
         "attention_dropout": 0.0, "torch_dtype": "float32", "transformers_version": "4.44.0"}
    c.update(extra)
    return c


def hf_checkpoint(out, cfg, seed, V):
    gen = torch.Generator().manual_seed(seed)
    w = fam.random_weights(cfg, gen)
    if cfg["model_type"] == "qwen2":  # q, k, v biases, none on o
        L = cfg["num_hidden_layers"]
        for l in range(L):
            p = f"model.layers.{l}.self_attn."
            for n in "qkv":
                w[p + f"{n}_proj.bias"] = torch.randn(w[p + f"{n}_proj.weight"].shape[0],
                                                      generator=gen, dtype=torch.float64) * 0.3
    if cfg.get("mlp_bias"):
        for l in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{l}.mlp."
            for n in ("gate", "up", "down"):
                w[p + f"{n}_proj.bias"] = torch.randn(w[p + f"{n}_proj.weight"].shape[0],
                                                      generator=gen, dtype=torch.float64) * 0.1
    w = {k: v.to(torch.float32).to(torch.float64) for k, v in w.items()}
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), [(n, t, "F32") for n, t in w.items()])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    vocab, merges = spm_tokenizer()
    write_spm_tokenizer(out, vocab, merges)
    ids = [1] + torch.randint(3, V, (13,), generator=gen).tolist()
    return w, ids


def main():
    if len(sys.argv) != 2:
        print("usage: qk_reference.py OUT_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    torch.set_num_threads(1)
    V = len(spm_tokenizer()[0])
    C = fam.config
    # name, config (None: gpt2), seed, [(layer, head, query, key, ablate, temperature, window)]
    variants = [
        ("gpt2", None, 51, [(2, 1, 12, 5, [], 1.0, 0), (1, 3, 4, 9, [], 1.0, 0),
                            (2, 0, 13, 13, [(0, 2), (1, 1)], 0.5, 3)]),
        ("llama_gqa", llama_config("llama", 64, 3, 4, 2, V, head_dim=16, attention_bias=True,
                                   mlp_bias=True), 52,
         [(2, 3, 11, 4, [], 1.0, 0), (1, 0, 3, 9, [(0, 1)], 2.0, 0)]),
        ("llama_plain", llama_config("llama", 64, 2, 4, 2, V, head_dim=16), 59,
         [(1, 2, 12, 7, [], 1.0, 0)]),
        ("qwen2_bias", llama_config("qwen2", 48, 2, 4, 2, V, tie_word_embeddings=True,
                                    use_sliding_window=False), 53, [(1, 2, 10, 6, [], 1.0, 0)]),
        ("gemma2", C("gemma2", 64, 3, 4, 2, V, True, head_dim=16, query_pre_attn_scalar=20,
                     sliding_window=5, attn_logit_softcapping=4.0,
                     final_logit_softcapping=3.0), 54,
         [(2, 1, 12, 3, [], 1.0, 0), (1, 2, 9, 7, [(0, 3)], 0.7, 0)]),
        ("gemma3_text", C("gemma3_text", 64, 3, 4, 2, V, True, head_dim=16,
                          query_pre_attn_scalar=16, sliding_window=4, sliding_window_pattern=2,
                          rope_theta=1000000.0, rope_local_base_freq=10000.0,
                          attn_logit_softcapping=None, final_logit_softcapping=None), 55,
         [(2, 0, 13, 2, [], 1.0, 0)]),
        ("qwen3", C("qwen3", 64, 3, 4, 2, V, False, head_dim=24), 56,
         [(2, 2, 10, 8, [], 1.0, 0), (1, 1, 6, 0, [], 1.0, 4)]),
        ("phi3", C("phi3", 64, 2, 4, 2, V, True, sliding_window=None), 57,
         [(1, 3, 9, 2, [], 1.0, 0)]),
        ("olmo2", C("olmo2", 64, 3, 4, 2, V, False, rms_norm_eps=1e-5), 58,
         [(2, 1, 12, 6, [], 1.0, 0)]),
    ]
    cases = []
    for name, cfg, seed, splits in variants:
        out = os.path.join(root, name)
        if cfg is None:
            cfg, w, ids = gpt2_checkpoint(out, seed)
        else:
            w, ids = hf_checkpoint(out, cfg, seed, V)
        twins = {}
        if name in GGUF_TWINS:
            for key, qtype in (("gguf", "F32"), ("gguf_q8", "Q8_0")):
                twins[key] = f"{name}_{qtype.lower()}.gguf"
                hf_to_gguf.convert(out, os.path.join(root, twins[key]), qtype, quiet=True)
        g, layers = layout(cfg, w)
        comp = {}
        rnd_mean, rnd_sd, rnd_draws = random_composition(g["d"], g["hd"])
        for kind in "qkv":
            comp[kind] = f"{name}/compose_{kind}.npy"
            np.save(os.path.join(root, comp[kind]), compose(g, layers, kind))
        for n, (L, h, I, J, ablate, tau, window) in enumerate(splits):
            names, Cm, score = split(g, layers, ids, L, h, I, J, ablate, tau, window)
            cname = f"{name}_{n}"
            np.save(os.path.join(root, f"{name}/{cname}_c.npy"), Cm.numpy())
            cases.append({"name": cname, "family": cfg["model_type"], "dir": name, "ids": ids,
                          "layer": L, "head": h, "query": I, "key": J,
                          "ablate": [f"{a}:{b}" for a, b in ablate], "temperature": tau,
                          "mask": f"window:{window}" if window else None, "score": score,
                          "names": names, "c": f"{name}/{cname}_c.npy",
                          "compose_q": comp["q"], "compose_k": comp["k"],
                          "compose_v": comp["v"], "random_mean": rnd_mean,
                          "random_sd": rnd_sd, "random_draws": rnd_draws,
                          "gguf": twins.get("gguf"),
                          "gguf_q8": twins.get("gguf_q8")})
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
