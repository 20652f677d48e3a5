#!/usr/bin/python3
"""Writes the torch reference for the shipped model into tests/model/fixtures/kjv_byte_2l/, for
the test that checks `attnviz model` against torch on it (tests/model/shipped_model_test.cpp):
  cases.json          the text, its ids (its UTF-8 bytes) and the ablated head ("layer:head",
                      the best induction head of the model card's head_scores.json)
  weights.npy         float32 [L, H, T, T], every layer's attention weights
  logits.npy          float32 [T, V]
  logits_ablate.npy   float32 [T, V] with that head's output zeroed before c_proj
The forward is tools/train/bytegpt.py, the code that trained the model, run in float64 so the
reference carries no float32 rounding of its own.

Usage: /usr/bin/python3 tools/train/make_model_fixture.py
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bytegpt  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MODEL = os.path.join(ROOT, "assets", "models", "kjv-byte-2l")
OUT = os.path.join(ROOT, "tests", "model", "fixtures", "kjv_byte_2l")
# held-out text (Revelation 22:21) with a repeat, so the induction path is exercised too
TEXT = "The grace of our Lord. The grace of our"


def main():
    torch.set_num_threads(1)
    model = bytegpt.load_checkpoint(MODEL).double()
    ids = bytegpt.text_ids(TEXT)
    with open(os.path.join(MODEL, "head_scores.json"), encoding="utf-8") as f:
        ablate = tuple(json.load(f)["best_induction_head"])
    os.makedirs(OUT, exist_ok=True)
    with torch.no_grad():
        keep = []
        z = model(torch.tensor([ids]), keep_weights=keep)
        za = model(torch.tensor([ids]), ablate=[ablate])
    A = torch.stack([a[0] for a in keep])
    np.save(os.path.join(OUT, "weights.npy"), A.numpy().astype(np.float32))
    np.save(os.path.join(OUT, "logits.npy"), z[0].numpy().astype(np.float32))
    np.save(os.path.join(OUT, "logits_ablate.npy"), za[0].numpy().astype(np.float32))
    bytegpt.write_json(os.path.join(OUT, "cases.json"),
                       {"text": TEXT, "ids": ids, "ablate": f"{ablate[0]}:{ablate[1]}"})
    print(f"wrote {OUT}: T={len(ids)}, weights {tuple(A.shape)}")


if __name__ == "__main__":
    main()
