#!/usr/bin/python3
"""Independent safetensors writer and reader for the core tests (numpy only; Debian has no
`safetensors` package). The format: u64 little-endian header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
data section.

  safetensors_py.py write DIR   writes DIR/good.safetensors and DIR/<tensor>.npy, the float32
                                value numpy gives each tensor (the reference for the reader)
  safetensors_py.py read FILE   prints "name dtype shape sum" per tensor and the metadata, as
                                numpy reads them, for the writer's test
"""
import json
import struct
import sys

import numpy as np


def write_file(path, tensors, metadata=None, order=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, arr in tensors:
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    keys = order or list(header)
    text = json.dumps({k: header[k] for k in keys}).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def bf16_bits(values):
    # Values chosen to be exact in bfloat16, so dropping the low 16 bits loses nothing.
    f = np.asarray(values, dtype=np.float32)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal((bits.astype(np.uint32) << 16).view(np.float32), f, equal_nan=True)
    return bits


def write(outdir):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    h = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 6.1035156e-05, 5.9604645e-08, 3.0e-06,
                  np.inf, -np.inf, np.nan, 0.333], dtype=np.float16)
    bvals = [1.0, -2.5, 0.15625, 3.3895314e38, np.float32(2.0) ** -130, np.inf, -np.inf, np.nan]
    d = rng.standard_normal((2, 2)).astype(np.float64)
    ints = np.array([1, -2, 3], dtype=np.int64)
    empty = np.zeros((0, 4), dtype=np.float32)
    scalar = np.array(4.5, dtype=np.float32)
    big = rng.standard_normal((3, 5, 7)).astype(np.float16)
    tensors = [("a", "F32", a), ("half", "F16", h), ("bf", "BF16", bf16_bits(bvals)),
               ("dbl", "F64", d), ("ints", "I64", ints), ("empty", "F32", empty),
               ("scalar", "F32", scalar), ("model.layers.0.w", "F16", big)]
    order = ["half", "__metadata__", "model.layers.0.w", "a", "bf", "dbl", "ints", "empty",
             "scalar"]
    write_file(f"{outdir}/good.safetensors", tensors,
               {"format": "pt", "tokens": json.dumps(["h\u00e9llo", "w\u00f6rld"], ensure_ascii=False)}, order)
    np.save(f"{outdir}/a.npy", a)
    np.save(f"{outdir}/half.npy", h.astype(np.float32))
    np.save(f"{outdir}/bf.npy", np.asarray(bvals, dtype=np.float32))
    np.save(f"{outdir}/dbl.npy", d.astype(np.float32))
    np.save(f"{outdir}/model.layers.0.w.npy", big.astype(np.float32).reshape(3, 35))


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    kinds = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "BF16": "<u2"}
    for name in sorted(k for k in header if k != "__metadata__"):
        e = header[name]
        b, end = e["data_offsets"]
        arr = np.frombuffer(data[b:end], dtype=kinds[e["dtype"]]).reshape(e["shape"])
        print(name, e["dtype"], list(arr.shape), repr(float(arr.astype(np.float64).sum())))
    print("metadata", json.dumps(header.get("__metadata__", {}), sort_keys=True))
    print("data_start_mod8", (8 + n) % 8)


def corpus(outdir):
    """Seeds for tests/fuzz/corpus/safetensors (committed; rerun to remake them)."""
    w = np.arange(12, dtype=np.float32).reshape(1, 3, 4) / 66.0
    write_file(f"{outdir}/f32.safetensors", [("x", "F32", w)])
    write_file(f"{outdir}/mixed.safetensors",
               [("h", "F16", np.array([1.0, -0.0, np.inf, 6e-8], dtype=np.float16)),
                ("b", "BF16", bf16_bits([1.0, 2.0])), ("i", "I8", np.array([1, -1], np.int8))],
               {"format": "pt"})
    write_file(f"{outdir}/empty.safetensors", [("e", "F32", np.zeros((0, 3), np.float32))])


if __name__ == "__main__":
    {"write": write, "read": read, "corpus": corpus}[sys.argv[1]](sys.argv[2])
