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

#include <cstring>
#include <new>
#include <utility>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>

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
// C = A B^T with B's rows given by a GemmRows (isa.h): float32 in memory, or produced a chunk of
// kGemmChunk values at a time (a stored layer's blocks, dequantized into the packed panel as it
// is packed, so no float32 copy of the layer is ever made). A is packed once into panels of kMR
// rows, k-major (gemmPackA); each task packs its own rows of B, chunk by chunk, into panels of
// kNR rows, k-major, and the micro-kernel keeps a kMR x kNR tile of C in registers, one FMA
// (one product and one sum at the AVX2 and AVX-512 levels) per value of A and B. Every value of C
// is the sum over k in the same order whatever the source of B's rows, so a layer kept as stored
// and the same layer converted at open give the same numbers bit for bit.
#if defined(__AVX512F__)
constexpr int kW = 16, kMR = 12;
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kW = 8, kMR = 6;
#else
constexpr int kW = 4, kMR = 4;
#endif
constexpr int kNR = 2 * kW;
// Rows of B a task packs and multiplies (a multiple of kNR; the packed chunk, kTaskRows x
// kGemmChunk floats, stays in L2), and rows of A multiplied with each packed chunk of B while
// their chunk stays in L2 (a multiple of kMR).
constexpr int kTaskRows = 256;
constexpr int kBlockRows = 12 * kMR;

typedef float Vec __attribute__((vector_size(kW * 4)));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
inline Vec splat(float x) {
#if defined(__AVX512F__)
  return _mm512_set1_ps(x);
#elif defined(__AVX2__)
  return _mm256_set1_ps(x);
#else
  return Vec{} + x;
#endif
}
// a * b + c: fused at the AVX2 and AVX-512 levels, a product and a sum at the baseline.
inline Vec madd(Vec a, Vec b, Vec c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__AVX2__) && defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}
inline float hsum(Vec v) {
  float s[kW];
  std::memcpy(s, &v, sizeof v);
  // A fixed tree, the same for every call.
  for (int w = kW / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) s[l] += s[l + w];
  return s[0];
}

// Panels of kMR rows of A (the last one padded with zeros), chunk by chunk of kGemmChunk values
// of k: chunk c's panels one after another (what one pass over B's packed chunk reads, in order),
// panel i of chunk c (kc values) holding A[i*kMR + r][c*kGemmChunk + p] at
// c * kGemmChunk * panels * kMR + i * kc * kMR + p * kMR + r.
inline long packedOffset(int k, int panels, int panel, int pc) {
  const int kc = k - pc < kGemmChunk ? k - pc : kGemmChunk;
  return long(pc) * panels * kMR + long(panel) * kc * kMR;
}

void packA(int m, int k, const float* A, long lda, float* out, int panel0, int panel1) {
  const int panels = (m + kMR - 1) / kMR;
  for (int ip = panel0; ip < panel1; ++ip) {
    const int r0 = ip * kMR, rows = m - r0 < kMR ? m - r0 : kMR;
    for (int pc = 0; pc < k; pc += kGemmChunk) {
      const int kc = k - pc < kGemmChunk ? k - pc : kGemmChunk;
      float* dst = out + packedOffset(k, panels, ip, pc);
      for (int r = 0; r < rows; ++r) {
        const float* src = A + long(r0 + r) * lda + pc;
        for (int p = 0; p < kc; ++p) dst[p * kMR + r] = src[p];
      }
      for (int r = rows; r < kMR; ++r)
        for (int p = 0; p < kc; ++p) dst[p * kMR + r] = 0.0f;
    }
  }
}

// C[0..R, 0..cols) (+)= the products of kc values of a panel of A (stride kMR) and a panel of B
// (stride kNR).
template <int R>
void micro(int kc, const float* __restrict a, const float* __restrict b, float* c, long ldc,
           int cols, bool accumulate) {
  Vec s0[R], s1[R];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) s0[i] = s1[i] = Vec{};
  for (int p = 0; p < kc; ++p) {
    const Vec b0 = load(b), b1 = load(b + kW);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const Vec ai = splat(a[i]);
      s0[i] = madd(ai, b0, s0[i]);
      s1[i] = madd(ai, b1, s1[i]);
    }
    a += kMR;
    b += kNR;
  }
  if (cols == kNR) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      float* ci = c + long(i) * ldc;
      if (accumulate) {
        store(ci, load(ci) + s0[i]);
        store(ci + kW, load(ci + kW) + s1[i]);
      } else {
        store(ci, s0[i]);
        store(ci + kW, s1[i]);
      }
    }
    return;
  }
  for (int i = 0; i < R; ++i) {
    float t[kNR];
    store(t, s0[i]);
    store(t + kW, s1[i]);
    float* ci = c + long(i) * ldc;
    for (int j = 0; j < cols; ++j) ci[j] = accumulate ? ci[j] + t[j] : t[j];
  }
}

