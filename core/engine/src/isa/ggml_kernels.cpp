// ggml's tensor types: the type table with its block dequantization and dot products over stored
// blocks, compiled once per instruction-set level (attnviz/engine/isa.h; core/CMakeLists.txt:
// attnviz_engine_ggml_isa_<level>); ggml_types.cpp serves the public functions of
// attnviz/engine/ggml_kernels.h from the level in use. This file defines one global symbol, its
// level's table, and uses nothing inline from outside (no std::string, vector or function) so
// that no level's code can stand in for another's at link time (tests/engine checks the objects).
//
// The block layouts are ggml's (ggml-common.h); tools/gguf/quants.py documents each one byte by
// byte and is the source of the test fixtures. Dequantization is float32 arithmetic in ggml's
// order, every product and difference rounded on its own: this file is compiled with
// -ffp-contract=off (core/CMakeLists.txt), so `a * b - c` never becomes an FMA and the results
// match ggml's reference dequantizer (and the fixtures) bit for bit. (Today every product that
// could be fused is exact in float32, e.g. Q4_K's (d * sc) * q is 11 + 6 + 4 significant bits, so
// a contracting build happens to agree too; the flag keeps that from being luck.)
//
// Blocks are read through byte structs (alignment 1) and memcpy, so a tensor at any address (a
// GGUF file may declare general.alignment 1) is read without unaligned-access UB.
#include "../ggml_table.h"
#include "attnviz/engine/half.h"

#include <cstring>
#include <type_traits>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define ATTNVIZ_AVX512 1
#else
#define ATTNVIZ_AVX512 0
#endif

// The AVX2 level (x86-64-v3: AVX2, FMA, F16C) has decode's kernels for the types people run
// (F16, Q8_0, Q4_K, Q5_K, Q6_K); its other types take the portable ones.
#if !ATTNVIZ_AVX512 && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define ATTNVIZ_AVX2 1
#else
#define ATTNVIZ_AVX2 0
#endif

#if ATTNVIZ_AVX512 || defined(__F16C__)
#include <immintrin.h>
#endif

#ifndef ATTNVIZ_ISA_LEVEL
#error "compiled by core/CMakeLists.txt once per level, with ATTNVIZ_ISA_LEVEL set"
#endif
#define ATTNVIZ_CAT2(a, b) a##b
#define ATTNVIZ_CAT(a, b) ATTNVIZ_CAT2(a, b)

#if defined(__clang__)
// The same guarantee as -ffp-contract=off for builds that compile this file without the flag
// (the instrumented fuzz library).
#pragma clang fp contract(off)
#endif

// GCC fully unrolls the 16- and 32-value loops of a block before it vectorises, and then leaves
// them scalar; kept as loops they become a few vector instructions.
#if defined(__GNUC__) && !defined(__clang__)
#define ATTNVIZ_VECTOR_LOOP _Pragma("GCC unroll 1")
#else
#define ATTNVIZ_VECTOR_LOOP
#endif

namespace attnviz {

namespace {

constexpr int QK = 32;     // values per legacy block
constexpr int QK_K = 256;  // values per K-quant super-block

// ------------------------------------------------------------------------------------ blocks
// Every field is bytes: halves are read with half(), 32-bit words with memcpy.
struct BlockQ4_0 {
  unsigned char d[2];
  unsigned char qs[QK / 2];
};
static_assert(sizeof(BlockQ4_0) == 2 + QK / 2);
struct BlockQ4_1 {
  unsigned char d[2];
  unsigned char m[2];
  unsigned char qs[QK / 2];
};
static_assert(sizeof(BlockQ4_1) == 4 + QK / 2);
struct BlockQ5_0 {
  unsigned char d[2];
  unsigned char qh[4];
  unsigned char qs[QK / 2];
};
static_assert(sizeof(BlockQ5_0) == 2 + 4 + QK / 2);
struct BlockQ5_1 {
  unsigned char d[2];
  unsigned char m[2];
  unsigned char qh[4];
  unsigned char qs[QK / 2];
};
static_assert(sizeof(BlockQ5_1) == 4 + 4 + QK / 2);
struct BlockQ8_0 {
  unsigned char d[2];
  signed char qs[QK];
};
static_assert(sizeof(BlockQ8_0) == 2 + QK);
// Q2_K: 16 sub-blocks of 16; scales[s] = scale (low nibble) | min (high nibble).
struct BlockQ2_K {
  unsigned char scales[QK_K / 16];
  unsigned char qs[QK_K / 4];
  unsigned char d[2];
  unsigned char dmin[2];
};
static_assert(sizeof(BlockQ2_K) == QK_K / 16 + QK_K / 4 + 4);
// Q3_K: 16 sub-blocks of 16 with 6-bit signed scales packed in 12 bytes; a high-bit mask.
struct BlockQ3_K {
  unsigned char hmask[QK_K / 8];
  unsigned char qs[QK_K / 4];
  unsigned char scales[12];
  unsigned char d[2];
};
static_assert(sizeof(BlockQ3_K) == QK_K / 8 + QK_K / 4 + 12 + 2);
// Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes.
struct BlockQ4_K {
  unsigned char d[2];
  unsigned char dmin[2];
  unsigned char scales[12];
  unsigned char qs[QK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 4 + 12 + QK_K / 2);
struct BlockQ5_K {
  unsigned char d[2];
  unsigned char dmin[2];
  unsigned char scales[12];
  unsigned char qh[QK_K / 8];
  unsigned char qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 4 + 12 + QK_K / 8 + QK_K / 2);
// Q6_K: 16 sub-blocks of 16 with int8 scales; 4 low bits in ql, 2 high bits in qh.
struct BlockQ6_K {
  unsigned char ql[QK_K / 2];
  unsigned char qh[QK_K / 4];
  signed char scales[QK_K / 16];
  unsigned char d[2];
};
static_assert(sizeof(BlockQ6_K) == QK_K / 2 + QK_K / 4 + QK_K / 16 + 2);

inline float half(const unsigned char* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  // Without F16C (the baseline level): zeros, normals, infinities and NaNs by moving the bits,
  // inline (a NaN quietened, its payload kept, as F16C's conversion does); subnormals, which
  // weights rarely hold, through halfToFloat. A call per value made the baseline's F16 decode
  // 0.7 tokens/s at 1B.
  const std::uint32_t em = h & 0x7fffu;
  std::uint32_t bits;
  if (em > 0x7c00u)
    bits = (em << 13) | 0x7fc00000u;
  else if (em == 0x7c00u)
    bits = 0x7f800000u;
  else if (em >= 0x0400u)
    bits = (em << 13) + (112u << 23);  // exponent rebiased from 15 to 127
  else if (em == 0)
    bits = 0;
  else
    return halfToFloat(h);
  bits |= std::uint32_t(h & 0x8000u) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

inline std::uint32_t word(const unsigned char* p) {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void scaleMinK4(int j, const unsigned char* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q3_K: the 16 signed 6-bit scales (-32..31).
inline void scalesQ3K(const unsigned char* s, int out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low4 = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
    const int high2 = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = (low4 | (high2 << 4)) - 32;
  }
}

// ------------------------------------------------------------------------ dequantization
// Each takes nb whole blocks at src and writes nb * block values at y.
using detail::DequantFn;

void dequantF32(const unsigned char* src, float* y, std::int64_t n) {
  std::memcpy(y, src, std::size_t(n) * 4);
}

void dequantF16(const unsigned char* src, float* y, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) y[i] = half(src + 2 * i);
}

void dequantBF16(const unsigned char* src, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t b;
    std::memcpy(&b, src + 2 * i, 2);
    const std::uint32_t bits = std::uint32_t(b) << 16;
    std::memcpy(y + i, &bits, 4);
  }
}

void dequantQ4_0(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ4_0), y += QK) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(src);
    const float d = half(b->d);
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j) y[j] = float((b->qs[j] & 0x0F) - 8) * d;
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j) y[j + QK / 2] = float((b->qs[j] >> 4) - 8) * d;
  }
}

void dequantQ4_1(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ4_1), y += QK) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(src);
    const float d = half(b->d), m = half(b->m);
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j) y[j] = float(b->qs[j] & 0x0F) * d + m;
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j) y[j + QK / 2] = float(b->qs[j] >> 4) * d + m;
  }
}

void dequantQ5_0(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ5_0), y += QK) {
    const auto* b = reinterpret_cast<const BlockQ5_0*>(src);
    const float d = half(b->d);
    const std::uint32_t qh = word(b->qh);
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j)
      y[j] = float(((b->qs[j] & 0x0F) | int((qh >> j) & 1u) << 4) - 16) * d;
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j)
      y[j + QK / 2] = float(((b->qs[j] >> 4) | int((qh >> (j + 16)) & 1u) << 4) - 16) * d;
  }
}

void dequantQ5_1(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ5_1), y += QK) {
    const auto* b = reinterpret_cast<const BlockQ5_1*>(src);
    const float d = half(b->d), m = half(b->m);
    const std::uint32_t qh = word(b->qh);
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j)
      y[j] = float((b->qs[j] & 0x0F) | int((qh >> j) & 1u) << 4) * d + m;
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK / 2; ++j)
      y[j + QK / 2] = float((b->qs[j] >> 4) | int((qh >> (j + 16)) & 1u) << 4) * d + m;
  }
}

void dequantQ8_0(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ8_0), y += QK) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
    const float d = half(b->d);
    ATTNVIZ_VECTOR_LOOP
    for (int j = 0; j < QK; ++j) y[j] = float(b->qs[j]) * d;
  }
}

// e = 128n + 32j + l: 2 bits at shift 2j of qs[32n + l]; sub-block e / 16.
void dequantQ2_K(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ2_K)) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(src);
    const float d = half(b->d), dmin = half(b->dmin);
    const unsigned char* q = b->qs;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int h = 0; h < 2; ++h) {
          const int sc = b->scales[is++];
          const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
          const unsigned char* qq = q + 16 * h;
          ATTNVIZ_VECTOR_LOOP
          for (int l = 0; l < 16; ++l) y[l] = dl * float((qq[l] >> shift) & 3) - ml;
          y += 16;
        }
      }
    }
  }
}

// As Q2_K for the low 2 bits; the high bit (hmask[e % 32] >> e / 32) set means q = low, clear
// means q = low - 4.
void dequantQ3_K(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ3_K)) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(src);
    const float d = half(b->d);
    int sc[16];
    scalesQ3K(b->scales, sc);
    const unsigned char* q = b->qs;
    int is = 0;
    unsigned m = 1;
    for (int n = 0; n < QK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int h = 0; h < 2; ++h) {
          const float dl = d * float(sc[is++]);
          const unsigned char* qq = q + 16 * h;
          const unsigned char* hm = b->hmask + 16 * h;
          ATTNVIZ_VECTOR_LOOP
          for (int l = 0; l < 16; ++l)
            y[l] = dl * float(((qq[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
          y += 16;
        }
      }
    }
  }
}

// e = 64c + l (l < 32): low nibble of qs[32c + l], sub-block 2c; e = 64c + 32 + l: high nibble,
// sub-block 2c + 1. x = (d * sc) * q - (dmin * m).
void dequantQ4_K(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ4_K)) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(src);
    const float d = half(b->d), dmin = half(b->dmin);
    const unsigned char* q = b->qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      int sc, m;
      scaleMinK4(2 * c, b->scales, sc, m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      scaleMinK4(2 * c + 1, b->scales, sc, m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      ATTNVIZ_VECTOR_LOOP
      for (int l = 0; l < 32; ++l) y[l] = d1 * float(q[l] & 0xF) - m1;
      ATTNVIZ_VECTOR_LOOP
      for (int l = 0; l < 32; ++l) y[l + 32] = d2 * float(q[l] >> 4) - m2;
      y += 64;
    }
  }
}

