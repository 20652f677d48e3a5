#!/usr/bin/python3
"""The Alignment panel's figures computed apart from attnviz's C++, for one clause.

    alignment_reference.py ATTNVIZ MODEL SOURCE TARGET

Runs `ATTNVIZ model --model MODEL --text SOURCE --target TARGET --cross-weights X.npy` and reads
X [L_dec, H, T_tgt, T_src] with numpy. The definition is tools/train/t5_card.py's: pieces grouped
into words with the model's SentencePiece (a piece starting with U+2581 starts a word; the
source's </s> belongs to none), a word pair's weight summed over its pieces, each target word
linked to its argmax source word; target piece k read on row k (shifted) or row k + 1
(unshifted); gold: target word i <-> source word n-1-i; AER = 1 - 2|A n G| / (|A| + |G|).
Prints one JSON object: the AER of every head both ways, the best heads, the argmax links
("S-T", sorted) of every head both ways and the word counts.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import sentencepiece as spm


def words_of(pieces):
    out, w = [], -1
    for p in pieces:
        if p == "</s>":
            out.append(None)
            continue
        if p.startswith("\u2581") or w < 0:
            w += 1
        out.append(w)
    return out


def main():
    attnviz, model, source, target = sys.argv[1:5]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model, "spiece.model"))
    src_ids, tgt_ids = sp.encode(source) + [1], sp.encode(target)
    sw = words_of([sp.id_to_piece(i) for i in src_ids[:-1]] + ["</s>"])
    tw = words_of([sp.id_to_piece(i) for i in tgt_ids])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.npy")
        subprocess.run([attnviz, "model", "--model", model, "--text", source, "--target", target,
                        "--cross-weights", path], check=True, capture_output=True)
        x = np.load(path).astype(np.float64)
    assert x.shape[2:] == (len(tgt_ids) + 1, len(src_ids)), x.shape
    n, m = max(w for w in sw if w is not None) + 1, max(tw) + 1
    gold = {(n - 1 - i, i) for i in range(m)}
    L, H = x.shape[:2]
    res = {"source_words": n, "target_words": m}
    for key, shift in (("shifted", True), ("unshifted", False)):
        agg = np.zeros((L, H, m, n))
        for k, t in enumerate(tw):
            row = k if shift else k + 1
            for j, s in enumerate(sw):
                if s is not None:
                    agg[:, :, t, s] += x[:, :, row, j]
        pred = agg.argmax(-1)  # [L, H, m]
        aer = np.zeros((L, H))
        links = []
        for l in range(L):
            links.append([])
            for h in range(H):
                a = {(int(pred[l, h, t]), t) for t in range(m)}
                aer[l, h] = 1 - 2 * len(a & gold) / (len(a) + len(gold))
                links[l].append(",".join("%d-%d" % p for p in sorted(a)))
        best = np.unravel_index(aer.argmin(), aer.shape)
        res["aer_" + key] = aer.tolist()
        res["best_" + key] = [int(best[0]), int(best[1])]
        res["links_" + key] = links
    res["gold"] = " ".join("%d-%d" % p for p in sorted(gold))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
