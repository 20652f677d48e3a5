"""The decoder families beyond LLaMA for hf_to_gguf.py: qwen3, gemma2, gemma3_text (-> "gemma3"),
phi3 and olmo2, written in llama.cpp's layout (its metadata keys and tensor names).

What llama.cpp does with them, and so what is written here:
  - RoPE: llama.cpp runs all five with NEOX rope (rotate-half, Hugging Face's own layout), so no
    q/k rows are permuted (only "llama" is).
  - qwen3: the LLaMA tensors plus blk.N.attn_q_norm / attn_k_norm ([head_dim] each); biases on
    q, k, v and o when attention_bias is set.
  - gemma2 / gemma3: four norms a layer: attn_norm (input_layernorm), post_attention_norm
    (post_attention_layernorm), ffn_norm (pre_feedforward_layernorm), post_ffw_norm
    (post_feedforward_layernorm); gemma3 adds attn_q_norm / attn_k_norm. Every norm weight is
    written as w + 1 (Gemma's RMSNorm scales by 1 + w; llama.cpp's converter adds the 1 and its
    graph scales by the stored weight). key_length and value_length are always written. There is
    no query_pre_attn_scalar key: llama.cpp scales the scores by 1/sqrt(head_dim), or by
    1/sqrt(hidden_size / heads) for the 27B models (46 layers for Gemma 2, 62 for Gemma 3).
    gemma2: attn_logit_softcapping, final_logit_softcapping, attention.sliding_window (the even
    layers local). gemma3: rope.freq_base is the global layers' base, rope.scaling linear applies
    to them only, the local layers rotate with 10000 (rope.freq_base_swa is written when the
    config's rope_local_base_freq differs), every 6th layer is global.
    Where the config's local layers differ from llama.cpp's fixed rule (a sliding_window_pattern
    other than 6, a layer_types list), attention.sliding_window_pattern is written as one flag a
    layer (true = local), the key other llama.cpp architectures read; attnviz reads it, llama.cpp's
    gemma2/gemma3 ignore it. Likewise a Gemma 3 attn_logit_softcapping (llama.cpp's converter
    refuses one) is written as gemma3.attn_logit_softcapping. Real Gemma heads are tied; an untied
    lm_head is written as output.weight (llama.cpp's converter drops it).
  - phi3: fused blk.N.attn_qkv (qkv_proj, rows [q; k; v]) and blk.N.ffn_up (gate_up_proj, rows
    [gate; up]), as stored; attention.sliding_window when configured. LongRoPE ("longrope"/"su")
    as llama.cpp stores it: rope_factors_long/short.weight tensors, rope.scaling.attn_factor and
    rope.scaling.original_context_length (no rope.scaling.type).
  - olmo2: no attn_norm / ffn_norm; post_attention_norm and post_ffw_norm; attn_q_norm over
    [heads * head_dim] and attn_k_norm over [kv_heads * head_dim].
"""

import math
import sys

import numpy as np

from gguf_file import U32, F32, STR, ARR, BOOLT  # noqa: F401

ARCH = {"qwen3": "qwen3", "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3",
        "olmo2": "olmo2"}
GEMMA = ("gemma2", "gemma3")


class FamilyError(Exception):
    pass


def rope_of(config):
    """(base, scaling dict or None, local layers' base or None), from rope_theta / rope_scaling /
    rope_local_base_freq, or transformers 5's rope_parameters (one object, or one per layer type)."""
    rp = config.get("rope_parameters")
    if rp:
        if "full_attention" in rp or "sliding_attention" in rp:
            full, local = rp.get("full_attention") or {}, rp.get("sliding_attention")
        else:
            full, local = rp, None
        kind = full.get("rope_type") or full.get("type")
        local_base = local.get("rope_theta", 10000.0) if local else None
        return full.get("rope_theta", 10000.0), (full if kind not in (None, "default") else None), local_base
    return config.get("rope_theta", 10000.0), config.get("rope_scaling"), config.get("rope_local_base_freq")


