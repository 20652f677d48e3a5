#!/usr/bin/python3
"""GGUF twins of the decoder families' checkpoints: run after decoder_families_reference.py has
written OUT_DIR, this converts every case's Hugging Face folder with tools/gguf/hf_to_gguf.py
(type F32: the values are the checkpoint's, Gemma's norm weights w + 1 rounded to float32) and
says what the file must compute:

    /usr/bin/python3 tests/model/decoder_families_gguf.py OUT_DIR

OUT_DIR/gguf_cases.json: {"cases": [{"name", "family", "file", "hf" (the folder it is a twin
of, null when none), "ids", "weights", "logits", "scale_rule"}], "bad": [{"name", "file",
"expect"}]}.

The expected weights and logits are the torch reference's (decoder_families_reference.forward)
on the HF checkpoint, with one difference a GGUF cannot avoid: it has no query_pre_attn_scalar, and
llama.cpp scales Gemma's scores by 1/sqrt(head_dim) (1/sqrt(hidden_size / heads) for the 27B
models: 46 layers for Gemma 2, 62 for Gemma 3). Where a Gemma case's query_pre_attn_scalar is not
that number ("scale_rule": true) the expected arrays are the reference's with
query_pre_attn_scalar set to it, and they are asserted to differ from the HF case's (the twin
checks the rule, not a no-op); elsewhere they are the HF case's own files.

Two more Gemma 3 files read the local layers from metadata: "gemma3_rule6", gemma3_pattern's file
without attention.sliding_window_pattern (llama.cpp's rule: every 6th layer global, so all 4 of
its layers local; the reference is the checkpoint's with sliding_window_pattern 6, asserted to
differ from pattern 3's), "gemma3_period3", the key as a period (3) instead of flags (the
pattern-3 reference), and "gemma3_local_base", rope.freq_base_swa 20000 (the reference with
rope_local_base_freq 20000, asserted to differ). And the 27B rule: "gemma2_46_layers", a Gemma 2
checkpoint of 46 layers (written here, head_dim 32 != hidden_size / heads = 16; layers 2.. add
nothing to the stream) whose reference scales by 1/sqrt(16).

"bad": broken copies of the twins (gguf_file.py), each refused with one line naming the file:
a gemma2 attention softcap of 0, a gemma3 sliding_window_pattern with the wrong number of flags,
a gemma3 RoPE scaling type attnviz does not implement, phi3 LongRoPE files with one factor tensor,
without the original length, or with a factor of 0, a phi3 rotary dimension count that is odd, an
olmo2 sliding window. (The LongRoPE folders' twins carry rope_factors_long/short.weight and run.) (A count below the head size is a
partial rotary factor, which phi4_mini_partial's twin runs.)
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import decoder_families_reference as ref  # noqa: E402
import gguf_file as gg  # noqa: E402
import hf_to_gguf  # noqa: E402
from make_gguf_model_cases import vtype_of  # noqa: E402

BIG = {"gemma2": 46, "gemma3_text": 62}


def llama_cpp_scalar(cfg):
    """The query_pre_attn_scalar llama.cpp's rule amounts to."""
    if cfg["num_hidden_layers"] == BIG[cfg["model_type"]]:
        return cfg["hidden_size"] // cfg["num_attention_heads"]
    return ref.head_dim(cfg)


def load_weights(folder):
    w = hf_to_gguf.Weights(folder)
    return {n: torch.from_numpy(np.asarray(w.get(n), dtype=np.float64)) for n in w.names()}


def copy_gguf(src, dst, meta=None, extra=(), drop_keys=()):
    """src with metadata values replaced or added ({key: Val}) or dropped, and tensors added
    ([(name, float32 numpy array)])."""
    r = gg.GGUFReader(src)
    w = gg.GGUFWriter(version=r.version, alignment=r.alignment)
    meta = meta or {}
    for k, v in r.metadata.items():
        if k in drop_keys:
            continue
        if k in meta:
            w.add(k, meta[k])
        else:
            vt, et = vtype_of(r.types[k])
            w.add(k, gg.Val(vt, v, et))
    for k, v in meta.items():
        if k not in r.metadata:
            w.add(k, v)
    for t in r.tensors:
        w.add_tensor_raw(t.name, bytes(t.raw), t.type_name, t.ne)
    for name, a in extra:
        w.add_tensor(name, a, "F32")
    w.write(dst)
    r.close()


