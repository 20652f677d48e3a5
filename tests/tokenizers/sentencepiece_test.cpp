// tokenizer.model through libsentencepiece, against python3-sentencepiece: two models trained at
// test time (BPE with byte fallback and a user-defined symbol; Unigram) and stories260K's
// vocabulary (tests/model/stories260k_to_hf.py's tokenizer.model), which must also agree with the
// GGUF's own SentencePiece-style tokenizer.
#include "tokenizer_test_util.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/model/tokenizers/gguf_vocab.h"
#include "attnviz/model/tokenizers/marian.h"
#include "attnviz/model/tokenizers/sentencepiece.h"

#include <nlohmann/json.hpp>

namespace attnviz::testing {
namespace {

using json = nlohmann::json;

fs::path storiesGguf() { return sharedTestdata() / "stories260K" / "stories260K.gguf"; }

struct SpReference {
  fs::path dir;
  json ids;
  std::string error;
};

// The models and python3-sentencepiece's ids (made once per build tree).
const SpReference& spReference() {
  static SpReference r = [] {
    SpReference s;
    const bool stories = fs::exists(storiesGguf());
    const std::string key = slurp(testDir() / "spm_reference.py") +
                            slurp(testDir() / "corpus.json") + (stories ? "stories" : "");
    s.dir = cachedReference("spm", key, [&](const fs::path& out) -> std::string {
      std::string cmd = ATTNVIZ_PYTHON " " + shellQuote((testDir() / "spm_reference.py").string()) +
                        " " + shellQuote(out.string()) + " " +
                        shellQuote((testDir() / "corpus.json").string());
      if (stories) cmd += " " + shellQuote(storiesGguf().string());
      const ShellRun run = runShell(cmd);
      if (run.rc != 0) {
        return "spm_reference.py failed (" + std::to_string(run.rc) +
               "; it needs Debian's python3-sentencepiece and python3-protobuf): " + run.out;
      }
      return "";
    }, s.error);
    if (s.error.empty()) s.ids = json::parse(slurp(s.dir / "reference.json"));
    return s;
  }();
  return r;
}

std::vector<std::string> corpus() {
  return json::parse(slurp(testDir() / "corpus.json")).get<std::vector<std::string>>();
}

class SpCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(SpCorpus, MatchesPythonSentencePiece) {
  const SpReference& ref = spReference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  const std::string name = GetParam();
  if (name == "stories") ATTNVIZ_REQUIRE_SHARED(storiesGguf());
  ASSERT_TRUE(ref.ids.contains(name));
  const fs::path dir = ref.dir / name;
  const auto tok = loadFolderTokenizer(dir.string());
  EXPECT_EQ(tok->kind(), "SentencePiece (tokenizer.model)");
  const auto texts = corpus();
  const auto want = ref.ids[name].get<std::vector<std::vector<int>>>();
  ASSERT_EQ(want.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(joinIds(tok->encode(texts[i], false)), joinIds(want[i]))
        << name << " corpus entry " << i << ": " << texts[i];
    // BOS by default (the model has one; stories' tokenizer_config.json says add_bos_token).
    std::vector<int> withBos{*tok->bos()};
    withBos.insert(withBos.end(), want[i].begin(), want[i].end());
    EXPECT_EQ(tok->encode(texts[i], true), withBos) << name << " entry " << i;
  }
  // (The trained models normalize with NFKC and fold runs of spaces: not lossless.)
  EXPECT_EQ(tok->decode(tok->encode("Once upon a time", true)),
            tok->pieceBytes(*tok->bos()) + "Once upon a time");
}

INSTANTIATE_TEST_SUITE_P(Models, SpCorpus, ::testing::Values("bpe", "unigram", "stories"));

// The same vocabulary from the GGUF metadata (llama.cpp's algorithm over scores) and from
// tokenizer.model (libsentencepiece): the same ids.
TEST(SentencePiece, AgreesWithTheGgufTokenizerOnStories260k) {
  const SpReference& ref = spReference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  ATTNVIZ_REQUIRE_SHARED(storiesGguf());
  const auto sp = loadFolderTokenizer((ref.dir / "stories").string());
  const auto file = GgufFile::open(storiesGguf().string());
  const auto gguf = loadGgufTokenizer(*file);
  for (const std::string& text : corpus()) {
    EXPECT_EQ(joinIds(gguf->encode(text, true)), joinIds(sp->encode(text, true))) << text;
  }
  EXPECT_EQ(sp->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  EXPECT_EQ(sp->decode({1, 403, 407, 261, 378}), "<s>Once upon a time");
}

// Parse-special off: "<s>" and "</s>" written in the text are plain text, as libsentencepiece
// itself reads them; the GGUF copy of the vocabulary (llama.cpp's parse_special off) agrees.
TEST(SentencePiece, ParseSpecialOffLeavesControlPiecesAsText) {
  const SpReference& ref = spReference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  ATTNVIZ_REQUIRE_SHARED(storiesGguf());
  const auto sp = loadFolderTokenizer((ref.dir / "stories").string());
  const auto file = GgufFile::open(storiesGguf().string());
  const auto gguf = loadGgufTokenizer(*file);
  const std::string text = "<s>Once upon</s> a time";
  const std::vector<int> parsed = sp->encode(text, false);
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 1), 1);
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 2), 1);
  sp->setParseSpecial(false);
  gguf->setParseSpecial(false);
  const std::vector<int> plain = sp->encode(text, false);
  for (int id : plain) EXPECT_FALSE(sp->isSpecial(id)) << id;
  EXPECT_EQ(joinIds(plain), joinIds(gguf->encode(text, false)));
}

