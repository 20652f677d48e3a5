// Attribution (attnviz/model/attribution.h, `attnviz attribute`) against float64 torch references
// (make_attribution_fixtures.py: every intervention a full re-run of a pass written from the
// published architectures) on the shipped model and random GPT-2 and LLaMA (GQA) checkpoints:
// ablation sweeps (zero, mean), head and residual patching, the logit lens, value-weighted
// attention, rollout, direct effects. Then the edge cases, cancellation, the figure and the CLI.
#include "model_test_util.h"

#include "attnviz/model/attribution.h"
#include "attnviz/render/attribution_figure.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>

namespace attnviz::testing {
namespace {

constexpr double kTol = 1e-4;

fs::path attributionFixture(const std::string& name) { return fixture("attribution") / name; }
fs::path sourceDir() { return fs::path(ATTNVIZ_SOURCE_DIR); }

nlohmann::json readCase(const std::string& name) {
  return nlohmann::json::parse(slurp((attributionFixture(name) / "case.json").string()));
}

NpyArray npyOf(const std::string& name, const std::string& file) {
  return readNpy((attributionFixture(name) / file).string());
}

template <class Floats>
std::vector<float> asVector(const Floats& v) {
  return std::vector<float>(v.begin(), v.end());
}
std::vector<float> asVector(const MatrixRM& m) {
  return std::vector<float>(m.data(), m.data() + m.size());
}

// |got - want| <= 1e-4 everywhere, and the same shape.
void expectNear(const std::vector<float>& got, const NpyArray& want, const std::string& what) {
  expectClose(got, want, kTol, 0, what);
}

class AttributionReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    name_ = GetParam();
    case_ = readCase(name_);
    model_ = Model::open((sourceDir() / case_["model"].get<std::string>()).string());
    ids_ = case_["ids"].get<std::vector<int>>();
    run_ = model_->forward(ids_);
  }
  std::string name_;
  nlohmann::json case_;
  std::unique_ptr<Model> model_;
  std::vector<int> ids_;
  ForwardResult run_;
};

TEST_P(AttributionReference, AblationSweepsMatchTorch) {
  for (const auto& s : case_["sweeps"]) {
    AttributionTarget at;
    if (!s["position"].is_null()) at.position = s["position"].get<int>();
    if (!s["target"].is_null()) at.target = s["target"].get<int>();
    const AblationKind kind =
        s["kind"].get<std::string>() == "zero" ? AblationKind::Zero : AblationKind::Mean;
    const AblationSweep r = ablationSweep(*model_, run_, kind, at);
    const std::string what = name_ + "/" + s["file"].get<std::string>();
    EXPECT_EQ(r.position, s["resolved_position"].get<int>()) << what;
    EXPECT_EQ(r.target, s["resolved_target"].get<int>()) << what;
    EXPECT_TRUE(r.delta.complete()) << what;
    EXPECT_EQ(r.delta.rows, model_->config().nLayer);
    EXPECT_EQ(r.delta.cols, model_->config().nHead);
    expectNear(r.delta.values, npyOf(name_, s["file"].get<std::string>()), what);
  }
}

TEST_P(AttributionReference, HeadAndResidualPatchingMatchTorch) {
  const auto& p = case_["patch"];
  const ForwardResult clean = model_->forward(p["clean_ids"].get<std::vector<int>>());
  const ForwardResult corrupt = model_->forward(p["corrupt_ids"].get<std::vector<int>>());
  const PatchingResult heads = patchHeads(*model_, clean, corrupt);
  EXPECT_EQ(heads.setup.position, p["position"].get<int>());
  EXPECT_EQ(heads.setup.target, p["target"].get<int>());
  EXPECT_EQ(heads.setup.foil, p["foil"].get<int>());
  const double mScale = std::max({1.0, std::fabs(p["m_clean"].get<double>()),
                                  std::fabs(p["m_corrupt"].get<double>())});
  EXPECT_NEAR(heads.setup.mClean, p["m_clean"].get<double>(), kTol * mScale);
  EXPECT_NEAR(heads.setup.mCorrupt, p["m_corrupt"].get<double>(), kTol * mScale);
  expectNear(heads.fraction.values, npyOf(name_, "patch_heads.npy"), name_ + " patch heads");
  const PatchingResult resid = patchResidual(*model_, clean, corrupt);
  EXPECT_EQ(resid.fraction.rows, model_->config().nLayer);
  EXPECT_EQ(resid.fraction.cols, int(clean.ids.size()));
  expectNear(resid.fraction.values, npyOf(name_, "patch_resid.npy"), name_ + " patch resid");
}

