#!/usr/bin/python3
"""Measures kjv-t5-align through attnviz and writes its card (README.md and card.json).

    /usr/bin/python3 tools/train/t5_card.py --model assets/models/kjv-t5-align \
        --attnviz build/app/attnviz [-n 100]

For the first N held-out clauses (t5_align.data(), Hebrews to Revelation):
  - exact match: `attnviz generate --model M --text SOURCE -n 24 --print-ids` against the
    reference translation's ids (EOS last);
  - alignment error rate of every cross head: `attnviz model --model M --text SOURCE --target
    TARGET --cross-weights X.npy` gives [L_dec, H, T_tgt, T_src]. Pieces are grouped into words
    (a piece that starts with U+2581 starts a word; the source's EOS belongs to none), a word's
    weights are the sum over its pieces, and each target word links to the source word of largest
    weight. Decoder input row r holds decoder_start then the target's pieces, so target piece k
    is *produced* by row k ("shifted" reading) and *read* at row k+1 ("unshifted" reading).
    AER = 1 - 2|A n S| / (|A| + |S|) (Och & Ney 2003, sure links only), pooled over clauses;
    the gold links S are t5_align.gold: target word i <-> source word n-1-i.
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import sentencepiece as spm

import t5_align


def words_of(pieces):
    """-> word index of each piece (None for EOS)."""
    out, w = [], -1
    for p in pieces:
        if p == "</s>":
            out.append(None)
            continue
        if p.startswith("\u2581") or w < 0:
            w += 1
        out.append(w)
    return out


def link_counts(x, src_words, tgt_words, shift):
    """x [L, H, T_tgt, T_src] -> [L, H] count of target words whose argmax link is gold."""
    n = max(w for w in src_words if w is not None) + 1
    m = max(tgt_words) + 1
    L, H = x.shape[:2]
    agg = np.zeros((L, H, m, n))
    for k, tw in enumerate(tgt_words):
        row = k if shift else k + 1
        for j, sw in enumerate(src_words):
            if sw is not None:
                agg[:, :, tw, sw] += x[:, :, row, j]
    pred = agg.argmax(-1)  # [L, H, m]
    gold = np.array([n - 1 - i for i in range(m)])
    return (pred == gold).sum(-1), m


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def measure(model, attnviz, n):
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model, "spiece.model"))
    _, held = t5_align.data()
    clauses = held[:n]
    res = {"clauses": clauses, "exact": [], "shifted": None, "unshifted": None, "links": 0}
    tmp = tempfile.mkdtemp(prefix="t5card-")
    for s in clauses:
        t = t5_align.translate(s)
        src_ids, tgt_ids = sp.encode(s) + [1], sp.encode(t) + [1]
        got = [int(v) for v in run([attnviz, "generate", "--model", model, "--text", s, "-n",
                                    "24", "--print-ids"]).split()]
        res["exact"].append(got == tgt_ids)
        path = os.path.join(tmp, "x.npy")
        run([attnviz, "model", "--model", model, "--text", s, "--target", t,
             "--cross-weights", path])
        x = np.load(path).astype(np.float64)
        assert x.shape[2:] == (len(tgt_ids), len(src_ids)), (s, x.shape)
        sw = words_of([sp.id_to_piece(i) for i in src_ids[:-1]] + ["</s>"])
        tw = words_of([sp.id_to_piece(i) for i in tgt_ids[:-1]])
        assert max(tw) == max(w for w in sw if w is not None)
        for key, shift in (("shifted", True), ("unshifted", False)):
            c, m = link_counts(x, sw, tw, shift)
            res[key] = c if res[key] is None else res[key] + c
        res["links"] += m
    for key in ("shifted", "unshifted"):
        res[key] = (1 - res[key] / res["links"]).round(4).tolist()  # AER, |A| = |S| = links
    res["exact_match"] = sum(res["exact"]) / len(clauses)
    return res


def table(aer):
    H = len(aer[0])
    lines = ["| layer | " + " | ".join("head %d" % h for h in range(H)) + " |",
             "|---|" + "---|" * H]
    for l, row in enumerate(aer):
        lines.append("| %d | " % l + " | ".join("%.3f" % v for v in row) + " |")
    return "\n".join(lines)


def best(aer):
    a = np.array(aer)
    l, h = np.unravel_index(a.argmin(), a.shape)
    return int(l), int(h), float(a[l, h])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--attnviz", default="build/app/attnviz")
    ap.add_argument("-n", type=int, default=100)
    a = ap.parse_args()
    r = measure(a.model, a.attnviz, a.n)
    bs, bu = best(r["shifted"]), best(r["unshifted"])
    card = {"n": a.n, "exact_match": r["exact_match"], "links": r["links"],
            "aer_shifted": r["shifted"], "aer_unshifted": r["unshifted"],
            "best_shifted": {"layer": bs[0], "head": bs[1], "aer": bs[2]},
            "best_unshifted": {"layer": bu[0], "head": bu[1], "aer": bu[2]},
            "clauses": r["clauses"], "targets": [t5_align.translate(c) for c in r["clauses"]],
            "exact": r["exact"]}
    with open(os.path.join(a.model, "card.json"), "w") as f:
        json.dump(card, f, indent=1)
    print(json.dumps({k: v for k, v in card.items()
                      if k not in ("clauses", "targets", "exact")}, indent=1))


if __name__ == "__main__":
    main()
