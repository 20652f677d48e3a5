#!/usr/bin/python3
"""GGUF twins of seq2seq_reference.py's T5 folders: run after it has written OUT_DIR, this
converts t5_v10 (ReLU, tied head) and t5_v11 (gated GELU, untied, a deeper decoder) with
tools/gguf/hf_to_gguf.py (F32) to llama.cpp's `t5` layout and says what each file must compute:

    /usr/bin/python3 tests/model/seq2seq_gguf.py OUT_DIR

A GGUF has no relative_attention_max_distance: llama.cpp's buckets reach 128. The folders were
made with 20, so each file's reference is seq2seq_reference.t5_forward on the values the file
holds (read back with tools/gguf/gguf_file.py and quants.py) with max_distance 128, asserted to
differ from the folder's own (the twin checks the rule, not a no-op); and "<name>_md128" is a copy
of the folder with relative_attention_max_distance 128 in config.json, which must compute what
the file computes. "greedy" is that reference's step-by-step argmax from the start id (the pad
id banned, as generation bans it), up to 6 steps or EOS.

OUT_DIR/gguf_cases.json: {"cases": [{"name", "file", "hf", "md128", "source", "target",
"source_text", "target_text", "enc", "dec", "cross", "logits", "greedy"}], "bad": [{"name",
"file", "expect"}]}
"""
import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import gguf_file as gg  # noqa: E402
import hf_to_gguf  # noqa: E402
import quants  # noqa: E402
import seq2seq_reference as ref  # noqa: E402
from make_gguf_model_cases import rewrite  # noqa: E402


def params_of(path, cfg):
    """seq2seq_reference's neutral T5 names from llama.cpp's, in float64."""
    r = gg.GGUFReader(path)
    t = {}
    for x in r.tensors:
        a = quants.dequantize(bytes(x.raw), x.type_name, x.n_elements).reshape(x.shape)
        t[x.name] = torch.from_numpy(a.astype(np.float64))
    r.close()
    p = {"shared": t["token_embd.weight"], "enc.final": t["enc.output_norm.weight"],
         "dec.final": t["dec.output_norm.weight"], "enc.rel": t["enc.blk.0.attn_rel_b.weight"],
         "dec.rel": t["dec.blk.0.attn_rel_b.weight"]}
    if "output.weight" in t:
        p["lm_head"] = t["output.weight"]
    gated = "enc.blk.0.ffn_gate.weight" in t
    for stack, n in (("enc", cfg["num_layers"]), ("dec", cfg["num_decoder_layers"])):
        for l in range(n):
            b, pre = "%s.blk.%d." % (stack, l), "%s.%d." % (stack, l)
            sites = [("self.", "attn_")] + ([("cross.", "cross_attn_")] if stack == "dec" else [])
            for site, g in sites:
                p[pre + site + "ln"] = t[b + g + "norm.weight"]
                for m in "qkvo":
                    p[pre + site + m] = t[b + g + m + ".weight"]
            p[pre + "ff.ln"] = t[b + "ffn_norm.weight"]
            if gated:
                p[pre + "ff.wi_0"], p[pre + "ff.wi_1"] = t[b + "ffn_gate.weight"], t[b + "ffn_up.weight"]
            else:
                p[pre + "ff.wi"] = t[b + "ffn_up.weight"]
            p[pre + "ff.wo"] = t[b + "ffn_down.weight"]
    return p


def main():
    if len(sys.argv) != 2:
        print("usage: seq2seq_gguf.py OUT_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    torch.set_num_threads(1)
    with open(os.path.join(root, "cases.json")) as f:
        listed = json.load(f)
    hf_cases = {c["name"]: c for c in (listed["cases"] if isinstance(listed, dict) else listed)}
    cases = []
    for name in ("t5_v10", "t5_v11"):
        c = hf_cases[name]
        folder = os.path.join(root, name)
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        path = os.path.join(root, name + ".gguf")
        hf_to_gguf.convert(folder, path, "F32", quiet=True)
        cfg128 = dict(cfg, relative_attention_max_distance=128)
        md128 = name + "_md128"
        shutil.copytree(folder, os.path.join(root, md128))
        with open(os.path.join(root, md128, "config.json"), "w") as f:
            json.dump(cfg128, f, indent=1)
        p = params_of(path, cfg128)
        enc, dec, cross, logits, _ = ref.t5_forward(p, cfg128, c["source"], c["target"])
        hf_enc = np.load(os.path.join(root, name + "_enc.npy"))
        assert float(np.abs(enc.numpy() - hf_enc).max()) > 1e-3, name  # the rule matters here
        out = {}
        for what, t in (("enc", enc), ("dec", dec), ("cross", cross), ("logits", logits)):
            out[what] = "%s_gguf_%s.npy" % (name, what)
            ref.save(os.path.join(root, out[what]), t)
        g = [0]
        for _ in range(6):
            z = ref.t5_forward(p, cfg128, c["source"], g)[3][-1].clone()
            z[0] = float("-inf")
            order = torch.argsort(z, descending=True)
            assert float(z[order[0]] - z[order[1]]) > 1e-4, "greedy step too close to call"
            g.append(int(order[0]))
            if g[-1] == 1:
                break
        cases.append(dict(out, name=name, file=name + ".gguf", hf=name, md128=md128,
                          source=c["source"], target=c["target"], source_text=c["source_text"],
                          target_text=c["target_text"], greedy=g))

    good = os.path.join(root, "t5_v11.gguf")
    bad = []

    def case(name, expect, **kw):
        out = "bad_" + name + ".gguf"
        rewrite(good, os.path.join(root, out), **kw)
        bad.append({"name": name, "file": out, "expect": expect})

    case("missing_cross", "missing tensor 'dec.blk.1.cross_attn_k.weight'",
         drop=("dec.blk.1.cross_attn_k.weight",))
    case("missing_rel_b", "missing tensor 'enc.blk.0.attn_rel_b.weight'",
         drop=("enc.blk.0.attn_rel_b.weight",))
    case("buckets", "t5.attention.relative_buckets_count must be at least 4",
         meta={"t5.attention.relative_buckets_count": gg.U32(2)})
    # 256 buckets: 128 exact causal ones, none left below llama.cpp's max distance 128.
    case("buckets_256", "relative_buckets_count 256 leaves no log-spaced buckets",
         meta={"t5.attention.relative_buckets_count": gg.U32(256)})
    case("value_length", "t5.attention.value_length 6 differs from the key length 8",
         meta={"t5.attention.value_length": gg.U32(6)})
    # The start id outside the vocabulary (config.json's rule: refused, not decoded from 0).
    case("start_id", "t5.decoder_start_token_id 5000 is not a token id",
         meta={"t5.decoder_start_token_id": gg.U32(5000)})
    with open(os.path.join(root, "gguf_cases.json"), "w") as f:
        json.dump({"cases": cases, "bad": bad}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
