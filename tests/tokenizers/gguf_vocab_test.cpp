// GGUF vocabularies: llama.cpp's own tokenizer tests on its vocab-only GGUF files (every string of
// every .inp gives the .out ids, special tokens off, no BOS), stories260K, and hand-made
// vocabularies for the rules (score-ordered merges, byte fallback, special pieces, WordPiece).
#include "tokenizer_test_util.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/model/tokenizers/gguf_vocab.h"

namespace attnviz::testing {
namespace {

fs::path vocabDir() { return sharedTestdata() / "llama.cpp-vocab"; }

struct VocabCase {
  std::string text;
  std::vector<int> ids;
};

// llama.cpp's test-tokenizer-0 format: the .inp strings separated by "\n__ggml_vocab_test__\n",
// the .out one line of space-separated ids per string.
std::vector<VocabCase> readCases(const fs::path& gguf) {
  const std::string inp = slurp(gguf.string() + ".inp");
  const std::string out = slurp(gguf.string() + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (std::size_t pos = 0; pos < inp.size();) {
    const std::size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<VocabCase> cases;
  std::istringstream lines(out);
  std::string line;
  for (std::size_t i = 0; std::getline(lines, line); ++i) {
    VocabCase c;
    c.text = i < texts.size() ? texts[i] : std::string();
    std::istringstream ids(line);
    for (int id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << gguf;
  return cases;
}

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, EveryInputGivesTheExpectedIds) {
  const fs::path gguf = vocabDir() / ("ggml-vocab-" + GetParam() + ".gguf");
  ATTNVIZ_REQUIRE_SHARED(gguf);
  const auto file = GgufFile::open(gguf.string());
  GgufTokenizerOptions options;
  options.parseSpecial = false;  // as llama.cpp's test
  const auto tok = loadGgufTokenizer(*file, options);
  const auto cases = readCases(gguf);
  ASSERT_GE(cases.size(), 30u);
  int failures = 0;
  for (const VocabCase& c : cases) {
    const std::vector<int> got = tok->encode(c.text, false);
    if (got != c.ids) {
      ++failures;
      ADD_FAILURE() << GetParam() << ": '" << c.text << "'\n  want " << joinIds(c.ids)
                    << "\n  got  " << joinIds(got);
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size();
}

INSTANTIATE_TEST_SUITE_P(AllFiles, LlamaCppVocab,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "mpt", "deepseek-coder",
                                           "bert-bge"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

TEST(GgufVocab, SpecialTokensAndBosAsTheFileSays) {
  const fs::path gguf = vocabDir() / "ggml-vocab-llama-spm.gguf";
  ATTNVIZ_REQUIRE_SHARED(gguf);
  const auto file = GgufFile::open(gguf.string());
  const auto tok = loadGgufTokenizer(*file);  // parse_special on
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->unk(), 0);
  EXPECT_EQ(tok->size(), 32000);
  // add_bos_token is true; "<s>" in the text is the BOS piece, and the text after it gets its
  // own space prefix (llama.cpp: after a special token).
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<int>{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("<s>Hello</s>", false), (std::vector<int>{1, 15043, 2}));
  EXPECT_EQ(tok->decode(tok->encode("Hello world", true)), "<s>Hello world");
  EXPECT_EQ(tok->pieceBytes(13), "\n");      // <0x0A>
  EXPECT_EQ(tok->pieceBytes(15043), " Hello");
  EXPECT_EQ(tok->label(15043), "\u2423Hello");
  EXPECT_TRUE(tok->isSpecial(1));
  EXPECT_FALSE(tok->isSpecial(15043));
  EXPECT_THROW(tok->pieceBytes(32000), InputError);
}

TEST(GgufVocab, Stories260kEncodesLikeItsTraining) {
  const fs::path gguf = sharedTestdata() / "stories260K" / "stories260K.gguf";
  ATTNVIZ_REQUIRE_SHARED(gguf);
  const auto file = GgufFile::open(gguf.string());
  const auto tok = loadGgufTokenizer(*file);
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  // The README's greedy continuation decodes to its text.
  const std::vector<int> gen{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395,
                             317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411};
  EXPECT_EQ(tok->decode(gen),
            "Once upon a time, there was a little girl named Lily. She loved to play outside");
}

TEST(GgufVocab, Gpt2AndBertFiles) {
  const fs::path gpt2 = vocabDir() / "ggml-vocab-gpt-2.gguf";
  ATTNVIZ_REQUIRE_SHARED(gpt2);
  {
    const auto file = GgufFile::open(gpt2.string());
    const auto tok = loadGgufTokenizer(*file);
    EXPECT_EQ(tok->encode("Hello world\n the", true), (std::vector<int>{15496, 995, 198, 262}));
    EXPECT_EQ(tok->encode("<|endoftext|>", true), (std::vector<int>{50256}));
    EXPECT_EQ(tok->pieceBytes(995), " world");
    EXPECT_EQ(tok->decode({15496, 995, 198, 262}), "Hello world\n the");
  }
  const fs::path bert = vocabDir() / "ggml-vocab-bert-bge.gguf";
  const auto file = GgufFile::open(bert.string());
  const auto tok = loadGgufTokenizer(*file);
  const std::vector<int> ids = tok->encode("Hello, World!", true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), 101);  // [CLS]
  EXPECT_EQ(ids.back(), 102);   // [SEP]
  EXPECT_EQ(tok->decode(tok->encode("hello world", false)), "hello world");
}

// ---- Hand-made vocabularies --------------------------------------------------------------------

GgufVocab spmVocab() {
  GgufVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c", "ab", "bc", "\xE2\x96\x81" "a",
              "<tool>"};
  v.scores = {0, 0, 0, -1, -2, -2, -2, -5, -1, -3, 0};
  v.tokenType = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 4};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    v.tokens.push_back(hex);
    v.scores.push_back(0);
    v.tokenType.push_back(6);
  }
  return v;
}

TEST(GgufVocab, SpmMergesTheBestScoringPairFirst) {
  const auto tok = makeGgufTokenizer(spmVocab(), "test.gguf");
  // "▁abc": pairs ▁a (-3), ab (-5), bc (-1): bc first, then ▁a; ▁a + bc is no piece.
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int>{9, 8}));
  EXPECT_EQ(tok->encode("abc", true), (std::vector<int>{1, 9, 8}));
  // No space prefix: "a", "bc".
  GgufVocab v = spmVocab();
  v.addSpacePrefix = false;
  v.addBos = false;
  const auto noPrefix = makeGgufTokenizer(v, "test.gguf");
  EXPECT_EQ(noPrefix->encode("abc", true), (std::vector<int>{4, 8}));
  // A character with no piece: its UTF-8 bytes (<0xC3> = 11 + 0xC3, <0xA9>).
  EXPECT_EQ(noPrefix->encode("\xC3\xA9", false), (std::vector<int>{11 + 0xC3, 11 + 0xA9}));
  EXPECT_EQ(noPrefix->decode({11 + 0xC3, 11 + 0xA9}), "\xC3\xA9");
}

TEST(GgufVocab, UserDefinedPiecesAlwaysControlOnlyWhenParsingSpecial) {
  GgufTokenizerOptions off;
  off.parseSpecial = false;
  const auto plain = makeGgufTokenizer(spmVocab(), "test.gguf", off);
  const auto parsing = makeGgufTokenizer(spmVocab(), "test.gguf");
  // <tool> is user-defined: cut out either way; the text after it gets a space prefix only after
  // a special piece... and a user-defined piece counts as one (llama.cpp).
  EXPECT_EQ(plain->encode("a<tool>a", false), (std::vector<int>{9, 10, 9}));
  EXPECT_EQ(parsing->encode("a<s>a", false), (std::vector<int>{9, 1, 9}));
  const std::vector<int> literal = plain->encode("a<s>a", false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 1), 0);  // "<s>" as text
}

