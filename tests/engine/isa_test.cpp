// The CPU kernels at every instruction-set level this machine runs (attnviz/engine/isa.h): each
// level's GEMMs against a double-precision loop, each level's ggml dequantization equal to the
// baseline's bit for bit and its dot products against a double sum, and ATTNVIZ_ISA as the
// binary reports it.
#include "attnviz/engine/isa.h"
#include "attnviz/engine/ggml_kernels.h"
#include "run_binary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <random>
#include <vector>

namespace {

using attnviz::GgmlType;
using attnviz::Isa;

std::vector<float> randomFloats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Sizes that are not multiples of any vector width, with padded leading dimensions.
constexpr int kM = 37, kN = 131, kK = 70, kLda = 75, kLdb = 73, kLdc = 140;

TEST(Isa, EveryLevelsGemmsMatchADoubleLoop) {
  const std::vector<float> A = randomFloats(std::size_t(kM) * kLda, 1);
  const std::vector<float> Bt = randomFloats(std::size_t(kN) * kLdb, 2);  // [n, k] rows
  const std::vector<float> B = randomFloats(std::size_t(kK) * kLdc, 3);   // [k, n] rows
  ASSERT_FALSE(attnviz::supportedIsas().empty());
  for (Isa isa : attnviz::supportedIsas()) {
    SCOPED_TRACE(attnviz::isaName(isa));
    const auto& kernels = attnviz::detail::gemmKernels(isa);
    std::vector<float> C(std::size_t(kM) * kLdc, -7.0f), D(C);
    kernels.abt(kM, kN, kK, A.data(), kLda, Bt.data(), kLdb, C.data(), kLdc, false);
    // ab accumulating onto a copy of itself: twice the product.
    kernels.ab(kM, kN, kK, A.data(), kLda, B.data(), kLdc, D.data(), kLdc, false);
    kernels.ab(kM, kN, kK, A.data(), kLda, B.data(), kLdc, D.data(), kLdc, true);
    double worst = 0, worstAb = 0;
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        double s = 0, a = 0, s2 = 0, a2 = 0;
        for (int k = 0; k < kK; ++k) {
          const double x = A[std::size_t(i) * kLda + k];
          s += x * Bt[std::size_t(j) * kLdb + k];
          a += std::abs(x * Bt[std::size_t(j) * kLdb + k]);
          s2 += x * B[std::size_t(k) * kLdc + j];
          a2 += std::abs(x * B[std::size_t(k) * kLdc + j]);
        }
        worst = std::max(worst, std::abs(C[std::size_t(i) * kLdc + j] - s) / a);
        worstAb = std::max(worstAb, std::abs(D[std::size_t(i) * kLdc + j] - 2 * s2) / (2 * a2));
      }
      // Past column n of each row: untouched.
      for (int j = kN; j < kLdc; ++j) ASSERT_EQ(C[std::size_t(i) * kLdc + j], -7.0f);
    }
    EXPECT_LT(worst, 1e-6);
    EXPECT_LT(worstAb, 1e-6);
  }
}

TEST(Isa, TheDispatchedGemmIsTheActiveLevels) {
  const std::vector<float> A = randomFloats(std::size_t(kM) * kLda, 4);
  const std::vector<float> Bt = randomFloats(std::size_t(kN) * kLdb, 5);
  std::vector<float> C(std::size_t(kM) * kLdc), D(C);
  attnviz::gemmABt(kM, kN, kK, A.data(), kLda, Bt.data(), kLdb, C.data(), kLdc);
  attnviz::detail::gemmKernels(attnviz::activeIsa())
      .abt(kM, kN, kK, A.data(), kLda, Bt.data(), kLdb, D.data(), kLdc, false);
  EXPECT_EQ(0, std::memcmp(C.data(), D.data(), C.size() * sizeof(float)));
}

TEST(Isa, EveryLevelsSoftmaxExponentialsMatchDoubleExp) {
  std::vector<float> z = randomFloats(203, 6);
  for (float& v : z) v *= 30.0f;
  z[5] = z[77] = -std::numeric_limits<float>::infinity();  // masked keys
  z[9] = -1000.0f;                                           // a gap that underflows
  const float mx = 40.0f;
  for (float tau : {1.0f, 0.7f, 3.0f}) {
    for (Isa isa : attnviz::supportedIsas()) {
      SCOPED_TRACE(std::string(attnviz::isaName(isa)) + " tau " + std::to_string(tau));
      std::vector<float> e(z.size(), -1.0f);
      attnviz::detail::gemmKernels(isa).expShifted(z.data(), e.data(), int(z.size()), mx, tau);
      EXPECT_EQ(e[5], 0.0f);
      EXPECT_EQ(e[77], 0.0f);
      EXPECT_EQ(e[9], 0.0f);
      for (std::size_t i = 0; i < z.size(); ++i) {
        if (i == 5 || i == 77 || i == 9) continue;
        const double x = (double(z[i]) - mx) / double(tau), want = std::exp(x);
        if (want < 1e-37) {
          EXPECT_LE(e[i], 1e-37f);
        } else {  // float32 rounding of the gap: the error grows with |x|; less the least normal
          EXPECT_NEAR(e[i], want, 2e-7 * (1.0 + std::abs(x)) * want + 1.2e-38) << i;
        }
      }
    }
  }
}

