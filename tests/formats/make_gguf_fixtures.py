#!/usr/bin/python3
"""Writes the committed GGUF test fixtures (and, with --bad, the malformed files).

Run from the repository root:
    /usr/bin/python3 tests/formats/make_gguf_fixtures.py tests/formats/fixtures/gguf
    /usr/bin/python3 tests/formats/make_gguf_fixtures.py tests/formats/fixtures/gguf \
        --bad tests/formats/fixtures/gguf/bad

Needs numpy only; uses tools/gguf/gguf_file.py and tools/gguf/quants.py. The output is
deterministic (seeded), so re-running it reproduces the committed bytes. Every file written is
read back with tools/gguf and checked before the script succeeds.

What it writes (OUT = the first argument):
  manifest.json            every good file: version, alignment, and per tensor its name, ggml
                           type name and id, ne (ggml order, ne[0] innermost), offset relative to
                           the data section, and the .npy holding its expected float32 values
                           (numpy shape = reversed ne)
  source.npy               the float32 [4, 512] values the "weight" tensors were quantized from
  types/<TYPE>.gguf        for TYPE in F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K
                           Q6_K: tensor "weight" (ne [512, 4], source.npy quantized, with outliers,
                           a zero super-block, a constant block and an all-positive row) and tensor
                           "random_blocks" (ne [512, 2]: random bytes with finite scales, so every
                           bit of the block layout matters; for F32/F16/BF16 random finite bit
                           patterns, subnormals included)
  types/<TYPE>.weight.npy, types/<TYPE>.random_blocks.npy   the expected dequantized values:
                           exact, as ggml's reference dequantizer computes them in float32 (no
                           FMA): a reader must match them bit for bit
  all_types.gguf           one tensor per type, named after the type, same expectations
  v2.gguf                  a GGUF version 2 file
  align64.gguf             general.alignment = 64, tensors of awkward sizes (offsets 64-aligned)
  kitchen_sink.gguf        metadata of every value type, arrays of every type, an empty array,
                           arrays of arrays (two levels and three), UTF-8 strings, 1-D to 4-D
                           tensors; kitchen_sink.json lists each key in file order with its type
                           and value (float32 values as the exact double of the float)
  bad/ (--bad DIR)         malformed files a loader must refuse with a clear one-line error;
                           DIR/expected_errors.json lists for each file the fragments its error
                           message must contain (all of them, case-insensitive) and whether the
                           file is malformed as a file ("parse") or holds a valid file with a tensor
                           type attnviz cannot use ("load")
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import gguf_file as G  # noqa: E402
import quants as Q  # noqa: E402

SEED = 20240611
TYPES = Q.SUPPORTED


def save_npy(path, a):
    np.save(path, np.ascontiguousarray(a, dtype="<f4"))


def rel(path, root):
    return os.path.relpath(path, root).replace(os.sep, "/")


def random_bits(name, n, rng):
    """random finite values of a float type, as raw bytes (subnormals and extremes included)"""
    if name == "F32":
        u = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
        exp = (u >> 23) & 0xFF
        u = np.where(exp == 0xFF, u & ~np.uint32(0x40000000), u)      # no inf / NaN
        return u.astype("<u4").view(np.uint8)
    u = rng.integers(0, 2**16, size=n, dtype=np.uint32).astype(np.uint16)
    if name == "F16":
        exp = (u >> 10) & 0x1F
        u = np.where(exp == 0x1F, u & ~np.uint16(0x4000), u)
    else:   # BF16
        exp = (u >> 7) & 0xFF
        u = np.where(exp == 0xFF, u & ~np.uint16(0x4000), u)
    return u.astype("<u2").view(np.uint8)


def make_random_tensor(name, ne, rng):
    n = int(np.prod(ne))
    if name in ("F32", "F16", "BF16"):
        return random_bits(name, n, rng)
    _, bs, ts = Q.GGML_TYPES[name]
    return Q.random_blocks(name, n // bs, rng)


class Manifest:
    def __init__(self, root):
        self.root = root
        self.files = []

    def add(self, path, writer, expected):
        """expected: tensor name -> npy path"""
        offs = 0
        tens = []
        for name, ne, tname, raw, nbytes in writer.tensors:
            tens.append({"name": name, "type": tname, "type_id": Q.type_id(tname), "ne": ne,
                         "offset": offs, "nbytes": nbytes, "expected": rel(expected[name], self.root)})
            offs = offs + nbytes + (writer.alignment - nbytes % writer.alignment) % writer.alignment
        self.files.append({"file": rel(path, self.root), "version": writer.version,
                           "alignment": writer.alignment, "tensors": tens})


def write_types(out, man, rng):
    os.makedirs(os.path.join(out, "types"), exist_ok=True)
    x = Q.test_values(rng, 4, 512)
    save_npy(os.path.join(out, "source.npy"), x)
    weights = {}
    allw = G.GGUFWriter()
    allw.add("general.architecture", "fixture")
    allw.add("general.name", "all ggml types attnviz reads")
    all_expected = {}
    for t in TYPES:
        w = G.GGUFWriter()
        w.add("general.architecture", "fixture")
        w.add("general.name", "type %s" % t)
        w.add("fixture.type", t)
        raw = Q.quantize(x, t)
        w.add_tensor_raw("weight", raw, t, [512, 4])
        rb = make_random_tensor(t, [512, 2], rng)
        w.add_tensor_raw("random_blocks", rb, t, [512, 2])
        exp_w = os.path.join(out, "types", "%s.weight.npy" % t)
        exp_r = os.path.join(out, "types", "%s.random_blocks.npy" % t)
        save_npy(exp_w, Q.dequantize(raw, t, x.size).reshape(4, 512))
        save_npy(exp_r, Q.dequantize(rb, t, 1024).reshape(2, 512))
        path = os.path.join(out, "types", "%s.gguf" % t)
        w.write(path)
        man.add(path, w, {"weight": exp_w, "random_blocks": exp_r})
        weights[t] = raw
        allw.add_tensor_raw(t, raw, t, [512, 4])
        all_expected[t] = exp_w
    path = os.path.join(out, "all_types.gguf")
    allw.write(path)
    man.add(path, allw, all_expected)


def write_v2_and_align(out, man, rng):
    w = G.GGUFWriter(version=2)
    w.add("general.architecture", "fixture")
    w.add("general.name", "version 2")
    w.add("fixture.count", G.U64(3))
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = (rng.standard_normal((2, 64)) * 3).astype(np.float32)
    w.add_tensor("a", a, "F32")
    w.add_tensor("b", b, "Q8_0")
    exp = {"a": os.path.join(out, "v2.a.npy"), "b": os.path.join(out, "v2.b.npy")}
    save_npy(exp["a"], a)
    save_npy(exp["b"], Q.dequantize(Q.quantize(b, "Q8_0"), "Q8_0", b.size).reshape(b.shape))
    path = os.path.join(out, "v2.gguf")
    w.write(path)
    man.add(path, w, exp)

    w = G.GGUFWriter(alignment=64)
    w.add("general.architecture", "fixture")
    w.add("general.name", "alignment 64")
    specs = [("f32_3x5", (3, 5), "F32"), ("q4_0_3x32", (3, 32), "Q4_0"), ("f16_7", (7,), "F16"),
             ("q6_k_256", (1, 256), "Q6_K"), ("bf16_2x3", (2, 3), "BF16")]
    exp = {}
    for name, shape, t in specs:
        v = rng.standard_normal(shape).astype(np.float32)
        raw = Q.quantize(v, t)
        w.add_tensor_raw(name, raw, t, list(reversed(shape)))
        exp[name] = os.path.join(out, "align64.%s.npy" % name)
        save_npy(exp[name], Q.dequantize(raw, t, v.size).reshape(shape))
    path = os.path.join(out, "align64.gguf")
    w.write(path)
    man.add(path, w, exp)


def f32(v):
    return float(np.float32(v))


def kitchen_sink_values():
    """(key, Val, json description) in file order"""
    items = []

    def scalar(key, val, jtype, jval):
        items.append((key, val, {"type": jtype, "value": jval}))

    scalar("general.architecture", G.STR("fixture"), "string", "fixture")
    scalar("general.name", G.STR("kitchen sink"), "string", "kitchen sink")
    scalar("sink.u8", G.U8(255), "uint8", 255)
    scalar("sink.i8", G.I8(-128), "int8", -128)
    scalar("sink.u16", G.U16(65535), "uint16", 65535)
    scalar("sink.i16", G.I16(-32768), "int16", -32768)
    scalar("sink.u32", G.U32(4294967295), "uint32", 4294967295)
    scalar("sink.i32", G.I32(-2147483648), "int32", -2147483648)
    scalar("sink.f32", G.F32(-1.5), "float32", -1.5)
    scalar("sink.f32_inexact", G.F32(1e-5), "float32", f32(1e-5))
    scalar("sink.u64", G.U64(2**64 - 1), "uint64", 2**64 - 1)
    scalar("sink.i64", G.I64(-2**63), "int64", -2**63)
    scalar("sink.f64", G.F64(3.141592653589793), "float64", 3.141592653589793)
    scalar("sink.bool_true", G.BOOL_(True), "bool", True)
    scalar("sink.bool_false", G.BOOL_(False), "bool", False)
    scalar("sink.string", G.STR("h\u00e9llo, w\u00f6rld \u2713 \U0001F600"), "string", "h\u00e9llo, w\u00f6rld \u2713 \U0001F600")
    scalar("sink.string_empty", G.STR(""), "string", "")

    def arr(key, et, jet, vals, jvals=None):
        items.append((key, G.ARR(et, vals), {"type": "array", "element_type": jet,
                                          "value": vals if jvals is None else jvals}))

    arr("sink.arr_u8", G.U8T, "uint8", [0, 1, 255])
    arr("sink.arr_i8", G.I8T, "int8", [-128, -1, 127])
    arr("sink.arr_u16", G.U16T, "uint16", [0, 65535])
    arr("sink.arr_i16", G.I16T, "int16", [-32768, 32767])
    arr("sink.arr_u32", G.U32T, "uint32", [0, 4294967295, 7])
    arr("sink.arr_i32", G.I32T, "int32", [-2147483648, 2147483647, 0])
    arr("sink.arr_f32", G.F32T, "float32", [0.5, -2.25, 0.1], [0.5, -2.25, f32(0.1)])
    arr("sink.arr_u64", G.U64T, "uint64", [0, 2**64 - 1])
    arr("sink.arr_i64", G.I64T, "int64", [-2**63, 2**63 - 1])
    arr("sink.arr_f64", G.F64T, "float64", [1e300, -0.0, 2.5])
    arr("sink.arr_bool", G.BOOLT, "bool", [True, False, True])
    arr("sink.arr_string", G.STRT, "string", ["a", "", "\u00fc", "two words"])
    arr("sink.arr_empty", G.I32T, "int32", [])
    # arrays of arrays: each inner array carries its own element type and length
    inner = [G.ARR(G.U8T, [1, 2, 3]), G.ARR(G.U8T, []), G.ARR(G.U8T, [255])]
    items.append(("sink.arr_arr_u8", G.ARR(G.ARRT, inner), {
        "type": "array", "element_type": "array",
        "value": [{"type": "array", "element_type": "uint8", "value": v} for v in ([1, 2, 3], [], [255])]}))
    inner = [G.ARR(G.STRT, ["x"]), G.ARR(G.STRT, ["y", "z"])]
    items.append(("sink.arr_arr_string", G.ARR(G.ARRT, inner), {
        "type": "array", "element_type": "array",
        "value": [{"type": "array", "element_type": "string", "value": v} for v in (["x"], ["y", "z"])]}))
    inner = [G.ARR(G.I32T, [1]), G.ARR(G.F32T, [0.25, 0.75])]
    items.append(("sink.arr_arr_mixed", G.ARR(G.ARRT, inner), {
        "type": "array", "element_type": "array",
        "value": [{"type": "array", "element_type": "int32", "value": [1]},
                  {"type": "array", "element_type": "float32", "value": [0.25, 0.75]}]}))
    deep = G.ARR(G.ARRT, [G.ARR(G.ARRT, [G.ARR(G.I16T, [-1, 2]), G.ARR(G.I16T, [3])]),
                          G.ARR(G.ARRT, [])])
    items.append(("sink.arr_arr_arr_i16", deep, {
        "type": "array", "element_type": "array",
        "value": [{"type": "array", "element_type": "array",
                   "value": [{"type": "array", "element_type": "int16", "value": [-1, 2]},
                             {"type": "array", "element_type": "int16", "value": [3]}]},
                  {"type": "array", "element_type": "array", "value": []}]}))
    return items


def write_kitchen_sink(out, man, rng):
    w = G.GGUFWriter()
    items = kitchen_sink_values()
    for key, val, _ in items:
        w.add(key, val)
    exp = {}
    for name, shape, t in (("vec", (5,), "F32"), ("cube", (2, 3, 4), "F32"), ("hyper", (2, 2, 2, 2), "F16"),
                           ("mat_q8", (3, 32), "Q8_0")):
        v = rng.standard_normal(shape).astype(np.float32)
        raw = Q.quantize(v, t)
        w.add_tensor_raw(name, raw, t, list(reversed(shape)))
        exp[name] = os.path.join(out, "kitchen_sink.%s.npy" % name)
        save_npy(exp[name], Q.dequantize(raw, t, v.size).reshape(shape))
    path = os.path.join(out, "kitchen_sink.gguf")
    w.write(path)
    man.add(path, w, exp)
    doc = {"file": "kitchen_sink.gguf", "keys": [k for k, _, _ in items],
           "metadata": {k: j for k, _, j in items}}
    with open(os.path.join(out, "kitchen_sink.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


# ------------------------------------------------------------------- checks

def _json_equal(val, j):
    """reader value vs kitchen_sink.json description"""
    if j["type"] == "array":
        if isinstance(val, np.ndarray):
            val = val.tolist()
        if len(val) != len(j["value"]):
            return False
        if j["element_type"] == "array":
            return all(_json_equal(v, jj) for v, jj in zip(val, j["value"]))
        return all(_scalar_equal(v, jj) for v, jj in zip(val, j["value"]))
    return _scalar_equal(val, j["value"])


def _scalar_equal(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return struct.pack("<d", float(a)) == struct.pack("<d", float(b))
    return a == b and type(a) is type(b) or (isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                            and not isinstance(b, bool) and int(a) == int(b))


def verify_good(out):
    with open(os.path.join(out, "manifest.json")) as f:
        man = json.load(f)
    for entry in man["files"]:
        r = G.GGUFReader(os.path.join(out, entry["file"]))
        assert r.version == entry["version"] and r.alignment == entry["alignment"], entry["file"]
        assert len(r.tensors) == len(entry["tensors"])
        for t, e in zip(r.tensors, entry["tensors"]):
            assert t.name == e["name"] and t.type_name == e["type"] and t.ne == e["ne"] and t.offset == e["offset"]
            assert t.data_offset % r.alignment == 0
            want = np.load(os.path.join(out, e["expected"]))
            got = r.dequantize(t)
            assert got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32)), \
                "%s %s" % (entry["file"], t.name)
            # the second, element-by-element decoder agrees too
            ref = Q.reference_dequantize(np.frombuffer(t.raw, dtype=np.uint8), t.type_name, t.n_elements)
            assert np.array_equal(ref.view(np.uint32), want.reshape(-1).view(np.uint32)), (entry["file"], t.name)
        r.close()
    with open(os.path.join(out, "kitchen_sink.json"), encoding="utf-8") as f:
        ks = json.load(f)
    r = G.GGUFReader(os.path.join(out, "kitchen_sink.gguf"))
    assert list(r.metadata.keys()) == ks["keys"]
    for k in ks["keys"]:
        j = ks["metadata"][k]
        assert _json_equal(r.metadata[k], j), k
        want_t = j["type"] if j["type"] != "array" else None
        if want_t:
            assert r.types[k] == want_t, (k, r.types[k])
    r.close()


# ---------------------------------------------------------------- bad files

def _hdr(version, n_tensors, n_kv, magic=b"GGUF"):
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def _kv(key, val):
    return G._enc_str(key) + G.encode_value(val)


def _tinfo(name, ne, type_id, offset):
    return G._enc_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne) + \
        struct.pack("<IQ", type_id, offset)


def _file(version, kvs, tinfos, data, alignment=32, n_tensors=None, n_kv=None, magic=b"GGUF"):
    head = _hdr(version, len(tinfos) if n_tensors is None else n_tensors,
                len(kvs) if n_kv is None else n_kv, magic) + b"".join(kvs) + b"".join(tinfos)
    head += b"\0" * ((alignment - len(head) % alignment) % alignment)
    return head + data


def bad_files():
    """[(file name, bytes, stage, fragments, what)]"""
    arch = _kv("general.architecture", G.STR("fixture"))
    f32data = np.arange(8, dtype="<f4").tobytes()            # 8 values: one [8] F32 tensor
    good_t = [_tinfo("t", [8], 0, 0)]
    out = []

    def add(name, data, stage, frags, what):
        out.append((name, data, stage, frags, what))

    add("bad_magic.gguf", _file(3, [arch], good_t, f32data, magic=b"GGUX"), "parse", ["magic"],
        "the first four bytes are not GGUF")
    add("bad_version.gguf", _file(4, [arch], good_t, f32data), "parse", ["version", "4"],
        "version 4 does not exist")
    add("version1.gguf", _file(1, [arch], good_t, f32data), "parse", ["version", "1"],
        "version 1 (32-bit counts) is not supported")
    add("empty.gguf", b"", "parse", ["truncated"], "a 0-byte file")
    full = _file(3, [arch, _kv("general.name", G.STR("truncated in the middle of the metadata"))], good_t, f32data)
    cut = len(_hdr(3, 1, 2)) + len(arch) + 30      # inside the second value's string length
    add("truncated_metadata.gguf", full[:cut], "parse", ["truncated"],
        "the file ends inside the second metadata value")
    s = bytearray(_file(3, [arch, _kv("general.name", G.STR("x"))], good_t, f32data))
    pos = len(_hdr(3, 1, 2)) + len(arch) + len(G._enc_str("general.name")) + 4
    s[pos:pos + 8] = struct.pack("<Q", 2**40)
    add("string_past_end.gguf", bytes(s), "parse", ["string length", "past the end"],
        "a metadata string's length (2^40) runs past the end of the file")
    add("huge_tensor_count.gguf", _file(3, [arch], good_t, f32data, n_tensors=2**40), "parse",
        ["tensor count"], "the header claims 2^40 tensors")
    add("huge_kv_count.gguf", _file(3, [arch], good_t, f32data, n_kv=2**40), "parse",
        ["metadata count"], "the header claims 2^40 metadata pairs")
    add("unaligned_offset.gguf", _file(3, [arch], [_tinfo("t", [4], 0, 0), _tinfo("u", [4], 0, 20)],
                                       f32data + b"\0" * 64), "parse", ["not aligned"],
        "the second tensor's offset (20) is not a multiple of 32")
    add("overlapping_tensors.gguf", _file(3, [arch], [_tinfo("t", [8], 0, 0), _tinfo("u", [8], 0, 0)],
                                          f32data), "parse", ["overlap"],
        "two tensors share the same bytes")
    add("unknown_type.gguf", _file(3, [arch], [_tinfo("t", [8], 99, 0)], f32data), "parse",
        ["unknown", "type", "99"], "tensor type 99 does not exist")
    add("iq_type.gguf", _file(3, [arch], [_tinfo("t", [256], 16, 0)], b"\x01" * 66), "load",
        ["IQ2_XXS"], "a well-formed file whose tensor is IQ2_XXS (16), a type attnviz does not read")
    add("data_past_end.gguf", _file(3, [arch], [_tinfo("t", [64], 0, 0)], f32data), "parse",
        ["past the end"], "the tensor's 256 bytes of data run past the end of the file")
    add("too_many_dims.gguf", _file(3, [arch], [_tinfo("t", [2, 2, 2, 1, 1], 0, 0)], f32data), "parse",
        ["dimensions"], "a tensor with 5 dimensions (ggml has at most 4)")
    add("bad_block_multiple.gguf", _file(3, [arch], [_tinfo("t", [33], 2, 0)], b"\0" * 64), "parse",
        ["block"], "a Q4_0 tensor whose row (33) is not a whole number of 32-value blocks")
    add("bad_alignment.gguf", _file(3, [arch, _kv("general.alignment", G.U32(12))], good_t, f32data,
                                    alignment=12), "parse", ["alignment"],
        "general.alignment 12 is not a multiple of 8")
    add("bad_bool.gguf", _file(3, [arch, _kv("fixture.flag", G.BOOL_(True))[:-1] + b"\x02"], good_t, f32data),
        "parse", ["bool"], "a bool metadata value of 2")
    add("duplicate_key.gguf", _file(3, [arch, arch], good_t, f32data), "parse", ["duplicate"],
        "the same metadata key twice")
    add("unknown_value_type.gguf", _file(3, [arch, G._enc_str("fixture.x") + struct.pack("<I", 13) + b"\0" * 8],
                                         good_t, f32data), "parse", ["unknown", "value type", "13"],
        "a metadata value of type 13 (no such type)")
    return out


def write_bad(bad_dir):
    os.makedirs(bad_dir, exist_ok=True)
    doc = {"note": "each file must be refused with one line naming the file and the problem; that message "
                   "must contain every fragment (case-insensitive). stage 'parse': the file itself is "
                   "malformed; 'load': the file is well formed but holds something attnviz cannot use.",
           "files": []}
    for name, data, stage, frags, what in bad_files():
        path = os.path.join(bad_dir, name)
        with open(path, "wb") as f:
            f.write(data)
        doc["files"].append({"file": name, "stage": stage, "fragments": frags, "what": what})
        # the reference reader refuses it with those fragments
        try:
            r = G.GGUFReader(path)
            if stage == "parse":
                raise AssertionError("%s: parsed without an error" % name)
            for t in r.tensors:
                r.dequantize(t)
            raise AssertionError("%s: loaded without an error" % name)
        except G.GGUFError as e:
            msg = str(e).lower()
            missing = [fr for fr in frags if fr.lower() not in msg]
            assert not missing, "%s: message %r lacks %s" % (name, str(e), missing)
            assert ("parse" if stage == "parse" else "load") == stage
            assert "\n" not in str(e)
    with open(os.path.join(bad_dir, "expected_errors.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return len(doc["files"])


def main(argv=None):
    ap = argparse.ArgumentParser(description="write the GGUF test fixtures")
    ap.add_argument("out", help="output folder, e.g. tests/formats/fixtures/gguf")
    ap.add_argument("--bad", metavar="DIR", help="also write the malformed files into DIR")
    a = ap.parse_args(argv)
    out = a.out
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    man = Manifest(out)
    write_types(out, man, rng)
    write_v2_and_align(out, man, rng)
    write_kitchen_sink(out, man, rng)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"generator": "tests/formats/make_gguf_fixtures.py",
                   "exactness": "expected .npy values are bit-exact float32 results of ggml's reference "
                                "dequantization (products and differences rounded to float32, no FMA)",
                   "files": man.files}, f, indent=1)
        f.write("\n")
    verify_good(out)
    msg = "wrote and verified %d GGUF fixtures in %s" % (len(man.files), out)
    if a.bad:
        n = write_bad(a.bad)
        msg += "; %d malformed files in %s" % (n, a.bad)
    print(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
