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
         long ldc) {
  Out c(C, m, n, Eigen::OuterStride<>(ldc));
  c.noalias() = In(A, m, k, Eigen::OuterStride<>(lda)) *
                In(B, n, k, Eigen::OuterStride<>(ldb)).transpose();
}

void ab(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
        long ldc) {
  Out c(C, m, n, Eigen::OuterStride<>(ldc));
  c.noalias() = In(A, m, k, Eigen::OuterStride<>(lda)) * In(B, k, n, Eigen::OuterStride<>(ldb));
}

}  // namespace

// This level's table: gemmKernelsBaseline, gemmKernelsAvx2 or gemmKernelsAvx512 (isa.cpp).
extern const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL);
const GemmKernels ATTNVIZ_CAT(gemmKernels, ATTNVIZ_ISA_LEVEL) = {&abt, &ab};

}  // namespace attnviz::detail
