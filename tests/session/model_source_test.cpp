// The model source without a display: a layer's matrix in the session against the torch fixture
// of tests/model (make_gpt2_fixtures.py), and interventions re-running the pass from the first
// layer they change, their logits against the fixture's ablation case.
#include "attnviz/session/dump_source.h"
#include "attnviz/session/model_source.h"
#include "attnviz/formats/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <random>
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
  ModelSource src(Model::open(kFixture));
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

// The model's own stages as the GUI gets them (a pass that keeps only thumbnails): the
// value-weighted map and the rollout in the session's display against the torch reference of
// tests/model/make_attribution_fixtures.py, on the same text.
TEST(ModelSource, ValueWeightedAndRolloutStagesMatchTorch) {
  const std::string dir = std::string(ATTNVIZ_MODEL_FIXTURES) + "/attribution/f32_prefix_tied_gelu_new";
  ModelSource src(Model::open(kFixture));
  src.setCapture(Capture::view(32));
  src.setText(kText);
  const NpyArray vw = readNpy(dir + "/value_weighted.npy");  // layer 0, head 1 (case.json)
  const NpyArray roll = readNpy(dir + "/rollout.npy");       // [L, T, T]
  const int L = src.layers(), T = int(src.tokens().size());
  ASSERT_EQ(roll.data.size(), std::size_t(L) * T * T) << "the fixture ran on another text";
  Session session(makeCpuEngine());
  src.showLayer(session, 0);
  // Each is computed only while shown.
  EXPECT_FALSE(session.stageAvailable(ViewStage::ValueWeighted));
  EXPECT_FALSE(session.stageAvailable(ViewStage::Rollout));
  src.setShownStage(ViewStage::ValueWeighted);
  src.showStages(session);
  EXPECT_TRUE(session.stageAvailable(ViewStage::ValueWeighted));
  EXPECT_FALSE(session.stageAvailable(ViewStage::Rollout));
  View v;
  v.head = 1;
  v.stage = ViewStage::ValueWeighted;
  session.setView(v);
  session.update();
  std::vector<float> shown = session.display().values;
  for (float& x : shown)
    if (std::isinf(x)) x = 0.0f;  // masked: -inf shown, 0 in the reference
  ASSERT_EQ(shown.size(), vw.data.size());
  EXPECT_LT(maxAbsDiff(shown.data(), vw.data.data(), shown.size()), 1e-4);
  // τ acts on it live: at τ = 0.5 the weights change, so does the stage.
  session.setTemperature(0.5f);
  session.update();
  EXPECT_GT(maxAbsDiff(session.display().values.data(), shown.data(), 3 * T), 1e-3);
  session.setTemperature(1.0f);

  src.setShownStage(ViewStage::Rollout);
  for (int l = 0; l < L; ++l) {
    src.showLayer(session, l);
    ASSERT_TRUE(session.stageAvailable(ViewStage::Rollout));
    EXPECT_FALSE(session.stageAvailable(ViewStage::ValueWeighted));
    v.stage = ViewStage::Rollout;
    session.setView(v);
    session.update();
    const DisplayMatrix& d = session.display();
    ASSERT_EQ(d.values.size(), std::size_t(T) * T);
    EXPECT_LT(maxAbsDiff(d.values.data(), roll.data.data() + std::size_t(l) * T * T, d.values.size()),
              1e-4)
        << "rollout to layer " << l;
  }
  // A synthetic scene has neither: the view falls back to the weights.
  Scene synthetic;
  synthetic.queryText = "a b c d";
  session.setScene(synthetic);
  session.update();
  EXPECT_FALSE(session.stageAvailable(ViewStage::ValueWeighted));
  EXPECT_FALSE(session.stageAvailable(ViewStage::Rollout));
  EXPECT_TRUE(session.display().isWeights);
  EXPECT_THROW(session.setSourceStages({1.0f}, {}), UsageError);
}

