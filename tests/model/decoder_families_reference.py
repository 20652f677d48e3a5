#!/usr/bin/python3
"""A float64 torch reference forward pass of the decoder families qwen3, gemma2, gemma3_text,
phi3 and olmo2, written from the published architectures (Hugging Face transformers' modeling
files), not from attnviz's code; and random-init checkpoints of each in the exact HF layout, with
what the reference computes on them. decoder_families_test.cpp runs this at test time:

    /usr/bin/python3 tests/model/decoder_families_reference.py OUT_DIR

OUT_DIR/cases.json: {"cases": [{"name", "family", "dir", "ids", "weights", "logits", "greedy"}]}
("greedy": six greedy next ids by full recompute, null when a step is a near tie); each
case's folder holds config.json, model.safetensors (F32), a SentencePiece-style tokenizer.json
(make_llama_fixtures.py's) and the expected float32 attention weights [L, H, T, T] and logits
[T, V] as .npy. Deterministic (seeded); a few seconds on one core.

What each family does that LLaMA does not (the block is pre-norm RMSNorm, RoPE rotate-half,
gated MLP, unless said otherwise):
  qwen3        q and k RMS-normalised per head (q_norm/k_norm, [head_dim]) before RoPE; head_dim
               may differ from hidden_size / heads; attention_bias puts biases on q, k, v and o.
  gemma2       embeddings times sqrt(d) rounded to the weights' type; every RMSNorm scales by
               (1 + w); four norms a layer: input_layernorm before attention,
               post_attention_layernorm on the attention output before the residual add,
               pre_feedforward_layernorm before the MLP, post_feedforward_layernorm on its output;
               scores scaled by query_pre_attn_scalar^-1/2, then c tanh(s / c)
               (attn_logit_softcapping) before the mask; even layers (l % 2 == 0) local with a
               sliding window W: key j allowed iff i - W < j <= i; GeGLU (gelu, tanh
               approximation); tied head; final logits c tanh(z / c) (final_logit_softcapping).
  gemma3_text  gemma2's norms and scaling, no softcaps unless configured; q_norm/k_norm per head
               with (1 + w); layer l local iff (l + 1) % sliding_window_pattern != 0 (or as
               layer_types lists); local layers rotate with rope_local_base_freq and no scaling,
               global ones with rope_theta and rope_scaling (linear: frequencies / factor).
  phi3         fused qkv_proj (rows [q; k; v]) and gate_up_proj (rows [gate; up]); SiLU; the
               sliding window, when configured, in every layer; partial_rotary_factor f
               (Phi-4-mini: 0.75) rotates the first int(head_dim * f) dimensions of each head only,
               rotate-half within them (any family's config may say it).
  gemma3       (Gemma3ForConditionalGeneration, the 4B/12B/27B image-text checkpoints) a gemma3_text
               language model described by text_config, whose missing keys take
               transformers' Gemma3TextConfig defaults (text_config() below); its tensors under
               "language_model.model." (the head "language_model.lm_head."), beside the vision
               tower's ("vision_tower.") and the projector's ("multi_modal_projector."), which
               play no part in a text pass. Its case is a folder only (llama.cpp writes the
               language model as a text-only gemma3 GGUF, the gemma3_text twins).
  olmo2        no norm before attention or MLP: post_attention_layernorm on the attention output
               and post_feedforward_layernorm on the MLP output, each before the residual add;
               q_norm over the whole q projection [H * head_dim] and k_norm over [KV * head_dim],
               before RoPE.
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_gpt2_fixtures import write_safetensors  # noqa: E402
from make_llama_fixtures import spm_tokenizer, write_spm_tokenizer  # noqa: E402

FAMILIES = ("qwen3", "gemma2", "gemma3_text", "phi3", "olmo2")
GEMMA = ("gemma2", "gemma3_text")


# ---------------------------------------------------------------------------------------------
# The pass


def rms(x, w, eps, offset):
    """x / sqrt(mean(x^2) + eps) * (offset + w) over the last dimension."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (offset + w)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x * torch.sigmoid(x)