TEST_P(AttributionReference, LogitLensMatchesTorch) {
  const auto& lens = case_["lens"];
  const LogitLens r = logitLens(*model_, run_);
  EXPECT_EQ(r.target, lens["target"].get<int>());
  EXPECT_EQ(r.layers, model_->config().nLayer + 1);
  EXPECT_EQ(r.tokens, int(ids_.size()));
  expectNear(r.targetProb, npyOf(name_, "lens_target_prob.npy"), name_ + " lens target prob");
  expectNear(r.topProb, npyOf(name_, "lens_top_prob.npy"), name_ + " lens top prob");
  const auto top = lens["top_ids"].get<std::vector<std::vector<int>>>();
  for (int l = 0; l < r.layers; ++l)
    for (int t = 0; t < r.tokens; ++t)
      EXPECT_EQ(r.topId[r.index(l, t)], top[std::size_t(l)][std::size_t(t)])
          << name_ << " lens layer " << l << " position " << t;
  // The last row is the model's own prediction.
  const std::vector<TokenProb> best = Model::topK(run_, 1);
  EXPECT_EQ(r.topId[r.index(r.layers - 1, r.tokens - 1)], best[0].id);
}

TEST_P(AttributionReference, ValueWeightedAttentionAndRolloutMatchTorch) {
  const auto& vw = case_["value_weighted"];
  const MatrixRM v =
      valueWeightedAttention(*model_, run_, vw["layer"].get<int>(), vw["head"].get<int>());
  expectNear(asVector(v), npyOf(name_, "value_weighted.npy"), name_ + " value-weighted");
  const Tensor3 roll = attentionRollout(run_);
  EXPECT_EQ(roll.heads, model_->config().nLayer);
  expectNear(asVector(roll.data), npyOf(name_, "rollout.npy"), name_ + " rollout");
  // Rows of a rollout are distributions.
  for (int i = 0; i < roll.rows; ++i)
    EXPECT_NEAR(roll.mat(roll.heads - 1).row(i).sum(), 1.0f, 1e-5f);
}

// The GUI's stages come from a pass that keeps no weights and no Q/K/V (Capture::view): the
// norms, the value-weighted map and the rollout up to each layer are recomputed from the residual
// stream, and must still equal the torch reference.
TEST_P(AttributionReference, ValueWeightedAndRolloutFromANarrowRunMatchTorch) {
  const ForwardResult narrow = model_->forward(ids_, {}, Capture::view(16));
  const auto& vw = case_["value_weighted"];
  const int layer = vw["layer"].get<int>(), head = vw["head"].get<int>();
  ASSERT_TRUE(narrow.layers[layer].site().weights.empty());
  ASSERT_TRUE(narrow.layers[layer].site().v.empty());
  const MatrixRM v = valueWeightedAttention(*model_, narrow, layer, head);
  expectNear(asVector(v), npyOf(name_, "value_weighted.npy"), name_ + " value-weighted (narrow)");
  // valueNorms is the factor: weight × norm of the key's column.
  const std::vector<float> norms = valueNorms(*model_, narrow, layer);
  const int T = int(ids_.size());
  ASSERT_EQ(norms.size(), std::size_t(model_->config().nHead) * T);
  const MatrixRM& w = run_.layers[layer].site().weights.mat(head);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j)
      EXPECT_NEAR(v(i, j), w(i, j) * norms[std::size_t(head) * T + j], 1e-5f) << i << "," << j;
  const NpyArray roll = npyOf(name_, "rollout.npy");
  for (int l = 0; l < model_->config().nLayer; ++l) {
    const MatrixRM r = attentionRolloutTo(*model_, narrow, l);
    ASSERT_EQ(r.rows(), T);
    ASSERT_EQ(roll.data.size(), std::size_t(model_->config().nLayer) * T * T);
    double worst = 0;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j)
        worst = std::max(worst, std::fabs(double(r(i, j)) -
                                          double(roll.data[(std::size_t(l) * T + i) * T + j])));
    EXPECT_LE(worst, kTol) << name_ << " rollout to layer " << l;
  }
  // With a mask and a temperature inside the pass, the recomputed weights are the pass's own.
  Interventions iv;
  MaskSpec m;
  m.window = 2;
  iv.setAll(m, 0.5f, model_->config().nLayer);
  const ForwardResult full = model_->forward(ids_, iv);
  const ForwardResult thin = model_->forward(ids_, iv, Capture::view(16));
  const Tensor3 all = attentionRollout(full);
  const int last = model_->config().nLayer - 1;
  const MatrixRM got = attentionRolloutTo(*model_, thin, last);
  EXPECT_LE((got - all.mat(last)).cwiseAbs().maxCoeff(), 1e-5f);
  // And they differ from the plain pass's (the test sees the interventions).
  EXPECT_GT((got - attentionRolloutTo(*model_, narrow, last)).cwiseAbs().maxCoeff(), 1e-3f);
  EXPECT_THROW(attentionRolloutTo(*model_, narrow, model_->config().nLayer), InputError);
  EXPECT_THROW(valueNorms(*model_, narrow, -1), InputError);
  std::atomic<bool> cancel{true};
  EXPECT_EQ(attentionRolloutTo(*model_, narrow, last, &cancel).size(), 0);
}

