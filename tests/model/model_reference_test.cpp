// The forward pass against the torch reference (make_gpt2_fixtures.py): per-layer attention
// weights within 1e-5 abs, logits within 1e-4 of their scale, with and without interventions.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cstdlib>

namespace attnviz::testing {
namespace {

constexpr double kWeightsAbs = 1e-5;
constexpr double kLogitsRel = 1e-4;
// GPT-2 small: 12 float32 layers of width 768 against float64. The portable build (SSE2, no FMA:
// each product rounded before its sum) measured 1.02e-5 at worst on a weight.
constexpr double kWeightsAbsTwelveLayers = 2e-5;

nlohmann::json readCases(const fs::path& dir) {
  return nlohmann::json::parse(slurp((dir / "cases.json").string()));
}

Interventions interventionsOf(const nlohmann::json& c, const ModelConfig& cfg) {
  Interventions iv;
  for (const auto& a : c["ablate"]) {
    const std::string s = a.get<std::string>();
    iv.ablate(std::stoi(s.substr(0, s.find(':'))), std::stoi(s.substr(s.find(':') + 1)), cfg);
  }
  MaskSpec mask;
  mask.window = c["window"].get<int>();
  const float tau = c["temperature"].get<float>();
  if (mask.window > 0 || tau != 1.0f) iv.setAll(mask, tau, cfg.nLayer);
  return iv;
}

std::vector<float> allWeights(const ForwardResult& r) {
  std::vector<float> out;
  for (const auto& l : r.layers)
    out.insert(out.end(), l.site().weights.data.begin(), l.site().weights.data.end());
  return out;
}

std::vector<float> logitsOf(const ForwardResult& r) {
  return std::vector<float>(r.logits.data(), r.logits.data() + r.logits.size());
}

// Every case of one fixture folder through the core API.
void checkFixture(const fs::path& dir) {
  const auto model = Model::open(dir.string());
  const nlohmann::json cases = readCases(dir);
  const std::vector<int> ids = cases["ids"].get<std::vector<int>>();
  // The text path: attnviz's tokenizer agrees with the script's Python BPE.
  EXPECT_EQ(model->encode(cases["text"].get<std::string>()), ids) << dir;
  for (const auto& c : cases["cases"]) {
    const std::string name = dir.filename().string() + "/" + c["name"].get<std::string>();
    const ForwardResult r = model->forward(ids, interventionsOf(c, model->config()));
    expectClose(allWeights(r), readNpy((dir / c["weights"].get<std::string>()).string()),
                kWeightsAbs, 0, name + " weights");
    expectClose(logitsOf(r), readNpy((dir / c["logits"].get<std::string>()).string()), 0,
                kLogitsRel, name + " logits");
  }
}

TEST(ModelReference, F32PrefixTiedGeluNewMatchesTorch) {
  checkFixture(fixture("f32_prefix_tied_gelu_new"));
}
TEST(ModelReference, F16UntiedGeluMatchesTorch) { checkFixture(fixture("f16_untied_gelu")); }
TEST(ModelReference, Bf16PrefixUntiedMatchesTorch) {
  checkFixture(fixture("bf16_prefix_untied_gelu_new"));
}
TEST(ModelReference, F32UntiedGeluInnerSetMatchesTorch) {
  checkFixture(fixture("f32_untied_gelu_inner"));
}

TEST(ModelReference, LoadReportsHowItHoldsTheWeights) {
  EXPECT_EQ(Model::open(fixture("f32_prefix_tied_gelu_new").string())->weightsDescription(),
            "F32 (mapped)");
  EXPECT_EQ(Model::open(fixture("f16_untied_gelu").string())->weightsDescription(),
            "F16 (converted to F32)");
}

TEST(ModelReference, ProgressRisesToOne) {
  std::vector<double> seen;
  Model::open(fixture("f16_untied_gelu").string(),
                  [&](double f, const std::string&) { seen.push_back(f); });
  ASSERT_GE(seen.size(), 3u);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
  EXPECT_EQ(seen.back(), 1.0);
}

// models--NAME/snapshots/<hash>/ with relative symlinks into blobs/, no refs/main: the only
// snapshot is used, and the pass is the same as from the plain folder.
TEST(ModelReference, HuggingFaceCacheLayoutOpensAsItIs) {
  const fs::path src = fixture("f16_untied_gelu");
  TempDir tmp;
  const fs::path root = tmp.path / "models--tiny", snap = root / "snapshots" / "feedbeef";
  fs::create_directories(root / "blobs");
  fs::create_directories(snap);
  for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) {
    fs::copy(src / f, root / "blobs" / (std::string("sha-") + f));
    fs::create_symlink(fs::path("..") / ".." / "blobs" / (std::string("sha-") + f), snap / f);
  }
  const std::vector<int> ids{3, 1, 4, 1, 5, 9, 2, 6};
  const auto cached = Model::open(root.string());
  EXPECT_EQ(fs::path(cached->files().dir).filename(), "feedbeef");
  EXPECT_EQ(logitsOf(cached->forward(ids)), logitsOf(Model::open(src.string())->forward(ids)));
  EXPECT_EQ(Model::open(snap.string())->config().nLayer, 3);
}

// An intervention in layer L re-runs layers >= L only, and gives what a full pass gives.
TEST(ModelReference, RerunFromLayerEqualsFullPassWithTheIntervention) {
  const fs::path dir = fixture("f32_untied_gelu_inner");
  const auto model = Model::open(dir.string());
  const std::vector<int> ids = readCases(dir)["ids"].get<std::vector<int>>();
  ForwardResult r = model->forward(ids);
  const Tensor3 layer0 = r.layers[0].site().weights;
  Interventions iv;
  iv.ablate(1, 2, model->config());
  iv.layer(2, model->config().nLayer).temperature = 0.5f;
  model->rerunFrom(r, 1, iv);
  const ForwardResult full = model->forward(ids, iv);
  EXPECT_EQ(r.layers[0].site().weights.data, layer0.data);  // untouched
  for (int l = 0; l < model->config().nLayer; ++l)
    EXPECT_EQ(r.layers[l].site().weights.data, full.layers[l].site().weights.data) << "layer " << l;
  EXPECT_EQ(logitsOf(r), logitsOf(full));
  // And it changed the prediction's logits relative to the plain pass.
  EXPECT_NE(logitsOf(r), logitsOf(model->forward(ids)));
}

TEST(ModelReference, TopKIsSortedSoftmaxOfTheLastRow) {
  const auto model = Model::open(fixture("f16_untied_gelu").string());
  const ForwardResult r = model->forward({10, 20, 30});
  const auto top = Model::topK(r, 5);
  ASSERT_EQ(top.size(), 5u);
  double sum = 0.0, mx = r.logits.row(2).maxCoeff();
  for (int v = 0; v < r.logits.cols(); ++v) sum += std::exp(double(r.logits(2, v)) - mx);
  for (std::size_t i = 0; i < top.size(); ++i) {
    EXPECT_NEAR(top[i].prob, std::exp(double(r.logits(2, top[i].id)) - mx) / sum, 1e-6);
    if (i) {
      EXPECT_GE(top[i - 1].prob, top[i].prob);
    }
  }
  EXPECT_EQ(top[0].id,
            int(std::max_element(r.logits.row(2).data(), r.logits.row(2).data() + r.logits.cols()) -
                r.logits.row(2).data()));
}

// The CLI writes what the reference computed: --weights [L,H,T,T], --layer L [H,T,T], --logits.
TEST(ModelCli, WeightsAndLogitsFilesMatchTorch) {
  const fs::path dir = fixture("f32_prefix_tied_gelu_new");
  const nlohmann::json cases = readCases(dir);
  TempDir tmp;
  const std::string w = (tmp.path / "w.npy").string(), z = (tmp.path / "z.npy").string(),
                    w1 = (tmp.path / "w1.npy").string();
  const CliRun run = runBinary(
      {"model", "--model", dir.string(), "--text", cases["text"].get<std::string>(), "--ablate",
       "0:1", "--ablate", "1:0", "--temperature", "0.5", "--weights", w, "--logits", z},
      tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const NpyArray weights = readNpy(w), logits = readNpy(z);
  const NpyArray wantW = readNpy((dir / "combined_weights.npy").string());
  EXPECT_EQ(weights.shape, wantW.shape);
  expectClose(weights.data, wantW, kWeightsAbs, 0, "CLI weights");
  expectClose(logits.data, readNpy((dir / "combined_logits.npy").string()), 0, kLogitsRel,
              "CLI logits");

  const CliRun one = runBinary({"model", "--model", dir.string(), "--ids", "5,6,7,8", "--layer",
                                "1", "--weights", w1, "--mask", "window:3"},
                               tmp.path);
  ASSERT_EQ(one.exitCode, 0) << one.err;
  const NpyArray l1 = readNpy(w1);
  EXPECT_EQ(l1.shape, (std::vector<long long>{2, 4, 4}));
  // window:3 with the causal mask: query 3 never sees key 0.
  EXPECT_EQ(l1.data[(0 * 4 + 3) * 4 + 0], 0.0f);
  EXPECT_GT(l1.data[(0 * 4 + 3) * 4 + 1], 0.0f);
}

TEST(ModelCli, TopKPrintsOneCandidatePerLine) {
  const fs::path dir = fixture("f16_untied_gelu");
  TempDir tmp;
  const CliRun run =
      runBinary({"model", "--model", dir.string(), "--ids", "10,20,30", "--top-k", "3"}, tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const auto model = Model::open(dir.string());
  const auto top = Model::topK(model->forward({10, 20, 30}), 3);
  std::istringstream lines(run.out);
  for (const TokenProb& t : top) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    int id = -1;
    double p = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "%d\t%lf", &id, &p), 2) << line;
    EXPECT_EQ(id, t.id);
    EXPECT_NEAR(p, t.prob, 1e-6);
  }
  EXPECT_EQ(lineCount(run.out), 3);
}

