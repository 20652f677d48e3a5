#!/usr/bin/python3
"""Head scores of kjv-sp-llama (or any folder train_llama.py wrote), from attention weights
[L, H, T, T] and logits [T, V] that either `attnviz model` writes (--attnviz BIN) or the torch
forward of llama_lm.py gives. H counts query heads (GQA: a KV head serves H / H_kv of them).

Every probe starts with BOS (id 1), as the tokenizer gives it and as the model was trained. With
A one head's weights (row t = query t, column j = key j) and S a sequence of L ids:
  previous-token  mean over t >= 1 of A[t, t-1], on windows of held-out text (BOS + 255 tokens)
  first-token     mean over t >= 1 of A[t, 0] (the BOS sink), on the same windows
  induction       on BOS + S + S (S at positions 1..L, again at L+1..2L): mean over the second
                  copy t = L+1 .. 2L of A[t, t-L+1], the token after the current token's first
                  occurrence. "random": S uniform over the ids 3..V-1, L = 100, 8 seeds;
                  "english": S a held-out verse (Hebrews to Revelation, 20 to 60 tokens), 8 verses
  copy            mean over t = L+1 .. 2L-1 of softmax(z_t)[x_{t+1}] (the probability of the next
                  token of the second copy), plain, with one query head's output zeroed before
                  o_proj (attnviz --ablate L:H), and with every induction head (layer >= 1,
                  random-id induction score >= 0.5) zeroed together
The best induction head is the head of layer >= 1 with the highest mean of its random and
English induction scores.

Usage: llama_scores.py --model DIR [--attnviz PATH/TO/attnviz] [--json OUT.json]
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

BOS = 1
REPEAT_LEN = 100
REPEAT_SEEDS = range(8)
TEXT_T = 256
TEXT_WINDOWS = 8
ENGLISH_COUNT = 8
ENGLISH_LEN = (20, 60)


# ---- probes ---------------------------------------------------------------------------------

def repeated_random(seed, vocab_size, length=REPEAT_LEN):
    """BOS + S + S, S uniform over the ids 3..V-1 (no special tokens)."""
    rng = np.random.default_rng(1000 + seed)
    s = rng.integers(3, vocab_size, size=length).tolist()
    return [BOS] + s + s


def _sp(model_dir):
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))


def heldout_windows(model_dir, n=TEXT_WINDOWS, T=TEXT_T):
    """n windows of BOS + T-1 tokens, evenly spaced over the held-out verses, tokenized verse by
    verse and concatenated (the training text's layout)."""
    import kjv
    sp = _sp(model_dir)
    stream = [i for ids in sp.encode(kjv.splits()[1].splitlines()) for i in ids]
    step = (len(stream) - (T - 1)) // (n - 1)
    return [[BOS] + stream[i * step:i * step + T - 1] for i in range(n)]


def english_sentences(model_dir, n=ENGLISH_COUNT, lo=ENGLISH_LEN[0], hi=ENGLISH_LEN[1]):
    """-> [(text, ids without BOS)]: n held-out verses of lo..hi tokens, evenly spaced."""
    import kjv
    sp = _sp(model_dir)
    verses = kjv.splits()[1].splitlines()
    fit = [(v, sp.encode(v)) for v in verses]
    fit = [(v, ids) for v, ids in fit if lo <= len(ids) <= hi]
    step = len(fit) // n
    return [fit[i * step + step // 2] for i in range(n)]


# ---- scores from arrays ---------------------------------------------------------------------

def prev_token_score(A):
    t = np.arange(1, A.shape[-1])
    return A[:, :, t, t - 1].mean(axis=-1)


def first_token_score(A):
    return A[:, :, np.arange(1, A.shape[-1]), 0].mean(axis=-1)


def induction_score(A, L):
    """A of BOS + S + S, |S| = L -> [layers, heads]."""
    t = np.arange(L + 1, 2 * L + 1)
    return A[:, :, t, t - L + 1].mean(axis=-1)


def copy_prob(Z, ids, L):
    Z = Z.astype(np.float64)
    P = np.exp(Z - Z.max(axis=-1, keepdims=True))
    P /= P.sum(axis=-1, keepdims=True)
    t = np.arange(L + 1, 2 * L)
    return float(P[t, np.asarray(ids)[t + 1]].mean())


# ---- backends -------------------------------------------------------------------------------

class TorchBackend:
    name = "torch (tools/train/llama_lm.py)"

    def __init__(self, model_dir, model=None):
        import torch
        import llama_lm
        torch.set_num_threads(1)
        self.torch = torch
        self.model = model if model is not None else llama_lm.load(model_dir)
        self.cfg = self.model.cfg

    def run(self, ids, ablate=()):
        keep = []
        with self.torch.no_grad():
            z = self.model(self.torch.tensor([ids]), ablate=ablate, keep_weights=keep)
        return self.torch.stack([a[0] for a in keep]).numpy(), z[0].numpy()


class AttnvizBackend:
    """`attnviz model --model DIR --ids ... --weights A.npy --logits Z.npy [--ablate L:H]`."""

    def __init__(self, model_dir, binary):
        self.name = f"attnviz model ({binary})"
        self.model_dir, self.binary = model_dir, binary
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

def _argmax(m, from_layer=0):
    sub = np.asarray(m)[from_layer:]
    l, h = np.unravel_index(np.argmax(sub), sub.shape)
    return [int(l) + from_layer, int(h)]


def measure(backend, model_dir, full_ablation=True):
    cfg = backend.cfg
    nl, nh, V = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["vocab_size"]
    prev = np.zeros((nl, nh))
    first = np.zeros((nl, nh))
    windows = heldout_windows(model_dir)
    for ids in windows:
        A, _ = backend.run(ids)
        prev += prev_token_score(A) / len(windows)
        first += first_token_score(A) / len(windows)

    probes = {"random": [(repeated_random(s, V), REPEAT_LEN) for s in REPEAT_SEEDS],
              "english": [([BOS] + s + s, len(s)) for _, s in english_sentences(model_dir)]}
    ind, copy = {}, {}
    per_probe = {}
    for kind, seqs in probes.items():
        ind[kind] = np.zeros((nl, nh))
        cp = []
        per_probe[kind] = []
        for ids, L in seqs:
            A, Z = backend.run(ids)
            sc = induction_score(A, L)
            ind[kind] += sc / len(seqs)
            cp.append(copy_prob(Z, ids, L))
            per_probe[kind].append(sc)
        copy[kind] = float(np.mean(cp))
    # the best induction head: layer >= 1 (layer 0 has no earlier head to compose with), by the
    # mean of the two induction scores (on random ids several heads score within 0.001)
    best_ind = _argmax((ind["random"] + ind["english"]) / 2, from_layer=1)
    best_prev = _argmax(prev)
    # every head of layer >= 1 with a random-id induction score >= 0.5, ablated together
    group = [(l, h) for l in range(1, nl) for h in range(nh) if ind["random"][l, h] >= 0.5]
    heads = ([(l, h) for l in range(nl) for h in range(nh)] if full_ablation
             else [tuple(best_ind), tuple(best_prev)])
    ablated = {kind: {} for kind in probes}
    ablated_group = {}
    for kind, seqs in probes.items():
        for (l, h) in heads:
            ablated[kind][f"{l}:{h}"] = float(np.mean(
                [copy_prob(backend.run(ids, ablate=[(l, h)])[1], ids, L) for ids, L in seqs]))
        ablated_group[kind] = float(np.mean(
            [copy_prob(backend.run(ids, ablate=group)[1], ids, L) for ids, L in seqs]))
    bl, bh = best_ind
    rl, rh = _argmax(ind["random"], from_layer=1)
    el, eh = _argmax(ind["english"], from_layer=1)
    pl, ph = best_prev
    # one probe of each kind, spelled out, for checks by hand through the CLI
    ids0, L0 = probes["random"][0]
    A0, _ = backend.run(ids0)
    text0, s0 = english_sentences(model_dir)[0]
    ids1 = [BOS] + s0 + s0
    A1, _ = backend.run(ids1)
    t0 = np.arange(1, len(ids0))
    return {
        "backend": backend.name,
        "bos": BOS,
        "text_windows": len(windows), "text_T": TEXT_T,
        "repeat_len": REPEAT_LEN, "repeat_seeds": list(REPEAT_SEEDS),
        "english_sentences": [t for t, _ in english_sentences(model_dir)],
        "previous_token": prev.round(4).tolist(),
        "first_token": first.round(4).tolist(),
        "induction_random": ind["random"].round(4).tolist(),
        "induction_english": ind["english"].round(4).tolist(),
        "induction_english_per_sentence": [
            round(float(sc[bl, bh]), 4) for sc in per_probe["english"]],
        "best_previous_token_head": best_prev,
        "best_first_token_head": _argmax(first),
        "best_induction_head": best_ind,
        "best_induction_head_random": [rl, rh],
        "best_induction_head_english": [el, eh],
        "copy_prob": copy,
        "copy_prob_ablated": ablated,
        "induction_heads": [f"{l}:{h}" for l, h in group],
        "copy_prob_induction_heads_ablated": ablated_group,
        "copy_prob_drop_best_induction": {
            kind: copy[kind] - ablated[kind][f"{bl}:{bh}"] for kind in probes},
        "probe_random_seed0": {
            "ids": ids0, "repeat_len": L0,
            "induction": float(induction_score(A0, L0)[bl, bh]),
            "previous_token": float(A0[pl, ph, t0, t0 - 1].mean())},
        "probe_english0": {
            "text": text0, "tokenize": [BOS] + s0, "ids": ids1, "repeat_len": len(s0),
            "induction": float(induction_score(A1, len(s0))[bl, bh])},
    }


def table(rows, fmt="{:.3f}"):
    head = "| layer | " + " | ".join(f"head {h}" for h in range(len(rows[0]))) + " |"
    sep = "|---" * (len(rows[0]) + 1) + "|"
    body = [f"| {l} | " + " | ".join(fmt.format(v) for v in row) + " |"
            for l, row in enumerate(rows)]
    return "\n".join([head, sep] + body)


def ablation_rows(s, kind):
    nl, nh = len(s["previous_token"]), len(s["previous_token"][0])
    abl = s["copy_prob_ablated"][kind]
    return [[abl.get(f"{l}:{h}", float("nan")) for h in range(nh)] for l in range(nl)]


def summary(s):
    pl, ph = s["best_previous_token_head"]
    il, ih = s["best_induction_head"]
    return (f"previous-token {pl}:{ph} {s['previous_token'][pl][ph]:.3f}; induction {il}:{ih} "
            f"random {s['induction_random'][il][ih]:.3f} english "
            f"{s['induction_english'][il][ih]:.3f}; copy p random {s['copy_prob']['random']:.3f}"
            f" -> {s['copy_prob_ablated']['random'][f'{il}:{ih}']:.3f} ablated, english "
            f"{s['copy_prob']['english']:.3f} -> "
            f"{s['copy_prob_ablated']['english'][f'{il}:{ih}']:.3f}; induction heads "
            f"{' '.join(s['induction_heads'])} ablated together: random "
            f"{s['copy_prob_induction_heads_ablated']['random']:.3f}, english "
            f"{s['copy_prob_induction_heads_ablated']['english']:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--attnviz", help="measure through this attnviz binary instead of torch")
    ap.add_argument("--json", help="also write the scores here")
    args = ap.parse_args()
    backend = (AttnvizBackend(args.model, args.attnviz) if args.attnviz
               else TorchBackend(args.model))
    s = measure(backend, args.model)
    print(f"backend: {s['backend']}")
    for key in ("previous_token", "first_token", "induction_random", "induction_english"):
        print(f"\n{key}\n" + table(s[key]))
    for kind in ("random", "english"):
        print(f"\ncopy probability ({kind}) with one head ablated (plain "
              f"{s['copy_prob'][kind]:.3f})\n" + table(ablation_rows(s, kind)))
    print("\n" + summary(s))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(s, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