TEST(GgufVocab, MissingByteWithoutUnknownIsRefusedNamingIt) {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens = {"a", "b"};
  const auto tok = makeGgufTokenizer(v, "test.gguf");
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int>{0, 1}));
  try {
    tok->encode("a\xC3\xA9", false);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("U+00E9"), std::string::npos) << e.what();
  }
}

TEST(GgufVocab, Gpt2MergesByRankAndPreTokenizerRegexes) {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "qwen2";  // digits one by one
  v.tokens = {"1", "2", "3", "12", "23", "a", "b", "ab", "\xC4\xA0", "\xC4\xA0" "a"};  // Ġ = ' '
  v.merges = {"2 3", "1 2", "a b", "\xC4\xA0 a"};
  const auto tok = makeGgufTokenizer(v, "test.gguf");
  EXPECT_EQ(tok->encode("123", false), (std::vector<int>{0, 1, 2}));  // \p{N} splits digits
  // " ab": "a b" (rank 2) before "Ġ a" (rank 3), and "Ġab" is no token.
  EXPECT_EQ(tok->encode("ab ab", false), (std::vector<int>{7, 8, 7}));
  v.pre = "gpt-2";
  const auto gpt2 = makeGgufTokenizer(v, "test.gguf");
  EXPECT_EQ(gpt2->encode("123", false), (std::vector<int>{0, 4}));  // "2 3" ranks first
  EXPECT_EQ(gpt2->decode(gpt2->encode("ab ab", false)), "ab ab");
}

TEST(GgufVocab, BertWordPiece) {
  GgufVocab v;
  v.model = "bert";
  v.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81" "play", "ing", "\xE2\x96\x81" "!",
              "\xE2\x96\x81" "un", "\xE2\x96\x81" "cafe"};
  v.tokenType = {3, 3, 3, 3, 1, 1, 1, 1, 1};
  v.unk = 1;
  v.cls = 2;
  v.sep = 3;
  const auto tok = makeGgufTokenizer(v, "test.gguf");
  EXPECT_EQ(tok->encode("Playing!", true), (std::vector<int>{2, 4, 5, 6, 3}));
  EXPECT_EQ(tok->encode("CAF\xC3\x89 unknown", false), (std::vector<int>{8, 1}));  // accent gone
  EXPECT_EQ(tok->decode({4, 5, 6}), "playing !");
}

TEST(GgufVocab, BadVocabulariesAreRefused) {
  GgufVocab v = spmVocab();
  v.model = "t5";
  try {
    makeGgufTokenizer(v, "x.gguf");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.gguf: unsupported tokenizer model 't5'"),
              std::string::npos)
        << e.what();
  }
  v = spmVocab();
  v.model = "gpt2";
  v.pre = "no-such-pre";
  EXPECT_THROW(makeGgufTokenizer(v, "x.gguf"), InputError);
  v = spmVocab();
  v.tokens[5] = v.tokens[4];
  EXPECT_THROW(makeGgufTokenizer(v, "x.gguf"), InputError);  // duplicate token
  v = spmVocab();
  v.scores.pop_back();
  EXPECT_THROW(makeGgufTokenizer(v, "x.gguf"), InputError);
  v = spmVocab();
  v.tokens.clear();
  v.scores.clear();
  v.tokenType.clear();
  EXPECT_THROW(makeGgufTokenizer(v, "x.gguf"), InputError);
}

}  // namespace
}  // namespace attnviz::testing
