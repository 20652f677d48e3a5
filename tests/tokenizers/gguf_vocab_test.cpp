// GGUF vocabularies: llama.cpp's own tokenizer tests on its vocab-only GGUF files (every string of
// every .inp gives the .out ids, special tokens off, no BOS), stories260K, and hand-made
// vocabularies for the rules (score-ordered merges, byte fallback, special pieces, WordPiece).
#include "tokenizer_test_util.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/model/tokenizers/gguf_vocab.h"

#include <algorithm>
#include <set>

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
  // The greedy continuation of ../shared/testdata/README.md decodes to its text.
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

// t5 (llama.cpp's UGM): a Unigram model, the segmentation of highest total score, </s> after the
// text. Worked by hand: "abc" is "\u2581ab" + "c" (-1 - 2 = -3) rather than "\u2581a" + "b" + "c"
// (-2 - 2 - 2 = -6) or "\u2581" + "abc" (absent); "ca" has no "\u2581c", so "\u2581" + "c" + "a".
TEST(GgufVocab, T5UnigramTakesTheBestSegmentation) {
  GgufVocab v;
  v.model = "t5";
  v.tokens = {"<pad>", "</s>", "<unk>", "\xE2\x96\x81" "ab", "\xE2\x96\x81" "a", "b", "c", "a",
              "\xE2\x96\x81"};
  v.scores = {0, 0, 0, -1, -2, -2, -2, -2, -3};
  v.tokenType = {3, 3, 2, 1, 1, 1, 1, 1, 1};
  v.eos = 1;
  v.pad = 0;
  const auto tok = makeGgufTokenizer(v, "t5.gguf");
  EXPECT_EQ(tok->encode("abc", true), (std::vector<int>{3, 6, 1}));
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int>{3, 6}));
  EXPECT_EQ(tok->encode("ca", false), (std::vector<int>{8, 6, 7}));
  EXPECT_EQ(tok->encode("ab z", false), (std::vector<int>{3, 8, 2}));  // z: no piece
  EXPECT_EQ(tok->eos(), std::optional<int>(1));
  EXPECT_FALSE(tok->bos());
}

TEST(GgufVocab, BadVocabulariesAreRefused) {
  GgufVocab v = spmVocab();
  v.model = "rwkv";
  try {
    makeGgufTokenizer(v, "x.gguf");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.gguf: unsupported tokenizer model 'rwkv'"),
              std::string::npos)
        << e.what();
  }
  // A t5 vocabulary the SentencePiece library refuses (byte pieces without byte fallback).
  v = spmVocab();
  v.model = "t5";
  try {
    makeGgufTokenizer(v, "x.gguf");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.gguf: not a SentencePiece model"), std::string::npos)
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


// ---- Pre-tokenizer table -------------------------------------------------------------------------

// GPT-2's byte alphabet, written here from its definition (bytes_to_unicode in GPT-2's encoder.py):
// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the other bytes in order for
// U+0100, U+0101, ...
std::string alphabetChar(unsigned char b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    auto utf8 = [](int cp) {
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      return s;
    };
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[b] = utf8(self ? b : next++);
    }
    return t;
  }();
  return table[b];
}

// A byte-level vocabulary that can spell every substring of `text` as one token, with a merge for
// every way of cutting each substring in two (shorter substrings rank first). BPE then merges each
// pre-tokenizer piece of `text` into one token, whatever order it merges in, and never across
// pieces: the ids name the pieces.
GgufVocab wholePieceVocab(const std::string& text, const std::string& pre) {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(alphabetChar(static_cast<unsigned char>(b)));
  std::vector<std::string> chars;  // the text in the alphabet, one entry a byte
  for (unsigned char c : text) chars.push_back(alphabetChar(c));
  std::set<std::string> seen(v.tokens.begin(), v.tokens.end());
  for (std::size_t len = 2; len <= chars.size(); ++len) {
    for (std::size_t a = 0; a + len <= chars.size(); ++a) {
      std::string whole;
      for (std::size_t i = a; i < a + len; ++i) whole += chars[i];
      if (!seen.insert(whole).second) continue;
      v.tokens.push_back(whole);
      std::string left;
      for (std::size_t k = 1; k < len; ++k) {
        left += chars[a + k - 1];
        v.merges.push_back(left + " " + whole.substr(left.size()));
      }
    }
  }
  return v;
}