// ---------------------------------------------------------------------------------------------
// The LLaMA family (make_llama_fixtures.py, llama_reference.py): GQA 8/2, MQA, Qwen2's biases, a
// Mistral window shorter than the text, llama3 and linear RoPE scaling, untied heads, F16, BF16
// and sharded files, each against the float64 torch reference.

fs::path llamaFixture(const std::string& name) { return fixture("llama") / name; }

TEST(LlamaReference, GqaTiedF32MatchesTorch) { checkFixture(llamaFixture("llama_gqa")); }
TEST(LlamaReference, MqaUntiedF16MatchesTorch) { checkFixture(llamaFixture("llama_mqa_f16")); }
TEST(LlamaReference, Llama3ScalingBf16ShardedMatchesTorch) {
  checkFixture(llamaFixture("llama3_bf16_sharded"));
}
TEST(LlamaReference, LinearScalingExplicitHeadDimMatchesTorch) {
  checkFixture(llamaFixture("llama_linear"));
}
// Mistral's own window (5) AND the intervention window: window:3 narrows it, window:8 changes
// nothing (window_wide equals plain in the reference).
TEST(LlamaReference, MistralWindowMatchesTorch) { checkFixture(llamaFixture("mistral_window")); }
// Qwen2's q/k/v biases; its sliding_window is present but use_sliding_window is false.
TEST(LlamaReference, Qwen2BiasesMatchTorch) { checkFixture(llamaFixture("qwen2_bias")); }

