// The decoder families beyond LLaMA (qwen3, gemma2, gemma3_text, phi3, olmo2) through the real
// binary: random-init checkpoints in Hugging Face's layout, two variants a family, made at test
// time by decoder_families_reference.py into a temp folder, against its float64 torch forward
// pass (written from the published architectures); and their config.json keys refused with one
// line naming the file when attnviz cannot honour them.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <functional>
#include <fstream>
#include <iostream>
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

double maxAbsDiff(const NpyArray& a, const NpyArray& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.data.size() && i < b.data.size(); ++i)
    worst = std::max(worst, std::fabs(double(a.data[i]) - double(b.data[i])));
  return worst;
}

double maxAbs(const NpyArray& a) {
  double m = 0.0;
  for (float v : a.data) m = std::max(m, double(std::fabs(v)));
  return m;
}

class DecoderFamilies : public ::testing::Test {
 protected:
  // The script runs once for the suite.
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    const std::string cmd = ATTNVIZ_PYTHON " " +
                            shellQuote((modelDir() / "decoder_families_reference.py").string()) +
                            " " + shellQuote(dir_->path.string()) + " >/dev/null";
    const int rc = std::system(cmd.c_str());
    if (rc == 0) cases_ = nlohmann::json::parse(slurp((dir_->path / "cases.json").string()));
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    ASSERT_FALSE(cases_.is_null()) << "decoder_families_reference.py failed";
  }

  static fs::path root() { return dir_->path; }
  static const nlohmann::json& cases() { return cases_; }

  // A copy of case `name`'s folder with config.json edited by `edit`.
  static fs::path brokenCopy(const std::string& name, const std::string& as,
                             const std::function<void(nlohmann::json&)>& edit) {
    const fs::path src = root() / name, dst = root() / as;
    fs::create_directories(dst);
    for (const auto& e : fs::directory_iterator(src))
      fs::copy(e.path(), dst / e.path().filename(), fs::copy_options::overwrite_existing);
    nlohmann::json j = nlohmann::json::parse(slurp((dst / "config.json").string()));
    edit(j);
    std::ofstream(dst / "config.json") << j.dump(2);
    return dst;
  }

 private:
  static std::unique_ptr<TempDir> dir_;
  static nlohmann::json cases_;
};

std::unique_ptr<TempDir> DecoderFamilies::dir_;
nlohmann::json DecoderFamilies::cases_;

// `attnviz model --weights --logits` equals the torch reference for every variant of every
// family: weights within 1e-5, logits within 1e-4 of the largest logit.
TEST_F(DecoderFamilies, EveryVariantMatchesTheTorchReference) {
  const auto& list = cases()["cases"];
  ASSERT_EQ(list.size(), 17u);
  std::set<std::string> families;
  for (const auto& c : list) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const fs::path model = root() / c["dir"].get<std::string>();
    const std::vector<int> ids = c["ids"].get<std::vector<int>>();
    const std::string w = (root() / "w.npy").string(), z = (root() / "z.npy").string();
    const CliRun run = runBinary(
        {"model", "--model", model.string(), "--ids", joinIds(ids), "--weights", w, "--logits", z},
        root());
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const NpyArray weights = readNpy(w), logits = readNpy(z);
    const NpyArray wantW = readNpy((root() / c["weights"].get<std::string>()).string());
    const NpyArray wantZ = readNpy((root() / c["logits"].get<std::string>()).string());
    EXPECT_EQ(weights.shape, wantW.shape);
    EXPECT_EQ(logits.shape, wantZ.shape);
    expectClose(weights.data, wantW, kWeightsAbs, 0, name + " weights");
    expectClose(logits.data, wantZ, 0, kLogitsRel, name + " logits");
    std::cout << "[ errors   ] " << name << ": weights " << maxAbsDiff(weights, wantW)
              << ", logits " << maxAbsDiff(logits, wantZ) << " (max |logit| " << maxAbs(wantZ)
              << ")\n";
    const auto m = Model::open(model.string());
    EXPECT_EQ(m->config().family, c["family"].get<std::string>());
    families.insert(m->config().family);
  }
  EXPECT_EQ(families, (std::set<std::string>{"qwen3", "gemma2", "gemma3_text", "phi3", "olmo2"}));
}

