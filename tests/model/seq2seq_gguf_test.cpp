// GGUF t5 (llama.cpp's layout: enc.blk.N / dec.blk.N, the relative position tables, a Unigram
// vocabulary with its normalizer): seq2seq_reference.py's random T5 folders (v1.0 ReLU with a
// tied head, v1.1 gated GELU untied) converted by tools/gguf/hf_to_gguf.py (seq2seq_gguf.py, at
// test time into a temp folder), through the real binary's encoder-decoder path against the
// float64 torch reference on the values each file holds, with llama.cpp's bucket distance (128);
// the tokenizer, the block description and greedy decoding equal the folders'; bad files exit 1
// naming the file.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <memory>
#include <tuple>

namespace attnviz::testing {
namespace {

std::string idList(const std::vector<int>& ids, const char* sep = ",") {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : sep) + std::to_string(id);
  return s;
}

class Seq2SeqGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    const std::string out = shellQuote(dir_->path.string());
    const std::string cmd =
        ATTNVIZ_PYTHON " " + shellQuote((modelDir() / "seq2seq_reference.py").string()) + " " +
        out + " >/dev/null && " ATTNVIZ_PYTHON " " +
        shellQuote((modelDir() / "seq2seq_gguf.py").string()) + " " + out + " >/dev/null";
    if (std::system(cmd.c_str()) == 0)
      cases_ = nlohmann::json::parse(slurp((dir_->path / "gguf_cases.json").string()));
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override { ASSERT_FALSE(cases_.is_null()) << "seq2seq_gguf.py failed"; }

  static fs::path root() { return dir_->path; }
  static const nlohmann::json& cases() { return cases_; }
  static std::string file(const std::string& name) { return (root() / name).string(); }

  // `attnviz model --ids SRC --target-ids TGT` writing the three sites' weights and the logits
  // as <stem>_{enc,dec,cross,logits}.npy.
  static CliRun runModel(const std::string& model, const nlohmann::json& c,
                         const std::string& stem) {
    return runBinary(
        {"model", "--model", model, "--ids", idList(c["source"].get<std::vector<int>>()),
         "--target-ids", idList(c["target"].get<std::vector<int>>()), "--weights",
         file(stem + "_enc.npy"), "--decoder-weights", file(stem + "_dec.npy"), "--cross-weights",
         file(stem + "_cross.npy"), "--logits", file(stem + "_logits.npy")},
        root());
  }

 private:
  static std::unique_ptr<TempDir> dir_;
  static nlohmann::json cases_;
};

std::unique_ptr<TempDir> Seq2SeqGguf::dir_;
nlohmann::json Seq2SeqGguf::cases_;

// Every site's weights within 1e-5 and the logits within 1e-4 of their scale of the float64
// reference on the file's values (llama.cpp's max_distance 128, not the folder's 20).
TEST_F(Seq2SeqGguf, EveryFileMatchesTheFloat64Reference) {
  ASSERT_EQ(cases()["cases"].size(), 2u);
  for (const auto& c : cases()["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const CliRun r = runModel(file(c["file"].get<std::string>()), c, "got");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    for (const auto& [what, abs, rel] :
         {std::tuple{"enc", 1e-5, 0.0}, std::tuple{"dec", 1e-5, 0.0},
          std::tuple{"cross", 1e-5, 0.0}, std::tuple{"logits", 0.0, 1e-4}}) {
      const NpyArray got = readNpy(file(std::string("got_") + what + ".npy"));
      const NpyArray want = readNpy(file(c[what].get<std::string>()));
      EXPECT_EQ(got.shape, want.shape) << what;
      expectClose(got.data, want, abs, rel, name + " " + what);
    }
  }
}

// The file computes what its folder computes once the folder says max_distance 128: the same
// float32 weights through the same pass.
TEST_F(Seq2SeqGguf, FileEqualsItsFolderAtDistance128) {
  for (const auto& c : cases()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const CliRun a = runModel(file(c["file"].get<std::string>()), c, "a");
    const CliRun b = runModel(file(c["md128"].get<std::string>()), c, "b");
    ASSERT_EQ(a.exitCode, 0) << a.err;
    ASSERT_EQ(b.exitCode, 0) << b.err;
    for (const char* what : {"enc", "dec", "cross", "logits"}) {
      expectClose(readNpy(file(std::string("a_") + what + ".npy")).data,
                  readNpy(file(std::string("b_") + what + ".npy")), 1e-6, 0, what);
    }
  }
}

