// attnviz core: the float32 products of isa.h, compiled once per instruction-set level
// (core/CMakeLists.txt: attnviz_isa_<level>). Each copy sees Eigen under its own namespace
// (-DEigen=attnviz_eigen_<level>), so the linker never merges one level's Eigen code into another
// level's callers; tests/engine checks the objects for shared symbols.
#include "attnviz/engine/isa.h"

// Every product goes through Eigen's blocked GEMM/GEMV kernels, whose results do not depend on
// where the operands sit in memory. Eigen's coefficient-based path for tiny products (the sum of
// the sizes under 20 by default) peels scalar iterations until the destination is aligned to the
// packet, and AVX-512's 64-byte packets are more than malloc's 16-byte guarantee: the same inputs
// at another address would round differently.
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0
#include <Eigen/Core>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#ifndef ATTNVIZ_ISA_LEVEL
#error "compiled by core/CMakeLists.txt once per level, with ATTNVIZ_ISA_LEVEL set"
#endif
#define ATTNVIZ_CAT2(a, b) a##b
#define ATTNVIZ_CAT(a, b) ATTNVIZ_CAT2(a, b)

namespace attnviz::detail {

namespace {

using MatRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using In = Eigen::Map<const MatRM, 0, Eigen::OuterStride<>>;
using Out = Eigen::Map<MatRM, 0, Eigen::OuterStride<>>;

void abt(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
         long ldc, bool accumulate) {
  Out c(C, m, n, Eigen::OuterStride<>(ldc));
  const In a(A, m, k, Eigen::OuterStride<>(lda)), b(B, n, k, Eigen::OuterStride<>(ldb));
  if (accumulate) {
    c.noalias() += a * b.transpose();
  } else {
    c.noalias() = a * b.transpose();
  }
}

void ab(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
        long ldc, bool accumulate) {
  Out c(C, m, n, Eigen::OuterStride<>(ldc));
  const In a(A, m, k, Eigen::OuterStride<>(lda)), b(B, k, n, Eigen::OuterStride<>(ldb));
  if (accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
}

// ------------------------------------------------------------------ the linear layers' GEMM
// C = A B^T (or A B with B stored [k, n]) for a linear layer's many rows, at the AVX2 and
// AVX-512 levels (the baseline keeps Eigen's). A is packed once per product into panels of kMR
// rows (packA), B a block of kNB rows at a time into panels of kNR (kNV vectors); the
// micro-kernel holds a kMR x kNR tile of C in registers. Each value of C is one chain of fused
// multiply-adds over k in order, started from 0 (or from C's value when accumulating), the k
// blocks included: a tile carried from one block of k to the next is loaded back into the
// registers and the chain goes on. So the result is that chain's whatever the blocking, the
// threads, the alignment or the level (AVX2 and AVX-512 give the same bits), and a reference
// loop of std::fma reproduces it exactly (tests/engine/gemm_packed_test.cpp).
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#if defined(__AVX512F__)
using Vec = __m512;
// A 6 x 64 tile (24 accumulators, 4 loads of B and 6 broadcasts of A per step): 1.02-1.08x the
// GFLOP/s of 12 x 32 on the 1B shapes and 1.07-1.14x the F16 pass (AMD Zen 5); 8 x 48 was
// slower, and 4 x 96 and 5 x 80 spill.
constexpr int kW = 16, kMR = 6, kNV = 4;
inline Vec vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec vsplat(const float* p) { return _mm512_set1_ps(*p); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec vzero() { return _mm512_setzero_ps(); }
#else
using Vec = __m256;
constexpr int kW = 8, kMR = 6, kNV = 2;
inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec vsplat(const float* p) { return _mm256_broadcast_ss(p); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec vzero() { return _mm256_setzero_ps(); }
#endif
constexpr int kNR = kNV * kW;
// k a block: a panel of A (kMR x kKC) stays in L1 while B's packed block streams from L2.
constexpr int kKC = 256;
// B's rows packed at a time (kNB x kKC floats, 256 KB): a multiple of kNR at both levels.
constexpr int kNB = 256 / kNR * kNR;

// A buffer of floats that grows and is freed with its thread (aligned for the packed panels).
struct Scratch {
  float* p = nullptr;
  std::size_t n = 0;
  float* get(std::size_t want) {
    if (want > n) {
      std::free(p);
      p = static_cast<float*>(std::aligned_alloc(64, (want * sizeof(float) + 63) / 64 * 64));
      if (!p) throw std::bad_alloc();
      n = want;
    }
    return p;
  }
  ~Scratch() { std::free(p); }
};

// C tile (+)= a panel of A times a panel of B over kc values; `carry`: the chains go on from
// C's values. The tile is whole (kMR x kNR at c, row stride ldc).
inline void micro(int kc, const float* __restrict a, const float* __restrict b, float* c,
                  long ldc, bool carry) {
  Vec s[kMR][kNV];
  if (carry) {
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) s[r][v] = vload(c + r * ldc + v * kW);
  } else {
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) s[r][v] = vzero();
  }
  for (int p = 0; p < kc; ++p) {
    Vec bv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) bv[v] = vload(b + v * kW);
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r) {
      const Vec ar = vsplat(a + r);
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) s[r][v] = vfma(ar, bv[v], s[r][v]);
    }
    a += kMR;
    b += kNR;
  }
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) vstore(c + r * ldc + v * kW, s[r][v]);
}

