// The CPU engine against the naive double reference: every mode and mask kind, alone and combined.
#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "check.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace attnviz {
namespace {

using testing::expectEngineMatchesReference;

struct Inputs {
  Tensor3 q, k, v;
};

Inputs make(int H, int Tq, int Tk, int dk, int dv, std::uint32_t seed = 7) {
  return {ref::randomTensor(H, Tq, dk, seed), ref::randomTensor(H, Tk, dk, seed + 1),
          ref::randomTensor(H, Tk, dv, seed + 2)};
}

void check(const Inputs& in, const AttentionParams& p) {
  expectEngineMatchesReference(in.q, in.k, in.v, p);
}

AttentionParams params(MaskSpec m = {}, float tau = 1.0f) {
  AttentionParams p;
  p.mask = std::move(m);
  p.temperature = tau;
  return p;
}

TEST(EngineVsReference, SelfAttentionWithoutMaskMatches) {
  check(make(4, 17, 17, 32, 32), params());
}

TEST(EngineVsReference, CausalSelfAttentionMatches) {
  MaskSpec m;
  m.causal = true;
  check(make(3, 33, 33, 64, 64), params(m));
}

TEST(EngineVsReference, CrossAttentionWithMoreKeysThanQueriesMatches) {
  check(make(2, 7, 129, 16, 24), params());
}

TEST(EngineVsReference, CrossAttentionWithMoreQueriesThanKeysMatches) {
  check(make(2, 40, 9, 16, 8), params());
}

TEST(EngineVsReference, CausalCrossAttentionUsesBottomRightAlignment) {
  MaskSpec m;
  m.causal = true;
  const Inputs in = make(2, 3, 7, 8, 8);
  check(in, params(m));
  // Query 0 sits at position 0 + (7 - 3) = 4: keys 0..4 allowed, 5 and 6 masked.
  auto engine = makeCpuEngine();
  engine->run(in.q, in.k, in.v, params(m));
  const AttentionResult& r = engine->result();
  for (int j = 0; j <= 4; ++j) EXPECT_GT(r.weights.at(0, 0, j), 0.0f) << "key " << j;
  EXPECT_EQ(r.weights.at(0, 0, 5), 0.0f);
  EXPECT_EQ(r.weights.at(0, 0, 6), 0.0f);
}

TEST(EngineVsReference, DecodeSingleQuerySeesTheWholeCacheUnderCausal) {
  MaskSpec m;
  m.causal = true;
  const Inputs in = make(4, 1, 50, 32, 32);
  check(in, params(m));
  auto engine = makeCpuEngine();
  engine->run(in.q, in.k, in.v, params(m));
  for (int h = 0; h < 4; ++h)
    for (int j = 0; j < 50; ++j) EXPECT_GT(engine->result().weights.at(h, 0, j), 0.0f);
}

TEST(EngineVsReference, OddSizesWithDifferentKeyAndValueWidthsMatch) {
  MaskSpec m;
  m.causal = true;
  check(make(3, 33, 129, 7, 13), params(m));
}

TEST(EngineVsReference, LongKeySequenceMatches) {
  MaskSpec m;
  m.causal = true;
  check(make(2, 5, 1000, 64, 64), params(m));
}

TEST(EngineVsReference, SlidingWindowAloneMatches) {
  MaskSpec m;
  m.window = 4;
  check(make(2, 20, 20, 16, 16), params(m));
}

TEST(EngineVsReference, SlidingWindowWithCausalMatches) {
  MaskSpec m;
  m.causal = true;
  m.window = 5;
  check(make(2, 21, 21, 16, 16), params(m));
}

TEST(EngineVsReference, SlidingWindowInCrossAttentionMatches) {
  MaskSpec m;
  m.causal = true;
  m.window = 3;
  check(make(2, 6, 15, 16, 16), params(m));
}

TEST(EngineVsReference, PrefixAloneMatches) {
  MaskSpec m;
  m.prefix = 3;
  check(make(2, 12, 12, 16, 16), params(m));
}

TEST(EngineVsReference, PrefixWithCausalMatches) {
  MaskSpec m;
  m.causal = true;
  m.prefix = 4;
  check(make(2, 12, 12, 16, 16), params(m));
}

TEST(EngineVsReference, SinkWithSlidingWindowMatches) {
  MaskSpec m;
  m.causal = true;
  m.window = 3;
  m.sink = 2;
  check(make(2, 16, 16, 16, 16), params(m));
}

TEST(EngineVsReference, SinkAloneMatches) {
  MaskSpec m;
  m.sink = 2;
  check(make(2, 9, 9, 16, 16), params(m));
}

TEST(EngineVsReference, KeyPaddingAloneMatches) {
  MaskSpec m;
  m.pad = 3;
  check(make(2, 10, 10, 16, 16), params(m));
}

TEST(EngineVsReference, KeyPaddingWithCausalMatches) {
  MaskSpec m;
  m.causal = true;
  m.pad = 2;
  check(make(2, 10, 10, 16, 16), params(m));
}

TEST(EngineVsReference, PaddingOverridesPrefixAndSink) {
  MaskSpec m;
  m.prefix = 5;
  m.sink = 5;
  m.pad = 6;  // keys 4..9 are padding, so the prefix's keys 4 and sink's key 4 are blocked
  check(make(1, 10, 10, 8, 8), params(m));
}

TEST(EngineVsReference, EveryBuiltInMaskCombinedMatches) {
  MaskSpec m;
  m.causal = true;
  m.window = 4;
  m.prefix = 2;
  m.sink = 1;
  m.pad = 2;
  m.alibi = true;
  check(make(4, 13, 17, 16, 16), params(m, 0.7f));
}

Tensor3 randomBoolMask(int H, int Tq, int Tk, std::uint32_t seed) {
  Tensor3 t(H, Tq, Tk);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(0, 3);
  for (float& x : t.data) x = d(gen) == 0 ? 0.0f : float(d(gen) + 1);  // nonzero values vary
  return t;
}

TEST(EngineVsReference, SharedCustomBoolMaskMatches) {
  MaskSpec m;
  m.customKind = MaskSpec::Custom::Allow;
  m.custom = randomBoolMask(1, 11, 13, 3);
  check(make(3, 11, 13, 16, 16), params(m));
}

TEST(EngineVsReference, PerHeadCustomBoolMaskMatches) {
  MaskSpec m;
  m.customKind = MaskSpec::Custom::Allow;
  m.custom = randomBoolMask(3, 11, 13, 4);
  check(make(3, 11, 13, 16, 16), params(m));
}

TEST(EngineVsReference, CustomBoolMaskCombinesWithCausalAndPrefix) {
  MaskSpec m;
  m.causal = true;
  m.prefix = 3;
  m.customKind = MaskSpec::Custom::Allow;
  m.custom = randomBoolMask(1, 12, 12, 5);
  check(make(2, 12, 12, 16, 16), params(m));
}

TEST(EngineVsReference, SharedFloatBiasMaskMatches) {
  MaskSpec m;
  m.customKind = MaskSpec::Custom::Bias;
  m.custom = ref::randomTensor(1, 9, 14, 11, 2.0f);
  check(make(3, 9, 14, 16, 16), params(m));
}

TEST(EngineVsReference, PerHeadFloatBiasMaskWithNegativeInfinityMatches) {
  MaskSpec m;
  m.customKind = MaskSpec::Custom::Bias;
  m.custom = ref::randomTensor(3, 9, 14, 12, 2.0f);
  const float ninf = -std::numeric_limits<float>::infinity();
  m.custom.at(0, 2, 5) = ninf;
  m.custom.at(1, 0, 0) = ninf;
  for (int j = 0; j < 10; ++j) m.custom.at(2, 8, j) = ninf;
  check(make(3, 9, 14, 16, 16), params(m));
}

TEST(EngineVsReference, FloatBiasWithCausalAndAlibiAddsUp) {
  MaskSpec m;
  m.causal = true;
  m.alibi = true;
  m.customKind = MaskSpec::Custom::Bias;
  m.custom = ref::randomTensor(1, 10, 10, 13, 1.0f);
  check(make(4, 10, 10, 16, 16), params(m, 1.3f));
}

TEST(EngineVsReference, AlibiWithEightHeadsMatches) {
  MaskSpec m;
  m.causal = true;
  m.alibi = true;
  check(make(8, 19, 19, 16, 16), params(m));
}

TEST(EngineVsReference, AlibiWithTwelveHeadsMatches) {
  MaskSpec m;
  m.causal = true;
  m.alibi = true;
  check(make(12, 19, 19, 16, 16), params(m));
}

TEST(EngineVsReference, AlibiWithoutCausalPenalisesBothDirections) {
  MaskSpec m;
  m.alibi = true;
  check(make(6, 11, 11, 16, 16), params(m));
}

TEST(EngineVsReference, AlibiInCrossAttentionUsesQueryPositions) {
  MaskSpec m;
  m.alibi = true;
  check(make(5, 4, 12, 16, 16), params(m));
}

TEST(EngineVsReference, LowTemperatureMatches) {
  MaskSpec m;
  m.causal = true;
  check(make(2, 15, 15, 16, 16), params(m, 0.25f));
}

TEST(EngineVsReference, HighTemperatureMatches) {
  check(make(2, 15, 15, 16, 16), params({}, 4.0f));
}

// A seeded sweep of random configurations: sizes (odd ones included), every mask kind on or off,
// custom bool or bias masks shared or per head, ALiBi, temperatures from 0.1 to 10.
TEST(EngineVsReference, TwoHundredRandomConfigurationsMatch) {
  std::mt19937 gen(2026);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int n = 0; n < 200; ++n) {
    const int H = pick(1, 6), Tq = pick(1, 40), Tk = pick(1, 70), dk = pick(1, 33),
              dv = pick(1, 17);
    MaskSpec m;
    m.causal = pick(0, 1);
    m.window = pick(0, 2) ? 0 : pick(1, 8);
    m.prefix = pick(0, 3) ? 0 : pick(1, 5);
    m.sink = pick(0, 3) ? 0 : pick(1, 3);
    m.pad = pick(0, 3) ? 0 : pick(1, Tk);
    m.alibi = pick(0, 2) == 0;
    const int custom = pick(0, 4);
    if (custom == 1 || custom == 2) {
      m.customKind = MaskSpec::Custom::Allow;
      m.custom = randomBoolMask(custom == 1 ? 1 : H, Tq, Tk, gen());
    } else if (custom == 3) {
      m.customKind = MaskSpec::Custom::Bias;
      m.custom = ref::randomTensor(pick(0, 1) ? 1 : H, Tq, Tk, gen(), 1.5f);
      if (pick(0, 1))
        m.custom.data[gen() % m.custom.size()] = -std::numeric_limits<float>::infinity();
    }
    const float tau = std::pow(10.0f, std::uniform_real_distribution<float>(-1.0f, 1.0f)(gen));
    SCOPED_TRACE(::testing::Message() << "config " << n << ": H " << H << " Tq " << Tq << " Tk "
                                      << Tk << " dk " << dk << " dv " << dv << " "
                                      << describeMask(m) << " custom " << custom << " tau " << tau);
    check(make(H, Tq, Tk, dk, dv, 100 + n), params(m, tau));
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(AlibiSlopes, PowerOfTwoHeadsFollowThePaper) {
  for (int H : {1, 2, 4, 8, 16, 32}) {
    const std::vector<float> got = alibiSlopes(H);
    ASSERT_EQ(int(got.size()), H);
    for (int h = 0; h < H; ++h)
      EXPECT_NEAR(got[h], std::pow(2.0, -8.0 * (h + 1) / H), 1e-7) << "H " << H << " h " << h;
  }
}

TEST(AlibiSlopes, EightHeadsAreHalvings) {
  const std::vector<float> got = alibiSlopes(8);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(got[h], 1.0f / float(2 << h));
}

TEST(AlibiSlopes, OtherHeadCountsInterleaveAsInThePaper) {
  for (int H : {3, 5, 6, 7, 12, 20, 24}) {
    const std::vector<float> got = alibiSlopes(H);
    const std::vector<double> want = ref::alibiSlopes(H);
    ASSERT_EQ(got.size(), want.size()) << "H " << H;
    for (int h = 0; h < H; ++h) EXPECT_NEAR(got[h], want[h], 1e-7) << "H " << H << " h " << h;
  }
}

TEST(AlibiSlopes, TwelveHeadsAreEightSlopesThenOddSixteenSlopes) {
  // The paper's recipe for 12: 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  const std::vector<float> got = alibiSlopes(12);
  ASSERT_EQ(got.size(), 12u);
  for (int h = 0; h < 8; ++h) EXPECT_NEAR(got[h], std::pow(2.0, -(h + 1)), 1e-7);
  for (int h = 0; h < 4; ++h) EXPECT_NEAR(got[8 + h], std::pow(2.0, -(0.5 + h)), 1e-7);
}

TEST(MaskRule, MaskAllowedAgreesWithTheReferenceRuleForEveryCombination) {
  const int Tq = 6, Tk = 9;
  Tensor3 custom = randomBoolMask(1, Tq, Tk, 21);
  int mismatches = 0;
  for (int bits = 0; bits < 64; ++bits) {
    MaskSpec m;
    m.causal = bits & 1;
    m.window = (bits & 2) ? 3 : 0;
    m.prefix = (bits & 4) ? 2 : 0;
    m.sink = (bits & 8) ? 1 : 0;
    m.pad = (bits & 16) ? 2 : 0;
    if (bits & 32) {
      m.customKind = MaskSpec::Custom::Allow;
      m.custom = custom;
    }
    for (int i = 0; i < Tq; ++i)
      for (int j = 0; j < Tk; ++j)
        if (maskAllowed(m, 0, i, j, Tq, Tk) != ref::allowed(m, 0, i, j, Tq, Tk) &&
            ++mismatches < 10)
          ADD_FAILURE() << describeMask(m) << " (" << i << "," << j << ")";
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(MaskRule, MaskBiasAgreesWithAlibiAndFloatMask) {
  MaskSpec m;
  m.alibi = true;
  m.customKind = MaskSpec::Custom::Bias;
  m.custom = ref::randomTensor(6, 4, 7, 31);
  const std::vector<float> slopes = alibiSlopes(6);
  const std::vector<double> rs = ref::alibiSlopes(6);
  for (int h = 0; h < 6; ++h)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 7; ++j)
        EXPECT_NEAR(maskBias(m, slopes, h, i, j, 4, 7), ref::bias(m, rs, h, i, j, 4, 7), 1e-5);
}

TEST(Logits, ComputeLogitsIsNegativeInfinityExactlyWhereMasked) {
  MaskSpec m;
  m.causal = true;
  m.window = 3;
  m.sink = 1;
  m.pad = 1;
  m.alibi = true;
  const Inputs in = make(4, 8, 11, 16, 16);
  const AttentionParams p = params(m, 0.8f);
  auto engine = makeCpuEngine();
  engine->setInputs(in.q, in.k, in.v);
  const Tensor3 logits = computeLogits(engine->result(kStageScaled).scaled, p);
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  ASSERT_EQ(logits.heads, 4);
  ASSERT_EQ(logits.rows, 8);
  ASSERT_EQ(logits.cols, 11);
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 11; ++j) {
        const float l = logits.at(h, i, j);
        const double w = want.l(h, i, j);
        if (std::isinf(w)) {
          EXPECT_TRUE(std::isinf(l) && l < 0) << h << "," << i << "," << j << " = " << l;
        } else {
          EXPECT_TRUE(std::isfinite(l)) << h << "," << i << "," << j;
          EXPECT_TRUE(ref::close(l, w)) << h << "," << i << "," << j << ": " << l << " vs " << w;
        }
      }
}

TEST(Logits, LogitAtAgreesWithReferenceForOneCell) {
  MaskSpec m;
  m.causal = true;
  m.alibi = true;
  const Inputs in = make(3, 5, 5, 8, 8);
  const AttentionParams p = params(m, 2.0f);
  auto engine = makeCpuEngine();
  engine->setInputs(in.q, in.k, in.v);
  const Tensor3& scaled = engine->result(kStageScaled).scaled;
  const std::vector<float> slopes = alibiSlopes(3);
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) {
        const float l = logitAt(scaled, p, slopes, h, i, j);
        EXPECT_TRUE(ref::close(l, want.l(h, i, j))) << h << "," << i << "," << j;
      }
}

}  // namespace
}  // namespace attnviz
