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
const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL) = {&abt, &ab, &expShifted};

}  // namespace attnviz::detail