TEST_P(AttributionReference, DirectEffectsMatchTorch) {
  const auto& d = case_["direct"];
  const DirectEffect e =
      directEffect(*model_, run_, d["layer"].get<int>(), d["head"].get<int>(), -1, 5);
  EXPECT_EQ(e.position, d["position"].get<int>());
  const NpyArray want = npyOf(name_, "direct_logits.npy");
  expectNear(e.logits, want, name_ + " direct effect");
  ASSERT_EQ(e.promoted.size(), 5u);
  ASSERT_EQ(e.suppressed.size(), 5u);
  const auto mx = std::max_element(want.data.begin(), want.data.end());
  const auto mn = std::min_element(want.data.begin(), want.data.end());
  EXPECT_EQ(e.promoted[0].id, int(mx - want.data.begin()));
  EXPECT_EQ(e.suppressed[0].id, int(mn - want.data.begin()));
  for (std::size_t k = 1; k < 5; ++k) {
    EXPECT_GE(e.promoted[k - 1].value, e.promoted[k].value);
    EXPECT_LE(e.suppressed[k - 1].value, e.suppressed[k].value);
  }
  const AttributionMatrix dla = directLogitAttribution(*model_, run_);
  expectNear(dla.values, npyOf(name_, "dla.npy"), name_ + " direct logit attribution");
  EXPECT_NEAR(dla.at(d["layer"].get<int>(), d["head"].get<int>()),
              e.logits[std::size_t(case_["dla"]["target"].get<int>())], 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Models, AttributionReference,
                         ::testing::Values("kjv_byte_2l", "llama_gqa", "f32_prefix_tied_gelu_new"));

// ---------------------------------------------------------------------------------------------
// The shortcut itself, edge cases, cancellation

std::unique_ptr<Model> gpt2Model() {
  return Model::open(fixture("f32_prefix_tied_gelu_new").string());
}

std::vector<int> gpt2Ids() {
  return nlohmann::json::parse(slurp((fixture("f32_prefix_tied_gelu_new") / "cases.json").string()))["ids"]
      .get<std::vector<int>>();
}

TEST(Attribution, SweepEqualsFullPassesWithTheHeadAblated) {
  const auto m = gpt2Model();
  const std::vector<int> ids = gpt2Ids();
  const ForwardResult clean = m->forward(ids);
  const AblationSweep s = ablationSweep(*m, clean, AblationKind::Mean);
  const int V = m->config().vocabSize, P = int(ids.size()) - 1;
  for (int l = 0; l < m->config().nLayer; ++l)
    for (int h = 0; h < m->config().nHead; ++h) {
      Interventions iv;
      iv.layer(l, m->config().nLayer).meanAblatedHeads.push_back(h);
      const ForwardResult r = m->forward(ids, iv);
      const double full = logProbOf(r.logits.row(P).data(), V, s.target) -
                          logProbOf(clean.logits.row(P).data(), V, s.target);
      EXPECT_NEAR(s.delta.at(l, h), full, 1e-5) << l << ":" << h;
    }
}

TEST(Attribution, TheRunsOwnInterventionsStayOn) {
  const auto m = gpt2Model();
  const std::vector<int> ids = gpt2Ids();
  Interventions base;
  base.ablate(0, 0, m->config());
  const ForwardResult clean = m->forward(ids, base);
  const AblationSweep s = ablationSweep(*m, clean, AblationKind::Zero);
  // Head 0:0 is already zeroed: ablating it again changes nothing.
  EXPECT_EQ(s.delta.at(0, 0), 0.0f);
  Interventions both = base;
  both.ablate(1, 1, m->config());
  const ForwardResult r = m->forward(ids, both);
  const int V = m->config().vocabSize, P = int(ids.size()) - 1;
  EXPECT_NEAR(s.delta.at(1, 1),
              logProbOf(r.logits.row(P).data(), V, s.target) - s.logProb, 1e-5);
}

TEST(Attribution, PatchingRefusesTheSameTextTwiceAndDifferentLengths) {
  const auto m = gpt2Model();
  const std::vector<int> ids = gpt2Ids();
  const ForwardResult a = m->forward(ids);
  try {
    patchHeads(*m, a, a);
    FAIL() << "clean = corrupted was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("same logit difference"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nothing to restore"), std::string::npos) << e.what();
  }
  EXPECT_THROW(patchResidual(*m, a, a), InputError);
  const std::vector<int> shorter(ids.begin(), ids.end() - 1);
  const ForwardResult b = m->forward(shorter);
  try {
    patchHeads(*m, a, b);
    FAIL() << "different lengths were accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(ids.size())), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(shorter.size())), std::string::npos) << msg;
  }
  // A foil equal to the target is refused too.
  std::vector<int> other = ids;
  other[3] = (other[3] + 1) % m->config().vocabSize;
  const ForwardResult c = m->forward(other);
  AttributionTarget at;
  at.target = 5, at.foil = 5;
  EXPECT_THROW(patchHeads(*m, a, c, at), InputError);
}

