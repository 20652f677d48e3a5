// Properties of the CPU engine that hold whatever the inputs: row sums, exact zeros, limits of the
// temperature, key permutation, shapes, fully masked rows, the caching rule, head selection.
#include "attnviz/engine/engine.h"
#include "attnviz/engine/engine_detail.h"
#include "attnviz/engine/mask.h"
#include "check.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <functional>
#include <random>

namespace attnviz {
namespace {

AttentionParams causalParams(float tau = 1.0f) {
  AttentionParams p;
  p.mask.causal = true;
  p.temperature = tau;
  return p;
}

// Small integers: every dot product (and its /sqrt(4) = /2) is exact in float, whatever order
// the GEMM sums in, so equal scores really are equal.
Tensor3 integerTensor(int H, int rows, int cols, std::uint32_t seed) {
  Tensor3 t(H, rows, cols);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-2, 2);
  for (float& x : t.data) x = float(d(gen));
  return t;
}

TEST(EngineProperties, UnmaskedRowsSumToOneWithinOneMillionth) {
  const Tensor3 q = ref::randomTensor(3, 64, 32, 1, 3.0f),
                k = ref::randomTensor(3, 257, 32, 2, 3.0f), v = ref::randomTensor(3, 257, 32, 3);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 100;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3& w = engine->result().weights;
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 64; ++i) {
      double s = 0;
      for (int j = 0; j < 257; ++j) s += w.at(h, i, j);
      EXPECT_NEAR(s, 1.0, 1e-6) << "row " << h << "," << i;
    }
}

TEST(EngineProperties, MaskedEntriesAreExactlyZero) {
  const Tensor3 q = ref::randomTensor(2, 20, 16, 4, 4.0f),
                k = ref::randomTensor(2, 30, 16, 5, 4.0f), v = ref::randomTensor(2, 30, 16, 6);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 6;
  p.mask.sink = 2;
  p.mask.pad = 3;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3& w = engine->result().weights;
  int masked = 0;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 20; ++i)
      for (int j = 0; j < 30; ++j)
        if (!ref::allowed(p.mask, h, i, j, 20, 30)) {
          ++masked;
          EXPECT_EQ(w.at(h, i, j), 0.0f) << h << "," << i << "," << j;
        }
  EXPECT_GT(masked, 0);
}

// The softmax's exp, on every instruction set the build may use: a masked key (-inf) and a gap
// whose exp underflows give exactly 0, a gap above that the float exp within an ulp or two of
// the double one (and within FLT_MIN of it everywhere). Eigen's SSE/AVX2 exp alone gives 2.9e-39
// for -inf, its AVX-512 exp a subnormal for -100: this is what a portable build (the .deb) and a
// -march=native one share.
TEST(EngineProperties, SoftmaxExpGivesExactZerosBelowTheSmallestNormalFloat) {
  const float inf = std::numeric_limits<float>::infinity();
  Eigen::ArrayXf gap(40);
  for (int i = 0; i < 20; ++i) gap[i] = -inf;  // a masked run, past a vector's width
  const float rest[20] = {-1e30f, -1000.0f, -103.0f, -100.0f, -88.5f, -88.0f, -87.34f, -87.3f,
                          -80.0f, -69.0f, -50.0f, -20.0f, -1.0f, -0.5f, -1e-3f, -1e-7f,
                          0.0f,   -2.0f,    -3.0f,   -4.0f};
  for (int i = 0; i < 20; ++i) gap[20 + i] = rest[i];
  const Eigen::ArrayXf e = attnviz::detail::expOfGap(gap);
  const double flmin = std::numeric_limits<float>::min();
  for (int i = 0; i < gap.size(); ++i) {
    SCOPED_TRACE("gap " + std::to_string(gap[i]));
    const double want = std::exp(double(gap[i]));
    if (gap[i] <= -88.0f) {
      EXPECT_EQ(e[i], 0.0f);
    } else if (gap[i] >= -69.0f) {  // exp above 2^-100: the float exp, untouched
      EXPECT_NEAR(e[i], want, 4e-7 * want);
    } else {
      EXPECT_GE(e[i], 0.0f);
      EXPECT_NEAR(e[i], want, 4e-7 * want + flmin);
    }
  }
  // The engine's own row: a masked key of a row whose other keys are finite.
  std::vector<float> z = {0.0f, -inf, -90.0f, -2.0f}, w(4), scratch(4);
  const attnviz::RowStats st = attnviz::detail::rowSoftmax(z.data(), scratch.data(), w.data(), 4, 1.0f);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(w[2], 0.0f);
  const double p0 = 1.0 / (1.0 + std::exp(-2.0)), p3 = 1.0 - p0;
  EXPECT_NEAR(w[0], p0, 1e-6);
  EXPECT_NEAR(w[3], p3, 1e-6);
  EXPECT_NEAR(st.entropy, -(p0 * std::log(p0) + p3 * std::log(p3)), 1e-5);  // masked keys add 0
}