// A tile at the edge of C (rows < kMR or cols < kNR): through a whole tile on the stack.
void microEdge(int kc, const float* a, const float* b, float* c, long ldc, int rows, int cols,
               bool carry) {
  alignas(64) float t[kMR * kNR] = {};
  if (carry)
    for (int r = 0; r < rows; ++r) std::memcpy(t + r * kNR, c + r * ldc, sizeof(float) * cols);
  micro(kc, a, b, t, kNR, carry);
  for (int r = 0; r < rows; ++r) std::memcpy(c + r * ldc, t + r * kNR, sizeof(float) * cols);
}

// Panels [panel0, panel1) of A: k block by k block (kKC values, the last one shorter), each
// block's panels in order, value (row i0 + r, column kc0 + p) of panel ip at
// kc0 * mPad + ip * kc * kMR + p * kMR + r; rows past m are 0.
void packA(int m, int k, const float* A, long lda, float* out, int panel0, int panel1) {
  const long mPad = long(m + kMR - 1) / kMR * kMR;
  for (int kc0 = 0; kc0 < k; kc0 += kKC) {
    const int kc = std::min(kKC, k - kc0);
    for (int ip = panel0; ip < panel1; ++ip) {
      float* dst = out + kc0 * mPad + long(ip) * kc * kMR;
      const int rows = std::min(kMR, m - ip * kMR);
      for (int r = 0; r < kMR; ++r) {
        if (r >= rows) {
          for (int p = 0; p < kc; ++p) dst[p * kMR + r] = 0.0f;
          continue;
        }
        const float* src = A + long(ip * kMR + r) * lda + kc0;
        for (int p = 0; p < kc; ++p) dst[p * kMR + r] = src[p];
      }
    }
  }
}

int packedRows() { return kMR; }

