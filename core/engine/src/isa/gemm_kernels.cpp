// attnviz core: the float32 products of isa.h, compiled once per instruction-set level
// (core/CMakeLists.txt: attnviz_isa_<level>). Each copy sees Eigen under its own namespace
// (-DEigen=attnviz_eigen_<level>), so the linker never merges one level's Eigen code into another
// level's callers; tests/engine checks the objects for shared symbols.
#include "attnviz/engine/isa.h"

#include <Eigen/Core>

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
void expShifted(const float* z, float* e, int n, float mx, float tau) {
  using Arr = Eigen::Map<const Eigen::ArrayXf>;
  Eigen::Map<Eigen::ArrayXf> out(e, n);
  const float invTau = 1.0f / tau;
  const float least = 1.17549435e-38f;  // the least normal float
  if (__builtin_isfinite(invTau)) {
    out = (((Arr(z, n) - mx) * invTau).exp() - least).max(0.0f);
  } else {
    out = (((Arr(z, n) - mx) / tau).exp() - least).max(0.0f);
  }
}

}  // namespace

// This level's table: gemmKernelsBaseline, gemmKernelsAvx2 or gemmKernelsAvx512 (isa.cpp).
extern const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL);
const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL) = {&abt, &ab, &expShifted};

}  // namespace attnviz::detail