TEST(EngineProperties, TemperatureNearZeroGivesOneHotAtTheArgmax) {
  const Tensor3 q = integerTensor(2, 9, 4, 7), k = integerTensor(2, 9, 4, 8),
                v = ref::randomTensor(2, 9, 3, 9);
  const AttentionParams p = causalParams(1e-3f);
  const ref::Result scores = ref::attention(q, k, v, causalParams(1.0f));
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3& w = engine->result().weights;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 9; ++i) {
      double best = -ref::kInf;
      for (int j = 0; j <= i; ++j) best = std::max(best, scores.l(h, i, j));
      int ties = 0;
      for (int j = 0; j <= i; ++j) ties += scores.l(h, i, j) == best;
      for (int j = 0; j < 9; ++j) {
        const double want = (j <= i && scores.l(h, i, j) == best) ? 1.0 / ties : 0.0;
        EXPECT_NEAR(w.at(h, i, j), want, 1e-6) << h << "," << i << "," << j << " ties " << ties;
      }
    }
}

TEST(EngineProperties, TemperatureNearZeroSplitsExactTiesEvenly) {
  // Keys 1, 3 and 4 are the same vector, the best match for the query: a three-way tie.
  Tensor3 q(1, 1, 4), k(1, 6, 4), v = ref::randomTensor(1, 6, 2, 10);
  const float qv[4] = {1, 2, 0, -1};
  const float best[4] = {1, 2, 0, -1}, other[4] = {1, 0, 0, 1};
  for (int c = 0; c < 4; ++c) q.at(0, 0, c) = qv[c];
  for (int j = 0; j < 6; ++j)
    for (int c = 0; c < 4; ++c) k.at(0, j, c) = (j == 1 || j == 3 || j == 4) ? best[c] : other[c];
  AttentionParams p;
  p.temperature = 1e-4f;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3& w = engine->result().weights;
  for (int j = 0; j < 6; ++j)
    EXPECT_NEAR(w.at(0, 0, j), (j == 1 || j == 3 || j == 4) ? 1.0 / 3.0 : 0.0, 1e-6) << j;
}

// tau = 1e-38 is finite and > 0, so it is valid; S / tau overflows float. The limit tau -> 0 is
// still a one-hot row at the argmax, never NaN.
TEST(EngineProperties, TinyTemperatureThatOverflowsFloatStillGivesOneHotRows) {
  const Tensor3 q = integerTensor(1, 5, 4, 70), k = integerTensor(1, 5, 4, 71),
                v = ref::randomTensor(1, 5, 3, 72);
  const ref::Result scores = ref::attention(q, k, v, causalParams(1.0f));
  auto engine = makeCpuEngine();
  engine->run(q, k, v, causalParams(1e-38f));
  const AttentionResult& r = engine->result();
  for (int i = 0; i < 5; ++i) {
    double best = -ref::kInf;
    for (int j = 0; j <= i; ++j) best = std::max(best, scores.l(0, i, j));
    int ties = 0;
    for (int j = 0; j <= i; ++j) ties += scores.l(0, i, j) == best;
    for (int j = 0; j < 5; ++j) {
      const double want = (j <= i && scores.l(0, i, j) == best) ? 1.0 / ties : 0.0;
      EXPECT_NEAR(r.weights.at(0, i, j), want, 1e-6) << i << "," << j;
    }
    for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isfinite(r.output.at(0, i, c))) << i << "," << c;
  }
}

