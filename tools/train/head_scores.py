#!/usr/bin/python3
"""Head scores of a byte-level GPT-2 checkpoint, from attention weights [L, H, T, T] and logits
[T, V] that either `attnviz model` writes (--attnviz BIN) or this folder's torch forward gives.

Scores (A is one head's weights, row t = query t, column j = key j):
  previous-token  mean over t >= 1 of A[t, t-1], on held-out natural text
  induction       mean over t in [L, 2L-1] of A[t, t-L+1], on a random byte sequence of
                  length L repeated twice (the second copy attends to the token after the
                  current token's first occurrence)
  first-token     mean over t >= 1 of A[t, 0], on held-out natural text
  copy            the probability of the correct next token on the second copy, mean over
                  t in [L, 2L-2] of softmax(z_t)[x_{t+1}]; measured plain and with one head
                  ablated (its output zeroed before the output projection)

Usage: head_scores.py --model DIR [--attnviz PATH/TO/attnviz] [--json OUT.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

REPEAT_LEN = 100     # L: the random sequence is L bytes, seen twice (T = 200)
REPEAT_SEEDS = range(8)
TEXT_T = 256
TEXT_WINDOWS = 8


# ---- inputs ---------------------------------------------------------------------------------

def repeated_random(seed, length=REPEAT_LEN):
    """A uniformly random byte sequence of `length`, twice: list of 2*length ids."""
    rng = np.random.default_rng(1000 + seed)
    seq = rng.integers(0, 256, size=length).tolist()
    return seq + seq


def heldout_windows(n=TEXT_WINDOWS, T=TEXT_T):
    """n windows of T bytes, evenly spaced over the held-out split (Hebrews to Revelation)."""
    import kjv
    data = kjv.splits()[1].encode("utf-8")
    step = (len(data) - T) // (n - 1)
    return [list(data[i * step:i * step + T]) for i in range(n)]


# ---- scores from arrays ---------------------------------------------------------------------

def prev_token_score(A):
    """A [L, H, T, T] -> [L, H]"""
    T = A.shape[-1]
    t = np.arange(1, T)
    return A[:, :, t, t - 1].mean(axis=-1)


def first_token_score(A):
    T = A.shape[-1]
    return A[:, :, np.arange(1, T), 0].mean(axis=-1)


def induction_score(A, length):
    t = np.arange(length, 2 * length)
    return A[:, :, t, t - length + 1].mean(axis=-1)


def copy_prob(Z, ids, length):
    """Z [T, V] logits -> mean probability of the correct next token over the second copy."""
    Z = Z.astype(np.float64)
    P = np.exp(Z - Z.max(axis=-1, keepdims=True))
    P /= P.sum(axis=-1, keepdims=True)
    t = np.arange(length, 2 * length - 1)
    return float(P[t, np.asarray(ids)[t + 1]].mean())


# ---- backends -------------------------------------------------------------------------------

class TorchBackend:
    name = "torch (tools/train/bytegpt.py)"

    def __init__(self, model_dir):
        import torch
        import bytegpt
        torch.set_num_threads(1)
        self.torch = torch
        self.model = bytegpt.load_checkpoint(model_dir)
        self.cfg = self.model.cfg

    def run(self, ids, ablate=()):
        """-> (weights [L, H, T, T], logits [T, V]) as float32 numpy."""
        keep = []
        with self.torch.no_grad():
            z = self.model(self.torch.tensor([ids]), ablate=ablate, keep_weights=keep)
        A = self.torch.stack([a[0] for a in keep]).numpy()
        return A, z[0].numpy()


class AttnvizBackend:
    """Runs `attnviz model --model DIR --ids ... --weights A.npy --logits Z.npy [--ablate L:H]`."""

    def __init__(self, model_dir, binary):
        self.name = f"attnviz model ({binary})"
        self.model_dir = model_dir
        self.binary = binary
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.cfg = json.load(f)

    def run(self, ids, ablate=()):
        with tempfile.TemporaryDirectory() as tmp:
            wa, za = os.path.join(tmp, "A.npy"), os.path.join(tmp, "Z.npy")
            cmd = [self.binary, "model", "--model", self.model_dir,
                   "--ids", ",".join(str(i) for i in ids), "--weights", wa, "--logits", za]
            for (l, h) in ablate:
                cmd += ["--ablate", f"{l}:{h}"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            return np.load(wa), np.load(za)


# ---- measurement ----------------------------------------------------------------------------

def measure(backend):
    """-> dict of per-head score tables ([L][H] lists) and the ablation results."""
    cfg = backend.cfg
    n_layer, n_head = cfg["n_layer"], cfg["n_head"]
    prev = np.zeros((n_layer, n_head))
    first = np.zeros((n_layer, n_head))
    for ids in heldout_windows():
        A, _ = backend.run(ids)
        prev += prev_token_score(A) / TEXT_WINDOWS
        first += first_token_score(A) / TEXT_WINDOWS

    seqs = [repeated_random(s) for s in REPEAT_SEEDS]
    ind = np.zeros((n_layer, n_head))
    base = []
    for ids in seqs:
        A, Z = backend.run(ids)
        ind += induction_score(A, REPEAT_LEN) / len(seqs)
        base.append(copy_prob(Z, ids, REPEAT_LEN))

    # the best induction head in layer >= 1 (layer 0 cannot compose with an earlier head)
    later = ind[1:]
    bl, bh = np.unravel_index(np.argmax(later), later.shape)
    best = (int(bl) + 1, int(bh))
    ablated = {}
    for l in range(n_layer):
        for h in range(n_head):
            ablated[f"{l}:{h}"] = float(np.mean(
                [copy_prob(backend.run(ids, ablate=[(l, h)])[1], ids, REPEAT_LEN)
                 for ids in seqs]))
    pl, ph = np.unravel_index(np.argmax(prev), prev.shape)
    fl, fh = np.unravel_index(np.argmax(first), first.shape)
    return {
        "backend": backend.name,
        "repeat_len": REPEAT_LEN,
        "repeat_seeds": list(REPEAT_SEEDS),
        "text_windows": TEXT_WINDOWS,
        "text_T": TEXT_T,
        "previous_token": prev.round(4).tolist(),
        "induction": ind.round(4).tolist(),
        "first_token": first.round(4).tolist(),
        "best_previous_token_head": [int(pl), int(ph)],
        "best_induction_head": list(best),
        "best_first_token_head": [int(fl), int(fh)],
        "copy_prob": float(np.mean(base)),
        "copy_prob_ablated": ablated,
    }


def table(scores, key):
    rows = scores[key]
    head = "| layer | " + " | ".join(f"head {h}" for h in range(len(rows[0]))) + " |"
    sep = "|---" * (len(rows[0]) + 1) + "|"
    body = [f"| {l} | " + " | ".join(f"{v:.3f}" for v in row) + " |" for l, row in enumerate(rows)]
    return "\n".join([head, sep] + body)


def ablation_table(scores):
    n_head = len(scores["induction"][0])
    n_layer = len(scores["induction"])
    abl = scores["copy_prob_ablated"]
    head = "| ablated head | " + " | ".join(f"head {h}" for h in range(n_head)) + " |"
    sep = "|---" * (n_head + 1) + "|"
    body = [f"| layer {l} | " + " | ".join(f"{abl[f'{l}:{h}']:.3f}" for h in range(n_head)) + " |"
            for l in range(n_layer)]
    return "\n".join([head, sep] + body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--attnviz", help="measure through this attnviz binary instead of torch")
    ap.add_argument("--json", help="also write the scores here")
    args = ap.parse_args()
    backend = (AttnvizBackend(args.model, args.attnviz) if args.attnviz
               else TorchBackend(args.model))
    s = measure(backend)
    print(f"backend: {s['backend']}")
    for key in ("previous_token", "induction", "first_token"):
        print(f"\n{key} score\n" + table(s, key))
    l, h = s["best_induction_head"]
    print(f"\ncopy probability on the second copy: {s['copy_prob']:.3f}; "
          f"with head {l}:{h} ablated: {s['copy_prob_ablated'][f'{l}:{h}']:.3f}")
    print("\ncopy probability with one head ablated\n" + ablation_table(s))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(s, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
