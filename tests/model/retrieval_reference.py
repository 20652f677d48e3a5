#!/usr/bin/python3
"""The float64 reference for `attnviz retrieval` on a LLaMA-layout folder (llama_reference.py's
architecture). For each needle case (its prompt ids, the needle's span and the answer's ids, as
the command printed them), greedy decoding of |answer| tokens with a full re-run per step; at each
step every head's most attended key (argmax of the last row of its weights) and how far the best
key is ahead of the second (the margin, so a test can skip near-ties); a head retrieves answer
token w when some step generated w while its top key lay in the needle and held w (Wu et al.
2024). The score is hits / |distinct answer tokens|, averaged over the cases. Then the answer's
teacher-forced log-probability, mean over the cases, with the given heads masked (zeroed before
the output projection). Usage:

    retrieval_reference.py MODEL_DIR OUT.json CASES.json

CASES.json: {"cases": [{"ids": [...], "needle": [b, e], "answer": [...]}], "masks": [["L:H", ...]]}
OUT.json: {"score": [[...]] (L x H), "margin": [[...]] (the smallest top-1 - top-2 weight gap of
that head over the steps), "generated": [[...]], "logprob": [per mask set], "correct": [...]}
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


def trace(cfg, w, case, ablate=()):
    ids = list(case["ids"])
    L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    top, margin, gen = [], np.full((L, H), np.inf), []
    for _ in range(len(case["answer"])):
        att, logits = ref.forward(cfg, w, ids, ablate=ablate)
        last = att[:, :, -1, :]                         # [L, H, T]
        two = torch.topk(last, 2, dim=-1)
        top.append(two.indices[..., 0].numpy())
        margin = np.minimum(margin, (two.values[..., 0] - two.values[..., 1]).numpy())
        nxt = int(torch.argmax(logits[-1]))
        gen.append(nxt)
        ids.append(nxt)
    return gen, top, margin


def main():
    folder, out, cases_path = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    with open(cases_path) as f:
        spec = json.load(f)
    src = hf_to_gguf.Weights(folder)
    w = {n: torch.from_numpy(np.asarray(src.get(n), dtype=np.float64)) for n in src.names()}
    torch.set_num_threads(1)
    L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    score = np.zeros((L, H))
    margin = np.full((L, H), np.inf)
    generated = []
    for case in spec["cases"]:
        gen, top, m = trace(cfg, w, case)
        generated.append(gen)
        margin = np.minimum(margin, m)
        b, e = case["needle"]
        answer = set(case["answer"])
        ids = case["ids"]
        for l in range(L):
            for h in range(H):
                got = set()
                for s, tok in enumerate(gen):
                    j = int(top[s][l, h])
                    if tok in answer and b <= j < e and ids[j] == tok:
                        got.add(tok)
                score[l, h] += len(got) / len(answer) / len(spec["cases"])
    logprob, correct = [], []
    for mask in spec["masks"]:
        ablate = [tuple(int(x) for x in lh.split(":")) for lh in mask]
        lp, ok = 0.0, 0
        for case in spec["cases"]:
            ids = list(case["ids"]) + list(case["answer"][:-1])
            _, logits = ref.forward(cfg, w, ids, ablate=ablate)
            ls = torch.log_softmax(logits, dim=-1)
            T = len(case["ids"])
            lp += sum(float(ls[T - 1 + i, a]) for i, a in enumerate(case["answer"]))
            gen, _, _ = trace(cfg, w, case, ablate)
            ok += int(gen == list(case["answer"]))
        logprob.append(lp / len(spec["cases"]))
        correct.append(ok)
    with open(out, "w") as f:
        json.dump({"score": score.tolist(), "margin": margin.tolist(), "generated": generated,
                   "logprob": logprob, "correct": correct}, f)


if __name__ == "__main__":
    main()