// `attnviz generate` (the prompt's pass, then one decode step a token over the KV cache: local
// windows, per-layer RoPE bases and softcaps inside a step) continues as the reference's greedy
// full recomputes do, for every variant without a near tie.
TEST_F(DecoderFamilies, GreedyDecodingMatchesTheReference) {
  int checked = 0;
  for (const auto& c : cases()["cases"]) {
    if (c["greedy"].is_null()) continue;
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const std::vector<int> ids = c["ids"].get<std::vector<int>>();
    const std::vector<int> want = c["greedy"].get<std::vector<int>>();
    const CliRun run =
        runBinary({"generate", "--model", (root() / c["dir"].get<std::string>()).string(), "--ids",
                   joinIds(ids), "-n", std::to_string(want.size()), "--print-ids"},
                  root());
    ASSERT_EQ(run.exitCode, 0) << run.err;
    std::string line;
    for (int id : want) line += (line.empty() ? "" : " ") + std::to_string(id);
    EXPECT_EQ(run.out, line + "\n");
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// Exit 1 and one line that names config.json and contains `problem`; nothing on stdout.
void expectRefused(const CliRun& r, const fs::path& dir, const std::string& problem) {
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find((dir / "config.json").string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << "want \"" << problem << "\" in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// The row inspector's q/k norms (Model::layerQkNorms): each head's ‖q_i‖ and ‖k_i‖ before and
// after the family's q/k norm, per head (qwen3, gemma3_text) or over the whole width (olmo2),
// equal the reference's in every layer; a family without one has none.
TEST_F(DecoderFamilies, QkNormsBeforeAndAfterTheNormMatchTheReference) {
  std::set<std::string> checked;
  for (const auto& c : cases()["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const auto m = Model::open((root() / c["dir"].get<std::string>()).string());
    const ForwardResult r = m->forward(c["ids"].get<std::vector<int>>());
    if (!c.contains("q_norms")) {
      EXPECT_EQ(m->config().qkNorm, QkNorm::None);
      EXPECT_EQ(m->layerQkNorms(r, 0).heads, 0);
      continue;
    }
    const NpyArray wantQ = readNpy((root() / c["q_norms"].get<std::string>()).string());
    const NpyArray wantK = readNpy((root() / c["k_norms"].get<std::string>()).string());
    const int L = m->config().nLayer;
    ASSERT_EQ(wantQ.shape.size(), 4u);
    ASSERT_EQ(int(wantQ.shape[0]), L);
    const std::size_t qn = wantQ.data.size() / L / 2, kn = wantK.data.size() / L / 2;
    for (int l = 0; l < L; ++l) {
      const Model::QkNorms got = m->layerQkNorms(r, l);
      ASSERT_EQ(got.heads, int(wantQ.shape[2]));
      ASSERT_EQ(got.kvHeads, int(wantK.shape[2]));
      ASSERT_EQ(got.qBefore.size(), qn);
      ASSERT_EQ(got.kAfter.size(), kn);
      auto near = [&](const std::vector<float>& v, const NpyArray& want, std::size_t at,
                      const char* what) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          const double w = want.data[at + i];
          ASSERT_NEAR(v[i], w, 1e-5 * std::max(1.0, std::fabs(w)))
              << what << " layer " << l << " index " << i;
        }
      };
      near(got.qBefore, wantQ, (std::size_t(l) * 2) * qn, "q before");
      near(got.qAfter, wantQ, (std::size_t(l) * 2 + 1) * qn, "q after");
      near(got.kBefore, wantK, (std::size_t(l) * 2) * kn, "k before");
      near(got.kAfter, wantK, (std::size_t(l) * 2 + 1) * kn, "k after");
    }
    checked.insert(m->config().family);
  }
  EXPECT_EQ(checked, (std::set<std::string>{"qwen3", "gemma3_text", "olmo2"}));
}

// What a Gemma config can say that attnviz cannot run: a sliding_window_pattern that is not a
// positive integer, a layer type that is neither sliding nor full, a layer_types list of the
// wrong length, a rope_scaling (or rope_parameters) type it does not implement, a scaled RoPE in
// the local layers, bidirectional attention (EmbeddingGemma).
TEST_F(DecoderFamilies, BadGemmaLayerKeysAreRefusedNamingTheFile) {
  auto run = [&](const fs::path& dir) {
    return runBinary({"model", "--model", dir.string(), "--ids", "1,5,7"}, root());
  };
  {
    const fs::path d = brokenCopy("gemma3_pattern", "bad_pattern_type",
                                  [](nlohmann::json& j) { j["sliding_window_pattern"] = "six"; });
    expectRefused(run(d), d, "sliding_window_pattern");
  }
  {
    const fs::path d = brokenCopy("gemma3_pattern", "bad_pattern_zero",
                                  [](nlohmann::json& j) { j["sliding_window_pattern"] = 0; });
    expectRefused(run(d), d, "sliding_window_pattern");
  }
  {
    const fs::path d = brokenCopy("gemma3_layer_types", "bad_layer_type", [](nlohmann::json& j) {
      j["layer_types"][1] = "chunked_attention";
    });
    expectRefused(run(d), d, "layer_types[1] \"chunked_attention\"");
  }
  {
    const fs::path d = brokenCopy("gemma3_layer_types", "bad_layer_type_number",
                                  [](nlohmann::json& j) { j["layer_types"][2] = 3; });
    expectRefused(run(d), d, "layer_types[2] 3");
  }
  {
    const fs::path d = brokenCopy("gemma2_window", "bad_layer_types_length", [](nlohmann::json& j) {
      j["layer_types"] = {"sliding_attention", "full_attention"};
    });
    expectRefused(run(d), d, "layer_types");
  }
  {
    const fs::path d = brokenCopy("gemma3_pattern", "bad_rope_scaling", [](nlohmann::json& j) {
      j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
    });
    expectRefused(run(d), d, "rope_scaling type \"yarn\"");
  }
  {
    const fs::path d = brokenCopy("gemma3_pattern", "bad_bidirectional", [](nlohmann::json& j) {
      j["use_bidirectional_attention"] = true;
    });
    expectRefused(run(d), d, "use_bidirectional_attention");
  }
  {
    const fs::path d = brokenCopy(
        "gemma3_rope_parameters", "bad_rope_parameters",
        [](nlohmann::json& j) { j["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; });
    expectRefused(run(d), d, "rope_parameters.full_attention type \"yarn\"");
  }
  {
    const fs::path d =
        brokenCopy("gemma3_rope_parameters", "bad_local_rope", [](nlohmann::json& j) {
          j["rope_parameters"]["sliding_attention"]["rope_type"] = "linear";
        });
    expectRefused(run(d), d, "rope_parameters.sliding_attention type \"linear\"");
  }
}

// Partial rotary and LongRoPE keys attnviz cannot honour: a factor that rotates an odd number of
// dimensions or lies outside (0, 1], LongRoPE factor lists of the wrong length or with a factor
// that is not a positive number.
TEST_F(DecoderFamilies, BadRopeKeysAreRefusedNamingTheFile) {
  auto run = [&](const fs::path& dir) {
    return runBinary({"model", "--model", dir.string(), "--ids", "1,5,7"}, root());
  };
  {
    const fs::path d = brokenCopy("phi4_mini_partial", "bad_partial_odd",
                                  [](nlohmann::json& j) { j["partial_rotary_factor"] = 0.125; });
    expectRefused(run(d), d, "rotates 3 dimensions");
  }
  {
    const fs::path d = brokenCopy("phi4_mini_partial", "bad_partial_range",
                                  [](nlohmann::json& j) { j["partial_rotary_factor"] = 1.5; });
    expectRefused(run(d), d, "\"partial_rotary_factor\" must be a number in (0, 1]");
  }
  {
    const fs::path d = brokenCopy("phi3_longrope", "bad_longrope_length", [](nlohmann::json& j) {
      j["rope_scaling"]["short_factor"] = {1.0, 2.0};
    });
    expectRefused(run(d), d, "rope_scaling.short_factor must list 6 numbers");
  }
  {
    const fs::path d = brokenCopy("phi3_longrope", "bad_longrope_zero", [](nlohmann::json& j) {
      j["rope_scaling"]["long_factor"][3] = 0;
    });
    expectRefused(run(d), d, "rope_scaling.long_factor holds 0");
  }
}

// Gemma 3's image-text checkpoint (model_type gemma3): the language model opens as gemma3_text
// from text_config and the "language_model." tensors (EveryVariantMatchesTheTorchReference holds
// its numbers), and its info says the vision tower was not loaded: in ModelConfig::note and in
// one line of `attnviz model`. A gemma3 config without text_config, or with a text_config of
// another model type, is refused naming the file.
TEST_F(DecoderFamilies, Gemma3ImageTextCheckpointOpensItsLanguageModel) {
  const fs::path dir = root() / "gemma3_multimodal";
  const auto m = Model::open(dir.string());
  EXPECT_EQ(m->config().family, "gemma3_text");
  EXPECT_NE(m->config().note.find("vision tower not loaded"), std::string::npos)
      << m->config().note;
  EXPECT_EQ(m->config().nLayer, 6);
  EXPECT_EQ(m->config().windowOf(5), 0);  // sliding_window_pattern's default 6
  EXPECT_EQ(m->config().windowOf(4), 5);
  EXPECT_EQ(m->config().eosId, std::optional<int>(2));  // from text_config
  const CliRun run = runBinary({"model", "--model", dir.string(), "--ids", "1,5,7"}, root());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\nnote: vision tower not loaded"), std::string::npos) << run.out;
  {
    const fs::path d = brokenCopy("gemma3_multimodal", "bad_no_text_config",
                                  [](nlohmann::json& j) { j.erase("text_config"); });
    expectRefused(runBinary({"model", "--model", d.string(), "--ids", "1,5,7"}, root()), d,
                  "text_config");
  }
  {
    const fs::path d = brokenCopy("gemma3_multimodal", "bad_text_model_type", [](nlohmann::json& j) {
      j["text_config"]["model_type"] = "llama";
    });
    expectRefused(runBinary({"model", "--model", d.string(), "--ids", "1,5,7"}, root()), d,
                  "text_config.model_type \"llama\"");
  }
}

}  // namespace
}  // namespace attnviz::testing