def local_layers(cfg):
    """Which layers use the sliding window (a list of bools)."""
    mt, L = cfg["model_type"], cfg["num_hidden_layers"]
    if mt in GEMMA and cfg.get("layer_types"):
        return [t == "sliding_attention" for t in cfg["layer_types"]]
    if mt == "gemma2":
        return [l % 2 == 0 for l in range(L)]
    if mt == "gemma3_text":
        p = cfg.get("sliding_window_pattern", 6)
        return [(l + 1) % p != 0 for l in range(L)]
    if mt == "phi3":
        return [bool(cfg.get("sliding_window"))] * L
    return [False] * L


def longrope(cfg, scaling, T):
    """LongRoPE as transformers' _compute_longrope_parameters and Phi-3's rotary embedding use
    it: (the per-pair divisors, the cos/sin factor) for a sequence of T positions. The long
    factors once T passes original_max_position_embeddings (the object's, else the config's, else
    max_position_embeddings); the factor attention_factor, else sqrt(1 + ln s / ln original) with
    s = max_position_embeddings / original (1 when s <= 1)."""
    mx = cfg["max_position_embeddings"]
    orig = scaling.get("original_max_position_embeddings",
                       cfg.get("original_max_position_embeddings"))
    if orig:
        s = mx / orig
    else:
        orig, s = mx, scaling.get("factor") or 1.0
    af = scaling.get("attention_factor")
    if af is None:
        af = math.sqrt(1 + math.log(s) / math.log(orig)) if s > 1.0 else 1.0
    ext = scaling["long_factor"] if T > orig else scaling["short_factor"]
    return torch.tensor(ext, dtype=torch.float32), af


def inv_freq(cfg, local, T=0):
    """The inverse frequencies of the rotated pairs (for a sequence of T positions)."""
    return rope_params(cfg, local, T)[0]


def rope_params(cfg, local, T=0):
    """(the inverse frequencies of the rotated pairs, the factor on cos and sin) for a sequence
    of T positions."""
    hd = head_dim(cfg)
    base = cfg.get("rope_theta", 10000.0)
    scaling = cfg.get("rope_scaling")
    if cfg["model_type"] == "gemma3_text" and local:
        base, scaling = cfg.get("rope_local_base_freq", 10000.0), None
    rp = cfg.get("rope_parameters")
    if rp:  # transformers 5: one object, or one per layer type
        if "full_attention" in rp or "sliding_attention" in rp:
            rp = rp.get("sliding_attention" if local else "full_attention", {})
        base, scaling = rp.get("rope_theta", 10000.0), rp
    # Partial rotary: the first int(hd * partial_rotary_factor) dimensions rotate.
    dim = int(hd * cfg.get("partial_rotary_factor", 1.0))
    # As HF computes it: base^(2i/d) in float32, d the rotated dimensions.
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    inv = (1.0 / (base ** shape)).to(torch.float64)
    af = 1.0
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind == "linear":
            inv = inv / float(scaling["factor"])
        elif kind == "longrope":  # in float32, as HF: 1 / (factor * base^(2i/d))
            ext, af = longrope(cfg, scaling, T)
            inv = (1.0 / (ext * base ** shape)).to(torch.float64)
        elif kind != "default":
            raise NotImplementedError(kind)
    return inv, af


def rope(x, inv, T, af=1.0):
    """x [heads, T, hd], rotate-half pairs (i, i + r/2) within the first r = 2 len(inv)
    dimensions; the others pass through (partial rotary). cos and sin times af."""
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1) * af
    sin = torch.cat([ang.sin(), ang.sin()], -1) * af
    r = 2 * inv.shape[0]
    xr, xp = x[..., :r], x[..., r:]
    h = r // 2
    return torch.cat([xr * cos + torch.cat([-xr[..., h:], xr[..., :h]], -1) * sin, xp], -1)


# transformers' Gemma3TextConfig defaults (configuration_gemma3.py), for the keys an image-text
# checkpoint's text_config leaves out.
GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "rope_theta": 1000000.0,
    "attention_bias": False, "query_pre_attn_scalar": 256, "sliding_window": 4096,
    "final_logit_softcapping": None, "attn_logit_softcapping": None, "rope_scaling": None,
    "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6}


def text_config(cfg):
    """The language model's config of an image-text gemma3 config (else cfg itself)."""
    if cfg["model_type"] != "gemma3":
        return cfg
    out = dict(GEMMA3_TEXT_DEFAULTS)
    out.update({k: v for k, v in cfg["text_config"].items() if v is not None})
    out["model_type"] = "gemma3_text"
    return out


def multimodal_names(w, gen):
    """The language model's tensors as Gemma3ForConditionalGeneration names them, and a few
    tiny vision tower and projector tensors beside them."""
    out = {"language_model." + k: v for k, v in w.items()}  # model.* and lm_head.weight
    for name, shape in (("vision_tower.vision_model.embeddings.patch_embedding.weight",
                         (8, 3, 2, 2)),
                        ("vision_tower.vision_model.post_layernorm.weight", (8,)),
                        ("multi_modal_projector.mm_input_projection_weight", (8, 16)),
                        ("multi_modal_projector.mm_soft_emb_norm.weight", (8,))):
        out[name] = torch.randn(*shape, generator=gen, dtype=torch.float64)
    return out


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def lin(x, w, name):
    y = x @ w[name + ".weight"].T
    if name + ".bias" in w:
        y = y + w[name + ".bias"]
    return y


def head_norms(x, heads):
    """Each head's row norms [heads, T] of x [T, heads * hd] or [heads, T, hd]."""
    if x.dim() == 2:
        x = x.reshape(x.shape[0], heads, -1).transpose(0, 1)
    return x.norm(dim=-1)


def forward(cfg, w, ids, qk_trace=None):
    """(attention weights [L, H, T, T], logits [T, V]), float64. qk_trace: a list that gets, a
    layer, the q and k row norms per head before and after the family's q/k norm."""
    cfg = text_config(cfg)
    mt = cfg["model_type"]
    assert mt in FAMILIES, mt
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = head_dim(cfg)
    eps = cfg["rms_norm_eps"]
    gemma = mt in GEMMA
    off = 1.0 if gemma else 0.0

    def norm(x, name):
        return rms(x, w[name], eps, off)

    ids = torch.as_tensor(ids, dtype=torch.long)
    T = len(ids)
    x = w["model.embed_tokens.weight"][ids]
    if gemma:  # sqrt(d) as a float32 number, one product per value
        x = x * float(torch.tensor(d ** 0.5, dtype=torch.float32))
    scale = (cfg["query_pre_attn_scalar"] if gemma else hd) ** -0.5
    softcap = cfg.get("attn_logit_softcapping") if gemma else None
    window = cfg.get("sliding_window") or 0
    local = local_layers(cfg)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    atts = []
    for l in range(L):
        p = f"model.layers.{l}."
        h = x if mt == "olmo2" else norm(x, p + "input_layernorm.weight")
        if mt == "phi3":
            qkv = lin(h, w, p + "self_attn.qkv_proj")
            q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
        else:
            q = lin(h, w, p + "self_attn.q_proj")
            k = lin(h, w, p + "self_attn.k_proj")
            v = lin(h, w, p + "self_attn.v_proj")
        before = (head_norms(q, H), head_norms(k, KV))
        if mt == "olmo2":  # over the whole projection
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        q = q.reshape(T, H, hd).transpose(0, 1)
        k = k.reshape(T, KV, hd).transpose(0, 1)
        v = v.reshape(T, KV, hd).transpose(0, 1)
        if mt in ("qwen3", "gemma3_text"):  # per head
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        if qk_trace is not None:
            qk_trace.append(before + (head_norms(q, H), head_norms(k, KV)))
        inv, af = rope_params(cfg, local[l], T)
        q, k = rope(q, inv, T, af), rope(k, inv, T, af)
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        s = q @ k.transpose(1, 2) * scale
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        allowed = j <= i
        if local[l] and window:
            allowed = allowed & (j > i - window)
        att = torch.softmax(s.masked_fill(~allowed, -math.inf), dim=-1)
        atts.append(att)
        u = lin((att @ v).transpose(0, 1).reshape(T, H * hd), w, p + "self_attn.o_proj")
        if gemma or mt == "olmo2":
            u = norm(u, p + "post_attention_layernorm.weight")
        x = x + u
        if gemma:
            m = norm(x, p + "pre_feedforward_layernorm.weight")
        elif mt == "olmo2":
            m = x
        else:
            m = norm(x, p + "post_attention_layernorm.weight")
        act = gelu_tanh if gemma else silu
        if mt == "phi3":
            gate, up = lin(m, w, p + "mlp.gate_up_proj").chunk(2, dim=-1)
        else:
            gate, up = lin(m, w, p + "mlp.gate_proj"), lin(m, w, p + "mlp.up_proj")
        f = lin(act(gate) * up, w, p + "mlp.down_proj")
        if gemma or mt == "olmo2":
            f = norm(f, p + "post_feedforward_layernorm.weight")
        x = x + f
    x = norm(x, "model.norm.weight")
    logits = x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T
    cap = cfg.get("final_logit_softcapping") if gemma else None
    if cap:
        logits = cap * torch.tanh(logits / cap)
    return torch.stack(atts), logits


