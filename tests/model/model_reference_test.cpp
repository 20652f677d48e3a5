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

nlohmann::json readCases(const fs::path& dir) {
  return nlohmann::json::parse(slurp((dir / "cases.json").string()));
}

Interventions interventionsOf(const nlohmann::json& c, const Gpt2Config& cfg) {
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
    out.insert(out.end(), l.weights.data.begin(), l.weights.data.end());
  return out;
}

std::vector<float> logitsOf(const ForwardResult& r) {
  return std::vector<float>(r.logits.data(), r.logits.data() + r.logits.size());
}

// Every case of one fixture folder through the core API.
void checkFixture(const fs::path& dir) {
  const auto model = Gpt2Model::open(dir.string());
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
  EXPECT_EQ(Gpt2Model::open(fixture("f32_prefix_tied_gelu_new").string())->weightsDescription(),
            "F32 (mapped)");
  EXPECT_EQ(Gpt2Model::open(fixture("f16_untied_gelu").string())->weightsDescription(),
            "F16 (converted to F32)");
}

TEST(ModelReference, ProgressRisesToOne) {
  std::vector<double> seen;
  Gpt2Model::open(fixture("f16_untied_gelu").string(),
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
  const auto cached = Gpt2Model::open(root.string());
  EXPECT_EQ(fs::path(cached->files().dir).filename(), "feedbeef");
  EXPECT_EQ(logitsOf(cached->forward(ids)), logitsOf(Gpt2Model::open(src.string())->forward(ids)));
  EXPECT_EQ(Gpt2Model::open(snap.string())->config().nLayer, 3);
}

// An intervention in layer L re-runs layers >= L only, and gives what a full pass gives.
TEST(ModelReference, RerunFromLayerEqualsFullPassWithTheIntervention) {
  const fs::path dir = fixture("f32_untied_gelu_inner");
  const auto model = Gpt2Model::open(dir.string());
  const std::vector<int> ids = readCases(dir)["ids"].get<std::vector<int>>();
  ForwardResult r = model->forward(ids);
  const Tensor3 layer0 = r.layers[0].weights;
  Interventions iv;
  iv.ablate(1, 2, model->config());
  iv.layer(2, model->config().nLayer).temperature = 0.5f;
  model->rerunFrom(r, 1, iv);
  const ForwardResult full = model->forward(ids, iv);
  EXPECT_EQ(r.layers[0].weights.data, layer0.data);  // untouched
  for (int l = 0; l < model->config().nLayer; ++l)
    EXPECT_EQ(r.layers[l].weights.data, full.layers[l].weights.data) << "layer " << l;
  EXPECT_EQ(logitsOf(r), logitsOf(full));
  // And it changed the prediction's logits relative to the plain pass.
  EXPECT_NE(logitsOf(r), logitsOf(model->forward(ids)));
}

TEST(ModelReference, TopKIsSortedSoftmaxOfTheLastRow) {
  const auto model = Gpt2Model::open(fixture("f16_untied_gelu").string());
  const ForwardResult r = model->forward({10, 20, 30});
  const auto top = Gpt2Model::topK(r, 5);
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
  const auto model = Gpt2Model::open(dir.string());
  const auto top = Gpt2Model::topK(model->forward({10, 20, 30}), 3);
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

// GPT-2 small's shape (12 x 12, d=768, vocab 50257), generated here by the torch script (never
// committed), opened through the Hugging Face cache layout, against the torch reference.
TEST(ModelGpt2Small, RandomCheckpointMatchesTorch) {
  TempDir tmp;
  const fs::path blobs = tmp.path / "models--gpt2" / "blobs";
  const fs::path snap = tmp.path / "models--gpt2" / "snapshots" / "0123abcd";
  const fs::path gen = tmp.path / "generated";
  const std::string cmd = "/usr/bin/python3 " +
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
  const auto model = Gpt2Model::open((tmp.path / "models--gpt2").string());
  EXPECT_EQ(model->config().nLayer, 12);
  EXPECT_EQ(model->config().vocabSize, 50257);
  const nlohmann::json cases = readCases(gen);
  const std::vector<int> ids = cases["ids"].get<std::vector<int>>();
  EXPECT_EQ(model->encode(cases["text"].get<std::string>()), ids);
  for (const auto& c : cases["cases"]) {
    const ForwardResult r = model->forward(ids, interventionsOf(c, model->config()));
    expectClose(allWeights(r), readNpy((gen / c["weights"].get<std::string>()).string()),
                kWeightsAbs, 0, "gpt2-small weights");
    expectClose(logitsOf(r), readNpy((gen / c["logits"].get<std::string>()).string()), 0,
                kLogitsRel, "gpt2-small logits");
  }
}

}  // namespace
}  // namespace attnviz::testing
