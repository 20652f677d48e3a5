#!/usr/bin/python3
"""Trains the byte-level GPT-2 that ships in assets/models/kjv-byte-2l, on the CPU.

Run with Debian's python3 (its python3-torch); install libopenblas0-pthread first:
    /usr/bin/python3 tools/train/train.py --out assets/models/kjv-byte-2l

Deterministic: each stage's seed drives the init (torch.manual_seed) and the batches (numpy
PCG64), the thread count is fixed at 1 and torch.use_deterministic_algorithms is on, so a rerun
on the same machine gives the same bytes (a different CPU may round differently inside BLAS).

Stage 1 (RECIPE), per sequence of n+1 bytes (n inputs, n targets; n = short_seq for the first
short_steps steps, then seq):
  40%  a window of the training text;
  30%  a window of the training text with a span (random bytes or other text, 4 to
       min(96, n/2) bytes) written at two places, so the second copy is predictable by copying;
  30%  a random byte sequence of min(8, n/4) to min(128, n/2) bytes repeated to fill the window.
It gives the previous-token head. Stage 2 (STAGE2, below) unties lm_head and trains the
induction head: a phase of 32-byte sequences, mostly repeats, then 256-byte sequences.
The text gives natural previous-token and first-token patterns; the repeats make induction
heads worth learning. Writes config.json, model.safetensors, vocab.json, merges.txt,
training_log.json, loss_curve.png and the model card README.md.
"""
import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bytegpt  # noqa: E402
import kjv  # noqa: E402

RECIPE = {
    "seed": 1234,
    "n_layer": 2,
    "n_head": 4,
    "n_embd": 128,
    "n_positions": 256,
    "batch": 8,
    "seq": 256,
    "steps": 1700,
    "short_seq": 64,
    "short_steps": 400,
    "lr": 1e-2,
    "warmup": 100,
    "min_lr_frac": 1.0,
    "weight_decay": 0.01,
    "betas": [0.9, 0.95],
    "grad_clip": 1.0,
    "p_text": 0.4,
    "p_text_with_copy": 0.3,
    "p_random_repeat": 0.3,
    "eval_every": 50,
    "eval_windows": 16,
    "threads": 1,
}

# Stage 2 starts from stage 1's weights (its previous-token head, layer 0 head 3, is there by
# then), unties lm_head (a copy of wte from here on) and restarts AdamW. It has two phases:
#   "short copies": 32-byte sequences, 64 a batch, 70% random repeats: with 32 keys the right key
#     already holds 1/32 of a query's attention, so a layer-1 head gets a strong enough gradient to
#     learn to attend to the byte after the current byte's earlier occurrence (K-composition with
#     the previous-token head). The copy loss sits at chance for ~500 steps, then falls.
#   "long context": back to 256-byte sequences and the stage-1 mix, at a lower learning rate, so
#     the copying works at every position and the text loss recovers.
# Untying matters: with a tied wte the bytes that never occur in the KJV text (>= 128) share one
# direction (they only ever need to be unlikely as outputs), and a model that cannot tell them
# apart as inputs cannot copy them. Trials that kept it tied, with 64- to 256-byte sequences,
# learning rates 1e-3 to 1e-2 and 50-80% repeats, did not copy within 600-6,000 steps.
STAGE2 = [
    dict(RECIPE, phase="short copies", seed=1235, steps=1500, seq=32, batch=64, short_steps=0,
         lr=1e-2, warmup=100, p_text=0.2, p_text_with_copy=0.1, p_random_repeat=0.7,
         copy_spans="random"),
    dict(RECIPE, phase="long context", seed=1236, steps=2000, seq=256, batch=8, short_steps=0,
         lr=3e-3, warmup=0, p_text=0.4, p_text_with_copy=0.2, p_random_repeat=0.4,
         copy_spans="random"),
]