// The GGUF's Unigram vocabulary (rebuilt as a SentencePiece model with the file's normalizer)
// tokenizes as the folder's spiece.model: source and target side, ids and pieces; `--text` and
// `--target` then run the ids the reference ran.
TEST_F(Seq2SeqGguf, TokenizationEqualsTheFolders) {
  const auto& c = cases()["cases"][1];
  const std::string gguf = file(c["file"].get<std::string>()),
                    folder = file(c["hf"].get<std::string>());
  const std::vector<std::string> texts = {c["source_text"].get<std::string>(),
                                          c["target_text"].get<std::string>(),
                                          "  The  CAT,\tand ｔｈｅ dog! ", "zebra", ""};
  for (const std::string& t : texts) {
    SCOPED_TRACE(t);
    for (const char* extra : {"", "--target", "--pieces", "--no-special"}) {
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
  const CliRun src = runBinary({"tokenize", "--model", gguf, "--text", texts[0]}, root());
  EXPECT_EQ(src.out, idList(c["source"].get<std::vector<int>>(), " ") + "\n");
  const auto m = Model::open(gguf);
  std::vector<int> tgt = m->tokenizer().encode(texts[1], true);
  tgt.pop_back();  // the target's tokens without their EOS, after the start id
  tgt.insert(tgt.begin(), *m->config().decoderStartId);
  EXPECT_EQ(tgt, c["target"].get<std::vector<int>>());
}

// The GGUF reader sets the block description of the folder's config.json (at distance 128).
TEST_F(Seq2SeqGguf, BlockDescriptionEqualsTheFolders) {
  for (const auto& c : cases()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ModelConfig g = Model::open(file(c["file"].get<std::string>()))->config();
    const ModelConfig h = Model::open(file(c["md128"].get<std::string>()))->config();
    EXPECT_EQ(g.family, "t5");
    EXPECT_EQ(g.nLayer, h.nLayer);
    EXPECT_EQ(g.nEncoderLayer, h.nEncoderLayer);
    EXPECT_EQ(g.nHead, h.nHead);
    EXPECT_EQ(g.nKvHead, h.nKvHead);
    EXPECT_EQ(g.headSize, h.headSize);
    EXPECT_EQ(g.nEmbd, h.nEmbd);
    EXPECT_EQ(g.nInner, h.nInner);
    EXPECT_EQ(g.nPositions, h.nPositions);
    EXPECT_EQ(g.vocabSize, h.vocabSize);
    EXPECT_EQ(g.relBuckets, h.relBuckets);
    EXPECT_EQ(g.relMaxDistance, h.relMaxDistance);
    EXPECT_EQ(g.relMaxDistance, 128);
    EXPECT_EQ(g.layerNormEps, h.layerNormEps);
    EXPECT_EQ(g.norm, h.norm);
    EXPECT_EQ(g.normPlacement, h.normPlacement);
    EXPECT_EQ(g.positions, h.positions);
    EXPECT_EQ(g.causal, h.causal);
    EXPECT_EQ(g.mlp, h.mlp);
    EXPECT_EQ(g.activation, h.activation);
    EXPECT_EQ(g.tiedHead, h.tiedHead);
    EXPECT_EQ(g.headInputScale, h.headInputScale);
    EXPECT_EQ(g.scoreScaleOf(), h.scoreScaleOf());
    EXPECT_EQ(g.decoderStartId, h.decoderStartId);
    EXPECT_EQ(g.padId, h.padId);
    EXPECT_EQ(g.eosId, h.eosId);
  }
}

// `generate` (the encoder once, both caches) gives the reference's greedy ids.
TEST_F(Seq2SeqGguf, GreedyDecodingEqualsTheReference) {
  for (const auto& c : cases()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<int> want = c["greedy"].get<std::vector<int>>();
    want.erase(want.begin());  // the start id is the prompt, not generated
    const CliRun r =
        runBinary({"generate", "--model", file(c["file"].get<std::string>()), "--ids",
                   idList(c["source"].get<std::vector<int>>()), "-n", "6", "--print-ids"},
                  root());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, idList(want, " ") + "\n");
  }
}

// Broken files: exit 1, one line on stderr naming the file and the problem.
TEST_F(Seq2SeqGguf, BadFilesExitOneNamingTheFile) {
  const auto& bad = cases()["bad"];
  ASSERT_EQ(bad.size(), 6u);
  for (const auto& b : bad) {
    SCOPED_TRACE(b["name"].get<std::string>());
    const std::string path = file(b["file"].get<std::string>());
    const CliRun r =
        runBinary({"model", "--model", path, "--ids", "5,6,1", "--target-ids", "0,3"}, root());
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