TEST(EngineProperties, LargeTemperatureGivesUniformWeightsOverAllowedKeys) {
  const Tensor3 q = ref::randomTensor(2, 12, 16, 11), k = ref::randomTensor(2, 12, 16, 12),
                v = ref::randomTensor(2, 12, 16, 13);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 4;
  p.mask.sink = 1;
  p.temperature = 1e6f;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3& w = engine->result().weights;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 12; ++i) {
      int n = 0;
      for (int j = 0; j < 12; ++j) n += ref::allowed(p.mask, h, i, j, 12, 12);
      for (int j = 0; j < 12; ++j) {
        const double want = ref::allowed(p.mask, h, i, j, 12, 12) ? 1.0 / n : 0.0;
        EXPECT_NEAR(w.at(h, i, j), want, 1e-5) << h << "," << i << "," << j;
      }
    }
}

TEST(EngineProperties, PermutingKeysPermutesColumnsAndKeepsOutputs) {
  const int H = 2, Tq = 7, Tk = 13;
  const Tensor3 q = ref::randomTensor(H, Tq, 16, 14), k = ref::randomTensor(H, Tk, 16, 15),
                v = ref::randomTensor(H, Tk, 8, 16);
  std::vector<int> perm(Tk);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(17));
  Tensor3 k2(H, Tk, 16), v2(H, Tk, 8);  // row j of k2 is row perm[j] of k
  for (int h = 0; h < H; ++h)
    for (int j = 0; j < Tk; ++j) {
      for (int c = 0; c < 16; ++c) k2.at(h, j, c) = k.at(h, perm[j], c);
      for (int c = 0; c < 8; ++c) v2.at(h, j, c) = v.at(h, perm[j], c);
    }
  AttentionParams p;
  auto a = makeCpuEngine(), b = makeCpuEngine();
  a->run(q, k, v, p);
  b->run(q, k2, v2, p);
  const AttentionResult &ra = a->result(), &rb = b->result();
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < Tq; ++i) {
      for (int j = 0; j < Tk; ++j)
        EXPECT_NEAR(rb.weights.at(h, i, j), ra.weights.at(h, i, perm[j]), 1e-6);
      for (int c = 0; c < 8; ++c) EXPECT_NEAR(rb.output.at(h, i, c), ra.output.at(h, i, c), 1e-5);
    }
}

TEST(EngineProperties, ResultShapesAreQueriesByKeysPerHead) {
  const Tensor3 q = ref::randomTensor(5, 3, 8, 1), k = ref::randomTensor(5, 11, 8, 2),
                v = ref::randomTensor(5, 11, 6, 3);
  auto engine = makeCpuEngine();
  engine->run(q, k, v, AttentionParams{});
  const AttentionResult& r = engine->result();
  EXPECT_EQ(r.scaled.shapeString(), Tensor3(5, 3, 11).shapeString());
  EXPECT_TRUE(r.scaled.sameShape(Tensor3(5, 3, 11)));
  EXPECT_TRUE(r.weights.sameShape(Tensor3(5, 3, 11)));
  EXPECT_TRUE(r.output.sameShape(Tensor3(5, 3, 6)));
  EXPECT_EQ(r.rows.size(), 15u);
  const Dims d = engine->dims();
  EXPECT_EQ(d.H, 5);
  EXPECT_EQ(d.Tq, 3);
  EXPECT_EQ(d.Tk, 11);
  EXPECT_EQ(d.dk, 8);
  EXPECT_EQ(d.dv, 6);
}

TEST(EngineProperties, FullyMaskedRowIsZeroFlaggedAndHasZeroOutput) {
  const Tensor3 q = ref::randomTensor(2, 5, 8, 18), k = ref::randomTensor(2, 5, 8, 19),
                v = ref::randomTensor(2, 5, 8, 20);
  AttentionParams p;
  p.mask.customKind = MaskSpec::Custom::Allow;
  p.mask.custom = Tensor3(1, 5, 5, 1.0f);
  for (int j = 0; j < 5; ++j) p.mask.custom.at(0, 3, j) = 0.0f;  // query 3 may attend nothing
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& r = engine->result();
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 5; ++j) EXPECT_EQ(r.weights.at(h, 3, j), 0.0f);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(r.output.at(h, 3, c), 0.0f);
    EXPECT_TRUE(r.row(h, 3).fullyMasked);
    EXPECT_EQ(r.row(h, 3).sum, 0.0f);
    EXPECT_EQ(r.row(h, 3).argmax, -1);
    EXPECT_FALSE(std::isnan(r.row(h, 3).entropy));
    EXPECT_FALSE(r.row(h, 2).fullyMasked);
  }
  EXPECT_EQ(r.fullyMaskedRows(), 2);
}

