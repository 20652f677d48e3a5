#!/usr/bin/python3
"""GGUF v2/v3 little-endian writer and reader (numpy), written for attnviz from the
GGUF specification (ggml docs/gguf.md).

File layout:
  "GGUF" | u32 version | u64 tensor_count | u64 kv_count
  kv_count x (string key | u32 value_type | value)
  tensor_count x (string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset)
  zero padding to `alignment` | tensor data (each tensor at data_start + offset, offset a
  multiple of `alignment`, zero padding between tensors)
  string = u64 length | UTF-8 bytes (no terminator)
  array value = u32 element type | u64 count | elements (an element may itself be an array)
  alignment = general.alignment (u32) when present, else 32
  ne[0] is the innermost (fastest, row length) dimension: a numpy array of shape
  (rows, cols) has ne = [cols, rows].
v2 and v3 have the same structure (v3 allows big-endian files, which this module
neither writes nor reads; v1 used 32-bit counts and is refused).

Writer:
    w = GGUFWriter(version=3, alignment=32)
    w.add("general.architecture", "llama")           # str -> STRING
    w.add("llama.block_count", U32(5))                # explicit types: U8 I8 U16 I16 U32 I32
    w.add("x", ARR(F32T, [1.0, 2.0]))                 #   F32 F64 BOOL STR U64 I64, ARR(elem, list)
    w.add_tensor("token_embd.weight", array2d, "Q8_0")   # quantized from float values
    w.add_tensor_raw("t", raw_bytes, "Q4_K", ne=[512, 4]) # already-encoded blocks
    w.write(path)
Reader:
    r = GGUFReader(path)        # raises GGUFError with a clear message on malformed files
    r.metadata["llama.block_count"] -> python value, r.types[key] -> type description
    for t in r.tensors: t.name, t.ne, t.type_name, t.raw (bytes), r.dequantize(t) -> float32
    array with numpy shape reversed(ne)

Command line: python3 gguf_file.py FILE.gguf [--tensors] [--values]   (prints the metadata)
"""

import json
import mmap
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quants  # noqa: E402

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4

# metadata value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
VTYPE_NAMES = {UINT8: "uint8", INT8: "int8", UINT16: "uint16", INT16: "int16", UINT32: "uint32",
               INT32: "int32", FLOAT32: "float32", BOOL: "bool", STRING: "string", ARRAY: "array",
               UINT64: "uint64", INT64: "int64", FLOAT64: "float64"}
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<B", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_NP = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4",
       FLOAT32: "<f4", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8"}


class GGUFError(ValueError):
    pass


# ------------------------------------------------------------ typed values

class Val:
    """a metadata value with an explicit GGUF type; elem_type for arrays"""
    __slots__ = ("vtype", "value", "elem_type")

    def __init__(self, vtype, value, elem_type=None):
        self.vtype = vtype
        self.value = value
        self.elem_type = elem_type

    def __repr__(self):
        if self.vtype == ARRAY:
            return "ARR(%s, %r)" % (VTYPE_NAMES[self.elem_type], self.value)
        return "%s(%r)" % (VTYPE_NAMES[self.vtype], self.value)


def U8(v): return Val(UINT8, v)
def I8(v): return Val(INT8, v)
def U16(v): return Val(UINT16, v)
def I16(v): return Val(INT16, v)
def U32(v): return Val(UINT32, v)
def I32(v): return Val(INT32, v)
def U64(v): return Val(UINT64, v)
def I64(v): return Val(INT64, v)
def F32(v): return Val(FLOAT32, v)
def F64(v): return Val(FLOAT64, v)
def BOOL_(v): return Val(BOOL, bool(v))
def STR(v): return Val(STRING, v)


def ARR(elem_type, values):
    """array of elem_type (one of the type constants); for arrays of arrays pass ARRAY
    and a list of Val arrays"""
    return Val(ARRAY, values, elem_type)


# names for the element type argument of ARR
U8T, I8T, U16T, I16T, U32T, I32T, F32T, BOOLT, STRT, ARRT, U64T, I64T, F64T = range(13)