// As Q4_K plus a fifth bit: q += 16 * ((qh[e % 32] >> (e / 32)) & 1).
void dequantQ5_K(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ5_K)) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(src);
    const float d = half(b->d), dmin = half(b->dmin);
    const unsigned char* q = b->qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      int sc, m;
      scaleMinK4(2 * c, b->scales, sc, m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      scaleMinK4(2 * c + 1, b->scales, sc, m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      const unsigned u1 = 1u << (2 * c), u2 = 2u << (2 * c);
      ATTNVIZ_VECTOR_LOOP
      for (int l = 0; l < 32; ++l)
        y[l] = d1 * float((q[l] & 0xF) + ((b->qh[l] & u1) ? 16 : 0)) - m1;
      ATTNVIZ_VECTOR_LOOP
      for (int l = 0; l < 32; ++l)
        y[l + 32] = d2 * float((q[l] >> 4) + ((b->qh[l] & u2) ? 16 : 0)) - m2;
      y += 64;
    }
  }
}

// e = 128n + 32k + l: low 4 bits from ql[64n + 32(k % 2) + l] (low nibble for k < 2, high
// for k >= 2), high 2 bits from qh[32n + l] >> 2k; q - 32; x = (d * scales[e / 16]) * q.
void dequantQ6_K(const unsigned char* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, src += sizeof(BlockQ6_K)) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
    const float d = half(b->d);
    const unsigned char* ql = b->ql;
    const unsigned char* qh = b->qh;
    const signed char* sc = b->scales;
    for (int n = 0; n < QK_K; n += 128, ql += 64, qh += 32, sc += 8, y += 128) {
      // 8 groups of 16: group g = 2k + l / 16 covers values 32k + 16(g % 2) + 0..15.
      for (int g = 0; g < 8; ++g) {
        const int k = g / 2, l0 = 16 * (g % 2);
        const unsigned char* lo = ql + 32 * (k % 2) + l0;
        const unsigned char* hi = qh + l0;
        const int loShift = 4 * (k / 2), hiShift = 2 * k;
        const float dl = d * float(sc[g % 2 + 2 * k]);
        float* yg = y + 32 * k + l0;
        ATTNVIZ_VECTOR_LOOP
        for (int l = 0; l < 16; ++l)
          yg[l] = dl * float((((lo[l] >> loShift) & 0xF) | (((hi[l] >> hiShift) & 3) << 4)) - 32);
      }
    }
  }
}

// ------------------------------------------------------------------------------ dot products
// Each takes nb whole blocks (n values for the float types) and x with as many values.
using detail::DotFn;

// Any type, portably (the fallback without AVX-512): 256 values at a time (one super-block,
// 8 legacy blocks) into a stack buffer in L1, then 16 partial sums the compiler vectorises.
template <DequantFn Dequant, int BlockValues, int BlockBytes>
float dotGeneric(const unsigned char* src, const float* x, std::int64_t nb) {
  constexpr int kChunk = 256;                    // values per step
  constexpr int kBlocks = kChunk / BlockValues;  // blocks per step
  float acc[16] = {};
  alignas(64) float tmp[kChunk];
  std::int64_t i = 0;
  for (; i + kBlocks <= nb; i += kBlocks, src += kBlocks * BlockBytes, x += kChunk) {
    Dequant(src, tmp, kBlocks);
    for (int j = 0; j < kChunk; j += 16)
      for (int k = 0; k < 16; ++k) acc[k] += tmp[j + k] * x[j + k];
  }
  float tail = 0.0f;
  if (i < nb) {  // the last blocks short of a whole step
    const int left = int(nb - i);
    Dequant(src, tmp, left);
    for (int j = 0; j < left * BlockValues; ++j) tail += tmp[j] * x[j];
  }
  float s = 0.0f;
  for (float a : acc) s += a;
  return s + tail;
}

#if ATTNVIZ_AVX512 || ATTNVIZ_AVX2
// What the AVX-512 and AVX2 kernels below share.

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline float hsum8(__m256 v) {
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

// Decode streams each matrix once, row after row, from a file mapping of 4 KB pages, where the
// hardware prefetcher stops at every page boundary: the kernels ask for the line kPrefetchAhead
// bytes on as they go (one instruction per line they read), so the next page's lines are on their
// way before the rows reach them. A prefetch past the end of the matrix is harmless (it never
// faults).
constexpr int kPrefetchAhead = 2048;
inline void prefetchAhead(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kPrefetchAhead, _MM_HINT_T0);
}

// The K-quant kernels on x in 16-bit parts (matVecBatch's) spend fewer cycles per block than the
// float kernels, so a line asked for kPrefetchAhead bytes on arrives too late for them: 8 KB on
// measured 1.13x the 1B Q4_K decode of 2 KB (4, 12 and 16 KB, and prefetching into L2 only,
// measured no better than 8 KB).
constexpr int kPrefetchAhead16 = 8192;
inline void prefetchAhead16(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kPrefetchAhead16, _MM_HINT_T0);
}
// The fast path's kernels (8-bit x) take fewer cycles per block again, yet measured best nearer:
// the 1B Q4_K_M decode, two builds alternating four times, medians 36.1 tokens/s at 4 KB on and
// 34.9 at 8 KB (12 KB: 31.6 in an earlier measurement).
constexpr int kPrefetchAhead8 = 4096;
inline void prefetchAhead8(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kPrefetchAhead8, _MM_HINT_T0);
}

// Q4_K / Q5_K: the 6-bit scales and mins of a super-block's 8 sub-blocks, four to a 32-bit word
// (one byte each), cut from the 12 packed bytes: w[0] scales 0..3, w[1] scales 4..7, w[2] mins
// 0..3, w[3] mins 4..7. Sub-blocks 4..7 take their low 4 bits from bytes 8..11 and the top 2 from
// bits 6..7 of bytes 0..3 (scales) and 4..7 (mins).
inline void scaleMinWordsK4(const unsigned char* q, std::uint32_t w[4]) {
  const std::uint32_t u0 = word(q), u1 = word(q + 4), u2 = word(q + 8);
  w[0] = u0 & 0x3F3F3F3Fu;
  w[1] = (u2 & 0x0F0F0F0Fu) | ((u0 >> 2) & 0x30303030u);
  w[2] = u1 & 0x3F3F3F3Fu;
  w[3] = ((u2 >> 4) & 0x0F0F0F0Fu) | ((u1 >> 2) & 0x30303030u);
}

// Q6_K: the 6-bit codes (0..63, before the -32) of values 128n + 32k + l, l < 32, for k = 0..3, as
// 32 bytes each: low 4 bits from ql[64n + 32(k % 2) + l] (low nibble for k < 2, high for k >= 2),
// high 2 bits from qh[32n + l] >> 2k. ql and qh point at the half's first bytes.
inline void codesQ6K(const unsigned char* ql, const unsigned char* qh, __m256i q[4]) {
  const __m256i m30 = _mm256_set1_epi8(0x30), m0F = _mm256_set1_epi8(0x0F);
  const __m256i A = load256(ql), B = load256(ql + 32), H = load256(qh);
  q[0] = _mm256_or_si256(_mm256_and_si256(A, m0F), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
  q[1] = _mm256_or_si256(_mm256_and_si256(B, m0F), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m0F), _mm256_and_si256(H, m30));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m0F),
                         _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
}
#endif

#if ATTNVIZ_AVX512
// AVX-512: the row's blocks are decoded in registers and multiplied into x as they stream past.
// Bits are unpacked on 16 bytes at a time (128-bit integer ops issue on three ports), widened to
// 16 int32 lanes, converted, and multiplied; per-block scales are applied once per block (legacy
// quants) or folded into the weights per 16/32-value group (K-quants: w = dl * q - ml). Scales
// of a super-block are computed into a small array first, so each is one broadcast load.

inline __m512 load16(const float* x) { return _mm512_loadu_ps(x); }
inline __m512 toFloatS(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)); }  // int8
inline __m512 toFloatU(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)); }  // uint8
inline __m128i lowNibbles(__m128i b) { return _mm_and_si128(b, _mm_set1_epi8(0x0F)); }
inline __m128i highNibbles(__m128i b) {
  return _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
}
inline __m128i bits2(__m128i b, int shift) {  // (b >> shift) & 3 per byte
  return _mm_and_si128(_mm_srl_epi16(b, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(3));
}

// The sum of the 16 lanes, once per row: the two halves through memory (GCC 12's reduce, extract
// and 512-to-256 cast intrinsics trip -Wuninitialized on the undefined vectors in its own header),
// then folded by shuffles. A decode row of 576 values is 18 blocks, so a chain of 15 scalar adds
// is not noise beside them.
inline float hsum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  return hsum8(_mm256_add_ps(_mm256_load_ps(t), _mm256_load_ps(t + 8)));
}

float dotF32(const unsigned char* src, const float* x, std::int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
         a3 = _mm512_setzero_ps();
  const float* w = reinterpret_cast<const float*>(src);  // read only through loadu
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int l = 0; l < 64; l += 16) prefetchAhead(w + i + l);
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), load16(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), load16(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), load16(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), load16(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), load16(x + i), a0);
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1u);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, w + i), _mm512_maskz_loadu_ps(k, x + i), a1);
  }
  return hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

float dotF16(const unsigned char* src, const float* x, std::int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetchAhead(src + 2 * i);
    const __m512 w0 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i)));
    const __m512 w1 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i + 32)));
    a0 = _mm512_fmadd_ps(w0, load16(x + i), a0);
    a1 = _mm512_fmadd_ps(w1, load16(x + i + 16), a1);
  }
  float s = hsum(_mm512_add_ps(a0, a1));
  for (; i < n; ++i) s += half(src + 2 * i) * x[i];
  return s;
}

float dotBF16(const unsigned char* src, const float* x, std::int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetchAhead(src + 2 * i);
    const __m512i b0 =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i)));
    const __m512i b1 = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i + 32)));
    a0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(b0, 16)), load16(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(b1, 16)), load16(x + i + 16), a1);
  }
  float s = hsum(_mm512_add_ps(a0, a1));
  for (; i < n; ++i) {
    std::uint16_t b;
    std::memcpy(&b, src + 2 * i, 2);
    const std::uint32_t bits = std::uint32_t(b) << 16;
    float w;
    std::memcpy(&w, &bits, 4);
    s += w * x[i];
  }
  return s;
}

inline std::uint64_t u16(const unsigned char* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Legacy quants with a scale only: acc += d * sum(q x), blocks taken two at a time so two
// accumulators hide the FMA latency (even blocks into a0, odd into a1). blockSum(b, x) gives
// sum(q x) of one block.
//
// Four (Q4_0, Q5_0, whose blocks decode in few instructions): the scales of four blocks are
// read as one 64-bit word, converted together and stored, and each FMA broadcasts its d from
// memory (a load, no shuffle): about 1 vector instruction a block for d instead of 4 (insert,
// convert, broadcast), 6-12% faster. The empty asm keeps the compiler from turning the four
// broadcasts back into register shuffles. Q8_0 measured slower this way (its blocks are short
// work and the store sits on their path), so it converts each d on its own. (Gathering the scales
// of 16 blocks measured slower still: the gather holds every block behind its slowest line.)
template <class Block, __m512 (*blockSum)(const Block*, const float*), bool Four>
float dotScaled(const unsigned char* src, const float* x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const Block*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  if constexpr (Four) {
    alignas(16) float d[4];
    for (; i + 4 <= nb; i += 4, x += 4 * QK) {
      prefetchAhead(b + i);
      prefetchAhead(b + i + 2);
      const std::uint64_t h =
          u16(b[i].d) | u16(b[i + 1].d) << 16 | u16(b[i + 2].d) << 32 | u16(b[i + 3].d) << 48;
      _mm_store_ps(d, _mm_cvtph_ps(_mm_cvtsi64_si128(std::int64_t(h))));
      asm("" : "+m"(d));
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(d[0]), blockSum(b + i, x), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(d[1]), blockSum(b + i + 1, x + QK), a1);
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(d[2]), blockSum(b + i + 2, x + 2 * QK), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(d[3]), blockSum(b + i + 3, x + 3 * QK), a1);
    }
  }
  for (; i + 2 <= nb; i += 2, x += 2 * QK) {
    prefetchAhead(b + i);
    a0 = _mm512_fmadd_ps(_mm512_set1_ps(half(b[i].d)), blockSum(b + i, x), a0);
    a1 = _mm512_fmadd_ps(_mm512_set1_ps(half(b[i + 1].d)), blockSum(b + i + 1, x + QK), a1);
  }
  if (i < nb) a0 = _mm512_fmadd_ps(_mm512_set1_ps(half(b[i].d)), blockSum(b + i, x), a0);
  return hsum(_mm512_add_ps(a0, a1));
}

