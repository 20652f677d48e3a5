// A pass's progress and cancellation (model.h, PassProgress): under a Scope every layer a pass
// computes on that thread is counted once, in order; a cancelled pass throws PassCancelled at its
// next layer and leaves what it was writing as it was; passes outside the Scope (no Scope, or
// another thread) are neither counted nor stopped. The GUI's workers rely on all of it.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <thread>

namespace attnviz::testing {
namespace {

fs::path llamaFixture() { return fixture("llama") / "llama_gqa"; }

std::vector<int> idsOf(const fs::path& dir) {
  return nlohmann::json::parse(slurp((dir / "cases.json").string()))["ids"].get<std::vector<int>>();
}

TEST(PassProgress, EveryLayerIsCountedInOrderAndThePassIsUnchanged) {
  const auto model = Model::open(llamaFixture().string());
  const int L = model->config().nLayer;
  ASSERT_GE(L, 2);
  const std::vector<int> ids = idsOf(llamaFixture());
  Interventions iv;
  iv.ablate(1, 0, model->config());
  const ForwardResult plain = model->forward(ids, iv);

  PassProgress p;
  std::vector<int> seen;
  p.onLayer = [&](int l) { seen.push_back(l); };
  ForwardResult r;
  {
    PassProgress::Scope scope(&p);
    EXPECT_EQ(PassProgress::current(), &p);
    r = model->forward(ids, iv);
  }
  EXPECT_EQ(PassProgress::current(), nullptr);
  EXPECT_EQ(p.layersDone.load(), L);
  std::vector<int> want(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) want[std::size_t(l)] = l;
  EXPECT_EQ(seen, want);
  EXPECT_TRUE(r.logits == plain.logits) << "watching a pass changed it";

  // A re-run from layer 1 computes L - 1 layers.
  p.layersDone = 0;
  seen.clear();
  {
    PassProgress::Scope scope(&p);
    model->rerunFrom(r, 1, {});
  }
  EXPECT_EQ(p.layersDone.load(), L - 1);
  EXPECT_EQ(seen.front(), 1);
  p.layersPlanned = 2 * L;
  p.layersDone = L;
  EXPECT_DOUBLE_EQ(p.fraction(), 0.5);
}

TEST(PassProgress, ACancelledPassStopsAtTheNextLayerAndChangesNothing) {
  const auto model = Model::open(llamaFixture().string());
  const int L = model->config().nLayer;
  ASSERT_GE(L, 2);
  const std::vector<int> ids = idsOf(llamaFixture());
  PassProgress p;
  p.onLayer = [&](int l) {
    if (l == 0) p.cancel = true;  // as the window's Cancel does while layer 0 runs
  };
  {
    PassProgress::Scope scope(&p);
    EXPECT_THROW(model->forward(ids), PassCancelled);
  }
  EXPECT_EQ(p.layersDone.load(), 1) << "layer 1 ran after the pass was cancelled";

  // A re-run that is cancelled commits nothing: the pass keeps its layers and logits.
  ForwardResult r = model->forward(ids);
  const ForwardResult before = r;
  Interventions iv;
  iv.ablate(1, 1, model->config());
  PassProgress q;
  q.onLayer = [&](int l) {
    if (l == 0) q.cancel = true;
  };
  {
    PassProgress::Scope scope(&q);
    EXPECT_THROW(model->rerunFrom(r, 0, iv), PassCancelled);
  }
  EXPECT_EQ(q.layersDone.load(), 1);
  for (int l = 0; l < L; ++l) EXPECT_TRUE(r.layers.shares(before.layers, l)) << l;
  EXPECT_TRUE(r.logits == before.logits);
  EXPECT_TRUE(r.interventions.layers.empty());

  // Cancelled before it starts: no layer runs.
  PassProgress c;
  c.cancel = true;
  PassProgress::Scope scope(&c);
  EXPECT_THROW(model->forward(ids), PassCancelled);
  EXPECT_EQ(c.layersDone.load(), 0);
}

TEST(PassProgress, OnlyThePassesOfTheScopesThreadAreWatched) {
  const auto model = Model::open(llamaFixture().string());
  const std::vector<int> ids = idsOf(llamaFixture());
  PassProgress p;
  p.cancel = true;  // would stop any pass it watched
  PassProgress::Scope scope(&p);
  ForwardResult other;
  std::thread t([&] { other = model->forward(ids); });
  t.join();
  EXPECT_EQ(p.layersDone.load(), 0);
  EXPECT_EQ(other.layers.size(), std::size_t(model->config().nLayer));
  {
    PassProgress inner;  // a nested Scope watches instead, and gives the outer one back
    PassProgress::Scope s2(&inner);
    (void)model->forward(ids);
    EXPECT_EQ(inner.layersDone.load(), model->config().nLayer);
  }
  EXPECT_EQ(PassProgress::current(), &p);
}

// An encoder-decoder's pass counts its encoder's layers and its decoder's.
TEST(PassProgress, AnEncoderDecodersPassCountsBothStacks) {
  const auto model =
      Model::open((fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "kjv-t5-align").string());
  const ModelConfig& c = model->config();
  ASSERT_TRUE(c.encoderDecoder());
  const std::vector<int> src = model->encode("and the earth");
  std::vector<int> tgt = model->encode("earth the");
  tgt.insert(tgt.begin(), c.decoderStartId.value_or(0));
  PassProgress p;
  PassProgress::Scope scope(&p);
  (void)model->forwardSeq2Seq(src, tgt);
  EXPECT_EQ(p.layersDone.load(), c.nEncoderLayer + c.nLayer);
}

}  // namespace
}  // namespace attnviz::testing