// A half with |value| in [1e-3, 0.1] and a random sign.
std::uint16_t saneHalf(std::mt19937& gen) {
  const std::uint16_t exp = std::uint16_t(5 + gen() % 7);
  return std::uint16_t(((gen() & 1u) << 15) | (exp << 10) | (gen() & 0x3ffu));
}

struct TypeCase {
  GgmlType type;
  std::vector<int> scaleOffsets;  // each block's fp16 scale fields (ggml's layouts)
};

// Random blocks of `type` (n values) with finite, sane scales.
std::vector<unsigned char> randomBlocks(const TypeCase& tc, std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  int bv = 0, bb = 0;
  attnviz::ggmlTypeInfo(std::uint32_t(tc.type), bv, bb);
  std::vector<unsigned char> raw(attnviz::ggmlRowBytes(tc.type, n));
  for (auto& b : raw) b = static_cast<unsigned char>(gen());
  auto putHalf = [&](std::size_t at, std::uint16_t h) { std::memcpy(&raw[at], &h, 2); };
  if (tc.type == GgmlType::F32) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (std::size_t i = 0; i < raw.size(); i += 4) {
      const float v = d(gen);
      std::memcpy(&raw[i], &v, 4);
    }
  } else if (tc.type == GgmlType::F16) {
    for (std::size_t i = 0; i < raw.size(); i += 2) putHalf(i, saneHalf(gen));
  } else if (tc.type == GgmlType::BF16) {
    for (std::size_t i = 0; i < raw.size(); i += 2)
      putHalf(i, std::uint16_t(0x3c00u | (saneHalf(gen) & 0x80ffu)));
  } else {
    for (std::size_t b = 0; b < raw.size(); b += std::size_t(bb))
      for (int off : tc.scaleOffsets) putHalf(b + std::size_t(off), saneHalf(gen));
  }
  return raw;
}

TEST(Isa, EveryLevelsBlockKernelsAgreeWithTheBaseline) {
  const TypeCase types[] = {
      {GgmlType::F32, {}},      {GgmlType::F16, {}},      {GgmlType::BF16, {}},
      {GgmlType::Q4_0, {0}},    {GgmlType::Q4_1, {0, 2}}, {GgmlType::Q5_0, {0}},
      {GgmlType::Q5_1, {0, 2}}, {GgmlType::Q8_0, {0}},    {GgmlType::Q2_K, {80, 82}},
      {GgmlType::Q3_K, {108}},  {GgmlType::Q4_K, {0, 2}}, {GgmlType::Q5_K, {0, 2}},
      {GgmlType::Q6_K, {208}},
  };
  constexpr std::int64_t kValues = 256 * 9;  // nine super-blocks: a tail past whole chunks
  const std::vector<float> x = randomFloats(kValues, 9);
  for (const TypeCase& tc : types) {
    SCOPED_TRACE(attnviz::ggmlTypeName(std::uint32_t(tc.type)));
    const std::vector<unsigned char> row = randomBlocks(tc, kValues, 10 + unsigned(tc.type));
    std::vector<float> base(kValues);
    attnviz::dequantizeRowAt(Isa::Baseline, tc.type, row.data(), base.data(), kValues);
    double exact = 0, scale = 0;
    for (std::int64_t i = 0; i < kValues; ++i) {
      ASSERT_TRUE(std::isfinite(base[std::size_t(i)]));
      exact += double(base[std::size_t(i)]) * x[std::size_t(i)];
      scale += std::abs(double(base[std::size_t(i)]) * x[std::size_t(i)]);
    }
    for (Isa isa : attnviz::supportedIsas()) {
      SCOPED_TRACE(attnviz::isaName(isa));
      std::vector<float> got(kValues, -1.0f);
      attnviz::dequantizeRowAt(isa, tc.type, row.data(), got.data(), kValues);
      EXPECT_EQ(0, std::memcmp(got.data(), base.data(), got.size() * sizeof(float)));
      const float dot = attnviz::dotRowAt(isa, tc.type, row.data(), x.data(), kValues);
      EXPECT_LT(std::abs(double(dot) - exact), 1e-5 * scale);
    }
  }
}