TEST(Attribution, TargetAndPositionOutsideTheRunAreRefused) {
  const auto m = gpt2Model();
  const ForwardResult r = m->forward(gpt2Ids());
  AttributionTarget at;
  at.target = m->config().vocabSize;
  EXPECT_THROW(ablationSweep(*m, r, AblationKind::Zero, at), InputError);
  EXPECT_THROW(logitLens(*m, r, at), InputError);
  at = {};
  at.position = int(r.ids.size());
  EXPECT_THROW(ablationSweep(*m, r, AblationKind::Zero, at), InputError);
  EXPECT_THROW(directEffect(*m, r, 0, 0, int(r.ids.size())), InputError);
  EXPECT_THROW(directEffect(*m, r, 2, 0), InputError);
  EXPECT_THROW(valueWeightedAttention(*m, r, 0, 2), InputError);
}

TEST(Attribution, RowsFillInOrderAndCancellationKeepsWhatIsDone) {
  const auto m = Model::open(fixture("llama/llama_gqa").string());
  const ForwardResult r = m->forward({1, 40, 50, 60, 70, 80});
  const int L = m->config().nLayer, H = m->config().nHead;
  std::vector<int> rows;
  std::vector<double> fractions;
  AttributionControl control;
  control.row = [&](int row, const std::vector<float>& v) {
    rows.push_back(row);
    EXPECT_EQ(int(v.size()), H);
  };
  control.progress = [&](double f) { fractions.push_back(f); };
  const AblationSweep full = ablationSweep(*m, r, AblationKind::Zero, {}, control);
  EXPECT_EQ(rows, (std::vector<int>{1, 0}));  // from the last layer up: the cheapest first
  ASSERT_EQ(int(fractions.size()), L * H);
  EXPECT_TRUE(std::is_sorted(fractions.begin(), fractions.end()));
  EXPECT_DOUBLE_EQ(fractions.back(), 1.0);

  // Cancel after the last layer and two heads of the one below.
  std::atomic<bool> cancel{false};
  int steps = 0;
  AttributionControl stop;
  stop.cancel = &cancel;
  stop.progress = [&](double) {
    if (++steps == H + 2) cancel = true;
  };
  const AblationSweep part = ablationSweep(*m, r, AblationKind::Zero, {}, stop);
  EXPECT_TRUE(part.delta.cancelled);
  EXPECT_EQ(part.delta.rowsDone, 1);
  EXPECT_FALSE(part.delta.complete());
  for (int h = 0; h < H; ++h) {
    EXPECT_EQ(part.delta.at(L - 1, h), full.delta.at(L - 1, h));
    EXPECT_TRUE(std::isnan(part.delta.at(L - 2, h)));
  }
  cancel = true;
  const LogitLens lens = logitLens(*m, r, {}, stop);
  EXPECT_TRUE(lens.cancelled);
  EXPECT_EQ(lens.rowsDone, 0);
}