// sum(q x) of a block whose 32 signed codes are `q` (bytes 0..15 values 0..15, 16..31 the rest).
inline __m512 sumCodes(__m256i q, const float* x) {
  const __m512 lo = toFloatS(_mm256_castsi256_si128(q));
  const __m512 hi = toFloatS(_mm256_extracti128_si256(q, 1));
  return _mm512_fmadd_ps(hi, load16(x + 16), _mm512_mul_ps(lo, load16(x)));
}

// A block's 16 bytes of nibbles as 32 bytes: low nibbles (values 0..15) in the low half, high
// nibbles (16..31) in the high half, each with garbage above bit 3 (the caller masks it). One
// broadcast load and one shift per block, where 16-byte halves cost a shift and a mask each.
inline __m256i nibbles(const unsigned char* qs) {
  const __m256i q = _mm256_broadcastsi128_si256(load128(qs));
  return _mm256_srlv_epi16(q, _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4));
}

inline __m512 sumQ8_0(const BlockQ8_0* b, const float* x) {
  return _mm512_fmadd_ps(toFloatS(load128(b->qs + 16)), load16(x + 16),
                         _mm512_mul_ps(toFloatS(load128(b->qs)), load16(x)));
}

inline __m512 sumQ4_0(const BlockQ4_0* b, const float* x) {  // q - 8 in -8..7
  const __m256i q = _mm256_and_si256(nibbles(b->qs), _mm256_set1_epi8(0x0F));
  return sumCodes(_mm256_sub_epi8(q, _mm256_set1_epi8(8)), x);
}

// (nibble | bit << 4) - 16 as a signed byte is the nibble with 0xF0 above it where the bit is
// clear, the bare nibble where it is set: (nibble | 0xF0) + 0x10 wraps to the nibble. One OR and
// one masked add on all 32 codes, the 32 bits of qh being the mask as stored.
inline __m512 sumQ5_0(const BlockQ5_0* b, const float* x) {
  const __m256i q = _mm256_or_si256(nibbles(b->qs), _mm256_set1_epi8(char(0xF0)));
  return sumCodes(_mm256_mask_add_epi8(q, __mmask32(word(b->qh)), q, _mm256_set1_epi8(16)), x);
}

float dotQ8_0(const unsigned char* src, const float* x, std::int64_t nb) {
  return dotScaled<BlockQ8_0, sumQ8_0, false>(src, x, nb);
}
float dotQ4_0(const unsigned char* src, const float* x, std::int64_t nb) {
  return dotScaled<BlockQ4_0, sumQ4_0, true>(src, x, nb);
}
float dotQ5_0(const unsigned char* src, const float* x, std::int64_t nb) {
  return dotScaled<BlockQ5_0, sumQ5_0, true>(src, x, nb);
}

// Legacy quants with scale and min: w = q * d + m per value, acc += w x.
template <class Block, void (*unpack)(const Block*, __m128i&, __m128i&)>
float dotAffine(const unsigned char* src, const float* x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const Block*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i, x += QK) {
    prefetchAhead(b + i);
    __m128i lo, hi;
    unpack(b + i, lo, hi);
    const __m512 d = _mm512_set1_ps(half(b[i].d)), m = _mm512_set1_ps(half(b[i].m));
    a0 = _mm512_fmadd_ps(_mm512_fmadd_ps(toFloatU(lo), d, m), load16(x), a0);
    a1 = _mm512_fmadd_ps(_mm512_fmadd_ps(toFloatU(hi), d, m), load16(x + 16), a1);
  }
  return hsum(_mm512_add_ps(a0, a1));
}

inline void unpackQ4_1(const BlockQ4_1* b, __m128i& lo, __m128i& hi) {
  const __m128i qs = load128(b->qs);
  lo = lowNibbles(qs);
  hi = highNibbles(qs);
}

inline void unpackQ5_1(const BlockQ5_1* b, __m128i& lo, __m128i& hi) {
  const __m128i qs = load128(b->qs), k16 = _mm_set1_epi8(16);
  const std::uint32_t qh = word(b->qh);
  lo = _mm_mask_add_epi8(lowNibbles(qs), __mmask16(qh), lowNibbles(qs), k16);
  hi = _mm_mask_add_epi8(highNibbles(qs), __mmask16(qh >> 16), highNibbles(qs), k16);
}

float dotQ4_1(const unsigned char* src, const float* x, std::int64_t nb) {
  return dotAffine<BlockQ4_1, unpackQ4_1>(src, x, nb);
}
float dotQ5_1(const unsigned char* src, const float* x, std::int64_t nb) {
  return dotAffine<BlockQ5_1, unpackQ5_1>(src, x, nb);
}

// acc += (dl * q - ml) x for 16 values whose 8-bit codes are `q` (unsigned).
inline __m512 groupAffine(__m128i q, const float* dl, const float* ml, const float* x, __m512 acc) {
  const __m512 w = _mm512_fmsub_ps(toFloatU(q), _mm512_set1_ps(*dl), _mm512_set1_ps(*ml));
  return _mm512_fmadd_ps(w, load16(x), acc);
}
// The same for 16 codes already in int32 lanes.
inline __m512 groupAffine(__m512i q, const float* dl, const float* ml, const float* x, __m512 acc) {
  const __m512 w = _mm512_fmsub_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(*dl), _mm512_set1_ps(*ml));
  return _mm512_fmadd_ps(w, load16(x), acc);
}
// acc += (dl * q) x for 16 values whose codes are `q` (signed).
inline __m512 groupScaled(__m128i q, const float* dl, const float* x, __m512 acc) {
  return _mm512_fmadd_ps(_mm512_mul_ps(toFloatS(q), _mm512_set1_ps(*dl)), load16(x), acc);
}

// Q2_K: value 128n + 32j + l is (qs[32n + l] >> 2j) & 3 in sub-block 8n + 2j + l / 16.
float dotQ2_K(const unsigned char* src, const float* x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ2_K*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  alignas(64) float dl[16], ml[16];
  for (std::int64_t i = 0; i < nb; ++i, x += QK_K) {
    for (std::size_t l = 0; l < sizeof(b[i]); l += 64)
      prefetchAhead(reinterpret_cast<const unsigned char*>(b + i) + l);
    const float d = half(b[i].d), dmin = half(b[i].dmin);
    for (int s = 0; s < 16; ++s) {
      dl[s] = d * float(b[i].scales[s] & 0xF);
      ml[s] = dmin * float(b[i].scales[s] >> 4);
    }
    for (int n = 0; n < 2; ++n) {
      const __m128i q0 = load128(b[i].qs + 32 * n), q1 = load128(b[i].qs + 32 * n + 16);
      for (int j = 0; j < 4; ++j) {
        const int s = 8 * n + 2 * j;
        const float* xs = x + 128 * n + 32 * j;
        a0 = groupAffine(bits2(q0, 2 * j), dl + s, ml + s, xs, a0);
        a1 = groupAffine(bits2(q1, 2 * j), dl + s + 1, ml + s + 1, xs + 16, a1);
      }
    }
  }
  return hsum(_mm512_add_ps(a0, a1));
}

// Q3_K: as Q2_K's low bits; the high bit (hmask[l] >> 4n + j) set keeps them, clear takes 4 off.
float dotQ3_K(const unsigned char* src, const float* x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ3_K*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  alignas(64) float dl[16];
  const __m128i four = _mm_set1_epi8(4);
  for (std::int64_t i = 0; i < nb; ++i, x += QK_K) {
    for (std::size_t l = 0; l < sizeof(b[i]); l += 64)
      prefetchAhead(reinterpret_cast<const unsigned char*>(b + i) + l);
    const float d = half(b[i].d);
    int sc[16];
    scalesQ3K(b[i].scales, sc);
    for (int s = 0; s < 16; ++s) dl[s] = d * float(sc[s]);
    const __m128i h0 = load128(b[i].hmask), h1 = load128(b[i].hmask + 16);
    for (int n = 0; n < 2; ++n) {
      const __m128i q0 = load128(b[i].qs + 32 * n), q1 = load128(b[i].qs + 32 * n + 16);
      for (int j = 0; j < 4; ++j) {
        const __m128i bit = _mm_set1_epi8(char(1 << (4 * n + j)));
        __m128i v0 = _mm_sub_epi8(bits2(q0, 2 * j), four);
        __m128i v1 = _mm_sub_epi8(bits2(q1, 2 * j), four);
        v0 = _mm_mask_add_epi8(v0, _mm_test_epi8_mask(h0, bit), v0, four);
        v1 = _mm_mask_add_epi8(v1, _mm_test_epi8_mask(h1, bit), v1, four);
        const int s = 8 * n + 2 * j;
        const float* xs = x + 128 * n + 32 * j;
        a0 = groupScaled(v0, dl + s, xs, a0);
        a1 = groupScaled(v1, dl + s + 1, xs + 16, a1);
      }
    }
  }
  return hsum(_mm512_add_ps(a0, a1));
}

// Q4_K / Q5_K: the 8 scales and 8 mins of a super-block, times d and dmin: dl[0..8) = d * sc,
// dl[8..16) = dmin * m, the same float products as scaleMinK4's. The 6-bit fields are cut from
// the 12 packed bytes as three 32-bit words (four fields a word), then widened and converted as
// one vector: a few instructions where eight scaleMinK4 calls and sixteen scalar conversions
// cost more than the super-block's 256 values.
inline void scalesMinsK4(const unsigned char* q, const unsigned char* d, const unsigned char* dmin,
                         float* dl) {
  std::uint32_t w[4];
  scaleMinWordsK4(q, w);
  const __m128i v = _mm_setr_epi32(int(w[0]), int(w[1]), int(w[2]), int(w[3]));
  const __m512 f =
      _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(half(d)), _mm512_set1_ps(half(dmin)));
  _mm512_store_ps(dl, _mm512_mul_ps(f, toFloatU(v)));
}

