"""The SentencePiece BPE vocabulary of kjv-sp-llama: trained here (seeded, single-threaded, input
order fixed), and written out as tokenizer.model, tokenizer_config.json and a tokenizer.json in
Hugging Face's Llama-2 layout, converted from the SentencePiece model the way transformers'
LlamaConverter / SentencePieceExtractor does it.

Trainer settings follow Llama 2's tokenizer.model: BPE, byte_fallback (any text tokenizes: a
character that is not a piece becomes its UTF-8 bytes <0x..>), identity normalization, a dummy
"▁" prefix, extra whitespace kept, digits split, unk/bos/eos = 0/1/2 and no pad.
"""
import json
import os
import shutil
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as sp_pb2

TRAINER = dict(
    model_type="bpe",
    byte_fallback=True,
    num_threads=1,
    unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
    character_coverage=1.0,
    input_sentence_size=0,          # every line, in file order
    shuffle_input_sentence=False,
    normalization_rule_name="identity",
    add_dummy_prefix=True,
    remove_extra_whitespaces=False,
    split_digits=True,
    allow_whitespace_only_pieces=True,
    max_sentence_length=16384,
    minloglevel=2,
)


def train(lines, vocab_size, out_path):
    """Trains on `lines` (one sentence a line, in this order) and writes the model to out_path.
    The trainer records its input file and output prefix in the model; both are set to fixed
    names here so the bytes depend only on the text and the settings."""
    tmp = tempfile.mkdtemp(prefix="kjv-sp-")
    try:
        data = os.path.join(tmp, "kjv-train.txt")
        with open(data, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        spm.SentencePieceTrainer.train(input=data, model_prefix=os.path.join(tmp, "tokenizer"),
                                       vocab_size=vocab_size, **TRAINER)
        proto = sp_pb2.ModelProto()
        with open(os.path.join(tmp, "tokenizer.model"), "rb") as f:
            proto.ParseFromString(f.read())
    finally:
        shutil.rmtree(tmp)
    proto.trainer_spec.input[:] = ["kjv-train.txt"]
    proto.trainer_spec.model_prefix = "tokenizer"
    tmp_out = out_path + ".tmp"
    with open(tmp_out, "wb") as f:
        f.write(proto.SerializeToString(deterministic=True))
    os.replace(tmp_out, out_path)
    return spm.SentencePieceProcessor(model_file=out_path)


def hf_vocab_merges(model_path):
    """-> (vocab {piece: id}, merges [(a, b)]) as transformers' SentencePieceExtractor.extract
    gives them for a BPE model: every split (a, b) of every piece into two pieces is a merge;
    the splits of one piece are ordered by (id of a, id of b), and the merges by the merged
    piece's score, highest first (a stable sort, so pieces of equal score keep id order)."""
    proto = sp_pb2.ModelProto()
    with open(model_path, "rb") as f:
        proto.ParseFromString(f.read())
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    merges = []
    for piece_id, p in enumerate(proto.pieces):
        merge = p.piece
        local = []
        for k in range(1, len(merge)):
            a, b = merge[:k], merge[k:]
            if a in vocab and b in vocab:
                local.append((a, b, p.score))
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)
    return vocab, [(a, b) for a, b, _ in merges]


def _added(token_id, content):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True}


def tokenizer_json(model_path):
    """The Llama-2 tokenizer.json (HF tokenizers' layout) for this SentencePiece model."""
    vocab, merges = hf_vocab_merges(model_path)
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added(0, "<unk>"), _added(1, "<s>"), _added(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


TOKENIZER_CONFIG = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": None,
    "clean_up_tokenization_spaces": False,
    "legacy": False,
    "model_max_length": 256,
    "sp_model_kwargs": {},
    "tokenizer_class": "LlamaTokenizer",
}


def write_tokenizer_files(model_path, out_dir, model_max_length):
    """tokenizer.json and tokenizer_config.json next to tokenizer.model."""
    tok = tokenizer_json(model_path)
    cfg = dict(TOKENIZER_CONFIG, model_max_length=model_max_length)
    for name, obj, indent in (("tokenizer.json", tok, 1), ("tokenizer_config.json", cfg, 2)):
        path = os.path.join(out_dir, name)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=indent, ensure_ascii=False)
            f.write("\n")
        os.replace(path + ".tmp", path)
    return tok