TEST(Attribution, NoOpPatchIsExactlyZero) {
  // Patching a head from a run where it computes the same output: the re-run's logit
  // difference equals the baseline exactly, so the fraction is exactly 0.
  const auto m = gpt2Model();
  const std::vector<int> ids = gpt2Ids();
  std::vector<int> other = ids;
  other.back() = (other.back() + 9) % m->config().vocabSize;  // only the last token differs
  const ForwardResult clean = m->forward(ids), corrupt = m->forward(other);
  const PatchingResult p = patchResidual(*m, clean, corrupt);
  for (int l = 0; l < m->config().nLayer; ++l)
    for (int t = 0; t + 1 < int(ids.size()); ++t) EXPECT_EQ(p.fraction.at(l, t), 0.0f) << l << "," << t;
  EXPECT_NEAR(p.fraction.at(0, int(ids.size()) - 1), 1.0f, 1e-5f);
}

// ---------------------------------------------------------------------------------------------
// The figure

TEST(AttributionFigure, DivergingAroundZeroWithLabelsAndNotComputedCells) {
  AttributionFigure f;
  f.rows = 2, f.cols = 3;
  f.values = {-2.0f, 0.0f, 2.0f, 1.0f, std::nanf(""), -1.0f};
  f.title = "test";
  f.valueTitle = "\xCE\x94 log p";
  f.cell = 40;
  f.fontPath = "none-such.ttf";  // the built-in font: no system dependence
  const Image im = renderAttributionFigure(f);
  ASSERT_EQ(im.cellPx, 40);
  auto centre = [&](int r, int c) {
    // The cell's corner pixel (numbers are drawn in the middle).
    return im.pixel(im.heatX + c * 40 + 1, im.heatY + r * 40 + 1);
  };
  EXPECT_EQ(centre(0, 0), colormapLookup(ColormapId::Diverging, 0.0f));
  EXPECT_EQ(centre(0, 1), colormapLookup(ColormapId::Diverging, 0.5f));
  EXPECT_EQ(centre(0, 2), colormapLookup(ColormapId::Diverging, 1.0f));
  EXPECT_EQ(centre(1, 0), colormapLookup(ColormapId::Diverging, 0.75f));
  EXPECT_EQ(centre(1, 1), kNotComputedColor);
  // Labels and the title put ink left of and above the grid.
  int ink = 0;
  for (int y = 0; y < im.heatY; ++y)
    for (int x = 0; x < im.width; ++x) ink += im.pixel(x, y).r < 128;
  EXPECT_GT(ink, 20);
  f.values.pop_back();
  EXPECT_THROW(renderAttributionFigure(f), InputError);
  f.values.push_back(0.0f);
  f.cell = 1000;
  f.maxSide = 2000;  // 3 columns of 1000 px
  EXPECT_THROW(renderAttributionFigure(f), UsageError);
}

// ---------------------------------------------------------------------------------------------
// The command line: the same numbers as the core API, and its exits

fs::path shipped() { return fs::path(ATTNVIZ_SHIPPED_MODEL_DIR); }
const char* kText = "The grace of our Lord. The grace of our";