TEST(LlamaReference, ConfigDescribesTheFamily) {
  const auto m = Model::open(llamaFixture("llama_gqa").string());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.family, "llama");
  EXPECT_EQ(c.nHead, 8);
  EXPECT_EQ(c.nKvHead, 2);
  EXPECT_EQ(c.kvHeadOf(5), 1);
  EXPECT_EQ(m->weightsDescription(), "F32 (mapped)");
  EXPECT_NE(c.describe().find("8 query heads, 2 KV heads (GQA"), std::string::npos) << c.describe();
  const auto mistral = Model::open(llamaFixture("mistral_window").string());
  EXPECT_EQ(mistral->config().windowOf(0), 5);
  EXPECT_EQ(Model::open(llamaFixture("qwen2_bias").string())->config().windowOf(0), 0);
  EXPECT_EQ(Model::open(llamaFixture("llama3_bf16_sharded").string())->weightsDescription(),
            "BF16 (converted to F32)");
}

// The intervention "RoPE off in this layer" changes that layer's weights (positions were doing
// something) and the rotation round-trips: applyRope then its inverse gives the input back.
TEST(LlamaReference, RopeOffChangesTheLayerAndRopeInverts) {
  const fs::path dir = llamaFixture("llama_gqa");
  const auto model = Model::open(dir.string());
  const std::vector<int> ids = readCases(dir)["ids"].get<std::vector<int>>();
  const ForwardResult plain = model->forward(ids);
  Interventions iv;
  iv.layer(1, model->config().nLayer).ropeOff = true;
  ForwardResult off = model->forward(ids);
  model->rerunFrom(off, 1, iv);
  EXPECT_EQ(off.layers[0].site().weights.data, plain.layers[0].site().weights.data);
  EXPECT_NE(off.layers[1].site().weights.data, plain.layers[1].site().weights.data);
  MatrixRM x = MatrixRM::Random(7, model->config().headSize);
  MatrixRM y = x;
  applyRope(model->config(), y, 3);
  EXPECT_GT((y - x).norm(), 1e-3);
  applyRope(model->config(), y, 3, true);
  EXPECT_LT((y - x).norm(), 1e-5);
}