// Q4_K / Q5_K: 8 sub-blocks of 32; chunk c holds sub-block 2c in the low nibbles of qs[32c..]
// and 2c + 1 in the high nibbles. Q5_K adds 16 where bit 2c (2c + 1) of qh[l] is set. The 16 bytes
// of a half chunk are widened to 16 int32 lanes once (one instruction, folded into the load), then
// split there: low nibble = b & 15, high nibble = b >> 4.
template <bool Five>
float dotQ45_K(const unsigned char* src, const float* x, std::int64_t nb) {
  using Block = std::conditional_t<Five, BlockQ5_K, BlockQ4_K>;
  const auto* b = reinterpret_cast<const Block*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  alignas(64) float dl[16];
  const float* ml = dl + 8;
  const __m512i k15 = _mm512_set1_epi32(15), k16 = _mm512_set1_epi32(16);
  for (std::int64_t i = 0; i < nb; ++i, x += QK_K) {
    for (std::size_t l = 0; l < sizeof(Block); l += 64)
      prefetchAhead(reinterpret_cast<const unsigned char*>(b + i) + l);
    scalesMinsK4(b[i].scales, b[i].d, b[i].dmin, dl);
    __m128i qh0 = _mm_setzero_si128(), qh1 = _mm_setzero_si128();
    if constexpr (Five) qh0 = load128(b[i].qh), qh1 = load128(b[i].qh + 16);
    for (int c = 0; c < 4; ++c) {
      const __m512i qa = _mm512_cvtepu8_epi32(load128(b[i].qs + 32 * c));
      const __m512i qb = _mm512_cvtepu8_epi32(load128(b[i].qs + 32 * c + 16));
      __m512i la = _mm512_and_si512(qa, k15), lb = _mm512_and_si512(qb, k15);
      __m512i ha = _mm512_srli_epi32(qa, 4), hb = _mm512_srli_epi32(qb, 4);
      if constexpr (Five) {
        const __m128i bl = _mm_set1_epi8(char(1 << (2 * c))),
                      bh = _mm_set1_epi8(char(2 << (2 * c)));
        la = _mm512_mask_add_epi32(la, _mm_test_epi8_mask(qh0, bl), la, k16);
        lb = _mm512_mask_add_epi32(lb, _mm_test_epi8_mask(qh1, bl), lb, k16);
        ha = _mm512_mask_add_epi32(ha, _mm_test_epi8_mask(qh0, bh), ha, k16);
        hb = _mm512_mask_add_epi32(hb, _mm_test_epi8_mask(qh1, bh), hb, k16);
      }
      const float* xc = x + 64 * c;
      a0 = groupAffine(la, dl + 2 * c, ml + 2 * c, xc, a0);
      a1 = groupAffine(lb, dl + 2 * c, ml + 2 * c, xc + 16, a1);
      a0 = groupAffine(ha, dl + 2 * c + 1, ml + 2 * c + 1, xc + 32, a0);
      a1 = groupAffine(hb, dl + 2 * c + 1, ml + 2 * c + 1, xc + 48, a1);
    }
  }
  return hsum(_mm512_add_ps(a0, a1));
}

float dotQ4_K(const unsigned char* src, const float* x, std::int64_t nb) {
  return dotQ45_K<false>(src, x, nb);
}
float dotQ5_K(const unsigned char* src, const float* x, std::int64_t nb) {
  return dotQ45_K<true>(src, x, nb);
}

// Q6_K: value 128n + 32k + l: low 4 bits from ql[64n + 32(k % 2) + l] (low nibble for k < 2,
// high for k >= 2), high 2 bits from qh[32n + l] >> 2k; q - 32; scale scales[8n + 2k + l / 16].
float dotQ6_K(const unsigned char* src, const float* x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  alignas(64) float dl[16];
  const __m128i m30 = _mm_set1_epi8(0x30), k32 = _mm_set1_epi8(32);
  for (std::int64_t i = 0; i < nb; ++i, x += QK_K) {
    for (std::size_t l = 0; l < sizeof(b[i]); l += 64)
      prefetchAhead(reinterpret_cast<const unsigned char*>(b + i) + l);
    const float d = half(b[i].d);
    for (int s = 0; s < 16; ++s) dl[s] = d * float(b[i].scales[s]);
    for (int n = 0; n < 2; ++n) {
      for (int l0 = 0; l0 < 32; l0 += 16) {
        const __m128i A = load128(b[i].ql + 64 * n + l0), B = load128(b[i].ql + 64 * n + 32 + l0);
        const __m128i H = load128(b[i].qh + 32 * n + l0);
        const __m128i h0 = _mm_and_si128(_mm_slli_epi16(H, 4), m30);
        const __m128i h1 = _mm_and_si128(_mm_slli_epi16(H, 2), m30);
        const __m128i h2 = _mm_and_si128(H, m30);
        const __m128i h3 = _mm_and_si128(_mm_srli_epi16(H, 2), m30);
        const __m128i q0 = _mm_sub_epi8(_mm_or_si128(lowNibbles(A), h0), k32);
        const __m128i q1 = _mm_sub_epi8(_mm_or_si128(lowNibbles(B), h1), k32);
        const __m128i q2 = _mm_sub_epi8(_mm_or_si128(highNibbles(A), h2), k32);
        const __m128i q3 = _mm_sub_epi8(_mm_or_si128(highNibbles(B), h3), k32);
        const float* xs = x + 128 * n + l0;
        const float* ds = dl + 8 * n + l0 / 16;
        a0 = groupScaled(q0, ds + 0, xs, a0);
        a1 = groupScaled(q1, ds + 2, xs + 32, a1);
        a0 = groupScaled(q2, ds + 4, xs + 64, a0);
        a1 = groupScaled(q3, ds + 6, xs + 96, a1);
      }
    }
  }
  return hsum(_mm512_add_ps(a0, a1));
}

// ---- The K-quants against x in two 16-bit integer parts (detail::QuantX16), for decode's
// matVecBatch. A row's codes are small integers, so the products of a group of 32 values with x's
// parts are two integer multiply-adds (vpmaddwd: pairs of 16-bit products summed into 16 int32
// lanes, exact), and the scales are applied once per 32 values in float: fewer instructions than
// the float kernels above, which convert every code to float, and the same result to float32
// rounding (x's two parts hold it to 2^-17 of a step of 1/32767 of its group's largest |x|).
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
// acc += s * (the 16 pair sums of codes w with the 32 values of x at offset o), the two parts
// of x joined in float.
inline __m512 scaleInto(__m512i w, const detail::QuantX16& x, std::int64_t o, __m512 s,
                        __m512 acc) {
  const __m512 hi = _mm512_cvtepi32_ps(_mm512_madd_epi16(w, load512(x.q + o)));
  const __m512 lo = _mm512_cvtepi32_ps(_mm512_madd_epi16(w, load512(x.r + o)));
  return _mm512_fmadd_ps(_mm512_fmadd_ps(lo, _mm512_set1_ps(1.0f / 65536.0f), hi), s, acc);
}

// Q4_K / Q5_K: sub-block s (32 values) of super-block i is x group 8i + s, so
//   dot = sum_s (d sc_s) x.scale_s sum_l code_l (x.q_l + x.r_l / 65536) - sum_s (dmin m_s) x.sum_s
// Chunk c's 32 bytes widened to 16 bits hold sub-block 2c (low nibbles) and 2c + 1 (high).
template <bool Five>
float dotQ45_K16(const unsigned char* src, const detail::QuantX16& x, std::int64_t nb) {
  using Block = std::conditional_t<Five, BlockQ5_K, BlockQ4_K>;
  const auto* b = reinterpret_cast<const Block*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  __m256 am = _mm256_setzero_ps();
  alignas(64) float dl[16];
  alignas(32) float ds[8];
  const __m512i k15 = _mm512_set1_epi16(15), k16 = _mm512_set1_epi16(16);
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(Block); l += 64)
      prefetchAhead16(reinterpret_cast<const unsigned char*>(b + i) + l);
    scalesMinsK4(b[i].scales, b[i].d, b[i].dmin, dl);
    _mm256_store_ps(ds, _mm256_mul_ps(_mm256_load_ps(dl), _mm256_loadu_ps(x.scale + 8 * i)));
    am = _mm256_fmadd_ps(_mm256_load_ps(dl + 8), _mm256_loadu_ps(x.sum + 8 * i), am);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (Five) qh = load256(b[i].qh);
    for (int c = 0; c < 4; ++c) {
      const __m512i q = _mm512_cvtepu8_epi16(load256(b[i].qs + 32 * c));
      __m512i lo = _mm512_and_si512(q, k15), hi = _mm512_srli_epi16(q, 4);
      if constexpr (Five) {
        lo = _mm512_mask_add_epi16(
            lo, _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << (2 * c)))), lo, k16);
        hi = _mm512_mask_add_epi16(
            hi, _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(2 << (2 * c)))), hi, k16);
      }
      a0 = scaleInto(lo, x, QK_K * i + 64 * c, _mm512_set1_ps(ds[2 * c]), a0);
      a1 = scaleInto(hi, x, QK_K * i + 64 * c + 32, _mm512_set1_ps(ds[2 * c + 1]), a1);
    }
  }
  return hsum(_mm512_add_ps(a0, a1)) - hsum8(am);
}

// Q6_K: values 128n + 32k + l (l < 32) are x group 8i + 4n + k; their codes (as dotQ6_K reads
// them) widened to 16 bits give 16 int32 lanes of pair sums, lanes 0..7 under scale 8n + 2k and
// 8..15 under 8n + 2k + 1: one permute of the super-block's 16 scales (d sc, in float) per group.
float dotQ6_K16(const unsigned char* src, const detail::QuantX16& x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  const __m256i k32 = _mm256_set1_epi8(32);
  const __m512i pairs = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(b[i]); l += 64)
      prefetchAhead16(reinterpret_cast<const unsigned char*>(b + i) + l);
    const __m512 dsc = _mm512_mul_ps(_mm512_set1_ps(half(b[i].d)), toFloatS(load128(b[i].scales)));
    const float* xs = x.scale + 8 * i;
    for (int n = 0; n < 2; ++n) {
      __m256i q[4];
      codesQ6K(b[i].ql + 64 * n, b[i].qh + 32 * n, q);
      for (int k = 0; k < 4; ++k) {
        const int g = 4 * n + k;
        const __m512i w = _mm512_cvtepi8_epi16(_mm256_sub_epi8(q[k], k32));
        const __m512 s = _mm512_mul_ps(
            _mm512_permutexvar_ps(_mm512_add_epi32(pairs, _mm512_set1_epi32(2 * g)), dsc),
            _mm512_set1_ps(xs[g]));
        if (k % 2 == 0)
          a0 = scaleInto(w, x, QK_K * i + 32 * g, s, a0);
        else
          a1 = scaleInto(w, x, QK_K * i + 32 * g, s, a1);
      }
    }
  }
  return hsum(_mm512_add_ps(a0, a1));
}

#endif

#if ATTNVIZ_AVX2
// AVX2 (x86-64-v3 laptops and desktops without AVX-512): decode's matrix-vector kernels for F16
// and Q8_0 on float x, and for Q4_K, Q5_K and Q6_K on x in two 16-bit parts (detail::QuantX16), as
// the AVX-512 ones above but 8 lanes wide. Before them this level dequantized each row into a
// buffer and then took the dot product: a third of the AVX-512 decode speed on Q4_K.

float dotF16(const unsigned char* src, const float* x, std::int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetchAhead(src + 2 * i);
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(src + 2 * i)), _mm256_loadu_ps(x + i), a0);
    a1 =
        _mm256_fmadd_ps(_mm256_cvtph_ps(load128(src + 2 * i + 16)), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(src + 2 * i + 32)), _mm256_loadu_ps(x + i + 16),
                         a2);
    a3 = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(src + 2 * i + 48)), _mm256_loadu_ps(x + i + 24),
                         a3);
  }
  for (; i + 8 <= n; i += 8)
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(src + 2 * i)), _mm256_loadu_ps(x + i), a0);
  float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += half(src + 2 * i) * x[i];
  return s;
}

