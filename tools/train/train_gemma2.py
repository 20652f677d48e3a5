#!/usr/bin/python3
"""Trains kjv-sp-gemma2, the Gemma-2-layout model that ships in assets/models/kjv-sp-gemma2, on
the CPU, from the King James Bible of Debian's bible-kjv package. One command:

    /usr/bin/python3 tools/train/train_gemma2.py --out assets/models/kjv-sp-gemma2

It reuses kjv-sp-llama's SentencePiece tokenizer (tokenizer.model, tokenizer.json and
tokenizer_config.json are copied from assets/models/kjv-sp-llama, vocabulary 2048) and
train_llama.py's data, phases and training loop (imported, not copied): the model is
gemma2_lm.py's Gemma 2 (local layers 0 and 2 with a 16-token sliding window, global layers 1
and 3, attention scores soft-capped at 8, final logits at 30). It writes, into --out:
config.json (HF Gemma2Config), model.safetensors (F32, HF key names, lm_head untied),
training_log.json, head_scores.json (llama_scores.py's scores plus the window and soft-cap
measurements of gemma2_card.py), loss_curve.png and README.md (the card).

Deterministic as train_llama.py: one torch thread, deterministic algorithms, seeded init and
batches.
"""
import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_llama  # noqa: E402  (sets the one-thread environment before torch loads)

import torch  # noqa: E402

import gemma2_lm  # noqa: E402
import kjv  # noqa: E402
import llama_scores  # noqa: E402
import sp_tokenizer  # noqa: E402

NAME = "kjv-sp-gemma2"
TOKENIZER_FROM = os.path.join(HERE, "..", "..", "assets", "models", "kjv-sp-llama")
TOKENIZER_FILES = ("tokenizer.model", "tokenizer.json", "tokenizer_config.json")

MODEL = {
    "vocab_size": 2048,
    "hidden_size": 128,
    "intermediate_size": 256,
    "n_layers": 4,
    "n_heads": 8,
    "n_kv_heads": 2,
    "head_dim": 32,
    "max_positions": 256,
    "sliding_window": 16,
    "attn_logit_softcapping": 8.0,
    "final_logit_softcapping": 30.0,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
}

# train_llama.py's three phases (short copies from the initialisation, medium and long
# context), the last two shortened to fit 12 minutes on one thread with four layers.
PHASES = [
    dict(train_llama.PHASES[0], steps=900),
    dict(train_llama.PHASES[1], steps=200),
    dict(train_llama.PHASES[2], steps=200),
]


def main():
    ap = argparse.ArgumentParser(description="train the shipped Gemma-2-layout model")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "assets", "models", NAME))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe entry of every phase (for trials), e.g. steps=5")
    ap.add_argument("--card-only", action="store_true",
                    help="remeasure the scores and rewrite loss_curve.png and README.md")
    ap.add_argument("--attnviz", help="measure the card's scores through this attnviz binary")
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    t0, c0 = time.time(), time.process_time()
    torch.set_num_threads(1)
    if not args.card_only:
        # 1. the tokenizer: kjv-sp-llama's
        for f in TOKENIZER_FILES:
            shutil.copyfile(os.path.join(TOKENIZER_FROM, f), os.path.join(out, f))
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
        tr, ho = train_llama.token_streams(sp)
        V = sp.get_piece_size()
        T = MODEL["max_positions"]
        rnd, eng = train_llama.probes(sp, V)
        base = train_llama.BASE
        data = {"train": tr, "eval_train": train_llama.eval_windows(tr, base["eval_windows"], T),
                "eval_val": train_llama.eval_windows(ho, base["eval_windows"], T),
                "probe_random": rnd, "probe_english": eng}
        print(f"tokenizer: {V} pieces; {len(tr):,} training tokens, {len(ho):,} held-out",
              flush=True)

        # 2. the model
        torch.manual_seed(PHASES[0]["seed"])
        m = MODEL
        cfg = gemma2_lm.make_config(V, m["hidden_size"], m["intermediate_size"], m["n_layers"],
                                    m["n_heads"], m["n_kv_heads"], m["head_dim"],
                                    m["max_positions"], m["sliding_window"],
                                    m["attn_logit_softcapping"], m["final_logit_softcapping"],
                                    m["rms_norm_eps"], m["rope_theta"], tied=False)
        model = gemma2_lm.Gemma2LM(cfg)
        phases = [train_llama.train(train_llama.parse_sets(ap, p, args.set, "--set"), data,
                                    model) for p in PHASES]
        model.eval()
        gemma2_lm.save(model, out, {"format": "pt", "recipe": "tools/train/train_gemma2.py"})
        train_text, heldout_text = kjv.splits()
        log = {"model": MODEL, "tokenizer": dict(sp_tokenizer.TRAINER, vocab_size=V,
                                                 copied_from="assets/models/kjv-sp-llama"),
               "train_tokens": int(len(tr)), "heldout_tokens": int(len(ho)),
               "train_chars": len(train_text), "heldout_chars": len(heldout_text),
               "params": sum(p.numel() for p in model.parameters()),
               "probe_counts": {"random": len(rnd), "english": len(eng)},
               "phases": phases}
        log["train_seconds"] = sum(p["train_seconds"] for p in phases)
        log["train_cpu_seconds"] = sum(p["cpu_seconds"] for p in phases)
    else:
        with open(os.path.join(out, "training_log.json"), encoding="utf-8") as f:
            log = json.load(f)
        model = gemma2_lm.load(out)

    # 3. the scores and the card
    import gemma2_card
    backend = (llama_scores.AttnvizBackend(out, args.attnviz) if args.attnviz
               else llama_scores.TorchBackend(out, model))
    if not args.attnviz:
        backend.name = "torch (tools/train/gemma2_lm.py)"
    scores = llama_scores.measure(backend, out)
    print(llama_scores.summary(scores), flush=True)
    scores["gemma2"] = gemma2_card.measure(model, out, scores)
    print(json.dumps(scores["gemma2"]["summary"], indent=1), flush=True)
    gemma2_lm.write_json(os.path.join(out, "head_scores.json"), scores, indent=1)
    if not args.card_only:
        log["total_seconds"] = time.time() - t0
        log["total_cpu_seconds"] = time.process_time() - c0
    gemma2_lm.write_json(os.path.join(out, "training_log.json"), log)
    try:
        train_llama.plot_losses(log, os.path.join(out, "loss_curve.png"), NAME)
    except ImportError:
        print("matplotlib is missing: no loss_curve.png", flush=True)
    gemma2_card.write(out, log, scores)
    print(f"done: {(time.time() - t0) / 60:.1f} min wall, "
          f"{(time.process_time() - c0) / 60:.1f} min CPU", flush=True)


if __name__ == "__main__":
    main()