def metadata_rule_cases(root, by_name):
    src = by_name["gemma3_pattern"]
    folder = os.path.join(root, "gemma3_pattern")
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    good = os.path.join(root, src["file"])
    key = "gemma3.attention.sliding_window_pattern"
    r = gg.GGUFReader(good)
    assert key in r.metadata
    r.close()
    # Without the key: llama.cpp's period 6.
    rule6 = os.path.join(root, "gemma3_rule6.gguf")
    copy_gguf(good, rule6, drop_keys=(key,))
    att, z = ref.forward(dict(cfg, sliding_window_pattern=6), load_weights(folder), src["ids"])
    assert float(np.abs(att.numpy() - np.load(os.path.join(root, src["weights"]))).max()) > 1e-3
    np.save(os.path.join(root, "gemma3_rule6_weights.npy"), att.numpy().astype(np.float32))
    np.save(os.path.join(root, "gemma3_rule6_logits.npy"), z.numpy().astype(np.float32))
    copy_gguf(good, os.path.join(root, "gemma3_period3.gguf"), meta={key: gg.U32(3)})
    copy_gguf(good, os.path.join(root, "gemma3_local_base.gguf"),
              meta={"gemma3.rope.freq_base_swa": gg.F32(20000.0)})
    att2, z2 = ref.forward(dict(cfg, rope_local_base_freq=20000.0), load_weights(folder),
                           src["ids"])
    assert float(np.abs(att2.numpy() - np.load(os.path.join(root, src["weights"]))).max()) > 1e-3
    np.save(os.path.join(root, "gemma3_local_base_weights.npy"), att2.numpy().astype(np.float32))
    np.save(os.path.join(root, "gemma3_local_base_logits.npy"), z2.numpy().astype(np.float32))
    return [dict(src, name="gemma3_rule6", file="gemma3_rule6.gguf", hf=None,
                 weights="gemma3_rule6_weights.npy", logits="gemma3_rule6_logits.npy"),
            dict(src, name="gemma3_period3", file="gemma3_period3.gguf", hf="gemma3_pattern"),
            dict(src, name="gemma3_local_base", file="gemma3_local_base.gguf", hf=None,
                 weights="gemma3_local_base_weights.npy", logits="gemma3_local_base_logits.npy"),
            big_gemma2_case(root)]


def big_gemma2_case(root):
    """46 layers: llama.cpp's 27B rule, scores x 1/sqrt(hidden_size / heads)."""
    name = "gemma2_46_layers"
    vocab, merges = ref.spm_tokenizer()
    cfg = ref.config("gemma2", 64, 46, 4, 2, len(vocab), True, inter=64, head_dim=32,
                     query_pre_attn_scalar=32, sliding_window=5, attn_logit_softcapping=20.0,
                     final_logit_softcapping=10.0)
    gen = torch.Generator().manual_seed(43)
    w = ref.random_weights(cfg, gen)
    w = {k: v.to(torch.float32).to(torch.float64) for k, v in w.items()}
    # Past layer 1 the layers add nothing to the stream (their o_proj and down_proj are zero), so
    # that float32 rounding does not pile up over 46 layers; each layer's weights still show the
    # scale.
    for l in range(2, 46):
        for t in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            w["model.layers.%d.%s" % (l, t)].zero_()
    ids = [1] + torch.randint(3, len(vocab), (15,), generator=gen).tolist()
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    ref.write_safetensors(os.path.join(folder, "model.safetensors"),
                          [(n, t, "F32") for n, t in w.items()])
    ref.write_spm_tokenizer(folder, vocab, merges)
    hf_to_gguf.convert(folder, os.path.join(root, name + ".gguf"), "F32", quiet=True)
    assert llama_cpp_scalar(cfg) == 16
    att, z = ref.forward(dict(cfg, query_pre_attn_scalar=16), w, ids)
    hf_att, _ = ref.forward(cfg, w, ids)
    assert float((att - hf_att).abs().max()) > 1e-3
    np.save(os.path.join(root, name + "_weights.npy"), att.numpy().astype(np.float32))
    np.save(os.path.join(root, name + "_logits.npy"), z.numpy().astype(np.float32))
    return {"name": name, "family": "gemma2", "file": name + ".gguf", "hf": name, "ids": ids,
            "weights": name + "_weights.npy", "logits": name + "_logits.npy", "scale_rule": True}