TEST(ModelSource, AblationRerunsFromItsLayerAndMatchesTorch) {
  ModelSource src(Model::open(kFixture));
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

// A text's pass computed on another thread (what the app does while the window keeps drawing)
// is the pass setText computes; one started before the interventions changed is refused.
TEST(ModelSource, ATextPassFromAWorkerThreadIsAdoptedOnlyWithTheInterventionsItRanWith) {
  ModelSource src(Model::open(kFixture));
  src.setText("a b");
  src.setAblated(1, 0, true);
  auto worker = std::async(std::launch::async, [model = src.sharedModel(),
                                               iv = src.interventions(),
                                               v = src.interventionsVersion()] {
    return ModelSource::runText(*model, kText, iv, v);
  });
  ModelSource::TextPass pass = worker.get();
  ASSERT_TRUE(src.adoptText(std::move(pass)));
  EXPECT_EQ(src.text(), kText);
  const NpyArray plain = readNpy(kFixture + "/plain_logits.npy");
  ModelSource direct(Model::open(kFixture));
  direct.setText(kText);
  direct.setAblated(1, 0, true);
  ASSERT_EQ(src.pass().logits.size(), direct.pass().logits.size());
  EXPECT_EQ(maxAbsDiff(src.pass().logits.data(), direct.pass().logits.data(),
                       std::size_t(direct.pass().logits.size())),
            0.0);
  EXPECT_EQ(src.baselineTopK(5)[0].id, direct.baselineTopK(5)[0].id);
  ASSERT_EQ(std::size_t(src.pass().logits.size()), plain.data.size());
  // Started, then the interventions changed: the stale pass is refused and nothing changes.
  ModelSource::TextPass stale =
      ModelSource::runText(src.model(), "a b", src.interventions(), src.interventionsVersion());
  src.setAblated(0, 1, true);
  EXPECT_FALSE(src.adoptText(std::move(stale)));
  EXPECT_EQ(src.text(), kText);
}

// Under a PassProgress scope (the app's workers), runText plans the layers it computes (the
// baseline's L, then L - l for a first changed layer l) and counts exactly those; a cancel stops
// it with PassCancelled, and the source is left as it was.
TEST(ModelSource, ATextPassPlansAndCountsItsLayersAndCanBeCancelled) {
  ModelSource src(Model::open(kFixture));
  const int L = src.layers();
  ASSERT_GE(L, 2);
  src.setText("a b");
  PassProgress plain;
  {
    PassProgress::Scope scope(&plain);
    (void)ModelSource::runText(src.model(), kText, {}, 0);
  }
  EXPECT_EQ(plain.layersPlanned.load(), L);
  EXPECT_EQ(plain.layersDone.load(), L);
  src.setAblated(L - 1, 0, true);
  PassProgress one;
  {
    PassProgress::Scope scope(&one);
    (void)ModelSource::runText(src.model(), kText, src.interventions(), 0);
  }
  EXPECT_EQ(one.layersPlanned.load(), L + 1);
  EXPECT_EQ(one.layersDone.load(), L + 1);
  EXPECT_DOUBLE_EQ(one.fraction(), 1.0);
  PassProgress stop;
  stop.onLayer = [&](int) { stop.cancel = true; };
  {
    PassProgress::Scope scope(&stop);
    EXPECT_THROW(ModelSource::runText(src.model(), kText, src.interventions(), 0), PassCancelled);
  }
  EXPECT_EQ(stop.layersDone.load(), 1);
  EXPECT_EQ(src.text(), "a b");
}

// Deferred re-runs (the app's): the interventions are recorded at once and the pass stays as it
// was (stale) until a job computed apart is adopted; the adopted pass is what the immediate
// source computes. A job made before the interventions changed again is refused; a cancelled
// one is undone with revertInterventions.
TEST(ModelSource, DeferredReRunsEqualImmediateOnesAndStaleJobsAreRefused) {
  ModelSource now(Model::open(kFixture)), later(Model::open(kFixture));
  now.setText(kText);
  later.setText(kText);
  later.setDeferReruns(true);
  const int L = later.layers();
  ASSERT_GE(L, 2);
  const Eigen::VectorXf plainLogits = later.pass().logits.row(later.pass().logits.rows() - 1);
  now.setAblated(1, 0, true);
  later.setAblated(1, 0, true);
  EXPECT_TRUE(later.ablated(1, 0)) << "recorded at once";
  EXPECT_TRUE(later.stale());
  EXPECT_EQ(later.staleFrom(), 1);
  EXPECT_TRUE(later.pass().logits.row(later.pass().logits.rows() - 1) == plainLogits.transpose())
      << "a deferred source changed its pass";
  ModelSource::Rerun job = later.rerunJob();
  EXPECT_EQ(job.from, 1);
  PassProgress progress;
  {
    PassProgress::Scope scope(&progress);
    ModelSource::runRerun(later.model(), job);
  }
  EXPECT_EQ(progress.layersPlanned.load(), L - 1);
  EXPECT_EQ(progress.layersDone.load(), L - 1);
  ASSERT_TRUE(later.adoptRerun(std::move(job)));
  EXPECT_FALSE(later.stale());
  EXPECT_TRUE(later.pass().logits == now.pass().logits);
  EXPECT_EQ(later.reruns(), 1);
  EXPECT_EQ(later.lastRerunFrom(), 1);

  // A job made, then the interventions change: refused, the pass unchanged and still stale.
  later.setRopeOff(0, true);
  ModelSource::Rerun old = later.rerunJob();
  EXPECT_EQ(old.from, 0);
  later.setRopeOff(0, false);
  later.setAblated(1, 1, true);
  ModelSource::runRerun(later.model(), old);
  EXPECT_FALSE(later.adoptRerun(std::move(old)));
  EXPECT_TRUE(later.pass().logits == now.pass().logits);
  EXPECT_EQ(later.staleFrom(), 1);
  // Cancelled: back to what the pass ran with (1:0 ablated, 1:1 not).
  later.revertInterventions();
  EXPECT_FALSE(later.stale());
  EXPECT_TRUE(later.ablated(1, 0));
  EXPECT_FALSE(later.ablated(1, 1));
  // A text pass carries the recorded interventions: nothing stale after it is adopted.
  later.setAblated(0, 1, true);
  ASSERT_TRUE(later.adoptText(ModelSource::runText(later.model(), "a b", later.interventions(),
                                                   later.interventionsVersion())));
  EXPECT_FALSE(later.stale());
  now.setAblated(0, 1, true);
  now.setText("a b");
  EXPECT_TRUE(later.pass().logits == now.pass().logits);
}

TEST(ModelSource, TemperatureAppliedToAllLayersMatchesTorch) {
  ModelSource src(Model::open(kFixture));
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

// A painted [T, T] mask and document ids fit one text's length: a new text refits them (drops
// them, saying so) instead of failing every later edit; the other interventions stay.
TEST(ModelSource, ANewTextRefitsLengthDependentInterventions) {
  ModelSource src(Model::open(kFixture));
  src.setText(kText);
  const int T = int(src.tokens().size());
  AttentionParams p;
  p.temperature = 0.5f;
  p.mask.customKind = MaskSpec::Custom::Allow;
  p.mask.custom = Tensor3(1, T, T, 1.0f);
  p.mask.custom.at(0, T - 1, 0) = 0.0f;  // a painted cell
  src.applyParams(p, 1);
  AttentionParams d;
  d.temperature = 0.5f;
  d.mask.docs.assign(std::size_t(T), 0);
  src.applyParams(d, 0);
  ASSERT_EQ(src.interventions().find(1)->mask.custom.rows, T);
  const std::uint64_t before = src.interventionsVersion();
  ASSERT_NO_THROW(src.setText("the cat sat"));
  const int T2 = int(src.tokens().size());
  ASSERT_NE(T2, T);
  EXPECT_EQ(src.text(), "the cat sat");
  EXPECT_EQ(src.interventions().find(1)->mask.customKind, MaskSpec::Custom::None);
  EXPECT_TRUE(src.interventions().find(0)->mask.docs.empty());
  EXPECT_EQ(src.interventions().find(1)->temperature, 0.5f) << "τ fits any length and stays";
  EXPECT_NE(src.interventionsVersion(), before);
  const std::string note = src.takeNote();
  EXPECT_NE(note.find("custom mask"), std::string::npos) << note;
  EXPECT_NE(note.find("document ids"), std::string::npos) << note;
  EXPECT_EQ(src.takeNote(), "");
  // The pass is the plain pass of the new text at τ = 0.5 in layers 0 and 1.
  Interventions iv;
  iv.layer(0, src.layers()).temperature = 0.5f;
  iv.layer(1, src.layers()).temperature = 0.5f;
  const ForwardResult want = src.model().forward(src.model().encode("the cat sat"), iv);
  ASSERT_EQ(src.pass().logits.size(), want.logits.size());
  EXPECT_EQ(maxAbsDiff(src.pass().logits.data(), want.logits.data(),
                       std::size_t(want.logits.size())),
            0.0);
  // A later edit works as well, and a mask of the new length is kept.
  AttentionParams p2 = p;
  p2.mask.custom = Tensor3(1, T2, T2, 1.0f);
  src.applyParams(p2, 1);
  ASSERT_NO_THROW(src.setText("the dog"));
  ASSERT_NO_THROW(src.setText("the cat sat"));
  EXPECT_EQ(src.interventions().find(1)->mask.customKind, MaskSpec::Custom::None);
}

// ---- model scenes: the "model" object of a scene file ----------------------------------------

std::string refusal(const std::string& json) {
  try {
    sceneFromJson(json, "m.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ModelScene, FieldsLoadAndSurviveASaveAndReload) {
  const Scene s = sceneFromJson(
      R"({"title": "t", "model": {"path": "kjv-byte-2l", "text": "ab ab", "layer": 1, "head": 2,
          "ablate": ["1:0", "0:3"]}})",
      "m.json");
  ASSERT_TRUE(s.model.any());
  EXPECT_EQ(s.model.path, "kjv-byte-2l");
  EXPECT_EQ(s.model.text, "ab ab");
  EXPECT_EQ(s.model.layer, 1);
  EXPECT_EQ(s.model.head, 2);
  const std::vector<std::pair<int, int>> want{{1, 0}, {0, 3}};
  EXPECT_EQ(s.model.ablate, want);
  const Scene again = sceneFromJson(sceneToJson(s), "again.json");
  EXPECT_EQ(again.model.path, s.model.path);
  EXPECT_EQ(again.model.text, s.model.text);
  EXPECT_EQ(again.model.layer, 1);
  EXPECT_EQ(again.model.head, 2);
  EXPECT_EQ(again.model.ablate, want);
  EXPECT_FALSE(sceneFromJson(R"({"query_text": "a b"})", "plain.json").model.any());
}

TEST(ModelScene, BadFieldsAreRefusedNamingTheFileAndTheField) {
  EXPECT_EQ(refusal(R"({"model": 3})"), "m.json: field 'model' must be an object");
  EXPECT_NE(refusal(R"({"model": {"text": "a"}})").find("model.path"), std::string::npos);
  EXPECT_NE(refusal(R"({"model": {"path": "x"}})").find("model.text"), std::string::npos);
  EXPECT_NE(refusal(R"({"model": {"path": "x", "text": "a", "layer": -1}})").find("model.layer"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model": {"path": "x", "text": "a", "head": 1e300}})").find("model.head"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model": {"path": "x", "text": "a", "ablate": ["1-2"]}})").find("model.ablate"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model": {"path": "x", "text": "a", "ablate": ["1:2x"]}})").find("model.ablate"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model": {"path": "x", "text": "a", "ablate": "1:2"}})").find("model.ablate"),
            std::string::npos);
  EXPECT_EQ(refusal(R"({"model": {"path": "x", "text": "a", "layer": 3, "ablate": ["0:1"]}})"),
            "(accepted)");
}

// ---- dumps: recorded weights as the session's source -------------------------------------------

// Random rows that sum to 1: [H, Tq, Tk].
Tensor3 randomWeights(int H, int Tq, int Tk, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  Tensor3 w(H, Tq, Tk);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < Tq; ++i) {
      double sum = 0;
      for (int j = 0; j < Tk; ++j) sum += (w.at(h, i, j) = u(rng));
      for (int j = 0; j < Tk; ++j) w.at(h, i, j) = float(w.at(h, i, j) / sum);
    }
  return w;
}

