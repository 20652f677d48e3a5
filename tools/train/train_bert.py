#!/usr/bin/python3
"""Trains kjv-wp-bert, the BERT-layout masked LM that ships in assets/models/kjv-wp-bert, on the
CPU, from the King James Bible of Debian's bible-kjv package. One command:

    /usr/bin/python3 tools/train/train_bert.py --out assets/models/kjv-wp-bert \\
        --attnviz build/app/attnviz

(apt-get install bible-kjv python3-torch first; the card's scores are measured through the
attnviz binary given). It writes, into --out:
  vocab.txt, tokenizer.json, tokenizer_config.json
                         a WordPiece vocabulary of 3000 pieces (lower case, "##"
                         continuations) learned from the training split (wp_tokenizer.py)
  config.json            HF BertConfig; model.safetensors (F32, HF BertForMaskedLM key names,
                         the decoder tied to the word embeddings)
  training_log.json      every batch loss, the evaluations (losses, top-1, and a probe of the
                         special tokens: each head's mean share of a real non-special row on
                         the [SEP] keys and on [CLS], the best head of each), the recipe, timings
  head_scores.json, README.md (the card; bert_card.py)

The data: pairs of verses of the training split (Genesis-Philemon; kjv.py's held-out tail is
never trained on), [CLS] A [SEP] B [SEP] with token types 0 for [CLS] A [SEP] and 1 for B [SEP],
B the verse after A half the time and a random verse otherwise (BERT's way of drawing pairs,
without its next-sentence loss). 15% of the non-special tokens are chosen for the masked-LM
loss, and of those 80% become [MASK], 10% a random piece, 10% stay.

Deterministic: the vocabulary is learned in a fixed order, the seed drives the init
(torch.manual_seed) and the batches (numpy PCG64); torch runs on one thread (the machine it was trained on is shared) with deterministic
algorithms, so a rerun on the same machine gives the same bytes.
"""
import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bert_lm  # noqa: E402
import kjv  # noqa: E402
import wp_tokenizer as wp  # noqa: E402

NAME = "kjv-wp-bert"

MODEL = {
    "vocab_size": wp.VOCAB_SIZE,
    "hidden_size": 128,
    "intermediate_size": 384,
    "n_layers": 4,
    "n_heads": 16,
    "max_positions": 96,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
}

RECIPE = {
    "seed": 5150,
    "batch": 64,
    "steps": 4000,
    "stop": 2000,  # if > 0, stop after this many steps (the schedule still runs to "steps")
    "lr": 2e-3,
    "warmup": 200,
    "min_lr_frac": 0.1,  # linear decay from lr to lr * this at the last step
    # strong decay and 16 heads: with 0.01 and 8 heads no head put more than 0.07 of a row on
    # [SEP] after 1500 steps; with these, layer 0 head 2 puts about 0.2 there (the card)
    "weight_decay": 0.5,
    "betas": [0.9, 0.98],
    "grad_clip": 1.0,
    "dropout": 0.0,
    "p_random_b": 0.5,
    "mask_rate": 0.15,
    "p_mask_token": 0.8,
    "p_random_token": 0.1,
    "eval_every": 100,
    "checkpoint_every": 250,  # with --checkpoints
    "eval_pairs": 256,
    "bucket": 8,  # pairs drawn for this many batches at once, sorted by length, then split
    "threads": 1,
}


# ---- data -----------------------------------------------------------------------------------

def pair_ids(a, b, max_len):
    """[CLS] a [SEP] b [SEP] and its token types, the longer side cut first (longest_first)."""
    a, b = list(a), list(b)
    while len(a) + len(b) + 3 > max_len:
        (a if len(a) >= len(b) else b).pop()
    ids = [wp.CLS] + a + [wp.SEP] + b + [wp.SEP]
    types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return ids, types


def draw_pairs(rng, verses, n, r, max_len):
    out = []
    for _ in range(n):
        i = int(rng.integers(0, len(verses) - 1))
        j = int(rng.integers(0, len(verses))) if rng.random() < r["p_random_b"] else i + 1
        out.append(pair_ids(verses[i], verses[j], max_len))
    return out


def mask(rng, pairs, r, V):
    """-> (ids, types, key_mask, targets) tensors; targets -100 where no loss is taken."""
    T = max(len(ids) for ids, _ in pairs)
    B = len(pairs)
    ids = np.full((B, T), wp.PAD, dtype=np.int64)
    types = np.zeros((B, T), dtype=np.int64)
    tgt = np.full((B, T), -100, dtype=np.int64)
    for b, (x, t) in enumerate(pairs):
        x = np.array(x)
        ids[b, :len(x)] = x
        types[b, :len(t)] = t
        cand = np.nonzero(x >= len(wp.SPECIALS))[0]
        k = max(1, int(round(r["mask_rate"] * len(cand))))
        chosen = np.sort(rng.choice(cand, size=k, replace=False))
        tgt[b, chosen] = x[chosen]
        u = rng.random(k)
        for p, uu in zip(chosen, u):
            if uu < r["p_mask_token"]:
                ids[b, p] = wp.MASK
            elif uu < r["p_mask_token"] + r["p_random_token"]:
                ids[b, p] = int(rng.integers(len(wp.SPECIALS), V))
    return (torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(ids != wp.PAD),
            torch.from_numpy(tgt))


