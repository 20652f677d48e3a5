#!/usr/bin/python3
"""Attention dumps written with numpy alone, for the core dump tests (independent of attnviz's
writer and of tools/python/attnviz_dump.py).

  dump_py.py write DIR   writes good dumps (safetensors, np.savez, np.savez_compressed), the
                         float32 weights each layer must load as (<dump>.<layer>.npy), and bad
                         dumps named bad_<case>.<ext>
"""
import io
import json
import os
import struct
import sys
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_py import write_file  # noqa: E402


def softmax(x, allowed=None):
    x = np.array(x, dtype=np.float64)
    if allowed is not None:
        x = np.where(allowed, x, -np.inf)
    m = x.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = e.sum(axis=-1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1.0), 0.0)


def meta(tokens, key_tokens=None, names=None, axes=None, model="numpy-test"):
    m = {"format_version": "1", "tokens": json.dumps(tokens), "model": model}
    if key_tokens is not None:
        m["key_tokens"] = json.dumps(key_tokens)
    if names is not None:
        m["layer_names"] = json.dumps(names)
    if axes is not None:
        m["layer_axes"] = json.dumps(axes)
    return m


def save_npz(path, arrays, metadata, compressed):
    arrays = dict(arrays)
    if metadata is not None:
        arrays["__metadata__"] = np.array(json.dumps(metadata))
    (np.savez_compressed if compressed else np.savez)(path, **arrays)


def write(outdir):
    rng = np.random.default_rng(11)
    T = 5
    causal = np.tril(np.ones((T, T), dtype=bool))
    w0 = softmax(rng.standard_normal((3, T, T)) * 2, causal).astype(np.float32)
    w1 = softmax(rng.standard_normal((3, T, T))).astype(np.float32)
    w1[1, 2, :] = 0.0  # a fully masked row
    tokens = ["The", "caf\u00e9", "is", "open", "."]
    m = meta(tokens, names=["block.0", "block.1"])
    write_file(f"{outdir}/self.safetensors",
               [("attn.0", "F32", w0), ("attn.1", "F16", w1.astype(np.float16))], m)
    save_npz(f"{outdir}/self.npz", {"attn.0": w0, "attn.1": w1}, m, False)
    save_npz(f"{outdir}/self_c.npz", {"attn.0": w0, "attn.1": w1.astype(np.float64)}, m, True)
    np.save(f"{outdir}/self.0.npy", w0)
    np.save(f"{outdir}/self.1.npy", w1)
    np.save(f"{outdir}/self.1.f16.npy", w1.astype(np.float16).astype(np.float32))

    # Encoder-decoder: encoder self-attention over the 4 source tokens, decoder self-attention
    # over the 3 target tokens (with Q, K, V), cross-attention 3 x 4.
    src, tgt = ["ein", "kleiner", "Test", "</s>"], ["a", "small", "test"]
    enc = softmax(rng.standard_normal((2, 4, 4))).astype(np.float32)
    q, k, v = (rng.standard_normal((2, 3, 8)).astype(np.float32) for _ in range(3))
    dec = softmax(q.astype(np.float64) @ k.transpose(0, 2, 1) / np.sqrt(8)).astype(np.float32)
    cross = softmax(rng.standard_normal((2, 3, 4))).astype(np.float32)
    tensors = [("attn.0", "F32", enc), ("attn.1", "F32", dec), ("q.1", "F32", q),
               ("k.1", "F32", k), ("v.1", "F32", v), ("attn.2", "F32", cross)]
    write_file(f"{outdir}/encdec.safetensors", tensors,
               meta(tgt, src, ["encoder.0", "decoder.0", "decoder.0.cross"]))
    save_npz(f"{outdir}/encdec.npz", {n: a for n, _, a in tensors},
             meta(tgt, src, ["encoder.0", "decoder.0", "decoder.0.cross"],
                  ["key_self", "self", "cross"]), True)
    for i, a in enumerate([enc, dec, cross]):
        np.save(f"{outdir}/encdec.{i}.npy", a)

    # Bad dumps: each must be refused naming the tensor and the problem.
    def bad(case, arrays, metadata=meta(tokens), fmt="safetensors"):
        if fmt == "safetensors":
            write_file(f"{outdir}/bad_{case}.safetensors",
                       [(n, "F32", np.asarray(a, np.float32)) for n, a in arrays.items()], metadata)
        else:
            save_npz(f"{outdir}/bad_{case}.npz", arrays, metadata, True)

    bad("shape", {"attn.0": softmax(rng.standard_normal((3, 4, 4)))})
    neg = w0.copy()
    neg[2, 3, 1] = -0.25
    neg[2, 3, 0] += 0.25
    bad("negative", {"attn.0": w0, "attn.1": neg})
    nan = w0.copy()
    nan[0, 4, 2] = np.nan
    bad("nan", {"attn.0": nan}, fmt="npz")
    rowsum = w0.copy()
    rowsum[1, 3, :] *= 0.99
    bad("rowsum", {"attn.0": rowsum})
    bad("nometa", {"attn.0": w0}, metadata=None, fmt="npz")
    bad("notokens", {"attn.0": w0}, metadata={"format_version": "1"})
    bad("gap", {"attn.0": w0, "attn.2": w0})
    bad("qshape", {"attn.0": w0, "q.0": np.zeros((3, 4, 8))})

    # A zip bomb: the header says [1, 2, 2] float32 but the entry inflates to 64 MiB of zeros.
    hdr = io.BytesIO()
    np.save(hdr, np.full((1, 2, 2), 0.5, np.float32))
    body = hdr.getvalue()
    with zipfile.ZipFile(f"{outdir}/bad_bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__metadata__.npy", npy_bytes(np.array(json.dumps(meta(["a", "b"])))))
        z.writestr("attn.0.npy", body + bytes(64 << 20))
    # The same bomb with its declared size forged to what the header needs.
    blob = bytearray(open(f"{outdir}/bad_bomb.npz", "rb").read())
    forged = struct.pack("<I", len(body))
    big = struct.pack("<I", len(body) + (64 << 20))
    at = 0
    while (at := blob.find(big, at)) >= 0:
        blob[at:at + 4] = forged
        at += 4
    open(f"{outdir}/bad_forged.npz", "wb").write(bytes(blob))
    # Truncated: the compressed dump cut in half (no central directory).
    full = open(f"{outdir}/self_c.npz", "rb").read()
    open(f"{outdir}/bad_truncated.npz", "wb").write(full[: len(full) // 2])


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def corpus(root):
    """Seeds for tests/fuzz/corpus/{npz,dump} (committed; rerun to remake them)."""
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        write(tmp)
        for name in ["self.npz", "self_c.npz", "encdec.npz", "bad_nan.npz", "bad_nometa.npz"]:
            shutil.copy(f"{tmp}/{name}", f"{root}/npz/{name}")
        for name in ["self.safetensors", "encdec.safetensors", "bad_rowsum.safetensors"]:
            shutil.copy(f"{tmp}/{name}", f"{root}/dump/{name}")


if __name__ == "__main__":
    {"write": write, "corpus": corpus}[sys.argv[1]](sys.argv[2])
