#!/usr/bin/python3
"""ggml tensor types in numpy: the type table, and quantize / dequantize for
F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.

Written for attnviz from the block layouts ggml defines (ggml-common.h). Layout
of one block, byte offsets, little-endian (fp16 = IEEE half, "d" a scale):

  Q4_0  18 B / 32:  d:f16 @0 | qs[16] @2      x[i]    = (lo(qs[i])  - 8) * d
                                              x[i+16] = (hi(qs[i])  - 8) * d
  Q4_1  20 B / 32:  d:f16 @0 | m:f16 @2 | qs[16] @4     x = q*d + m  (q 0..15, same nibble order)
  Q5_0  22 B / 32:  d:f16 @0 | qh:u32 @2 | qs[16] @6    q = nibble | bit(qh, i) << 4, x = (q-16)*d
                    (element i<16: low nibble of qs[i], qh bit i; element i+16: high nibble, qh bit i+16)
  Q5_1  24 B / 32:  d:f16 @0 | m:f16 @2 | qh:u32 @4 | qs[16] @8   x = q*d + m  (q 0..31)
  Q8_0  34 B / 32:  d:f16 @0 | qs:int8[32] @2               x = qs*d
  Q2_K  84 B / 256: scales[16] @0 | qs[64] @16 | d:f16 @80 | dmin:f16 @82
                    element e: half n=e/128, j=(e%128)/32, l=e%32: q = (qs[32n+l] >> 2j) & 3
                    sub-block s=e/16: x = (d*(scales[s]&15)) * q - (dmin*(scales[s]>>4))
  Q3_K 110 B / 256: hmask[32] @0 | qs[64] @32 | scales[12] @96 | d:f16 @108
                    low 2 bits as Q2_K; high bit h = (hmask[e%32] >> (e/32)) & 1;
                    q = low2 - (h ? 0 : 4) in -4..3
                    6-bit scale s (16 of them): low4 = s<8 ? scales[s]&15 : scales[s-8]>>4,
                    high2 = (scales[8 + s%4] >> 2*(s/4)) & 3; sc = (low4 | high2<<4) - 32
                    x = (d*sc) * q
  Q4_K 144 B / 256: d:f16 @0 | dmin:f16 @2 | scales[12] @4 | qs[128] @16
                    8 sub-blocks of 32, 6-bit scale sc and min m each, packed in 12 bytes:
                      j<4:  sc = b[j] & 63,                     m = b[j+4] & 63
                      j>=4: sc = (b[j+4] & 15) | (b[j-4]>>6)<<4, m = (b[j+4]>>4) | (b[j]>>6)<<4
                    element e = 64c + l (l<32): low nibble of qs[32c+l] (sub-block 2c);
                    e = 64c + 32 + l: high nibble (sub-block 2c+1)
                    x = (d*sc) * q - (dmin*m)
  Q5_K 176 B / 256: d:f16 @0 | dmin:f16 @2 | scales[12] @4 | qh[32] @16 | qs[128] @48
                    as Q4_K plus fifth bit: q += 16 * ((qh[e%32] >> (e/32)) & 1)
  Q6_K 210 B / 256: ql[128] @0 | qh[64] @128 | scales:int8[16] @192 | d:f16 @208
                    e = 128n + 32k + l: ql byte 64n + 32(k%2) + l, low nibble for k<2, high for k>=2;
                    qh byte 32n + l, bits 2k..2k+1; q = (nibble | h<<4) - 32;
                    x = (d*scales[e/16]) * q

Dequantization is exact as ggml's reference C computes it: every product and
difference rounded to float32, in ggml's order ((d*sc)*q - dmin*m etc.), with no
fused multiply-add. (A ggml build that contracts a*b - c into an FMA can differ by
at most one rounding of the last operation.)

The quantizers here are simple and honest (no ggml rounding search): their byte
layout is exactly ggml's, so any ggml reader dequantizes the blocks to the same
values this module's dequantizer returns. Those dequantized values are the ground
truth for fixtures.

Self-test: /usr/bin/python3 tools/gguf/quants.py --selftest
"""

import struct
import sys

import numpy as np

QK_K = 256