Dump twoLayerDump() {
  Dump d;
  d.tokens = {"a", "b", "c", "d"};
  d.keyTokens = {"x", "y", "z", "u", "v", "w"};
  DumpLayer self;
  self.name = "0";
  self.weights = randomWeights(2, 4, 4, 1);
  self.queryTokens = d.tokens;
  self.keyTokens = d.tokens;
  DumpLayer cross;
  cross.name = "1.cross";
  cross.axes = DumpAxes::Cross;
  cross.weights = randomWeights(3, 4, 6, 2);
  cross.queryTokens = d.tokens;
  cross.keyTokens = d.keyTokens;
  d.layers = {self, cross};
  return d;
}

std::vector<float> shownWeights(Session& s, int head) {
  View v;
  v.head = head;
  s.setView(v);
  s.update();
  std::vector<float> out = s.display().values;
  for (float& x : out)
    if (std::isinf(x)) x = 0.0f;
  return out;
}

TEST(DumpSource, TheSessionShowsTheRecordedWeightsAndRenormalisesThemUnderTauAndMasks) {
  const Dump dump = twoLayerDump();
  DumpSource src(dump);
  Session session(makeCpuEngine());
  src.showLayer(session, 0);
  const Tensor3& w = dump.layers[0].weights;
  for (int h = 0; h < 2; ++h) {
    const std::vector<float> got = shownWeights(session, h);
    EXPECT_LT(maxAbsDiff(got.data(), w.head(h), got.size()), 1e-6) << h;
  }
  // tau = 0.5 and a causal mask: A^2 over the allowed keys j <= i, renormalised (naive).
  session.editScene().params.mask.causal = true;
  session.touchMask();
  session.setTemperature(0.5f);
  for (int h = 0; h < 2; ++h) {
    std::vector<float> want(16, 0.0f);
    for (int i = 0; i < 4; ++i) {
      double sum = 0;
      for (int j = 0; j <= i; ++j) sum += double(w.at(h, i, j)) * w.at(h, i, j);
      for (int j = 0; j <= i; ++j) want[i * 4 + j] = float(double(w.at(h, i, j)) * w.at(h, i, j) / sum);
    }
    const std::vector<float> got = shownWeights(session, h);
    EXPECT_LT(maxAbsDiff(got.data(), want.data(), 16), 1e-5) << h;
  }
}

TEST(DumpSource, ACrossLayerIsTqByTkWithBothTokenLists) {
  DumpSource src(twoLayerDump());
  Session session(makeCpuEngine());
  src.showLayer(session, 1);
  session.update();
  EXPECT_EQ(session.heads(), 3);
  EXPECT_EQ(session.display().rows, 4);
  EXPECT_EQ(session.display().cols, 6);
  EXPECT_EQ(session.inputs().keyTokens[5], "w");
  EXPECT_EQ(session.inputs().queryTokens[0], "a");
  EXPECT_FALSE(src.hasQkv(1));
  const std::vector<float> got = shownWeights(session, 2);
  EXPECT_LT(maxAbsDiff(got.data(), src.dump().layers[1].weights.head(2), got.size()), 1e-6);
  EXPECT_THROW(src.showLayer(session, 2), UsageError);
  // The engine the session had can be taken back.
  EXPECT_NE(session.releaseEngine(), nullptr);
  EXPECT_FALSE(session.hasEngine());
}

}  // namespace
}  // namespace attnviz
