#!/usr/bin/python3
"""The Marian fuzz target's fixed SentencePiece models and its vocab.json seeds.

Usage: make_marian_seeds.py   (writes tests/fuzz/marian/{source,target}.spm and
                               tests/fuzz/corpus/marian/*)

Two tiny Unigram models trained with python3-sentencepiece on a few sentences, and vocab.json
seeds: the pieces of both with </s> 0, <unk> 1, a language code and <pad> last; the same
followed by a NUL and a text.
"""
import json
import os

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = ["the cat sat on the mat", "a dog ran to the park", "the sun is bright today"]
TARGET = ["le chat est sur le tapis", "un chien court au parc", "le soleil est clair"]


def train(path, lines):
    prefix = path[: -len(".spm")]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines * 20), model_prefix=prefix,
                                   vocab_size=30, model_type="unigram", bos_id=-1, eos_id=-1,
                                   unk_id=0, hard_vocab_limit=False, minloglevel=2,
                                   normalization_rule_name="identity")
    os.replace(prefix + ".model", path)
    os.remove(prefix + ".vocab")
    return spm.SentencePieceProcessor(model_file=path)


def main():
    os.makedirs(os.path.join(HERE, "marian"), exist_ok=True)
    corpus = os.path.join(HERE, "corpus", "marian")
    os.makedirs(corpus, exist_ok=True)
    models = [train(os.path.join(HERE, "marian", n), t)
              for n, t in (("source.spm", SOURCE), ("target.spm", TARGET))]
    vocab = {"</s>": 0, "<unk>": 1, ">>fr<<": 2}
    for sp in models:
        for i in range(sp.get_piece_size()):
            if not sp.is_unknown(i) and not sp.is_control(i):
                vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    text = json.dumps(vocab, ensure_ascii=False).encode()
    with open(os.path.join(corpus, "vocab.json"), "wb") as f:
        f.write(text)
    with open(os.path.join(corpus, "vocab_text"), "wb") as f:
        f.write(text + b"\0>>fr<< the cat sat </s> on \xc3\xa9")


if __name__ == "__main__":
    main()