// Q8_0: sum(q x) of a block in float (its 32 codes widened 8 at a time), times d; even blocks
// into a0, odd into a1.
inline __m256 sumQ8_0(const BlockQ8_0* b, const float* x) {
  __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                               _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs)))),
                           _mm256_loadu_ps(x));
  for (int k = 8; k < QK; k += 8)
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + k)))),
                        _mm256_loadu_ps(x + k), s);
  return s;
}
float dotQ8_0(const unsigned char* src, const float* x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 2 <= nb; i += 2, x += 2 * QK) {
    prefetchAhead(b + i);
    a0 = _mm256_fmadd_ps(_mm256_set1_ps(half(b[i].d)), sumQ8_0(b + i, x), a0);
    a1 = _mm256_fmadd_ps(_mm256_set1_ps(half(b[i + 1].d)), sumQ8_0(b + i + 1, x + QK), a1);
  }
  if (i < nb) a0 = _mm256_fmadd_ps(_mm256_set1_ps(half(b[i].d)), sumQ8_0(b + i, x), a0);
  return hsum8(_mm256_add_ps(a0, a1));
}

// acc += s * (the 8 sums of codes w0 (16 values at o) and w1 (16 at o + 16) with x's two parts).
inline __m256 scaleInto(__m256i w0, __m256i w1, const detail::QuantX16& x, std::int64_t o, __m256 s,
                        __m256 acc) {
  const __m256i hi = _mm256_add_epi32(_mm256_madd_epi16(w0, load256(x.q + o)),
                                      _mm256_madd_epi16(w1, load256(x.q + o + 16)));
  const __m256i lo = _mm256_add_epi32(_mm256_madd_epi16(w0, load256(x.r + o)),
                                      _mm256_madd_epi16(w1, load256(x.r + o + 16)));
  const __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_set1_ps(1.0f / 65536.0f),
                                   _mm256_cvtepi32_ps(hi));
  return _mm256_fmadd_ps(v, s, acc);
}

// Q4_K / Q5_K: as dotQ45_K16 at AVX-512 (the same scale and min products, from the same 32-bit
// words). Q5_K's fifth bit: bit 2c (low nibbles) or 2c + 1 (high) of qh[l], widened as the codes.
template <bool Five>
float dotQ45_K16(const unsigned char* src, const detail::QuantX16& x, std::int64_t nb) {
  using Block = std::conditional_t<Five, BlockQ5_K, BlockQ4_K>;
  const auto* b = reinterpret_cast<const Block*>(src);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), am = _mm256_setzero_ps();
  alignas(32) float ds[8];
  const __m256i k15 = _mm256_set1_epi16(15), k1 = _mm256_set1_epi16(1);
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(Block); l += 64)
      prefetchAhead16(reinterpret_cast<const unsigned char*>(b + i) + l);
    std::uint32_t w[4];
    scaleMinWordsK4(b[i].scales, w);
    const __m256 dl = _mm256_mul_ps(
        _mm256_set1_ps(half(b[i].d)),
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(int(w[0]), int(w[1]), 0, 0))));
    const __m256 ml = _mm256_mul_ps(
        _mm256_set1_ps(half(b[i].dmin)),
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(int(w[2]), int(w[3]), 0, 0))));
    _mm256_store_ps(ds, _mm256_mul_ps(dl, _mm256_loadu_ps(x.scale + 8 * i)));
    am = _mm256_fmadd_ps(ml, _mm256_loadu_ps(x.sum + 8 * i), am);
    for (int c = 0; c < 4; ++c) {
      const __m256i q0 = _mm256_cvtepu8_epi16(load128(b[i].qs + 32 * c));
      const __m256i q1 = _mm256_cvtepu8_epi16(load128(b[i].qs + 32 * c + 16));
      const std::int64_t o = QK_K * i + 64 * c;
      __m256i l0 = _mm256_and_si256(q0, k15), l1 = _mm256_and_si256(q1, k15);
      __m256i h0 = _mm256_srli_epi16(q0, 4), h1 = _mm256_srli_epi16(q1, 4);
      if constexpr (Five) {
        const __m256i b0 = _mm256_cvtepu8_epi16(load128(b[i].qh));
        const __m256i b1 = _mm256_cvtepu8_epi16(load128(b[i].qh + 16));
        const __m128i sl = _mm_cvtsi32_si128(2 * c), sh = _mm_cvtsi32_si128(2 * c + 1);
        const auto fifth = [&](__m256i bits, __m128i shift) {
          return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(bits, shift), k1), 4);
        };
        l0 = _mm256_or_si256(l0, fifth(b0, sl));
        l1 = _mm256_or_si256(l1, fifth(b1, sl));
        h0 = _mm256_or_si256(h0, fifth(b0, sh));
        h1 = _mm256_or_si256(h1, fifth(b1, sh));
      }
      a0 = scaleInto(l0, l1, x, o, _mm256_set1_ps(ds[2 * c]), a0);
      a1 = scaleInto(h0, h1, x, o + 32, _mm256_set1_ps(ds[2 * c + 1]), a1);
    }
  }
  return hsum8(_mm256_add_ps(a0, a1)) - hsum8(am);
}

// Q6_K: as dotQ6_K16 at AVX-512; each group's two halves of 16 values under their own scale.
float dotQ6_K16(const unsigned char* src, const detail::QuantX16& x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  const __m256i k32 = _mm256_set1_epi8(32);
  alignas(32) float dsc[16];
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(b[i]); l += 64)
      prefetchAhead16(reinterpret_cast<const unsigned char*>(b + i) + l);
    const __m256 d = _mm256_set1_ps(half(b[i].d));
    const __m128i sc = load128(b[i].scales);
    _mm256_store_ps(dsc, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
    _mm256_store_ps(
        dsc + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
    const float* xs = x.scale + 8 * i;
    for (int n = 0; n < 2; ++n) {
      __m256i q[4];
      codesQ6K(b[i].ql + 64 * n, b[i].qh + 32 * n, q);
      for (int k = 0; k < 4; ++k) {
        const int g = 4 * n + k;
        const __m256i v = _mm256_sub_epi8(q[k], k32);
        const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
        const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1));
        const std::int64_t o = QK_K * i + 32 * g;
        // The halves' sums apart: lanes of w0 under scale 2g, of w1 under 2g + 1.
        const __m256i h0 = _mm256_madd_epi16(w0, load256(x.q + o));
        const __m256i h1 = _mm256_madd_epi16(w1, load256(x.q + o + 16));
        const __m256i l0 = _mm256_madd_epi16(w0, load256(x.r + o));
        const __m256i l1 = _mm256_madd_epi16(w1, load256(x.r + o + 16));
        const __m256 f = _mm256_set1_ps(1.0f / 65536.0f);
        const __m256 v0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l0), f, _mm256_cvtepi32_ps(h0));
        const __m256 v1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l1), f, _mm256_cvtepi32_ps(h1));
        const __m256 t = _mm256_fmadd_ps(v1, _mm256_set1_ps(dsc[2 * g + 1]),
                                         _mm256_mul_ps(v0, _mm256_set1_ps(dsc[2 * g])));
        if (k % 2 == 0)
          a0 = _mm256_fmadd_ps(t, _mm256_set1_ps(xs[g]), a0);
        else
          a1 = _mm256_fmadd_ps(t, _mm256_set1_ps(xs[g]), a1);
      }
    }
  }
  return hsum8(_mm256_add_ps(a0, a1));
}
#endif

#if ATTNVIZ_AVX512 || ATTNVIZ_AVX2
// ---- The fast path (engine: setFastActivations): x rounded to 8-bit integers (detail::QuantX8,
// one scale per block of the weights' size: 32 values for Q8_0, 256 for the K-quants) and each
// block's products summed in integers, the scales applied once per block in float. The codes are
// unsigned bytes (Q6_K's before its -32, Q8_0's as magnitudes with x's sign flipped where the
// code is negative), so one unsigned-by-signed byte multiply-add (vpmaddubsw) makes 16-bit pair
// sums that cannot saturate (at most 2 * 128 * 127), and one 16-bit multiply-add (vpmaddwd)
// applies the sub-blocks' integer scales. The result is exact for the rounded x: what differs
// from dotRow is x's rounding to 1/127 of its block's largest |x|.
#endif

#if ATTNVIZ_AVX512
inline __m512i join256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}
// 16-bit lanes 0..15 take lane a of v, lanes 16..31 lane b.
inline __m512i lanesOf(int a, int b) {
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(short(a)),
                                 _mm512_set1_epi16(short(b)));
}

// Q4_K / Q5_K: chunk c's 32 bytes give sub-blocks 2c (low nibbles) and 2c + 1 (high) as one
// 64-byte vector, against x's 64 values at 64c; its 32 pair sums times the two sub-blocks'
// scales (vpmaddwd) add into 16 int32 lanes. Per super-block:
//   dot = d dx sum_s sc_s sum_l code_l xq_l - dmin dx sum_s m_s sum_l xq_l
// the second from x's sums per 16 values (x.bsum), a pair per sub-block.
template <bool Five>
float dotQ45_K8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  using Block = std::conditional_t<Five, BlockQ5_K, BlockQ4_K>;
  const auto* b = reinterpret_cast<const Block*>(src);
  __m512 acc = _mm512_setzero_ps();
  __m256 accMin = _mm256_setzero_ps();
  const __m512i m0F = _mm512_set1_epi8(0x0F), k16 = _mm512_set1_epi8(16);
  const __m512i shift4 = lanesOf(0, 4);
  const __m512i idx[4] = {lanesOf(0, 1), lanesOf(2, 3), lanesOf(4, 5), lanesOf(6, 7)};
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(Block); l += 64)
      prefetchAhead8(reinterpret_cast<const unsigned char*>(b + i) + l);
    std::uint32_t w[4];
    scaleMinWordsK4(b[i].scales, w);
    const __m512i sc =
        _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_setr_epi32(int(w[0]), int(w[1]), 0, 0)));
    const __m128i mins8 = _mm_setr_epi32(int(w[2]), int(w[3]), 0, 0);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));  // each twice
    const signed char* xq = x.q + QK_K * i;
    __m512i isum = _mm512_setzero_si512();
    __m256i qh = _mm256_setzero_si256();
    if constexpr (Five) qh = load256(b[i].qh);
    for (int c = 0; c < 4; ++c) {
      // The 32 bytes in both halves, the upper half shifted down a nibble.
      __m512i v = _mm512_and_si512(
          _mm512_srlv_epi16(_mm512_broadcast_i64x4(load256(b[i].qs + 32 * c)), shift4), m0F);
      if constexpr (Five) {
        const __mmask64 hi =
            __mmask64(_mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << (2 * c))))) |
            (__mmask64(_mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(2 << (2 * c))))) << 32);
        v = _mm512_mask_add_epi8(v, hi, v, k16);
      }
      const __m512i p = _mm512_maddubs_epi16(v, _mm512_loadu_si512(xq + 64 * c));
      isum = _mm512_add_epi32(isum, _mm512_madd_epi16(p, _mm512_permutexvar_epi16(idx[c], sc)));
    }
    const float dx = x.d[i];
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(half(b[i].d) * dx), acc);
    const __m256i ms = _mm256_madd_epi16(mins, load256(x.bsum + 16 * i));
    accMin = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(half(b[i].dmin) * dx), accMin);
  }
  return hsum(acc) - hsum8(accMin);
}

