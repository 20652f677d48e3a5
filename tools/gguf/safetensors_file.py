"""Reading a Hugging Face checkpoint's safetensors (numpy only): one model.safetensors or a sharded
model.safetensors.index.json, tensors as float32 (F32, F16, BF16 and F64 converted). Used by
hf_to_gguf.py."""

import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quants  # noqa: E402


class ConvertError(Exception):
    pass


_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8", "I64": "<i8", "I32": "<i4",
              "I16": "<i2", "I8": "<i1", "U8": "<u1", "BOOL": "<u1"}


class SafeTensors:
    """one .safetensors file: u64 header size, JSON header, then the raw data"""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            if n > os.path.getsize(path) - 8:
                raise ConvertError("%s: header length %d runs past the end" % (path, n))
            self.header = json.loads(f.read(n).decode("utf-8"))
        self.data_start = 8 + n
        self.header.pop("__metadata__", None)
        self.mm = np.memmap(path, dtype=np.uint8, mode="r")

    def names(self):
        return list(self.header.keys())

    def get(self, name):
        info = self.header[name]
        dt = info["dtype"]
        if dt not in _ST_DTYPES:
            raise ConvertError("%s: tensor %s has dtype %s" % (self.path, name, dt))
        b, e = info["data_offsets"]
        raw = self.mm[self.data_start + b:self.data_start + e]
        a = raw.view(_ST_DTYPES[dt]).reshape(info["shape"])
        if dt == "BF16":
            return quants.bf16_bits_to_f32(a).reshape(info["shape"])
        if dt in ("F32", "F16", "F64"):
            return a.astype(np.float32)
        return a

    def dtype(self, name):
        return self.header[name]["dtype"]


class Weights:
    """model.safetensors or a sharded index"""

    def __init__(self, folder):
        single = os.path.join(folder, "model.safetensors")
        index = os.path.join(folder, "model.safetensors.index.json")
        self.files = {}
        self.where = {}
        if os.path.exists(index):
            with open(index) as f:
                wm = json.load(f)["weight_map"]
            for name, fn in wm.items():
                if fn not in self.files:
                    self.files[fn] = SafeTensors(os.path.join(folder, fn))
                self.where[name] = self.files[fn]
        elif os.path.exists(single):
            st = SafeTensors(single)
            self.files["model.safetensors"] = st
            for name in st.names():
                self.where[name] = st
        else:
            raise ConvertError("%s: no model.safetensors or model.safetensors.index.json" % folder)

    def __contains__(self, name):
        return name in self.where

    def names(self):
        return list(self.where.keys())

    def get(self, name):
        return self.where[name].get(name)
