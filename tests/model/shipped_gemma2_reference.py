#!/usr/bin/python3
"""The float64 torch reference for the shipped Gemma-2-layout model (assets/models/kjv-sp-gemma2),
run by shipped_gemma2_test.cpp at test time:

    /usr/bin/python3 tests/model/shipped_gemma2_reference.py OUT_DIR

It reads the shipped config.json and model.safetensors (F32, widened to float64), tokenizes a
fixed text with the shipped tokenizer.model (BOS first, as attnviz does), and runs
decoder_families_reference.py's forward pass (written from the published Gemma 2 architecture,
not from attnviz's code). OUT_DIR gets ids.json ({"ids": [...]}) and the expected float32
attention weights [L, H, T, T] (weights.npy) and logits [T, V] (logits.npy). About two seconds
on one core.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from decoder_families_reference import forward  # noqa: E402

MODEL = os.path.join(HERE, "..", "..", "assets", "models", "kjv-sp-gemma2")
# A held-out verse (Hebrews 11:1) twice, then a third, shorter run-on: longer than the
# 16-token window, with a copy the global layers can reach and the local ones cannot.
TEXT = ("Now faith is the substance of things hoped for, the evidence of things not seen. Now "
        "faith is the substance of things hoped for, the evidence of things not seen. And the "
        "evidence is faith.")


def read_safetensors(path):
    """-> {name: float64 tensor} (F32 only, as shipped)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float64))
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: shipped_gemma2_reference.py OUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(MODEL, "tokenizer.model"))
    ids = [1] + sp.encode(TEXT)
    with open(os.path.join(MODEL, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    w = read_safetensors(os.path.join(MODEL, "model.safetensors"))
    att, logits = forward(cfg, w, ids)
    np.save(os.path.join(out, "weights.npy"), att.numpy().astype(np.float32))
    np.save(os.path.join(out, "logits.npy"), logits.numpy().astype(np.float32))
    with open(os.path.join(out, "ids.json"), "w", encoding="utf-8") as f:
        json.dump({"text": TEXT, "ids": ids}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