// Values [0, kW) of rows rows[0..kW) written transposed: out + c * stride holds value c of
// every row, in row order.
#if defined(__AVX512F__)
inline void transposeStore(const float* const* rows, float* out, long stride) {
  Vec r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = vload(rows[i]);
  // Per 128-bit lane L: t[2a] = rows 2a, 2a+1 at columns 4L, 4L+1; t[2a+1] at 4L+2, 4L+3.
  for (int a = 0; a < 8; ++a) {
    t[2 * a] = _mm512_unpacklo_ps(r[2 * a], r[2 * a + 1]);
    t[2 * a + 1] = _mm512_unpackhi_ps(r[2 * a], r[2 * a + 1]);
  }
  // u[4b + q], lane L: column 4L + q of rows 4b .. 4b + 3.
  auto lo = [](Vec x, Vec y) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
  auto hi = [](Vec x, Vec y) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
  Vec u[16];
  for (int b = 0; b < 4; ++b) {
    u[4 * b] = lo(t[4 * b], t[4 * b + 2]);
    u[4 * b + 1] = hi(t[4 * b], t[4 * b + 2]);
    u[4 * b + 2] = lo(t[4 * b + 1], t[4 * b + 3]);
    u[4 * b + 3] = hi(t[4 * b + 1], t[4 * b + 3]);
  }
  // Column 4L + q: lane b of it is lane L of u[4b + q].
  for (int q = 0; q < 4; ++q) {
    const Vec v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44);
    const Vec v1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xEE);
    const Vec w0 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44);
    const Vec w1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xEE);
    vstore(out + (0 + q) * stride, _mm512_shuffle_f32x4(v0, w0, 0x88));
    vstore(out + (4 + q) * stride, _mm512_shuffle_f32x4(v0, w0, 0xDD));
    vstore(out + (8 + q) * stride, _mm512_shuffle_f32x4(v1, w1, 0x88));
    vstore(out + (12 + q) * stride, _mm512_shuffle_f32x4(v1, w1, 0xDD));
  }
}
#else
inline void transposeStore(const float* const* rows, float* out, long stride) {
  Vec r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = vload(rows[i]);
  for (int a = 0; a < 4; ++a) {
    t[2 * a] = _mm256_unpacklo_ps(r[2 * a], r[2 * a + 1]);
    t[2 * a + 1] = _mm256_unpackhi_ps(r[2 * a], r[2 * a + 1]);
  }
  auto lo = [](Vec x, Vec y) {
    return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(x), _mm256_castps_pd(y)));
  };
  auto hi = [](Vec x, Vec y) {
    return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(x), _mm256_castps_pd(y)));
  };
  for (int b = 0; b < 2; ++b) {
    u[4 * b] = lo(t[4 * b], t[4 * b + 2]);
    u[4 * b + 1] = hi(t[4 * b], t[4 * b + 2]);
    u[4 * b + 2] = lo(t[4 * b + 1], t[4 * b + 3]);
    u[4 * b + 3] = hi(t[4 * b + 1], t[4 * b + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    vstore(out + q * stride, _mm256_permute2f128_ps(u[q], u[4 + q], 0x20));
    vstore(out + (4 + q) * stride, _mm256_permute2f128_ps(u[q], u[4 + q], 0x31));
  }
}
#endif

// B's rows [j0, j0 + nb) x columns [kc0, kc0 + kc) of k into panels of kNR rows (value (row j0 +
// jp * kNR + j, column kc0 + p) at jp * kc * kNR + p * kNR + j; rows past nb are 0). A row's
// values come from B.f32, or from B.fill into `tmp` (kNR x kKC floats).
void packRows(const GemmRows& B, int j0, int nb, int k, int kc0, int kc, float* out, float* tmp) {
  const float* src[kNR];
  for (int jp = 0; jp * kNR < nb; ++jp) {
    float* panel = out + long(jp) * kc * kNR;
    const int rows = std::min(kNR, nb - jp * kNR);
    // With each row filled, the same row of the next panel (or of the first panel in the next
    // block of k) is asked for: a few lines at a time, as the prefetchers can take them.
    const bool lastPanel = (jp + 1) * kNR >= nb;
    const int ahead0 = lastPanel ? 0 : (jp + 1) * kNR, aheadK = lastPanel ? kc0 + kKC : kc0;
    const int aheadRows = B.prefetch && aheadK < k ? std::min(nb, ahead0 + kNR) - ahead0 : 0;
    for (int j = 0; j < rows; ++j) {
      const int r = j0 + jp * kNR + j;
      if (B.f32) {
        src[j] = B.f32 + long(r) * B.ld + kc0;
        // The same row of the next panel: rows are apart, each a line nothing foresees.
        if (!lastPanel && jp * kNR + kNR + j < nb)
          for (int o = 0; o < kc; o += 16)
            _mm_prefetch(reinterpret_cast<const char*>(src[j] + kNR * B.ld + o), _MM_HINT_T0);
      } else {
        if (j < aheadRows)
          B.prefetch(B.ctx, B.row0 + j0 + ahead0 + j, aheadK, std::min(kKC, k - aheadK));
        B.fill(B.ctx, B.row0 + r, kc0, kc, tmp + long(j) * kKC);
        src[j] = tmp + long(j) * kKC;
      }
    }
    int p = 0;
    if (rows == kNR) {
      for (; p + kW <= kc; p += kW) {
        const float* at[kW];
        for (int g = 0; g < kNR; g += kW) {
          for (int i = 0; i < kW; ++i) at[i] = src[g + i] + p;
          transposeStore(at, panel + long(p) * kNR + g, kNR);
        }
      }
    }
    for (; p < kc; ++p) {
      float* dst = panel + long(p) * kNR;
      for (int j = 0; j < rows; ++j) dst[j] = src[j][p];
      for (int j = rows; j < kNR; ++j) dst[j] = 0.0f;
    }
  }
}

// The same from B stored [k, n] (GPT-2's Conv1D): each of B's rows read once, front to back,
// its nb values dealt out kNR to a panel.
void packCols(const float* B, long ldb, int j0, int nb, int kc0, int kc, float* out) {
  const int whole = nb / kNR;  // panels with kNR values; the last may have fewer
  constexpr int kAhead = 8;  // rows: each starts on a line the prefetchers cannot foresee
  for (int p = 0; p < kc; ++p) {
    const float* src = B + long(kc0 + p) * ldb + j0;
    if (p + kAhead < kc)
      for (int o = 0; o < nb; o += 16) _mm_prefetch(reinterpret_cast<const char*>(src + kAhead * ldb + o), _MM_HINT_T0);
    for (int jp = 0; jp < whole; ++jp) {
      float* dst = out + long(jp) * kc * kNR + long(p) * kNR;
      for (int v = 0; v < kNV; ++v) vstore(dst + v * kW, vload(src + jp * kNR + v * kW));
    }
    if (whole * kNR < nb) {
      float* dst = out + long(whole) * kc * kNR + long(p) * kNR;
      const int cols = nb - whole * kNR;
      for (int j = 0; j < kNR; ++j) dst[j] = j < cols ? src[whole * kNR + j] : 0.0f;
    }
  }
}

// C[m, n] (+)= A B^T (bRows) or A B (B [k, n], ldb): A packed by packA for these m and k; B's
// rows and C's columns [0, n) (the caller offsets both for its share).
void packedProduct(int m, int n, int k, const float* Ap, const GemmRows* rows, const float* B,
                   long ldb, float* C, long ldc, bool accumulate) {
  static thread_local Scratch bpack, tmp;
  float* bp = bpack.get(std::size_t(kNB) * kKC);
  float* row = rows && !rows->f32 ? tmp.get(std::size_t(kNR) * kKC) : nullptr;
  const long mPad = long(m + kMR - 1) / kMR * kMR;
  for (int j0 = 0; j0 < n; j0 += kNB) {
    const int nb = std::min(kNB, n - j0);
    for (int kc0 = 0; kc0 < k; kc0 += kKC) {
      const int kc = std::min(kKC, k - kc0);
      if (rows) {
        packRows(*rows, j0, nb, k, kc0, kc, bp, row);
      } else {
        packCols(B, ldb, j0, nb, kc0, kc, bp);
      }
      const bool carry = accumulate || kc0 > 0;
      // A panel of B (kc x kNR: 64 KB at AVX-512, 16 KB at AVX2) stays near (L1/L2) while A's
      // panels stream past it. (A k block of 128 at AVX-512, its panel in L1, was not faster.)
      for (int jp = 0; jp * kNR < nb; ++jp) {
        const int cols = std::min(kNR, nb - jp * kNR);
        const float* b = bp + long(jp) * kc * kNR;
        for (int ip = 0; ip * kMR < m; ++ip) {
          const float* a = Ap + kc0 * mPad + long(ip) * kc * kMR;
          const int rowsHere = std::min(kMR, m - ip * kMR);
          float* c = C + long(ip) * kMR * ldc + j0 + jp * kNR;
          if (rowsHere == kMR && cols == kNR) {
            micro(kc, a, b, c, ldc, carry);
          } else {
            microEdge(kc, a, b, c, ldc, rowsHere, cols, carry);
          }
        }
      }
    }
  }
}

void abtPacked(int m, int n, int k, const float* Ap, const GemmRows& B, float* C, long ldc,
               bool accumulate) {
  packedProduct(m, n, k, Ap, &B, nullptr, 0, C, ldc, accumulate);
}
void abPacked(int m, int n, int k, const float* Ap, const float* B, long ldb, float* C, long ldc,
              bool accumulate) {
  packedProduct(m, n, k, Ap, nullptr, B, ldb, C, ldc, accumulate);
}
#define ATTNVIZ_PACKED_KERNELS &packedRows, &packA, &abtPacked, &abPacked
#else
// The baseline level has no packed path: linearProduct (isa.cpp) runs Eigen's products here.
#define ATTNVIZ_PACKED_KERNELS nullptr, nullptr, nullptr, nullptr
#endif

// exp of the gap, vectorised (Eigen's exp), less the least normal float and floored at 0, so an
// underflowing or masked gap is exactly 0 (the formula of engine_detail.h's expOfGap).
// Each value goes through the packet exp whatever its position and address: the row is copied in
// chunks into an aligned buffer padded to whole packets (with the gap 0), so there is no scalar
// peel or tail, whose std::exp rounds differently. An entry's result depends on its value only,
// so the engine, the streaming path and repeated runs agree bit for bit.
void expShifted(const float* z, float* e, int n, float mx, float tau) {
  constexpr int kChunk = 256, kPad = 16;  // 16 floats: a whole packet at every level
  alignas(64) float buf[kChunk];
  using Aligned = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;
  const float invTau = 1.0f / tau;
  const bool multiply = __builtin_isfinite(invTau);
  const float least = 1.17549435e-38f;  // the least normal float
  for (int j = 0; j < n; j += kChunk) {
    const int m = std::min(kChunk, n - j);
    const int padded = (m + kPad - 1) / kPad * kPad;
    std::copy(z + j, z + j + m, buf);
    std::fill(buf + m, buf + padded, mx);
    Aligned a(buf, padded);
    if (multiply) {
      a = (((a - mx) * invTau).exp() - least).max(0.0f);
    } else {
      a = (((a - mx) / tau).exp() - least).max(0.0f);
    }
    std::copy(buf, buf + m, e + j);
  }
}

}  // namespace

// This level's table: gemmKernelsBaseline, gemmKernelsAvx2 or gemmKernelsAvx512 (isa.cpp).
extern const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL);
const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL) = {&abt, &ab, &expShifted,
                                                                 ATTNVIZ_PACKED_KERNELS};

}  // namespace attnviz::detail
