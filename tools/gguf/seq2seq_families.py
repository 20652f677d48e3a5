"""T5 for hf_to_gguf.py, written in llama.cpp's `t5` layout (its metadata keys and tensor names):

  - Tensors: token_embd (shared.weight, or the first of encoder/decoder.embed_tokens), output
    (lm_head, when the head is not tied), enc.output_norm, dec.output_norm, and per layer
    enc.blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_o, ffn_norm, ffn_up (wi or wi_1),
    ffn_gate (wi_0), ffn_down (wo)}, dec.blk.N.{the same, cross_attn_norm, cross_attn_q, _k, _v,
    _o}; the relative position tables as enc.blk.0.attn_rel_b / dec.blk.0.attn_rel_b.
  - Metadata: t5.context_length (n_positions, 512 when absent), embedding_length (d_model),
    feed_forward_length (d_ff), block_count (num_layers: the encoder's),
    decoder_block_count (num_decoder_layers, when the config has it), attention.head_count,
    attention.key_length and value_length (d_kv), attention.layer_norm_epsilon and
    layer_norm_rms_epsilon, attention.relative_buckets_count, decoder_start_token_id.
  - Vocabulary: tokenizer.ggml.model "t5" from spiece.model (a Unigram model): every piece with
    its score and type (added_tokens.json's as user-defined), padded to vocab_size with unused
    [PAD<i>] pieces, add_space_prefix, remove_extra_whitespaces and precompiled_charsmap (the
    normalizer, uint8) from the model's normalizer spec; eos / padding ids from the config.

What a GGUF cannot say is refused: a feed_forward_proj other than relu (a stack without
ffn_gate: llama.cpp runs ReLU) or gated-gelu (with ffn_gate: GELU). llama.cpp's buckets reach
max_distance 128 whatever relative_attention_max_distance was; a config with another value is
converted with a warning (the file computes llama.cpp's buckets).
"""

import os
import sys

import numpy as np

from gguf_file import U32, F32, STR, BOOL_, ARR, U8T  # noqa: F401

ARCH = {"t5": "t5"}
LLAMA_CPP_MAX_DISTANCE = 128


class Seq2SeqError(Exception):
    pass


