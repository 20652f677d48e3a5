// WordPiece (BERT): tokenizer.json files, a bare vocab.txt and the GGUF bert vocabulary, all on
// bge-small's 30522-token uncased vocabulary (../shared/testdata/llama.cpp-vocab/
// ggml-vocab-bert-bge.gguf, turned back into BERT's vocab.txt spelling), against
// @huggingface/tokenizers (wordpiece_reference.mjs) on wordpiece_corpus.json: single texts with
// and without the special tokens, pairs with their token type ids.
//
// Where llama.cpp's own WPM tokenizer (llama-vocab.cpp, llm_tokenizer_wpm_session) differs from
// Hugging Face's, the GGUF tokenizer here follows Hugging Face's (what the model was trained
// with); llama.cpp's vocab tests (gguf_vocab_test.cpp) give the same ids either way. llama.cpp:
//   - "NFD" maps each code point to the first code point of its decomposition only, so a Hangul
//     syllable keeps its first jamo (한 -> ᄒ; Hugging Face: ᄒ ᅡ ᆫ) and é becomes e;
//   - combining marks written as such are kept (Hugging Face's strip_accents removes every Mn):
//     Devanagari's virama and anusvara, Arabic harakat, "e" + U+0301 stay in the word, which
//     then often has no pieces ([UNK]);
//   - there is no max_input_chars_per_word: a 101-letter word is split into pieces instead of
//     being [UNK];
//   - lowercase is one code point to one (Hugging Face: the full mapping, İ -> i + U+0307);
//   - it matches bytes of "▁" + word, so a U+2581 written in the text can match a word-start piece
//     inside a word (attnviz's GGUF bert does not: "a▁b" is [UNK], as Hugging Face's).
// The JS port itself differs from the Rust library in ways the corpus avoids: it lowercases
// before stripping accents (final sigma, Σ, becomes ς), puts spaces only around CJK ideographs
// below U+10000, and keeps unassigned code points; and RobertaProcessing gives </s> B </s> type
// 1 where the Rust library (what transformers runs) gives 0, which attnviz follows.
#include "tokenizer_test_util.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/model/tokenizers/gguf_vocab.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"
#include "attnviz/model/tokenizers/wordpiece.h"

#include <nlohmann/json.hpp>

