#!/usr/bin/python3
"""Trains kjv-sp-llama, the LLaMA-layout model that ships in assets/models/kjv-sp-llama, on the
CPU, from nothing but the King James Bible of Debian's bible-kjv package. One command:

    /usr/bin/python3 tools/train/train_llama.py --out assets/models/kjv-sp-llama

(apt-get install bible-kjv python3-torch python3-sentencepiece python3-protobuf
python3-matplotlib first). It writes, into --out:
  tokenizer.model        a SentencePiece BPE vocabulary (2048 pieces, byte fallback) trained on
                         the training split (sp_tokenizer.py)
  tokenizer.json         the same tokenizer in HF's Llama-2 layout; tokenizer_config.json
  config.json            HF LlamaConfig; model.safetensors (F32, HF key names, lm_head untied)
  training_log.json      every batch loss, the evaluations, the recipe, the timings
  loss_curve.png, head_scores.json, README.md (the model card)
and, when node and the npm package @huggingface/tokenizers are found (--tokjs), checks
tokenizer.json against tokenizer.model (check_tokenizer_json.py).

Deterministic: the tokenizer trainer runs on one thread over the verses in order; the first
phase's seed drives the init (torch.manual_seed), each phase's seed its batches (numpy PCG64);
torch runs on one thread with deterministic algorithms, so a rerun on the same machine gives the
same bytes.

The recipe follows train.py's (the byte-level GPT-2 kjv-byte-2l) in tokens, with these changes:
  - lm_head is untied from the start, and the "short copies" phase (32 positions, mostly
    repeats) comes first, from the initialisation: the previous-token and induction heads form
    together there. train.py's order (a tied stage on text with some copies for the
    previous-token head, then untie and a short-copies phase) was tried first here, with 16- and
    then 32-dimensional heads: after 900-1000 short-copy steps no induction head had formed, and
    the previous-token head was decaying; from the initialisation it forms at ~step 500.
  - besides repeated random token spans, the copies are also NATURAL text: a passage of the
    window's own text written again later in it, and a window filled by a repeated passage of
    text, so the induction head copies English too (not only random ids);
  - a 64-position phase for the text, then the 256-position "long context" phase.
"""
import argparse
import json
import math
import os
import platform
import shutil
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
import kjv  # noqa: E402
import llama_lm  # noqa: E402
import llama_scores  # noqa: E402
import sp_tokenizer  # noqa: E402

NAME = "kjv-sp-llama"
BOS = 1
FIRST_ID = 3  # random ids are drawn from 3..V-1: no <unk>, <s>, </s>

MODEL = {
    "vocab_size": 2048,
    "hidden_size": 128,
    "intermediate_size": 384,
    "n_layers": 3,
    "n_heads": 8,
    "n_kv_heads": 2,
    "head_dim": 32,
    "max_positions": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
}

# The phases, in order; each starts a fresh AdamW (lm_head is untied throughout). seq is the
# number of positions the model runs on: every sequence is BOS + seq tokens (inputs [:-1],
# targets [1:]). The mix: p_text plain text windows; p_text_with_copy text windows with a span
# written twice (half random ids, half the window's own text, so a passage repeats later);
# p_random_repeat random ids repeated to fill the window; p_text_repeat a passage of text
# repeated to fill the window. Constant learning rate after a linear warm-up.
BASE = {
    "seed": 4321,
    "batch": 64,
    "seq": 32,
    "steps": 900,
    "lr": 5e-3,
    "warmup": 50,
    "weight_decay": 0.01,
    "betas": [0.9, 0.95],
    "grad_clip": 1.0,
    "p_text": 0.3,
    "p_text_with_copy": 0.0,
    "p_random_repeat": 0.42,
    "p_text_repeat": 0.28,
    "eval_every": 100,
    "eval_windows": 16,
    "threads": 1,
}
PHASES = [
    # from the initialisation: 32 positions, 70% repeats. With 32 keys the right key holds a
    # large share of a query's attention, so the previous-token head (layer 0) and an
    # induction head (layer >= 1, attending to the token after the current token's earlier
    # occurrence through what the previous-token head wrote there) form together, after a
    # plateau of about 450 steps
    dict(BASE, phase="short copies"),
    # more text, 64 positions: the text loss, cheaply
    dict(BASE, phase="medium context", seed=4322, steps=600, seq=64, batch=32, warmup=0,
         p_text=0.5, p_text_with_copy=0.2, p_random_repeat=0.15, p_text_repeat=0.15),
    # the full 256 positions, so previous-token and induction heads work at every position
    dict(BASE, phase="long context", seed=4323, steps=500, seq=256, batch=8, warmup=0,
         lr=3e-3, p_text=0.5, p_text_with_copy=0.2, p_random_repeat=0.15, p_text_repeat=0.15),
]


