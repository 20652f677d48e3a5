#!/usr/bin/env python3
"""Writes a BF16 copy of an F32 model folder, for the BF16 peak-memory figure of
docs/performance.md (its target in docs/design/performance.md: BF16 within twice the file plus
64 MB). numpy only (Debian has no python3-safetensors):

    python3 tests/bench/safetensors_to_bf16.py /tmp/attnviz_smollm2_135m_<pid> /tmp/smol_bf16
    /usr/bin/time -v build/app/attnviz model --model /tmp/smol_bf16 --text "$(printf 'ab%.0s' $(seq 64))"

Each float32 is rounded to the nearest BF16 (ties to even); config.json and the tokenizer files
are copied.
"""
import json
import os
import shutil
import sys

import numpy as np


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name != "model.safetensors" and os.path.isfile(os.path.join(src, name)) \
                and not name.endswith(".gguf"):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        base = 8 + n
        tensors = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                         key=lambda kv: kv[1]["data_offsets"][0])
        out, parts, offset = {}, [], 0
        for name, t in tensors:
            if t["dtype"] != "F32":
                raise SystemExit(f"{name} is {t['dtype']}; expected F32")
            a, b = t["data_offsets"]
            f.seek(base + a)
            x = np.frombuffer(f.read(b - a), dtype=np.uint32)
            r = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)
            out[name] = {"dtype": "BF16", "shape": t["shape"],
                         "data_offsets": [offset, offset + r.nbytes]}
            offset += r.nbytes
            parts.append(r.tobytes())
    head = json.dumps(out).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(os.path.join(dst, "model.safetensors"), "wb") as g:
        g.write(len(head).to_bytes(8, "little"))
        g.write(head)
        for p in parts:
            g.write(p)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: safetensors_to_bf16.py SRC_FOLDER DST_FOLDER")
    main(sys.argv[1], sys.argv[2])
