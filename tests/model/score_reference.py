#!/usr/bin/python3
"""The float64 reference for `attnviz score` on a LLaMA-layout folder (llama_reference.py's
architecture): each token's negative log-likelihood [T - 1], with the whole context, or with
StreamingLLM's cache as docs/design/command-line.md states it: while token t is processed the cache
holds the first S tokens and the last W before t, each with the K and V computed when it was
processed; positions are cache positions (sinks 0..S-1, then the window in order, the query after
them), so cached keys are rotated at their current slot. Usage:

    score_reference.py MODEL_DIR OUT.npy ID,ID,... [S W]
    score_reference.py GPT2_DIR OUT.npy ID,ID,... S W   (learned positions: each key keeps the
        position it was written at, the query its index in the text)
    score_reference.py MODEL_DIR OUT.npy ID,ID,... edit L:P:D:zero|mean [...]   (dense, with
        residual edits inside the pass, as `score --residual-edit`; P a position or "all")
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
import llama_reference as ref  # noqa: E402
import hf_to_gguf  # noqa: E402


def nll_rows(logits, ids):
    lp = torch.log_softmax(logits, dim=-1)
    return torch.stack([-lp[t, ids[t + 1]] for t in range(len(ids) - 1)])


def streaming(cfg, w, ids, S, W):
    p = ref.params(cfg)
    H, KV, hd, eps, L = p["H"], p["KV"], p["hd"], p["eps"], p["L"]
    inv = ref.rope_inv_freq(hd, p["theta"], p["scaling"])
    lm = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    cache = [[] for _ in range(L)]  # per layer: (token index, unrotated k [KV, hd], v [KV, hd])
    out, argmax = [], []
    for t in range(len(ids) - 1):
        # The first S and the last W tokens before t.
        for l in range(L):
            if len(cache[l]) > S + W:
                del cache[l][S]
        x = w["model.embed_tokens.weight"][ids[t]][None, :]
        for l in range(L):
            pre = f"model.layers.{l}."
            h = ref.rms_norm(x, w[pre + "input_layernorm.weight"], eps)
            q = ref.linear(h, w, pre + "self_attn.q_proj").reshape(1, H, hd).transpose(0, 1)
            k = ref.linear(h, w, pre + "self_attn.k_proj").reshape(1, KV, hd).transpose(0, 1)
            v = ref.linear(h, w, pre + "self_attn.v_proj").reshape(1, KV, hd).transpose(0, 1)
            n = len(cache[l])
            plain_k = torch.stack([c[1] for c in cache[l]] + [k[:, 0, :]], 1)   # [KV, n+1, hd]
            vals = torch.stack([c[2] for c in cache[l]] + [v[:, 0, :]], 1)      # [KV, n+1, hd]
            pos = torch.arange(n + 1)
            kr = ref.rope(plain_k, inv, pos, "half")
            qr = ref.rope(q, inv, torch.tensor([n]), "half")                       # [H, 1, hd]
            kr = kr.repeat_interleave(H // KV, dim=0)
            vals_h = vals.repeat_interleave(H // KV, dim=0)
            att = torch.softmax(qr @ kr.transpose(1, 2) / math.sqrt(hd), dim=-1)  # [H, 1, n+1]
            o = (att @ vals_h).transpose(0, 1).reshape(1, H * hd)
            cache[l].append((t, k[:, 0, :], v[:, 0, :]))
            x = x + ref.linear(o, w, pre + "self_attn.o_proj")
            m = ref.rms_norm(x, w[pre + "post_attention_layernorm.weight"], eps)
            g = ref.silu(ref.linear(m, w, pre + "mlp.gate_proj")) * ref.linear(m, w, pre + "mlp.up_proj")
            x = x + ref.linear(g, w, pre + "mlp.down_proj")
        x = ref.rms_norm(x, w["model.norm.weight"], eps)
        lp = torch.log_softmax(x @ lm.T, dim=-1)[0]
        out.append(-lp[ids[t + 1]])
        two = torch.topk(lp, 2)
        argmax.append((int(two.indices[0]), float(two.values[0] - two.values[1])))
    streaming.argmax = argmax
    return torch.stack(out)


def gpt2_streaming(cfg, w, ids, S, W):
    """GPT-2 (learned absolute positions) under the same cache. The position is added to the
    embedding before the K projection, so each cached key and value keeps the position it was
    written at and token t runs at position t: the cache is the dense pass in which query t sees
    the keys j < S and t - W <= j <= t."""
    from make_gpt2_fixtures import gelu, layer_norm
    T, d, H, eps = len(ids), cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    if T > cfg["n_positions"]:
        raise SystemExit("the text passes the learned positions")
    dh = d // H
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = (j <= i) & ((j < S) | (j >= i - W))
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, n * d:(n + 1) * d].reshape(T, H, dh).transpose(0, 1) for n in range(3))
        scores = (q @ k.transpose(1, 2) / math.sqrt(dh)).masked_fill(~allowed, -math.inf)
        out = torch.softmax(scores, dim=-1) @ v
        x = x + out.transpose(0, 1).reshape(T, d) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], cfg["activation_function"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    return nll_rows(x @ w.get("lm_head.weight", w["wte.weight"]).T, ids)


def main():
    folder, out, ids = sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3].split(",")]
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    torch.set_num_threads(1)
    if cfg.get("model_type") == "gpt2":  # GPT-2's Conv1D weights as stored, [in, out]
        from make_attribution_fixtures import read_safetensors
        w = {n[len("transformer."):] if n.startswith("transformer.") else n: t
             for n, t in read_safetensors(os.path.join(folder, "model.safetensors")).items()}
        nll = gpt2_streaming(cfg, w, ids, int(sys.argv[4]), int(sys.argv[5]))
        np.save(out, nll.numpy().astype(np.float32))
        print("%.9g" % float(nll.mean()))
        return 0
    src = hf_to_gguf.Weights(folder)
    w = {n: torch.from_numpy(np.asarray(src.get(n), dtype=np.float64)) for n in src.names()}
    if len(sys.argv) > 4 and sys.argv[4] == "edit":
        edits = []
        for e in sys.argv[5:]:
            l, pos, d, mode = e.split(":")
            edits.append((int(l), -1 if pos == "all" else int(pos), int(d), mode))
        _, logits = ref.forward(cfg, w, ids, residual_edits=edits)
        nll = nll_rows(logits, ids)
    elif len(sys.argv) > 4:
        nll = streaming(cfg, w, ids, int(sys.argv[4]), int(sys.argv[5]))
    else:
        _, logits = ref.forward(cfg, w, ids)
        nll = nll_rows(logits, ids)
    np.save(out, nll.numpy().astype(np.float32))
    if getattr(streaming, "argmax", None) is not None:
        # The greedy choice after each token under the cache and its lead over the second
        # (generate --kv-sinks checks it): [T - 1, 2] float64.
        np.save(out[:-4] + "_argmax.npy", np.asarray(streaming.argmax, dtype=np.float64))
    print("%.9g" % float(nll.mean()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