def consecutive_pairs(verses, n, max_len):
    """n fixed pairs (verse i, verse i + 1), evenly spaced through the verses."""
    step = (len(verses) - 1) // n
    return [pair_ids(verses[k * step], verses[k * step + 1], max_len) for k in range(n)]


def mlm_loss(model, batch):
    ids, types, km, tgt = batch
    sel = tgt >= 0
    h = model.hidden(ids, types, km)[sel]
    z = model.logits(h)
    loss = F.cross_entropy(z, tgt[sel])
    acc = (z.argmax(-1) == tgt[sel]).float().mean()
    return loss, acc


def special_shares(model, batch):
    """The probe logged at every evaluation: for each layer and head, the mean over the real,
    non-special query rows ([MASK] counts as real) of the weight on the [SEP] keys and on the
    [CLS] key -> (sep [L, H], cls [L, H]) numpy arrays."""
    ids, types, km, _ = batch
    kept = []
    model.hidden(ids, types, km, kept)
    A = torch.stack(kept, 1)  # [B, L, H, T, T]
    rows = (km & (ids != wp.CLS) & (ids != wp.SEP)).float()  # [B, T]
    n = rows.sum()
    sep = (A * (ids == wp.SEP).float()[:, None, None, None, :]).sum(-1)  # [B, L, H, T]
    cls = A[..., 0]
    per = lambda x: ((x * rows[:, None, None, :]).sum((0, 3)) / n).numpy()
    return per(sep), per(cls)


def lr_at(step, r):
    if step < r["warmup"]:
        return r["lr"] * (step + 1) / r["warmup"]
    f = (step - r["warmup"]) / max(1, r["steps"] - r["warmup"])
    return r["lr"] * (1 - f * (1 - r["min_lr_frac"]))


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine(r):
    return {"cpu": cpu_name(), "torch": torch.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "threads": r["threads"], "loadavg": os.getloadavg()}


