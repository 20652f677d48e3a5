#!/usr/bin/python3
"""Writes the torch reference for the shipped model into tests/fixtures/kjv_byte_2l/, for the
test that checks `attnviz model` against torch on it:
  ids.txt             the token ids of the input text (its UTF-8 bytes), comma-separated
  weights.npy         float32 [L, H, T, T], every layer's attention weights
  logits.npy          float32 [T, V]
  logits_ablate.npy   float32 [T, V] with head ABLATE (layer:head) zeroed
The forward is tools/train/bytegpt.py, the code that trained the model, in float64 so the
reference carries no float32 rounding of its own.

Usage: /usr/bin/python3 tools/train/make_model_fixture.py
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bytegpt  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MODEL = os.path.join(ROOT, "assets", "models", "kjv-byte-2l")
OUT = os.path.join(ROOT, "tests", "fixtures", "kjv_byte_2l")
# held-out text (Revelation 22:21) with a repeat, so the induction path is exercised too
TEXT = "The grace of our Lord. The grace of our"
ABLATE = (1, 0)


def main():
    torch.set_num_threads(1)
    model = bytegpt.load_checkpoint(MODEL).double()
    ids = bytegpt.text_ids(TEXT)
    os.makedirs(OUT, exist_ok=True)
    with torch.no_grad():
        keep = []
        z = model(torch.tensor([ids]), keep_weights=keep)
        za = model(torch.tensor([ids]), ablate=[ABLATE])
    A = torch.stack([a[0] for a in keep])
    np.save(os.path.join(OUT, "weights.npy"), A.numpy().astype(np.float32))
    np.save(os.path.join(OUT, "logits.npy"), z[0].numpy().astype(np.float32))
    np.save(os.path.join(OUT, "logits_ablate.npy"), za[0].numpy().astype(np.float32))
    with open(os.path.join(OUT, "ids.txt"), "w", encoding="utf-8") as f:
        f.write(",".join(str(i) for i in ids) + "\n")
    with open(os.path.join(OUT, "ablate.txt"), "w", encoding="utf-8") as f:
        f.write(f"{ABLATE[0]}:{ABLATE[1]}\n")
    print(f"wrote {OUT}: T={len(ids)}, weights {tuple(A.shape)}")


if __name__ == "__main__":
    main()
