#!/usr/bin/python3
"""A float64 torch reference forward pass of the LLaMA family (llama, mistral, qwen2), written
from the published architectures, not from attnviz's code. Shared by make_llama_fixtures.py,
stories260k_to_hf.py and the tests that run them (Debian's python3 with python3-torch).

Weights are a dict of Hugging Face names -> torch float64 tensors in HF's layout (nn.Linear
weight [out, in]): model.embed_tokens.weight, model.layers.N.self_attn.{q,k,v,o}_proj.weight
(+ optional .bias), model.layers.N.mlp.{gate,up,down}_proj.weight,
model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight, lm_head.weight
(absent: tied to the embedding).

The block (pre-norm):
    h = RMSNorm(x);  q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)
    RoPE on q and k at positions 0..T-1; query head h reads KV head h // (H / H_kv)
    L_ij = (q_i.k_j / sqrt(head_dim)) / tau, -inf where not allowed; A = softmax over keys
    ablated query heads' outputs zeroed; x += concat(A v) Wo^T;  x += down(silu(gate(n)) * up(n)),
    n = RMSNorm(x) (post_attention_layernorm); logits = RMSNorm(x) (model.norm) lm_head^T.
allowed(i, j) = j <= i, and i - W < j for the model's own sliding window (Mistral; Qwen2 only when
use_sliding_window), and i - W' < j for an extra window intervention W' (both: the last W keys, the
query itself included -- the definition in attnviz's docs/design/conventions.md, which is also
transformers' current masking_utils `kv_idx > q_idx - sliding_window`; mistral-src's reference and
older transformers releases let W + 1 keys through).
RoPE conventions:
  "half"        HF's rotate-half: dims i and i + d/2 form the pair of frequency inv_freq[i];
                x * cos + rotate_half(x) * sin. The layout of HF checkpoints.
  "interleaved" Meta's / llama.cpp's: dims 2i and 2i+1 form the pair, rotated as a complex
                number by exp(i * pos * inv_freq[i]). The layout of Meta and GGUF checkpoints.
  meta_to_hf()/hf_to_meta() permute q_proj/k_proj rows (and biases) per head between the two;
  the same model gives the same scores either way.
"""
import math

import torch

ROPE_TYPES = ("default", "linear", "llama3")


def rms_norm(x, w, eps):
    return w * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def silu(x):
    return x * torch.sigmoid(x)


# ---------------------------------------------------------------------------------------------
# Configuration


def params(cfg):
    """The numbers the forward pass needs, from an HF config.json dict."""
    mt = cfg.get("model_type", "llama")
    if mt not in ("llama", "mistral", "qwen2"):
        raise ValueError(f"model_type {mt!r} is not of the LLaMA family")
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    window = 0
    if mt == "mistral" and cfg.get("sliding_window"):
        window = cfg["sliding_window"]
    if mt == "qwen2" and cfg.get("use_sliding_window"):
        raise NotImplementedError("qwen2 with use_sliding_window (per-layer windows)")
    if H % kv:
        raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
    return {"d": d, "L": cfg["num_hidden_layers"], "H": H, "KV": kv, "hd": hd,
            "eps": cfg.get("rms_norm_eps", 1e-6), "theta": cfg.get("rope_theta", 10000.0),
            "scaling": cfg.get("rope_scaling"), "window": window,
            "tied": cfg.get("tie_word_embeddings", True)}


def rope_inv_freq(head_dim, theta, scaling=None):
    """inv_freq[i] = theta^(-2i/d), i < d/2, float64, rewritten by rope_scaling:
    linear: / factor (the same as positions / factor);
    llama3 (Llama 3.1): wavelength 2*pi/f below original/high_freq_factor keeps f; above
    original/low_freq_factor gives f / factor; in between, with
    s = (original / wavelength - low) / (high - low): (1 - s) * f / factor + s * f."""
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if not scaling:
        return inv
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return inv
    factor = float(scaling["factor"])
    if kind == "linear":
        return inv / factor
    if kind == "llama3":
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        orig = float(scaling["original_max_position_embeddings"])
        out = []
        for f in inv.tolist():
            wavelen = 2 * math.pi / f
            if wavelen < orig / high:
                out.append(f)
            elif wavelen > orig / low:
                out.append(f / factor)
            else:
                s = (orig / wavelen - low) / (high - low)
                out.append((1 - s) * f / factor + s * f)
        return torch.tensor(out, dtype=torch.float64)
    raise NotImplementedError(f"rope_scaling type {kind!r}")


def rope(x, inv_freq, positions, convention):
    """x [heads, T, d]; returns x rotated by positions [T]."""
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :]          # [T, d/2]
    if convention == "half":
        cos = torch.cat([ang.cos(), ang.cos()], -1)
        sin = torch.cat([ang.sin(), ang.sin()], -1)
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin
    if convention == "interleaved":
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(xc * torch.polar(torch.ones_like(ang), ang)).reshape(x.shape)
    raise ValueError(convention)


