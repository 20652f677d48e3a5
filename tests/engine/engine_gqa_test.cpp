// Grouped-query attention in the engine: runGrouped reads K and V heads shared by groups of query
// heads in place. Checked against the naive double loop with the group map (reference.h), and
// against the engine's own run() on K and V repeated per query head (the result must be the same
// bits: the same GEMMs on the same rows).
#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "check.h"
#include "reference.h"

#include <gtest/gtest.h>

namespace attnviz {
namespace {

// Repeats KV heads for their query heads, written here from the definition (query head h reads
// KV head h / group), not with the engine's repeatKvHeads.
Tensor3 repeatByHand(const Tensor3& kv, int group) {
  Tensor3 out(kv.heads * group, kv.rows, kv.cols);
  for (int h = 0; h < out.heads; ++h)
    for (int r = 0; r < kv.rows; ++r)
      for (int c = 0; c < kv.cols; ++c) out.at(h, r, c) = kv.at(h / group, r, c);
  return out;
}

struct Case {
  int H, KV, Tq, Tk, dk, dv;
};

void checkGrouped(const Case& c, const AttentionParams& p, std::uint32_t seed) {
  const int group = c.H / c.KV;
  const Tensor3 q = ref::randomTensor(c.H, c.Tq, c.dk, seed);
  const Tensor3 k = ref::randomTensor(c.KV, c.Tk, c.dk, seed + 1);
  const Tensor3 v = ref::randomTensor(c.KV, c.Tk, c.dv, seed + 2);
  auto engine = makeCpuEngine();
  engine->runGrouped(q, k, v, group, p);
  const AttentionResult& got = engine->result();
  {
    SCOPED_TRACE("grouped vs the naive double loop with the group map");
    testing::expectMatchesReference(got, ref::attention(q, k, v, p, {}, group));
  }
  auto repeated = makeCpuEngine();
  repeated->run(q, repeatByHand(k, group), repeatByHand(v, group), p);
  const AttentionResult& rep = repeated->result();
  EXPECT_TRUE(got.weights.data == rep.weights.data) << "weights differ from repeated K/V";
  EXPECT_TRUE(got.output.data == rep.output.data) << "output differs from repeated K/V";
  EXPECT_TRUE(got.scaled.data == rep.scaled.data) << "scores differ from repeated K/V";
}

AttentionParams causal(int window = 0, float tau = 1.0f) {
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = window;
  p.temperature = tau;
  return p;
}

TEST(EngineGrouped, GqaEightOverTwoMatchesReferenceAndRepeatedKv) {
  checkGrouped({8, 2, 33, 33, 16, 16}, causal(), 11);
}

TEST(EngineGrouped, MqaOneKvHeadMatches) { checkGrouped({6, 1, 17, 17, 8, 12}, causal(), 21); }

TEST(EngineGrouped, SmolLmShapeNineOverThreeWithWindowAndTemperature) {
  checkGrouped({9, 3, 129, 129, 64, 64}, causal(40, 0.7f), 31);
}

TEST(EngineGrouped, DecodeRowOverMoreKeysAndAlibi) {
  AttentionParams p = causal();
  p.mask.alibi = true;  // slopes per query head
  checkGrouped({4, 2, 1, 70, 16, 16}, p, 41);
}

TEST(EngineGrouped, GroupOfOneIsRun) { checkGrouped({3, 3, 9, 9, 4, 4}, causal(), 51); }

TEST(EngineGrouped, SoftmaxAgainAfterRunGroupedUsesCachedScores) {
  const Tensor3 q = ref::randomTensor(4, 12, 8, 61), k = ref::randomTensor(2, 12, 8, 62),
                v = ref::randomTensor(2, 12, 8, 63);
  auto engine = makeCpuEngine();
  engine->runGrouped(q, k, v, 2, causal());
  engine->softmax(causal(3, 2.0f));
  const ref::Result want = ref::attention(q, k, v, causal(3, 2.0f), {}, 2);
  const AttentionResult& got = engine->result();
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 12; ++j)
        EXPECT_NEAR(got.weights.at(h, i, j), want.w(h, i, j), 1e-5) << h << " " << i << " " << j;
  // V was not kept: output() needs new inputs.
  EXPECT_THROW(engine->output(), UsageError);
}

TEST(EngineGrouped, HeadsThatDoNotDivideAreRefused) {
  const Tensor3 q = ref::randomTensor(6, 5, 4, 1), k = ref::randomTensor(4, 5, 4, 2),
                v = ref::randomTensor(4, 5, 4, 3);
  auto engine = makeCpuEngine();
  EXPECT_THROW(engine->runGrouped(q, k, v, 4, causal()), InputError);  // 6 % 4
  EXPECT_THROW(engine->runGrouped(q, k, v, 2, causal()), InputError);  // 4 * 2 != 6
  EXPECT_THROW(engine->runGrouped(q, k, v, 0, causal()), InputError);
}

TEST(EngineGrouped, RepeatKvHeadsFollowsTheGroupMap) {
  const Tensor3 kv = ref::randomTensor(3, 5, 4, 71);
  const Tensor3 got = repeatKvHeads(kv, 3);
  EXPECT_TRUE(got.data == repeatByHand(kv, 3).data);
}

}  // namespace
}  // namespace attnviz
