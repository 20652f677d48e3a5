// The linear layers' packed GEMM (attnviz/engine/isa.h: linearABt, linearAB; the kernels of
// gemm_kernels.cpp at the AVX2 and AVX-512 levels). Its contract is exact: each value of C is one
// chain of fused multiply-adds over k in order, from 0 (or from C's value when accumulating). The
// reference here is that chain written with std::fma, one value at a time; the packed kernels
// must give its bits at every level, for shapes that cross the kernels' blocks of k (256) and of
// B's rows (256) and leave partial tiles, and whatever the threads. A double-precision sum checks
// the reference itself.
#include "attnviz/engine/engine.h"
#include "attnviz/engine/isa.h"
#include "attnviz/engine/parallel.h"
#include "attnviz/engine/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

using attnviz::GemmRows;
using attnviz::Isa;

std::vector<float> randomFloats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

struct Shape {
  int m, n, k;
};
// Whole tiles; partial tiles at both edges; k over one and two blocks of 256; B's rows over a
// block of 256; the smallest m the packed path takes.
constexpr Shape kShapes[] = {{24, 64, 32},   {17, 33, 300}, {100, 257, 513},
                             {16, 300, 256}, {61, 70, 257}, {40, 520, 70}};

// C[i][j] as the contract defines it: B(j, p) is B's row j value p.
template <class BAt>
std::vector<float> fmaChain(const Shape& s, const std::vector<float>& A, long lda, BAt b,
                            const std::vector<float>* start, long ldc) {
  std::vector<float> C(std::size_t(s.m) * ldc, 0.0f);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      float acc = start ? (*start)[std::size_t(i) * ldc + j] : 0.0f;
      for (int p = 0; p < s.k; ++p) acc = std::fma(A[std::size_t(i) * lda + p], b(j, p), acc);
      C[std::size_t(i) * ldc + j] = acc;
    }
  return C;
}

// The levels whose tables have the packed kernels (the baseline's has none).
std::vector<Isa> packedLevels() {
  std::vector<Isa> out;
  for (Isa isa : attnviz::supportedIsas())
    if (attnviz::detail::gemmKernels(isa).packA) out.push_back(isa);
  return out;
}

// C (+)= A B^T or A B through one level's kernels on this thread, A packed whole.
std::vector<float> levelProduct(Isa isa, const Shape& s, const std::vector<float>& A, long lda,
                                const GemmRows* rows, const float* B, long ldb,
                                std::vector<float> C, long ldc, bool accumulate) {
  const auto& t = attnviz::detail::gemmKernels(isa);
  const int mr = t.packedRows(), panels = (s.m + mr - 1) / mr;
  std::vector<float> ap(std::size_t(panels) * mr * s.k, std::nanf(""));
  // Packed in two calls, as the threads split it.
  t.packA(s.m, s.k, A.data(), lda, ap.data(), 0, panels / 2);
  t.packA(s.m, s.k, A.data(), lda, ap.data(), panels / 2, panels);
  if (rows) {
    t.abtPacked(s.m, s.n, s.k, ap.data(), *rows, C.data(), ldc, accumulate);
  } else {
    t.abPacked(s.m, s.n, s.k, ap.data(), B, ldb, C.data(), ldc, accumulate);
  }
  return C;
}

int firstDifference(const std::vector<float>& a, const std::vector<float>& b, const Shape& s,
                    long ldc) {
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j)
      if (std::memcmp(&a[std::size_t(i) * ldc + j], &b[std::size_t(i) * ldc + j], 4) != 0)
        return i * s.n + j;
  return -1;
}

// B's rows produced by a callback (a stored layer converted as it is packed): here a copy of
// float32 rows, so the product must equal the in-memory rows' bit for bit.
struct Source {
  const float* w;
  long ld;
  int calls = 0;
};
void fillFrom(const void* ctx, int row, int k0, int kc, float* out) {
  const Source& s = *static_cast<const Source*>(ctx);
  std::memcpy(out, s.w + row * s.ld + k0, sizeof(float) * kc);
  ++const_cast<Source&>(s).calls;
}

TEST(GemmPacked, EveryLevelGivesTheFmaChainsBitsForBsRows) {
  const std::vector<Isa> levels = packedLevels();
  if (levels.empty()) GTEST_SKIP() << "this CPU runs no AVX2 level";
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    const long lda = s.k + 3, ldb = s.k + 5, ldc = s.n + 7;
    const std::vector<float> A = randomFloats(std::size_t(s.m) * lda, 1);
    const std::vector<float> B = randomFloats(std::size_t(s.n) * ldb, 2);
    const std::vector<float> start = randomFloats(std::size_t(s.m) * ldc, 3);
    auto bAt = [&](int j, int p) { return B[std::size_t(j) * ldb + p]; };
    const std::vector<float> want = fmaChain(s, A, lda, bAt, nullptr, ldc);
    const std::vector<float> wantAcc = fmaChain(s, A, lda, bAt, &start, ldc);
    // The chain against a double sum: float32 rounding of a k-term sum.
    for (int i = 0; i < s.m; i += 7)
      for (int j = 0; j < s.n; j += 5) {
        double d = 0, mag = 0;
        for (int p = 0; p < s.k; ++p) d += double(A[i * lda + p]) * bAt(j, p), mag += std::abs(A[i * lda + p] * bAt(j, p));
        ASSERT_LE(std::abs(want[i * ldc + j] - d), 1e-6 * s.k * mag + 1e-30);
      }
    for (Isa isa : levels) {
      SCOPED_TRACE(attnviz::isaName(isa));
      GemmRows rows;
      rows.f32 = B.data(), rows.ld = ldb;
      const std::vector<float> junk(std::size_t(s.m) * ldc, 1e30f);
      EXPECT_EQ(firstDifference(levelProduct(isa, s, A, lda, &rows, nullptr, 0, junk, ldc, false),
                                want, s, ldc),
                -1);
      EXPECT_EQ(firstDifference(levelProduct(isa, s, A, lda, &rows, nullptr, 0, start, ldc, true),
                                wantAcc, s, ldc),
                -1);
      Source src{B.data(), ldb};
      GemmRows filled;
      filled.fill = &fillFrom, filled.ctx = &src;
      EXPECT_EQ(firstDifference(levelProduct(isa, s, A, lda, &filled, nullptr, 0, junk, ldc, false),
                                want, s, ldc),
                -1);
      // Each row a block of k at a time: ceil(k / 256) calls a row.
      EXPECT_EQ(src.calls, s.n * ((s.k + 255) / 256));
      // Columns of C outside [0, n) are never written.
      const std::vector<float> got = levelProduct(isa, s, A, lda, &rows, nullptr, 0, junk, ldc, false);
      for (int i = 0; i < s.m; ++i)
        for (long j = s.n; j < ldc; ++j) ASSERT_EQ(got[i * ldc + j], 1e30f);
    }
  }
}