def head_dim(config):
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def local_layers(config):
    """The config's local layers (bools), for gemma2 / gemma3_text."""
    L = config["num_hidden_layers"]
    if config.get("layer_types"):
        return [t == "sliding_attention" for t in config["layer_types"]]
    if config["model_type"] == "gemma2":
        return [l % 2 == 0 for l in range(L)]
    p = config.get("sliding_window_pattern", 6)
    return [(l + 1) % p != 0 for l in range(L)]


def longrope_lengths(config, scaling):
    """(original context length, attention factor) of a LongRoPE config, as transformers reads
    them: the original length in the scaling object or config.json (else the context length);
    attention_factor when given, else sqrt(1 + ln(s) / ln(original)) with s = context / original
    (1 when s <= 1)."""
    ctx = config["max_position_embeddings"]
    orig = scaling.get("original_max_position_embeddings",
                       config.get("original_max_position_embeddings", ctx))
    if "attention_factor" in scaling:
        return orig, float(scaling["attention_factor"])
    s = ctx / orig
    return orig, (math.sqrt(1 + math.log(s) / math.log(orig)) if s > 1 else 1.0)


def hparams(config, arch, w):
    a = arch + "."
    mt = config["model_type"]
    d = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    hd = head_dim(config)
    base, scaling, local_base = rope_of(config)
    w.add(a + "vocab_size", U32(config["vocab_size"]))
    w.add(a + "context_length", U32(config["max_position_embeddings"]))
    w.add(a + "embedding_length", U32(d))
    w.add(a + "block_count", U32(config["num_hidden_layers"]))
    w.add(a + "feed_forward_length", U32(config["intermediate_size"]))
    w.add(a + "attention.head_count", U32(heads))
    w.add(a + "attention.head_count_kv", U32(kv))
    w.add(a + "attention.layer_norm_rms_epsilon", F32(config.get("rms_norm_eps", 1e-6)))
    w.add(a + "rope.freq_base", F32(base))
    rot = hd
    if mt == "phi3":
        prf = config.get("partial_rotary_factor", 1.0)
        rot = int(hd * prf)
    w.add(a + "rope.dimension_count", U32(rot))
    if hd != d // heads or arch in GEMMA:
        w.add(a + "attention.key_length", U32(hd))
        w.add(a + "attention.value_length", U32(hd))
    if scaling:
        kind = scaling.get("rope_type") or scaling.get("type")
        if kind in ("longrope", "su"):
            if mt != "phi3":
                raise FamilyError("rope_scaling %s is converted for phi3 only" % kind)
            # As llama.cpp's converter writes Phi-3: the original length and the attention
            # factor as keys (the factors are tensors, tensor_plan); no scaling type.
            orig, factor = longrope_lengths(config, scaling)
            w.add(a + "rope.scaling.original_context_length", U32(orig))
            w.add(a + "rope.scaling.attn_factor", F32(factor))
            scaling = None
    if scaling:
        kind = scaling.get("rope_type") or scaling.get("type")
        if kind != "linear":
            raise FamilyError("rope_scaling %s is not converted for %s (linear)" % (kind, mt))
        w.add(a + "rope.scaling.type", STR("linear"))
        w.add(a + "rope.scaling.factor", F32(scaling["factor"]))
    sw = config.get("sliding_window")
    if mt == "phi3" and sw:
        w.add(a + "attention.sliding_window", U32(sw))
    if mt == "qwen3" and sw and config.get("use_sliding_window"):
        w.add(a + "attention.sliding_window", U32(sw))
    if arch == "gemma2":
        caps = {}
        for k, default in (("attn_logit_softcapping", 50.0), ("final_logit_softcapping", 30.0)):
            caps[k] = config.get(k, default)
            if not caps[k]:
                raise FamilyError("gemma2 with %s %r: llama.cpp's gemma2 always caps" % (k, caps[k]))
            w.add(a + k, F32(caps[k]))
        w.add(a + "attention.sliding_window", U32(sw or 4096))
    if arch == "gemma3":
        w.add(a + "attention.sliding_window", U32(sw or 4096))
        for k in ("attn_logit_softcapping", "final_logit_softcapping"):
            if config.get(k):
                w.add(a + k, F32(config[k]))
        if local_base is not None and float(local_base) != 10000.0:
            w.add(a + "rope.freq_base_swa", F32(local_base))
    if arch in GEMMA:
        L = config["num_hidden_layers"]
        rule = [l % 2 == 0 for l in range(L)] if arch == "gemma2" else [l % 6 < 5 for l in range(L)]
        local = local_layers(config)
        if local != rule:
            w.add(a + "attention.sliding_window_pattern", ARR(BOOLT, local))