def _infer(v):
    if isinstance(v, Val):
        return v
    if isinstance(v, bool):
        return Val(BOOL, v)
    if isinstance(v, (int, np.integer)):
        v = int(v)
        if -2**31 <= v < 2**31:
            return Val(INT32, v)
        if 0 <= v < 2**64 and v >= 2**63:
            return Val(UINT64, v)
        return Val(INT64, v)
    if isinstance(v, (float, np.floating)):
        return Val(FLOAT32, float(v))
    if isinstance(v, (str, bytes)):
        return Val(STRING, v)
    if isinstance(v, np.ndarray):
        inv = {np.dtype(t): k for k, t in _NP.items()}
        dt = v.dtype.newbyteorder("<") if v.dtype.byteorder == ">" else v.dtype
        if dt == np.bool_:
            return Val(ARRAY, v.tolist(), BOOL)
        if dt not in inv:
            raise TypeError("no GGUF array type for numpy %s" % v.dtype)
        return Val(ARRAY, v, inv[dt])
    if isinstance(v, (list, tuple)):
        if not v:
            return Val(ARRAY, [], INT32)
        first = _infer(v[0])
        return Val(ARRAY, list(v), first.vtype if first.vtype != ARRAY else ARRAY)
    raise TypeError("no GGUF type for %r" % (v,))


# ----------------------------------------------------------------- writer

def _enc_str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _enc_scalar(vtype, v):
    if vtype == STRING:
        return _enc_str(v)
    if vtype == BOOL:
        return struct.pack("<B", 1 if v else 0)
    return struct.pack(_SCALAR[vtype], v)


def _enc_array(elem_type, values):
    out = [struct.pack("<IQ", elem_type, len(values))]
    if elem_type == ARRAY:
        for sub in values:
            sub = _infer(sub)
            if sub.vtype != ARRAY:
                raise TypeError("array of arrays holds a %s" % VTYPE_NAMES[sub.vtype])
            out.append(_enc_array(sub.elem_type, sub.value))
    elif elem_type == STRING:
        out.extend(_enc_str(s) for s in values)
    elif elem_type == BOOL:
        out.append(bytes(1 if b else 0 for b in values))
    else:
        out.append(np.asarray(values, dtype=_NP[elem_type]).tobytes())
    return b"".join(out)


def encode_value(val):
    """Val -> (u32 type, encoded value) bytes"""
    val = _infer(val)
    if val.vtype == ARRAY:
        return struct.pack("<I", ARRAY) + _enc_array(val.elem_type, val.value)
    return struct.pack("<I", val.vtype) + _enc_scalar(val.vtype, val.value)


def _align(n, a):
    return n + (a - n % a) % a


class GGUFWriter:
    def __init__(self, version=3, alignment=DEFAULT_ALIGNMENT, write_alignment_key=None):
        if version not in (2, 3):
            raise ValueError("version must be 2 or 3")
        if alignment <= 0 or alignment % 8:
            raise ValueError("alignment must be a positive multiple of 8")
        self.version = version
        self.alignment = alignment
        self.kv = {}
        self.tensors = []     # (name, ne, type name, raw bytes)
        if write_alignment_key is None:
            write_alignment_key = alignment != DEFAULT_ALIGNMENT
        if write_alignment_key:
            self.kv["general.alignment"] = U32(alignment)

    def add(self, key, value):
        if key in self.kv:
            raise KeyError("duplicate key %s" % key)
        self.kv[key] = _infer(value)

    def add_tensor(self, name, values, type_name="F32", ne=None):
        """values: float array, numpy shape (.., rows, cols); stored as type_name"""
        values = np.asarray(values)
        if ne is None:
            ne = list(reversed(values.shape)) if values.ndim else [1]
        raw = quants.quantize(values.astype(np.float32), type_name)
        self.add_tensor_raw(name, raw, type_name, ne)

    def add_tensor_raw(self, name, raw, type_name, ne):
        """raw: the encoded bytes, or a function returning them (called once, while writing)"""
        ne = [int(v) for v in ne]
        if len(ne) < 1 or len(ne) > MAX_DIMS:
            raise ValueError("%s: %d dimensions" % (name, len(ne)))
        _, bs, ts = quants.GGML_TYPES[type_name]
        n = int(np.prod(ne))
        if ne[0] % bs:
            raise ValueError("%s: row of %d is not a whole number of %s blocks" % (name, ne[0], type_name))
        nbytes = n // bs * ts
        if not callable(raw):
            raw = bytes(np.asarray(raw, dtype=np.uint8).reshape(-1)) if not isinstance(raw, bytes) else raw
            if len(raw) != nbytes:
                raise ValueError("%s: %d bytes for %d %s values" % (name, len(raw), n, type_name))
        if any(t[0] == name for t in self.tensors):
            raise KeyError("duplicate tensor %s" % name)
        self.tensors.append((name, ne, type_name, raw, nbytes))

    def _head(self):
        out = [GGUF_MAGIC, struct.pack("<IQQ", self.version, len(self.tensors), len(self.kv))]
        for k, v in self.kv.items():
            out.append(_enc_str(k))
            out.append(encode_value(v))
        offset = 0
        for name, ne, tname, raw, nbytes in self.tensors:
            out.append(_enc_str(name))
            out.append(struct.pack("<I", len(ne)))
            out.append(struct.pack("<%dQ" % len(ne), *ne))
            out.append(struct.pack("<IQ", quants.type_id(tname), offset))
            offset = _align(offset + nbytes, self.alignment)
        head = b"".join(out)
        return head + b"\0" * (_align(len(head), self.alignment) - len(head))

    def _chunks(self):
        yield self._head()
        for name, ne, tname, raw, nbytes in self.tensors:
            data = raw() if callable(raw) else raw
            data = bytes(np.asarray(data, dtype=np.uint8).reshape(-1)) if not isinstance(data, bytes) else data
            if len(data) != nbytes:
                raise ValueError("%s: %d bytes for %s ne=%s" % (name, len(data), tname, ne))
            yield data
            yield b"\0" * (_align(nbytes, self.alignment) - nbytes)

    def to_bytes(self):
        return b"".join(self._chunks())

    def write(self, path):
        """writes to a temporary file beside path, then renames it"""
        tmp = "%s.tmp%d" % (path, os.getpid())
        try:
            with open(tmp, "wb") as f:
                for chunk in self._chunks():
                    f.write(chunk)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


