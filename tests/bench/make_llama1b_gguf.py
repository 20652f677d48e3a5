#!/usr/bin/python3
"""Random-init GGUF files in Llama-3.2-1B's shape, for the large-model benchmarks
(docs/performance.md, "Large models"; tests/bench/bench_large.sh).

    /usr/bin/python3 tests/bench/make_llama1b_gguf.py OUT_DIR [--types F16,Q8_0,Q4_K]

Shape: 16 layers, d 2048, 32 query heads over 8 KV heads of 64, MLP 8192, vocabulary 128256,
tied head, RoPE theta 500000, RMSNorm 1e-5 (Llama-3.2-1B's config.json). The vocabulary is a
byte-level BPE of 128256 pieces (a text of n ASCII bytes is n tokens). Weights are N(0, 0.02),
norm scales N(1, 0.1), written as an F16 safetensors folder and converted by
tools/gguf/hf_to_gguf.py to each type (Q4_K stands for llama.cpp's Q4_K_M only in its main type:
every matrix is Q4_K here). Each file is skipped when it is already there.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

L, H, KV, DH, D, I, V = 16, 32, 8, 64, 2048, 8192, 128256


def byte_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_folder(folder):
    os.makedirs(folder, exist_ok=True)
    json.dump({"model_type": "llama", "hidden_size": D, "intermediate_size": I,
               "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
               "head_dim": DH, "hidden_act": "silu", "max_position_embeddings": 4096,
               "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "vocab_size": V,
               "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": V - 1},
              open(os.path.join(folder, "config.json"), "w"))
    u = byte_unicode()
    alpha = [u[b] for b in range(256)]
    vocab = {a: i for i, a in enumerate(alpha)}
    for n in range(V - 257):
        piece = alpha[n // 256] + alpha[n % 256] if n < 65536 else \
            alpha[(n >> 16) & 255] + alpha[(n >> 8) & 255] + alpha[n & 255]
        vocab[piece] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    json.dump(vocab, open(os.path.join(folder, "vocab.json"), "w"))
    open(os.path.join(folder, "merges.txt"), "w").write("#version: 0.2\n")

    shapes = [("model.embed_tokens.weight", (V, D)), ("model.norm.weight", (D,))]
    for l in range(L):
        p = "model.layers.%d." % l
        shapes += [(p + "input_layernorm.weight", (D,)),
                   (p + "post_attention_layernorm.weight", (D,)),
                   (p + "self_attn.q_proj.weight", (H * DH, D)),
                   (p + "self_attn.k_proj.weight", (KV * DH, D)),
                   (p + "self_attn.v_proj.weight", (KV * DH, D)),
                   (p + "self_attn.o_proj.weight", (D, H * DH)),
                   (p + "mlp.gate_proj.weight", (I, D)),
                   (p + "mlp.up_proj.weight", (I, D)),
                   (p + "mlp.down_proj.weight", (D, I))]
    header, off = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    rng = np.random.default_rng(1)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape in shapes:
            norm = name.endswith("norm.weight")
            a = rng.standard_normal(shape, dtype=np.float32) * (0.1 if norm else 0.02)
            if norm:
                a += 1.0
            f.write(a.astype(np.float16).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--types", default="F16,Q8_0,Q4_K")
    a = ap.parse_args()
    folder = os.path.join(a.out_dir, "llama1b-folder")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        write_folder(folder)
    conv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "gguf",
                        "hf_to_gguf.py")
    for t in a.types.split(","):
        out = os.path.join(a.out_dir, "llama1b-%s.gguf" % t)
        if os.path.exists(out):
            continue
        subprocess.run([sys.executable, conv, folder, out + ".part", "--type", t,
                        "--tokenizer", "gpt2", "--pre", "llama-bpe", "--name", "llama1b-shape"],
                       check=True)
        os.replace(out + ".part", out)
        print(out)


if __name__ == "__main__":
    main()