def meta_to_hf(w, n_heads):
    """HF's conversion permutation of q_proj/k_proj rows (or a bias): within each head, Meta's
    adjacent pairs (2i, 2i+1) become rotate-half's (i, i + d/2)."""
    rows = w.shape[0]
    hd = rows // n_heads
    return w.reshape(n_heads, hd // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def hf_to_meta(w, n_heads):
    rows = w.shape[0]
    hd = rows // n_heads
    return w.reshape(n_heads, 2, hd // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def permute_qk(weights, cfg, fn):
    """A copy of the weights with fn (meta_to_hf or hf_to_meta) applied to every q/k projection."""
    p = params(cfg)
    out = dict(weights)
    for name, t in weights.items():
        if ".self_attn.q_proj." in name:
            out[name] = fn(t, p["H"])
        elif ".self_attn.k_proj." in name:
            out[name] = fn(t, p["KV"])
    return out


# ---------------------------------------------------------------------------------------------
# Forward


def linear(x, w, name):
    y = x @ w[name + ".weight"].T
    if name + ".bias" in w:
        y = y + w[name + ".bias"]
    return y


def forward(cfg, w, ids, ablate=(), temperature=1.0, window=0, rope_convention="half",
            residual_edits=()):
    """Returns (weights [L, H, T, T], logits [T, V]) in float64.
    ablate: (layer, query head) pairs; temperature tau > 0; window: an extra sliding-window
    intervention (0: none), ANDed with the causal mask and the model's own window.
    residual_edits: (layer, position or -1 for all, dim, "zero" | "mean"): after that layer's
    block, dimension dim of the stream set to 0 or to its prefix mean (position t: the mean over
    positions 0..t), in order."""
    p = params(cfg)
    H, KV, hd, eps = p["H"], p["KV"], p["hd"], p["eps"]
    ids = torch.as_tensor(list(ids), dtype=torch.long)
    T = len(ids)
    x = w["model.embed_tokens.weight"][ids].to(torch.float64)
    pos = torch.arange(T)
    inv = rope_inv_freq(hd, p["theta"], p["scaling"])
    i, j = pos[:, None], pos[None, :]
    allowed = j <= i
    for win in (p["window"], window):
        if win:
            allowed = allowed & (j > i - win)
    ablate = set((int(l), int(h)) for l, h in ablate)
    all_weights = []
    for l in range(p["L"]):
        pre = f"model.layers.{l}."
        h = rms_norm(x, w[pre + "input_layernorm.weight"], eps)
        q = linear(h, w, pre + "self_attn.q_proj").reshape(T, H, hd).transpose(0, 1)
        k = linear(h, w, pre + "self_attn.k_proj").reshape(T, KV, hd).transpose(0, 1)
        v = linear(h, w, pre + "self_attn.v_proj").reshape(T, KV, hd).transpose(0, 1)
        q = rope(q, inv, pos, rope_convention)
        k = rope(k, inv, pos, rope_convention)
        k = k.repeat_interleave(H // KV, dim=0)       # query head h reads KV head h // (H/KV)
        v = v.repeat_interleave(H // KV, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(hd)
        scores = scores.masked_fill(~allowed, -math.inf) / temperature
        att = torch.softmax(scores, dim=-1)
        out = att @ v                                  # [H, T, hd]
        for h_ in range(H):
            if (l, h_) in ablate:
                out[h_] = 0.0
        x = x + linear(out.transpose(0, 1).reshape(T, H * hd), w, pre + "self_attn.o_proj")
        n = rms_norm(x, w[pre + "post_attention_layernorm.weight"], eps)
        gated = silu(linear(n, w, pre + "mlp.gate_proj")) * linear(n, w, pre + "mlp.up_proj")
        x = x + linear(gated, w, pre + "mlp.down_proj")
        for el, ep, ed, mode in residual_edits:
            if el == l:
                # A mean is a prefix mean: position t takes the mean over positions 0..t.
                col = x[:, ed].clone()
                v = (torch.cumsum(col, 0) / torch.arange(1, T + 1, dtype=col.dtype)
                     if mode == "mean" else torch.zeros_like(col))
                if ep < 0:
                    x[:, ed] = v
                else:
                    x[ep, ed] = v[ep]
        all_weights.append(att)
    x = rms_norm(x, w["model.norm.weight"], eps)
    lm = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return torch.stack(all_weights), x @ lm.T


def greedy(cfg, w, ids, n, rope_convention="half", eos=None):
    """n greedy steps (full recompute each step: the reference, not a fast path)."""
    ids = list(ids)
    out = []
    for _ in range(n):
        _, logits = forward(cfg, w, ids, rope_convention=rope_convention)
        nxt = int(torch.argmax(logits[-1]))
        out.append(nxt)
        ids.append(nxt)
        if eos is not None and nxt == eos:
            break
    return out


# ---------------------------------------------------------------------------------------------
# Attribution (make_attribution_fixtures.py): the same pass with its activations kept, and head
# ablation (zero, mean), head patching and residual-stream patching inside it.


def forward_trace(cfg, w, ids, zero=(), mean=(), patch=None, resid_patch=None,
                  rope_convention="half"):
    """The forward pass of forward(), keeping what attribution reads. Interventions:
    zero:  (layer, query head) pairs whose output is zeroed before o_proj;
    mean:  (layer, query head) pairs whose output is replaced, at every position, by its mean
           over the positions;
    patch: {(layer, query head): [T, head_dim] tensor} replacing that head's output;
    resid_patch: {layer: {position: [d] tensor}} replacing rows of the residual stream as it
           enters that layer.
    Returns a dict: resid [L + 1, T, d] (row l: the stream entering layer l; row L: the final
    stream before model.norm), head_out [L, H, T, hd] (after the interventions), att
    [L, H, T, T], v [L, H, T, hd] (each query head's values), logits [T, V]."""
    p = params(cfg)
    H, KV, hd, eps = p["H"], p["KV"], p["hd"], p["eps"]
    ids = torch.as_tensor(list(ids), dtype=torch.long)
    T = len(ids)
    x = w["model.embed_tokens.weight"][ids].to(torch.float64)
    pos = torch.arange(T)
    inv = rope_inv_freq(hd, p["theta"], p["scaling"])
    i, j = pos[:, None], pos[None, :]
    allowed = j <= i
    if p["window"]:
        allowed = allowed & (j > i - p["window"])
    zero = set((int(l), int(h)) for l, h in zero)
    mean = set((int(l), int(h)) for l, h in mean)
    patch = patch or {}
    resid_patch = resid_patch or {}
    resid, head_out, atts, vs = [], [], [], []
    for l in range(p["L"]):
        pre = f"model.layers.{l}."
        if l in resid_patch:
            x = x.clone()
            for t, row in resid_patch[l].items():
                x[t] = row
        resid.append(x)
        h = rms_norm(x, w[pre + "input_layernorm.weight"], eps)
        q = linear(h, w, pre + "self_attn.q_proj").reshape(T, H, hd).transpose(0, 1)
        k = linear(h, w, pre + "self_attn.k_proj").reshape(T, KV, hd).transpose(0, 1)
        v = linear(h, w, pre + "self_attn.v_proj").reshape(T, KV, hd).transpose(0, 1)
        q = rope(q, inv, pos, rope_convention)
        k = rope(k, inv, pos, rope_convention)
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(hd)
        att = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
        out = (att @ v).clone()                        # [H, T, hd]
        for h_ in range(H):
            if (l, h_) in zero:
                out[h_] = 0.0
            elif (l, h_) in patch:
                out[h_] = patch[(l, h_)]
            elif (l, h_) in mean:
                out[h_] = out[h_].mean(0, keepdim=True).expand(T, hd)
        head_out.append(out)
        atts.append(att)
        vs.append(v)
        x = x + linear(out.transpose(0, 1).reshape(T, H * hd), w, pre + "self_attn.o_proj")
        n = rms_norm(x, w[pre + "post_attention_layernorm.weight"], eps)
        gated = silu(linear(n, w, pre + "mlp.gate_proj")) * linear(n, w, pre + "mlp.up_proj")
        x = x + linear(gated, w, pre + "mlp.down_proj")
    resid.append(x)
    return {"resid": torch.stack(resid), "head_out": torch.stack(head_out),
            "att": torch.stack(atts), "v": torch.stack(vs), "logits": unembed(cfg, w, x)}


def unembed(cfg, w, x):
    """Logits [n, V] of residual-stream rows x [n, d]: model.norm, then lm_head."""
    x = rms_norm(x, w["model.norm.weight"], params(cfg)["eps"])
    return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T


def head_to_residual(cfg, w, layer, head, o):
    """Query head `head`'s output rows o [n, hd] through its columns of o_proj (no bias)."""
    hd = params(cfg)["hd"]
    wo = w[f"model.layers.{layer}.self_attn.o_proj.weight"]     # [d, H * hd]
    return o @ wo[:, head * hd:(head + 1) * hd].T


def direct_logits(cfg, w, final_row, u):
    """The direct logit contribution [n, V] of residual vectors u [n, d] at a position whose final
    stream is final_row [d]: model.norm linearised there (divided by its RMS denominator, times
    its weight), then lm_head."""
    eps = params(cfg)["eps"]
    denom = torch.sqrt((final_row * final_row).mean() + eps)
    lm = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return (u / denom * w["model.norm.weight"]) @ lm.T