TEST(SentencePiece, ConfigDecidesBosAndEos) {
  const SpReference& ref = spReference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  const std::string model = (ref.dir / "bpe" / "tokenizer.model").string();
  const std::string bytes = slurp(model);
  const auto plain = sentencePieceFromBytes(bytes, "", model);
  const auto noBos = sentencePieceFromBytes(bytes, R"({"add_bos_token": false})", model);
  const auto eos = sentencePieceFromBytes(
      bytes, R"({"add_eos_token": true, "eos_token": {"content": "</s>"}})", model);
  const std::vector<int> ids = plain->encode("Once upon", false);
  EXPECT_EQ(plain->encode("Once upon", true).front(), 1);
  EXPECT_EQ(noBos->encode("Once upon", true), ids);
  EXPECT_EQ(eos->encode("Once upon", true).back(), 2);
  EXPECT_EQ(eos->encode("Once upon", true).size(), ids.size() + 2);
  // The user-defined symbol is one piece wherever it is.
  const std::vector<int> tool = plain->encode("x<tool>y", false);
  EXPECT_EQ(std::count_if(tool.begin(), tool.end(),
                          [&](int id) { return plain->pieceBytes(id) == "<tool>"; }),
            1);
}

TEST(SentencePiece, MalformedModelNamesTheFile) {
  TempDir tmp;
  spit(tmp.path / "tokenizer.model", "this is not a protobuf \x01\x02\x03");
  try {
    loadFolderTokenizer(tmp.path.string());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find((tmp.path / "tokenizer.model").string()),
              std::string::npos)
        << e.what();
  }
  spit(tmp.path / "tokenizer.model", "");
  EXPECT_THROW(loadFolderTokenizer(tmp.path.string()), InputError);
}

// A serialized SentencePiece model (protobuf wire format by hand): each piece a
// ModelProto.pieces entry {piece = 1, score = 2, type = 3}. A piece that starts with a NUL byte
// parses, but libsentencepiece's trie builder (darts) throws on it: a NUL-terminated key of
// length zero (what the fuzzer found through a GGUF t5 vocabulary).
std::string spmWithPieces(const std::vector<std::pair<std::string, int>>& pieces) {
  std::string out;
  for (const auto& [text, type] : pieces) {
    std::string body = "\x0a" + std::string(1, char(text.size())) + text;
    body += std::string("\x15\0\0\0\0", 5) + "\x18" + std::string(1, char(type));
    out += "\x0a" + std::string(1, char(body.size())) + body;
  }
  return out;
}

// Marian's source.spm and target.spm load through the same guarded loader as tokenizer.model: a
// model libsentencepiece throws on is one line naming the file, not an escaped exception.
TEST(SentencePiece, MarianCorruptSourceSpmIsOneLineInputError) {
  const std::string bad = spmWithPieces({{"<unk>", 2}, {std::string("\0x", 2), 1}, {"a", 1}});
  for (const char* which : {"source.spm", "target.spm"}) {
    TempDir tmp;
    const fs::path good = spReference().dir / "unigram" / "tokenizer.model";
    if (!fs::exists(good)) GTEST_SKIP() << spReference().error;
    const bool source = std::string(which) == "source.spm";
    spit(tmp.path / "source.spm", source ? bad : slurp(good));
    spit(tmp.path / "target.spm", source ? slurp(good) : bad);
    spit(tmp.path / "vocab.json", R"({"</s>": 0, "<unk>": 1, "\u2581a": 2})");
    try {
      loadFolderTokenizer(tmp.path.string());
      ADD_FAILURE() << "a corrupt " << which << " was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_TRUE(what.starts_with((tmp.path / which).string() + ": not a usable SentencePiece model"))
          << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "escaped as a non-InputError: " << e.what();
    }
  }
}

}  // namespace
}  // namespace attnviz::testing
