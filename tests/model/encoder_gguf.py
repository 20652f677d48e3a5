#!/usr/bin/python3
"""GGUF twins of encoder_reference.py's BERT folders: run after it has written OUT_DIR, this
converts them with tools/gguf/hf_to_gguf.py to llama.cpp's `bert` layout and says what each
file must compute:

    /usr/bin/python3 tests/model/encoder_gguf.py OUT_DIR

Files: bert_mlm (BertForMaskedLM, "bert." names: the head is dropped, as llama.cpp's converter
drops it) as F32, F16 and Q8_0; bert_base (BertModel: no prefix, TensorFlow's gamma / beta
LayerNorm names) as F32. Each file is read back with tools/gguf/gguf_file.py, every tensor
dequantized with quants.py (the values ggml's block layouts define), and encoder_reference.forward
runs in float64 on those values with the eps the metadata states: "weights" / "hidden" are that
reference for the single text and the pair (token types 0/1) of encoder_reference's cases. For
F32 it is asserted equal (to float32 rounding) to the checkpoint's own reference (the conversion
is faithful), so F16 and Q8_0 differ from F32 only by their rounding; "max_dweights_vs_hf" and
"max_dhidden_vs_hf" record how far (the largest absolute change of an attention weight, and of a
hidden value over the largest hidden value).

OUT_DIR/gguf_cases.json: {"files": [{"name", "file", "type", "hf": folder, "runs": [{"case",
"text", "text_pair"?, "ids", "types", "weights", "hidden", "hf_weights", "hf_hidden",
"max_dweights_vs_hf", "max_dhidden_vs_hf"}]}], "bad": [{"name", "file", "expect"}]}

"bad": broken copies of the F32 file, each refused with one line naming the file: a tensor
dropped, heads that do not divide the width, attention.causal true, a token_type_count that
disagrees with token_types, no layer_norm_epsilon.
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import encoder_reference as ref  # noqa: E402
import gguf_file as gg  # noqa: E402
import hf_to_gguf  # noqa: E402
import quants  # noqa: E402
from make_gguf_model_cases import rewrite  # noqa: E402

FILES = [("bert_mlm_f32", "bert_mlm", "F32"), ("bert_mlm_f16", "bert_mlm", "F16"),
         ("bert_mlm_q8_0", "bert_mlm", "Q8_0"), ("bert_base_f32", "bert_base", "F32")]


def tensors_of(path):
    """{name: float64 torch tensor in numpy's shape} and the metadata."""
    r = gg.GGUFReader(path)
    out = {}
    for t in r.tensors:
        a = quants.dequantize(bytes(t.raw), t.type_name, t.n_elements).reshape(t.shape)
        out[t.name] = torch.from_numpy(a.astype(np.float64))
    meta = dict(r.metadata)
    r.close()
    return out, meta


def params_of(t, layers):
    """encoder_reference's neutral names from llama.cpp's (the MLM head left at zero: unused)."""
    d = t["token_embd.weight"].shape[1]
    V = t["token_embd.weight"].shape[0]
    z = torch.zeros
    p = {"word": t["token_embd.weight"], "pos": t["position_embd.weight"],
         "types": t["token_types.weight"], "emb_ln_w": t["token_embd_norm.weight"],
         "emb_ln_b": t["token_embd_norm.bias"], "head_dense_w": z(d, d, dtype=torch.float64),
         "head_dense_b": z(d, dtype=torch.float64), "head_ln_w": z(d, dtype=torch.float64),
         "head_ln_b": z(d, dtype=torch.float64), "head_bias": z(V, dtype=torch.float64),
         "layers": []}
    for i in range(layers):
        b = "blk.%d." % i
        L = {}
        for key, name in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"), ("o", "attn_output"),
                          ("up", "ffn_up"), ("down", "ffn_down")):
            L[key + "_w"], L[key + "_b"] = t[b + name + ".weight"], t[b + name + ".bias"]
        L["ln1_w"], L["ln1_b"] = t[b + "attn_output_norm.weight"], t[b + "attn_output_norm.bias"]
        L["ln2_w"], L["ln2_b"] = t[b + "layer_output_norm.weight"], t[b + "layer_output_norm.bias"]
        p["layers"].append(L)
    return p


