#!/usr/bin/python3
"""SentencePiece references for attnviz's tokenizer.model support (python3-sentencepiece).

    /usr/bin/python3 spm_reference.py OUT_DIR CORPUS.json [STORIES260K.gguf]

Writes, each with a tokenizer.model:
  OUT_DIR/bpe       a BPE model trained here (byte_fallback, a user-defined symbol "<tool>"),
  OUT_DIR/unigram   a Unigram model trained here (no byte fallback: unknown characters -> <unk>),
  OUT_DIR/stories   the stories260K GGUF's vocabulary as a tokenizer.model (when the GGUF is
                    given), built by tests/model/stories260k_to_hf.py's write_tokenizer,
and OUT_DIR/reference.json: {"<name>": [[ids]...]}, sp.encode(text) of every corpus text (no
BOS/EOS) after cutting the text at the model's control and unknown pieces written in it, each
such piece its own id (what attnviz does, and transformers' slow LlamaTokenizer).
"""
import json
import os
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))

TRAINING_TEXT = """Once upon a time, there was a little girl named Lily. She loved to play outside.
One day, she saw a big red ball in the park. "Can I play with you?" she asked the ball.
The sun was warm and the sky was blue. Tom and his dog ran to the river, 1 2 3 4 5!
Numbers like 42, 1999 and 3.14 appear; so do symbols: # $ % & * ( ) [ ] { } < > = + -.
Il était une fois un château. Über den Wolken. ¿Dónde está la biblioteca?
"""


def train(out, model_type, vocab_size, extra):
    os.makedirs(out, exist_ok=True)
    corpus = os.path.join(out, "train.txt")
    with open(corpus, "w") as f:
        for _ in range(20):
            f.write(TRAINING_TEXT)
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(out, "tokenizer"), model_type=model_type,
        vocab_size=vocab_size, hard_vocab_limit=False, character_coverage=1.0, bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
        minloglevel=2, **extra)
    os.remove(corpus)
    os.remove(os.path.join(out, "tokenizer.vocab"))


def stories(gguf, out):
    sys.path.insert(0, os.path.join(HERE, "..", "model"))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
    from gguf_file import GGUFReader  # noqa: E402
    from stories260k_to_hf import write_tokenizer  # noqa: E402
    os.makedirs(out, exist_ok=True)
    write_tokenizer(GGUFReader(gguf).metadata, out)


def encode(sp, text):
    specials = sorted((sp.id_to_piece(i) for i in range(sp.get_piece_size())
                       if sp.is_control(i) or sp.is_unknown(i)), key=len, reverse=True)
    ids, start, pos = [], 0, 0
    while pos < len(text):
        hit = next((s for s in specials if s and text.startswith(s, pos)), None)
        if hit is None:
            pos += 1
            continue
        if pos > start:
            ids += sp.encode(text[start:pos])
        ids.append(sp.piece_to_id(hit))
        pos = start = pos + len(hit)
    if start < len(text):
        ids += sp.encode(text[start:])
    return ids


def main():
    out, corpus_path = sys.argv[1], sys.argv[2]
    corpus = json.load(open(corpus_path))
    train(os.path.join(out, "bpe"), "bpe", 600, {"byte_fallback": True, "user_defined_symbols": ["<tool>"]})
    train(os.path.join(out, "unigram"), "unigram", 200, {})
    names = ["bpe", "unigram"]
    if len(sys.argv) > 3:
        stories(sys.argv[3], os.path.join(out, "stories"))
        names.append("stories")
    ref = {}
    for name in names:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(out, name, "tokenizer.model"))
        ref[name] = [encode(sp, t) for t in corpus]
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main()
