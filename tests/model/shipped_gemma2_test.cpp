// The third shipped model (assets/models/kjv-sp-gemma2, tools/train/train_gemma2.py): the Gemma 2
// layout (sqrt(d) embeddings, four (1 + w) norms a layer, soft-capped scores and logits, even
// layers local with a sliding window, GeGLU) with kjv-sp-llama's tokenizer. Through the real
// binary: `attnviz model` computes what an independent float64 torch reference computes
// (shipped_gemma2_reference.py, run here); its local layers put exactly nothing beyond the
// window while a global head reaches far back; and the model card's head scores hold.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

namespace attnviz::testing {
namespace {

fs::path shippedGemma2() {
  return fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "kjv-sp-gemma2";
}

nlohmann::json readJson(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::string joinIds(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// `attnviz model --ids` on the shipped folder -> the weights [L, H, T, T] (and the logits).
struct Dump {
  NpyArray weights, logits;
  int L = 0, H = 0, T = 0;
  double at(int l, int h, int i, int j) const {
    return double(weights.data[((std::size_t(l) * H + h) * T + i) * T + j]);
  }
};

Dump runModel(const std::vector<int>& ids, const fs::path& dir) {
  const std::string w = (dir / "A.npy").string(), z = (dir / "Z.npy").string();
  const CliRun run = runBinary({"model", "--model", shippedGemma2().string(), "--ids",
                                joinIds(ids), "--weights", w, "--logits", z},
                               dir);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  Dump d;
  if (run.exitCode != 0) return d;
  d.weights = readNpy(w);
  d.logits = readNpy(z);
  if (d.weights.shape.size() == 4) {
    d.L = int(d.weights.shape[0]);
    d.H = int(d.weights.shape[1]);
    d.T = int(d.weights.shape[2]);
  }
  return d;
}

TEST(ShippedGemma2, OpensAsAGemma2FolderWithLocalAndGlobalLayers) {
  const auto m = Model::open(shippedGemma2().string());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.family, "gemma2");
  EXPECT_EQ(c.nLayer, 4);
  EXPECT_EQ(c.nHead, 8);
  EXPECT_EQ(c.nKvHead, 2);
  const nlohmann::json cfg = readJson(shippedGemma2() / "config.json");
  const int W = cfg["sliding_window"].get<int>();
  for (int l = 0; l < c.nLayer; ++l) EXPECT_EQ(c.windowOf(l), l % 2 == 0 ? W : 0) << l;
  EXPECT_FLOAT_EQ(c.attnSoftcap, cfg["attn_logit_softcapping"].get<float>());
  EXPECT_FLOAT_EQ(c.logitSoftcap, cfg["final_logit_softcapping"].get<float>());
}

// The reference script runs once here (about two seconds); then one `attnviz model` run:
// (a) every layer's and head's weights within 1e-5 of the float64 reference and the logits
// within 1e-4 of the largest; (b) on the same pass, the local layers' weights on keys at least W
// back are exactly 0, and the card's long-range head of a global layer puts more than 0.5 of its
// weight there.
TEST(ShippedGemma2Cli, MatchesTheFloat64ReferenceAndKeepsItsWindows) {
  TempDir tmp;
  const std::string cmd =
      ATTNVIZ_PYTHON " " + shellQuote((modelDir() / "shipped_gemma2_reference.py").string()) +
      " " + shellQuote(tmp.path.string()) + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::vector<int> ids = readJson(tmp.path / "ids.json")["ids"].get<std::vector<int>>();
  const Dump d = runModel(ids, tmp.path);
  const NpyArray wantW = readNpy((tmp.path / "weights.npy").string());
  const NpyArray wantZ = readNpy((tmp.path / "logits.npy").string());
  ASSERT_EQ(d.weights.shape, wantW.shape);
  ASSERT_EQ(d.logits.shape, wantZ.shape);
  expectClose(d.weights.data, wantW, 1e-5, 0, "weights");
  expectClose(d.logits.data, wantZ, 0, 1e-4, "logits");

  const nlohmann::json cfg = readJson(shippedGemma2() / "config.json");
  const int W = cfg["sliding_window"].get<int>();
  ASSERT_GT(d.T, 2 * W) << "the text is longer than two windows";
  int beyond = 0;
  for (int l = 0; l < d.L; l += 2)
    for (int h = 0; h < d.H; ++h)
      for (int i = W; i < d.T; ++i)
        for (int j = 0; j <= i - W; ++j) beyond += d.at(l, h, i, j) != 0.0;
  EXPECT_EQ(beyond, 0) << "weights beyond the window in a local layer";

  const nlohmann::json sm = readJson(shippedGemma2() / "head_scores.json")["gemma2"]["summary"];
  const int gl = sm["long_range_head"][0].get<int>(), gh = sm["long_range_head"][1].get<int>();
  ASSERT_EQ(gl % 2, 1) << "the long-range head is in a global layer";
  double far = 0;
  for (int i = W; i < d.T; ++i)
    for (int j = 0; j <= i - W; ++j) far += d.at(gl, gh, i, j);
  far /= d.T - W;
  EXPECT_GT(far, 0.5) << "layer " << gl << " head " << gh << " beyond the window";
  std::printf("layer %d head %d: %.3f of its weight beyond the %d-token window\n", gl, gh, far, W);
}

// The model card's scores (head_scores.json, measured in torch) through the binary, on the
// probes it lists: the best induction head's score on the random probe of seed 0 and on the
// first English probe, the best previous-token head's score on the random probe; each within
// 0.005. And the card's long-range head on the local/global preset's text within 0.005.
TEST(ShippedGemma2Cli, TheCardsHeadScoresHold) {
  TempDir tmp;
  const nlohmann::json s = readJson(shippedGemma2() / "head_scores.json");
  const int il = s["best_induction_head"][0].get<int>(), ih = s["best_induction_head"][1].get<int>();
  const int pl = s["best_previous_token_head"][0].get<int>();
  const int ph = s["best_previous_token_head"][1].get<int>();
  {
    const nlohmann::json& p = s["probe_random_seed0"];
    const Dump d = runModel(p["ids"].get<std::vector<int>>(), tmp.path);
    const int L = p["repeat_len"].get<int>();
    ASSERT_EQ(d.T, 2 * L + 1);
    double ind = 0, prev = 0;
    for (int t = L + 1; t <= 2 * L; ++t) ind += d.at(il, ih, t, t - L + 1);
    for (int t = 1; t < d.T; ++t) prev += d.at(pl, ph, t, t - 1);
    EXPECT_NEAR(ind / L, p["induction"].get<double>(), 0.005);
    EXPECT_NEAR(prev / (d.T - 1), p["previous_token"].get<double>(), 0.005);
    EXPECT_GE(ind / L, 0.5) << "an induction head";
    EXPECT_GE(prev / (d.T - 1), 0.8) << "a previous-token head";
  }
  {
    const nlohmann::json& p = s["probe_english0"];
    const Dump d = runModel(p["ids"].get<std::vector<int>>(), tmp.path);
    const int L = p["repeat_len"].get<int>();
    ASSERT_EQ(d.T, 2 * L + 1);
    double ind = 0;
    for (int t = L + 1; t <= 2 * L; ++t) ind += d.at(il, ih, t, t - L + 1);
    EXPECT_NEAR(ind / L, p["induction"].get<double>(), 0.005);
  }
  {
    const nlohmann::json& g = s["gemma2"];
    const nlohmann::json& e = g["texts"]["local_global"];
    const Dump d = runModel(e["ids"].get<std::vector<int>>(), tmp.path);
    const int W = g["sliding_window"].get<int>();
    for (int l = 0; l < d.L; ++l)
      for (int h = 0; h < d.H; ++h) {
        double far = 0;
        for (int i = W; i < d.T; ++i)
          for (int j = 0; j <= i - W; ++j) far += d.at(l, h, i, j);
        EXPECT_NEAR(far / (d.T - W), e["beyond_window"][l][h].get<double>(), 0.005)
            << "layer " << l << " head " << h;
      }
  }
}

}  // namespace
}  // namespace attnviz::testing