TEST(EngineProperties, RowBlockedByNegativeInfinityBiasIsFullyMasked) {
  const Tensor3 q = ref::randomTensor(1, 4, 8, 21), k = ref::randomTensor(1, 6, 8, 22),
                v = ref::randomTensor(1, 6, 8, 23);
  AttentionParams p;
  p.mask.customKind = MaskSpec::Custom::Bias;
  p.mask.custom = Tensor3(1, 4, 6, 0.0f);
  for (int j = 0; j < 6; ++j) p.mask.custom.at(0, 1, j) = -std::numeric_limits<float>::infinity();
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& r = engine->result();
  for (int j = 0; j < 6; ++j) EXPECT_EQ(r.weights.at(0, 1, j), 0.0f);
  for (int c = 0; c < 8; ++c) EXPECT_EQ(r.output.at(0, 1, c), 0.0f);
  EXPECT_TRUE(r.row(0, 1).fullyMasked);
  EXPECT_EQ(r.fullyMaskedRows(), 1);
}

TEST(EngineProperties, PaddingEveryKeyMasksEveryRowWithoutNaN) {
  const Tensor3 q = ref::randomTensor(2, 3, 4, 24), k = ref::randomTensor(2, 3, 4, 25),
                v = ref::randomTensor(2, 3, 4, 26);
  AttentionParams p;
  p.mask.pad = 3;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& r = engine->result();
  EXPECT_EQ(r.fullyMaskedRows(), 6);
  for (float x : r.weights.data) EXPECT_EQ(x, 0.0f);
  for (float x : r.output.data) EXPECT_EQ(x, 0.0f);
}

TEST(EngineProperties, CausalWindowSmallerThanOffsetLeavesNoRowEmpty) {
  // Window 1 under causal: each query sees exactly itself, weight 1.
  const Tensor3 q = ref::randomTensor(1, 6, 4, 27), k = ref::randomTensor(1, 6, 4, 28),
                v = ref::randomTensor(1, 6, 4, 29);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 1;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& r = engine->result();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(r.weights.at(0, i, i), 1.0f);
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(r.output.at(0, i, c), v.at(0, i, c), 1e-6);
  }
}

// docs/design/conventions.md allows -inf in a float mask; +inf is not a bias. It must be refused as
// bad input or give finite weights, never NaN rows.
TEST(EngineProperties, PositiveInfinityInAFloatMaskIsRefusedOrHarmless) {
  const Tensor3 q = ref::randomTensor(1, 3, 4, 73), k = ref::randomTensor(1, 3, 4, 74),
                v = ref::randomTensor(1, 3, 4, 75);
  AttentionParams p;
  p.mask.customKind = MaskSpec::Custom::Bias;
  p.mask.custom = Tensor3(1, 3, 3, 0.0f);
  p.mask.custom.at(0, 1, 2) = std::numeric_limits<float>::infinity();
  auto engine = makeCpuEngine();
  try {
    engine->run(q, k, v, p);
  } catch (const InputError&) {
    return;  // refused: fine
  }
  for (float x : engine->result().weights.data) EXPECT_FALSE(std::isnan(x));
  for (float x : engine->result().output.data) EXPECT_FALSE(std::isnan(x));
}

// Finite inputs whose dot products overflow float32: the engine must report it (InputError) or
// still give finite rows; silently writing NaN weights is what the contract forbids.
TEST(EngineProperties, ScoresThatOverflowFloatAreReportedOrFinite) {
  Tensor3 q(1, 2, 4, 1e20f), k(1, 3, 4, 1e20f);
  const Tensor3 v = ref::randomTensor(1, 3, 4, 79);
  k.at(0, 1, 0) = -1e20f;
  auto engine = makeCpuEngine();
  try {
    engine->run(q, k, v, AttentionParams{});
  } catch (const InputError&) {
    return;
  }
  for (float x : engine->result().weights.data) EXPECT_FALSE(std::isnan(x));
  for (float x : engine->result().output.data) EXPECT_FALSE(std::isnan(x));
}

TEST(EngineProperties, HugeWindowBehavesLikeNoWindow) {
  const Tensor3 q = ref::randomTensor(2, 6, 8, 76), k = ref::randomTensor(2, 9, 8, 77),
                v = ref::randomTensor(2, 9, 8, 78);
  AttentionParams p = causalParams();
  p.mask.window = std::numeric_limits<int>::max();
  p.mask.prefix = std::numeric_limits<int>::max();
  testing::expectEngineMatchesReference(q, k, v, p);
}

