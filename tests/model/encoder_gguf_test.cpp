// GGUF bert (llama.cpp's layout for embedding models: the encoder without its masked-LM head):
// encoder_reference.py's random BERT folders converted by tools/gguf/hf_to_gguf.py to F32, F16
// and Q8_0 (encoder_gguf.py, at test time into a temp folder), through the real binary against
// the float64 torch reference on the values each file stores, and against the checkpoint's own
// reference within the rounding each type allows; the tokenizer and the block description equal
// the folder's; fill and --logits are refused (no head); bad files exit 1 naming the file.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <memory>

namespace attnviz::testing {
namespace {

// Against the reference on the file's own values: float32 arithmetic only.
constexpr double kWeightsAbs = 1e-5;
constexpr double kHiddenRel = 1e-4;
// Against the checkpoint's reference (the unrounded weights): the largest change of an attention
// weight, and of a hidden value over the largest hidden value, each type's rounding allows
// (measured: F16 3.3e-4 and 5.4e-4, Q8_0 9.3e-3 and 1.7e-2; F32 1e-7).
struct TypeTolerance {
  const char* type;
  double weightsAbs, hiddenRel;
};
constexpr TypeTolerance kVsCheckpoint[] = {
    {"F32", 1e-5, 1e-4}, {"F16", 1e-3, 2e-3}, {"Q8_0", 2e-2, 4e-2}};

class EncoderGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    const std::string out = shellQuote(dir_->path.string());
    const std::string cmd =
        ATTNVIZ_PYTHON " " + shellQuote((modelDir() / "encoder_reference.py").string()) + " " +
        out + " >/dev/null && " ATTNVIZ_PYTHON " " +
        shellQuote((modelDir() / "encoder_gguf.py").string()) + " " + out + " >/dev/null";
    if (std::system(cmd.c_str()) == 0)
      cases_ = nlohmann::json::parse(slurp((dir_->path / "gguf_cases.json").string()));
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override { ASSERT_FALSE(cases_.is_null()) << "encoder_gguf.py failed"; }

  static fs::path root() { return dir_->path; }
  static const nlohmann::json& cases() { return cases_; }
  static std::string file(const std::string& name) { return (root() / name).string(); }

  // `attnviz model --text [--text-pair] --weights --hidden` on a model.
  static CliRun runModel(const std::string& model, const nlohmann::json& run, const fs::path& w,
                         const fs::path& h) {
    std::vector<std::string> args = {"model", "--model", model, "--text",
                                     run["text"].get<std::string>()};
    if (run.contains("text_pair"))
      args.insert(args.end(), {"--text-pair", run["text_pair"].get<std::string>()});
    args.insert(args.end(), {"--weights", w.string(), "--hidden", h.string()});
    return runBinary(args, root());
  }

 private:
  static std::unique_ptr<TempDir> dir_;
  static nlohmann::json cases_;
};

std::unique_ptr<TempDir> EncoderGguf::dir_;
nlohmann::json EncoderGguf::cases_;

const TypeTolerance& toleranceOf(const std::string& type) {
  for (const TypeTolerance& t : kVsCheckpoint)
    if (type == t.type) return t;
  ADD_FAILURE() << "no tolerance for " << type;
  return kVsCheckpoint[0];
}

// Every file, on the single text and on the pair (token types 0/1): every layer's attention
// weights and the last hidden states equal the float64 reference on the values the file holds,
// and the checkpoint's reference within the type's rounding.
TEST_F(EncoderGguf, EveryFileMatchesTheFloat64Reference) {
  const auto& files = cases()["files"];
  ASSERT_EQ(files.size(), 4u);  // bert_mlm F32, F16, Q8_0; bert_base F32
  int runs = 0;
  for (const auto& f : files) {
    const std::string name = f["name"].get<std::string>();
    const std::string type = f["type"].get<std::string>();
    for (const auto& run : f["runs"]) {
      SCOPED_TRACE(name + " " + run["case"].get<std::string>());
      const fs::path w = root() / "w.npy", h = root() / "h.npy";
      const CliRun r = runModel(file(f["file"].get<std::string>()), run, w, h);
      ASSERT_EQ(r.exitCode, 0) << r.err;
      const NpyArray gw = readNpy(w.string()), gh = readNpy(h.string());
      const NpyArray rw = readNpy(file(run["weights"].get<std::string>()));
      const NpyArray rh = readNpy(file(run["hidden"].get<std::string>()));
      EXPECT_EQ(gw.shape, rw.shape);
      EXPECT_EQ(gh.shape, rh.shape);
      expectClose(gw.data, rw, kWeightsAbs, 0, "weights vs the file's reference");
      expectClose(gh.data, rh, 0, kHiddenRel, "hidden vs the file's reference");
      const TypeTolerance& tol = toleranceOf(type);
      expectClose(gw.data, readNpy(file(run["hf_weights"].get<std::string>())), tol.weightsAbs, 0,
                  type + " weights vs the checkpoint's reference");
      expectClose(gh.data, readNpy(file(run["hf_hidden"].get<std::string>())), 0, tol.hiddenRel,
                  type + " hidden vs the checkpoint's reference");
      ++runs;
    }
  }
  EXPECT_EQ(runs, 8);
}

// The F32 twin computes what its folder computes (the same float32 weights, the same pass).
TEST_F(EncoderGguf, F32TwinEqualsItsFolder) {
  for (const auto& f : cases()["files"]) {
    if (f["type"] != "F32") continue;
    for (const auto& run : f["runs"]) {
      SCOPED_TRACE(f["name"].get<std::string>() + " " + run["case"].get<std::string>());
      const fs::path w1 = root() / "w1.npy", h1 = root() / "h1.npy";
      const fs::path w2 = root() / "w2.npy", h2 = root() / "h2.npy";
      const CliRun a = runModel(file(f["file"].get<std::string>()), run, w1, h1);
      const CliRun b = runModel(file(f["hf"].get<std::string>()), run, w2, h2);
      ASSERT_EQ(a.exitCode, 0) << a.err;
      ASSERT_EQ(b.exitCode, 0) << b.err;
      expectClose(readNpy(w1.string()).data, readNpy(w2.string()), 1e-6, 0, "weights");
      expectClose(readNpy(h1.string()).data, readNpy(h2.string()), 0, 1e-6, "hidden");
    }
  }
}

// The GGUF's vocabulary (llama.cpp's spelling: U+2581 word starts, "##" dropped) tokenizes as
// the folder's vocab.txt does, pairs and their token types included.
TEST_F(EncoderGguf, TokenizationEqualsTheFolders) {
  const std::string gguf = file("bert_mlm_f32.gguf"), folder = file("bert_mlm");
  const std::vector<std::string> texts = {"The cat sat on the [MASK] and played.",
                                          "It was [MASK] in the sun.",
                                          "playing dogs ran, and the Sun is BRIGHT.",
                                          "a zebra sat",
                                          "houses played",
                                          ""};
  for (const std::string& t : texts) {
    SCOPED_TRACE(t);
    for (const char* extra : {"", "--no-special", "--pieces"}) {
      std::vector<std::string> args = {"tokenize", "--model", gguf, "--text", t};
      if (*extra) args.push_back(extra);
      const CliRun g = runBinary(args, root());
      args[2] = folder;
      const CliRun h = runBinary(args, root());
      ASSERT_EQ(g.exitCode, 0) << g.err;
      ASSERT_EQ(h.exitCode, 0) << h.err;
      EXPECT_EQ(g.out, h.out) << extra;
    }
  }
  const auto mg = Model::open(gguf), mh = Model::open(folder);
  for (const auto& run : cases()["files"][0]["runs"]) {
    if (!run.contains("text_pair")) continue;
    const std::string a = run["text"].get<std::string>(), b = run["text_pair"].get<std::string>();
    const PairEncoding pg = mg->tokenizer().encodePair(a, b);
    const PairEncoding ph = mh->tokenizer().encodePair(a, b);
    EXPECT_EQ(pg.ids, ph.ids);
    EXPECT_EQ(pg.typeIds, ph.typeIds);
    EXPECT_EQ(pg.ids, run["ids"].get<std::vector<int>>());
    EXPECT_EQ(pg.typeIds, run["types"].get<std::vector<int>>());
  }
  EXPECT_EQ(mg->tokenizer().mask(), mh->tokenizer().mask());
}

// The GGUF reader sets the block description the config.json reader sets.
TEST_F(EncoderGguf, BlockDescriptionEqualsTheFolders) {
  for (const auto& f : cases()["files"]) {
    SCOPED_TRACE(f["name"].get<std::string>());
    const auto g = Model::open(file(f["file"].get<std::string>()));
    const ModelConfig& gc = g->config();
    const ModelConfig h = Model::open(file(f["hf"].get<std::string>()))->config();
    EXPECT_EQ(gc.family, "bert");
    EXPECT_EQ(gc.nLayer, h.nLayer);
    EXPECT_EQ(gc.nHead, h.nHead);
    EXPECT_EQ(gc.nKvHead, h.nKvHead);
    EXPECT_EQ(gc.headSize, h.headSize);
    EXPECT_EQ(gc.nEmbd, h.nEmbd);
    EXPECT_EQ(gc.nInner, h.nInner);
    EXPECT_EQ(gc.nPositions, h.nPositions);
    EXPECT_EQ(gc.positionOffset, h.positionOffset);
    EXPECT_EQ(gc.vocabSize, h.vocabSize);
    EXPECT_EQ(gc.typeVocabSize, h.typeVocabSize);
    EXPECT_EQ(gc.layerNormEps, h.layerNormEps);
    EXPECT_EQ(gc.norm, h.norm);
    EXPECT_EQ(gc.normPlacement, h.normPlacement);
    EXPECT_EQ(gc.causal, h.causal);
    EXPECT_FALSE(gc.causal);
    EXPECT_EQ(gc.positions, h.positions);
    EXPECT_EQ(gc.mlp, h.mlp);
    EXPECT_EQ(gc.activation, h.activation);
    EXPECT_EQ(gc.headActivation, h.headActivation);
    EXPECT_EQ(gc.qkvBias, h.qkvBias);
    EXPECT_EQ(gc.outBias, h.outBias);
    EXPECT_EQ(gc.mlpBias, h.mlpBias);
    EXPECT_EQ(gc.scoreScaleOf(), h.scoreScaleOf());
    EXPECT_FALSE(g->headMissing().empty());  // llama.cpp's bert never holds the MLM head
  }
}

// No masked-LM head in a GGUF bert: fill and --logits exit 1 with one line naming the file and
// saying so, and write nothing; --hidden and --weights still work (the first test).
TEST_F(EncoderGguf, FillAndLogitsAreRefusedNamingTheFile) {
  const std::string gguf = file("bert_mlm_f16.gguf");
  const fs::path z = root() / "z.npy";
  const std::vector<std::vector<std::string>> commands = {
      {"fill", "--model", gguf, "--text", "The cat sat on the [MASK]."},
      {"fill", "--model", gguf, "--text", "The [MASK] sat.", "--text-pair", "It was happy."},
      {"model", "--model", gguf, "--text", "The cat sat.", "--logits", z.string()}};
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0]);
    const CliRun r = runBinary(args, root());
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(gguf), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the GGUF has no masked-LM head"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(fs::exists(z));
  }
}

// Broken files: exit 1, one line on stderr naming the file and the problem.
TEST_F(EncoderGguf, BadFilesExitOneNamingTheFile) {
  const auto& bad = cases()["bad"];
  ASSERT_EQ(bad.size(), 5u);
  for (const auto& b : bad) {
    SCOPED_TRACE(b["name"].get<std::string>());
    const std::string path = file(b["file"].get<std::string>());
    const CliRun r = runBinary({"model", "--model", path, "--text", "the cat sat"}, root());
    const std::string expect = b["expect"].get<std::string>();
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << "want \"" << expect << "\" in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
}  // namespace attnviz::testing
