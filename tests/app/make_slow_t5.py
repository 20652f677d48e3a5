#!/usr/bin/python3
"""A random-weight T5 (v1.1 layout: gated GELU, untied head) folder, large enough that a pass over
a source of several hundred tokens takes about a second on this machine: for the app test that
the window keeps drawing while an encoder-decoder's pass runs on the worker. numpy only, seeded;
the tokenizer is the shipped kjv-t5-align's spiece.model.

    /usr/bin/python3 tests/app/make_slow_t5.py SHIPPED_T5_DIR OUT_DIR
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
    shutil.copy(os.path.join(src, "spiece.model"), os.path.join(out, "spiece.model"))
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    d, heads, ff, layers, buckets = 512, 8, 1024, 6, 32
    dk = d // heads
    vocab = config["vocab_size"]
    config.update({"d_model": d, "d_kv": dk, "num_heads": heads, "d_ff": ff,
                   "num_layers": layers, "num_decoder_layers": layers,
                   "relative_attention_num_buckets": buckets})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    rng = np.random.default_rng(33)

    def w(*shape, std=0.05):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)

    t = {"shared.weight": w(vocab, d, std=1.0), "lm_head.weight": w(vocab, d),
         "encoder.final_layer_norm.weight": np.ones(d, np.float32),
         "decoder.final_layer_norm.weight": np.ones(d, np.float32)}
    for stack in ("encoder", "decoder"):
        for l in range(layers):
            p = "%s.block.%d.layer." % (stack, l)
            sites = ["0.SelfAttention"] + (["1.EncDecAttention"] if stack == "decoder" else [])
            for s in sites:
                for m in "qkvo":
                    t[p + s + "." + m + ".weight"] = w(d, d)
                t[p + s.split(".")[0] + ".layer_norm.weight"] = np.ones(d, np.float32)
            if l == 0:
                t[p + "0.SelfAttention.relative_attention_bias.weight"] = w(buckets, heads, std=0.5)
            f = "2" if stack == "decoder" else "1"
            t[p + f + ".DenseReluDense.wi_0.weight"] = w(ff, d)
            t[p + f + ".DenseReluDense.wi_1.weight"] = w(ff, d)
            t[p + f + ".DenseReluDense.wo.weight"] = w(d, ff)
            t[p + f + ".layer_norm.weight"] = np.ones(d, np.float32)
    save_file(t, os.path.join(out, "model.safetensors"))


if __name__ == "__main__":
    main()