namespace attnviz::testing {
namespace {

using json = nlohmann::json;

fs::path bgeGguf() { return sharedTestdata() / "llama.cpp-vocab" / "ggml-vocab-bert-bge.gguf"; }

std::vector<std::string> corpus() {
  return json::parse(slurp(testDir() / "wordpiece_corpus.json")).get<std::vector<std::string>>();
}

// BERT's vocab.txt from the GGUF's tokens: llama.cpp's converter writes a word start as
// "▁" + piece, a continuation without its "##", and [BRACKETED] tokens as they are.
std::string vocabTxtFromGguf() {
  const auto file = GgufFile::open(bgeGguf().string());
  const GgufVocab v = readGgufVocab(*file);
  const std::string meta = "\xE2\x96\x81";
  std::string out;
  for (const std::string& t : v.tokens) {
    if (t.starts_with(meta)) {
      out += t.substr(meta.size());
    } else if (t.size() >= 2 && t.front() == '[' && t.back() == ']') {
      out += t;
    } else {
      out += "##" + t;
    }
    out += '\n';
  }
  return out;
}

struct WpReference {
  fs::path dir;  // vocab.txt, reference.json, <variant>/tokenizer.json
  json ref;
  std::string error;
};

const WpReference& wpReference() {
  static WpReference r = [] {
    WpReference w;
    if (!fs::exists(bgeGguf())) {
      w.error = "missing shared test data: " + bgeGguf().string();
      return w;
    }
    if (!fs::exists(npmModules() / "@huggingface/tokenizers" / "package.json")) {
      w.error = "@huggingface/tokenizers is missing: npm install --prefix " ATTNVIZ_NPM_DIR
                " @huggingface/tokenizers@0.2.0 (./dev test does this)";
      return w;
    }
    const std::string vocab = vocabTxtFromGguf();
    const std::string key = vocab + slurp(testDir() / "wordpiece_reference.mjs") +
                            slurp(testDir() / "wordpiece_corpus.json") +
                            slurp(npmModules() / "@huggingface/tokenizers" / "package.json");
    w.dir = cachedReference(
        "wordpiece", key,
        [&](const fs::path& out) -> std::string {
          spit(out / "vocab.txt", vocab);
          const ShellRun run =
              runShell("node " + shellQuote((testDir() / "wordpiece_reference.mjs").string()) +
                       " " + shellQuote(npmModules().string()) + " " + shellQuote(out.string()) +
                       " " + shellQuote((out / "vocab.txt").string()) + " " +
                       shellQuote((testDir() / "wordpiece_corpus.json").string()));
          if (run.rc != 0)
            return "wordpiece_reference.mjs failed (" + std::to_string(run.rc) + "): " + run.out;
          return "";
        },
        w.error);
    if (w.error.empty()) w.ref = json::parse(slurp(w.dir / "reference.json"));
    return w;
  }();
  return r;
}

#define REQUIRE_REFERENCE(r)                                                    \
  do {                                                                          \
    if (!(r).error.empty()) {                                                   \
      if (underCi() || (r).error.find("missing shared") == std::string::npos) { \
        FAIL() << (r).error;                                                    \
      }                                                                         \
      GTEST_SKIP() << (r).error;                                                \
    }                                                                           \
  } while (0)

// Every corpus text and pair through `tok` against the reference's `variant`.
void expectMatches(const Tokenizer& tok, const json& ref, const std::string& label,
                   bool pairTypesAllZero = false, bool checkPlainPairTypes = true) {
  const std::vector<std::string> texts = corpus();
  const auto special = ref["special"].get<std::vector<std::vector<int>>>();
  const auto plain = ref["plain"].get<std::vector<std::vector<int>>>();
  ASSERT_EQ(special.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(joinIds(tok.encode(texts[i], true)), joinIds(special[i]))
        << label << " entry " << i << ": " << texts[i];
    EXPECT_EQ(joinIds(tok.encode(texts[i], false)), joinIds(plain[i]))
        << label << " entry " << i << ": " << texts[i];
  }
  for (const bool add : {true, false}) {
    const json& pairs = ref[add ? "pair" : "pairPlain"];
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const std::string& b = texts[(i + 1) % texts.size()];
      const PairEncoding got = tok.encodePair(texts[i], b, add);
      const auto ids = pairs[i]["ids"].get<std::vector<int>>();
      auto types = pairs[i]["types"].get<std::vector<int>>();
      if (add && pairTypesAllZero) types.assign(types.size(), 0);
      EXPECT_EQ(joinIds(got.ids), joinIds(ids)) << label << " pair " << i << " special " << add;
      ASSERT_EQ(got.typeIds.size(), got.ids.size());
      if (add || checkPlainPairTypes) {
        EXPECT_EQ(joinIds(got.typeIds), joinIds(types))
            << label << " pair " << i << " special " << add;
      }
    }
  }
}

class WordPieceJson : public ::testing::TestWithParam<std::string> {};

TEST_P(WordPieceJson, MatchesHuggingFaceTokenizers) {
  const WpReference& r = wpReference();
  REQUIRE_REFERENCE(r);
  const std::string name = GetParam();
  const auto tok = loadFolderTokenizer((r.dir / name).string(), 30522);
  EXPECT_EQ(tok->kind(), "tokenizer.json: WordPiece");
  EXPECT_EQ(tok->mask(), 103);
  EXPECT_EQ(tok->unk(), 100);
  // RobertaProcessing: every type 0, as the Rust library (the JS port gives </s> B </s> type 1);
  // without the special tokens the Rust library's default keeps B's type 1, attnviz gives 0.
  const bool roberta = name == "roberta_processing";
  expectMatches(*tok, r.ref[name], name, roberta, !roberta);
}

INSTANTIATE_TEST_SUITE_P(Variants, WordPieceJson,
                         ::testing::Values("uncased", "cased", "keep_accents", "strip_only",
                                           "bert_processing", "roberta_processing"));

TEST(WordPieceVocabTxt, BareVocabTxtIsBertUncasedByDefault) {
  const WpReference& r = wpReference();
  REQUIRE_REFERENCE(r);
  TempDir d;
  fs::copy_file(r.dir / "vocab.txt", d.path / "vocab.txt");
  const auto tok = loadFolderTokenizer(d.path.string(), 30522);
  EXPECT_EQ(tok->kind(), "vocab.txt: WordPiece (BERT)");
  EXPECT_EQ(tok->size(), 30522);
  EXPECT_EQ(tok->bos(), 101);
  EXPECT_EQ(tok->eos(), 102);
  EXPECT_EQ(tok->mask(), 103);
  EXPECT_TRUE(tok->isSpecial(103));
  expectMatches(*tok, r.ref["uncased"], "vocab.txt");
  EXPECT_EQ(tok->decode(tok->encode("Playing the tokenization game", false)),
            "playing the tokenization game");
}

// A vocab.txt with CR LF line ends reads as the same vocabulary (transformers opens it in text
// mode, the Rust library reads lines()): the ids are Hugging Face's on the LF file.
TEST(WordPieceVocabTxt, CrLfLineEndsAreLineEnds) {
  const WpReference& r = wpReference();
  REQUIRE_REFERENCE(r);
  TempDir d;
  std::string crlf;
  for (char ch : slurp(r.dir / "vocab.txt")) {
    if (ch == '\n') crlf += '\r';
    crlf += ch;
  }
  spit(d.path / "vocab.txt", crlf);
  const auto tok = loadFolderTokenizer(d.path.string(), 30522);
  EXPECT_EQ(tok->size(), 30522);
  EXPECT_EQ(tok->bos(), 101);
  expectMatches(*tok, r.ref["uncased"], "vocab.txt with CR LF");
}

TEST(WordPieceVocabTxt, TokenizerConfigSaysCased) {
  const WpReference& r = wpReference();
  REQUIRE_REFERENCE(r);
  TempDir d;
  fs::copy_file(r.dir / "vocab.txt", d.path / "vocab.txt");
  spit(d.path / "tokenizer_config.json", R"({"do_lower_case": false, "model_max_length": 512})");
  const auto tok = loadFolderTokenizer(d.path.string());
  expectMatches(*tok, r.ref["cased"], "vocab.txt cased");
}

TEST(WordPieceVocabTxt, SpecialTokenNamesFromTheConfigAndErrors) {
  // A tiny vocabulary with other names for the specials.
  const std::string vocab = "<pad>\n<unk>\n<cls>\n<sep>\n<msk>\nplay\n##ing\n!\n";
  const std::string config =
      R"({"unk_token": "<unk>", "sep_token": {"content": "<sep>"}, "cls_token": "<cls>",
          "pad_token": "<pad>", "mask_token": "<msk>"})";
  const auto tok = vocabTxtTokenizer(vocab, config, "vocab.txt");
  EXPECT_EQ(tok->encode("Playing! <msk> xyz", true), (std::vector<int>{2, 5, 6, 7, 4, 1, 3}));
  EXPECT_EQ(tok->mask(), 4);
  const PairEncoding p = tok->encodePair("play", "PLAYING", true);
  EXPECT_EQ(p.ids, (std::vector<int>{2, 5, 3, 5, 6, 3}));
  EXPECT_EQ(p.typeIds, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  try {
    vocabTxtTokenizer("[UNK]\n[SEP]\nword\n", "", "some/vocab.txt");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("some/vocab.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[CLS]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(vocabTxtTokenizer("[CLS]\n[SEP]\n\xFF\n", "", "vocab.txt"), InputError);
  EXPECT_THROW(vocabTxtTokenizer("", "", "vocab.txt"), InputError);
  // A token listed twice keeps its later line (transformers' load_vocab); the earlier id has no
  // token.
  const auto twice = vocabTxtTokenizer("[CLS]\n[SEP]\nx\nx\n", "", "vocab.txt");
  EXPECT_EQ(twice->encode("x", false), (std::vector<int>{3}));
  EXPECT_FALSE(twice->contains(2));
}

// CJK ideographs beyond U+FFFF are words of their own too (Hugging Face's Rust ranges include
// U+20000-U+2A6DF; the JS port, counting UTF-16 units, misses them, so the corpus has none).
TEST(WordPieceVocabTxt, SupplementaryIdeographsAreSeparated) {
  const auto tok = vocabTxtTokenizer("[CLS]\n[SEP]\n[UNK]\na\n\xF0\xA0\x80\x80\n", "", "vocab.txt");
  EXPECT_EQ(tok->encode("a\xF0\xA0\x80\x80"
                        "a",
                        false),
            (std::vector<int>{3, 4, 3}));
  EXPECT_THROW(vocabTxtTokenizer("[CLS]\n[SEP]\n", "{\"do_lower_case\": 1}", "vocab.txt"),
               InputError);
}

// The GGUF bert vocabulary (▁ word starts) gives Hugging Face's ids on the same corpus.
TEST(WordPieceGguf, BgeVocabularyMatchesHuggingFace) {
  const WpReference& r = wpReference();
  REQUIRE_REFERENCE(r);
  const auto file = GgufFile::open(bgeGguf().string());
  const auto tok = loadGgufTokenizer(*file);
  EXPECT_EQ(tok->mask(), 103);
  expectMatches(*tok, r.ref["uncased"], "gguf bert");
}

// ---- Hand-made files: the template forms and the tokenizers without a pair template ----------

std::string smallWordPieceJson(const json& postProcessor) {
  json t;
  t["added_tokens"] =
      json::array({{{"id", 0}, {"content", "[CLS]"}, {"special", true}, {"normalized", false}},
                   {{"id", 1}, {"content", "[SEP]"}, {"special", true}, {"normalized", false}},
                   {{"id", 2}, {"content", "[UNK]"}, {"special", true}, {"normalized", false}},
                   {{"id", 6}, {"content", "<mask>"}, {"special", true}, {"normalized", false}}});
  t["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", true}};
  t["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  t["post_processor"] = postProcessor;
  t["model"] = {
      {"type", "WordPiece"},
      {"unk_token", "[UNK]"},
      {"vocab",
       {{"[CLS]", 0}, {"[SEP]", 1}, {"[UNK]", 2}, {"a", 3}, {"##b", 4}, {"c", 5}, {"<mask>", 6}}}};
  return t.dump();
}

TEST(WordPieceTemplates, StringTemplateTypeIdsAndMissingPair) {
  // The string form, with type ids that are not 0/1 and a bare "$" for A.
  const auto tok =
      tokenizerFromJson(smallWordPieceJson({{"type", "TemplateProcessing"},
                                            {"single", "[CLS] $ [SEP]"},
                                            {"pair", "[CLS]:2 $A:2 [SEP]:2 $B:5 [SEP]:7"},
                                            {"special_tokens", json::object()}}),
                        "", "tokenizer.json");
  EXPECT_EQ(tok->encode("AB c", true), (std::vector<int>{0, 3, 4, 5, 1}));
  EXPECT_EQ(tok->mask(), 6);
  const PairEncoding p = tok->encodePair("ab", "c", true);
  EXPECT_EQ(p.ids, (std::vector<int>{0, 3, 4, 1, 5, 1}));
  EXPECT_EQ(p.typeIds, (std::vector<int>{2, 2, 2, 2, 5, 7}));
  const PairEncoding plain = tok->encodePair("ab", "c", false);
  EXPECT_EQ(plain.ids, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(plain.typeIds, (std::vector<int>{2, 2, 5}));

  // A template without "pair", and a bad type id.
  const auto single = tokenizerFromJson(
      smallWordPieceJson({{"type", "TemplateProcessing"}, {"single", "[CLS] $A [SEP]"}}), "",
      "tokenizer.json");
  EXPECT_THROW(single->encodePair("a", "c"), InputError);
  EXPECT_THROW(tokenizerFromJson(smallWordPieceJson({{"type", "TemplateProcessing"},
                                                     {"single", "[CLS] $A [SEP]"},
                                                     {"pair", "[CLS] $A [SEP] $B:x [SEP]"}}),
                                 "", "tokenizer.json"),
               InputError);
  // No post-processor at all: no pair template either.
  const auto none = tokenizerFromJson(smallWordPieceJson(nullptr), "", "tokenizer.json");
  try {
    none->encodePair("a", "c");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pair template"), std::string::npos) << e.what();
  }
}

TEST(WordPieceTemplates, GgufWithoutPairTemplateRefuses) {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens = {"a", "b"};
  const auto tok = makeGgufTokenizer(v, "test.gguf");
  EXPECT_THROW(tok->encodePair("a", "b"), InputError);
  EXPECT_EQ(tok->mask(), std::nullopt);
}

}  // namespace
}  // namespace attnviz::testing
