// The pass's grouped-query attention and its capture policy (model.h, Capture): GQA and MQA
// layers read the shared K/V heads in place and give what K/V repeated per query head give; a
// narrow capture keeps less (bytes counted) with the same results; a re-run shares the layers it
// did not change with the pass it was copied from.
#include "model_test_util.h"

#include "attnviz/engine/engine.h"
#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

namespace attnviz::testing {
namespace {

fs::path llamaFixture(const std::string& name) { return fixture("llama") / name; }

std::vector<int> idsOf(const fs::path& dir) {
  return nlohmann::json::parse(slurp((dir / "cases.json").string()))["ids"].get<std::vector<int>>();
}

// K/V heads repeated for their query heads by hand (query head h reads KV head h / group).
Tensor3 repeatByHand(const Tensor3& kv, int group) {
  Tensor3 out(kv.heads * group, kv.rows, kv.cols);
  for (int h = 0; h < out.heads; ++h)
    for (int r = 0; r < kv.rows; ++r)
      for (int c = 0; c < kv.cols; ++c) out.at(h, r, c) = kv.at(h / group, r, c);
  return out;
}

// Every layer's weights from the pass equal the engine's on the same Q with K and V repeated.
void expectGroupedEqualsRepeated(const std::string& name, int wantGroup) {
  const fs::path dir = llamaFixture(name);
  const auto model = Model::open(dir.string());
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.kvGroup(), wantGroup) << name;
  const std::vector<int> ids = idsOf(dir);
  Interventions iv;
  iv.ablate(1, 0, c);
  const ForwardResult r = model->forward(ids, iv);
  const int T = int(ids.size());
  for (int l = 0; l < c.nLayer; ++l) {
    const SiteActivations& a = r.layers[l].site();
    ASSERT_EQ(a.k.heads, c.nKvHead) << "K is kept once per KV head";
    ASSERT_EQ(a.v.heads, c.nKvHead);
    auto engine = makeCpuEngine();
    engine->run(a.q, repeatByHand(a.k, wantGroup), repeatByHand(a.v, wantGroup),
                layerAttentionParams(c, iv, l, T));
    EXPECT_TRUE(engine->result().weights.data == a.weights.data) << name << " layer " << l;
    // The head outputs too (layer 1's head 0 is ablated before W_o, not in the attention).
    Tensor3 o = engine->result().output;
    if (l == 1) std::fill(o.head(0), o.head(0) + o.headStride(), 0.0f);
    EXPECT_TRUE(o.data == a.headOut.data) << name << " layer " << l << " head outputs";
  }
}

TEST(GroupedPass, GqaEightOverTwoEqualsRepeatedKv) { expectGroupedEqualsRepeated("llama_gqa", 4); }
TEST(GroupedPass, MqaEqualsRepeatedKv) {
  const auto m = Model::open(llamaFixture("llama_mqa_f16").string());
  expectGroupedEqualsRepeated("llama_mqa_f16", m->config().nHead);
}

// A narrow capture: the same logits and kept weights, fewer bytes.
TEST(Capture, NarrowCaptureKeepsLessWithTheSameResults) {
  const fs::path dir = llamaFixture("llama_gqa");
  const auto model = Model::open(dir.string());
  const ModelConfig& c = model->config();
  const std::vector<int> ids = idsOf(dir);
  const int T = int(ids.size()), H = c.nHead;
  const ForwardResult full = model->forward(ids);
  Capture narrow = Capture::view(0);
  narrow.weights = LayerSet::just(1);
  const ForwardResult r = model->forward(ids, {}, narrow);
  // Only the last logits row: the full pass's last row (one row through the head's GEMM
  // rounds differently from T rows: equal within 1e-6 of the logits' scale).
  ASSERT_EQ(r.logits.rows(), 1);
  const float scale = full.logits.row(T - 1).cwiseAbs().maxCoeff();
  EXPECT_LE((r.logits.row(0) - full.logits.row(T - 1)).cwiseAbs().maxCoeff(), 1e-6f * scale);
  EXPECT_EQ(Model::topK(r, 3)[0].id, Model::topK(full, 3)[0].id);
  for (int l = 0; l < c.nLayer; ++l) {
    EXPECT_EQ(r.layers[l].site().weights.empty(), l != 1) << l;
    EXPECT_TRUE(r.layers[l].site().q.empty() && r.layers[l].site().k.empty() && r.layers[l].site().headOut.empty());
    EXPECT_TRUE(r.layers[l].residualIn == full.layers[l].residualIn) << l;
  }
  EXPECT_TRUE(r.layers[1].site().weights.data == full.layers[1].site().weights.data);
  // Counted against what the full pass holds, by the shapes (not by bytes()).
  const std::size_t d = std::size_t(c.nEmbd), dh = std::size_t(c.headSize), V = c.vocabSize;
  const std::size_t perLayerFull = (T * d + std::size_t(H) * T * dh * 2 +
                                    std::size_t(c.nKvHead) * T * dh * 2 + std::size_t(H) * T * T) *
                                       4 +
                                   std::size_t(H) * T * sizeof(RowStats);
  EXPECT_EQ(full.bytes(), c.nLayer * perLayerFull + (T * d + T * V) * 4);
  EXPECT_EQ(r.bytes(), c.nLayer * T * d * 4 + (std::size_t(H) * T * T) * 4 +
                           std::size_t(H) * T * sizeof(RowStats) + (T * d + V) * 4);
  EXPECT_LT(r.bytes() * 2, full.bytes());
  // Q, K, V recomputed from the residual stream are the ones the full pass kept.
  for (int l = 0; l < c.nLayer; ++l) {
    Tensor3 q, k, v;
    model->layerQkv(r, l, q, k, v);
    EXPECT_TRUE(q.data == full.layers[l].site().q.data && k.data == full.layers[l].site().k.data &&
                v.data == full.layers[l].site().v.data)
        << "layer " << l;
  }
}

// Thumbnails: each head's weights max-pooled in blocks (checked against the full weights).
TEST(Capture, ThumbnailsAreMaxPooledWeights) {
  const fs::path dir = llamaFixture("mistral_window");
  const auto model = Model::open(dir.string());
  const std::vector<int> ids = idsOf(dir);
  const int T = int(ids.size());
  const ForwardResult full = model->forward(ids);
  const int side = 3, s = (T + side - 1) / side, n = (T + s - 1) / s;
  const ForwardResult r = model->forward(ids, {}, Capture::view(side));
  for (int l = 0; l < model->config().nLayer; ++l) {
    const Tensor3& w = full.layers[l].site().weights;
    const Tensor3& t = r.layers[l].site().thumb;
    ASSERT_EQ(t.heads, w.heads);
    ASSERT_EQ(t.rows, n);
    ASSERT_EQ(t.cols, n);
    for (int h = 0; h < w.heads; ++h)
      for (int by = 0; by < n; ++by)
        for (int bx = 0; bx < n; ++bx) {
          float m = 0;
          for (int i = by * s; i < std::min(T, (by + 1) * s); ++i)
            for (int j = bx * s; j < std::min(T, (bx + 1) * s); ++j) m = std::max(m, w.at(h, i, j));
          EXPECT_EQ(t.at(h, by, bx), m) << l << " " << h << " " << by << " " << bx;
        }
  }
}

// A copy of a pass re-run from layer l shares layers < l with the original and equals a full pass
// with the interventions; the original is unchanged.
TEST(Capture, RerunSharesTheLayersBelow) {
  const fs::path dir = llamaFixture("llama_gqa");
  const auto model = Model::open(dir.string());
  const ModelConfig& c = model->config();
  ASSERT_GE(c.nLayer, 2);
  const std::vector<int> ids = idsOf(dir);
  const ForwardResult base = model->forward(ids);
  const std::vector<float> baseW1(base.layers[1].site().weights.data.begin(),
                                  base.layers[1].site().weights.data.end());
  ForwardResult r = base;
  for (int l = 0; l < c.nLayer; ++l) EXPECT_TRUE(r.layers.shares(base.layers, l));
  Interventions iv;
  iv.ablate(1, 3, c);
  model->rerunFrom(r, 1, iv);
  EXPECT_TRUE(r.layers.shares(base.layers, 0));
  for (int l = 1; l < c.nLayer; ++l) EXPECT_FALSE(r.layers.shares(base.layers, l)) << l;
  const ForwardResult full = model->forward(ids, iv);
  for (int l = 0; l < c.nLayer; ++l)
    EXPECT_TRUE(r.layers[l].site().weights.data == full.layers[l].site().weights.data) << l;
  EXPECT_TRUE(r.logits == full.logits);
  EXPECT_TRUE(base.layers[1].site().weights.data == baseW1);  // the original pass is its own
  // Writing through a shared layer copies it first.
  ForwardResult w = base;
  w.layers[0].residualIn.setZero();
  EXPECT_FALSE(w.layers.shares(base.layers, 0));
  EXPECT_NE(base.layers[0].residualIn.norm(), 0.0f);
}

}  // namespace
}  // namespace attnviz::testing