def train(model, r, verses, evals, V, max_len, checkpoints=None, complete=None):
    """complete(dir, log): writes what a checkpoint folder needs besides the weights and the
    log (the tokenizer, the log's data fields)."""
    rng = np.random.Generator(np.random.PCG64(r["seed"]))
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "pos" not in n
             and "types" not in n]
    keep = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "pos" not in n
                                                           and "types" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": r["weight_decay"]},
                             {"params": keep, "weight_decay": 0.0}],
                            lr=r["lr"], betas=tuple(r["betas"]))
    log = {"recipe": r, "batch_loss": [], "evals": []}
    t0, c0 = time.time(), time.process_time()

    def evaluate(step):
        if log["evals"] and log["evals"][-1]["step"] == step:
            return
        model.eval()
        e = {"step": step}
        with torch.no_grad():
            for name, batch in evals.items():
                loss, acc = mlm_loss(model, batch)
                e[name + "_loss"], e[name + "_top1"] = float(loss), float(acc)
            sep, cls = special_shares(model, evals["heldout"])
        for name, t in (("sep", sep), ("cls", cls)):
            l, h = np.unravel_index(np.argmax(t), t.shape)
            e["heldout_best_" + name] = [int(l), int(h), round(float(t[l, h]), 4)]
        e["heldout_sep_heads_0.3"] = int((sep >= 0.3).sum())
        e["elapsed_s"], e["cpu_s"] = time.time() - t0, time.process_time() - c0
        log["evals"].append(e)
        print(json.dumps(e), flush=True)
        model.train()

    model.train()
    queue = []
    last = r["stop"] or r["steps"]
    for step in range(last):
        if step % r["eval_every"] == 0:
            evaluate(step)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, r)
        if not queue:
            # pairs for r["bucket"] batches, sorted by length (a stable sort) and cut into
            # batches taken in a random order: little padding, same draws on every run
            pool = draw_pairs(rng, verses, r["batch"] * r["bucket"], r, max_len)
            pool.sort(key=lambda p: len(p[0]))
            chunks = [pool[k * r["batch"]:(k + 1) * r["batch"]] for k in range(r["bucket"])]
            queue = [chunks[k] for k in rng.permutation(r["bucket"])]
        batch = mask(rng, queue.pop(0), r, V)
        loss, _ = mlm_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
        log["batch_loss"].append(round(float(loss), 5))
        if checkpoints and step % r["checkpoint_every"] == r["checkpoint_every"] - 1:
            # each checkpoint in a folder of its own, with the log up to it (the recipe's
            # "stop" set to its step: what a run stopping there would have recorded)
            d = os.path.join(checkpoints, f"step{step + 1}")
            bert_lm.save(model, d, {"format": "pt", "step": str(step + 1)})
            evaluate(step + 1)
            snap = dict(log, recipe=dict(r, stop=step + 1), train_seconds=time.time() - t0,
                        cpu_seconds=time.process_time() - c0, machine=machine(r))
            complete(d, snap)
            bert_lm.write_json(os.path.join(d, "training_log.json"), snap, indent=None)
        if step % 100 == 99:
            print(f"step {step + 1}: loss {np.mean(log['batch_loss'][-100:]):.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    evaluate(last)
    model.eval()
    log["train_seconds"], log["cpu_seconds"] = time.time() - t0, time.process_time() - c0
    log["machine"] = machine(r)
    return log


def parse_sets(ap, r, m, sets):
    """--set KEY=VALUE on the recipe or the model -> (recipe, model)."""
    r, m = dict(r), dict(m)
    for s in sets:
        k, _, v = s.partition("=")
        d = r if k in r else m if k in m else None
        if d is None:
            ap.error(f"--set: no recipe or model entry {k!r}")
        d[k] = type(d[k])(v) if not isinstance(d[k], list) else json.loads(v)
    return r, m


def main():
    ap = argparse.ArgumentParser(description="train the shipped BERT-layout masked LM")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "assets", "models", NAME))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe or model entry (for trials), e.g. steps=50")
    ap.add_argument("--checkpoints", metavar="DIR",
                    help="also save the model, tokenizer and log so far into DIR/stepN every "
                         "checkpoint_every steps (does not change the run)")
    ap.add_argument("--card-only", action="store_true",
                    help="remeasure the scores and rewrite head_scores.json and README.md")
    ap.add_argument("--attnviz", default=os.path.join(HERE, "..", "..", "build", "app",
                                                      "attnviz"),
                    help="the attnviz binary the card's scores are measured through")
    ap.add_argument("--tokjs", default=os.path.join(HERE, "..", "..", ".cache", "npm"),
                    help="npm prefix holding @huggingface/tokenizers (the tokenizer check)")
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    t0, c0 = time.time(), time.process_time()
    r, m = parse_sets(ap, RECIPE, MODEL, args.set)
    torch.set_num_threads(r["threads"])
    torch.use_deterministic_algorithms(True)
    if not args.card_only:
        # 1. the tokenizer
        train_text, heldout_text = kjv.splits()
        vocab = wp.train(train_text.splitlines())
        wp.write(out, vocab, m["max_positions"])
        tok = wp.WordPiece(vocab)
        tr = [tok.encode(v) for v in train_text.splitlines()]
        ho = [tok.encode(v) for v in heldout_text.splitlines()]
        V = len(vocab)
        print(f"tokenizer: {V} pieces; {sum(map(len, tr)):,} training tokens, "
              f"{sum(map(len, ho)):,} held-out", flush=True)
        erng = np.random.Generator(np.random.PCG64(r["seed"] + 1))
        evals = {"train": mask(erng, consecutive_pairs(tr, r["eval_pairs"], m["max_positions"]),
                               r, V),
                 "heldout": mask(erng, consecutive_pairs(ho, r["eval_pairs"],
                                                         m["max_positions"]), r, V)}

        # 2. the model
        torch.manual_seed(r["seed"])
        cfg = bert_lm.make_config(V, m["hidden_size"], m["intermediate_size"], m["n_layers"],
                                  m["n_heads"], m["max_positions"], m["type_vocab_size"],
                                  m["layer_norm_eps"])
        model = bert_lm.BertMLM(cfg, pdrop=r["dropout"])
        def complete(d, lg):
            wp.write(d, vocab, m["max_positions"])
            lg.update({"model": m, "tokenizer": {"kind": "WordPiece", "vocab_size": V,
                                                     "learned_from": "training split"},
                       "train_tokens": sum(map(len, tr)), "heldout_tokens": sum(map(len, ho)),
                       "train_verses": len(tr), "heldout_verses": len(ho),
                       "params": sum(p.numel() for p in model.parameters())})
        log = train(model, r, tr, evals, V, m["max_positions"], args.checkpoints, complete)
        bert_lm.save(model, out, {"format": "pt", "recipe": "tools/train/train_bert.py"})
        complete(out, log)
        log["total_seconds"] = time.time() - t0
        log["total_cpu_seconds"] = time.process_time() - c0
        bert_lm.write_json(os.path.join(out, "training_log.json"), log, indent=None)
    else:
        with open(os.path.join(out, "training_log.json"), encoding="utf-8") as f:
            log = json.load(f)

    # 3. the scores (through the attnviz binary) and the card
    import bert_card
    scores = bert_card.measure(out, os.path.abspath(args.attnviz), args.tokjs)
    bert_lm.write_json(os.path.join(out, "head_scores.json"), scores, indent=1)
    bert_card.write(out, log, scores)
    print(f"done: {(time.time() - t0) / 60:.1f} min wall, "
          f"{(time.process_time() - c0) / 60:.1f} min CPU", flush=True)


if __name__ == "__main__":
    main()