TEST(EngineProperties, RowStatsMatchReference) {
  const Tensor3 q = ref::randomTensor(3, 16, 16, 30, 2.0f),
                k = ref::randomTensor(3, 20, 16, 31, 2.0f), v = ref::randomTensor(3, 20, 4, 32);
  AttentionParams p = causalParams(0.9f);
  p.mask.alibi = true;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& r = engine->result();
  const ref::Result want = ref::attention(q, k, v, p);
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 16; ++i) {
      const RowStats& s = r.row(h, i);
      const ref::Row& w = want.row(h, i);
      EXPECT_NEAR(s.sum, w.sum, 1e-6);
      EXPECT_NEAR(s.max, w.max, 1e-5);
      EXPECT_EQ(s.argmax, w.argmax);
      EXPECT_NEAR(s.entropy, w.entropy, 1e-4);
      EXPECT_FALSE(s.fullyMasked);
    }
}

// --- the caching rule ---------------------------------------------------------------------------

struct Fixture3 {
  Tensor3 q = ref::randomTensor(4, 10, 16, 40), k = ref::randomTensor(4, 14, 16, 41),
          v = ref::randomTensor(4, 14, 8, 42);
};

void expectSameResult(const AttentionResult& a, const AttentionResult& b, double tol) {
  ASSERT_TRUE(a.weights.sameShape(b.weights));
  for (std::size_t x = 0; x < a.weights.size(); ++x)
    ASSERT_NEAR(a.weights.data[x], b.weights.data[x], tol) << "weight index " << x;
  for (std::size_t x = 0; x < a.output.size(); ++x)
    ASSERT_NEAR(a.output.data[x], b.output.data[x], tol) << "output index " << x;
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (std::size_t x = 0; x < a.rows.size(); ++x) {
    EXPECT_EQ(a.rows[x].fullyMasked, b.rows[x].fullyMasked);
    EXPECT_EQ(a.rows[x].argmax, b.rows[x].argmax);
  }
}

TEST(CachingRule, ReSoftmaxAfterTemperatureChangeEqualsFreshRun) {
  Fixture3 in;
  auto cached = makeCpuEngine(), fresh = makeCpuEngine();
  cached->run(in.q, in.k, in.v, causalParams(1.0f));
  cached->softmax(causalParams(0.3f));
  cached->output();
  fresh->run(in.q, in.k, in.v, causalParams(0.3f));
  expectSameResult(cached->result(), fresh->result(), 1e-7);
}

TEST(CachingRule, ReSoftmaxAfterMaskAndAlibiChangeEqualsFreshRun) {
  Fixture3 in;
  AttentionParams changed;
  changed.mask.window = 3;
  changed.mask.sink = 1;
  changed.mask.alibi = true;
  changed.mask.customKind = MaskSpec::Custom::Bias;
  changed.mask.custom = ref::randomTensor(4, 10, 14, 43);
  auto cached = makeCpuEngine(), fresh = makeCpuEngine();
  cached->run(in.q, in.k, in.v, causalParams());
  cached->softmax(changed);
  cached->output();
  fresh->run(in.q, in.k, in.v, changed);
  expectSameResult(cached->result(), fresh->result(), 1e-7);
  testing::expectMatchesReference(cached->result(), ref::attention(in.q, in.k, in.v, changed));
}

TEST(CachingRule, ReSoftmaxLeavesTheScaledScoresUntouched) {
  Fixture3 in;
  auto engine = makeCpuEngine();
  engine->setInputs(in.q, in.k, in.v);
  const FloatBuffer before = engine->result(kStageScaled).scaled.data;
  AttentionParams p = causalParams(0.5f);
  p.mask.alibi = true;
  engine->softmax(p);
  EXPECT_EQ(engine->result(kStageScaled).scaled.data, before);
}

TEST(CachingRule, SetInputsThenSoftmaxThenOutputEqualsRun) {
  Fixture3 in;
  auto stepwise = makeCpuEngine(), whole = makeCpuEngine();
  stepwise->setInputs(in.q, in.k, in.v);
  stepwise->softmax(causalParams(0.8f));
  stepwise->output();
  whole->run(in.q, in.k, in.v, causalParams(0.8f));
  expectSameResult(stepwise->result(), whole->result(), 1e-7);
}