// Every one of the 65536 halves reads the same at every level (F16C's conversion at AVX2 and
// AVX-512, the baseline's own without it): zeros, subnormals, normals, infinities, NaN payloads.
TEST(Isa, EveryLevelReadsEveryHalfAlike) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t h = 0; h < all.size(); ++h) all[h] = std::uint16_t(h);
  std::vector<float> base(all.size());
  attnviz::dequantizeRowAt(Isa::Baseline, GgmlType::F16, all.data(), base.data(),
                           std::int64_t(all.size()));
  for (Isa isa : attnviz::supportedIsas()) {
    std::vector<float> got(all.size());
    attnviz::dequantizeRowAt(isa, GgmlType::F16, all.data(), got.data(), std::int64_t(all.size()));
    for (std::size_t h = 0; h < all.size(); ++h) {
      std::uint32_t a, b;
      std::memcpy(&a, &base[h], 4);
      std::memcpy(&b, &got[h], 4);
      ASSERT_EQ(a, b) << attnviz::isaName(isa) << " half 0x" << std::hex << h;
    }
  }
  // And the values themselves, at a few fixed points: 1, -2, the largest normal, the smallest
  // subnormal, infinity.
  EXPECT_EQ(base[0x3c00], 1.0f);
  EXPECT_EQ(base[0xc000], -2.0f);
  EXPECT_EQ(base[0x7bff], 65504.0f);
  EXPECT_EQ(base[0x0001], std::ldexp(1.0f, -24));
  EXPECT_EQ(base[0x7c00], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(base[0x7e00]));
}

// Decode's matrix-vector product at every level (its own kernels: x in two 16-bit parts for the
// K-quants at AVX2 and AVX-512, float elsewhere) against the double-precision dot of each row's
// baseline dequantization, to float32 rounding; x normal, then with one value in every 32 at 300
// times the rest, then with its first 32 values zero.
TEST(Isa, EveryLevelsMatVecAgreesWithDoubleDots) {
  const TypeCase types[] = {
      {GgmlType::F32, {}},      {GgmlType::F16, {}},      {GgmlType::BF16, {}},
      {GgmlType::Q4_0, {0}},    {GgmlType::Q8_0, {0}},    {GgmlType::Q3_K, {108}},
      {GgmlType::Q4_K, {0, 2}}, {GgmlType::Q5_K, {0, 2}}, {GgmlType::Q6_K, {208}},
  };
  constexpr std::int64_t kValues = 256 * 5, kRows = 7;
  for (const TypeCase& tc : types) {
    SCOPED_TRACE(attnviz::ggmlTypeName(std::uint32_t(tc.type)));
    const std::vector<unsigned char> rows =
        randomBlocks(tc, kValues * kRows, 20 + unsigned(tc.type));
    std::vector<float> w(std::size_t(kValues * kRows));
    attnviz::dequantizeRowAt(Isa::Baseline, tc.type, rows.data(), w.data(), kValues * kRows);
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> x = randomFloats(kValues, 30 + unsigned(kind));
      if (kind == 1)
        for (std::int64_t i = 5; i < kValues; i += 32) x[std::size_t(i)] = 300.0f;
      if (kind == 2) std::fill(x.begin(), x.begin() + 32, 0.0f);
      for (Isa isa : attnviz::supportedIsas()) {
        SCOPED_TRACE(std::string(attnviz::isaName(isa)) + " x kind " + std::to_string(kind));
        std::vector<float> y(kRows, -1.0f);
        attnviz::matVecAt(isa, tc.type, rows.data(), kRows, kValues, x.data(), y.data());
        for (std::int64_t r = 0; r < kRows; ++r) {
          double exact = 0, scale = 0;
          for (std::int64_t i = 0; i < kValues; ++i) {
            const double p = double(w[std::size_t(r * kValues + i)]) * x[std::size_t(i)];
            exact += p;
            scale += std::abs(p);
          }
          EXPECT_LT(std::abs(double(y[std::size_t(r)]) - exact), 1e-5 * scale) << "row " << r;
        }
      }
    }
  }
}

TEST(Isa, VersionNamesTheLevelAndAtnvizIsaForcesIt) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string best = attnviz::isaName(attnviz::supportedIsas().back());
  const auto plain = attnviz::testing::runBinary({"--version"}, dir, "env -u ATTNVIZ_ISA");
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  EXPECT_NE(plain.out.find("CPU kernels: " + best + "\n"), std::string::npos) << plain.out;
  const auto forced = attnviz::testing::runBinary({"--version"}, dir, "ATTNVIZ_ISA=baseline");
  ASSERT_EQ(forced.exitCode, 0) << forced.err;
  EXPECT_NE(forced.out.find("CPU kernels: baseline (ATTNVIZ_ISA=baseline; CPU: " + best + ")"),
            std::string::npos)
      << forced.out;
  const auto bad = attnviz::testing::runBinary({"--version"}, dir, "ATTNVIZ_ISA=sse9");
  ASSERT_EQ(bad.exitCode, 0) << bad.err;
  EXPECT_NE(bad.err.find("ATTNVIZ_ISA=sse9 is not baseline, avx2 or avx512; using " + best),
            std::string::npos)
      << bad.err;
  EXPECT_NE(bad.out.find("CPU kernels: " + best), std::string::npos) << bad.out;
}

}  // namespace