# ----------------------------------------------------------------- reader

class TensorInfo:
    __slots__ = ("name", "ne", "type_id", "type_name", "offset", "data_offset", "nbytes", "raw")

    def __repr__(self):
        return "TensorInfo(%s, ne=%s, %s, offset=%d, %d bytes)" % (
            self.name, self.ne, self.type_name, self.offset, self.nbytes)

    @property
    def shape(self):
        """numpy shape: ne reversed"""
        return tuple(reversed(self.ne))

    @property
    def n_elements(self):
        return int(np.prod(self.ne))


class _Cursor:
    def __init__(self, buf, path):
        self.buf = buf
        self.pos = 0
        self.path = path

    def need(self, n, what):
        if n > len(self.buf) - self.pos:
            raise GGUFError("%s: truncated file: %s needs %d bytes at offset %d, file has %d"
                            % (self.path, what, n, self.pos, len(self.buf)))

    def take(self, fmt, what):
        size = struct.calcsize(fmt)
        self.need(size, what)
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return v[0] if len(v) == 1 else v

    def string(self, what):
        at = self.pos
        n = self.take("<Q", what + " length")
        if n > len(self.buf) - self.pos:
            raise GGUFError("%s: %s at offset %d: string length %d runs past the end of the file"
                            % (self.path, what, at, n))
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError("%s: %s at offset %d is not valid UTF-8" % (self.path, what, at))


class GGUFReader:
    """reads a whole GGUF file (memory-mapped); raises GGUFError on any malformation"""

    def __init__(self, path, data=None):
        self.path = str(path)
        if data is None:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self.buf = data
        self.metadata = {}
        self.types = {}
        self.tensors = []
        self._parse()

    def _fail(self, msg):
        raise GGUFError("%s: %s" % (self.path, msg))

    def _value(self, c, vtype, key, depth=0):
        if vtype == STRING:
            return c.string("value of %s" % key)
        if vtype == ARRAY:
            if depth > 8:
                self._fail("%s: arrays nested too deep" % key)
            et, n = c.take("<I", "array type of %s" % key), c.take("<Q", "array length of %s" % key)
            if et not in VTYPE_NAMES:
                self._fail("%s: unknown array element type %d" % (key, et))
            # every element takes at least one byte (strings 8): refuse absurd counts early
            least = 8 if et in (STRING,) else 12 if et == ARRAY else struct.calcsize(_SCALAR[et])
            if n * least > len(c.buf) - c.pos:
                self._fail("%s: array of %d elements runs past the end of the file" % (key, n))
            if et == STRING:
                return [c.string("element of %s" % key) for _ in range(n)]
            if et == ARRAY:
                out = []
                for _ in range(n):
                    out.append(self._value(c, ARRAY, key, depth + 1))
                return out
            if et == BOOL:
                raw = bytes(c.buf[c.pos:c.pos + n])
                c.pos += n
                if any(b > 1 for b in raw):
                    self._fail("%s: bool array holds a value other than 0 or 1" % key)
                return [b == 1 for b in raw]
            size = struct.calcsize(_SCALAR[et]) * n
            arr = np.frombuffer(c.buf, dtype=_NP[et], count=n, offset=c.pos).copy()
            c.pos += size
            return arr
        if vtype not in _SCALAR:
            self._fail("%s: unknown metadata value type %d" % (key, vtype))
        v = c.take(_SCALAR[vtype], "value of %s" % key)
        if vtype == BOOL:
            if v > 1:
                self._fail("%s: bool value %d is neither 0 nor 1" % (key, v))
            return v == 1
        return v

    def _parse(self):
        c = _Cursor(self.buf, self.path)
        c.need(4, "magic")
        magic = bytes(self.buf[0:4])
        if magic != GGUF_MAGIC:
            self._fail("bad magic %r: not a GGUF file" % magic)
        c.pos = 4
        self.version = c.take("<I", "version")
        if self.version not in (2, 3):
            if self.version == 1:
                self._fail("unsupported GGUF version 1 (too old; convert it with a newer llama.cpp)")
            if self.version & 0xFFFF == 0 and (self.version >> 16) in (2, 3):
                self._fail("unsupported GGUF version %d: a big-endian file" % self.version)
            self._fail("unsupported GGUF version %d" % self.version)
        n_tensors = c.take("<Q", "tensor count")
        n_kv = c.take("<Q", "metadata count")
        rest = len(self.buf) - c.pos
        # a tensor info takes at least 8+4+8+4+8 bytes, a kv at least 8+4+1
        if n_tensors * 32 > rest:
            self._fail("tensor count %d is impossible for a file of %d bytes" % (n_tensors, len(self.buf)))
        if n_kv * 13 > rest:
            self._fail("metadata count %d is impossible for a file of %d bytes" % (n_kv, len(self.buf)))
        for _ in range(n_kv):
            key = c.string("metadata key")
            if key in self.metadata:
                self._fail("duplicate metadata key %s" % key)
            vtype = c.take("<I", "value type of %s" % key)
            if vtype not in VTYPE_NAMES:
                self._fail("%s: unknown metadata value type %d" % (key, vtype))
            at = c.pos
            self.metadata[key] = self._value(c, vtype, key)
            self.types[key] = self._describe(vtype, at)
        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in self.metadata:
            a = self.metadata["general.alignment"]
            if self.types["general.alignment"] != "uint32":
                self._fail("general.alignment is a %s, not a uint32" % self.types["general.alignment"])
            if a == 0 or a % 8:
                self._fail("general.alignment %d is not a positive multiple of 8" % a)
            self.alignment = a
        names = set()
        for i in range(n_tensors):
            t = TensorInfo()
            t.name = c.string("tensor %d name" % i)
            if t.name in names:
                self._fail("duplicate tensor name %s" % t.name)
            names.add(t.name)
            nd = c.take("<I", "dimension count of %s" % t.name)
            if nd < 1 or nd > MAX_DIMS:
                self._fail("tensor %s has %d dimensions (1 to %d allowed)" % (t.name, nd, MAX_DIMS))
            t.ne = [c.take("<Q", "dimension of %s" % t.name) for _ in range(nd)]
            n = 1
            for d in t.ne:
                if d == 0 or d >= 2**63:
                    self._fail("tensor %s has a bad dimension %d" % (t.name, d))
                n *= d
                if n >= 2**62:
                    self._fail("tensor %s: element count overflows" % t.name)
            t.type_id = c.take("<I", "type of %s" % t.name)
            t.offset = c.take("<Q", "offset of %s" % t.name)
            tname = quants.type_name(t.type_id)
            if tname is None:
                self._fail("tensor %s: unknown tensor type %d" % (t.name, t.type_id))
            t.type_name = tname
            if tname in quants.REMOVED_TYPE_NAMES.values():
                self._fail("tensor %s: type %s (%d) was removed from ggml and is not supported"
                           % (t.name, tname, t.type_id))
            _, bs, ts = quants.GGML_TYPES[tname]
            if t.ne[0] % bs:
                self._fail("tensor %s: row length %d is not a multiple of the %s block size %d"
                           % (t.name, t.ne[0], tname, bs))
            t.nbytes = n // bs * ts
            if t.offset % self.alignment:
                self._fail("tensor %s: data offset %d is not aligned to %d" % (t.name, t.offset, self.alignment))
            self.tensors.append(t)
        self.data_start = _align(c.pos, self.alignment)
        size = len(self.buf)
        spans = []
        for t in self.tensors:
            t.data_offset = self.data_start + t.offset
            if t.data_offset + t.nbytes > size:
                self._fail("tensor %s: data (%d bytes at offset %d) runs past the end of the file (%d bytes)"
                           % (t.name, t.nbytes, t.data_offset, size))
            spans.append((t.offset, t.offset + t.nbytes, t.name))
            t.raw = memoryview(self.buf)[t.data_offset:t.data_offset + t.nbytes]
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            if b[0] < a[1]:
                self._fail("tensors %s and %s overlap" % (a[2], b[2]))
        self.by_name = {t.name: t for t in self.tensors}

    def _describe(self, vtype, at):
        if vtype != ARRAY:
            return VTYPE_NAMES[vtype]
        # element type of an array (and of nested arrays)
        parts = []
        pos = at
        while True:
            et = struct.unpack_from("<I", self.buf, pos)[0]
            n = struct.unpack_from("<Q", self.buf, pos + 4)[0]
            parts.append("array")
            if et != ARRAY or n == 0:
                parts.append(VTYPE_NAMES[et])
                break
            pos += 12
        return "[".join(parts) + "]" * (len(parts) - 1)

    def tensor(self, name):
        return self.by_name[name]

    def supported(self, t):
        return t.type_name in quants.SUPPORTED

    def dequantize(self, t):
        """float32 array, numpy shape reversed(ne)"""
        if isinstance(t, str):
            t = self.by_name[t]
        if t.type_name not in quants.SUPPORTED:
            raise GGUFError("%s: tensor %s has type %s (%d), which attnviz cannot read"
                            % (self.path, t.name, t.type_name, t.type_id))
        return quants.dequantize(np.frombuffer(t.raw, dtype=np.uint8), t.type_name, t.n_elements).reshape(t.shape)

    def raw_array(self, t):
        """the stored values of a non-block type as a numpy array (F32, F16, I32 ...)"""
        if isinstance(t, str):
            t = self.by_name[t]
        dt = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "I8": "<i1", "I16": "<i2", "I32": "<i4",
              "I64": "<i8", "F64": "<f8"}[t.type_name]
        return np.frombuffer(t.raw, dtype=dt).reshape(t.shape)

    def close(self):
        for t in self.tensors:
            t.raw = None
        if isinstance(self.buf, mmap.mmap):
            self.buf.close()


