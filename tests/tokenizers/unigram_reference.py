#!/usr/bin/python3
"""Unigram tokenizer.json references for attnviz (python3-sentencepiece, then node).

    /usr/bin/python3 unigram_reference.py OUT_DIR CORPUS.json
    /usr/bin/python3 unigram_reference.py --convert SPIECE.model OUT_DIR CORPUS.json

Trains a small SentencePiece Unigram model as T5's (pad 0, </s> 1, <unk> 2, no BOS, nmt_nfkc
normalization, no byte fallback) and writes model folders the way Hugging Face's converter
(transformers' convert_slow_tokenizer: SpmConverter / T5Converter) turns spiece.model into a
tokenizer.json:
  OUT_DIR/t5     spiece.model and tokenizer.json: vocab [piece, score] in id order and the
                 sentinels <extra_id_99> .. <extra_id_0> after it, unk_id, a normalizer Sequence
                 of Precompiled (the model's precompiled_charsmap, base64), Strip (right) and
                 Replace(" {2,}" -> "▁"), a Metaspace pre-tokenizer (prepend_scheme "always"),
                 TemplateProcessing "$A </s>" / "$A </s> $B </s>", a Metaspace decoder, and the
                 control pieces and sentinels as special added tokens;
  OUT_DIR/flan   tokenizer.json alone in the older layout that Flan-T5's files have: normalizer
                 Sequence of Precompiled and Replace(" {2,}" -> " "), pre-tokenizer Sequence of
                 WhitespaceSplit and Metaspace(add_prefix_space true);
  OUT_DIR/bytes  a model trained with byte_fallback (its <0xNN> pieces), tokenizer.json with
                 "byte_fallback": true (the reference for it is sentencepiece's alone: the npm
                 port has no Unigram byte fallback);
and OUT_DIR/spm.json: {"t5": [[ids]...], "bytes": [[ids]...]}, python3-sentencepiece's
sp.encode(text) + [</s>] for every corpus text, the text first cut at the control and unknown
pieces written in it (each its own id), as T5Tokenizer does.
"""
import base64
import json
import os
import sys

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

TRAINING_TEXT = """Once upon a time, there was a little girl named Lily. She loved to play outside.
One day, she saw a big red ball in the park. "Can I play with you?" she asked the ball.
The sun was warm and the sky was blue. Tom and his dog ran to the river, 1 2 3 4 5!
Numbers like 42, 1999 and 3.14 appear; so do symbols: # $ % & * ( ) [ ] { } < > = + -.
Il était une fois un château. Über den Wolken. ¿Dónde está la biblioteca? Größe naïve café.
translate English to German: The house is wonderful. summarize: studies have shown that owning a dog
"""
EXTRA_IDS = 100


def train(out, vocab_size, extra):
    os.makedirs(out, exist_ok=True)
    corpus = os.path.join(out, "train.txt")
    with open(corpus, "w") as f:
        for _ in range(20):
            f.write(TRAINING_TEXT)
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(out, "spiece"), model_type="unigram",
        vocab_size=vocab_size, hard_vocab_limit=False, character_coverage=1.0, pad_id=0,
        eos_id=1, unk_id=2, bos_id=-1, minloglevel=2, **extra)
    os.remove(corpus)
    os.remove(os.path.join(out, "spiece.vocab"))
    return os.path.join(out, "spiece.model")


def added(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def tokenizer_json(model_path, flan, byte_fallback, extra_ids=EXTRA_IDS):
    proto = pb.ModelProto()
    with open(model_path, "rb") as f:
        proto.ParseFromString(f.read())
    vocab = [[p.piece, p.score] for p in proto.pieces]
    n = len(vocab)
    vocab += [["<extra_id_%d>" % i, 0.0] for i in range(extra_ids - 1, -1, -1)]
    eos = next(i for i, p in enumerate(proto.pieces) if p.piece == "</s>")
    tokens = [added(i, p.piece) for i, p in enumerate(proto.pieces) if p.type in (2, 3)]
    tokens += [added(n + k, vocab[n + k][0]) for k in range(extra_ids)]
    charsmap = base64.b64encode(proto.normalizer_spec.precompiled_charsmap).decode()
    if flan:
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}]}
        decoder = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    else:
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]}
        pre = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
               "split": True}
        decoder = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                   "split": True}
    seq = lambda s: {"Sequence": {"id": s, "type_id": 0}}
    tok = {"SpecialToken": {"id": "</s>", "type_id": 0}}
    single, pair = [seq("A"), tok], [seq("A"), tok, seq("B"), tok]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens,
        "normalizer": normalizer, "pre_tokenizer": pre,
        "post_processor": {"type": "TemplateProcessing", "single": single, "pair": pair,
                           "special_tokens": {"</s>": {"id": "</s>", "ids": [eos],
                                                       "tokens": ["</s>"]}}},
        "decoder": decoder,
        "model": {"type": "Unigram", "unk_id": proto.trainer_spec.unk_id, "vocab": vocab,
                  "byte_fallback": byte_fallback},
    }


def encode(sp, text):
    """sp.encode of the text cut at the control and unknown pieces written in it (</s>, <unk>,
    <pad>: each its own id), as T5Tokenizer splits its special tokens out first."""
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


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


def convert(spiece, out, corpus_path):
    """--convert: an existing spiece.model (no room for sentinels) as its tokenizer.json, and
    python3-sentencepiece's ids of the corpus in OUT/spm.json."""
    corpus = json.load(open(corpus_path, encoding="utf-8"))
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "tokenizer.json"), tokenizer_json(spiece, False, False, 0))
    sp = spm.SentencePieceProcessor()
    sp.Load(spiece)
    write_json(os.path.join(out, "spm.json"), [encode(sp, t) + [sp.eos_id()] for t in corpus])


def main():
    if sys.argv[1] == "--convert":
        convert(*sys.argv[2:5])
        return
    out, corpus_path = sys.argv[1], sys.argv[2]
    corpus = json.load(open(corpus_path, encoding="utf-8"))
    config = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
              "extra_ids": EXTRA_IDS, "tokenizer_class": "T5Tokenizer"}
    t5 = train(os.path.join(out, "t5"), 300, {})
    write_json(os.path.join(out, "t5", "tokenizer.json"), tokenizer_json(t5, False, False))
    write_json(os.path.join(out, "t5", "tokenizer_config.json"), config)
    os.makedirs(os.path.join(out, "flan"), exist_ok=True)
    write_json(os.path.join(out, "flan", "tokenizer.json"), tokenizer_json(t5, True, False))
    write_json(os.path.join(out, "flan", "tokenizer_config.json"), config)
    by = train(os.path.join(out, "bytes"), 400, {"byte_fallback": True})
    write_json(os.path.join(out, "bytes", "tokenizer.json"), tokenizer_json(by, False, True))
    ref = {}
    for name, path in (("t5", t5), ("bytes", by)):
        sp = spm.SentencePieceProcessor()
        sp.Load(path)
        ref[name] = [encode(sp, t) + [sp.eos_id()] for t in corpus]
    os.remove(by)  # the byte-fallback folder holds tokenizer.json alone
    write_json(os.path.join(out, "spm.json"), ref)


if __name__ == "__main__":
    main()