TEST(AttributeCli, SweepFileEqualsTheCoreApi) {
  TempDir tmp;
  const auto m = Model::open(shipped().string());
  const ForwardResult r = m->forward(m->encode(kText));
  for (const char* kind : {"zero", "mean"}) {
    const fs::path out = tmp.path / (std::string(kind) + ".npy");
    const fs::path png = tmp.path / (std::string(kind) + ".png");
    const CliRun run = runBinary({"attribute", "--model", shipped().string(), "--text", kText,
                                  "--ablate-sweep", kind, "--out", out.string(), "--png",
                                  png.string()},
                                 tmp.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(run.err, "");  // no terminal: no progress
    const AblationSweep s = ablationSweep(
        *m, r, std::string(kind) == "zero" ? AblationKind::Zero : AblationKind::Mean);
    const NpyArray a = readNpy(out.string());
    EXPECT_EQ(a.shape, (std::vector<long long>{m->config().nLayer, m->config().nHead}));
    EXPECT_TRUE(a.data == s.delta.values) << kind;
    EXPECT_EQ(slurp(png.string()).substr(1, 3), "PNG");
    // A header line, the column titles, then the five largest |delta|.
    EXPECT_EQ(lineCount(run.out), 7) << run.out;
    EXPECT_NE(run.out.find("target " + std::to_string(s.target)), std::string::npos) << run.out;
  }
}

TEST(AttributeCli, PatchFileEqualsTheCoreApi) {
  TempDir tmp;
  const auto c = readCase("kjv_byte_2l")["patch"];
  const std::string clean = c["clean_text"].get<std::string>();
  const std::string corrupt = c["corrupt_text"].get<std::string>();
  const fs::path out = tmp.path / "p.npy";
  const CliRun run = runBinary({"attribute", "--model", shipped().string(), "--text", corrupt,
                                "--patch-from", clean, "--out", out.string()},
                               tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const auto m = Model::open(shipped().string());
  const PatchingResult p =
      patchHeads(*m, m->forward(m->encode(clean)), m->forward(m->encode(corrupt)));
  EXPECT_TRUE(readNpy(out.string()).data == p.fraction.values);
  EXPECT_NE(run.out.find("foil " + std::to_string(c["foil"].get<int>())), std::string::npos)
      << run.out;
  // An explicit foil.
  const CliRun foil = runBinary({"attribute", "--model", shipped().string(), "--text", corrupt,
                                 "--patch-from", clean, "--foil-id", "97", "--out", out.string()},
                                tmp.path);
  ASSERT_EQ(foil.exitCode, 0) << foil.err;
  AttributionTarget at;
  at.foil = 97;
  EXPECT_TRUE(readNpy(out.string()).data ==
              patchHeads(*m, m->forward(m->encode(clean)), m->forward(m->encode(corrupt)), at)
                  .fraction.values);
}

TEST(AttributeCli, BadInputExitsOneBadUsageExitsTwo) {
  TempDir tmp;
  const std::string model = shipped().string();
  const fs::path out = tmp.path / "never.npy";
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"attribute", "--model", model});
    return runBinary(args, tmp.path);
  };
  // Texts of different lengths: bad input, a message with both lengths, no file.
  CliRun r = run({"--text", "abcd", "--patch-from", "abcde", "--out", out.string()});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("5 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("4"), std::string::npos) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
  // The same text twice.
  r = run({"--text", "abcd", "--patch-from", "abcd", "--out", out.string()});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("nothing to restore"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  // A target outside the vocabulary (256 byte tokens), and other bad usage.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--text", "abcd", "--ablate-sweep", "zero", "--target-id", "256"},
           {"--text", "abcd", "--patch-from", "abce", "--target-id", "999"},
           {"--text", "abcd", "--patch-from", "abce", "--foil-id", "256"},
           {"--text", "abcd", "--ablate-sweep", "zero", "--position", "4"},
           {"--text", "abcd", "--ablate-sweep", "zero", "--position", "x"},
           {"--text", "abcd", "--ablate-sweep", "half"},
           {"--text", "abcd"},
           {"--text", "abcd", "--ablate-sweep", "zero", "--patch-from", "abce"},
           {"--text", "abcd", "--ablate-sweep", "zero", "--foil-id", "3"},
           {"--text", "abcd", "--ablate-sweep", "zero", "--ablate", "0:1"}}) {
    std::vector<std::string> a = args;
    a.push_back("--out");
    a.push_back(out.string());
    r = run(a);
    std::string joined;
    for (const auto& s : args) joined += s + " ";
    EXPECT_EQ(r.exitCode, 2) << joined << "\n" << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << joined << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << joined;
  }
}

}  // namespace
}  // namespace attnviz::testing
