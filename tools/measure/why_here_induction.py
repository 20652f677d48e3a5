#!/usr/bin/env python3
"""Measures, through `attnviz qk`, what writes an induction head's key and query at its own cells.

For each text given twice, every query in the second copy is an induction cell: its key is the
token after the same position in the first copy. For each cell the script runs
`attnviz qk --top 1000` (every marginal), then prints per cell the largest key-side and
query-side components with their share of the score, and a summary: how often each component
is the largest on each side, the range of the shares, and the embedding's share.

  why_here_induction.py ATTNVIZ MODEL LAYER HEAD TEXT [TEXT ...] [--ablate L:H ...]

With --key J the texts are taken once and the cells are every query from --from I (default 1)
on against key J (a sink's cells: --key 0).
"""
import collections
import os
import subprocess
import sys
import tempfile

import numpy as np


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def main():
    args = sys.argv[1:]
    fixed_key, first = None, 1
    for opt in ("--key", "--from"):
        if opt in args:
            i = args.index(opt)
            if opt == "--key":
                fixed_key = int(args[i + 1])
            else:
                first = int(args[i + 1])
            del args[i:i + 2]
    ablate = []
    while "--ablate" in args:
        i = args.index("--ablate")
        ablate += ["--ablate", args[i + 1]]
        del args[i:i + 2]
    if len(args) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    exe, model, layer, head, texts = args[0], args[1], args[2], args[3], args[4:]
    top_k, top_q = collections.Counter(), collections.Counter()
    shares_k, shares_q, embed_q, embed_k, cells = [], [], [], [], 0
    k_parts, weights = collections.defaultdict(list), []
    tmp = tempfile.mkdtemp()
    for text in texts:
        doubled = text + " " + text if fixed_key is None else text
        pieces = run([exe, "tokenize", "--model", model, "--text", doubled, "--pieces"])
        P = pieces.rstrip("\n").split("\n")
        T = len(P)
        # The shift between the copies: the one under which the longest tail of the text
        # repeats the tokens that far before it (a separator token between copies allowed).
        def run_length(shift):
            n = 0
            while n < T - shift and P[T - 1 - n] == P[T - 1 - n - shift]:
                n += 1
            return n
        shift = max(range(1, T), key=lambda s: (min(run_length(s), s), -s))
        one = min(run_length(shift), shift)
        if fixed_key is not None:
            one, shift = T - first, None
        elif one < 2:
            sys.exit(f"'{text}': its second copy does not repeat the first's tokens")
        wfile = os.path.join(tmp, "w.npy")
        run([exe, "model", "--model", model, "--text", doubled, "--layer", layer,
             "--weights", wfile] + ablate)
        w = np.load(wfile)
        w = w[int(head)] if w.ndim == 3 else w[int(layer), int(head)]
        for i in range(T - one, T):
            j = i - shift + 1 if fixed_key is None else fixed_key
            weights.append(float(w[i, j]))
            out = run([exe, "qk", "--model", model, "--text", doubled, "--layer", layer,
                       "--head", head, "--query", str(i), "--key", str(j), "--top", "1000"]
                      + ablate)
            score, q, k = None, {}, {}
            for line in out.splitlines():
                f = line.split("\t")
                if f[0] == "score":
                    score = float(f[1])
                elif f[0] in ("q", "k"):
                    (q if f[0] == "q" else k)[f[1]] = float(f[2])
            for n, v in k.items():
                k_parts[n].append(v)
            kb = max(k, key=lambda n: k[n])
            qb = max(q, key=lambda n: q[n])
            top_k[kb] += 1
            top_q[qb] += 1
            shares_k.append(k[kb] / score)
            shares_q.append(q[qb] / score)
            embed_q.append(q.get("embed", 0.0) / score)
            embed_k.append(k.get("embed", 0.0) / score)
            cells += 1
            print(f"cell {i},{j}\tweight {w[i, j]:.3f}\tscore {score:.3f}\tk: {kb} {k[kb]:.3f} ({k[kb] / score:.0%})"
                  f"\tq: {qb} {q[qb]:.3f} ({q[qb] / score:.0%})")
    print(f"cells\t{cells}")
    print(f"mean weight on the cell\t{np.mean(weights):.3f}")
    means = sorted(((np.mean(v), n) for n, v in k_parts.items()), reverse=True)[:3]
    print("mean key-side parts\t" + ", ".join(f"{n} {m:.2f}" for m, n in means))
    print("largest key side\t" + ", ".join(f"{n} {c}" for n, c in top_k.most_common()))
    print(f"its share\t{min(shares_k):.0%}..{max(shares_k):.0%}")
    print("largest query side\t" + ", ".join(f"{n} {c}" for n, c in top_q.most_common()))
    print(f"its share\t{min(shares_q):.0%}..{max(shares_q):.0%}")
    print(f"embed share, query side\t{min(embed_q):.2%}..{max(embed_q):.2%}"
          f" (median {sorted(embed_q)[len(embed_q) // 2]:.2%})")
    print(f"embed share, key side\t{min(embed_k):.2%}..{max(embed_k):.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
