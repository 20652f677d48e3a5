#!/usr/bin/python3
"""The q and k row norms of one layer of a Hugging Face folder (qwen3, gemma3_text, olmo2) before
and after the family's q/k norm, from decoder_families_reference.py's float64 forward pass, for
the app test of the row inspector (tests/app). Usage:

    qk_norms_reference.py MODEL_DIR LAYER HEAD ROW ID,ID,...

prints one line: "q BEFORE AFTER k BEFORE AFTER kv KV_HEAD".
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
import hf_to_gguf  # noqa: E402


def main():
    folder, layer, head, row = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    ids = [int(t) for t in sys.argv[5].split(",")]
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    w = hf_to_gguf.Weights(folder)
    w = {n: torch.from_numpy(np.asarray(w.get(n), dtype=np.float64)) for n in w.names()}
    trace = []
    ref.forward(cfg, w, ids, trace)
    qb, kb, qa, ka = trace[layer]
    H = cfg["num_attention_heads"]
    g = head // (H // cfg["num_key_value_heads"])
    print("q %.9g %.9g k %.9g %.9g kv %d" % (qb[head, row], qa[head, row], kb[g, row], ka[g, row], g))
    return 0


if __name__ == "__main__":
    sys.exit(main())