# --------------------------------------------------------------- printing

def _short(v, values):
    if isinstance(v, np.ndarray):
        head = v[:5].tolist()
        return "[%d] %s%s" % (v.size, head, " ..." if v.size > 5 else "")
    if isinstance(v, list):
        if not values:
            return "[%d]" % len(v)
        head = [x.tolist() if isinstance(x, np.ndarray) else x for x in v[:5]]
        return "[%d] %s%s" % (len(v), json.dumps(head, ensure_ascii=True)[:200], " ..." if len(v) > 5 else "")
    if isinstance(v, str) and len(v) > 120:
        return json.dumps(v[:120]) + "... (%d chars)" % len(v)
    return json.dumps(v) if isinstance(v, str) else repr(v)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    show_t = "--tensors" in argv
    values = "--values" in argv
    for path in [a for a in argv if not a.startswith("--")]:
        try:
            r = GGUFReader(path)
        except GGUFError as e:
            print("error: %s" % e, file=sys.stderr)
            return 1
        print("%s: GGUF v%d, alignment %d, %d keys, %d tensors, data at %d"
              % (path, r.version, r.alignment, len(r.metadata), len(r.tensors), r.data_start))
        for k, v in r.metadata.items():
            print("  %-45s %-16s %s" % (k, r.types[k], _short(v, values)))
        if show_t:
            for t in r.tensors:
                print("  tensor %-32s %-6s ne=%s offset=%d" % (t.name, t.type_name, t.ne, t.offset))
        r.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