def _fields(b):
    """(field number, wire type, value) of one protobuf message"""
    def varint(i):
        r = s = 0
        while True:
            c = b[i]
            i += 1
            r |= (c & 0x7F) << s
            s += 7
            if not c & 0x80:
                return r, i
    i = 0
    while i < len(b):
        key, i = varint(i)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = varint(i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise Seq2SeqError("spiece.model: bad protobuf wire type %d" % wt)
        yield fn, wt, v


def spm_specs(model_bytes):
    """(model_type, precompiled_charsmap, add_dummy_prefix, remove_extra_whitespaces) of a
    SentencePiece ModelProto (trainer_spec 2: model_type 3; normalizer_spec 3: charsmap 2, add
    dummy prefix 3, remove extra whitespaces 4; defaults unigram, none, true, true)"""
    mtype, charsmap, prefix, ws = 1, b"", True, True
    for fn, wt, v in _fields(model_bytes):
        if fn == 2 and wt == 2:
            for f2, w2, v2 in _fields(v):
                if f2 == 3 and w2 == 0:
                    mtype = v2
        elif fn == 3 and wt == 2:
            for f2, w2, v2 in _fields(v):
                if f2 == 2 and w2 == 2:
                    charsmap = bytes(v2)
                elif f2 == 3 and w2 == 0:
                    prefix = bool(v2)
                elif f2 == 4 and w2 == 0:
                    ws = bool(v2)
    return mtype, charsmap, prefix, ws


def t5_vocab(folder, config, vocab, types, special_ids):
    """Fills vocab (hf_to_gguf.Vocab) from spiece.model (or tokenizer.model); types: (normal,
    unknown, control, user_defined, unused, byte); special_ids(lookup, vocab) sets the ids."""
    import sentencepiece
    normal, unknown, control, user_defined, unused, byte = types
    path = os.path.join(folder, "tokenizer.model")
    if not os.path.exists(path):
        path = os.path.join(folder, "spiece.model")
    if not os.path.exists(path):
        raise Seq2SeqError("%s: no spiece.model or tokenizer.model" % folder)
    with open(path, "rb") as f:
        raw = f.read()
    mtype, charsmap, prefix, ws = spm_specs(raw)
    if mtype != 1:
        raise Seq2SeqError("%s: a SentencePiece model of type %d, not Unigram" % (path, mtype))
    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromSerializedProto(raw)
    n = int(config.get("vocab_size") or sp.GetPieceSize())
    vocab.model, vocab.pre = "t5", "default"
    vocab.tokens = ["[PAD%d]" % i for i in range(n)]
    vocab.scores = [-10000.0] * n
    vocab.types = [unused] * n
    for i in range(min(n, sp.GetPieceSize())):
        t = normal
        if sp.IsUnknown(i):
            t = unknown
        elif sp.IsControl(i):
            t = control
        elif sp.IsUnused(i):
            t = unused
        elif sp.IsByte(i):
            t = byte
        vocab.tokens[i], vocab.scores[i], vocab.types[i] = sp.IdToPiece(i), float(sp.GetScore(i)), t
    import json
    added_path = os.path.join(folder, "added_tokens.json")
    if os.path.exists(added_path):
        with open(added_path, encoding="utf-8") as f:
            for text, tid in json.load(f).items():
                if tid < n:
                    vocab.tokens[tid], vocab.scores[tid], vocab.types[tid] = text, -1000.0, user_defined
    vocab.add_space_prefix = prefix
    vocab.remove_extra_whitespaces = ws
    vocab.charsmap = charsmap
    special_ids({t: i for i, t in enumerate(vocab.tokens)}, vocab)
    return vocab


def hparams(config, arch, w, quiet=False):
    a = arch + "."
    ff = config.get("feed_forward_proj", "relu")
    if ff not in ("relu", "gated-gelu"):
        raise Seq2SeqError("feed_forward_proj %r: a GGUF t5 runs relu, or gated-gelu with ffn_gate" % ff)
    md = config.get("relative_attention_max_distance", LLAMA_CPP_MAX_DISTANCE)
    if md != LLAMA_CPP_MAX_DISTANCE and not quiet:
        print("warning: relative_attention_max_distance %d: llama.cpp's buckets reach %d"
              % (md, LLAMA_CPP_MAX_DISTANCE), file=sys.stderr)
    w.add(a + "context_length", U32(config.get("n_positions", 512)))
    w.add(a + "embedding_length", U32(config["d_model"]))
    w.add(a + "feed_forward_length", U32(config["d_ff"]))
    w.add(a + "block_count", U32(config["num_layers"]))
    if config.get("num_decoder_layers") is not None:
        w.add(a + "decoder_block_count", U32(config["num_decoder_layers"]))
    w.add(a + "attention.head_count", U32(config["num_heads"]))
    w.add(a + "attention.key_length", U32(config["d_kv"]))
    w.add(a + "attention.value_length", U32(config["d_kv"]))
    eps = config.get("layer_norm_epsilon", 1e-6)
    w.add(a + "attention.layer_norm_epsilon", F32(eps))
    w.add(a + "attention.relative_buckets_count", U32(config.get("relative_attention_num_buckets", 32)))
    w.add(a + "attention.layer_norm_rms_epsilon", F32(eps))
    w.add(a + "decoder_start_token_id", U32(config.get("decoder_start_token_id", 0)))


def tensor_plan(config, names, take):
    """[(gguf name, Take)]"""
    plan = []
    for emb in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        if emb in names:
            plan.append(("token_embd.weight", take(emb)))
            break
    else:
        raise Seq2SeqError("no shared.weight (or encoder/decoder.embed_tokens.weight)")
    tied = config.get("tie_word_embeddings", True)
    if not tied:
        plan.append(("output.weight", take("lm_head.weight")))
    gated = config.get("feed_forward_proj", "relu") == "gated-gelu"
    ffn = [("DenseReluDense.wi_0", "ffn_gate"), ("DenseReluDense.wi_1", "ffn_up")] if gated \
        else [("DenseReluDense.wi", "ffn_up")]
    ffn.append(("DenseReluDense.wo", "ffn_down"))
    L_enc = config["num_layers"]
    L_dec = config.get("num_decoder_layers") or L_enc
    for stack, hf, n in (("enc", "encoder", L_enc), ("dec", "decoder", L_dec)):
        for i in range(n):
            h, b = "%s.block.%d.layer." % (hf, i), "%s.blk.%d." % (stack, i)
            plan.append((b + "attn_norm.weight", take(h + "0.layer_norm.weight")))
            for m in "qkvo":
                plan.append((b + "attn_%s.weight" % m, take(h + "0.SelfAttention.%s.weight" % m)))
            if i == 0:
                plan.append((b + "attn_rel_b.weight",
                             take(h + "0.SelfAttention.relative_attention_bias.weight")))
            k = 1
            if stack == "dec":
                plan.append((b + "cross_attn_norm.weight", take(h + "1.layer_norm.weight")))
                for m in "qkvo":
                    plan.append((b + "cross_attn_%s.weight" % m,
                                 take(h + "1.EncDecAttention.%s.weight" % m)))
                k = 2
            plan.append((b + "ffn_norm.weight", take(h + "%d.layer_norm.weight" % k)))
            for src, dst in ffn:
                plan.append((b + dst + ".weight", take(h + "%d.%s.weight" % (k, src))))
        plan.append(("%s.output_norm.weight" % stack, take("%s.final_layer_norm.weight" % hf)))
    return plan


def charsmap_value(charsmap):
    return ARR(U8T, np.frombuffer(charsmap, dtype=np.uint8))
