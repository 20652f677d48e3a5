// The GGUF twins of the decoder families (qwen3, gemma2, gemma3, phi3, olmo2): every checkpoint
// decoder_families_reference.py writes, converted by tools/gguf/hf_to_gguf.py to F32 in
// llama.cpp's layout (decoder_families_gguf.py, at test time into a temp folder), through the real
// binary against the float64 torch reference: the same reference as the HF folder's, except for
// Gemma cases whose query_pre_attn_scalar is not llama.cpp's 1/sqrt(head_dim) rule (a GGUF has no
// such key), whose reference uses the rule. Their block description equals the HF folder's; bad
// metadata is refused with one line naming the file.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>

namespace attnviz::testing {
namespace {

constexpr double kWeightsAbs = 1e-5;
constexpr double kLogitsRel = 1e-4;

std::string joinIds(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

class DecoderFamiliesGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    const std::string out = shellQuote(dir_->path.string());
    const std::string cmd =
        ATTNVIZ_PYTHON " " + shellQuote((modelDir() / "decoder_families_reference.py").string()) +
        " " + out + " >/dev/null && " ATTNVIZ_PYTHON " " +
        shellQuote((modelDir() / "decoder_families_gguf.py").string()) + " " + out + " >/dev/null";
    if (std::system(cmd.c_str()) == 0)
      cases_ = nlohmann::json::parse(slurp((dir_->path / "gguf_cases.json").string()));
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override { ASSERT_FALSE(cases_.is_null()) << "decoder_families_gguf.py failed"; }

  static fs::path root() { return dir_->path; }
  static const nlohmann::json& cases() { return cases_; }

 private:
  static std::unique_ptr<TempDir> dir_;
  static nlohmann::json cases_;
};

std::unique_ptr<TempDir> DecoderFamiliesGguf::dir_;
nlohmann::json DecoderFamiliesGguf::cases_;

// `attnviz model --weights --logits` on every twin equals the torch reference: weights within
// 1e-5, logits within 1e-4 of the largest logit; Model::open names the family.
TEST_F(DecoderFamiliesGguf, EveryTwinMatchesTheTorchReference) {
  const auto& list = cases()["cases"];
  // 15 twins (LongRoPE's three: long factors, short factors, transformers 5's keys), three
  // Gemma 3 readings of local-layer metadata, a 46-layer Gemma 2 (the 27B rule).
  ASSERT_EQ(list.size(), 20u);
  std::set<std::string> families;
  int scaleRule = 0;
  for (const auto& c : list) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const fs::path file = root() / c["file"].get<std::string>();
    const std::string w = (root() / "w.npy").string(), z = (root() / "z.npy").string();
    const CliRun run =
        runBinary({"model", "--model", file.string(), "--ids",
                   joinIds(c["ids"].get<std::vector<int>>()), "--weights", w, "--logits", z},
                  root());
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const NpyArray weights = readNpy(w), logits = readNpy(z);
    const NpyArray wantW = readNpy((root() / c["weights"].get<std::string>()).string());
    const NpyArray wantZ = readNpy((root() / c["logits"].get<std::string>()).string());
    EXPECT_EQ(weights.shape, wantW.shape);
    EXPECT_EQ(logits.shape, wantZ.shape);
    expectClose(weights.data, wantW, kWeightsAbs, 0, name + " weights");
    expectClose(logits.data, wantZ, 0, kLogitsRel, name + " logits");
    const auto m = Model::open(file.string());
    EXPECT_EQ(m->config().family, c["family"].get<std::string>());
    families.insert(m->config().family);
    scaleRule += c["scale_rule"].get<bool>();
  }
  EXPECT_EQ(families, (std::set<std::string>{"qwen3", "gemma2", "gemma3_text", "phi3", "olmo2"}));
  EXPECT_EQ(scaleRule, 3);  // gemma2_untied, gemma3_layer_types, gemma2_46_layers
}

// The GGUF reader sets the block description the config.json reader sets, but for what the
// file's layout changes: Gemma's norm offset (stored in the weights) and, where
// query_pre_attn_scalar is not the head size, the score scale.
TEST_F(DecoderFamiliesGguf, BlockDescriptionEqualsTheFolders) {
  int checked = 0;
  for (const auto& c : cases()["cases"]) {
    if (c["hf"].is_null()) continue;
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    ++checked;
    const ModelConfig g = Model::open((root() / c["file"].get<std::string>()).string())->config();
    const ModelConfig h = Model::open((root() / c["hf"].get<std::string>()).string())->config();
    const bool gemma = h.family == "gemma2" || h.family == "gemma3_text";
    EXPECT_EQ(g.normWeightOffset, 0.0f);
    EXPECT_EQ(h.normWeightOffset, gemma ? 1.0f : 0.0f);
    if (!c["scale_rule"].get<bool>()) {
      EXPECT_FLOAT_EQ(g.scoreScaleOf(), h.scoreScaleOf());
    }
    // llama.cpp's rule: 1/sqrt(head size), 1/sqrt(d / heads) for Gemma 2's 46 layers.
    const int scaleDim = g.nLayer == 46 ? g.nEmbd / g.nHead : g.headSize;
    EXPECT_FLOAT_EQ(g.scoreScaleOf(), 1.0f / std::sqrt(float(scaleDim)));
    EXPECT_EQ(g.nLayer, h.nLayer);
    EXPECT_EQ(g.nHead, h.nHead);
    EXPECT_EQ(g.nKvHead, h.nKvHead);
    EXPECT_EQ(g.headSize, h.headSize);
    EXPECT_EQ(g.ropeStyle, h.ropeStyle);
    EXPECT_EQ(g.ropeDim, h.ropeDim);
    EXPECT_EQ(g.ropeTheta, h.ropeTheta);
    EXPECT_EQ(g.ropeScaling.kind, h.ropeScaling.kind);
    EXPECT_EQ(g.ropeScaling.factor, h.ropeScaling.factor);
    // LongRoPE: the factors as tensors, the original length and attention factor as keys.
    EXPECT_EQ(g.ropeScaling.shortFactor, h.ropeScaling.shortFactor);
    EXPECT_EQ(g.ropeScaling.longFactor, h.ropeScaling.longFactor);
    if (h.ropeScaling.kind == RopeScaling::Kind::LongRope) {
      EXPECT_EQ(g.ropeScaling.originalMaxPositions, h.ropeScaling.originalMaxPositions);
      EXPECT_EQ(g.ropeScaling.attentionFactor, h.ropeScaling.attentionFactor);
    }
    EXPECT_EQ(g.scaleLocalRope, h.scaleLocalRope);
    EXPECT_EQ(g.normPlacement, h.normPlacement);
    EXPECT_EQ(g.qkNorm, h.qkNorm);
    EXPECT_EQ(g.qkvBias, h.qkvBias);
    EXPECT_EQ(g.outBias, h.outBias);
    EXPECT_EQ(g.mlp, h.mlp);
    EXPECT_EQ(g.activation, h.activation);
    EXPECT_EQ(g.tiedHead, h.tiedHead);
    EXPECT_EQ(g.embedScale, h.embedScale);
    EXPECT_EQ(g.attnSoftcap, h.attnSoftcap);
    EXPECT_EQ(g.logitSoftcap, h.logitSoftcap);
    EXPECT_FLOAT_EQ(g.layerNormEps, h.layerNormEps);
    for (int l = 0; l < h.nLayer; ++l) {
      EXPECT_EQ(g.windowOf(l), h.windowOf(l)) << "layer " << l;
      EXPECT_EQ(g.ropeThetaOf(l), h.ropeThetaOf(l)) << "layer " << l;
    }
  }
  EXPECT_EQ(checked, 18);
}

// `attnviz generate` on a twin (one decode step a token over the KV cache) continues as on its HF
// folder, for the cases whose scale is the same.
TEST_F(DecoderFamiliesGguf, GreedyDecodingEqualsTheFolders) {
  int checked = 0;
  for (const auto& c : cases()["cases"]) {
    if (c["scale_rule"].get<bool>() || c["hf"].is_null()) continue;
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const std::string ids = joinIds(c["ids"].get<std::vector<int>>());
    auto gen = [&](const fs::path& model) {
      return runBinary({"generate", "--model", model.string(), "--ids", ids, "-n", "6",
                        "--print-ids"},
                       root());
    };
    const CliRun fromGguf = gen(root() / c["file"].get<std::string>());
    const CliRun fromHf = gen(root() / c["hf"].get<std::string>());
    ASSERT_EQ(fromGguf.exitCode, 0) << fromGguf.err;
    ASSERT_EQ(fromHf.exitCode, 0) << fromHf.err;
    EXPECT_EQ(fromGguf.out, fromHf.out);
    ++checked;
  }
  EXPECT_EQ(checked, 15);
}

// Metadata attnviz cannot honour: exit 1, one line on stderr naming the file and the key.
TEST_F(DecoderFamiliesGguf, BadFilesExitOneNamingTheFile) {
  const auto& bad = cases()["bad"];
  ASSERT_EQ(bad.size(), 8u);
  for (const auto& b : bad) {
    SCOPED_TRACE(b["name"].get<std::string>());
    const fs::path file = root() / b["file"].get<std::string>();
    const CliRun r = runBinary({"model", "--model", file.string(), "--ids", "1,5,7"}, root());
    const std::string expect = b["expect"].get<std::string>();
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << "want \"" << expect << "\" in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
}  // namespace attnviz::testing
