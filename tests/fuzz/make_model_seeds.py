#!/usr/bin/python3
"""Seeds for attnviz_fuzz_model: tiny GGUF model files (a few KB each) that open as models, so the
fuzzer starts inside the model config, the family table and the tensor checks rather than at the
GGUF header. Written with tools/gguf/gguf_file.py; committed with this script:

    /usr/bin/python3 tests/fuzz/make_model_seeds.py tests/fuzz/corpus/model

llama: 1 layer, d 8, 2 heads over 1 KV head, MLP 16, a 20-token SentencePiece-style vocabulary
gpt2:  1 layer, d 8, 2 heads, MLP 16, learned positions, a byte-level BPE vocabulary (20 tokens)
bert:  1 layer, d 8, 2 heads, MLP 16, learned positions, 2 token types, a WordPiece vocabulary in
       llama.cpp's spelling (20 tokens), no masked-LM head (llama.cpp's layout)
t5:    1 encoder and 1 decoder layer, d 8, 2 heads of 4, gated MLP 16, 4 relative buckets, a
       Unigram vocabulary (20 pieces, no normalizer map), the head tied
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import gguf_file as gg  # noqa: E402

D, H, KV, I, V, CTX = 8, 2, 1, 16, 20, 32


def tensors(w, names_shapes, rng):
    for name, shape in names_shapes:
        data = (rng.standard_normal(int(np.prod(shape))) * 0.1).astype(np.float32)
        if name.endswith("norm.weight"):
            data = np.ones(int(np.prod(shape)), np.float32)
        # ggml's ne: innermost first
        w.add_tensor(name, data, "F32", list(reversed(shape)))


def llama(path, rng):
    w = gg.GGUFWriter()
    w.add("general.architecture", gg.STR("llama"))
    for k, v in [("block_count", 1), ("embedding_length", D), ("feed_forward_length", I),
                 ("attention.head_count", H), ("attention.head_count_kv", KV),
                 ("context_length", CTX), ("rope.dimension_count", D // H)]:
        w.add("llama." + k, gg.U32(v))
    w.add("llama.attention.layer_norm_rms_epsilon", gg.F32(1e-5))
    toks = ["<unk>", "<s>", "</s>"] + ["\u2581" + c for c in "abcdefgh"] + list("abcdefghi")
    w.add("tokenizer.ggml.model", gg.STR("llama"))
    w.add("tokenizer.ggml.tokens", gg.ARR(gg.STRT, toks))
    w.add("tokenizer.ggml.scores", gg.ARR(gg.F32T, np.arange(V, dtype=np.float32) * -1.0))
    w.add("tokenizer.ggml.token_type", gg.ARR(gg.I32T, np.array([2, 3, 3] + [1] * 17, np.int32)))
    w.add("tokenizer.ggml.bos_token_id", gg.U32(1))
    w.add("tokenizer.ggml.eos_token_id", gg.U32(2))
    dh = D // H
    tensors(w, [("token_embd.weight", (V, D)), ("output_norm.weight", (D,)),
                ("blk.0.attn_norm.weight", (D,)), ("blk.0.attn_q.weight", (H * dh, D)),
                ("blk.0.attn_k.weight", (KV * dh, D)), ("blk.0.attn_v.weight", (KV * dh, D)),
                ("blk.0.attn_output.weight", (D, H * dh)), ("blk.0.ffn_norm.weight", (D,)),
                ("blk.0.ffn_gate.weight", (I, D)), ("blk.0.ffn_up.weight", (I, D)),
                ("blk.0.ffn_down.weight", (D, I))], rng)
    w.write(path)


def gpt2(path, rng):
    w = gg.GGUFWriter()
    w.add("general.architecture", gg.STR("gpt2"))
    for k, v in [("block_count", 1), ("embedding_length", D), ("feed_forward_length", I),
                 ("attention.head_count", H), ("context_length", CTX)]:
        w.add("gpt2." + k, gg.U32(v))
    w.add("gpt2.attention.layer_norm_epsilon", gg.F32(1e-5))
    toks = list("abcdefghijklmnopqr") + ["\u0120a", "<|endoftext|>"]
    w.add("tokenizer.ggml.model", gg.STR("gpt2"))
    w.add("tokenizer.ggml.pre", gg.STR("gpt-2"))
    w.add("tokenizer.ggml.tokens", gg.ARR(gg.STRT, toks))
    w.add("tokenizer.ggml.token_type", gg.ARR(gg.I32T, np.array([1] * 19 + [3], np.int32)))
    w.add("tokenizer.ggml.merges", gg.ARR(gg.STRT, ["\u0120 a"]))
    w.add("tokenizer.ggml.eos_token_id", gg.U32(19))
    names = [("token_embd.weight", (V, D)), ("position_embd.weight", (CTX, D)),
             ("output_norm.weight", (D,)), ("output_norm.bias", (D,)),
             ("blk.0.attn_norm.weight", (D,)), ("blk.0.attn_norm.bias", (D,)),
             ("blk.0.attn_qkv.weight", (3 * D, D)), ("blk.0.attn_qkv.bias", (3 * D,)),
             ("blk.0.attn_output.weight", (D, D)), ("blk.0.attn_output.bias", (D,)),
             ("blk.0.ffn_norm.weight", (D,)), ("blk.0.ffn_norm.bias", (D,)),
             ("blk.0.ffn_up.weight", (I, D)), ("blk.0.ffn_up.bias", (I,)),
             ("blk.0.ffn_down.weight", (D, I)), ("blk.0.ffn_down.bias", (D,))]
    tensors(w, names, rng)
    w.write(path)


def bert(path, rng):
    w = gg.GGUFWriter()
    w.add("general.architecture", gg.STR("bert"))
    for k, v in [("block_count", 1), ("embedding_length", D), ("feed_forward_length", I),
                 ("attention.head_count", H), ("context_length", CTX)]:
        w.add("bert." + k, gg.U32(v))
    w.add("bert.attention.layer_norm_epsilon", gg.F32(1e-12))
    w.add("bert.attention.causal", gg.BOOL_(False))
    w.add("bert.pooling_type", gg.U32(2))
    w.add("tokenizer.ggml.token_type_count", gg.U32(2))
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["\u2581" + c for c in "abcdefgh"] + \
        list("abcdefg")
    w.add("tokenizer.ggml.model", gg.STR("bert"))
    w.add("tokenizer.ggml.tokens", gg.ARR(gg.STRT, toks))
    w.add("tokenizer.ggml.token_type", gg.ARR(gg.I32T, np.array([3] * 5 + [1] * 15, np.int32)))
    for k, v in [("unknown", 1), ("seperator", 3), ("padding", 0), ("cls", 2), ("mask", 4)]:
        w.add("tokenizer.ggml.%s_token_id" % k, gg.U32(v))
    names = [("token_embd.weight", (V, D)), ("token_types.weight", (2, D)),
             ("position_embd.weight", (CTX, D)), ("token_embd_norm.weight", (D,)),
             ("token_embd_norm.bias", (D,))]
    for n, shape in [("attn_q", (D, D)), ("attn_k", (D, D)), ("attn_v", (D, D)),
                     ("attn_output", (D, D)), ("attn_output_norm", (D,)), ("ffn_up", (I, D)),
                     ("ffn_down", (D, I)), ("layer_output_norm", (D,))]:
        names.append(("blk.0.%s.weight" % n, shape))
        names.append(("blk.0.%s.bias" % n, (shape[0],)))
    tensors(w, names, rng)
    w.write(path)


def t5(path, rng):
    w = gg.GGUFWriter()
    w.add("general.architecture", gg.STR("t5"))
    for k, v in [("block_count", 1), ("decoder_block_count", 1), ("embedding_length", D),
                 ("feed_forward_length", I), ("attention.head_count", H),
                 ("attention.key_length", D // H), ("attention.value_length", D // H),
                 ("attention.relative_buckets_count", 4), ("context_length", CTX),
                 ("decoder_start_token_id", 0)]:
        w.add("t5." + k, gg.U32(v))
    w.add("t5.attention.layer_norm_rms_epsilon", gg.F32(1e-6))
    toks = ["<pad>", "</s>", "<unk>"] + ["\u2581" + c for c in "abcdefgh"] + list("abcdefghi")
    w.add("tokenizer.ggml.model", gg.STR("t5"))
    w.add("tokenizer.ggml.tokens", gg.ARR(gg.STRT, toks))
    w.add("tokenizer.ggml.scores", gg.ARR(gg.F32T, np.arange(V, dtype=np.float32) * -0.5))
    w.add("tokenizer.ggml.token_type", gg.ARR(gg.I32T, np.array([3, 3, 2] + [1] * 17, np.int32)))
    w.add("tokenizer.ggml.eos_token_id", gg.U32(1))
    w.add("tokenizer.ggml.padding_token_id", gg.U32(0))
    w.add("tokenizer.ggml.add_space_prefix", gg.BOOL_(True))
    w.add("tokenizer.ggml.remove_extra_whitespaces", gg.BOOL_(True))
    names = [("token_embd.weight", (V, D)), ("enc.output_norm.weight", (D,)),
             ("dec.output_norm.weight", (D,)), ("enc.blk.0.attn_rel_b.weight", (4, H)),
             ("dec.blk.0.attn_rel_b.weight", (4, H))]
    for stack in ("enc", "dec"):
        sites = ["attn_"] + (["cross_attn_"] if stack == "dec" else [])
        for s in sites:
            names.append(("%s.blk.0.%snorm.weight" % (stack, s), (D,)))
            names += [("%s.blk.0.%s%s.weight" % (stack, s, m), (D, D)) for m in "qkvo"]
        names += [("%s.blk.0.ffn_norm.weight" % stack, (D,)),
                  ("%s.blk.0.ffn_gate.weight" % stack, (I, D)),
                  ("%s.blk.0.ffn_up.weight" % stack, (I, D)),
                  ("%s.blk.0.ffn_down.weight" % stack, (D, I))]
    tensors(w, names, rng)
    w.write(path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "model")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(3)
    llama(os.path.join(out, "llama_tiny.gguf"), rng)
    gpt2(os.path.join(out, "gpt2_tiny.gguf"), rng)
    bert(os.path.join(out, "bert_tiny.gguf"), rng)
    t5(os.path.join(out, "t5_tiny.gguf"), rng)
    return 0


if __name__ == "__main__":
    sys.exit(main())