# name -> (ggml type id, block size in elements, bytes per block)
GGML_TYPES = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
    "Q8_1": (9, 32, 36),
    "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110),
    "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
    "Q8_K": (15, 256, 292),
    "IQ2_XXS": (16, 256, 66),
    "IQ2_XS": (17, 256, 74),
    "IQ3_XXS": (18, 256, 98),
    "IQ1_S": (19, 256, 50),
    "IQ4_NL": (20, 32, 18),
    "IQ3_S": (21, 256, 110),
    "IQ2_S": (22, 256, 82),
    "IQ4_XS": (23, 256, 136),
    "I8": (24, 1, 1),
    "I16": (25, 1, 2),
    "I32": (26, 1, 4),
    "I64": (27, 1, 8),
    "F64": (28, 1, 8),
    "IQ1_M": (29, 256, 56),
    "BF16": (30, 1, 2),
    "TQ1_0": (34, 256, 54),
    "TQ2_0": (35, 256, 66),
    "MXFP4": (39, 32, 17),
}
TYPE_NAMES = {v[0]: k for k, v in GGML_TYPES.items()}
# removed from ggml but once written to files: known ids, never readable
REMOVED_TYPE_NAMES = {4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
                      36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8"}

# the types this module can quantize and dequantize
SUPPORTED = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
             "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]

F32 = np.float32


def type_id(name):
    return GGML_TYPES[name][0]


def type_name(tid):
    if tid in TYPE_NAMES:
        return TYPE_NAMES[tid]
    if tid in REMOVED_TYPE_NAMES:
        return REMOVED_TYPE_NAMES[tid]
    return None


def block_size(name):
    return GGML_TYPES[name][1]


def row_bytes(name, n):
    """bytes of n elements of type name (n a multiple of the block size)"""
    _, bs, ts = GGML_TYPES[name]
    if n % bs:
        raise ValueError("%d elements are not a whole number of %s blocks of %d" % (n, name, bs))
    return n // bs * ts


# ---------------------------------------------------------------- helpers

def _f16(b):
    """(nb, 2) uint8 -> (nb, 1) float32 (exact: every half is a float)"""
    return np.ascontiguousarray(b).view("<f2").astype(F32)


def _to_f16_bytes(x):
    """float32 (nb,) -> ((nb, 2) uint8, the stored value as float32 (nb,))"""
    h = np.asarray(x, dtype=F32).astype("<f2")
    return h.view(np.uint8).reshape(-1, 2), h.astype(F32)


def _blocks(raw, name, n):
    _, bs, ts = GGML_TYPES[name]
    raw = np.frombuffer(raw, dtype=np.uint8) if not isinstance(raw, np.ndarray) else raw.reshape(-1).view(np.uint8)
    need = row_bytes(name, n)
    if raw.size < need:
        raise ValueError("%s: %d bytes, need %d for %d elements" % (name, raw.size, need, n))
    return raw[:need].reshape(n // bs, ts)


def _rint(x):
    return np.rint(x).astype(np.int32)


def _safe_div(a, b):
    """a / b in float32 where b != 0, else 0"""
    b = np.asarray(b, dtype=F32)
    out = np.zeros(np.broadcast(a, b).shape, dtype=F32)
    np.divide(a, b, out=out, where=(b != 0))
    return out


def _signed_absmax(x):
    """per row of x (nb, k): the element with the largest magnitude, with its sign (first on ties)"""
    idx = np.argmax(np.abs(x), axis=1)
    return x[np.arange(x.shape[0]), idx]


# --------------------------------------------------------------- F16 / BF16

def f32_to_bf16_bits(x):
    """round to nearest even on the upper 16 bits; NaN stays a quiet NaN"""
    u = np.asarray(x, dtype=F32).reshape(-1).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(nan, ((u >> 16) | 0x40) & 0xFFFF, r)
    return r.astype("<u2")


def bf16_bits_to_f32(b):
    return (np.asarray(b).astype(np.uint32) << 16).view(F32)


# ------------------------------------------------------------ legacy quants

def _q_sym(x, nlev):
    """Q4_0 / Q5_0 / Q8_0 style: d from the signed absolute max. Returns (d16 bytes, d, q)."""
    if nlev == 256:          # Q8_0: d = amax / 127, q in -128..127
        d = np.max(np.abs(x), axis=1) / F32(127)
        dh, d = _to_f16_bytes(d)
        q = np.clip(_rint(_safe_div(x, d[:, None])), -128, 127)
        return dh, q
    half = nlev // 2         # 8 or 16: the extreme value maps to -half
    d = _signed_absmax(x) / F32(-half)
    dh, d = _to_f16_bytes(d)
    q = np.clip(_rint(_safe_div(x, d[:, None])) + half, 0, nlev - 1)
    return dh, q


def _q_affine(x, nlev):
    """Q4_1 / Q5_1: x ~ q*d + m with m = min. Returns (d bytes, m bytes, q)."""
    mn = x.min(axis=1)
    mx = x.max(axis=1)
    dh, d = _to_f16_bytes((mx - mn) / F32(nlev - 1))
    mh, m = _to_f16_bytes(mn)
    q = np.clip(_rint(_safe_div(x - m[:, None], d[:, None])), 0, nlev - 1)
    return dh, mh, q


def _pack_nibbles32(q):
    """q (nb, 32) in 0..15 -> (nb, 16): element i low nibble, element i+16 high nibble"""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def _qh_bits(q):
    """fifth bits of q (nb, 32) -> (nb, 4) uint8, little-endian u32 with bit i = element i"""
    bits = ((q >> 4) & 1).astype(np.uint64)
    u = (bits << np.arange(32, dtype=np.uint64)).sum(axis=1).astype("<u4")
    return u.view(np.uint8).reshape(-1, 4)


def quantize_q4_0(x):
    x = x.reshape(-1, 32)
    dh, q = _q_sym(x, 16)
    return np.concatenate([dh, _pack_nibbles32(q)], axis=1)


def quantize_q4_1(x):
    x = x.reshape(-1, 32)
    dh, mh, q = _q_affine(x, 16)
    return np.concatenate([dh, mh, _pack_nibbles32(q)], axis=1)


def quantize_q5_0(x):
    x = x.reshape(-1, 32)
    dh, q = _q_sym(x, 32)
    return np.concatenate([dh, _qh_bits(q), _pack_nibbles32(q & 15)], axis=1)


def quantize_q5_1(x):
    x = x.reshape(-1, 32)
    dh, mh, q = _q_affine(x, 32)
    return np.concatenate([dh, mh, _qh_bits(q), _pack_nibbles32(q & 15)], axis=1)


def quantize_q8_0(x):
    x = x.reshape(-1, 32)
    dh, q = _q_sym(x, 256)
    return np.concatenate([dh, q.astype(np.int8).view(np.uint8)], axis=1)


def _nib32(qs):
    """(nb, 16) bytes -> (nb, 32) values: low nibbles first, then high nibbles"""
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _bits32(qh):
    """(nb, 4) bytes as little-endian u32 -> (nb, 32) bits"""
    u = np.ascontiguousarray(qh).view("<u4").astype(np.uint32)
    return ((u >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


def dequantize_q4_0(b):
    d = _f16(b[:, 0:2])
    q = (_nib32(b[:, 2:18]).astype(np.int32) - 8).astype(F32)
    return q * d


def dequantize_q4_1(b):
    d = _f16(b[:, 0:2])
    m = _f16(b[:, 2:4])
    q = _nib32(b[:, 4:20]).astype(F32)
    return q * d + m


def dequantize_q5_0(b):
    d = _f16(b[:, 0:2])
    q = _nib32(b[:, 6:22]).astype(np.int32) | (_bits32(b[:, 2:6]).astype(np.int32) << 4)
    return (q - 16).astype(F32) * d


def dequantize_q5_1(b):
    d = _f16(b[:, 0:2])
    m = _f16(b[:, 2:4])
    q = _nib32(b[:, 8:24]).astype(np.int32) | (_bits32(b[:, 4:8]).astype(np.int32) << 4)
    return q.astype(F32) * d + m


def dequantize_q8_0(b):
    d = _f16(b[:, 0:2])
    q = np.ascontiguousarray(b[:, 2:34]).view(np.int8).astype(F32)
    return q * d


# ------------------------------------------------------------------ K-quants

def _k_scales_pack(ls, lm):
    """Q4_K/Q5_K: 8 six-bit scales and 8 six-bit mins (nb, 8) -> (nb, 12) bytes"""
    ls = ls.astype(np.uint8)
    lm = lm.astype(np.uint8)
    out = np.zeros((ls.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = (ls[:, 0:4] & 63) | ((ls[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (lm[:, 0:4] & 63) | ((lm[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (ls[:, 4:8] & 15) | ((lm[:, 4:8] & 15) << 4)
    return out


def _k_scales_unpack(s):
    """(nb, 12) -> scales (nb, 8), mins (nb, 8) as int32"""
    s = s.astype(np.int32)
    sc = np.empty((s.shape[0], 8), dtype=np.int32)
    mn = np.empty((s.shape[0], 8), dtype=np.int32)
    sc[:, 0:4] = s[:, 0:4] & 63
    mn[:, 0:4] = s[:, 4:8] & 63
    sc[:, 4:8] = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:8] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, mn


def _q3k_scales_pack(l6):
    """Q3_K: 16 six-bit values (nb, 16) in 0..63 -> (nb, 12) bytes"""
    l6 = l6.astype(np.uint8)
    out = np.zeros((l6.shape[0], 12), dtype=np.uint8)
    out[:, 0:8] = (l6[:, 0:8] & 15) | ((l6[:, 8:16] & 15) << 4)
    for j in range(16):
        out[:, 8 + j % 4] |= (l6[:, j] >> 4) << (2 * (j // 4))
    return out


def _q3k_scales_unpack(s):
    """(nb, 12) -> (nb, 16) signed scales in -32..31"""
    s = s.astype(np.int32)
    low = np.concatenate([s[:, 0:8] & 15, s[:, 0:8] >> 4], axis=1)
    j = np.arange(16)
    high = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
    return (low | (high << 4)) - 32


def _expand(v, k):
    """(nb, m) per-sub-block values -> (nb, m*k) per element"""
    return np.repeat(v, k, axis=1)


def _crumbs(qs):
    """Q2_K/Q3_K low bits: qs (nb, 64) -> (nb, 256) 2-bit values in element order"""
    qs = qs.reshape(-1, 2, 1, 32)
    sh = (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)
    return ((qs >> sh) & 3).reshape(-1, 256)


def _uncrumbs(q):
    """inverse of _crumbs: (nb, 256) 2-bit values -> (nb, 64) bytes"""
    q = q.astype(np.uint8).reshape(-1, 2, 4, 32)
    sh = (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)
    return np.bitwise_or.reduce(q << sh, axis=2).reshape(-1, 64)


def _nibbles_k(qs):
    """Q4_K/Q5_K: qs (nb, 128) -> (nb, 256) 4-bit values in element order"""
    qs = qs.reshape(-1, 4, 1, 32)
    return np.concatenate([qs & 15, qs >> 4], axis=2).reshape(-1, 256)


def _unnibbles_k(q):
    q = q.astype(np.uint8).reshape(-1, 4, 2, 32)
    return (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, 128)


def _high_bits_k(h):
    """(nb, 32) bytes -> (nb, 256) bits: element e is bit e//32 of byte e%32"""
    h = h.reshape(-1, 1, 32)
    sh = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    return ((h >> sh) & 1).reshape(-1, 256)


def _unhigh_bits_k(bits):
    bits = bits.astype(np.uint8).reshape(-1, 8, 32)
    sh = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    return np.bitwise_or.reduce(bits << sh, axis=1)


def _affine_sub(x, nlev):
    """sub-blocks x (nb, S, k): scale and min so x ~ scale*q - min with q in 0..nlev-1, min >= 0"""
    mn = np.minimum(x.min(axis=2), 0)
    mx = x.max(axis=2)
    return (mx - mn) / F32(nlev - 1), -mn


def _super_6bit(v, top):
    """non-negative per-sub-block values (nb, S) -> (super scale bytes, super scale, 0..top ints)"""
    dh, d = _to_f16_bytes(v.max(axis=1) / F32(top))
    l = np.clip(_rint(_safe_div(v, d[:, None])), 0, top)
    return dh, d, l


def quantize_q2_k(x):
    x = x.reshape(-1, 256)
    xs = x.reshape(-1, 16, 16)
    scale, mins = _affine_sub(xs, 4)
    dh, d, ls = _super_6bit(scale, 15)
    mh, dm, lm = _super_6bit(mins, 15)
    D = d[:, None] * ls.astype(F32)
    M = dm[:, None] * lm.astype(F32)
    q = np.clip(_rint(_safe_div(x + _expand(M, 16), _expand(D, 16))), 0, 3)
    scales = (ls | (lm << 4)).astype(np.uint8)
    return np.concatenate([scales, _uncrumbs(q), dh, mh], axis=1)


def dequantize_q2_k(b):
    sc = b[:, 0:16].astype(np.int32)
    q = _crumbs(b[:, 16:80]).astype(F32)
    d = _f16(b[:, 80:82])
    dm = _f16(b[:, 82:84])
    dl = d * (sc & 15).astype(F32)
    ml = dm * (sc >> 4).astype(F32)
    return _expand(dl, 16) * q - _expand(ml, 16)


def quantize_q3_k(x):
    x = x.reshape(-1, 256)
    xs = x.reshape(-1, 16, 16)
    sub = _signed_absmax(xs.reshape(-1, 16)).reshape(-1, 16) / F32(-4)
    dh, d = _to_f16_bytes(_signed_absmax(sub) / F32(-32))
    l = np.clip(_rint(_safe_div(sub, d[:, None])), -32, 31)
    D = d[:, None] * l.astype(F32)
    q = np.clip(_rint(_safe_div(x, _expand(D, 16))), -4, 3) + 4     # 0..7
    hmask = _unhigh_bits_k(q >> 2)
    qs = _uncrumbs(q & 3)
    return np.concatenate([hmask, qs, _q3k_scales_pack(l + 32), dh], axis=1)


def dequantize_q3_k(b):
    h = _high_bits_k(b[:, 0:32]).astype(np.int32)
    low = _crumbs(b[:, 32:96]).astype(np.int32)
    sc = _q3k_scales_unpack(b[:, 96:108])
    d = _f16(b[:, 108:110])
    q = (low - 4 + 4 * h).astype(F32)
    dl = d * sc.astype(F32)
    return _expand(dl, 16) * q


def _quantize_kx(x, nlev):
    xs = x.reshape(-1, 8, 32)
    scale, mins = _affine_sub(xs, nlev)
    dh, d, ls = _super_6bit(scale, 63)
    mh, dm, lm = _super_6bit(mins, 63)
    D = d[:, None] * ls.astype(F32)
    M = dm[:, None] * lm.astype(F32)
    q = np.clip(_rint(_safe_div(x + _expand(M, 32), _expand(D, 32))), 0, nlev - 1)
    return dh, mh, _k_scales_pack(ls, lm), q


def quantize_q4_k(x):
    x = x.reshape(-1, 256)
    dh, mh, sc, q = _quantize_kx(x, 16)
    return np.concatenate([dh, mh, sc, _unnibbles_k(q)], axis=1)


def quantize_q5_k(x):
    x = x.reshape(-1, 256)
    dh, mh, sc, q = _quantize_kx(x, 32)
    return np.concatenate([dh, mh, sc, _unhigh_bits_k(q >> 4), _unnibbles_k(q & 15)], axis=1)


def _dequantize_kx(b, q):
    d = _f16(b[:, 0:2])
    dm = _f16(b[:, 2:4])
    sc, mn = _k_scales_unpack(b[:, 4:16])
    d1 = d * sc.astype(F32)
    m1 = dm * mn.astype(F32)
    return _expand(d1, 32) * q.astype(F32) - _expand(m1, 32)


def dequantize_q4_k(b):
    return _dequantize_kx(b, _nibbles_k(b[:, 16:144]))


def dequantize_q5_k(b):
    q = _nibbles_k(b[:, 48:176]).astype(np.int32) + 16 * _high_bits_k(b[:, 16:48]).astype(np.int32)
    return _dequantize_kx(b, q)


def quantize_q6_k(x):
    x = x.reshape(-1, 256)
    sub = _signed_absmax(x.reshape(-1, 16)).reshape(-1, 16) / F32(-32)
    dh, d = _to_f16_bytes(_signed_absmax(sub) / F32(-128))
    sc = np.clip(_rint(_safe_div(sub, d[:, None])), -128, 127)
    D = d[:, None] * sc.astype(F32)
    q = np.clip(_rint(_safe_div(x, _expand(D, 16))), -32, 31) + 32   # 0..63
    q4 = q.reshape(-1, 2, 4, 32)          # half n, quarter k, lane l
    lo = (q4 & 15).astype(np.uint8)
    hi = (q4 >> 4).astype(np.uint8)
    ql = np.empty((x.shape[0], 2, 2, 32), dtype=np.uint8)
    ql[:, :, 0, :] = lo[:, :, 0, :] | (lo[:, :, 2, :] << 4)
    ql[:, :, 1, :] = lo[:, :, 1, :] | (lo[:, :, 3, :] << 4)
    qh = hi[:, :, 0, :] | (hi[:, :, 1, :] << 2) | (hi[:, :, 2, :] << 4) | (hi[:, :, 3, :] << 6)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64),
                           sc.astype(np.int8).view(np.uint8), dh], axis=1)


def dequantize_q6_k(b):
    ql = b[:, 0:128].reshape(-1, 2, 2, 32)
    qh = b[:, 128:192].reshape(-1, 2, 1, 32)
    sc = np.ascontiguousarray(b[:, 192:208]).view(np.int8).astype(F32)
    d = _f16(b[:, 208:210])
    lo = np.concatenate([ql & 15, ql >> 4], axis=2)            # k = 0,1 low nibbles; 2,3 high
    hi = (qh >> (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)) & 3
    q = ((lo.astype(np.int32) | (hi.astype(np.int32) << 4)) - 32).reshape(-1, 256)
    dl = d * sc
    return _expand(dl, 16) * q.astype(F32)


# ---------------------------------------------------------------- dispatch

_QUANT = {
    "Q4_0": quantize_q4_0, "Q4_1": quantize_q4_1, "Q5_0": quantize_q5_0, "Q5_1": quantize_q5_1,
    "Q8_0": quantize_q8_0, "Q2_K": quantize_q2_k, "Q3_K": quantize_q3_k, "Q4_K": quantize_q4_k,
    "Q5_K": quantize_q5_k, "Q6_K": quantize_q6_k,
}
_DEQUANT = {
    "Q4_0": dequantize_q4_0, "Q4_1": dequantize_q4_1, "Q5_0": dequantize_q5_0, "Q5_1": dequantize_q5_1,
    "Q8_0": dequantize_q8_0, "Q2_K": dequantize_q2_k, "Q3_K": dequantize_q3_k, "Q4_K": dequantize_q4_k,
    "Q5_K": dequantize_q5_k, "Q6_K": dequantize_q6_k,
}


def quantize(x, name):
    """float values (any shape, last axis a multiple of the block size) -> raw bytes (uint8 1-D)"""
    x = np.ascontiguousarray(x, dtype=F32).reshape(-1)
    if name == "F32":
        return x.astype("<f4").view(np.uint8)
    if name == "F16":
        return x.astype("<f2").view(np.uint8)
    if name == "BF16":
        return f32_to_bf16_bits(x).view(np.uint8)
    if name not in _QUANT:
        raise ValueError("cannot quantize to %s" % name)
    bs = block_size(name)
    if x.size % bs:
        raise ValueError("%d values are not a whole number of %s blocks of %d" % (x.size, name, bs))
    out = []
    chunk = bs * 65536          # bounded temporaries on big tensors
    for i in range(0, x.size, chunk):
        out.append(np.ascontiguousarray(_QUANT[name](x[i:i + chunk]), dtype=np.uint8).reshape(-1))
    return np.concatenate(out) if len(out) > 1 else out[0]


def dequantize(raw, name, n):
    """raw bytes of n elements of type name -> float32 1-D array of n values"""
    if name not in SUPPORTED:
        raise ValueError("cannot dequantize %s" % name)
    b = _blocks(raw, name, n)
    if name == "F32":
        return b.reshape(-1).view("<f4").astype(F32)
    if name == "F16":
        return b.reshape(-1).view("<f2").astype(F32)
    if name == "BF16":
        return bf16_bits_to_f32(b.reshape(-1).view("<u2"))
    out = []
    step = 65536
    for i in range(0, b.shape[0], step):
        out.append(_DEQUANT[name](b[i:i + step]).reshape(-1))
    return (np.concatenate(out) if len(out) > 1 else out[0]).astype(F32, copy=False)


# ------------------------------------------------- self-test: second decoder
# A deliberately different decoder: one element at a time, pure Python ints and
# floats, halves decoded by hand from their bits, every float operation rounded
# to float32 (a double result of one +, -, * of two floats, rounded to float, is
# the correctly rounded float result).

def _r32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def _half(lo, hi):
    h = lo | (hi << 8)
    s = -1.0 if h & 0x8000 else 1.0
    e = (h >> 10) & 31
    m = h & 1023
    if e == 0:
        return s * m * 2.0 ** -24
    if e == 31:
        return s * float("inf") if m == 0 else float("nan")
    return s * (1024 + m) * 2.0 ** (e - 25)


def _ref_element(blk, name, e):
    B = blk
    if name == "Q4_0":
        d = _half(B[0], B[1])
        nib = (B[2 + e % 16] >> (4 * (e // 16))) & 15
        return _r32((nib - 8) * d)
    if name == "Q4_1":
        d, m = _half(B[0], B[1]), _half(B[2], B[3])
        nib = (B[4 + e % 16] >> (4 * (e // 16))) & 15
        return _r32(_r32(nib * d) + m)
    if name in ("Q5_0", "Q5_1"):
        base = 2 if name == "Q5_0" else 4
        d = _half(B[0], B[1])
        qh = B[base] | (B[base + 1] << 8) | (B[base + 2] << 16) | (B[base + 3] << 24)
        nib = (B[base + 4 + e % 16] >> (4 * (e // 16))) & 15
        q = nib + 16 * ((qh >> e) & 1)
        if name == "Q5_0":
            return _r32((q - 16) * d)
        return _r32(_r32(q * d) + _half(B[2], B[3]))
    if name == "Q8_0":
        q = B[2 + e]
        q = q - 256 if q > 127 else q
        return _r32(q * _half(B[0], B[1]))
    if name == "Q2_K":
        d, dmin = _half(B[80], B[81]), _half(B[82], B[83])
        byte = 16 + 32 * (e // 128) + e % 32
        q = (B[byte] >> (2 * ((e % 128) // 32))) & 3
        s = B[e // 16]
        return _r32(_r32(_r32(d * (s & 15)) * q) - _r32(dmin * (s >> 4)))
    if name == "Q3_K":
        d = _half(B[108], B[109])
        byte = 32 + 32 * (e // 128) + e % 32
        low = (B[byte] >> (2 * ((e % 128) // 32))) & 3
        h = (B[e % 32] >> (e // 32)) & 1
        q = low if h else low - 4
        s = e // 16
        sb = B[96:108]
        lo4 = (sb[s] & 15) if s < 8 else (sb[s - 8] >> 4)
        hi2 = (sb[8 + s % 4] >> (2 * (s // 4))) & 3
        sc = (lo4 + 16 * hi2) - 32
        return _r32(_r32(d * sc) * q)
    if name in ("Q4_K", "Q5_K"):
        d, dmin = _half(B[0], B[1]), _half(B[2], B[3])
        s = e // 32
        sb = B[4:16]
        if s < 4:
            sc, mn = sb[s] % 64, sb[s + 4] % 64
        else:
            sc = (sb[s + 4] % 16) + 16 * (sb[s - 4] // 64)
            mn = (sb[s + 4] // 16) + 16 * (sb[s] // 64)
        qs0 = 16 if name == "Q4_K" else 48
        byte = qs0 + 32 * (e // 64) + e % 32
        q = (B[byte] >> (4 * ((e // 32) % 2))) & 15
        if name == "Q5_K":
            q += 16 * ((B[16 + e % 32] >> (e // 32)) & 1)
        return _r32(_r32(_r32(d * sc) * q) - _r32(dmin * mn))
    if name == "Q6_K":
        d = _half(B[208], B[209])
        n, k, l = e // 128, (e % 128) // 32, e % 32
        nib = (B[64 * n + 32 * (k % 2) + l] >> (4 * (k // 2))) & 15
        h = (B[128 + 32 * n + l] >> (2 * k)) & 3
        q = (nib | (h << 4)) - 32
        sc = B[192 + e // 16]
        sc = sc - 256 if sc > 127 else sc
        return _r32(_r32(d * sc) * q)
    raise ValueError(name)


def reference_dequantize(raw, name, n):
    """slow element-by-element decoder, independent of dequantize() (self-test only)"""
    raw = bytes(np.asarray(raw, dtype=np.uint8).reshape(-1))
    if name == "F32":
        return np.array(struct.unpack("<%df" % n, raw[:4 * n]), dtype=F32)
    if name == "F16":
        return np.array([_half(raw[2 * i], raw[2 * i + 1]) for i in range(n)], dtype=F32)
    if name == "BF16":
        return np.array([struct.unpack("<f", b"\0\0" + raw[2 * i:2 * i + 2])[0] for i in range(n)], dtype=F32)
    _, bs, ts = GGML_TYPES[name]
    out = []
    for i in range(n // bs):
        blk = raw[i * ts:(i + 1) * ts]
        out.extend(_ref_element(blk, name, e) for e in range(bs))
    return np.array(out, dtype=F32)


def random_blocks(name, nblocks, rng):
    """random raw blocks of a type, with every scale a finite half in a sane range:
    exercises every bit of the layout, independent of any quantizer"""
    _, bs, ts = GGML_TYPES[name]
    if name in ("F32", "F16", "BF16"):
        v = (rng.standard_normal(nblocks) * 4).astype(F32)
        return quantize(v, name)
    b = rng.integers(0, 256, size=(nblocks, ts), dtype=np.uint8)

    def put(off):
        mag = rng.uniform(1e-3, 0.1, size=nblocks).astype(F32)
        sign = np.where(rng.random(nblocks) < 0.5, F32(-1), F32(1))
        h, _ = _to_f16_bytes(mag * sign)
        b[:, off:off + 2] = h
    offs = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
            "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}[name]
    for o in offs:
        put(o)
    return b.reshape(-1)


def test_values(rng, rows=4, cols=512):
    """seeded test matrix: gaussian rows, outliers, a zero super-block, an all-positive row"""
    x = (rng.standard_normal((rows, cols)) * 0.5).astype(F32)
    x[1, rng.integers(0, cols, size=8)] *= 40          # outliers
    if rows > 2:
        x[2, :256] = 0                                  # an all-zero super-block
        x[2, 300:332] = 1.25                            # a constant block
    if rows > 3:
        x[3] = rng.uniform(0.25, 3.0, size=cols).astype(F32)   # all positive: mins matter
    return x


# relative (to the row's range) max error bounds of this module's quantizers
_TOL = {"F32": 0, "F16": 1e-3, "BF16": 1e-2, "Q8_0": 0.01, "Q6_K": 0.03, "Q5_0": 0.04, "Q5_1": 0.03,
        "Q5_K": 0.05, "Q4_0": 0.07, "Q4_1": 0.05, "Q4_K": 0.09, "Q3_K": 0.2, "Q2_K": 0.35}


def selftest():
    rng = np.random.default_rng(1234)
    x = test_values(rng)
    # block sizes agree with the layouts above
    assert [GGML_TYPES[t][2] for t in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")] == [18, 20, 22, 24, 34]
    assert [GGML_TYPES[t][2] for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")] == [84, 110, 144, 176, 210]
    for name in SUPPORTED:
        raw = quantize(x, name)
        assert raw.dtype == np.uint8 and raw.size == row_bytes(name, x.size), name
        y = dequantize(raw, name, x.size).reshape(x.shape)
        assert y.dtype == F32
        # 1. the second decoder agrees bit for bit, on quantized and on random blocks
        r = reference_dequantize(raw, name, x.size).reshape(x.shape)
        assert np.array_equal(y.view(np.uint32), r.view(np.uint32)), "%s: decoders disagree" % name
        rb = random_blocks(name, 6, rng)
        n = rb.size // GGML_TYPES[name][2] * GGML_TYPES[name][1]
        a = dequantize(rb, name, n)
        c = reference_dequantize(rb, name, n)
        assert np.array_equal(a.view(np.uint32), c.view(np.uint32)), "%s: decoders disagree on random blocks" % name
        # 2. quantization error is small relative to each row's range
        rng_row = x.max(axis=1) - np.minimum(x.min(axis=1), 0)
        err = np.abs(y - x).max(axis=1) / rng_row
        assert np.all(err <= _TOL[name]), "%s: error %s" % (name, err)
        # 3. zero stays zero where a whole block is zero
        assert np.all(y[2, :256] == 0), name
        # 4. requantizing dequantized values is stable for the scaled types
        print("%-5s ok  max rel err %.4f  %6d bytes for %d values" % (name, err.max(), raw.size, x.size))
    # bf16 rounding: to nearest even, NaN stays NaN
    t = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, np.nan], dtype=F32)
    bits = f32_to_bf16_bits(t)
    assert list(bits[:5]) == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80], [hex(v) for v in bits]
    assert np.isnan(bf16_bits_to_f32(bits[5:]))[0]
    # hand-made Q4_0 block: d = 0.5, element 0 = (1-8)*0.5, element 16 = (15-8)*0.5
    blk = np.zeros(18, dtype=np.uint8)
    blk[0:2] = np.frombuffer(np.float16(0.5).tobytes(), dtype=np.uint8)
    blk[2] = 0xF1
    v = dequantize(blk, "Q4_0", 32)
    assert v[0] == -3.5 and v[16] == 3.5 and v[1] == -4.0, v
    # hand-made Q8_0 block: d = 0.25, qs[3] = -128
    blk = np.zeros(34, dtype=np.uint8)
    blk[0:2] = np.frombuffer(np.float16(0.25).tobytes(), dtype=np.uint8)
    blk[2 + 3] = 0x80
    v = dequantize(blk, "Q8_0", 32)
    assert v[3] == -32.0 and v[0] == 0, v
    print("selftest passed")


if __name__ == "__main__":
    if "--selftest" in sys.argv[1:]:
        selftest()
    else:
        print(__doc__)