# ---------------------------------------------------------------------------------------------
# Checkpoints


def multimodal(text, **top):
    """An image-text gemma3 config around `text` (a gemma3_text config, keys in `drop` left to the
    defaults) with a tiny vision_config."""
    return dict({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                 "text_config": text,
                 "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8,
                                   "image_size": 4, "patch_size": 2, "num_hidden_layers": 1,
                                   "num_attention_heads": 1, "intermediate_size": 16},
                 "mm_tokens_per_image": 4, "boi_token_index": 5, "eoi_token_index": 6,
                 "image_token_index": 7, "torch_dtype": "float32",
                 "transformers_version": "4.53.0"}, **top)


def gemma3_text_part(V):
    """The text_config of the image-text case: sizes given, the rest (rms_norm_eps,
    rope_theta 1e6, rope_local_base_freq 1e4, query_pre_attn_scalar 256, sliding_window_pattern 6,
    no caps, tied) left to Gemma3TextConfig's defaults as the real checkpoints' text_config
    leaves them; six layers so that pattern 6 makes the last one global."""
    return {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "vocab_size": V, "sliding_window": 5, "bos_token_id": 1,
            "eos_token_id": 2,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0}}


def config(mt, d, L, H, KV, V, tied, inter=128, **extra):
    arch = {"qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
            "gemma3_text": "Gemma3ForCausalLM", "phi3": "Phi3ForCausalLM",
            "olmo2": "Olmo2ForCausalLM"}[mt]
    c = {"architectures": [arch], "model_type": mt, "hidden_size": d, "intermediate_size": inter,
         "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
         "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
         "rope_scaling": None, "vocab_size": V, "tie_word_embeddings": tied,
         "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
         "eos_token_id": 2, "torch_dtype": "float32", "transformers_version": "4.53.0"}
    c["hidden_act"] = "gelu_pytorch_tanh" if mt in GEMMA else "silu"
    if mt in GEMMA:
        c["hidden_activation"] = "gelu_pytorch_tanh"
    c.update(extra)
    return c