# ---- data -----------------------------------------------------------------------------------

def token_streams(sp):
    """-> (train ids, held-out ids) as int64 arrays: each verse encoded on its own (so each
    starts with "▁"), concatenated, which reads as running text with a space between verses."""
    train, heldout = kjv.splits()
    out = []
    for text in (train, heldout):
        ids = sp.encode(text.splitlines())
        out.append(np.fromiter((i for v in ids for i in v), dtype=np.int64))
    return out


def make_batch(rng, stream, B, T, r, V):
    """-> int64 [B, T+1]: BOS, then T tokens of one of four kinds (see BASE)."""
    out = np.empty((B, T + 1), dtype=np.int64)
    out[:, 0] = BOS

    def window(n):
        o = int(rng.integers(0, len(stream) - n))
        return stream[o:o + n].copy()

    for b in range(B):
        u = rng.random()
        if u < r["p_text"]:
            x = window(T)
        elif u < r["p_text"] + r["p_text_with_copy"]:
            x = window(T)
            L = int(rng.integers(4, max(5, min(48, T // 2) + 1)))
            a = int(rng.integers(0, T - 2 * L + 1))
            c = int(rng.integers(a + L, T - L + 1))
            if rng.random() < 0.5:
                x[a:a + L] = rng.integers(FIRST_ID, V, size=L)
            x[c:c + L] = x[a:a + L]  # the passage at a (random ids or its own text), again at c
        else:
            L = int(rng.integers(min(8, T // 4), min(128, T // 2) + 1))
            if u < r["p_text"] + r["p_text_with_copy"] + r["p_random_repeat"]:
                span = rng.integers(FIRST_ID, V, size=L)
            else:
                span = window(L)
            x = np.tile(span, T // L + 1)[:T]
        out[b, 1:] = x
    return out


def eval_windows(stream, count, T):
    """count fixed windows, BOS + T tokens, evenly spaced -> int64 [count, T+1]."""
    step = (len(stream) - T) // (count - 1)
    w = np.stack([stream[i * step:i * step + T] for i in range(count)])
    return np.concatenate([np.full((count, 1), BOS), w], axis=1).astype(np.int64)


def probes(sp, V):
    """Fixed probes for the evaluations: (random, english), each a list of (ids, L) with ids =
    BOS + S + S; the loss is read on the second copy."""
    rnd = [(llama_scores.repeated_random(s, V), llama_scores.REPEAT_LEN) for s in range(4)]
    heldout = kjv.splits()[1].splitlines()
    eng = []
    for v in heldout[7::140]:
        s = sp.encode(v)[:60]
        eng.append(([BOS] + s + s, len(s)))
    return rnd, eng


def loss_on(model, batch, skip=0):
    with torch.no_grad():
        x = torch.from_numpy(batch)
        z = model(x[:, :-1])[:, skip:]
        return float(F.cross_entropy(z.reshape(-1, z.shape[-1]), x[:, 1 + skip:].reshape(-1)))


def second_copy_loss(model, seqs):
    """Mean loss over the second copy's next tokens (t = L+1 .. 2L-1 predicting t+1)."""
    tot, n = 0.0, 0
    with torch.no_grad():
        for ids, L in seqs:
            x = torch.tensor([ids])
            z = model(x[:, :-1])[0, L + 1:2 * L]
            tot += float(F.cross_entropy(z, x[0, L + 2:2 * L + 1], reduction="sum"))
            n += L - 1
    return tot / n


def head_probe(model, text_window, rnd, eng):
    """Cheap scores for the log: the best previous-token score (one held-out window) and the
    best induction score in layers >= 1 (random and English probes)."""
    def weights(ids):
        keep = []
        with torch.no_grad():
            model(torch.tensor([ids]), keep_weights=keep)
        return torch.stack([a[0] for a in keep]).numpy()
    prev = llama_scores.prev_token_score(weights(list(text_window)))
    ir = np.mean([llama_scores.induction_score(weights(ids), L) for ids, L in rnd], axis=0)
    ie = np.mean([llama_scores.induction_score(weights(ids), L) for ids, L in eng], axis=0)
    l, h = np.unravel_index(np.argmax(ir[1:]), ir[1:].shape)
    return {"prev_best": float(prev.max()), "induction_random_best": float(ir[1:].max()),
            "induction_head": f"{l + 1}:{h}", "induction_english_same_head": float(ie[l + 1, h]),
            "induction_english_best": float(ie[1:].max())}


def lr_at(step, r):
    if step < r["warmup"]:
        return r["lr"] * (step + 1) / r["warmup"]
    return r["lr"]


def machine(r):
    return {"cpu": cpu_name(), "torch": torch.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "threads": r["threads"], "loadavg": os.getloadavg()}


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ---- training -------------------------------------------------------------------------------

def evaluate(model, data, step, start, cpu_start):
    model.eval()
    e = {"step": step,
         "train_text": loss_on(model, data["eval_train"]),
         "val_text": loss_on(model, data["eval_val"]),
         "repeat_random_second_copy": second_copy_loss(model, data["probe_random"]),
         "repeat_english_second_copy": second_copy_loss(model, data["probe_english"])}
    e.update(head_probe(model, data["eval_val"][0, :-1], data["probe_random"],
                        data["probe_english"]))
    e["elapsed_s"] = time.time() - start
    e["cpu_s"] = time.process_time() - cpu_start
    model.train()
    print(f"eval {step}: train {e['train_text']:.3f} val {e['val_text']:.3f} "
          f"rep-rand {e['repeat_random_second_copy']:.3f} "
          f"rep-eng {e['repeat_english_second_copy']:.3f} | prev {e['prev_best']:.2f} "
          f"ind {e['induction_head']} {e['induction_random_best']:.2f} "
          f"eng {e['induction_english_same_head']:.2f} ({e['elapsed_s']:.0f} s, "
          f"cpu {e['cpu_s']:.0f} s)", flush=True)
    return e


def train(r, data, model, log_every=50):
    """Trains `model` with r's recipe and a fresh AdamW. -> log."""
    torch.set_num_threads(r["threads"])
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(r["seed"])
    rng = np.random.Generator(np.random.PCG64(r["seed"]))
    V = model.cfg["vocab_size"]
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": r["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=r["lr"], betas=tuple(r["betas"]))
    log = {"recipe": r, "steps": [],
           "batch_loss": [], "eval": []}
    start, cpu_start = time.time(), time.process_time()
    for step in range(r["steps"]):
        if step % r["eval_every"] == 0:
            log["eval"].append(evaluate(model, data, step, start, cpu_start))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, r)
        x = torch.from_numpy(make_batch(rng, data["train"], r["batch"], r["seq"], r, V))
        z = model(x[:, :-1])
        loss = F.cross_entropy(z.reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
        log["steps"].append(step)
        log["batch_loss"].append(float(loss))
        if step % log_every == 0:
            print(f"[{r['phase']}] step {step}: loss {float(loss):.4f} lr {lr_at(step, r):.2e} "
                  f"({time.time() - start:.0f} s)", flush=True)
    log["eval"].append(evaluate(model, data, r["steps"], start, cpu_start))
    log["tokens"] = r["steps"] * r["batch"] * r["seq"]
    log["train_seconds"] = time.time() - start
    log["cpu_seconds"] = time.process_time() - cpu_start
    log["machine"] = machine(r)
    model.eval()
    return log


def parse_sets(ap, recipe, items, flag):
    r = dict(recipe)
    for kv in items:
        key, _, value = kv.partition("=")
        if key not in r:
            ap.error(f"{flag}: no recipe entry {key!r}")
        r[key] = type(r[key])(value)
    return r


# ---- outputs --------------------------------------------------------------------------------

def plot_losses(log, path, name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    parts, offset = [], 0
    for p in log["phases"]:
        parts.append((offset, p))
        offset += p["recipe"]["steps"]
    steps = np.concatenate([[o + s for s in p["steps"]] for o, p in parts])
    bl = np.concatenate([p["batch_loss"] for _, p in parts])
    ev = [dict(e, step=o + e["step"]) for o, p in parts for e in p["eval"]]
    k = max(1, min(20, len(bl)))
    smooth = np.convolve(bl, np.ones(k) / k, mode="valid")
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.plot(steps, bl, color="#bbbbbb", lw=0.7, label="training batch (text + repeats)")
    ax.plot(steps[k - 1:], smooth, color="#555555", lw=1.2, label=f"training batch, mean of {k}")
    es = [e["step"] for e in ev]
    ax.plot(es, [e["train_text"] for e in ev], "o-", ms=3, color="#1f77b4",
            label="training text (fixed windows)")
    ax.plot(es, [e["val_text"] for e in ev], "o-", ms=3, color="#d62728",
            label="held-out text (Hebrews-Revelation)")
    ax.plot(es, [e["repeat_random_second_copy"] for e in ev], "o-", ms=3, color="#2ca02c",
            label="second copy of repeated random ids")
    ax.plot(es, [e["repeat_english_second_copy"] for e in ev], "o-", ms=3, color="#9467bd",
            label="second copy of a repeated held-out verse")
    ymax = 9.0
    for i, (o, p) in enumerate(parts):
        r = p["recipe"]
        if i > 0:
            ax.axvline(o, color="#444444", lw=0.8, ls="--")
        ax.text(o, ymax - 0.1 if i % 2 == 0 else ymax - 1.1,
                f" {r['phase']}: {r['seq']}-token\n sequences, "
                f"{r['p_random_repeat'] + r['p_text_repeat']:.0%} repeats",
                fontsize=7, color="#444444", va="top")
    ax.set_xlabel("step (evaluations: 16 windows of 256 positions; probes of up to 201 positions)")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.set_ylim(0, ymax)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(f"{name} training loss")
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="train the shipped LLaMA-layout model")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "assets", "models", NAME))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe entry of every phase (for trials), e.g. steps=5")
    ap.add_argument("--card-only", action="store_true",
                    help="remeasure the scores and rewrite loss_curve.png and README.md")
    ap.add_argument("--attnviz", help="measure the card's scores through this attnviz binary")
    ap.add_argument("--tokjs", default="/tmp/tokjs",
                    help="npm prefix holding @huggingface/tokenizers, for the tokenizer.json check")
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    t0, c0 = time.time(), time.process_time()
    torch.set_num_threads(1)
    if not args.card_only:
        # 1. the tokenizer
        train_text, _ = kjv.splits()
        sp = sp_tokenizer.train(train_text.splitlines(), MODEL["vocab_size"],
                                os.path.join(out, "tokenizer.model"))
        sp_tokenizer.write_tokenizer_files(os.path.join(out, "tokenizer.model"), out,
                                           MODEL["max_positions"])
        tr, ho = token_streams(sp)
        V = sp.get_piece_size()
        T = MODEL["max_positions"]
        rnd, eng = probes(sp, V)
        data = {"train": tr, "eval_train": eval_windows(tr, BASE["eval_windows"], T),
                "eval_val": eval_windows(ho, BASE["eval_windows"], T),
                "probe_random": rnd, "probe_english": eng}
        tok_seconds = time.time() - t0
        print(f"tokenizer: {V} pieces; {len(tr):,} training tokens, {len(ho):,} held-out "
              f"({tok_seconds:.1f} s)", flush=True)

        # 2. the model
        torch.manual_seed(BASE["seed"])
        cfg = llama_lm.make_config(V, MODEL["hidden_size"], MODEL["intermediate_size"],
                                   MODEL["n_layers"], MODEL["n_heads"], MODEL["n_kv_heads"],
                                   MODEL["head_dim"], MODEL["max_positions"],
                                   MODEL["rms_norm_eps"], MODEL["rope_theta"], tied=False)
        model = llama_lm.LlamaLM(cfg)
        phases = [train(parse_sets(ap, p, args.set, "--set"), data, model) for p in PHASES]
        model.eval()
        llama_lm.save(model, out, {"format": "pt", "recipe": "tools/train/train_llama.py"})
        log = {"model": MODEL, "tokenizer": dict(sp_tokenizer.TRAINER,
                                                 vocab_size=V),
               "train_tokens": int(len(tr)), "heldout_tokens": int(len(ho)),
               "train_chars": len(train_text), "heldout_chars": len(kjv.splits()[1]),
               "params": sum(p.numel() for p in model.parameters()),
               "tokenizer_seconds": tok_seconds,
               "probe_counts": {"random": len(rnd), "english": len(eng)},
               "phases": phases}
        log["train_seconds"] = sum(p["train_seconds"] for p in phases)
        log["train_cpu_seconds"] = sum(p["cpu_seconds"] for p in phases)
    else:
        with open(os.path.join(out, "training_log.json"), encoding="utf-8") as f:
            log = json.load(f)
        model = llama_lm.load(out)

    # 3. the tokenizer.json check, the scores, the card
    import llama_card
    check = None
    if shutil.which("node") and os.path.isdir(os.path.join(args.tokjs, "node_modules")):
        import check_tokenizer_json
        check = check_tokenizer_json.check(out, args.tokjs)
        print(f"tokenizer.json check: {check['texts']} texts, {check['mismatches']} mismatches",
              flush=True)
        log["tokenizer_json_check"] = check
    backend = (llama_scores.AttnvizBackend(out, args.attnviz) if args.attnviz
               else llama_scores.TorchBackend(out, model))
    scores = llama_scores.measure(backend, out)
    print(llama_scores.summary(scores), flush=True)
    llama_lm.write_json(os.path.join(out, "head_scores.json"), scores, indent=1)
    if not args.card_only:
        log["total_seconds"] = time.time() - t0
        log["total_cpu_seconds"] = time.process_time() - c0
    llama_lm.write_json(os.path.join(out, "training_log.json"), log)
    try:
        plot_losses(log, os.path.join(out, "loss_curve.png"), NAME)
    except ImportError:
        print("matplotlib is missing: no loss_curve.png", flush=True)
    llama_card.write(out, log, scores)
    print(f"done: {(time.time() - t0) / 60:.1f} min wall, "
          f"{(time.process_time() - c0) / 60:.1f} min CPU", flush=True)


if __name__ == "__main__":
    main()
