// GGUF model files through the real binary: llama, qwen2 and gpt2 checkpoints converted by
// tools/gguf/hf_to_gguf.py to F32, F16, Q8_0, Q4_0, Q4_K and Q6_K (make_gguf_model_cases.py, run
// here into a temp folder) against the float64 torch reference on the values each file holds;
// their tokenizers against the HF folders'; llama.cpp's stories260K against its HF conversion;
// bad GGUF files refused with one line; a vocab-only GGUF serves tokenize and not model.
#include "model_test_util.h"

#include "attnviz/engine/ggml_kernels.h"  // setFastActivations
#include "attnviz/formats/gguf.h"
#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>

namespace attnviz::testing {
namespace {

constexpr double kWeightsAbs = 1e-5;
constexpr double kLogitsRel = 1e-4;

// Runs make_gguf_model_cases.py into `out` (with `flags`) and returns its cases.json.
nlohmann::json makeCases(const fs::path& out, const std::string& flags = "") {
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "make_gguf_model_cases.py").string()) + " " +
                          shellQuote(out.string()) + (flags.empty() ? "" : " " + flags) +
                          " >/dev/null";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  if (rc != 0) return nullptr;
  return nlohmann::json::parse(slurp((out / "cases.json").string()));
}

std::string joinIds(const std::vector<int>& ids, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

CliRun tokenize(const fs::path& model, const std::string& text, const fs::path& tmp,
                bool noSpecial = false) {
  std::vector<std::string> args{"tokenize", "--model", model.string(), "--text", text};
  if (noSpecial) args.push_back("--no-special");
  return runBinary(args, tmp);
}

// Exit 1 and one line on stderr that names `file` and contains `problem`; nothing on stdout.
void expectRefused(const CliRun& r, const std::string& file, const std::string& problem) {
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << "want \"" << problem << "\" in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

fs::path stories260K() { return sharedTestdata() / "stories260K" / "stories260K.gguf"; }

// FAIL under CI (which must have ../shared/testdata), skip elsewhere.
#define REQUIRE_SHARED_FILE(path)                                                        \
  do {                                                                                   \
    if (!fs::exists(path)) {                                                             \
      const char* ci = std::getenv("CI");                                                \
      if (ci && std::string(ci) == "true") FAIL() << (path) << " is missing (CI must have " \
                                                  "../shared/testdata)";                 \
      GTEST_SKIP() << (path) << " is missing";                                           \
    }                                                                                    \
  } while (0)

// Every file of every type: `attnviz model --weights --logits` equals the reference on the
// file's dequantized values; Model::open names the type; `attnviz tokenize` on the GGUF equals
// `attnviz tokenize` on the HF folder it came from, and the ids the script's tokenizer made.
TEST(GgufModelFiles, EveryTypeMatchesTheReferenceOnItsOwnValues) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path);
  ASSERT_FALSE(cases.is_null());
  ASSERT_EQ(cases["models"].size(), 3u);
  int files = 0;
  for (const auto& m : cases["models"]) {
    const std::vector<int> ids = m["ids"].get<std::vector<int>>();
    const std::string text = m["text"].get<std::string>();
    const fs::path hf = tmp.path / m["hf"].get<std::string>();
    const CliRun hfTok = tokenize(hf, text, tmp.path);
    ASSERT_EQ(hfTok.exitCode, 0) << hfTok.err;
    EXPECT_EQ(hfTok.out, joinIds(ids, " ") + "\n") << hf;
    const CliRun hfTokPlain = tokenize(hf, text, tmp.path, true);
    for (const auto& f : m["files"]) {
      const fs::path file = tmp.path / f["file"].get<std::string>();
      const std::string type = f["type"].get<std::string>();
      SCOPED_TRACE(file.filename().string());
      ++files;
      // The forward pass through the CLI.
      const std::string w = (tmp.path / "w.npy").string(), z = (tmp.path / "z.npy").string();
      const CliRun run = runBinary({"model", "--model", file.string(), "--ids", joinIds(ids, ","),
                                    "--weights", w, "--logits", z},
                                   tmp.path);
      ASSERT_EQ(run.exitCode, 0) << run.err;
      const NpyArray weights = readNpy(w), logits = readNpy(z);
      const NpyArray wantW = readNpy((tmp.path / f["weights"].get<std::string>()).string());
      const NpyArray wantZ = readNpy((tmp.path / f["logits"].get<std::string>()).string());
      EXPECT_EQ(weights.shape, wantW.shape);
      EXPECT_EQ(logits.shape, wantZ.shape);
      expectClose(weights.data, wantW, kWeightsAbs, 0, file.filename().string() + " weights");
      expectClose(logits.data, wantZ, 0, kLogitsRel, file.filename().string() + " logits");
      // How the weights are held names the file's type.
      const auto model = Model::open(file.string());
      const std::string desc = model->weightsDescription();
      EXPECT_NE(desc.find(type), std::string::npos) << desc;
      EXPECT_EQ(desc.find("mixed"), std::string::npos) << desc;
      if (type == "F32") {
        EXPECT_EQ(desc, "F32 (mapped)");
      }
      EXPECT_EQ(model->config().family, m["arch"].get<std::string>());
      // The tokenizer from the GGUF's metadata.
      const CliRun tok = tokenize(file, text, tmp.path);
      ASSERT_EQ(tok.exitCode, 0) << tok.err;
      EXPECT_EQ(tok.out, hfTok.out);
      const CliRun tokPlain = tokenize(file, text, tmp.path, true);
      EXPECT_EQ(tokPlain.exitCode, 0) << tokPlain.err;
      EXPECT_EQ(tokPlain.out, hfTokPlain.out);
    }
  }
  EXPECT_EQ(files, 18);
}

// Llama 3.1's rope_scaling "llama3" travels in GGUF as rope_freqs.weight (one divisor per
// frequency, as hf_to_gguf.py and llama.cpp write it): the GGUF of the llama3_bf16_sharded fixture
// computes what its HF folder computes.
TEST(GgufModelFiles, Llama3RopeFreqsAreApplied) {
  const fs::path dir = fixture("llama") / "llama3_bf16_sharded";
  TempDir tmp;
  const fs::path gguf = tmp.path / "llama3.gguf";
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((fs::path(ATTNVIZ_SOURCE_DIR) / "tools" / "gguf" /
                                      "hf_to_gguf.py").string()) +
                          " " + shellQuote(dir.string()) + " " + shellQuote(gguf.string()) +
                          " --type F32 >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json cases = nlohmann::json::parse(slurp((dir / "cases.json").string()));
  const std::string w = (tmp.path / "w.npy").string(), z = (tmp.path / "z.npy").string();
  const CliRun run = runBinary({"model", "--model", gguf.string(), "--ids",
                                joinIds(cases["ids"].get<std::vector<int>>(), ","), "--weights",
                                w, "--logits", z},
                               tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  // BF16 values stored as F32: the same numbers, so the fixture's reference applies.
  expectClose(readNpy(w).data, readNpy((dir / "plain_weights.npy").string()), kWeightsAbs, 0,
              "llama3 GGUF weights");
  expectClose(readNpy(z).data, readNpy((dir / "plain_logits.npy").string()), 0, kLogitsRel,
              "llama3 GGUF logits");
}

// Broken GGUF model files: exit 1, one line naming the file and the problem, before anything
// runs. The byte-level breaks are made here; the structural ones by the script with gguf_file.py.
TEST(GgufModelFiles, BadFilesExitOneNamingTheFile) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path, "--bad-only");
  ASSERT_FALSE(cases.is_null());
  const fs::path good = tmp.path / "llama_F32.gguf";
  auto run = [&](const fs::path& file) {
    return runBinary({"model", "--model", file.string(), "--ids", "1,2,3"}, tmp.path);
  };
  {
    const CliRun ok = run(good);
    ASSERT_EQ(ok.exitCode, 0) << ok.err;
  }
  const std::string bytes = slurp(good.string());
  auto variant = [&](const std::string& name, const std::string& data) {
    const fs::path p = tmp.path / name;
    std::ofstream(p, std::ios::binary) << data;
    return p;
  };
  {
    std::string b = bytes;
    b.replace(0, 4, "GGUX");
    const fs::path p = variant("bad_magic.gguf", b);
    expectRefused(run(p), p.string(), "GGUF");
  }
  {
    std::string b = bytes;
    const std::uint32_t v = 7;
    b.replace(4, 4, reinterpret_cast<const char*>(&v), 4);
    const fs::path p = variant("bad_version.gguf", b);
    expectRefused(run(p), p.string(), "version 7");
  }
  {
    // Cut inside the metadata (the tokenizer's token array starts well before byte 2000).
    const fs::path p = variant("truncated_metadata.gguf", bytes.substr(0, 2000));
    expectRefused(run(p), p.string(), "tokenizer.ggml.tokens");
  }
  ASSERT_EQ(cases["bad"].size(), 7u);
  for (const auto& c : cases["bad"]) {
    const fs::path p = tmp.path / c["file"].get<std::string>();
    SCOPED_TRACE(c["name"].get<std::string>());
    expectRefused(run(p), p.string(), c["expect"].get<std::string>());
  }
}

std::vector<float> logitsOf(const ForwardResult& r) {
  return std::vector<float>(r.logits.data(), r.logits.data() + r.logits.size());
}

// The largest |a - b| over two float rows, and the largest |b|.
std::pair<double, double> rowError(const float* a, const float* b, int n) {
  double worst = 0.0, scale = 0.0;
  for (int i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return {worst, scale};
}

// A decode step reads every matrix as stored (matrix-vector products on the Q8_0, Q4_K, ...
// blocks), while the full pass multiplies the float32 conversion: each step's logits equal the
// full pass's logits at the same position within 1e-4 of the row's largest, and its attention
// rows the full pass's rows within 1e-5, for every family and type.
TEST(GgufDecode, StepsEqualTheFullPassOnQuantizedFiles) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path);
  ASSERT_FALSE(cases.is_null());
  int checked = 0;
  for (const auto& m : cases["models"]) {
    const std::vector<int> ids = m["ids"].get<std::vector<int>>();
    for (const auto& f : m["files"]) {
      const fs::path file = tmp.path / f["file"].get<std::string>();
      SCOPED_TRACE(file.filename().string());
      const auto model = Model::open(file.string());
      const ForwardResult full = model->forward(ids);
      const int T = int(ids.size()), P = T / 2, V = model->config().vocabSize;
      KvCache cache = model->cacheFrom(model->forward({ids.begin(), ids.begin() + P}));
      for (int t = P; t < T; ++t) {
        const DecodeStep step = model->decodeStep(cache, ids[t]);
        ASSERT_EQ(int(step.logits.size()), V);
        const auto [worst, scale] = rowError(step.logits.data(), full.logits.row(t).data(), V);
        EXPECT_LE(worst, kLogitsRel * scale) << "position " << t;
        for (int l = 0; l < model->config().nLayer; ++l)
          for (int h = 0; h < model->config().nHead; ++h) {
            const auto [dw, unused] =
                rowError(step.rows[l].head(h),
                         full.layers[l].site().weights.head(h) + std::size_t(t) * T, t + 1);
            EXPECT_LE(dw, 1e-5) << "position " << t << " layer " << l << " head " << h;
          }
      }
      EXPECT_EQ(cache.length(), T);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

// The largest |a - b| over two tensors of one shape (infinite, and a failure, when the shapes
// differ), and rowError's worst difference over the row's largest value.
double largestDifference(const Tensor3& a, const Tensor3& b) {
  EXPECT_EQ(a.data.size(), b.data.size());
  if (a.data.size() != b.data.size()) return std::numeric_limits<double>::infinity();
  return rowError(a.data.data(), b.data.data(), int(a.data.size())).first;
}
double relativeError(const float* a, const float* b, int n) {
  const auto [worst, scale] = rowError(a, b, n);
  return worst / scale;
}

// The fast path (setFastActivations): decode steps on Q8_0, Q4_K and Q6_K files round x to 8 bits
// per block in their products. Against the exact steps: the logits within 5% of the row's largest
// and the attention rows within 0.1, but not equal (the rounding is taken) where the level has
// the kernels; F32 and F16 files step exactly as before. The largest differences are printed (the
// figures docs/performance.md quotes).
TEST(GgufDecode, FastActivationsStayNearTheExactSteps) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path);
  ASSERT_FALSE(cases.is_null());
  struct Reset {
    ~Reset() { setFastActivations(false); }
  } reset;
  for (const auto& m : cases["models"]) {
    const std::vector<int> ids = m["ids"].get<std::vector<int>>();
    for (const auto& f : m["files"]) {
      const std::string type = f["type"].get<std::string>();
      const fs::path file = tmp.path / f["file"].get<std::string>();
      SCOPED_TRACE(file.filename().string());
      const auto model = Model::open(file.string());
      const int T = int(ids.size()), P = T / 2, V = model->config().vocabSize;
      const std::vector<int> prompt(ids.begin(), ids.begin() + P);
      std::vector<DecodeStep> steps[2];
      for (int fast = 0; fast < 2; ++fast) {
        setFastActivations(fast == 1);
        KvCache cache = model->cacheFrom(model->forward(prompt));
        for (int t = P; t < T; ++t) steps[fast].push_back(model->decodeStep(cache, ids[t]));
      }
      setFastActivations(false);
      double logitsRel = 0.0, rowsAbs = 0.0;
      for (std::size_t k = 0; k < steps[0].size(); ++k) {
        logitsRel = std::max(
            logitsRel, relativeError(steps[1][k].logits.data(), steps[0][k].logits.data(), V));
        for (std::size_t l = 0; l < steps[0][k].rows.size(); ++l)
          rowsAbs = std::max(rowsAbs, largestDifference(steps[1][k].rows[l], steps[0][k].rows[l]));
      }
      std::printf("fast activations, %s: logits %.2e of the largest, rows %.2e\n",
                  file.filename().string().c_str(), logitsRel, rowsAbs);
      // Measured: 0.9-2.8% and 0.019-0.044 on these random-init models (each product carries
      // about 0.5% of x's spread in rounding, compounded over the layers); a broken kernel is off
      // by the whole row.
      EXPECT_LE(logitsRel, 0.05);
      EXPECT_LE(rowsAbs, 0.1);
      const bool rounds = (type == "Q8_0" || type == "Q4_K" || type == "Q6_K") &&
                          fastActivationKernel(GgmlType::Q8_0);
      if (rounds) {
        EXPECT_GT(logitsRel, 0.0);
      } else {
        EXPECT_EQ(logitsRel, 0.0);
      }
    }
  }
}

// The fast path in a prompt pass (matMulFast): at the AVX-512 level the layers' products on Q4_K
// and Q6_K files round x to 8 bits per 256 values. Against the exact pass at every position: the
// logits within 5% of the row's largest and every layer's attention weights within 0.1, but not
// equal (the rounding is taken); F32, F16, Q8_0 and Q4_0 files (and other levels) pass exactly as
// before. The largest differences are printed (the figures docs/performance.md quotes).
TEST(GgufPass, FastActivationsStayNearTheExactPass) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path);
  ASSERT_FALSE(cases.is_null());
  struct Reset {
    ~Reset() { setFastActivations(false); }
  } reset;
  int rounded = 0;
  for (const auto& m : cases["models"]) {
    const std::vector<int> ids = m["ids"].get<std::vector<int>>();
    for (const auto& f : m["files"]) {
      const std::string type = f["type"].get<std::string>();
      const fs::path file = tmp.path / f["file"].get<std::string>();
      SCOPED_TRACE(file.filename().string());
      const auto model = Model::open(file.string());
      const int T = int(ids.size()), V = model->config().vocabSize;
      setFastActivations(false);
      const ForwardResult exact = model->forward(ids);
      setFastActivations(true);
      const ForwardResult fast = model->forward(ids);
      setFastActivations(false);
      double logitsRel = 0.0, weightsAbs = 0.0;
      for (int t = 0; t < T; ++t)
        logitsRel = std::max(
            logitsRel, relativeError(fast.logits.row(t).data(), exact.logits.row(t).data(), V));
      for (int l = 0; l < model->config().nLayer; ++l)
        weightsAbs = std::max(weightsAbs, largestDifference(fast.layers[l].site().weights,
                                                            exact.layers[l].site().weights));
      std::printf("fast activations in the pass, %s: logits %.2e of the largest, weights %.2e\n",
                  file.filename().string().c_str(), logitsRel, weightsAbs);
      EXPECT_LE(logitsRel, 0.05);
      EXPECT_LE(weightsAbs, 0.1);
      if ((type == "Q4_K" || type == "Q6_K") && fastPassKernel(GgmlType::Q4_K)) {
        EXPECT_GT(logitsRel, 0.0);
        ++rounded;
      } else {
        EXPECT_EQ(logitsRel, 0.0);
        EXPECT_EQ(weightsAbs, 0.0);
      }
    }
  }
  if (fastPassKernel(GgmlType::Q4_K)) EXPECT_GE(rounded, 6);
  // Through the CLI: `model --fast-activations` on the Q4_K Llama file, against the float64 torch
  // reference of the same file: within 5% of each row's largest logit, and (where the level has
  // the kernels) not the exact command's logits.
  const auto& llama = cases["models"][0];
  for (const auto& f : llama["files"]) {
    if (f["type"] != "Q4_K") continue;
    const fs::path file = tmp.path / f["file"].get<std::string>();
    const std::string ids = joinIds(llama["ids"].get<std::vector<int>>(), ",");
    const std::string ze = (tmp.path / "ze.npy").string(), zf = (tmp.path / "zf.npy").string();
    const CliRun exact =
        runBinary({"model", "--model", file.string(), "--ids", ids, "--logits", ze}, tmp.path);
    ASSERT_EQ(exact.exitCode, 0) << exact.err;
    const CliRun fast = runBinary(
        {"model", "--model", file.string(), "--ids", ids, "--logits", zf, "--fast-activations"},
        tmp.path);
    ASSERT_EQ(fast.exitCode, 0) << fast.err;
    const NpyArray a = readNpy(ze), b = readNpy(zf);
    const NpyArray want = readNpy((tmp.path / f["logits"].get<std::string>()).string());
    ASSERT_EQ(b.shape, want.shape);
    expectClose(b.data, want, 0, 0.05, "model --fast-activations logits");
    if (fastPassKernel(GgmlType::Q4_K)) {
      EXPECT_NE(a.data, b.data);
    } else {
      EXPECT_EQ(a.data, b.data);
    }
    // `heads --fast-activations` on a small corpus: each head's previous-token and first-token
    // scores within 0.05 of the exact run's, and (with the kernels) not all equal.
    const fs::path corpus = tmp.path / "corpus.txt";
    {
      std::ofstream c(corpus);
      c << "the cat sat on the mat and the dog sat on the log\n\n"
           "a b c d e f g a b c d e f g a b c d e f g\n\n"
           "one two three four five six seven eight nine ten\n";
    }
    auto heads = [&](const std::string& out, bool fastFlag) {
      std::vector<std::string> args{"heads",    "--model",       file.string(),
                                    "--corpus", corpus.string(), "--seq-len",
                                    "32",       "--out",         (tmp.path / out).string()};
      if (fastFlag) args.push_back("--fast-activations");
      const CliRun r = runBinary(args, tmp.path);
      EXPECT_EQ(r.exitCode, 0) << r.err;
      return nlohmann::json::parse(slurp((tmp.path / out / "scatter_data.json").string()));
    };
    const nlohmann::json he = heads("heads_exact", false), hf = heads("heads_fast", true);
    ASSERT_EQ(he.size(), hf.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < he.size(); ++i)
      for (const char* k : {"prev_token_score", "first_token_share", "self_attention_score"})
        worst = std::max(worst, std::fabs(he[i][k].get<double>() - hf[i][k].get<double>()));
    EXPECT_LE(worst, 0.05);
    if (fastPassKernel(GgmlType::Q4_K)) {
      EXPECT_GT(worst, 0.0);
    } else {
      EXPECT_EQ(worst, 0.0);
    }
  }
}

// Everything a model computes, opened with no budget to speak of against one that holds every
// conversion: the same numbers bit for bit (the same dequantization, the same products).
void expectSameResults(const Model& big, const Model& tiny, const std::vector<int>& ids) {
  ForwardResult a = big.forward(ids), b = tiny.forward(ids);
  EXPECT_EQ(logitsOf(a), logitsOf(b));
  for (int l = 0; l < big.config().nLayer; ++l) {
    EXPECT_TRUE(a.layers[l].site().weights.data == b.layers[l].site().weights.data) << "layer " << l;
    EXPECT_TRUE(a.layers[l].site().headOut.data == b.layers[l].site().headOut.data) << "layer " << l;
  }
  // Re-runs with an intervention (what the GUI and attribution do).
  Interventions iv;
  iv.ablate(big.config().nLayer - 1, 0, big.config());
  big.rerunFrom(a, big.config().nLayer - 1, iv);
  tiny.rerunFrom(b, big.config().nLayer - 1, iv);
  EXPECT_EQ(logitsOf(a), logitsOf(b));
  EXPECT_EQ(big.rerunLogitsAt(a, 0, {}, 1), tiny.rerunLogitsAt(b, 0, {}, 1));
  const MatrixRM o = a.layers[0].site().headOut.mat(0);
  EXPECT_TRUE(big.headToResidual(0, 0, o) == tiny.headToResidual(0, 0, o));
  EXPECT_TRUE(big.unembedResidual(a.residualOut) == tiny.unembedResidual(b.residualOut));
  // Decode steps from each one's cache.
  const std::vector<int> prompt(ids.begin(), ids.begin() + ids.size() / 2);
  KvCache ca = big.cacheFrom(big.forward(prompt)), cb = tiny.cacheFrom(tiny.forward(prompt));
  for (std::size_t t = prompt.size(); t < ids.size(); ++t) {
    const DecodeStep sa = big.decodeStep(ca, ids[t]), sb = tiny.decodeStep(cb, ids[t]);
    EXPECT_EQ(sa.logits, sb.logits) << "step at " << t;
    for (std::size_t l = 0; l < sa.rows.size(); ++l)
      EXPECT_TRUE(sa.rows[l].data == sb.rows[l].data) << "step at " << t << " layer " << l;
  }
}

// --max-memory: within the budget the quantized matrices are converted to float32 at load; past
// it they stay as stored and each layer is converted into the pass's one scratch as it runs. The
// results are the same, the resident float32 bytes far fewer, and the model says how it loaded.
TEST(MemoryBudget, PastItTheWeightsStayAsStoredWithTheSameResults) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path);
  ASSERT_FALSE(cases.is_null());
  int checked = 0;
  for (const auto& m : cases["models"]) {
    const std::vector<int> ids = m["ids"].get<std::vector<int>>();
    for (const auto& f : m["files"]) {
      const std::string type = f["type"].get<std::string>();
      const fs::path file = tmp.path / f["file"].get<std::string>();
      SCOPED_TRACE(file.filename().string());
      const auto big = Model::open(file.string(), {}, std::int64_t(1) << 40);
      const auto tiny = Model::open(file.string(), {}, 1);
      if (type == "F32") {  // mapped either way
        EXPECT_EQ(tiny->convertedBytes(), 0u);
        EXPECT_FALSE(tiny->keptAsStored());
        EXPECT_EQ(tiny->weightsDescription(), "F32 (mapped)");
        continue;
      }
      EXPECT_FALSE(big->keptAsStored());
      EXPECT_TRUE(tiny->keptAsStored());
      // Every matrix converted (the parameters less the F32 norms), against none of them.
      EXPECT_GT(big->convertedBytes(), std::size_t(big->parameterCount()) * 4 * 9 / 10);
      EXPECT_LT(tiny->convertedBytes(), big->convertedBytes() / 20);
      EXPECT_NE(big->weightsDescription().find("(converted to F32)"), std::string::npos);
      EXPECT_NE(tiny->weightsDescription().find(type), std::string::npos);
      EXPECT_NE(tiny->weightsDescription().find(", kept as stored (over the 1 bytes budget)"),
                std::string::npos)
          << tiny->weightsDescription();
      expectSameResults(*big, *tiny, ids);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 15);
  // Through the CLI: the budget with a unit, and `model` saying which way it loaded; a size
  // that is not one is bad usage.
  const fs::path q4 = tmp.path / "llama_Q4_K.gguf";
  const std::string ids = joinIds(cases["models"][0]["ids"].get<std::vector<int>>(), ",");
  const CliRun kept = runBinary({"model", "--model", q4.string(), "--ids", ids, "--max-memory", "64K"},
                                tmp.path);
  ASSERT_EQ(kept.exitCode, 0) << kept.err;
  EXPECT_NE(kept.out.find("kept as stored (over the 64 KB budget)"), std::string::npos) << kept.out;
  const CliRun converted =
      runBinary({"model", "--model", q4.string(), "--ids", ids, "--max-memory", "1G"}, tmp.path);
  ASSERT_EQ(converted.exitCode, 0) << converted.err;
  EXPECT_NE(converted.out.find("(converted to F32)"), std::string::npos) << converted.out;
  const CliRun bad =
      runBinary({"model", "--model", q4.string(), "--ids", ids, "--max-memory", "lots"}, tmp.path);
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_EQ(lineCount(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("--max-memory"), std::string::npos) << bad.err;
}

// Folders too: F16 GPT-2 (Conv1D [in, out] matrices, which decode converts per layer) and F16
// LLaMA (read as stored by decode) past the budget compute what they compute within it.
TEST(MemoryBudget, F16FoldersPastTheBudgetGiveTheSameResults) {
  for (const fs::path& dir : {fixture("f16_untied_gelu"), fixture("llama") / "llama_mqa_f16"}) {
    SCOPED_TRACE(dir.filename().string());
    const auto big = Model::open(dir.string(), {}, std::int64_t(1) << 40);
    const auto tiny = Model::open(dir.string(), {}, 1);
    EXPECT_TRUE(tiny->keptAsStored());
    EXPECT_LT(tiny->convertedBytes(), big->convertedBytes() / 10);
    std::vector<int> ids = nlohmann::json::parse(slurp((dir / "cases.json").string()))["ids"]
                               .get<std::vector<int>>();
    expectSameResults(*big, *tiny, ids);
  }
}

TEST(MemoryBudget, SizesParse) {
  EXPECT_EQ(parseMemorySize("1048576"), 1048576);
  EXPECT_EQ(parseMemorySize("64K"), 64 << 10);
  EXPECT_EQ(parseMemorySize("512m"), std::int64_t(512) << 20);
  EXPECT_EQ(parseMemorySize("4G"), std::int64_t(4) << 30);
  EXPECT_EQ(parseMemorySize("4GiB"), std::int64_t(4) << 30);
  EXPECT_EQ(parseMemorySize("2MB"), std::int64_t(2) << 20);
  for (const char* bad : {"", "G", "4X", "-1", "1.5G", "99999999999999999"})
    EXPECT_THROW(parseMemorySize(bad), InputError) << bad;
  EXPECT_EQ(memorySizeText(std::int64_t(64) << 20), "64 MB");
  EXPECT_GT(defaultMemoryBudget(), 0);
}

// llama.cpp's stories260K (a real trained model, Meta's interleaved RoPE pairs): its per-layer
// attention equals that of its HF conversion (q/k rows permuted to rotate-half), and greedy
// decoding from BOS starts its known story.
TEST(GgufStories260K, AttentionEqualsItsHfConversion) {
  REQUIRE_SHARED_FILE(stories260K());
  TempDir tmp;
  const fs::path folder = tmp.path / "stories260K";
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "stories260k_to_hf.py").string()) + " " +
                          shellQuote(stories260K().string()) + " " + shellQuote(folder.string()) +
                          " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string ids = "1,403,407,261,378,432,383,286,261,376,298,315,421";
  const std::string wg = (tmp.path / "wg.npy").string(), wh = (tmp.path / "wh.npy").string(),
                    zg = (tmp.path / "zg.npy").string(), zh = (tmp.path / "zh.npy").string();
  const CliRun g = runBinary({"model", "--model", stories260K().string(), "--ids", ids,
                              "--weights", wg, "--logits", zg},
                             tmp.path);
  ASSERT_EQ(g.exitCode, 0) << g.err;
  const CliRun h = runBinary(
      {"model", "--model", folder.string(), "--ids", ids, "--weights", wh, "--logits", zh},
      tmp.path);
  ASSERT_EQ(h.exitCode, 0) << h.err;
  const NpyArray a = readNpy(wg), b = readNpy(wh);
  EXPECT_EQ(a.shape, (std::vector<long long>{5, 8, 13, 13}));
  EXPECT_EQ(a.shape, b.shape);
  expectClose(a.data, b, kWeightsAbs, 0, "stories260K GGUF vs HF weights");
  expectClose(readNpy(zg).data, readNpy(zh), 0, kLogitsRel, "stories260K GGUF vs HF logits");
  // Same tokenizer both ways.
  EXPECT_EQ(tokenize(stories260K(), "Once upon a time", tmp.path).out, "1 403 407 261 378\n");
  EXPECT_EQ(tokenize(folder, "Once upon a time", tmp.path).out, "1 403 407 261 378\n");
}

TEST(GgufStories260K, TopOneFollowsTheStory) {
  REQUIRE_SHARED_FILE(stories260K());
  TempDir tmp;
  auto top1 = [&](const std::string& ids) {
    const CliRun run = runBinary(
        {"model", "--model", stories260K().string(), "--ids", ids, "--top-k", "1"}, tmp.path);
    EXPECT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(lineCount(run.out), 1) << run.out;
    int id = -1;
    EXPECT_EQ(std::sscanf(run.out.c_str(), "%d", &id), 1) << run.out;
    return id;
  };
  EXPECT_EQ(top1("1"), 403);
  // Further on, where RoPE matters: " Once upon a time" -> ",".
  EXPECT_EQ(top1("1,403,407,261,378"), 432);
  EXPECT_EQ(Model::open(stories260K().string())->weightsDescription(), "F32 (mapped)");
}

// A vocab-only GGUF (no tensors): `tokenize` works (llama.cpp's first test string, as its .out
// file says, without BOS under --no-special and with BOS 1 otherwise); `model` refuses it.
TEST(GgufVocabOnly, ServesTokenizeAndIsRefusedByModel) {
  const fs::path vocab = sharedTestdata() / "llama.cpp-vocab" / "ggml-vocab-llama-spm.gguf";
  REQUIRE_SHARED_FILE(vocab);
  TempDir tmp;
  // String 11 of the .inp file, "Hello world": 15043 3186 in the .out file.
  const CliRun plain = tokenize(vocab, "Hello world", tmp.path, true);
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  EXPECT_EQ(plain.out, "15043 3186\n");
  EXPECT_EQ(tokenize(vocab, "Hello world", tmp.path).out, "1 15043 3186\n");
  const CliRun model = runBinary({"model", "--model", vocab.string(), "--ids", "1,2"}, tmp.path);
  // Not just "missing tensor ...": the message says what the file is and what it serves.
  expectRefused(model, vocab.string(), "vocab-only");
}

// --parse-special (the default) and --no-parse-special on GPT-2's vocabulary: "<|endoftext|>"
// written in the text is the control token, or plain text. The ids are looked up in the file's
// token list (not made by attnviz's tokenizer): the control token's own, and as plain text the
// pieces GPT-2's BPE gives "<|endoftext|>" (tiktoken's gpt2 encoding with no special tokens
// allowed: "<", "|", "end", "of", "text", "|", ">").
TEST(GgufVocabOnly, ParseSpecialDecidesWhatSpecialTokensInTheTextAre) {
  const fs::path vocab = sharedTestdata() / "llama.cpp-vocab" / "ggml-vocab-gpt-2.gguf";
  REQUIRE_SHARED_FILE(vocab);
  const auto file = GgufFile::open(vocab.string());
  const std::vector<std::string> tokens = file->getStringArray("tokenizer.ggml.tokens").value();
  const std::vector<std::int64_t> types = file->getIntArray("tokenizer.ggml.token_type").value();
  auto idOf = [&](const std::string& t) {
    const auto it = std::find(tokens.begin(), tokens.end(), t);
    EXPECT_NE(it, tokens.end()) << t;
    return std::to_string(it - tokens.begin());
  };
  const std::string eot = idOf("<|endoftext|>");
  EXPECT_EQ(types.at(std::stoi(eot)), 3);  // control
  const std::string hi = idOf("Hi");
  std::string plainEot;
  for (const char* piece : {"<", "|", "end", "of", "text", "|", ">"}) plainEot += " " + idOf(piece);

  TempDir tmp;
  const std::string text = "Hi<|endoftext|>";
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"tokenize", "--model", vocab.string(), "--text", text};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliRun r = runBinary(args, tmp.path);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(run({}), hi + " " + eot + "\n");
  EXPECT_EQ(run({"--parse-special"}), hi + " " + eot + "\n");
  EXPECT_EQ(run({"--no-parse-special"}), hi + plainEot + "\n");
  EXPECT_EQ(run({"--no-parse-special", "--pieces"}), "Hi\n<\n|\nend\nof\ntext\n|\n>\n");
}

}  // namespace
}  // namespace attnviz::testing