def random_weights(cfg, gen):
    cfg = text_config(cfg)
    mt = cfg["model_type"]
    d, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd, inter = head_dim(cfg), cfg["intermediate_size"]
    gemma = mt in GEMMA
    bias = cfg.get("attention_bias", False)

    def rnd(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean

    def nw(n):  # a norm weight: close to 1 as used ((1 + w) for Gemma)
        return rnd(n, std=0.1, mean=0.0 if gemma else 1.0)

    w = {"model.embed_tokens.weight": rnd(V, d, std=1.0 / math.sqrt(d) if gemma else 1.0)}
    for l in range(L):
        p = f"model.layers.{l}."
        if mt != "olmo2":
            w[p + "input_layernorm.weight"] = nw(d)
        w[p + "post_attention_layernorm.weight"] = nw(d)
        if gemma:
            w[p + "pre_feedforward_layernorm.weight"] = nw(d)
        if gemma or mt == "olmo2":
            w[p + "post_feedforward_layernorm.weight"] = nw(d)
        # Sharp enough that a wrong mask, RoPE base or norm shows in the weights.
        qs, ks = 1.8 / math.sqrt(d), 1.8 / math.sqrt(d)
        q = rnd(H * hd, d, std=qs)
        k = rnd(KV * hd, d, std=ks)
        v = rnd(KV * hd, d, std=1.0 / math.sqrt(d))
        if mt == "phi3":
            w[p + "self_attn.qkv_proj.weight"] = torch.cat([q, k, v])
        else:
            w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"] = q, k
            w[p + "self_attn.v_proj.weight"] = v
        if bias:
            w[p + "self_attn.q_proj.bias"] = rnd(H * hd, std=0.3)
            w[p + "self_attn.k_proj.bias"] = rnd(KV * hd, std=0.3)
            w[p + "self_attn.v_proj.bias"] = rnd(KV * hd, std=0.3)
            w[p + "self_attn.o_proj.bias"] = rnd(d, std=0.1)
        if mt in ("qwen3", "gemma3_text"):
            # q/k normalised: the weights set the sharpness (about sqrt(hd) * 1.5 / sqrt(hd)).
            w[p + "self_attn.q_norm.weight"] = rnd(hd, std=0.3, mean=1.8 if mt == "qwen3" else 0.6)
            w[p + "self_attn.k_norm.weight"] = rnd(hd, std=0.3, mean=1.8 if mt == "qwen3" else 0.6)
        if mt == "olmo2":
            w[p + "self_attn.q_norm.weight"] = rnd(H * hd, std=0.3, mean=1.8)
            w[p + "self_attn.k_norm.weight"] = rnd(KV * hd, std=0.3, mean=1.8)
        w[p + "self_attn.o_proj.weight"] = rnd(d, H * hd, std=1.0 / math.sqrt(H * hd))
        gate = rnd(inter, d, std=1.0 / math.sqrt(d))
        up = rnd(inter, d, std=1.0 / math.sqrt(d))
        if mt == "phi3":
            w[p + "mlp.gate_up_proj.weight"] = torch.cat([gate, up])
        else:
            w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"] = gate, up
        w[p + "mlp.down_proj.weight"] = rnd(d, inter, std=1.0 / math.sqrt(inter))
    w["model.norm.weight"] = nw(d)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = rnd(V, d, std=2.0 / math.sqrt(d))
    return w


def v5(cfg, rope_parameters):
    """cfg with its RoPE keys as transformers 5 writes them."""
    for k in ("rope_theta", "rope_scaling", "rope_local_base_freq"):
        cfg.pop(k, None)
    cfg["rope_parameters"] = rope_parameters
    return cfg


def variants(V):
    """(name, config, seed): two per family, between them tied and untied heads, GQA, a window
    shorter than T, a global layer within the depth."""
    return [
        # head_dim 24 != 64 / 4; GQA 4/2; untied.
        ("qwen3_gqa", config("qwen3", 64, 2, 4, 2, V, False, head_dim=24,
                             use_sliding_window=False, sliding_window=None,
                             max_window_layers=2), 31),
        # MQA 4/1, tied, attention_bias (q, k, v and o), rope_theta 1e6.
        ("qwen3_bias_tied", config("qwen3", 96, 3, 4, 1, V, True, head_dim=32,
                                   attention_bias=True, rope_theta=1000000.0), 32),
        # Gemma 2: window 5 < T on layers 0 and 2, small caps so that both bite; GQA; tied.
        ("gemma2_window", config("gemma2", 64, 4, 4, 2, V, True, head_dim=16,
                                 query_pre_attn_scalar=16, sliding_window=5,
                                 attn_logit_softcapping=4.0, final_logit_softcapping=3.0), 33),
        # query_pre_attn_scalar != head_dim, untied (lm_head present), MHA, the usual caps.
        ("gemma2_untied", config("gemma2", 96, 2, 4, 4, V, False, head_dim=32,
                                 query_pre_attn_scalar=20, sliding_window=7,
                                 attn_logit_softcapping=50.0, final_logit_softcapping=30.0), 34),
        # Gemma 3: pattern 3 over 4 layers (0, 1, 3 local; 2 global), window 4, local base
        # 1e4 against a global 1e6 with linear scaling x4, GQA, tied, no caps.
        ("gemma3_pattern", config("gemma3_text", 64, 4, 4, 2, V, True, head_dim=16,
                                  query_pre_attn_scalar=16, sliding_window=4,
                                  sliding_window_pattern=3, rope_theta=1000000.0,
                                  rope_local_base_freq=10000.0,
                                  rope_scaling={"rope_type": "linear", "factor": 4.0},
                                  attn_logit_softcapping=None, final_logit_softcapping=None),
         35),
        # layer_types as newer configs list them, softcaps configured, untied, MQA.
        ("gemma3_layer_types", config("gemma3_text", 80, 3, 4, 1, V, False, head_dim=20,
                                      query_pre_attn_scalar=24, sliding_window=6,
                                      layer_types=["full_attention", "sliding_attention",
                                                   "sliding_attention"],
                                      rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                      attn_logit_softcapping=6.0, final_logit_softcapping=5.0),
         36),
        # Fused tensors, MHA, untied, no window.
        # As transformers 5 writes them: rope_parameters instead of rope_theta / rope_scaling.
        ("qwen3_rope_parameters", v5(config("qwen3", 64, 2, 4, 2, V, True, head_dim=16),
                                     {"rope_type": "linear", "factor": 2.0,
                                      "rope_theta": 1000000.0}), 41),
        ("gemma3_rope_parameters",
         v5(config("gemma3_text", 64, 3, 4, 2, V, True, head_dim=16, query_pre_attn_scalar=16,
                   sliding_window=5, layer_types=["sliding_attention", "full_attention",
                                                  "sliding_attention"],
                   attn_logit_softcapping=None, final_logit_softcapping=None),
            {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}), 42),
        ("phi3_fused", config("phi3", 64, 2, 4, 4, V, False, sliding_window=None), 37),
        # GQA 4/2 in the fused qkv, window 6 < T in every layer, tied.
        ("phi3_window", config("phi3", 64, 3, 4, 2, V, True, sliding_window=6), 38),
        # Phi-4-mini's shape in small: partial_rotary_factor 0.75 (18 of the 24 dimensions of a
        # head rotate, their halves 9 apart; 6 pass through), GQA 4/2, tied.
        ("phi4_mini_partial", config("phi3", 96, 2, 4, 2, V, True, sliding_window=None,
                                     partial_rotary_factor=0.75), 43),
        # Phi-3's LongRoPE: 16 tokens against original_max_position_embeddings 12 (the long
        # factors; the case "phi3_longrope_short" runs the same folder on 10 tokens: the short
        # ones), the attention factor from max_position_embeddings 256 / 12; partial rotary as
        # Phi-4-mini (12 of 16 dimensions: 6 factors each).
        ("phi3_longrope", config("phi3", 64, 2, 4, 2, V, False, sliding_window=None,
                                 partial_rotary_factor=0.75, original_max_position_embeddings=12,
                                 rope_scaling={"type": "longrope",
                                               "short_factor": [1.0, 1.3, 2.0, 3.1, 4.5, 7.0],
                                               "long_factor": [1.5, 2.7, 5.0, 9.0, 16.0, 40.0]}),
         45),
        # As transformers 5 writes it: the original length and attention_factor inside
        # rope_parameters; short regime only (T = 16 <= 20).
        ("phi3_longrope_v5", v5(config("phi3", 64, 2, 4, 4, V, True, sliding_window=None),
                                {"rope_type": "longrope", "rope_theta": 10000.0,
                                 "original_max_position_embeddings": 20,
                                 "attention_factor": 1.25,
                                 "short_factor": [1.0, 1.1, 1.5, 2.0, 3.0, 4.0, 6.0, 9.0],
                                 "long_factor": [2.0] * 8}), 46),
        # Gemma 3's image-text layout: the language model under language_model., text_config
        # with Gemma3TextConfig's defaults for what it leaves out, vision tensors beside it.
        ("gemma3_multimodal", multimodal(gemma3_text_part(V)), 44),
        # Norms after; k_norm over KV * hd = 32 < q_norm's 64; untied.
        ("olmo2_gqa", config("olmo2", 64, 2, 4, 2, V, False, rms_norm_eps=1e-5), 39),
        ("olmo2_tied", config("olmo2", 96, 3, 6, 6, V, True, rope_theta=500000.0), 40),
    ]


def check(name, cfg, w, ids, att, logits):
    """The variant exercises what it says: rows sum to 1, windows and caps bite."""
    if cfg["model_type"] == "gemma3":  # the defaults matter: the stated scalar differs
        tc = text_config(cfg)
        a8, _ = forward(dict(tc, query_pre_attn_scalar=16), w, ids)
        assert float((a8 - att).abs().max()) > 1e-3, name
        a9, _ = forward(dict(tc, rope_local_base_freq=tc["rope_theta"]), w, ids)
        assert float((a9 - att).abs().max()) > 1e-3, name
        cfg = tc
    assert torch.allclose(att.sum(-1), torch.ones_like(att.sum(-1)), atol=1e-12), name
    assert torch.isfinite(logits).all(), name
    local = local_layers(cfg)
    W = cfg.get("sliding_window") or 0
    if any(local) and W:
        T = len(ids)
        assert W < T, name
        a2, _ = forward(dict(cfg, sliding_window=None), w, ids)
        assert float((a2 - att).abs().max()) > 0.05, name
    if cfg["model_type"] in GEMMA and cfg.get("attn_logit_softcapping"):
        a3, _ = forward(dict(cfg, attn_logit_softcapping=None), w, ids)
        assert float((a3 - att).abs().max()) > 1e-3, name
    if cfg["model_type"] in GEMMA and cfg.get("final_logit_softcapping"):
        _, z = forward(dict(cfg, final_logit_softcapping=None), w, ids)
        assert float((z - logits).abs().max()) > 1e-3, name
    if cfg["model_type"] == "gemma3_text":
        assert any(local) and not all(local), name
    if cfg["model_type"] == "gemma3_text" and "rope_theta" in cfg:
        a4, _ = forward(dict(cfg, rope_local_base_freq=cfg["rope_theta"]), w, ids)
        assert float((a4 - att).abs().max()) > 1e-3, name
        if cfg.get("rope_scaling"):  # the global layers' scaling matters
            a5, _ = forward(dict(cfg, rope_scaling=None), w, ids)
            assert float((a5 - att).abs().max()) > 1e-3, name
    if cfg.get("rope_parameters"):  # read, not defaulted
        a6, _ = forward(dict(cfg, rope_parameters=None), w, ids)
        assert float((a6 - att).abs().max()) > 1e-3, name
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if rs.get("type", rs.get("rope_type")) == "longrope":  # the factors and the scale matter
        other = dict(rs, short_factor=rs["long_factor"], long_factor=rs["short_factor"])
        a10, _ = forward(dict(cfg, rope_scaling=other) if "rope_scaling" in cfg
                         else dict(cfg, rope_parameters=other), w, ids)
        assert float((a10 - att).abs().max()) > 1e-3, name
        one = dict(rs, attention_factor=1.0)
        a11, _ = forward(dict(cfg, rope_scaling=one) if "rope_scaling" in cfg
                         else dict(cfg, rope_parameters=one), w, ids)
        assert float((a11 - att).abs().max()) > 1e-3, name
    if cfg.get("partial_rotary_factor", 1.0) != 1.0 and not rs:  # the pass-through dims matter
        a7, _ = forward(dict(cfg, partial_rotary_factor=1.0), w, ids)
        assert float((a7 - att).abs().max()) > 1e-3, name
    # Peaky enough to show a wrong mask or rotation.
    peak = float(att[:, :, 7:, :].max(-1).values.mean())
    if os.environ.get("PEAK"):
        print(name, peak, float(logits.abs().max()))
    assert peak > 0.3, (name, peak)


def greedy(cfg, w, ids, n, eos=2):
    """n greedy steps by full recompute (stopping after EOS), and the smallest gap between the
    two most likely logits over the steps, relative to the largest logit."""
    ids, out, gap = list(ids), [], math.inf
    for _ in range(n):
        _, z = forward(cfg, w, ids)
        top = torch.topk(z[-1], 2).values
        gap = min(gap, float(top[0] - top[1]) / float(z.abs().max()))
        nxt = int(torch.argmax(z[-1]))
        out.append(nxt)
        ids.append(nxt)
        if nxt == eos:
            break
    return out, gap


def main():
    if len(sys.argv) != 2:
        print("usage: decoder_families_reference.py OUT_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    torch.set_num_threads(1)
    vocab, merges = spm_tokenizer()
    V = len(vocab)
    cases = []
    for name, cfg, seed in variants(V):
        out = os.path.join(root, name)
        os.makedirs(out, exist_ok=True)
        gen = torch.Generator().manual_seed(seed)
        w = random_weights(cfg, gen)
        w = {k: v.to(torch.float32).to(torch.float64) for k, v in w.items()}  # as stored (F32)
        stored = multimodal_names(w, gen) if cfg["model_type"] == "gemma3" else w
        ids = [1] + torch.randint(3, V, (15,), generator=gen).tolist()
        trace = []
        att, logits = forward(cfg, w, ids, trace)
        check(name, cfg, w, ids, att, logits)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        write_safetensors(os.path.join(out, "model.safetensors"),
                          [(n, t, "F32") for n, t in stored.items()])
        write_spm_tokenizer(out, vocab, merges)
        np.save(os.path.join(out, "weights.npy"), att.numpy().astype(np.float32))
        np.save(os.path.join(out, "logits.npy"), logits.numpy().astype(np.float32))
        # The continuation, when no step is a near tie (float32 could pick the other token).
        cont, gap = greedy(cfg, w, ids, 6)
        tc = text_config(cfg)
        case = {"name": name, "family": tc["model_type"], "dir": name, "ids": ids,
                "weights": f"{name}/weights.npy", "logits": f"{name}/logits.npy",
                "greedy": cont if gap > 1e-3 else None,
                # Folders only: gemma3's image-text layout.
                "gguf": cfg["model_type"] != "gemma3"}
        if tc["model_type"] in ("qwen3", "gemma3_text", "olmo2"):
            # [L, 2, H, T] and [L, 2, KV, T]: before and after the q/k norm.
            qn = torch.stack([torch.stack([t[0], t[2]]) for t in trace])
            kn = torch.stack([torch.stack([t[1], t[3]]) for t in trace])
            np.save(os.path.join(out, "q_norms.npy"), qn.numpy().astype(np.float32))
            np.save(os.path.join(out, "k_norms.npy"), kn.numpy().astype(np.float32))
            case["q_norms"], case["k_norms"] = f"{name}/q_norms.npy", f"{name}/k_norms.npy"
        cases.append(case)
        if name == "phi3_longrope":  # the same folder on 10 <= 12 tokens: the short factors
            short = ids[:10]
            att_s, logits_s = forward(cfg, w, short)
            check(name + "_short", cfg, w, short, att_s, logits_s)
            att_l, _ = forward(dict(cfg, original_max_position_embeddings=8), w, short)
            assert float((att_l - att_s).abs().max()) > 1e-3  # the regime matters here
            np.save(os.path.join(out, "weights_short.npy"), att_s.numpy().astype(np.float32))
            np.save(os.path.join(out, "logits_short.npy"), logits_s.numpy().astype(np.float32))
            # No greedy ids: generation crosses 12 tokens, where HF's cached steps switch to
            # the long factors while the full recompute rotates every position with them.
            cases.append({"name": name + "_short", "family": "phi3", "dir": name, "ids": short,
                          "weights": f"{name}/weights_short.npy",
                          "logits": f"{name}/logits_short.npy", "greedy": None,
                          "gguf": True})
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