TEST(CachingRule, NewInputsReplaceTheCachedScores) {
  Fixture3 a, b;
  b.q = ref::randomTensor(4, 10, 16, 50);
  auto engine = makeCpuEngine();
  engine->run(a.q, a.k, a.v, causalParams());
  engine->run(b.q, b.k, b.v, causalParams());
  testing::expectMatchesReference(engine->result(), ref::attention(b.q, b.k, b.v, causalParams()));
}

TEST(CachingRule, SoftmaxOfOneHeadTouchesOnlyThatHead) {
  Fixture3 in;
  auto engine = makeCpuEngine();
  engine->run(in.q, in.k, in.v, causalParams(1.0f));
  const AttentionResult before = engine->result();
  AttentionParams p;
  p.temperature = 0.4f;
  p.mask.window = 2;
  engine->softmax(p, {2});
  engine->output({2});
  const AttentionResult& after = engine->result();
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  const std::size_t hw = after.weights.headStride(), ho = after.output.headStride();
  for (int h = 0; h < 4; ++h) {
    if (h == 2) continue;
    EXPECT_TRUE(
        std::equal(after.weights.head(h), after.weights.head(h) + hw, before.weights.head(h)))
        << "weights of head " << h << " changed";
    EXPECT_TRUE(std::equal(after.output.head(h), after.output.head(h) + ho, before.output.head(h)))
        << "output of head " << h << " changed";
    for (int i = 0; i < 10; ++i) EXPECT_EQ(after.row(h, i).sum, before.row(h, i).sum);
  }
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 14; ++j)
      EXPECT_TRUE(ref::close(after.weights.at(2, i, j), want.w(2, i, j))) << i << "," << j;
  for (int i = 0; i < 10; ++i)
    for (int c = 0; c < 8; ++c)
      EXPECT_TRUE(ref::close(after.output.at(2, i, c), want.o(2, i, c))) << i << "," << c;
}

// --- refusals -----------------------------------------------------------------------------------

void expectInputError(const std::function<void()>& f, const std::string& mention) {
  try {
    f();
    ADD_FAILURE() << "no InputError; expected one mentioning " << mention;
  } catch (const InputError& e) {
    std::string msg = e.what();
    std::string lower = msg, want = mention;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    std::transform(want.begin(), want.end(), want.begin(), ::tolower);
    EXPECT_NE(lower.find(want), std::string::npos) << "message: " << msg;
  }
}

TEST(EngineRefusals, NaNInQIsReportedNamingQ) {
  Fixture3 in;
  in.q.at(1, 2, 3) = std::numeric_limits<float>::quiet_NaN();
  auto engine = makeCpuEngine();
  expectInputError([&] { engine->setInputs(in.q, in.k, in.v); }, "Q");
}

TEST(EngineRefusals, InfinityInKIsReportedNamingK) {
  Fixture3 in;
  in.k.at(0, 0, 0) = std::numeric_limits<float>::infinity();
  auto engine = makeCpuEngine();
  expectInputError([&] { engine->setInputs(in.q, in.k, in.v); }, "K");
}

TEST(EngineRefusals, NaNInVIsReportedNamingV) {
  Fixture3 in;
  in.v.at(3, 13, 7) = std::numeric_limits<float>::quiet_NaN();
  auto engine = makeCpuEngine();
  expectInputError([&] { engine->setInputs(in.q, in.k, in.v); }, "V");
}

TEST(EngineRefusals, KeyWidthDifferentFromQueryWidthIsRefused) {
  Fixture3 in;
  in.k = ref::randomTensor(4, 14, 15, 1);
  EXPECT_THROW(validateInputs(in.q, in.k, in.v), InputError);
}

TEST(EngineRefusals, DifferentHeadCountsAreRefused) {
  Fixture3 in;
  in.k = ref::randomTensor(3, 14, 16, 1);
  in.v = ref::randomTensor(3, 14, 8, 2);
  EXPECT_THROW(validateInputs(in.q, in.k, in.v), InputError);
}

TEST(EngineRefusals, ValueRowsDifferentFromKeyRowsAreRefused) {
  Fixture3 in;
  in.v = ref::randomTensor(4, 13, 8, 1);
  EXPECT_THROW(validateInputs(in.q, in.k, in.v), InputError);
}

TEST(EngineRefusals, EmptyTensorsAreRefused) {
  EXPECT_THROW(validateInputs(Tensor3(), Tensor3(), Tensor3()), InputError);
}