TEST(GemmPacked, EveryLevelGivesTheFmaChainsBitsForBStoredInMajor) {
  const std::vector<Isa> levels = packedLevels();
  if (levels.empty()) GTEST_SKIP() << "this CPU runs no AVX2 level";
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    const long lda = s.k + 1, ldb = s.n + 9, ldc = s.n + 2;
    const std::vector<float> A = randomFloats(std::size_t(s.m) * lda, 4);
    const std::vector<float> B = randomFloats(std::size_t(s.k) * ldb, 5);  // [k, n]
    const std::vector<float> start = randomFloats(std::size_t(s.m) * ldc, 6);
    auto bAt = [&](int j, int p) { return B[std::size_t(p) * ldb + j]; };
    const std::vector<float> want = fmaChain(s, A, lda, bAt, nullptr, ldc);
    const std::vector<float> wantAcc = fmaChain(s, A, lda, bAt, &start, ldc);
    for (Isa isa : levels) {
      SCOPED_TRACE(attnviz::isaName(isa));
      const std::vector<float> junk(std::size_t(s.m) * ldc, -3.0f);
      EXPECT_EQ(firstDifference(levelProduct(isa, s, A, lda, nullptr, B.data(), ldb, junk, ldc, false),
                                want, s, ldc),
                -1);
      EXPECT_EQ(firstDifference(levelProduct(isa, s, A, lda, nullptr, B.data(), ldb, start, ldc, true),
                                wantAcc, s, ldc),
                -1);
    }
  }
}

// The threaded entry points: the chain's bits at the active level when it has the packed
// kernels, split over the pool's threads or run on one (a call from inside a task of
// parallelFor runs on that task's thread); below kPackedMinRows rows (or at the baseline level)
// Eigen's products, which agree with the chain to float32 rounding.
TEST(GemmPacked, TheLinearProductsAreTheChainOnAnyThreads) {
  const bool packed = attnviz::detail::gemmKernels(attnviz::activeIsa()).packA != nullptr;
  for (const Shape& s : {Shape{100, 1000, 300}, Shape{40, 257, 513}, Shape{5, 300, 70}}) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    const long lda = s.k + 2, ldb = s.k, ldc = s.n;
    const std::vector<float> A = randomFloats(std::size_t(s.m) * lda, 7);
    const std::vector<float> B = randomFloats(std::size_t(s.n) * ldb, 8);
    const std::vector<float> Bin = randomFloats(std::size_t(s.k) * s.n, 9);
    const std::vector<float> want =
        fmaChain(s, A, lda, [&](int j, int p) { return B[std::size_t(j) * ldb + p]; }, nullptr, ldc);
    const std::vector<float> wantIn =
        fmaChain(s, A, lda, [&](int j, int p) { return Bin[std::size_t(p) * s.n + j]; }, nullptr, ldc);
    for (bool nested : {false, true}) {
      SCOPED_TRACE(nested ? "on one thread" : "on the pool");
      std::vector<float> C(std::size_t(s.m) * ldc), D(C);
      GemmRows rows;
      rows.f32 = B.data(), rows.ld = ldb;
      auto run = [&] {
        attnviz::linearABt(s.m, s.n, s.k, A.data(), lda, rows, C.data(), ldc);
        attnviz::linearAB(s.m, s.n, s.k, A.data(), lda, Bin.data(), s.n, D.data(), ldc);
      };
      if (nested) {
        attnviz::detail::parallelFor(2, [&](int t) {
          if (t == 0) run();
        });
      } else {
        run();
      }
      if (packed && s.m >= attnviz::kPackedMinRows) {
        EXPECT_EQ(firstDifference(C, want, s, ldc), -1);
        EXPECT_EQ(firstDifference(D, wantIn, s, ldc), -1);
      } else {
        for (std::size_t i = 0; i < C.size(); ++i) {
          ASSERT_NEAR(C[i], want[i], 1e-4f * (1 + std::abs(want[i])));
          ASSERT_NEAR(D[i], wantIn[i], 1e-4f * (1 + std::abs(wantIn[i])));
        }
      }
    }
  }
}

}  // namespace