// Through the real binary: `attnviz model --weights/--logits` for a GQA model gives [L, H, T, T]
// with H the query heads, equal to the reference.
TEST(LlamaCli, WeightsAndLogitsFilesMatchTorch) {
  const fs::path dir = llamaFixture("mistral_window");
  const nlohmann::json cases = readCases(dir);
  TempDir tmp;
  const std::string w = (tmp.path / "w.npy").string(), z = (tmp.path / "z.npy").string();
  std::string ids;
  for (int id : cases["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const CliRun run =
      runBinary({"model", "--model", dir.string(), "--ids", ids, "--ablate", "0:1", "--ablate",
                 "1:2", "--temperature", "0.5", "--mask", "window:3", "--weights", w, "--logits",
                 z},
                tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const NpyArray weights = readNpy(w);
  const NpyArray wantW = readNpy((dir / "combined_weights.npy").string());
  EXPECT_EQ(weights.shape, wantW.shape);
  expectClose(weights.data, wantW, kWeightsAbs, 0, "CLI weights");
  expectClose(readNpy(z).data, readNpy((dir / "combined_logits.npy").string()), 0, kLogitsRel,
              "CLI logits");
}

// A real trained LLaMA model: stories260K (../shared/testdata), converted from its GGUF to an HF
// folder by stories260k_to_hf.py (q and k permuted to rotate-half), gives the greedy story of
// the testdata README through `attnviz model --top-k 1`, one step at a time.
TEST(LlamaStories260K, HfFolderReproducesTheGreedyStory) {
  const fs::path gguf = sharedTestdata() / "stories260K" / "stories260K.gguf";
  if (!fs::exists(gguf)) {
    if (std::getenv("CI")) FAIL() << gguf << " is missing (CI must have ../shared/testdata)";
    GTEST_SKIP() << gguf << " is missing";
  }
  TempDir tmp;
  const fs::path folder = tmp.path / "stories260K";
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "stories260k_to_hf.py").string()) + " " +
                          shellQuote(gguf.string()) + " " + shellQuote(folder.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::vector<int> story = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395,
                                  317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411};
  std::string ids = "1";
  for (int want : story) {
    const CliRun run =
        runBinary({"model", "--model", folder.string(), "--ids", ids, "--top-k", "1"}, tmp.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    int got = -1;
    ASSERT_EQ(std::sscanf(run.out.c_str(), "%d", &got), 1) << run.out;
    ASSERT_EQ(got, want) << "after ids " << ids;
    ids += "," + std::to_string(got);
  }
}

// GPT-2 small's shape (12 x 12, d=768, vocab 50257), generated here by the torch script (never
// committed), opened through the Hugging Face cache layout, against the torch reference.
TEST(ModelGpt2Small, RandomCheckpointMatchesTorch) {
  TempDir tmp;
  const fs::path blobs = tmp.path / "models--gpt2" / "blobs";
  const fs::path snap = tmp.path / "models--gpt2" / "snapshots" / "0123abcd";
  const fs::path gen = tmp.path / "generated";
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "make_gpt2_fixtures.py").string()) +
                          " --gpt2-small " + shellQuote(gen.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // The cache layout: blobs named by hash, snapshot entries are relative symlinks, refs/main.
  fs::create_directories(blobs);
  fs::create_directories(snap);
  fs::create_directories(tmp.path / "models--gpt2" / "refs");
  int n = 0;
  for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) {
    const std::string blob = "blob" + std::to_string(n++);
    fs::rename(gen / f, blobs / blob);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, snap / f);
  }
  std::ofstream(tmp.path / "models--gpt2" / "refs" / "main") << "0123abcd";
  const auto model = Model::open((tmp.path / "models--gpt2").string());
  EXPECT_EQ(model->config().nLayer, 12);
  EXPECT_EQ(model->config().vocabSize, 50257);
  const nlohmann::json cases = readCases(gen);
  const std::vector<int> ids = cases["ids"].get<std::vector<int>>();
  EXPECT_EQ(model->encode(cases["text"].get<std::string>()), ids);
  for (const auto& c : cases["cases"]) {
    const ForwardResult r = model->forward(ids, interventionsOf(c, model->config()));
    expectClose(allWeights(r), readNpy((gen / c["weights"].get<std::string>()).string()),
                kWeightsAbsTwelveLayers, 0, "gpt2-small weights");
    expectClose(logitsOf(r), readNpy((gen / c["logits"].get<std::string>()).string()), 0,
                kLogitsRel, "gpt2-small logits");
  }
}

}  // namespace
}  // namespace attnviz::testing