def make_batch(rng, text, B, T, r):
    """text: uint8 array. -> int64 [B, T+1] (inputs are [:, :-1], targets [:, 1:])."""
    out = np.empty((B, T + 1), dtype=np.int64)
    n = T + 1

    def window():
        o = rng.integers(0, len(text) - n)
        return text[o:o + n].astype(np.int64)

    for b in range(B):
        u = rng.random()
        if u < r["p_text"]:
            out[b] = window()
        elif u < r["p_text"] + r["p_text_with_copy"]:
            x = window()
            L = int(rng.integers(4, min(96, n // 2) + 1))
            if r.get("copy_spans") == "random" or rng.random() < 0.5:
                span = rng.integers(0, 256, size=L)
            else:
                span = window()[:L]
            a = int(rng.integers(0, n - 2 * L + 1))
            c = int(rng.integers(a + L, n - L + 1))
            x[a:a + L] = span
            x[c:c + L] = span
            out[b] = x
        else:
            L = int(rng.integers(min(8, n // 4), min(128, n // 2) + 1))
            span = rng.integers(0, 256, size=L)
            out[b] = np.tile(span, n // L + 1)[:n]
    return out


def eval_windows(text, count, T):
    """count fixed windows of T+1 bytes, evenly spaced over text -> int64 [count, T+1]."""
    step = (len(text) - T - 1) // (count - 1)
    return np.stack([text[i * step:i * step + T + 1] for i in range(count)]).astype(np.int64)


def loss_on(model, batch, skip=0):
    """Mean next-byte loss over the targets from position `skip` on."""
    with torch.no_grad():
        x = torch.from_numpy(batch)
        z = model(x[:, :-1])[:, skip:]
        return float(F.cross_entropy(z.reshape(-1, z.shape[-1]), x[:, 1 + skip:].reshape(-1)))


PROBE_L = 100


def repeat_probe(seed, count=4):
    """count random byte sequences of PROBE_L, each twice, plus one byte -> int64 [count, 2L+1]
    (a seed apart from the batches'; the loss is read on the second copy only)."""
    rng = np.random.Generator(np.random.PCG64(seed + 1))
    seqs = rng.integers(0, 256, size=(count, PROBE_L))
    return np.concatenate([seqs, seqs, seqs[:, :1]], axis=1).astype(np.int64)


def lr_at(step, r):
    if step < r["warmup"]:
        return r["lr"] * (step + 1) / r["warmup"]
    p = (step - r["warmup"]) / max(1, r["steps"] - r["warmup"])
    return r["lr"] * (r["min_lr_frac"] + (1 - r["min_lr_frac"]) * 0.5 * (1 + math.cos(math.pi * p)))


def final_eval(model, log, eval_train, eval_val, probe, step, start):
    e = {"step": step, "train_text": loss_on(model, eval_train),
         "val_text": loss_on(model, eval_val),
         "repeat_second_copy": loss_on(model, probe, skip=PROBE_L),
         "elapsed_s": time.time() - start}
    log["eval"].append(e)
    return e


def snapshot(model, log, r, out, step, seconds, cpu_seconds):
    """The checkpoint after `step` steps, as a run with steps=step would write it: with a
    constant learning rate after warm-up (min_lr_frac = 1) the two are the same computation."""
    snap = json.loads(json.dumps(log))
    snap["recipe"]["steps"] = step
    snap["train_seconds"] = seconds
    snap["cpu_seconds"] = cpu_seconds
    snap["machine"] = machine(r)
    d = os.path.join(out, "snapshots", f"step_{step}")
    bytegpt.save_checkpoint(model, d, {"format": "pt", "recipe": "tools/train/train.py",
                                       "seed": r["seed"], "steps": step})
    bytegpt.write_json(os.path.join(d, "training_log.json"), snap)


def machine(r):
    return {"cpu": cpu_name(), "torch": torch.__version__, "python": platform.python_version(),
            "threads": r["threads"], "loadavg": os.getloadavg()}


def train(r, log_every=10, snapshot_every=0, out=None, model=None):
    """Trains `model` (a new one from r's seed when None) with r's recipe and a fresh AdamW.
    -> (model, log)."""
    torch.set_num_threads(r["threads"])
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(r["seed"])
    rng = np.random.Generator(np.random.PCG64(r["seed"]))

    train_text, heldout_text = kjv.splits()
    train_bytes = np.frombuffer(train_text.encode("utf-8"), dtype=np.uint8)
    heldout_bytes = np.frombuffer(heldout_text.encode("utf-8"), dtype=np.uint8)
    T = r["seq"]
    # evaluated on full-context windows whatever this phase's sequence length
    eval_train = eval_windows(train_bytes, r["eval_windows"], r["n_positions"])
    eval_val = eval_windows(heldout_bytes, r["eval_windows"], r["n_positions"])
    probe = repeat_probe(RECIPE["seed"])  # the same probe in every stage

    if model is None:
        cfg = bytegpt.make_config(r["n_layer"], r["n_head"], r["n_embd"], r["n_positions"])
        model = bytegpt.ByteGPT(cfg)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": r["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=r["lr"], betas=tuple(r["betas"]))

    log = {"recipe": r, "steps": [], "batch_loss": [], "eval": [],
           "train_bytes": int(len(train_bytes)), "heldout_bytes": int(len(heldout_bytes)),
           "params": sum(p.numel() for p in model.parameters())}
    start = time.time()
    cpu_start = time.process_time()
    for step in range(r["steps"]):
        if step % r["eval_every"] == 0:
            model.eval()
            e = {"step": step, "train_text": loss_on(model, eval_train),
                 "val_text": loss_on(model, eval_val),
                 "repeat_second_copy": loss_on(model, probe, skip=PROBE_L),
                 "elapsed_s": time.time() - start}
            log["eval"].append(e)
            print(f"eval step {step}: train text {e['train_text']:.4f}  "
                  f"val text {e['val_text']:.4f}  repeat {e['repeat_second_copy']:.4f}  "
                  f"({e['elapsed_s']:.0f} s)", flush=True)
            model.train()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, r)
        # a short-context phase first: with few keys a query's uniform attention is not yet
        # diluted, so previous-token and induction heads get a strong gradient early
        short = step < r["short_steps"]
        bt, tt = ((r["batch"] * T // r["short_seq"], r["short_seq"]) if short else (r["batch"], T))
        x = torch.from_numpy(make_batch(rng, train_bytes, bt, tt, r))
        z = model(x[:, :-1])
        loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
        log["steps"].append(step)
        log["batch_loss"].append(float(loss))
        if step % log_every == 0:
            print(f"step {step}: loss {float(loss):.4f}  lr {lr_at(step, r):.2e}  "
                  f"({time.time() - start:.0f} s)", flush=True)
        done = step + 1
        if snapshot_every and done % snapshot_every == 0 and done < r["steps"]:
            seconds = time.time() - start
            cpu = time.process_time() - cpu_start
            model.eval()
            snap_log = json.loads(json.dumps(log))
            e = final_eval(model, snap_log, eval_train, eval_val, probe, done, start)
            print(f"snapshot {done}: train text {e['train_text']:.4f}  "
                  f"val text {e['val_text']:.4f}  repeat {e['repeat_second_copy']:.4f}",
                  flush=True)
            snapshot(model, snap_log, r, out, done, seconds, cpu)
            model.train()
            start += time.time() - start - seconds  # snapshots do not count as training time
            cpu_start += time.process_time() - cpu_start - cpu
    model.eval()
    seconds = time.time() - start
    e = final_eval(model, log, eval_train, eval_val, probe, r["steps"], start)
    print(f"final: train text {e['train_text']:.4f}  val text {e['val_text']:.4f}  "
          f"repeat {e['repeat_second_copy']:.4f}", flush=True)
    log["train_seconds"] = seconds
    log["cpu_seconds"] = time.process_time() - cpu_start
    log["machine"] = machine(r)
    return model, log


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def stages(log):
    """-> the log of every stage and phase, in order, each with its steps and evaluations offset
    to the step count of the whole run."""
    parts = log.get("earlier", []) + [log]
    out, offset = [], 0
    for p in parts:
        out.append(dict(p, steps=[offset + k for k in p["steps"]],
                        eval=[dict(e, step=offset + e["step"]) for e in p["eval"]]))
        offset += p["recipe"]["steps"]
    return out


def plot_losses(log, path, name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    parts = stages(log)
    steps = np.concatenate([p["steps"] for p in parts])
    bl = np.concatenate([p["batch_loss"] for p in parts])
    ev = [e for p in parts for e in p["eval"]]
    k = max(1, min(20, len(bl)))
    smooth = np.convolve(bl, np.ones(k) / k, mode="valid")
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.plot(steps, bl, color="#bbbbbb", lw=0.7, label="training batch (text + repeats)")
    ax.plot(steps[k - 1:], smooth, color="#555555", lw=1.2, label=f"training batch, mean of {k}")
    ax.plot([e["step"] for e in ev], [e["train_text"] for e in ev], "o-", ms=3,
            color="#1f77b4", label="training text (fixed windows)")
    ax.plot([e["step"] for e in ev], [e["val_text"] for e in ev], "o-", ms=3,
            color="#d62728", label="held-out text (Hebrews-Revelation)")
    ax.plot([e["step"] for e in ev], [e.get("repeat_second_copy", np.nan) for e in ev], "o-",
            ms=3, color="#2ca02c", label="second copy of a repeated random sequence")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_ylim(0, 6)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    for i, p in enumerate(parts):
        r = p["recipe"]
        start = p["steps"][0] if p["steps"] else 0
        short = min(r.get("short_steps", 0), r["steps"])
        if 0 < short < r["steps"]:
            ax.axvline(start + short, color="#999999", lw=0.8, ls="--")
            ax.text(start + short, 5.9, f" {r['short_seq']}-byte\n sequences\n until here",
                    fontsize=7, color="#666666", va="top")
        if i > 0:
            ax.axvline(start, color="#444444", lw=0.8, ls="--")
            ax.text(start, 5.9 if i % 2 else 5.2,
                    f" {r.get('phase', 'stage 2')}: {r['seq']}-byte sequences,\n "
                    f"{r['p_random_repeat']:.0%} repeated random spans", fontsize=7,
                    color="#444444", va="top")
    ax.set_title(f"{name} training loss")
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp)
    os.replace(tmp, path)


def parse_sets(ap, recipe, items, flag):
    r = dict(recipe)
    for kv in items:
        key, _, value = kv.partition("=")
        if key not in r:
            ap.error(f"{flag}: no recipe entry {key!r}")
        r[key] = type(r[key])(value)
    return r


def main():
    ap = argparse.ArgumentParser(description="train the shipped byte-level GPT-2")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "assets", "models",
                                                  "kjv-byte-2l"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a stage-1 recipe entry (for trials), e.g. --set steps=20")
    ap.add_argument("--set2", action="append", default=[], metavar="KEY=VALUE",
                    help="override an entry of both stage-2 phases (for trials)")
    ap.add_argument("--snapshot-every", type=int, default=0, metavar="N",
                    help="also write stage 1's checkpoint every N steps to OUT/snapshots/step_N")
    ap.add_argument("--stage1-from", metavar="DIR",
                    help="skip stage 1: start stage 2 from this folder, which a run of stage 1 "
                         "alone (--stage1-only) wrote (for trials)")
    ap.add_argument("--stage1-only", action="store_true", help="stop after stage 1")
    ap.add_argument("--no-card", action="store_true", help="skip the scores and README.md")
    ap.add_argument("--card-only", action="store_true",
                    help="rewrite loss_curve.png and README.md from training_log.json and the "
                         "measured scores")
    ap.add_argument("--attnviz", help="measure the card's scores through this attnviz binary")
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    import model_card
    if not args.card_only:
        if args.stage1_from:
            model = bytegpt.load_checkpoint(args.stage1_from)
            with open(os.path.join(args.stage1_from, "training_log.json"), encoding="utf-8") as f:
                logs = [json.load(f)]
        else:
            model, log1 = train(parse_sets(ap, RECIPE, args.set, "--set"),
                                snapshot_every=args.snapshot_every, out=out)
            logs = [log1]
        if not args.stage1_only:
            model.untie()
            for phase in STAGE2:
                model, lg = train(parse_sets(ap, phase, args.set2, "--set2"), model=model)
                logs.append(lg)
        log = dict(logs[-1], earlier=logs[:-1]) if len(logs) > 1 else logs[0]
        model.eval()
        bytegpt.save_checkpoint(model, out, {"format": "pt", "recipe": "tools/train/train.py",
                                             "seed": RECIPE["seed"],
                                             "steps": sum(p["recipe"]["steps"] for p in logs)})
        bytegpt.write_json(os.path.join(out, "training_log.json"), log)
    with open(os.path.join(out, "training_log.json"), encoding="utf-8") as f:
        plot_losses(json.load(f), os.path.join(out, "loss_curve.png"),
                    os.path.basename(out))
    if not args.no_card:
        model_card.write(out, args.attnviz)


if __name__ == "__main__":
    main()