def main():
    if len(sys.argv) != 2:
        print("usage: encoder_gguf.py OUT_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    torch.set_num_threads(1)
    with open(os.path.join(root, "cases.json")) as f:
        hf_cases = {c["name"]: c for c in json.load(f)["cases"]}
    runs = [hf_cases["bert_single"], hf_cases["bert_pair"]]
    files = []
    for name, folder, qtype in FILES:
        path = os.path.join(root, name + ".gguf")
        hf_to_gguf.convert(os.path.join(root, folder), path, qtype, quiet=True)
        t, meta = tensors_of(path)
        assert not any(n.startswith("cls") or n == "output.weight" for n in t), name
        heads = meta["bert.attention.head_count"]
        eps = float(np.float32(meta["bert.attention.layer_norm_epsilon"]))
        p = params_of(t, meta["bert.block_count"])
        entry = {"name": name, "file": name + ".gguf", "type": qtype, "hf": folder, "runs": []}
        for c in runs:
            w, hidden, _ = ref.forward(p, c["ids"], c["types"], list(range(len(c["ids"]))), heads,
                                       eps)
            hf_w = np.load(os.path.join(root, c["name"] + "_weights.npy"))
            hf_h = np.load(os.path.join(root, c["name"] + "_hidden.npy"))
            dw = float(np.abs(w.numpy() - hf_w).max())
            dh = float(np.abs(hidden.numpy() - hf_h).max() / np.abs(hf_h).max())
            if qtype == "F32":
                assert dw < 1e-6 and dh < 1e-6, (name, dw, dh)  # a faithful conversion
            else:
                assert dw > 1e-7, (name, dw)  # the rounding is real
            stem = "%s_%s" % (name, c["name"])
            ref.save(os.path.join(root, stem + "_weights.npy"), w)
            ref.save(os.path.join(root, stem + "_hidden.npy"), hidden)
            run = {"case": c["name"], "ids": c["ids"], "types": c["types"], "text": c["text"],
                   "weights": stem + "_weights.npy", "hidden": stem + "_hidden.npy",
                   "hf_weights": c["name"] + "_weights.npy", "hf_hidden": c["name"] + "_hidden.npy",
                   "max_dweights_vs_hf": dw, "max_dhidden_vs_hf": dh}
            if "text_pair" in c:
                run["text_pair"] = c["text_pair"]
            entry["runs"].append(run)
        files.append(entry)

    good = os.path.join(root, "bert_mlm_f32.gguf")
    bad = []

    def case(name, expect, **kw):
        out = "bad_" + name + ".gguf"
        rewrite(good, os.path.join(root, out), **kw)
        bad.append({"name": name, "file": out, "expect": expect})

    case("missing_tensor", "missing tensor 'blk.1.ffn_down.bias'", drop=("blk.1.ffn_down.bias",))
    case("heads", "embedding_length is not divisible by the heads",
         meta={"bert.attention.head_count": gg.U32(5)})
    case("causal", "bert.attention.causal true", meta={"bert.attention.causal": gg.BOOL_(True)})
    case("token_type_count", "tokenizer.ggml.token_type_count 3",
         meta={"tokenizer.ggml.token_type_count": gg.U32(3)})
    # No layer_norm_epsilon: the key dropped (a copy without it).
    r = gg.GGUFReader(good)
    w = gg.GGUFWriter(version=r.version, alignment=r.alignment)
    from make_gguf_model_cases import vtype_of
    for k, v in r.metadata.items():
        if k != "bert.attention.layer_norm_epsilon":
            vt, et = vtype_of(r.types[k])
            w.add(k, gg.Val(vt, v, et))
    for t in r.tensors:
        w.add_tensor_raw(t.name, bytes(t.raw), t.type_name, t.ne)
    w.write(os.path.join(root, "bad_no_eps.gguf"))
    r.close()
    bad.append({"name": "no_eps", "file": "bad_no_eps.gguf",
                "expect": "missing metadata key bert.attention.layer_norm_epsilon"})

    with open(os.path.join(root, "gguf_cases.json"), "w") as f:
        json.dump({"files": files, "bad": bad}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
