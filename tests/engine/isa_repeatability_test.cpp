// The kernels of every instruction-set level this CPU runs give the same bits for the same values
// wherever the values sit in memory. The portable build's AVX2 and AVX-512 kernels use packets of
// 32 and 64 bytes, more than malloc's 16-byte alignment: a loop that peels scalar iterations until
// its destination is aligned rounds a row's first values differently at another address, and the
// same inputs then gave other weights from one run to the next (the engine's scratch buffers move
// around the heap). The test suites run at the baseline level by default (docs/dev/testing.md), so
// these tests call each level's kernels directly.
#include <gtest/gtest.h>

#include "attnviz/engine/isa.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace attnviz {
namespace {

std::vector<float> randomRow(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> z(static_cast<std::size_t>(n));
  for (float& x : z) x = d(rng);
  // a masked key and a gap that underflows
  if (n > 3) z[1] = -std::numeric_limits<float>::infinity(), z[2] = -200.0f;
  return z;
}

bool sameBits(const float* a, const float* b, int n) {
  return std::memcmp(a, b, sizeof(float) * std::size_t(n)) == 0;
}

// exp of the gap for one row at 16 offsets of its input and output (every position of a row
// within a 64-byte line), in place and out of place, and for each value alone: the same bits.
TEST(IsaRepeatability, ExpShiftedDependsOnTheValuesOnlyAtEveryLevel) {
  for (const Isa isa : supportedIsas()) {
    const auto& k = detail::gemmKernels(isa);
    for (const int n : {1, 5, 16, 37, 255, 256, 257, 700}) {
      const std::vector<float> z = randomRow(n, unsigned(n));
      float mx = -std::numeric_limits<float>::infinity();
      for (float x : z) mx = std::max(mx, x);
      for (const float tau : {1.0f, 0.7f, 1e-39f}) {
        std::vector<float> want(static_cast<std::size_t>(n));
        k.expShifted(z.data(), want.data(), n, mx, tau);
        // each value alone
        for (int i = 0; i < n; ++i) {
          float one = 0;
          k.expShifted(&z[std::size_t(i)], &one, 1, mx, tau);
          ASSERT_TRUE(sameBits(&one, &want[std::size_t(i)], 1))
              << isaName(isa) << " n=" << n << " tau=" << tau << " value " << i;
        }
        std::vector<float> in(std::size_t(n) + 32), out(std::size_t(n) + 32);
        for (int off = 0; off < 16; ++off) {
          const int oo = (off * 7) % 16;  // the output at another offset
          std::copy(z.begin(), z.end(), in.begin() + off);
          k.expShifted(in.data() + off, out.data() + oo, n, mx, tau);
          EXPECT_TRUE(sameBits(out.data() + oo, want.data(), n))
              << isaName(isa) << " n=" << n << " tau=" << tau << " offset " << off;
          k.expShifted(in.data() + off, in.data() + off, n, mx, tau);  // in place
          EXPECT_TRUE(sameBits(in.data() + off, want.data(), n))
              << isaName(isa) << " in place, n=" << n << " offset " << off;
        }
        // exp(-inf) is exactly 0; the values stay in [0, 1]
        if (n > 3) EXPECT_EQ(want[1], 0.0f) << isaName(isa);
        for (float e : want) EXPECT_TRUE(e >= 0.0f && e <= 1.0f) << isaName(isa) << " " << e;
      }
    }
  }
}

// The products, from tiny (where a coefficient-based path would peel to the destination's
// alignment) to blocked sizes, with A, B and C at 16 offsets: the same bits.
TEST(IsaRepeatability, ProductsDoNotDependOnWhereTheOperandsSit) {
  struct Size {
    int m, n, k;
  };
  for (const Isa isa : supportedIsas()) {
    const auto& kern = detail::gemmKernels(isa);
    for (const Size s : {Size{1, 3, 4}, Size{2, 3, 4}, Size{3, 5, 7}, Size{4, 9, 5},
                         Size{8, 29, 16}, Size{17, 33, 65}}) {
      const std::vector<float> a = randomRow(s.m * s.k, 11), b = randomRow(s.n * s.k, 12);
      std::vector<float> A(a.size() + 16), B(b.size() + 16), C(std::size_t(s.m * s.n) + 16);
      for (const bool transposed : {true, false}) {
        std::vector<float> want;
        for (int off = 0; off < 16; ++off) {
          const int oa = off, ob = (off * 5) % 16, oc = (off * 11) % 16;
          std::fill(A.begin(), A.end(), 0.0f);
          std::fill(B.begin(), B.end(), 0.0f);
          std::copy(a.begin(), a.end(), A.begin() + oa);
          std::copy(b.begin(), b.end(), B.begin() + ob);
          std::fill(C.begin(), C.end(), 0.5f);  // accumulated onto
          if (transposed)
            kern.abt(s.m, s.n, s.k, A.data() + oa, s.k, B.data() + ob, s.k, C.data() + oc, s.n,
                     true);
          else
            kern.ab(s.m, s.n, s.k, A.data() + oa, s.k, B.data() + ob, s.n, C.data() + oc, s.n,
                    true);
          std::vector<float> got(C.begin() + oc, C.begin() + oc + s.m * s.n);
          if (off == 0) {
            want = got;
            continue;
          }
          EXPECT_TRUE(sameBits(got.data(), want.data(), s.m * s.n))
              << isaName(isa) << (transposed ? " A B^T " : " A B ") << s.m << "x" << s.n << "x"
              << s.k << " offset " << off;
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnviz
