// Generation with a KV cache against the full pass: greedy generation equals step-by-step argmax
// of forward() on the growing ids (every family, with and without interventions); each cached
// step's attention row equals the full pass's last row; seeded sampling is reproducible and its
// frequencies follow the softmax; it stops at EOS and at the context's end; stories260K tells its
// story through `attnviz generate`.
#include "model_test_util.h"

#include "attnviz/model/generate.h"
#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <numeric>
#include <algorithm>

namespace attnviz::testing {
namespace {

std::vector<int> fixtureIds(const fs::path& dir) {
  return nlohmann::json::parse(slurp((dir / "cases.json").string()))["ids"].get<std::vector<int>>();
}

int argmaxLast(const ForwardResult& r) {
  const auto row = r.logits.row(r.logits.rows() - 1);
  return int(std::max_element(row.data(), row.data() + row.size()) - row.data());
}

// Greedy generation against argmax of the full pass, and every step's cached attention rows
// against the full pass's last query row, in every layer and head.
void checkGreedy(const fs::path& dir, const Interventions& iv, int n) {
  const auto model = Model::open(dir.string());
  std::vector<int> prompt = fixtureIds(dir);
  prompt.resize(std::min<std::size_t>(prompt.size(), 8));
  GenerateOptions opts;
  opts.maxNew = n;
  opts.stopAtEos = false;
  const Generation g = generate(*model, prompt, iv, opts);
  ASSERT_EQ(int(g.tokens.size()), n) << dir;
  std::vector<int> ids = prompt;
  for (int s = 0; s < n; ++s) {
    const ForwardResult full = model->forward(ids, iv);
    ASSERT_EQ(g.tokens[s].id, argmaxLast(full)) << dir << " step " << s;
    ids.push_back(g.tokens[s].id);
    // The row of the token just appended, computed from the cache, against the full pass over
    // the ids that include it.
    const ForwardResult withIt = model->forward(ids, iv);
    const int T = int(ids.size());
    for (int l = 0; l < model->config().nLayer; ++l) {
      const Tensor3& row = g.tokens[s].rows[l];
      ASSERT_EQ(row.rows, 1);
      ASSERT_EQ(row.cols, T);
      for (int h = 0; h < row.heads; ++h)
        for (int j = 0; j < T; ++j)
          ASSERT_NEAR(row.at(h, 0, j), withIt.layers[l].site().weights.at(h, T - 1, j), 1e-5)
              << dir << " step " << s << " layer " << l << " head " << h << " key " << j;
    }
  }
}

TEST(Generate, GreedyEqualsStepByStepArgmaxInEveryFamily) {
  for (const char* name : {"llama/llama_gqa", "llama/mistral_window", "llama/qwen2_bias",
                           "llama/llama3_bf16_sharded", "f32_prefix_tied_gelu_new"})
    checkGreedy(fixture(name), {}, 6);
}

// The prompt's pass keeps what the cache needs and no Q: every layer's residual stream [T, d] and
// K, V [H_kv, T, d_h], the final stream [T, d] and the last logits row [V], in float32; the
// generation itself is the full pass's (GreedyEqualsStepByStepArgmaxInEveryFamily).
TEST(Generate, ThePromptsPassKeepsKAndVButNoQ) {
  for (const char* name : {"llama/llama_gqa", "f32_prefix_tied_gelu_new"}) {
    SCOPED_TRACE(name);
    const auto model = Model::open(fixture(name).string());
    const ModelConfig& c = model->config();
    std::vector<int> prompt = fixtureIds(fixture(name));
    prompt.resize(std::min<std::size_t>(prompt.size(), 12));
    GenerateOptions opts;
    opts.maxNew = 3;
    opts.stopAtEos = false;
    const Generation g = generate(*model, prompt, {}, opts);
    ASSERT_EQ(g.tokens.size(), 3u);
    const std::size_t T = prompt.size(), d = std::size_t(c.nEmbd), L = std::size_t(c.nLayer);
    const std::size_t kv = std::size_t(c.nKvHead) * std::size_t(c.headSize);
    const std::size_t q = std::size_t(c.nHead) * std::size_t(c.headSize);
    const std::size_t want = sizeof(float) * (L * T * d + L * 2 * T * kv + T * d + std::size_t(c.vocabSize));
    EXPECT_EQ(g.promptBytes, want) << "Q would add " << sizeof(float) * L * T * q << " bytes";
  }
}

TEST(Generate, InterventionsApplyAtEveryStep) {
  const fs::path dir = fixture("llama/mistral_window");
  const auto model = Model::open(dir.string());
  Interventions iv;
  iv.ablate(0, 1, model->config());
  MaskSpec m;
  m.window = 3;
  iv.setAll(m, 0.7f, model->config().nLayer);
  iv.layer(1, model->config().nLayer).ropeOff = true;
  checkGreedy(dir, iv, 6);
}

TEST(Generate, SeededSamplingIsReproducibleAndFollowsTheSoftmax) {
  const fs::path dir = fixture("llama/llama_gqa");
  const auto model = Model::open(dir.string());
  const std::vector<int> prompt{1, 330, 333};
  GenerateOptions opts;
  opts.maxNew = 5;
  opts.sampleTemperature = 1.5f;
  opts.seed = 42;
  opts.stopAtEos = false;
  EXPECT_EQ(generate(*model, prompt, {}, opts).ids(), generate(*model, prompt, {}, opts).ids());
  opts.seed = 43;
  // One step's draws over many seeds against softmax(logits / T) on the top 4: chi-square.
  const ForwardResult r = model->forward(prompt);
  std::vector<float> logits(r.logits.row(2).data(), r.logits.row(2).data() + r.logits.cols());
  const float T = 1.5f;
  const int K = 4, draws = 4000;
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  double z = 0;
  for (int i = 0; i < K; ++i) z += std::exp((logits[order[i]] - logits[order[0]]) / T);
  std::map<int, int> counts;
  for (int s = 0; s < draws; ++s) {
    std::uint64_t state = std::uint64_t(s) * 7919 + 1;
    const int id = sampleToken(logits, T, K, state);
    ++counts[id];
  }
  double chi2 = 0;
  for (int i = 0; i < K; ++i) {
    const double p = std::exp((logits[order[i]] - logits[order[0]]) / T) / z;
    const double e = p * draws;
    chi2 += (counts[order[i]] - e) * (counts[order[i]] - e) / e;
  }
  EXPECT_EQ(int(counts.size()), K) << "only the top-k may be drawn";
  EXPECT_LT(chi2, 16.27) << "chi-square with 3 degrees of freedom at p = 0.001";
  // Temperature 0 is greedy.
  std::uint64_t st = 1;
  EXPECT_EQ(sampleToken(logits, 0.0f, 0, st), order[0]);
}

TEST(Generate, StopsAtEosAndAtTheContext) {
  const fs::path dir = fixture("llama/llama_gqa");
  const auto model = Model::open(dir.string());
  const std::vector<int> prompt{1, 330, 333};
  GenerateOptions opts;
  opts.maxNew = 3;
  opts.stopAtEos = false;
  const Generation g = generate(*model, prompt, {}, opts);
  // Make the first generated token the EOS: pretend the model's EOS is that id through a copy of
  // the folder whose config names it.
  TempDir tmp;
  fs::copy(dir, tmp.path / "m", fs::copy_options::recursive);
  {
    nlohmann::json c = nlohmann::json::parse(slurp((tmp.path / "m" / "config.json").string()));
    c["eos_token_id"] = g.tokens[0].id;
    std::ofstream(tmp.path / "m" / "config.json") << c.dump();
    nlohmann::json tc =
        nlohmann::json::parse(slurp((tmp.path / "m" / "tokenizer_config.json").string()));
    tc.erase("eos_token");
    std::ofstream(tmp.path / "m" / "tokenizer_config.json") << tc.dump();
  }
  const auto eosModel = Model::open((tmp.path / "m").string());
  if (!eosModel->tokenizer().eos() || *eosModel->tokenizer().eos() == g.tokens[0].id) {
    GenerateOptions o2 = opts;
    o2.stopAtEos = true;
    const Generation e = generate(*eosModel, prompt, {}, o2);
    EXPECT_EQ(e.stop, Generation::Stop::Eos);
    EXPECT_EQ(e.ids(), std::vector<int>{g.tokens[0].id});
  }
  // The context: a prompt one short of max_position_embeddings gets one step's worth.
  const int ctx = model->config().nPositions;
  std::vector<int> longPrompt(ctx - 1, 330);
  longPrompt[0] = 1;
  opts.maxNew = 5;
  const Generation c = generate(*model, longPrompt, {}, opts);
  EXPECT_EQ(c.stop, Generation::Stop::Context);
  EXPECT_EQ(c.tokens.size(), 1u);
}

// The real trained model: `attnviz generate` from BOS on stories260K's HF conversion.
TEST(Generate, Stories260KTellsItsStoryThroughTheCli) {
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
  const std::string story =
      "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 "
      "419 292 411\n";
  for (const fs::path& model : {folder, gguf}) {
    const CliRun run = runBinary(
        {"generate", "--model", model.string(), "--ids", "1", "-n", "25", "--print-ids"}, tmp.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(run.out, story) << model;
    const CliRun text =
        runBinary({"generate", "--model", model.string(), "--ids", "1", "-n", "25"}, tmp.path);
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_NE(text.out.find("Once upon a time, there was a little girl named Lily. She loved to "
                            "play outside"),
              std::string::npos)
        << text.out;
  }
  // Its Q8_0 conversion tells the same story, exactly and through the fast path (x rounded to 8
  // bits per block in decode's products), which --verbose names.
  const fs::path q8 = tmp.path / "stories260K-Q8_0.gguf";
  const std::string convert =
      ATTNVIZ_PYTHON " " +
      shellQuote((modelDir() / ".." / ".." / "tools" / "gguf" / "hf_to_gguf.py").string()) + " " +
      shellQuote(folder.string()) + " " + shellQuote(q8.string()) + " --type Q8_0 >/dev/null 2>&1";
  ASSERT_EQ(std::system(convert.c_str()), 0) << convert;
  for (bool fast : {false, true}) {
    std::vector<std::string> args{"generate", "--model", q8.string(),   "--ids",    "1",
                                  "-n",       "25",      "--print-ids", "--verbose"};
    if (fast) args.push_back("--fast-activations");
    const CliRun run = runBinary(args, tmp.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(run.out, story) << "fast " << fast;
    EXPECT_EQ(run.err.find("fast activations") != std::string::npos, fast) << run.err;
  }
}

TEST(Generate, BadUsageExitsTwo) {
  TempDir tmp;
  const std::string dir = fixture("llama/llama_gqa").string();
  EXPECT_EQ(runBinary({"generate", "--model", dir, "--ids", "1", "-n", "-3"}, tmp.path).exitCode, 2);
  EXPECT_EQ(runBinary({"generate", "--model", dir, "--ids", "1"}, tmp.path).exitCode, 2);
  EXPECT_EQ(runBinary({"generate", "--model", dir, "--ids", "1", "-n", "2", "--ablate", "9:0"},
                      tmp.path)
                .exitCode,
            2);
  EXPECT_EQ(runBinary({"generate", "--model", dir, "--ids", "99999", "-n", "2"}, tmp.path).exitCode,
            1);
}

}  // namespace
}  // namespace attnviz::testing
