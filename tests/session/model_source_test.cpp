// The model source without a display: a layer's matrix in the session against the torch fixture
// of tests/model (make_gpt2_fixtures.py), and interventions re-running the pass from the first
// layer they change, their logits against the fixture's ablation case.
#include "attnviz/model_source.h"
#include "attnviz/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace attnviz {
namespace {

const std::string kFixture = std::string(ATTNVIZ_MODEL_FIXTURES) + "/f32_prefix_tied_gelu_new";
// The fixture's text (cases.json).
const char* kText = "The cat sat on the mat; the cat's hat is at 42 in the sitting room.\n\tthe end";

double maxAbsDiff(const float* a, const float* b, std::size_t n) {
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

TEST(ModelSource, LayerInSessionMatchesTorchWeights) {
  ModelSource src(Gpt2Model::open(kFixture));
  src.setText(kText);
  const NpyArray want = readNpy(kFixture + "/plain_weights.npy");  // [L, H, T, T]
  ASSERT_EQ(want.shape.size(), 4u);
  const int L = int(want.shape[0]), H = int(want.shape[1]), T = int(want.shape[2]);
  ASSERT_EQ(src.layers(), L);
  ASSERT_EQ(int(src.tokens().size()), T);
  Session session(makeCpuEngine());
  for (int l = 0; l < L; ++l) {
    src.showLayer(session, l);
    EXPECT_EQ(src.shownLayer(), l);
    for (int h = 0; h < H; ++h) {
      View v;
      v.head = h;
      session.setView(v);
      session.update();
      ASSERT_EQ(session.display().rows, T);
      ASSERT_EQ(session.display().cols, T);
      const float* ref = want.data.data() + (std::size_t(l) * H + h) * T * T;
      // Masked cells are -inf in the display and 0 in torch's weights.
      std::vector<float> shown = session.display().values;
      for (float& x : shown)
        if (std::isinf(x)) x = 0.0f;
      EXPECT_LT(maxAbsDiff(shown.data(), ref, shown.size()), 1e-4) << "layer " << l << " head " << h;
    }
  }
  // Token labels: the BPE pieces, a leading space visible.
  int spaced = 0;
  for (int t = 0; t < T; ++t) {
    const std::string& bytes = src.model().tokenizer().pieceBytes(src.pass().ids[t]);
    const std::string& label = src.tokens()[t];
    if (bytes.size() > 1 && bytes[0] == ' ') {
      ++spaced;
      EXPECT_EQ(label, "\xe2\x90\xa3" + bytes.substr(1)) << t;  // U+2423, then the rest
    } else if (bytes.find_first_of(" \n\t") == std::string::npos) {
      EXPECT_EQ(label, bytes) << t;
    }
  }
  EXPECT_GT(spaced, 3);
  EXPECT_THROW(src.showLayer(session, L), UsageError);
}

TEST(ModelSource, AblationRerunsFromItsLayerAndMatchesTorch) {
  ModelSource src(Gpt2Model::open(kFixture));
  src.setText(kText);
  const auto before = src.topK(5);
  ASSERT_EQ(before.size(), 5u);
  src.setAblated(1, 0, true);
  EXPECT_EQ(src.lastRerunFrom(), 1);  // layer 0 unchanged: only layer 1 re-runs
  src.setAblated(0, 1, true);
  EXPECT_EQ(src.lastRerunFrom(), 0);
  EXPECT_TRUE(src.ablated(0, 1));
  EXPECT_TRUE(src.ablated(1, 0));
  EXPECT_FALSE(src.ablated(0, 0));
  const NpyArray want = readNpy(kFixture + "/ablate_logits.npy");  // [T, V]
  const MatrixRM& got = src.pass().logits;
  ASSERT_EQ(std::size_t(got.size()), want.data.size());
  EXPECT_LT(maxAbsDiff(got.data(), want.data.data(), want.data.size()), 1e-3);
  // The baseline stays the plain pass.
  const NpyArray plain = readNpy(kFixture + "/plain_logits.npy");
  const auto base = src.baselineTopK(5);
  const int V = int(plain.shape[1]), T = int(plain.shape[0]);
  int argmax = 0;
  for (int v = 1; v < V; ++v)
    if (plain.data[std::size_t(T - 1) * V + v] > plain.data[std::size_t(T - 1) * V + argmax])
      argmax = v;
  EXPECT_EQ(base[0].id, argmax);
  EXPECT_EQ(before[0].id, argmax);
  // Back to the plain pass: the logits equal torch's plain ones again.
  const int rerunsBefore = src.reruns();
  src.clearInterventions();
  EXPECT_EQ(src.reruns(), rerunsBefore + 1);
  EXPECT_LT(maxAbsDiff(src.pass().logits.data(), plain.data.data(), plain.data.size()), 1e-3);
  src.clearInterventions();  // nothing changed: no re-run
  EXPECT_EQ(src.reruns(), rerunsBefore + 1);
}

TEST(ModelSource, TemperatureAppliedToAllLayersMatchesTorch) {
  ModelSource src(Gpt2Model::open(kFixture));
  src.setText(kText);
  AttentionParams p;
  p.mask.causal = true;
  p.temperature = 0.5f;
  src.applyParams(p, -1);
  EXPECT_EQ(src.lastRerunFrom(), 0);
  const NpyArray want = readNpy(kFixture + "/temperature_logits.npy");
  EXPECT_LT(maxAbsDiff(src.pass().logits.data(), want.data.data(), want.data.size()), 1e-3);
  EXPECT_THROW(src.setText(""), InputError);
  EXPECT_TRUE(src.ready());  // the last good pass is kept
}

}  // namespace
}  // namespace attnviz