// Q6_K: codes 0..63 (before the -32) of values 128n + 64j .. + 64 as one vector against x's 64
// values there; pair sums times the four 16-value scales they fall under. The -32 is taken off
// once per super-block: 32 sum_s sc_s (x's sum over the 16 values of s).
float dotQ6_K8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
  __m512 acc = _mm512_setzero_ps();
  __m512i idx[4];
  for (int g = 0; g < 4; ++g)  // lanes 8t .. 8t + 7 under scale 4g + t
    idx[g] =
        _mm512_add_epi16(_mm512_set1_epi16(short(4 * g)),
                         _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                                            21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                                            11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           3));
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(b[i]); l += 64)
      prefetchAhead8(reinterpret_cast<const unsigned char*>(b + i) + l);
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(b[i].scales));
    const __m512i sc = _mm512_zextsi256_si512(sc16);
    const signed char* xq = x.q + QK_K * i;
    __m512i isum = _mm512_setzero_si512();
    for (int n = 0; n < 2; ++n) {
      __m256i q[4];
      codesQ6K(b[i].ql + 64 * n, b[i].qh + 32 * n, q);
      for (int j = 0; j < 2; ++j) {
        const __m512i p = _mm512_maddubs_epi16(join256(q[2 * j], q[2 * j + 1]),
                                               _mm512_loadu_si512(xq + 128 * n + 64 * j));
        isum = _mm512_add_epi32(isum,
                                _mm512_madd_epi16(p, _mm512_permutexvar_epi16(idx[2 * n + j], sc)));
      }
    }
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(x.bsum + 16 * i)), 5);
    isum = _mm512_sub_epi32(isum, join256(off, _mm256_setzero_si256()));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(half(b[i].d) * x.d[i]), acc);
  }
  return hsum(acc);
}

// Q8_0: two blocks (64 codes) to a vector; |code| against x with the code's sign, pair sums
// summed to 16 int32 lanes, lanes 0..7 under block i's d dx and 8..15 under block i + 1's.
float dotQ8_0_8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
  __m512 acc = _mm512_setzero_ps();
  const __m512i ones = _mm512_set1_epi16(1);
  std::int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    prefetchAhead8(b + i);
    const __m512i w = join256(load256(b[i].qs), load256(b[i + 1].qs));
    const __m512i xv = _mm512_loadu_si512(x.q + QK * i);
    const __m512i sx = _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(w), _mm512_setzero_si512(), xv);
    const __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), ones);
    const __m512 d = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(half(b[i].d) * x.d[i]),
                                          _mm512_set1_ps(half(b[i + 1].d) * x.d[i + 1]));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc);
  }
  float tail = 0.0f;
  if (i < nb) {
    const __m256i w = load256(b[i].qs), xv = load256(x.q + QK * i);
    const __m256i s = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w)), _mm256_set1_epi16(1));
    tail = hsum8(_mm256_cvtepi32_ps(s)) * (half(b[i].d) * x.d[i]);
  }
  return hsum(acc) + tail;
}
#endif

#if ATTNVIZ_AVX512 || ATTNVIZ_AVX2
// ---- The fast path in a prompt's products (matMulFast, detail::Pass8Fn): many rows of x meet
// each stored row, so the rows are first repacked, 16 at a time, into one layout for all the
// K-quants: codes as unsigned bytes, 4 values of each of the 16 rows to a 64-byte vector (the
// rows are the int32 lanes), and per sub-block of SB values a vector of the rows' scales S and
// one of their offsets M (w = S code - M: Q4_K / Q5_K's d sc and dmin m, Q6_K's d sc and 32 d sc).
// One unsigned-by-signed byte dot of 4 (vpdpbusd, or two multiply-adds without VNNI) then adds 4
// products of 16 rows with one row of x, broadcast, into 16 int32 lanes; 8 rows of x share each
// vector of codes. Each sub-block's int32 sums are exact; its scale, offset and x's block scale
// are applied in float, as in decode's fast kernels.
inline std::uint32_t load32(const void* p) {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// One super-block of a stored row as 256 codes and per sub-block S and M.
struct UnpackQ4_K {
  static constexpr int SB = 32;
  static void unpack(const unsigned char* src, unsigned char* codes, float* S, float* M) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(src);
    const float d = half(b->d), dmin = half(b->dmin);
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(b->qs + 32 * c);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 64 * c),
                          _mm256_and_si256(q, _mm256_set1_epi8(0x0F)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 64 * c + 32),
                          _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F)));
    }
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      scaleMinK4(j, b->scales, sc, m);
      S[j] = d * float(sc);
      M[j] = dmin * float(m);
    }
  }
};
struct UnpackQ5_K {
  static constexpr int SB = 32;
  static void unpack(const unsigned char* src, unsigned char* codes, float* S, float* M) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(src);
    const float d = half(b->d), dmin = half(b->dmin);
    const __m256i qh = load256(b->qh), k16 = _mm256_set1_epi8(16);
    // 16 where the byte has `bit` of qh set.
    auto fifth = [&](int bit) {
      const __m256i m = _mm256_set1_epi8(char(bit));
      return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m), m), k16);
    };
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(b->qs + 32 * c);
      const __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 64 * c),
                          _mm256_or_si256(lo, fifth(1 << (2 * c))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 64 * c + 32),
                          _mm256_or_si256(hi, fifth(2 << (2 * c))));
    }
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      scaleMinK4(j, b->scales, sc, m);
      S[j] = d * float(sc);
      M[j] = dmin * float(m);
    }
  }
};
struct UnpackQ6_K {
  static constexpr int SB = 16;
  static void unpack(const unsigned char* src, unsigned char* codes, float* S, float* M) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
    const float d = half(b->d);
    for (int n = 0; n < 2; ++n) {
      __m256i q[4];
      codesQ6K(b->ql + 64 * n, b->qh + 32 * n, q);  // values 128n + 32k .. + 32, 0..63
      for (int k = 0; k < 4; ++k)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 128 * n + 32 * k), q[k]);
    }
    for (int s = 0; s < 16; ++s) {
      S[s] = d * float(b->scales[s]);
      M[s] = 32.0f * S[s];
    }
  }
};

// nRows (<= kLanes) stored rows into `scratch`: codes [nb][QK_K / 4][kLanes][4], then S and M
// [nb][QK_K / SB][kLanes]; lanes past nRows zero. Each super-block's rows are unpacked to bytes,
// then `turn(c, o)` writes the kLanes x QK_K bytes of c as 4 bytes a lane (16 x 16 transposes
// at AVX-512, 8 x 8 at AVX2).
template <class U, int kLanes, class Turn>
void passRepackLanes(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
                     std::size_t blockBytes, unsigned char* scratch, Turn turn) {
  constexpr int kSub = QK_K / U::SB;
  unsigned char* codes = scratch;
  float* S = reinterpret_cast<float*>(scratch + std::size_t(nb) * QK_K * kLanes);
  float* M = S + std::size_t(nb) * kSub * kLanes;
  alignas(64) unsigned char c[kLanes][QK_K];
  float s[kSub], m[kSub];
  for (int r = nRows; r < kLanes; ++r) std::memset(c[r], 0, QK_K);
  for (std::int64_t i = 0; i < nb; ++i) {
    for (int r = 0; r < kLanes; ++r) {
      if (r < nRows) {
        // So many rows' streams are too many for the hardware's prefetchers: each row's block
        // two ahead is asked for here (the loads were half of the repack's time without it).
        if (i + 2 < nb) {
          const unsigned char* ahead =
              rows + std::size_t(r) * rowBytes + std::size_t(i + 2) * blockBytes;
          for (std::size_t l = 0; l < blockBytes; l += 64)
            _mm_prefetch(reinterpret_cast<const char*>(ahead + l), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(ahead + blockBytes - 1), _MM_HINT_T0);
        }
        U::unpack(rows + std::size_t(r) * rowBytes + std::size_t(i) * blockBytes, c[r], s, m);
      } else {
        for (int j = 0; j < kSub; ++j) s[j] = m[j] = 0.0f;
      }
      for (int j = 0; j < kSub; ++j) {
        S[(i * kSub + j) * kLanes + r] = s[j];
        M[(i * kSub + j) * kLanes + r] = m[j];
      }
    }
    turn(c, codes + std::size_t(i) * QK_K * kLanes);
  }
}

#endif

#if ATTNVIZ_AVX512
// a[r] (16 int32 each) -> a[c] holding element c of every a[r], r in lane r: three rounds of
// unpacks and lane shuffles.
inline void transpose16x16(__m512i a[16]) {
  __m512i t[16], u[16];
  for (int r = 0; r < 16; r += 2) {
    t[r] = _mm512_unpacklo_epi32(a[r], a[r + 1]);
    t[r + 1] = _mm512_unpackhi_epi32(a[r], a[r + 1]);
  }
  // u[4g + j], 128-bit lane l: rows 4g .. 4g + 3 at column 4l + j.
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i p = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i q = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i p2 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i q2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    a[j] = _mm512_shuffle_i32x4(p, q, 0x88);
    a[4 + j] = _mm512_shuffle_i32x4(p, q, 0xDD);
    a[8 + j] = _mm512_shuffle_i32x4(p2, q2, 0x88);
    a[12 + j] = _mm512_shuffle_i32x4(p2, q2, 0xDD);
  }
}

// Up to 16 rows, 16 lanes of 4 bytes (passRepackLanes).
template <class U>
void passRepack(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
                std::size_t blockBytes, unsigned char* scratch) {
  passRepackLanes<U, 16>(rows, rowBytes, nRows, nb, blockBytes, scratch,
                         [](const unsigned char(*c)[QK_K], unsigned char* o) {
                           for (int kk = 0; kk < 4; ++kk) {
                             __m512i a[16];
                             for (int r = 0; r < 16; ++r) a[r] = _mm512_load_si512(c[r] + 64 * kk);
                             transpose16x16(a);
                             for (int k = 0; k < 16; ++k)
                               _mm512_store_si512(o + 64 * (16 * kk + k), a[k]);
                           }
                         });
}

// One group of 16 repacked rows for the kernels: their codes, S and M, the first row's column
// in Y, and which lanes are rows.
struct PassGroup {
  const unsigned char* codes;
  const float* S;
  const float* M;
  std::int64_t r0;
  __mmask16 lanes;
};

namespace pass8plain {
#define ATTNVIZ_PASS8_VNNI 0
#include "pass8_kernel.inc"
#undef ATTNVIZ_PASS8_VNNI
}  // namespace pass8plain

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#define ATTNVIZ_HAVE_PASS8_VNNI 1
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#define ATTNVIZ_HAVE_PASS8_VNNI 1
#else
#define ATTNVIZ_HAVE_PASS8_VNNI 0
#endif
#if ATTNVIZ_HAVE_PASS8_VNNI
namespace pass8vnni {
#define ATTNVIZ_PASS8_VNNI 1
#include "pass8_kernel.inc"
#undef ATTNVIZ_PASS8_VNNI
}  // namespace pass8vnni
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#elif defined(__clang__)
#pragma clang attribute pop
#endif

// x's rows for the pass kernels: each block's largest |x| (and whether all are finite) in
// float, then x * (127 / max) in double, rounded to nearest even, as QuantizedX8 rounds decode's
// x one value at a time (ggml_types.cpp).
bool round8(const float* x, std::int64_t nb, signed char* q, float* d, float* sum16) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float* v = x + QK_K * i;
    __m512 mx = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int k = 0; k < 16; ++k) {
      const __m512 a = _mm512_loadu_ps(v + 16 * k);
      nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
      mx = _mm512_max_ps(mx, _mm512_abs_ps(a));
    }
    const float m = _mm512_reduce_max_ps(mx);
    if (nan || !(m <= 3.4028234663852886e38f)) return false;
    const __m512d inv = _mm512_set1_pd(m == 0.0f ? 0.0 : 127.0 / double(m));
    const __m512d lo = _mm512_set1_pd(-127.0), hi = _mm512_set1_pd(127.0);
    for (int k = 0; k < 16; ++k) {
      const __m512 a = _mm512_loadu_ps(v + 16 * k);
      __m512d a0 = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
      __m512d a1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1));
      constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      a0 = _mm512_min_pd(_mm512_max_pd(_mm512_roundscale_pd(_mm512_mul_pd(a0, inv), kNearest), lo),
                         hi);
      a1 = _mm512_min_pd(_mm512_max_pd(_mm512_roundscale_pd(_mm512_mul_pd(a1, inv), kNearest), lo),
                         hi);
      const __m512i n32 = join256(_mm512_cvtpd_epi32(a0), _mm512_cvtpd_epi32(a1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + QK_K * i + 16 * k),
                       _mm512_cvtepi32_epi8(n32));
      sum16[16 * i + k] = float(_mm512_reduce_add_epi32(n32));
    }
    d[i] = float(double(m) / 127.0);
  }
  return true;
}

