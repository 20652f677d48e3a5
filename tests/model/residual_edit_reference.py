#!/usr/bin/python3
"""Logits [T, V] of a LLaMA-layout folder with residual-stream edits (llama_reference.py's
forward, float64), for `attnviz model --residual-edit` (tests/model/residual_edit_test.cpp).

    residual_edit_reference.py MODEL_DIR OUT.npy ID,ID,... L:P:D:zero|mean ...
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import llama_reference as ref  # noqa: E402
import hf_to_gguf  # noqa: E402


def main():
    folder, out = sys.argv[1], sys.argv[2]
    ids = [int(t) for t in sys.argv[3].split(",")]
    edits = []
    for a in sys.argv[4:]:
        l, p, d, mode = a.split(":")
        edits.append((int(l), -1 if p == "all" else int(p), int(d), mode))
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    src = hf_to_gguf.Weights(folder)
    w = {n: torch.from_numpy(np.asarray(src.get(n), dtype=np.float64)) for n in src.names()}
    torch.set_num_threads(1)
    _, logits = ref.forward(cfg, w, ids, residual_edits=edits)
    np.save(out, logits.numpy().astype(np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