TEST(EngineRefusals, ZeroOrNegativeOrNonFiniteTemperatureIsRefused) {
  for (float tau : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    AttentionParams p;
    p.temperature = tau;
    EXPECT_THROW(validateParams(p, 2, 3, 3), InputError) << "tau " << tau;
  }
}

TEST(EngineRefusals, CustomMaskOfWrongShapeIsRefused) {
  AttentionParams p;
  p.mask.customKind = MaskSpec::Custom::Allow;
  p.mask.custom = Tensor3(1, 3, 4, 1.0f);
  EXPECT_THROW(validateParams(p, 2, 3, 5), InputError);
  p.mask.custom = Tensor3(3, 3, 5, 1.0f);  // 3 heads for 2
  EXPECT_THROW(validateParams(p, 2, 3, 5), InputError);
  p.mask.custom = Tensor3(2, 3, 5, 1.0f);
  EXPECT_NO_THROW(validateParams(p, 2, 3, 5));
}

TEST(EngineRefusals, NegativeMaskParametersAreRefused) {
  AttentionParams p;
  p.mask.window = -1;
  EXPECT_THROW(validateParams(p, 1, 3, 3), InputError);
}

TEST(EngineDeterminism, SameInputsGiveBitIdenticalResults) {
  Fixture3 in;
  auto a = makeCpuEngine(), b = makeCpuEngine();
  a->run(in.q, in.k, in.v, causalParams(0.7f));
  b->run(in.q, in.k, in.v, causalParams(0.7f));
  EXPECT_EQ(a->result().weights.data, b->result().weights.data);
  EXPECT_EQ(a->result().output.data, b->result().output.data);
}

// Runs of other sizes in between move the engine's per-thread scratch buffers around the heap;
// the same inputs must still give the same bits (the GUI, exports and tests rely on it).
TEST(EngineDeterminism, ResultsDoNotDependOnEarlierRunsOfOtherSizes) {
  const Tensor3 q = ref::randomTensor(12, 8, 16, 1), k = ref::randomTensor(12, 29, 16, 2),
                v = ref::randomTensor(12, 29, 8, 3);
  const AttentionParams p = causalParams();
  auto first = makeCpuEngine();
  first->run(q, k, v, p);
  const AttentionResult want = first->result();
  int differing = 0;
  for (int n = 1; n <= 30; ++n) {
    const int Tk = 40 + 9 * n;
    makeCpuEngine()->run(ref::randomTensor(2, 2, 4, n), ref::randomTensor(2, Tk, 4, n),
                         ref::randomTensor(2, Tk, 4, n), p);
    auto e = makeCpuEngine();
    e->run(q, k, v, p);
    const AttentionResult& got = e->result();
    bool same = got.weights.data == want.weights.data && got.output.data == want.output.data;
    for (std::size_t x = 0; x < got.rows.size(); ++x)
      same = same && got.rows[x].entropy == want.rows[x].entropy &&
             got.rows[x].sum == want.rows[x].sum;
    differing += !same;
  }
  EXPECT_EQ(differing, 0) << "of 30 repeated runs on identical inputs";
}

TEST(EngineInfo, SoftmaxOrOutputBeforeAnyInputsDoesNotCrash) {
  auto engine = makeCpuEngine();
  try {
    engine->softmax(AttentionParams{});
    engine->output();
  } catch (const std::exception&) {
    // refusing is fine; crashing is not
  }
  EXPECT_TRUE(engine->result().weights.empty());
}

TEST(EngineInfo, HeadOutOfRangeIsRefused) {
  Fixture3 in;
  auto engine = makeCpuEngine();
  engine->setInputs(in.q, in.k, in.v);
  EXPECT_ANY_THROW(engine->softmax(AttentionParams{}, {4}));
  EXPECT_ANY_THROW(engine->softmax(AttentionParams{}, {-1}));
}

TEST(EngineInfo, AlibiSlopesForZeroHeadsAreEmpty) { EXPECT_TRUE(alibiSlopes(0).empty()); }

TEST(EngineInfo, CpuEngineNameMentionsCpuAndThreadCountIsPositive) {
  EXPECT_NE(makeCpuEngine()->name().find("CPU"), std::string::npos);
  EXPECT_GE(cpuThreads(), 1);
}

}  // namespace
}  // namespace attnviz