// Up to 32 rows: two groups of 16 repacked side by side and run together (4 rows of x at a
// time), or one (8 at a time).
template <class U, class Block>
void pass8(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
           const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
           unsigned char* scratch, bool vnni) {
  constexpr int kSub = QK_K / U::SB;
  const int groups = nRows > 16 ? 2 : 1;
  PassGroup grp[2];
  for (int g = 0; g < groups; ++g) {
    unsigned char* sc = scratch + std::size_t(g) * std::size_t(nb) * detail::kPass8ScratchPerBlock;
    const int n = g == 0 ? (nRows < 16 ? nRows : 16) : nRows - 16;
    passRepack<U>(rows + std::size_t(16 * g) * rowBytes, rowBytes, n, nb, sizeof(Block), sc);
    const auto* S = reinterpret_cast<const float*>(sc + std::size_t(nb) * QK_K * 16);
    grp[g] = {sc, S, S + std::size_t(nb) * kSub * 16, r0 + 16 * g,
              n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u)};
  }
#if ATTNVIZ_HAVE_PASS8_VNNI
  if (vnni) {
    if (groups == 2)
      pass8vnni::passRows<U::SB, 4, 2>(grp, nb, x, m, Y, ldy);
    else
      pass8vnni::passRows<U::SB, 8, 1>(grp, nb, x, m, Y, ldy);
    return;
  }
#else
  (void)vnni;
#endif
  if (groups == 2)
    pass8plain::passRows<U::SB, 4, 2>(grp, nb, x, m, Y, ldy);
  else
    pass8plain::passRows<U::SB, 8, 1>(grp, nb, x, m, Y, ldy);
}
void pass8Q4_K(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
               const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
               unsigned char* scratch, bool vnni) {
  pass8<UnpackQ4_K, BlockQ4_K>(rows, rowBytes, nRows, nb, x, m, Y, ldy, r0, scratch, vnni);
}
void pass8Q5_K(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
               const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
               unsigned char* scratch, bool vnni) {
  pass8<UnpackQ5_K, BlockQ5_K>(rows, rowBytes, nRows, nb, x, m, Y, ldy, r0, scratch, vnni);
}
void pass8Q6_K(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
               const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
               unsigned char* scratch, bool vnni) {
  pass8<UnpackQ6_K, BlockQ6_K>(rows, rowBytes, nRows, nb, x, m, Y, ldy, r0, scratch, vnni);
}
#endif

#if ATTNVIZ_AVX2
// The pass kernels at AVX2: groups of 8 rows (codes [nb][64][8 lanes][4], S and M
// [nb][QK_K / SB][8]), turned by 8 x 8 transposes; up to 32 rows a call, a group at a time.
struct PassGroup8 {
  const unsigned char* codes;
  const float* S;
  const float* M;
  std::int64_t r0;
  __m256i lanes;  // -1 in the lanes that are rows
};

inline void transpose8x8(__m256i a[8]) {
  __m256i t[8], u[8];
  for (int r = 0; r < 8; r += 2) {
    t[r] = _mm256_unpacklo_epi32(a[r], a[r + 1]);
    t[r + 1] = _mm256_unpackhi_epi32(a[r], a[r + 1]);
  }
  // u[4g + j], 128-bit lane l: rows 4g .. 4g + 3 at column 4l + j.
  for (int g = 0; g < 2; ++g) {
    u[4 * g + 0] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    a[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    a[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

// Up to 8 rows, 8 lanes of 4 bytes (passRepackLanes).
template <class U>
void passRepack8(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
                 std::size_t blockBytes, unsigned char* scratch) {
  passRepackLanes<U, 8>(
      rows, rowBytes, nRows, nb, blockBytes, scratch,
      [](const unsigned char(*c)[QK_K], unsigned char* o) {
        for (int kk = 0; kk < 8; ++kk) {
          __m256i a[8];
          for (int r = 0; r < 8; ++r)
            a[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(c[r] + 32 * kk));
          transpose8x8(a);
          for (int k = 0; k < 8; ++k)
            _mm256_store_si256(reinterpret_cast<__m256i*>(o + 32 * (8 * kk + k)), a[k]);
        }
      });
}

namespace pass8plain {
#define ATTNVIZ_PASS8_VNNI 0
#include "pass8_kernel_avx2.inc"
#undef ATTNVIZ_PASS8_VNNI
}  // namespace pass8plain

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avxvnni")
#define ATTNVIZ_HAVE_PASS8_VNNI 1
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avxvnni"))), apply_to = function)
#define ATTNVIZ_HAVE_PASS8_VNNI 1
#else
#define ATTNVIZ_HAVE_PASS8_VNNI 0
#endif
#if ATTNVIZ_HAVE_PASS8_VNNI
namespace pass8vnni {
#define ATTNVIZ_PASS8_VNNI 1
#include "pass8_kernel_avx2.inc"
#undef ATTNVIZ_PASS8_VNNI
}  // namespace pass8vnni
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#elif defined(__clang__)
#pragma clang attribute pop
#endif

// x's rows for the pass kernels, as the AVX-512 level's round8: the largest |x| in float, then
// x * (127 / max) in double, rounded to nearest even.
bool round8(const float* x, std::int64_t nb, signed char* q, float* d, float* sum16) {
  const __m256 signBit = _mm256_set1_ps(-0.0f);
  for (std::int64_t i = 0; i < nb; ++i) {
    const float* v = x + QK_K * i;
    __m256 mx = _mm256_setzero_ps();
    int nan = 0;
    for (int k = 0; k < 32; ++k) {
      const __m256 a = _mm256_loadu_ps(v + 8 * k);
      nan |= _mm256_movemask_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q));
      mx = _mm256_max_ps(mx, _mm256_andnot_ps(signBit, a));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    const float m = _mm_cvtss_f32(h);
    if (nan || !(m <= 3.4028234663852886e38f)) return false;
    const __m256d inv = _mm256_set1_pd(m == 0.0f ? 0.0 : 127.0 / double(m));
    const __m256d lo = _mm256_set1_pd(-127.0), hi = _mm256_set1_pd(127.0);
    for (int k = 0; k < 16; ++k) {
      __m128i n4[4];
      for (int h4 = 0; h4 < 4; ++h4) {
        __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(v + 16 * k + 4 * h4));
        a = _mm256_round_pd(_mm256_mul_pd(a, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        n4[h4] = _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(a, lo), hi));
      }
      const __m128i b16 =
          _mm_packs_epi16(_mm_packs_epi32(n4[0], n4[1]), _mm_packs_epi32(n4[2], n4[3]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + QK_K * i + 16 * k), b16);
      __m128i sum = _mm_add_epi32(_mm_add_epi32(n4[0], n4[1]), _mm_add_epi32(n4[2], n4[3]));
      sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4E));
      sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xB1));
      sum16[16 * i + k] = float(_mm_cvtsi128_si32(sum));
    }
    d[i] = float(double(m) / 127.0);
  }
  return true;
}

template <class U, class Block>
void pass8(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
           const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
           unsigned char* scratch, bool vnni) {
  constexpr int kSub = QK_K / U::SB;
  for (int g0 = 0; g0 < nRows; g0 += 8) {
    const int n = nRows - g0 < 8 ? nRows - g0 : 8;
    passRepack8<U>(rows + std::size_t(g0) * rowBytes, rowBytes, n, nb, sizeof(Block), scratch);
    const auto* S = reinterpret_cast<const float*>(scratch + std::size_t(nb) * QK_K * 8);
    alignas(32) int lanes[8];
    for (int l = 0; l < 8; ++l) lanes[l] = l < n ? -1 : 0;
    const PassGroup8 grp{scratch, S, S + std::size_t(nb) * kSub * 8, r0 + g0,
                         _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes))};
#if ATTNVIZ_HAVE_PASS8_VNNI
    if (vnni) {
      pass8vnni::passRows8<U::SB, 4>(grp, nb, x, m, Y, ldy);
      continue;
    }
#else
    (void)vnni;
#endif
    pass8plain::passRows8<U::SB, 4>(grp, nb, x, m, Y, ldy);
  }
}
void pass8Q4_K(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
               const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
               unsigned char* scratch, bool vnni) {
  pass8<UnpackQ4_K, BlockQ4_K>(rows, rowBytes, nRows, nb, x, m, Y, ldy, r0, scratch, vnni);
}
void pass8Q5_K(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
               const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
               unsigned char* scratch, bool vnni) {
  pass8<UnpackQ5_K, BlockQ5_K>(rows, rowBytes, nRows, nb, x, m, Y, ldy, r0, scratch, vnni);
}
void pass8Q6_K(const unsigned char* rows, std::size_t rowBytes, int nRows, std::int64_t nb,
               const detail::PassX8& x, std::int64_t m, float* Y, std::int64_t ldy, std::int64_t r0,
               unsigned char* scratch, bool vnni) {
  pass8<UnpackQ6_K, BlockQ6_K>(rows, rowBytes, nRows, nb, x, m, Y, ldy, r0, scratch, vnni);
}
#endif

#if ATTNVIZ_AVX2
// The same at AVX2, 32 values to a vector: Q4_K / Q5_K's sub-blocks one at a time under a
// broadcast scale; Q6_K's 32 values under two scales (a 128-bit lane each).
inline __m256i pairScales(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(short(hi)), _mm_set1_epi16(short(lo)));
}

template <bool Five>
float dotQ45_K8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  using Block = std::conditional_t<Five, BlockQ5_K, BlockQ4_K>;
  const auto* b = reinterpret_cast<const Block*>(src);
  __m256 acc = _mm256_setzero_ps(), accMin = _mm256_setzero_ps();
  const __m256i m0F = _mm256_set1_epi8(0x0F), k16 = _mm256_set1_epi8(16);
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(Block); l += 64)
      prefetchAhead8(reinterpret_cast<const unsigned char*>(b + i) + l);
    std::uint32_t w[4];
    scaleMinWordsK4(b[i].scales, w);
    unsigned char sc[8];
    std::memcpy(sc, w, 8);
    const __m128i mins8 = _mm_setr_epi32(int(w[2]), int(w[3]), 0, 0);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    const signed char* xq = x.q + QK_K * i;
    __m256i isum = _mm256_setzero_si256();
    __m256i qh = _mm256_setzero_si256();
    if constexpr (Five) qh = load256(b[i].qh);
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(b[i].qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, m0F), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m0F);
      if constexpr (Five) {
        const __m256i bl = _mm256_set1_epi8(char(1 << (2 * c))),
                      bh = _mm256_set1_epi8(char(2 << (2 * c)));
        lo = _mm256_add_epi8(
            lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), k16));
        hi = _mm256_add_epi8(
            hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), k16));
      }
      const __m256i pl = _mm256_maddubs_epi16(lo, load256(xq + 64 * c));
      const __m256i ph = _mm256_maddubs_epi16(hi, load256(xq + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pl, _mm256_set1_epi16(short(sc[2 * c]))));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(ph, _mm256_set1_epi16(short(sc[2 * c + 1]))));
    }
    const float dx = x.d[i];
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(half(b[i].d) * dx), acc);
    const __m256i ms = _mm256_madd_epi16(mins, load256(x.bsum + 16 * i));
    accMin = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(half(b[i].dmin) * dx), accMin);
  }
  return hsum8(acc) - hsum8(accMin);
}