using MicroFn = void (*)(int, const float*, const float*, float*, long, int, bool);
template <int... R>
struct MicroTable {
  static constexpr MicroFn t[] = {&micro<R + 1>...};
};
template <int... R>
constexpr const MicroFn* microTable(std::integer_sequence<int, R...>) {
  return MicroTable<R...>::t;
}

// Row r's values [k0, k0 + kc) of B: a pointer into B, or `tmp` filled.
inline const float* rowChunk(const GemmRows& B, int r, int k0, int kc, float* tmp) {
  if (B.f32) return B.f32 + long(r) * B.ld + k0;
  B.fill(B.ctx, r, k0, kc, tmp);
  return tmp;
}

// The rows of C for B's rows [r0, r0 + n) (C points at column r0 of row 0), A packed.
void abtRowsPacked(int m, int n, int k, const float* Ap, const GemmRows& B, int r0, float* C,
                   long ldc, bool accumulate) {
  static const MicroFn* const table = microTable(std::make_integer_sequence<int, kMR>());
  const int panels = (m + kMR - 1) / kMR;
  thread_local float* bpack = nullptr;
  thread_local float* tmp = nullptr;
  if (!bpack) {
    bpack = static_cast<float*>(::operator new(sizeof(float) * kTaskRows * kGemmChunk,
                                               std::align_val_t(64)));
    tmp = static_cast<float*>(::operator new(sizeof(float) * kGemmChunk, std::align_val_t(64)));
  }
  for (int j0 = 0; j0 < n; j0 += kTaskRows) {
    const int nt = n - j0 < kTaskRows ? n - j0 : kTaskRows;
    for (int pc = 0; pc < k; pc += kGemmChunk) {
      const int kc = k - pc < kGemmChunk ? k - pc : kGemmChunk;
      // Pack: panel q holds B[j0 + q*kNR + j][pc + p] at q * kGemmChunk * kNR + p * kNR + j.
      for (int j = 0; j < nt; ++j) {
        const float* src = rowChunk(B, r0 + j0 + j, pc, kc, tmp);
        float* dst = bpack + (j / kNR) * kGemmChunk * kNR + (j % kNR);
        for (int p = 0; p < kc; ++p) dst[p * kNR] = src[p];
      }
      if (nt % kNR) {
        float* panel = bpack + (nt / kNR) * kGemmChunk * kNR;
        for (int p = 0; p < kc; ++p)
          for (int j = nt % kNR; j < kNR; ++j) panel[p * kNR + j] = 0.0f;
      }
      const bool acc = accumulate || pc > 0;
      for (int i0 = 0; i0 < m; i0 += kBlockRows) {
        const int i1 = m - i0 < kBlockRows ? m : i0 + kBlockRows;
        for (int jp = 0; jp < nt; jp += kNR) {
          const int cols = nt - jp < kNR ? nt - jp : kNR;
          const float* panel = bpack + (jp / kNR) * kGemmChunk * kNR;
          for (int ip = i0; ip < i1; ip += kMR) {
            const int rows = i1 - ip < kMR ? i1 - ip : kMR;
            table[rows - 1](kc, Ap + packedOffset(k, panels, ip / kMR, pc), panel,
                            C + long(ip) * ldc + j0 + jp, ldc, cols, acc);
          }
        }
      }
    }
  }
}

// Few rows of A (the head on the last position): a dot product per value of C, B's rows read
// once, a chunk at a time, in kW partial sums added by a fixed tree at the end.
void abtRowsDot(int m, int n, int k, const float* A, long lda, const GemmRows& B, int r0,
                float* C, long ldc, bool accumulate) {
  thread_local float* tmp = nullptr;
  if (!tmp) tmp = static_cast<float*>(::operator new(sizeof(float) * kGemmChunk, std::align_val_t(64)));
  constexpr int kMaxRows = 4;
  for (int j = 0; j < n; ++j) {
    Vec s[kMaxRows] = {};
    float tail[kMaxRows] = {};
    for (int pc = 0; pc < k; pc += kGemmChunk) {
      const int kc = k - pc < kGemmChunk ? k - pc : kGemmChunk;
      const float* b = rowChunk(B, r0 + j, pc, kc, tmp);
      int p = 0;
      for (; p + kW <= kc; p += kW) {
        const Vec bv = load(b + p);
        for (int i = 0; i < m; ++i) s[i] = madd(load(A + long(i) * lda + pc + p), bv, s[i]);
      }
      for (; p < kc; ++p)
        for (int i = 0; i < m; ++i) tail[i] += A[long(i) * lda + pc + p] * b[p];
    }
    for (int i = 0; i < m; ++i) {
      const float v = hsum(s[i]) + tail[i];
      float& c = C[long(i) * ldc + j];
      c = accumulate ? c + v : v;
    }
  }
}

int gemmMr() { return kMR; }

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
const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL) = {&abt, &ab, &expShifted, &gemmMr, &packA,
                                                           &abtRowsPacked, &abtRowsDot};

}  // namespace attnviz::detail