// The ids `pieces` must give: each piece's own token in wholePieceVocab.
std::vector<int> idsOfPieces(const GgufVocab& v, const std::vector<std::string>& pieces) {
  std::vector<int> ids;
  for (const std::string& p : pieces) {
    std::string spelt;
    for (unsigned char c : p) spelt += alphabetChar(c);
    const auto it = std::find(v.tokens.begin(), v.tokens.end(), spelt);
    EXPECT_NE(it, v.tokens.end()) << p;
    ids.push_back(static_cast<int>(it - v.tokens.begin()));
  }
  return ids;
}

// The names of llama.cpp's pre-tokenizer table (src/llama-vocab.cpp, llama_vocab::impl::load:
// the tokenizer_pre strings of the BPE branch), written out here from that file.
const std::vector<std::string> kLlamaCppPreNames = {
    "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
    "lfm2", "jina-v5-nano", "minicpm5", "deepseek-llm", "deepseek-coder", "deepseek-v3",
    "spark2_5", "youtu", "falcon", "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de",
    "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jais-2", "gemma4",
    "granite-embed-multi-311m", "sarvam-moe", "jina-v1-en", "jina-v2-code", "roberta-bpe",
    "whitespace", "refact", "command-r", "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35",
    "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "glm4", "chatglm-bpe", "viking", "jais",
    "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone", "exaone4", "exaone-moe",
    "chameleon", "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2", "talkie",
    "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe", "trillion", "granite-docling",
    "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "hy_v4",
    "joyai-llm", "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna", "minimax-m2", "solar-open",
    "mellum2"};

TEST(GgufPreTokenizers, EveryLlamaCppNameIsKnown) {
  const std::vector<GgufPreTokenizer> table = ggufPreTokenizers();
  std::set<std::string> known;
  for (const GgufPreTokenizer& p : table) {
    EXPECT_TRUE(known.insert(p.name).second) << "listed twice: " << p.name;
  }
  for (const std::string& name : kLlamaCppPreNames) EXPECT_EQ(known.count(name), 1u) << name;
  EXPECT_EQ(known.size(), kLlamaCppPreNames.size());
}

// Builds the tokenizer of every name in the table: each of its regexes is compiled by ICU (a
// regex that does not compile throws, naming it), then runs on text in many scripts; byte-level
// BPE must give the text back. Names refused on purpose must say so, naming themselves.
TEST(GgufPreTokenizers, EveryRegexCompilesInIcuAndRuns) {
  const std::string sample =
      "Hello World! It's 1234567 o'clock\r\n\tTabs  and   spaces  \n"
      "caf\xC3\xA9 na\xC3\xAFve \xCE\x95\xCE\xBB\xCE\xBB\xCE\xAC\xCE\xB4\xCE\xB1 "  // Greek
      "\xE1\xBD\xBD \xE2\x84\xAA "                    // U+1F7D, U+212A (Kelvin)
      "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C "  // Chinese
      "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF "  // Hiragana
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 "          // Hangul
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5 "  // Thai
      "\xD9\xA1\xD9\xA2\xD9\xA3 <sentinel:12> IMGIMGABZ \xF0\x9F\x98\x80 ~`^|";
  int compiled = 0;
  for (const GgufPreTokenizer& p : ggufPreTokenizers()) {
    GgufVocab v;
    v.model = "gpt2";
    v.pre = p.name;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(alphabetChar(static_cast<unsigned char>(b)));
    v.bos = 0;  // names whose default is add_bos_token need a BOS
    if (!p.unsupported.empty()) {
      try {
        makeGgufTokenizer(v, "x.gguf");
        ADD_FAILURE() << p.name << ": expected a refusal";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("'" + p.name + "'"), std::string::npos) << e.what();
      }
      continue;
    }
    EXPECT_FALSE(p.regexes.empty()) << p.name;
    try {
      const auto tok = makeGgufTokenizer(v, "x.gguf");
      compiled += static_cast<int>(p.regexes.size());
      EXPECT_EQ(tok->decode(tok->encode(sample, false)), sample) << p.name;
    } catch (const InputError& e) {
      ADD_FAILURE() << p.name << ": " << e.what();
    }
  }
  EXPECT_GE(compiled, 100);
}

// DeepSeek LLM's pre-tokenizer (its letter class did not compile before) cuts as its six
// patterns say, each splitting the pieces of the one before, worked out by hand: (1) newlines
// alone; (2) a space and letters of the listed scripts ("Hello", " world", " ώρα" with U+1F7D,
// " K" with U+212A); (3) a space and ASCII or fullwidth punctuation ("~"); (4) trailing spaces;
// (5) runs of U+4E00..U+9FA5, U+0800..U+4E00 and Hangul, which takes U+1F7D and U+212A out of
// their pieces again; (6) digit runs.
TEST(GgufPreTokenizers, DeepseekLlmCutsAsItsPatternsSay) {
  const std::string omegaOxia = "\xE1\xBD\xBD";  // U+1F7D
  const std::string kelvin = "\xE2\x84\xAA";     // U+212A
  const std::string text = "Hello world~ok\n12 " + omegaOxia + "\xCF\x81\xCE\xB1 " + kelvin +
                           "\xE4\xBD\xA0\xE5\xA5\xBD!";
  const std::vector<std::string> pieces = {
      "Hello", " world", "~", "ok", "\n", "12", " ", omegaOxia, "\xCF\x81\xCE\xB1", " ", kelvin,
      "\xE4\xBD\xA0\xE5\xA5\xBD", "!"};
  const GgufVocab v = wholePieceVocab(text, "deepseek-llm");
  const auto tok = makeGgufTokenizer(v, "x.gguf");
  EXPECT_EQ(joinIds(tok->encode(text, false)), joinIds(idsOfPieces(v, pieces)));
  // "×" (U+00D7) is no letter, punctuation, CJK or digit: a piece of its own between letters.
  // (The normalized class had U+004B..U+212D, which took it and joined "a×b" into one piece.)
  // Trailing spaces are a piece of their own (\s+$).
  const std::string other = "a\xC3\x97" "b  ";
  const GgufVocab w = wholePieceVocab(other, "deepseek-llm");
  EXPECT_EQ(joinIds(makeGgufTokenizer(w, "x.gguf")->encode(other, false)),
            joinIds(idsOfPieces(w, {"a", "\xC3\x97", "b", "  "})));
}

// DeepSeek Coder: newlines; a space and letters; a space and punctuation; CJK; single digits.
TEST(GgufPreTokenizers, DeepseekCoderCutsAsItsPatternsSay) {
  const std::string text = "def f(x):\n  return x+12 \xE4\xBD\xA0\xE5\xA5\xBD";
  // "+" is a symbol (Sm), not punctuation: it stays with what no pattern takes.
  const std::vector<std::string> pieces = {"def", " f", "(", "x", "):", "\n", " ", " return",
                                           " x", "+", "1", "2", " ", "\xE4\xBD\xA0\xE5\xA5\xBD"};
  const GgufVocab v = wholePieceVocab(text, "deepseek-coder");
  EXPECT_EQ(joinIds(makeGgufTokenizer(v, "x.gguf")->encode(text, false)),
            joinIds(idsOfPieces(v, pieces)));
}

// SuperBPE's second pattern matches only empty strings: digit runs are cut there, three digits
// from the right.
TEST(GgufPreTokenizers, SuperBpeCutsDigitsByThreeFromTheRight) {
  const std::string text = "x 1234567";
  const GgufVocab v = wholePieceVocab(text, "superbpe");
  EXPECT_EQ(joinIds(makeGgufTokenizer(v, "x.gguf")->encode(text, false)),
            joinIds(idsOfPieces(v, {"x ", "1", "234", "567"})));
}

// Kimi-K2: Han runs are pieces of their own, and letters next to them do not join them.
TEST(GgufPreTokenizers, KimiK2KeepsHanApart) {
  const std::string text = "ab\xE4\xBD\xA0\xE5\xA5\xBD" "cd";
  const GgufVocab v = wholePieceVocab(text, "kimi-k2");
  EXPECT_EQ(joinIds(makeGgufTokenizer(v, "x.gguf")->encode(text, false)),
            joinIds(idsOfPieces(v, {"ab", "\xE4\xBD\xA0\xE5\xA5\xBD", "cd"})));
}

}  // namespace
}  // namespace attnviz::testing