def tensor_plan(config, arch, names, take):
    """[(gguf name, take(...))]: the layer tensors of the five families, as stored (no permutation);
    Gemma's norms + 1."""
    mt = config["model_type"]
    L = config["num_hidden_layers"]
    gemma = arch in GEMMA
    plus1 = (lambda a: a + 1.0) if gemma else None
    plan = [("token_embd.weight", take("model.embed_tokens.weight"))]
    _, scaling, _ = rope_of(config)
    if scaling and (scaling.get("rope_type") or scaling.get("type")) in ("longrope", "su"):
        # Phi-3's LongRoPE factors, one per rotated pair, as llama.cpp stores them.
        for key, name in (("long_factor", "rope_factors_long.weight"),
                          ("short_factor", "rope_factors_short.weight")):
            plan.append((name, np.asarray(scaling[key], dtype=np.float32)))
    for i in range(L):
        h = "model.layers.%d." % i
        b = "blk.%d." % i

        def put(dst, src, fn=None, optional=False):
            if optional and h + src not in names:
                return
            plan.append((b + dst, take(h + src, fn)))
        if mt == "gemma2" or mt == "gemma3_text":
            put("attn_norm.weight", "input_layernorm.weight", plus1)
            put("post_attention_norm.weight", "post_attention_layernorm.weight", plus1)
            put("ffn_norm.weight", "pre_feedforward_layernorm.weight", plus1)
            put("post_ffw_norm.weight", "post_feedforward_layernorm.weight", plus1)
        elif mt == "olmo2":
            put("post_attention_norm.weight", "post_attention_layernorm.weight")
            put("post_ffw_norm.weight", "post_feedforward_layernorm.weight")
        else:
            put("attn_norm.weight", "input_layernorm.weight")
            put("ffn_norm.weight", "post_attention_layernorm.weight")
        if mt in ("qwen3", "gemma3_text", "olmo2"):
            put("attn_q_norm.weight", "self_attn.q_norm.weight", plus1)
            put("attn_k_norm.weight", "self_attn.k_norm.weight", plus1)
        if mt == "phi3":
            put("attn_qkv.weight", "self_attn.qkv_proj.weight")
            put("ffn_up.weight", "mlp.gate_up_proj.weight")
        else:
            for proj, dst in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v")):
                put(dst + ".weight", "self_attn.%s.weight" % proj)
                put(dst + ".bias", "self_attn.%s.bias" % proj, optional=True)
            put("ffn_gate.weight", "mlp.gate_proj.weight")
            put("ffn_up.weight", "mlp.up_proj.weight")
        put("attn_output.weight", "self_attn.o_proj.weight")
        put("attn_output.bias", "self_attn.o_proj.bias", optional=True)
        put("ffn_down.weight", "mlp.down_proj.weight")
    plan.append(("output_norm.weight", take("model.norm.weight", plus1)))
    tied = config.get("tie_word_embeddings", gemma) or "lm_head.weight" not in names
    if not tied:
        plan.append(("output.weight", take("lm_head.weight")))
    return plan


if __name__ == "__main__":
    print(__doc__)
    sys.exit(0)