def bad_files(root):
    out = []

    def case(name, src, expect, **kw):
        path = os.path.join(root, "bad_" + name + ".gguf")
        copy_gguf(os.path.join(root, src + ".gguf"), path, **kw)
        out.append({"name": name, "file": "bad_" + name + ".gguf", "expect": expect})

    case("gemma2_softcap_zero", "gemma2_window",
         "gemma2.attn_logit_softcapping = 0 must be a finite number > 0",
         meta={"gemma2.attn_logit_softcapping": gg.F32(0.0)})
    case("gemma3_pattern_length", "gemma3_pattern",
         "gemma3.attention.sliding_window_pattern must hold one flag for each of the 4 layers",
         meta={"gemma3.attention.sliding_window_pattern": gg.ARR(gg.BOOLT, [True, False])})
    case("gemma3_rope_yarn", "gemma3_pattern", "gemma3.rope.scaling.type \"yarn\"",
         meta={"gemma3.rope.scaling.type": gg.STR("yarn")})
    case("phi3_longrope_one_tensor", "phi3_fused", "LongRoPE needs both tensors",
         extra=[("rope_factors_long.weight", np.ones(8, dtype=np.float32))])
    case("phi3_longrope_no_length", "phi3_longrope", "rope.scaling.original_context_length",
         drop_keys=("phi3.rope.scaling.original_context_length",))
    case("phi3_longrope_zero_factor", "phi3_fused", "'rope_factors_short.weight' holds a factor",
         meta={"phi3.rope.scaling.original_context_length": gg.U32(12)},
         extra=[("rope_factors_long.weight", np.ones(8, dtype=np.float32)),
                ("rope_factors_short.weight", np.zeros(8, dtype=np.float32))])
    case("phi3_odd_rotary", "phi3_fused", "phi3.rope.dimension_count 9 does not fit",
         meta={"phi3.rope.dimension_count": gg.U32(9)})
    case("olmo2_window", "olmo2_gqa", "olmo2.attention.sliding_window 4",
         meta={"olmo2.attention.sliding_window": gg.U32(4)})
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: decoder_families_gguf.py OUT_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    torch.set_num_threads(1)
    with open(os.path.join(root, "cases.json")) as f:
        hf_cases = json.load(f)["cases"]
    cases = []
    for c in hf_cases:
        if not c.get("gguf", True):  # a folder layout only (gemma3's image-text checkpoints)
            continue
        name = c["name"]
        folder = os.path.join(root, c["dir"])
        hf_to_gguf.convert(folder, os.path.join(root, name + ".gguf"), "F32", quiet=True)
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        weights, logits, rule = c["weights"], c["logits"], False
        if cfg["model_type"] in BIG and cfg["query_pre_attn_scalar"] != llama_cpp_scalar(cfg):
            rule = True
            w = load_weights(folder)
            att, z = ref.forward(dict(cfg, query_pre_attn_scalar=llama_cpp_scalar(cfg)), w,
                                 c["ids"])
            hf_att = np.load(os.path.join(root, c["weights"]))
            assert float(np.abs(att.numpy() - hf_att).max()) > 1e-3, name
            weights, logits = name + "/weights_gguf.npy", name + "/logits_gguf.npy"
            np.save(os.path.join(root, weights), att.numpy().astype(np.float32))
            np.save(os.path.join(root, logits), z.numpy().astype(np.float32))
        cases.append({"name": name, "family": c["family"], "file": name + ".gguf", "hf": c["dir"],
                      "ids": c["ids"], "weights": weights, "logits": logits, "scale_rule": rule})
    cases += metadata_rule_cases(root, {c["name"]: c for c in cases})
    with open(os.path.join(root, "gguf_cases.json"), "w") as f:
        json.dump({"cases": cases, "bad": bad_files(root)}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
