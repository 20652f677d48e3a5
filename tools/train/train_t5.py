#!/usr/bin/python3
"""Trains kjv-t5-align, the T5 v1.1 encoder-decoder that ships in assets/models/kjv-t5-align, on
the CPU, from the King James Bible of Debian's bible-kjv package. One command:

    /usr/bin/python3 tools/train/train_t5.py --out assets/models/kjv-t5-align

The task (t5_align.py): KJV clauses enciphered letter by letter with their word order reversed,
so target word i aligns with source word n-1-i by construction. A SentencePiece Unigram model
(pad 0, </s> 1, <unk> 2, no BOS, as T5's spiece.model) is trained on the training clauses and
their translations together: one shared vocabulary. It writes, into --out: config.json (HF
T5Config, gated GELU, untied head), model.safetensors (F32, HF key names), spiece.model,
training_log.json. The card (README.md) is written by t5_card.py, which measures through attnviz.

Deterministic: one torch thread, seeded init and batches, the tokenizer trained in file order.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import sentencepiece as spm  # noqa: E402
from sentencepiece import sentencepiece_model_pb2 as sp_pb2  # noqa: E402
import torch  # noqa: E402

import t5_align  # noqa: E402
from t5_align import ref  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "formats"))
from safetensors_py import write_file  # noqa: E402

SEED = 1234
VOCAB = 1600


def config(vocab):
    return {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"],
            "d_model": 128, "d_kv": 32, "num_heads": 4, "d_ff": 256, "num_layers": 2,
            "num_decoder_layers": 2, "relative_attention_num_buckets": 32,
            "relative_attention_max_distance": 128, "layer_norm_epsilon": 1e-6,
            "feed_forward_proj": "gated-gelu", "dense_act_fn": "gelu_new",
            "is_gated_act": True, "tie_word_embeddings": False, "vocab_size": vocab,
            "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0,
            "is_encoder_decoder": True}


def train_tokenizer(lines, out_path):
    tmp = tempfile.mkdtemp(prefix="kjv-t5-")
    try:
        data = os.path.join(tmp, "clauses.txt")
        with open(data, "w") as f:
            f.writelines(s + "\n" for s in lines)
        spm.SentencePieceTrainer.train(
            input=data, model_prefix=os.path.join(tmp, "spiece"), vocab_size=VOCAB,
            model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
            hard_vocab_limit=False, num_threads=1, input_sentence_size=0,
            shuffle_input_sentence=False, character_coverage=1.0, minloglevel=2)
        proto = sp_pb2.ModelProto()
        with open(os.path.join(tmp, "spiece.model"), "rb") as f:
            proto.ParseFromString(f.read())
    finally:
        shutil.rmtree(tmp)
    # The trainer records its input file and prefix (temporary names): fixed here, so the bytes
    # depend only on the text and the settings.
    proto.trainer_spec.input[:] = ["clauses.txt"]
    proto.trainer_spec.model_prefix = "spiece"
    with open(out_path, "wb") as f:
        f.write(proto.SerializeToString(deterministic=True))
    return spm.SentencePieceProcessor(model_file=out_path)


def batchify(pairs, idx):
    src = [pairs[i][0] for i in idx]
    tgt = [pairs[i][1] for i in idx]
    S = max(map(len, src))
    T = max(map(len, tgt))
    s = torch.zeros(len(idx), S, dtype=torch.long)
    dec = torch.zeros(len(idx), T, dtype=torch.long)
    lab = torch.full((len(idx), T), -100, dtype=torch.long)
    for b, (a, t) in enumerate(zip(src, tgt)):
        s[b, :len(a)] = torch.tensor(a)
        dec[b, 1:len(t)] = torch.tensor(t[:-1])  # decoder start 0, then the target without EOS
        lab[b, :len(t)] = torch.tensor(t)
    return s, dec, lab


def mean_loss(model, pairs, bs=256):
    tot, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(pairs), bs):
            s, d, lab = batchify(pairs, range(i, min(len(pairs), i + bs)))
            z = model(s, d)
            tot += float(torch.nn.functional.cross_entropy(
                z.reshape(-1, z.shape[-1]), lab.reshape(-1), ignore_index=-100, reduction="sum"))
            n += int((lab != -100).sum())
    return tot / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    random.seed(SEED)
    os.makedirs(a.out, exist_ok=True)
    train, held = t5_align.data()
    sp = train_tokenizer(train + [t5_align.translate(s) for s in train],
                         os.path.join(a.out, "spiece.model"))
    vocab = sp.get_piece_size()
    cfg = config(vocab)

    def enc(s):
        return sp.encode(s) + [1]
    tp = [(enc(s), enc(t5_align.translate(s))) for s in train]
    hp = [(enc(s), enc(t5_align.translate(s))) for s in held]
    model = t5_align.T5(cfg, vocab, SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=0.01)
    g = torch.Generator().manual_seed(SEED)
    log, t0 = [], time.time()
    for step in range(a.steps):
        for group in opt.param_groups:
            group["lr"] = t5_align.cosine_lr(step, a.steps, a.lr, 200)
        idx = torch.randint(0, len(tp), (a.batch,), generator=g).tolist()
        s, d, lab = batchify(tp, idx)
        z = model(s, d)
        loss = torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), lab.reshape(-1),
                                                 ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 250 == 0 or step == a.steps - 1:
            entry = {"step": step, "train_batch_loss": round(float(loss), 4),
                     "seconds": round(time.time() - t0, 1)}
            if step % 1000 == 0 or step == a.steps - 1:
                entry["heldout_loss"] = round(mean_loss(model, hp), 4)
            log.append(entry)
            print(json.dumps(entry), flush=True)
    final = {"train_loss": round(mean_loss(model, tp[:4096]), 4),
             "heldout_loss": round(mean_loss(model, hp), 4)}
    print(json.dumps(final))
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_file(os.path.join(a.out, "model.safetensors"),
               [(k, "F32", v) for k, v in
                sorted(ref.t5_tensors(model.reference_params(), cfg).items())])
    with open(os.path.join(a.out, "training_log.json"), "w") as f:
        json.dump({"seed": SEED, "steps": a.steps, "batch": a.batch, "peak_lr": a.lr,
                   "warmup": 200, "schedule": "cosine", "optimizer": "AdamW(0.9, 0.98, wd 0.01)",
                   "train_clauses": len(train), "heldout_clauses": len(held),
                   "vocab_size": vocab, "seconds": round(time.time() - t0, 1),
                   "final": final, "log": log}, f, indent=1)


if __name__ == "__main__":
    main()
