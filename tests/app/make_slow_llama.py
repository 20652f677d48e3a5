#!/usr/bin/python3
"""A random-weight LLaMA-layout folder, large enough that generating a few hundred tokens takes
seconds on this machine: for the app test that the window keeps drawing while the Generate
panel's worker decodes. numpy only, seeded; the tokenizer files are the shipped kjv-sp-llama's.

    /usr/bin/python3 tests/app/make_slow_llama.py SHIPPED_LLAMA_DIR OUT_DIR
"""
import json
import os
import shutil
import sys

import numpy as np


def save_file(tensors, path):
    """safetensors: an 8-byte little-endian header length, the JSON header, the raw F32 data."""
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(out, f))
    d, layers, heads, kv, ff, vocab, ctx = 512, 8, 8, 2, 1536, 2048, 2048
    hd = d // heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
        "intermediate_size": ff, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv, "head_dim": hd, "max_position_embeddings": ctx,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": vocab,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "torch_dtype": "float32",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    rng = np.random.default_rng(22)

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    t = {"model.embed_tokens.weight": w(vocab, d), "lm_head.weight": w(vocab, d),
         "model.norm.weight": np.ones(d, np.float32)}
    for l in range(layers):
        p = "model.layers.%d." % l
        t[p + "self_attn.q_proj.weight"] = w(heads * hd, d)
        t[p + "self_attn.k_proj.weight"] = w(kv * hd, d)
        t[p + "self_attn.v_proj.weight"] = w(kv * hd, d)
        t[p + "self_attn.o_proj.weight"] = w(d, heads * hd)
        t[p + "mlp.gate_proj.weight"] = w(ff, d)
        t[p + "mlp.up_proj.weight"] = w(ff, d)
        t[p + "mlp.down_proj.weight"] = w(d, ff)
        t[p + "input_layernorm.weight"] = np.ones(d, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
    save_file(t, os.path.join(out, "model.safetensors"))


if __name__ == "__main__":
    main()
