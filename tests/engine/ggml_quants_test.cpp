// ggml tensor types: the type table, dequantization bit for bit against the fixtures that
// tools/gguf/quants.py wrote (types/<T>.gguf: quantized "weight" and "random_blocks" whose every
// bit matters), hand-made blocks, and dotRow against a double-precision dot of the expected
// values.
#include "attnviz/engine/ggml_kernels.h"
#include "attnviz/formats/gguf.h"  // the fixtures are GGUF files
#include "gguf_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

namespace attnviz {
namespace {

using namespace attnviz::testing;

const std::vector<std::string> kReadable = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                            "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};

std::uint32_t typeId(const std::string& name) {
  for (std::uint32_t t = 0; t < 64; ++t)
    if (ggmlTypeName(t) == name) return t;
  throw std::runtime_error("no type " + name);
}

std::vector<float> randomVector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(gen);
  return x;
}

TEST(GgmlTypes, NamesFollowGgmlIdsAndUnknownIdsSayTypeN) {
  EXPECT_EQ(ggmlTypeName(0), "F32");
  EXPECT_EQ(ggmlTypeName(2), "Q4_0");
  EXPECT_EQ(ggmlTypeName(12), "Q4_K");
  EXPECT_EQ(ggmlTypeName(16), "IQ2_XXS");
  EXPECT_EQ(ggmlTypeName(30), "BF16");
  EXPECT_EQ(ggmlTypeName(39), "MXFP4");
  EXPECT_EQ(ggmlTypeName(99), "type 99");
}

TEST(GgmlTypes, InfoGivesBlockLayoutOfReadableTypesOnly) {
  struct Row {
    const char* name;
    int values, bytes;
  };
  const Row rows[] = {{"F32", 1, 4},     {"F16", 1, 2},      {"BF16", 1, 2},     {"Q4_0", 32, 18},
                      {"Q4_1", 32, 20},  {"Q5_0", 32, 22},   {"Q5_1", 32, 24},   {"Q8_0", 32, 34},
                      {"Q2_K", 256, 84}, {"Q3_K", 256, 110}, {"Q4_K", 256, 144}, {"Q5_K", 256, 176},
                      {"Q6_K", 256, 210}};
  for (const Row& r : rows) {
    int v = 0, b = 0;
    ASSERT_TRUE(ggmlTypeInfo(typeId(r.name), v, b)) << r.name;
    EXPECT_EQ(v, r.values) << r.name;
    EXPECT_EQ(b, r.bytes) << r.name;
  }
  int v = 0, b = 0;
  EXPECT_FALSE(ggmlTypeInfo(9, v, b));   // Q8_1
  EXPECT_FALSE(ggmlTypeInfo(16, v, b));  // IQ2_XXS
  EXPECT_FALSE(ggmlTypeInfo(99, v, b));
  // ... though the layout of every type ggml defines is known (the reader checks byte spans).
  ASSERT_TRUE(ggmlTypeLayout(16, v, b));
  EXPECT_EQ(v, 256);
  EXPECT_EQ(b, 66);
  EXPECT_FALSE(ggmlTypeLayout(4, v, b));  // Q4_2, removed from ggml
  EXPECT_EQ(ggmlRowBytes(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(ggmlRowBytes(GgmlType::Q6_K, 512), 420u);
  EXPECT_EQ(ggmlRowBytes(GgmlType::F16, 7), 14u);
}

TEST(GgmlDequantize, HandMadeQ4_0BlockPutsLowNibblesFirst) {
  unsigned char blk[18] = {};
  blk[0] = 0x00, blk[1] = 0x38;  // half 0.5
  blk[2] = 0xF1;                 // element 0: 1, element 16: 15
  float y[32];
  dequantizeRow(GgmlType::Q4_0, blk, y, 32);
  EXPECT_EQ(y[0], -3.5f);  // (1 - 8) * 0.5
  EXPECT_EQ(y[16], 3.5f);  // (15 - 8) * 0.5
  EXPECT_EQ(y[1], -4.0f);  // (0 - 8) * 0.5
}

TEST(GgmlDequantize, HandMadeQ8_0BlockIsSigned) {
  unsigned char blk[34] = {};
  blk[0] = 0x00, blk[1] = 0x34;  // half 0.25
  blk[2 + 3] = 0x80;             // -128
  float y[32];
  dequantizeRow(GgmlType::Q8_0, blk, y, 32);
  EXPECT_EQ(y[3], -32.0f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(GgmlDequantize, RefusesPartialBlocksAndUnreadableTypes) {
  unsigned char blk[64] = {};
  float y[64];
  EXPECT_THROW(dequantizeRow(GgmlType::Q4_0, blk, y, 33), std::invalid_argument);
  EXPECT_THROW(dequantizeRow(GgmlType::Q8_1, blk, y, 32), std::invalid_argument);
  EXPECT_THROW(dotRow(GgmlType::Q4_K, blk, y, 32), std::invalid_argument);
  EXPECT_THROW(dotRow(GgmlType(16), blk, y, 256), std::invalid_argument);
}

// One type's fixture file: both tensors, dequantized as a whole and row by row.
class GgmlTypeFixture : public ::testing::TestWithParam<std::string> {
 protected:
  std::string file() const { return "types/" + GetParam() + ".gguf"; }
};

TEST_P(GgmlTypeFixture, DequantizedValuesEqualTheFixtureBitForBit) {
  const auto f = GgufFile::open(fixture(file()));
  const nlohmann::json& entry = manifestFile(file());
  ASSERT_EQ(f->tensors().size(), entry["tensors"].size());
  for (const nlohmann::json& e : entry["tensors"]) {
    const GgufTensor* t = f->findTensor(e["name"]);
    ASSERT_NE(t, nullptr) << e["name"];
    EXPECT_EQ(ggmlTypeName(t->type), GetParam());
    const std::vector<float> want = expectedValues(e["expected"]);
    const std::vector<float> got = f->dequantize(*t);
    EXPECT_EQ(firstBitDifference(got, want), -1)
        << GetParam() << " " << t->name << ": first differing value";
    // dequantizeRow on each row of the [rows, ne[0]] view gives the same values.
    std::vector<float> row(std::size_t(t->ne[0]));
    for (std::int64_t r = 0; r < t->rows(); ++r) {
      dequantizeRow(GgmlType(t->type), t->rowData(r), row.data(), t->ne[0]);
      const std::vector<float> wantRow(want.begin() + r * t->ne[0],
                                       want.begin() + (r + 1) * t->ne[0]);
      EXPECT_TRUE(sameBits(row, wantRow)) << t->name << " row " << r;
    }
  }
}

// The double-precision dot of n values and its magnitude sum |w_i x_i| (the tolerance's scale).
struct DoubleDot {
  double ref = 0.0, mag = 0.0;
};
DoubleDot doubleDot(const float* w, const float* x, std::int64_t n) {
  DoubleDot d;
  for (std::int64_t i = 0; i < n; ++i) {
    d.ref += double(w[i]) * double(x[i]);
    d.mag += std::fabs(double(w[i]) * double(x[i]));
  }
  return d;
}

// dotRow reads the stored blocks; it must agree with a double-precision dot of the expected
// values to float32 rounding: |got - ref| <= 1e-5 * sum |w_i x_i|.
TEST_P(GgmlTypeFixture, DotRowAgreesWithDoubleDotOfExpectedValues) {
  const auto f = GgufFile::open(fixture(file()));
  const nlohmann::json& entry = manifestFile(file());
  for (const nlohmann::json& e : entry["tensors"]) {
    const GgufTensor* t = f->findTensor(e["name"]);
    ASSERT_NE(t, nullptr);
    const std::vector<float> want = expectedValues(e["expected"]);
    const std::int64_t n = t->ne[0];
    const std::vector<float> x = randomVector(std::size_t(n), 7);
    for (std::int64_t r = 0; r < t->rows(); ++r) {
      const auto [ref, mag] = doubleDot(want.data() + r * n, x.data(), n);
      // The float types' random bit patterns reach 3e38: their float32 dot overflows, as any
      // float32 dot of them would.
      if (mag > 1e37) continue;
      const float got = dotRow(GgmlType(t->type), t->rowData(r), x.data(), n);
      EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-30) << t->name << " row " << r;
      // Prefixes of whole blocks: one block, and an odd number (the kernels unroll by two).
      int bv = 0, bb = 0;
      ASSERT_TRUE(ggmlTypeInfo(t->type, bv, bb));
      for (std::int64_t m : {std::int64_t(bv), std::int64_t(bv) * 3, std::int64_t(bv) * 7}) {
        if (m > n) continue;
        const auto [refM, magM] = doubleDot(want.data() + r * n, x.data(), m);
        EXPECT_NEAR(dotRow(GgmlType(t->type), t->rowData(r), x.data(), m), refM,
                    1e-5 * magM + 1e-30)
            << t->name << " row " << r << " first " << m << " values";
      }
    }
  }
}

// Both tensors of the file read as one row of every block they hold (32 legacy blocks, 4 K-quant
// super-blocks per 1024 values): each whole number of blocks from one to all of them, so the
// kernels' steps of 2 and 16 blocks end at every offset.
TEST_P(GgmlTypeFixture, DotRowOfEveryBlockCountAgreesWithDoubleDot) {
  const auto f = GgufFile::open(fixture(file()));
  const nlohmann::json& entry = manifestFile(file());
  for (const nlohmann::json& e : entry["tensors"]) {
    const GgufTensor* t = f->findTensor(e["name"]);
    ASSERT_NE(t, nullptr);
    const std::vector<float> want = expectedValues(e["expected"]);
    const std::int64_t n = t->count();
    int bv = 0, bb = 0;
    ASSERT_TRUE(ggmlTypeInfo(t->type, bv, bb));
    if (bv == 1) continue;  // the float types: FloatTypesHandleEveryLengthUpTo100
    const std::vector<float> x = randomVector(std::size_t(n), 13);
    for (std::int64_t m = bv; m <= n; m += bv) {
      const auto [ref, mag] = doubleDot(want.data(), x.data(), m);
      EXPECT_NEAR(dotRow(GgmlType(t->type), t->data, x.data(), m), ref, 1e-5 * mag + 1e-30)
          << t->name << " first " << m / bv << " blocks";
    }
  }
}

// matVec (decode's product) against the double-precision dot of the expected values, to float32
// rounding as dotRow. The K-quants' AVX-512 kernels take x in two 16-bit parts per group of 32
// values (its steps scaled to the group's largest |x|), so three x: normal; every group with one
// value 300 times the rest (the "massive activations" of trained models), where a single 16-bit
// part would be off by 1e-4 of the sum; the first group all zeros.
TEST_P(GgmlTypeFixture, MatVecAgreesWithDoubleDotOfEveryRow) {
  const auto f = GgufFile::open(fixture(file()));
  const nlohmann::json& entry = manifestFile(file());
  for (const nlohmann::json& e : entry["tensors"]) {
    const GgufTensor* t = f->findTensor(e["name"]);
    ASSERT_NE(t, nullptr);
    const std::vector<float> want = expectedValues(e["expected"]);
    const std::int64_t n = t->ne[0];
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> x = randomVector(std::size_t(n), 5 + unsigned(kind));
      if (kind == 1)
        for (std::int64_t i = 11; i < n; i += 32) x[std::size_t(i)] = 300.0f;
      if (kind == 2) std::fill(x.begin(), x.begin() + std::min<std::int64_t>(n, 32), 0.0f);
      std::vector<float> y(std::size_t(t->rows()), -1.0f);
      matVec(GgmlType(t->type), t->data, t->rows(), t->ne[0], x.data(), y.data());
      for (std::int64_t r = 0; r < t->rows(); ++r) {
        const float* w = want.data() + r * n;
        const auto [ref, mag] = doubleDot(w, x.data(), n);
        if (mag > 1e37) continue;  // the float types' random bit patterns (as above)
        EXPECT_NEAR(y[std::size_t(r)], ref, 1e-5 * mag + 1e-30)
            << t->name << " row " << r << " x kind " << kind;
      }
    }
  }
}

// A value of x that is not finite reaches y as the float kernels carry it (dotRow's result),
// whatever matVec's kernels.
TEST_P(GgmlTypeFixture, MatVecCarriesANonFiniteXAsDotRowDoes) {
  const auto f = GgufFile::open(fixture(file()));
  const GgufTensor* t = f->findTensor("weight");
  ASSERT_NE(t, nullptr);
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    std::vector<float> x = randomVector(std::size_t(t->ne[0]), 9);
    x[std::size_t(t->ne[0] / 2)] = bad;
    std::vector<float> y(std::size_t(t->rows()), -1.0f);
    matVec(GgmlType(t->type), t->data, t->rows(), t->ne[0], x.data(), y.data());
    for (std::int64_t r = 0; r < t->rows(); ++r) {
      const float d = dotRow(GgmlType(t->type), t->rowData(r), x.data(), t->ne[0]);
      EXPECT_EQ(std::isnan(y[std::size_t(r)]), std::isnan(d)) << t->name << " row " << r;
      if (!std::isnan(d)) EXPECT_EQ(y[std::size_t(r)], d) << t->name << " row " << r;
    }
  }
}

// The fast path (setFastActivations): at the AVX2 and AVX-512 levels, matVec on Q8_0, Q4_K,
// Q5_K and Q6_K rows takes x rounded to 8-bit integers, one scale per block of the weights (32
// values for Q8_0, 256 for the K-quants): d = the block's largest |x| / 127, q = x / d to nearest.
// The reference rounds x so, in double, here; the kernels must then agree with the double dot of
// the expected values and the rounded x to float32 rounding, and sit nearer it than the exact dot
// (so the rounding is really taken). Other types and the baseline level stay exact.
std::vector<float> roundedX(const std::vector<float>& x, int block) {
  std::vector<float> out(x.size());
  for (std::size_t b = 0; b < x.size(); b += std::size_t(block)) {
    double m = 0.0;
    for (int i = 0; i < block; ++i) m = std::max(m, std::fabs(double(x[b + std::size_t(i)])));
    const double d = double(float(m / 127.0));
    for (int i = 0; i < block; ++i) {
      const double q = m == 0.0 ? 0.0 : std::nearbyint(double(x[b + std::size_t(i)]) * 127.0 / m);
      out[b + std::size_t(i)] = float(d * q);  // exact: d has 24 bits, q 8
    }
  }
  return out;
}

TEST_P(GgmlTypeFixture, FastMatVecAgreesWithDoubleDotOfRoundedX) {
  const auto f = GgufFile::open(fixture(file()));
  const nlohmann::json& entry = manifestFile(file());
  const std::string type = GetParam();
  const bool fastType = type == "Q8_0" || type == "Q4_K" || type == "Q5_K" || type == "Q6_K";
  for (Isa isa : supportedIsas()) {
    const bool rounds = fastType && isa != Isa::Baseline;
    for (const nlohmann::json& e : entry["tensors"]) {
      const GgufTensor* t = f->findTensor(e["name"]);
      ASSERT_NE(t, nullptr);
      const std::vector<float> want = expectedValues(e["expected"]);
      const std::int64_t n = t->ne[0];
      int bv = 0, bb = 0;
      ASSERT_TRUE(ggmlTypeInfo(t->type, bv, bb));
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<float> x = randomVector(std::size_t(n), 21 + unsigned(kind));
        if (kind == 1)
          for (std::int64_t i = 11; i < n; i += 32) x[std::size_t(i)] = 300.0f;
        if (kind == 2) std::fill(x.begin(), x.begin() + std::min<std::int64_t>(n, 256), 0.0f);
        const std::vector<float> xr = rounds ? roundedX(x, bv) : x;
        std::vector<float> y(std::size_t(t->rows()), -1.0f);
        matVecAt(isa, GgmlType(t->type), t->data, t->rows(), n, x.data(), y.data(), true);
        double offRounded = 0.0, offExact = 0.0;
        for (std::int64_t r = 0; r < t->rows(); ++r) {
          const float* w = want.data() + r * n;
          const auto [ref, mag] = doubleDot(w, xr.data(), n);
          if (mag > 1e37) continue;  // the float types' random bit patterns (as above)
          EXPECT_NEAR(y[std::size_t(r)], ref, 1e-5 * mag + 1e-30)
              << t->name << " row " << r << " x kind " << kind << " at " << isaName(isa);
          offRounded += std::fabs(y[std::size_t(r)] - ref);
          offExact += std::fabs(y[std::size_t(r)] - doubleDot(w, x.data(), n).ref);
        }
        if (rounds) {
          EXPECT_LT(offRounded, offExact) << t->name << " x kind " << kind;
        }
      }
      // The tensor read as one row of each whole number of blocks (the AVX-512 Q8_0 kernel takes
      // two blocks a step: odd counts end on its one-block tail).
      const std::int64_t all = t->count();
      const std::vector<float> x = randomVector(std::size_t(all), 31);
      const std::vector<float> xr = rounds ? roundedX(x, bv) : x;
      for (std::int64_t m = bv; m <= all && m <= 64 * bv; m += bv) {
        const auto [ref, mag] = doubleDot(want.data(), xr.data(), m);
        if (mag > 1e37) continue;
        float y = 0.0f;
        matVecAt(isa, GgmlType(t->type), t->data, 1, m, x.data(), &y, true);
        EXPECT_NEAR(y, ref, 1e-5 * mag + 1e-30)
            << t->name << " first " << m / bv << " blocks at " << isaName(isa);
      }
    }
  }
}

// The fast path in a pass's products (matMulFast): at the AVX2 and AVX-512 levels, with and
// without VNNI,
// Q4_K, Q5_K and Q6_K rows against many rows of x, each rounded to 8 bits per 256 values as
// decode's fast path rounds x. A matrix of 37 rows (two groups of 16 and a tail) of 3 blocks,
// each block one of the fixture's (its expected values from tools/gguf/quants.py), against 13 rows
// of x (a tile of 8 and a tail): random, massive values, a zero block, all zeros. Each result
// must agree with the double dot of the expected values and the test's own rounding of x to
// float32 rounding; Y's other columns untouched; other types and levels, and an x that is not
// finite, refused with Y untouched.
TEST(GgmlFastPass, MatMulFastAgreesWithDoubleDotsOfRoundedX) {
  constexpr std::int64_t kRows = 37, kBlocks = 3, kX = 13, kLdy = 40;
  for (const std::string type : {"Q4_K", "Q5_K", "Q6_K", "Q8_0", "F16"}) {
    const auto f = GgufFile::open(fixture("types/" + type + ".gguf"));
    const GgufTensor* t = f->findTensor("weight");
    ASSERT_NE(t, nullptr);
    int bv = 0, bb = 0;
    ASSERT_TRUE(ggmlTypeInfo(t->type, bv, bb));
    const std::vector<float> want =
        expectedValues(manifestFile("types/" + type + ".gguf")["tensors"][0]["expected"]);
    ASSERT_EQ(std::int64_t(want.size()), t->count());
    const std::int64_t have = t->count() / bv;  // blocks in the fixture
    const std::int64_t n = kBlocks * 256;
    const std::int64_t blocksPerRow = n / bv;
    std::vector<unsigned char> rows(std::size_t(kRows * blocksPerRow * bb));
    std::vector<float> w(std::size_t(kRows * n));
    const auto* src = static_cast<const unsigned char*>(t->data);
    for (std::int64_t r = 0; r < kRows; ++r)
      for (std::int64_t i = 0; i < blocksPerRow; ++i) {
        const std::int64_t k = (r * 7 + i * 3) % have;
        std::memcpy(rows.data() + (r * blocksPerRow + i) * bb, src + k * bb, std::size_t(bb));
        std::copy_n(want.begin() + k * bv, bv, w.begin() + r * n + i * bv);
      }
    std::vector<float> X(std::size_t(kX * n));
    for (std::int64_t m = 0; m < kX; ++m) {
      const std::vector<float> v = randomVector(std::size_t(n), 40 + unsigned(m));
      std::copy(v.begin(), v.end(), X.begin() + m * n);
    }
    for (std::int64_t i = 11; i < n; i += 64) X[std::size_t(n + i)] = 300.0f;  // massive values
    std::fill_n(X.begin() + 2 * n + 256, 256, 0.0f);                           // a zero block
    std::fill_n(X.begin() + 3 * n, n, 0.0f);                                   // all zeros
    std::vector<float> Xr(X.size());
    for (std::int64_t m = 0; m < kX; ++m) {
      const std::vector<float> v(X.begin() + m * n, X.begin() + (m + 1) * n);
      const std::vector<float> r = roundedX(v, 256);
      std::copy(r.begin(), r.end(), Xr.begin() + m * n);
    }
    const bool kType = type == "Q4_K" || type == "Q5_K" || type == "Q6_K";
    for (Isa isa : supportedIsas()) {
      for (bool vnni : {false, true}) {
        std::vector<float> Y(std::size_t(kX * kLdy), -7.0f);
        const bool ran = matMulFastAt(isa, vnni, GgmlType(t->type), rows.data(), kRows, n, X.data(),
                                      n, kX, Y.data(), kLdy);
        const std::string where = type + " at " + isaName(isa) + (vnni ? " (VNNI)" : "");
        ASSERT_EQ(ran, kType && isa != Isa::Baseline) << where;
        if (!ran) {
          EXPECT_TRUE(std::all_of(Y.begin(), Y.end(), [](float v) { return v == -7.0f; })) << where;
          continue;
        }
        for (std::int64_t m = 0; m < kX; ++m) {
          for (std::int64_t r = 0; r < kRows; ++r) {
            const auto [ref, mag] = doubleDot(w.data() + r * n, Xr.data() + m * n, n);
            EXPECT_NEAR(Y[std::size_t(m * kLdy + r)], ref, 1e-5 * mag + 1e-30)
                << where << " x row " << m << " row " << r;
          }
          for (std::int64_t r = kRows; r < kLdy; ++r)
            EXPECT_EQ(Y[std::size_t(m * kLdy + r)], -7.0f) << where << " column " << r;
        }
        // An x with a NaN: refused, Y untouched (the caller takes the exact products).
        std::vector<float> Xn = X;
        Xn[std::size_t(5 * n + 300)] = std::nanf("");
        std::vector<float> Yn(std::size_t(kX * kLdy), -7.0f);
        EXPECT_FALSE(matMulFastAt(isa, vnni, GgmlType(t->type), rows.data(), kRows, n, Xn.data(), n,
                                  kX, Yn.data(), kLdy))
            << where;
        EXPECT_TRUE(std::all_of(Yn.begin(), Yn.end(), [](float v) { return v == -7.0f; })) << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryReadableType, GgmlTypeFixture, ::testing::ValuesIn(kReadable),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The float types have blocks of one value: every length works, the kernels' tails included.
TEST(GgmlDotRow, FloatTypesHandleEveryLengthUpTo100) {
  for (const char* name : {"F32", "F16", "BF16"}) {
    const auto f = GgufFile::open(fixture(std::string("types/") + name + ".gguf"));
    const GgufTensor* t = f->findTensor("weight");
    ASSERT_NE(t, nullptr);
    const std::vector<float> want = expectedValues(std::string("types/") + name + ".weight.npy");
    const std::vector<float> x = randomVector(512, 3);
    for (std::int64_t n = 0; n <= 100; ++n) {
      double ref = 0.0, mag = 0.0;
      for (std::int64_t i = 0; i < n; ++i) {
        ref += double(want[i]) * double(x[i]);
        mag += std::fabs(double(want[i]) * double(x[i]));
      }
      EXPECT_NEAR(dotRow(GgmlType(t->type), t->data, x.data(), n), ref, 1e-5 * mag + 1e-30)
          << name << " n " << n;
    }
  }
}

// A row that does not start on an aligned address (general.alignment may be 1) reads the same.
TEST(GgmlDotRow, UnalignedRowsReadTheSame) {
  for (const std::string& name : kReadable) {
    const auto f = GgufFile::open(fixture("types/" + name + ".gguf"));
    const GgufTensor* t = f->findTensor("weight");
    ASSERT_NE(t, nullptr);
    const std::size_t bytes = t->rowBytes();
    std::vector<unsigned char> shifted(bytes + 1);
    std::memcpy(shifted.data() + 1, t->data, bytes);
    const std::vector<float> x = randomVector(std::size_t(t->ne[0]), 11);
    const float a = dotRow(GgmlType(t->type), t->data, x.data(), t->ne[0]);
    const float b = dotRow(GgmlType(t->type), shifted.data() + 1, x.data(), t->ne[0]);
    EXPECT_EQ(a, b) << name;
    std::vector<float> ya(std::size_t(t->ne[0])), yb(std::size_t(t->ne[0]));
    dequantizeRow(GgmlType(t->type), t->data, ya.data(), t->ne[0]);
    dequantizeRow(GgmlType(t->type), shifted.data() + 1, yb.data(), t->ne[0]);
    EXPECT_TRUE(sameBits(ya, yb)) << name;
  }
}

}  // namespace
}  // namespace attnviz