float dotQ6_K8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::size_t l = 0; l < sizeof(b[i]); l += 64)
      prefetchAhead8(reinterpret_cast<const unsigned char*>(b + i) + l);
    const __m128i sc8 = load128(b[i].scales);
    signed char sc[16];
    std::memcpy(sc, b[i].scales, 16);
    const signed char* xq = x.q + QK_K * i;
    __m256i isum = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      __m256i q[4];
      codesQ6K(b[i].ql + 64 * n, b[i].qh + 32 * n, q);
      for (int k = 0; k < 4; ++k) {
        const int s = 8 * n + 2 * k;
        const __m256i p = _mm256_maddubs_epi16(q[k], load256(xq + 128 * n + 32 * k));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, pairScales(sc[s], sc[s + 1])));
      }
    }
    const __m256i off = _mm256_slli_epi32(
        _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), load256(x.bsum + 16 * i)), 5);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, off)),
                          _mm256_set1_ps(half(b[i].d) * x.d[i]), acc);
  }
  return hsum8(acc);
}

float dotQ8_0_8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
  __m256 acc = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (std::int64_t i = 0; i < nb; ++i) {
    if (i % 2 == 0) prefetchAhead8(b + i);
    const __m256i w = load256(b[i].qs), xv = load256(x.q + QK * i);
    const __m256i s =
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w)), ones);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(half(b[i].d) * x.d[i]), acc);
  }
  return hsum8(acc);
}
#endif

#if ATTNVIZ_AVX512 || ATTNVIZ_AVX2
float dotQ4_K8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  return dotQ45_K8<false>(src, x, nb);
}
float dotQ5_K8(const unsigned char* src, const detail::QuantX8& x, std::int64_t nb) {
  return dotQ45_K8<true>(src, x, nb);
}
float dotQ4_K16(const unsigned char* src, const detail::QuantX16& x, std::int64_t nb) {
  return dotQ45_K16<false>(src, x, nb);
}
float dotQ5_K16(const unsigned char* src, const detail::QuantX16& x, std::int64_t nb) {
  return dotQ45_K16<true>(src, x, nb);
}
#endif

// ------------------------------------------------------------------------------- type table
// ggml's type ids (ggml.h, enum ggml_type) with block size and bytes per block; ids ggml removed
// keep their names (files may still carry them) with blockValues 0. dequant/dot: the types
// attnviz reads.
using detail::TypeRow;

// A type attnviz reads: its dequantizer, and its dot kernel at this level or the portable one.
// ATTNVIZ_READABLE: an AVX-512 kernel; _AVX2: AVX-512 and AVX2 kernels; _Q16: a 16-bit kernel
// (matVecBatch's) at AVX-512, and with _AVX2 at AVX2 too; _8 (and the last argument of
// _Q16_AVX2): the fast path's kernel on 8-bit x (QuantX8) at AVX-512 and AVX2.
#define ATTNVIZ_GENERIC(name, values, bytes, dequant) \
  { name, values, bytes, dequant, &dotGeneric<dequant, values, bytes> }
#if ATTNVIZ_AVX512
#define ATTNVIZ_READABLE(name, values, bytes, dequant, dot) \
  { name, values, bytes, dequant, dot }
#define ATTNVIZ_READABLE_AVX2(name, values, bytes, dequant, dot) \
  { name, values, bytes, dequant, dot }
#define ATTNVIZ_READABLE_Q16(name, values, bytes, dequant, dot, dotQ16) \
  { name, values, bytes, dequant, dot, dotQ16 }
#define ATTNVIZ_READABLE_Q16_AVX2(name, values, bytes, dequant, dot, dotQ16, dotQ8, pass8) \
  { name, values, bytes, dequant, dot, dotQ16, dotQ8, pass8, round8 }
#define ATTNVIZ_READABLE_AVX2_8(name, values, bytes, dequant, dot, dotQ8) \
  { name, values, bytes, dequant, dot, nullptr, dotQ8 }
#elif ATTNVIZ_AVX2
#define ATTNVIZ_READABLE(name, values, bytes, dequant, dot) \
  ATTNVIZ_GENERIC(name, values, bytes, dequant)
#define ATTNVIZ_READABLE_AVX2(name, values, bytes, dequant, dot) \
  { name, values, bytes, dequant, dot }
#define ATTNVIZ_READABLE_Q16(name, values, bytes, dequant, dot, dotQ16) \
  ATTNVIZ_GENERIC(name, values, bytes, dequant)
#define ATTNVIZ_READABLE_Q16_AVX2(name, values, bytes, dequant, dot, dotQ16, dotQ8, pass8)   \
  {                                                                                          \
    name, values, bytes, dequant, &dotGeneric<dequant, values, bytes>, dotQ16, dotQ8, pass8, \
        round8                                                                               \
  }
#define ATTNVIZ_READABLE_AVX2_8(name, values, bytes, dequant, dot, dotQ8) \
  { name, values, bytes, dequant, dot, nullptr, dotQ8 }
#else
#define ATTNVIZ_READABLE(name, values, bytes, dequant, dot) \
  ATTNVIZ_GENERIC(name, values, bytes, dequant)
#define ATTNVIZ_READABLE_AVX2(name, values, bytes, dequant, dot) \
  ATTNVIZ_GENERIC(name, values, bytes, dequant)
#define ATTNVIZ_READABLE_Q16(name, values, bytes, dequant, dot, dotQ16) \
  ATTNVIZ_GENERIC(name, values, bytes, dequant)
#define ATTNVIZ_READABLE_Q16_AVX2(name, values, bytes, dequant, dot, dotQ16, dotQ8, pass8) \
  ATTNVIZ_GENERIC(name, values, bytes, dequant)
#define ATTNVIZ_READABLE_AVX2_8(name, values, bytes, dequant, dot, dotQ8) \
  ATTNVIZ_GENERIC(name, values, bytes, dequant)
#endif

constexpr TypeRow kTypes[] = {
    ATTNVIZ_READABLE("F32", 1, 4, dequantF32, dotF32),                         // 0
    ATTNVIZ_READABLE_AVX2("F16", 1, 2, dequantF16, dotF16),                    // 1
    ATTNVIZ_READABLE("Q4_0", 32, 18, dequantQ4_0, dotQ4_0),                    // 2
    ATTNVIZ_READABLE("Q4_1", 32, 20, dequantQ4_1, dotQ4_1),                    // 3
    {"Q4_2", 0, 0, nullptr, nullptr},                                          // 4
    {"Q4_3", 0, 0, nullptr, nullptr},                                          // 5
    ATTNVIZ_READABLE("Q5_0", 32, 22, dequantQ5_0, dotQ5_0),                    // 6
    ATTNVIZ_READABLE("Q5_1", 32, 24, dequantQ5_1, dotQ5_1),                    // 7
    ATTNVIZ_READABLE_AVX2_8("Q8_0", 32, 34, dequantQ8_0, dotQ8_0, dotQ8_0_8),  // 8
    {"Q8_1", 32, 36, nullptr, nullptr},                                        // 9
    ATTNVIZ_READABLE("Q2_K", 256, 84, dequantQ2_K, dotQ2_K),                   // 10
    ATTNVIZ_READABLE("Q3_K", 256, 110, dequantQ3_K, dotQ3_K),                  // 11
    ATTNVIZ_READABLE_Q16_AVX2("Q4_K", 256, 144, dequantQ4_K, dotQ4_K, dotQ4_K16, dotQ4_K8,
                              pass8Q4_K),  // 12
    ATTNVIZ_READABLE_Q16_AVX2("Q5_K", 256, 176, dequantQ5_K, dotQ5_K, dotQ5_K16, dotQ5_K8,
                              pass8Q5_K),  // 13
    ATTNVIZ_READABLE_Q16_AVX2("Q6_K", 256, 210, dequantQ6_K, dotQ6_K, dotQ6_K16, dotQ6_K8,
                              pass8Q6_K),                  // 14
    {"Q8_K", 256, 292, nullptr, nullptr},                  // 15
    {"IQ2_XXS", 256, 66, nullptr, nullptr},                // 16
    {"IQ2_XS", 256, 74, nullptr, nullptr},                 // 17
    {"IQ3_XXS", 256, 98, nullptr, nullptr},                // 18
    {"IQ1_S", 256, 50, nullptr, nullptr},                  // 19
    {"IQ4_NL", 32, 18, nullptr, nullptr},                  // 20
    {"IQ3_S", 256, 110, nullptr, nullptr},                 // 21
    {"IQ2_S", 256, 82, nullptr, nullptr},                  // 22
    {"IQ4_XS", 256, 136, nullptr, nullptr},                // 23
    {"I8", 1, 1, nullptr, nullptr},                        // 24
    {"I16", 1, 2, nullptr, nullptr},                       // 25
    {"I32", 1, 4, nullptr, nullptr},                       // 26
    {"I64", 1, 8, nullptr, nullptr},                       // 27
    {"F64", 1, 8, nullptr, nullptr},                       // 28
    {"IQ1_M", 256, 56, nullptr, nullptr},                  // 29
    ATTNVIZ_READABLE("BF16", 1, 2, dequantBF16, dotBF16),  // 30
    {"Q4_0_4_4", 0, 0, nullptr, nullptr},                  // 31
    {"Q4_0_4_8", 0, 0, nullptr, nullptr},                  // 32
    {"Q4_0_8_8", 0, 0, nullptr, nullptr},                  // 33
    {"TQ1_0", 256, 54, nullptr, nullptr},                  // 34
    {"TQ2_0", 256, 66, nullptr, nullptr},                  // 35
    {"IQ4_NL_4_4", 0, 0, nullptr, nullptr},                // 36
    {"IQ4_NL_4_8", 0, 0, nullptr, nullptr},                // 37
    {"IQ4_NL_8_8", 0, 0, nullptr, nullptr},                // 38
    {"MXFP4", 32, 17, nullptr, nullptr},                   // 39
    {"NVFP4", 64, 36, nullptr, nullptr},                   // 40
    {"Q1_0", 128, 18, nullptr, nullptr},                   // 41
};
constexpr std::uint32_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);
constexpr int bytesOf(GgmlType t) { return kTypes[std::uint32_t(t)].blockBytes; }
static_assert(bytesOf(GgmlType::Q4_0) == sizeof(BlockQ4_0) &&
              bytesOf(GgmlType::Q4_1) == sizeof(BlockQ4_1));
static_assert(bytesOf(GgmlType::Q5_0) == sizeof(BlockQ5_0) &&
              bytesOf(GgmlType::Q5_1) == sizeof(BlockQ5_1));
static_assert(bytesOf(GgmlType::Q8_0) == sizeof(BlockQ8_0) &&
              bytesOf(GgmlType::Q2_K) == sizeof(BlockQ2_K));
static_assert(bytesOf(GgmlType::Q3_K) == sizeof(BlockQ3_K) &&
              bytesOf(GgmlType::Q4_K) == sizeof(BlockQ4_K));
static_assert(bytesOf(GgmlType::Q5_K) == sizeof(BlockQ5_K) &&
              bytesOf(GgmlType::Q6_K) == sizeof(BlockQ6_K));
static_assert(bytesOf(GgmlType::BF16) == 2 && bytesOf(GgmlType::Q8_K) == 292 &&
              kTypeCount == detail::kGgmlTypeCount);

}  // namespace

namespace detail {
extern const TypeRow* const ATTNVIZ_CAT(ggmlTypes, ATTNVIZ_ISA_LEVEL);
const TypeRow* const ATTNVIZ_CAT(ggmlTypes, ATTNVIZ_ISA_LEVEL) = kTypes;
}  // namespace detail

}  // namespace attnviz
