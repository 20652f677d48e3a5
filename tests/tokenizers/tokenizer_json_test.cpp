// tokenizer.json: real Llama 2 and Llama 3 vocabularies (rebuilt by hf_reference.mjs from the
// npm packages that bake them) against @huggingface/tokenizers on a corpus, the model fixtures'
// cases, and hand-made files for added-token flags, split behaviours, the BOS/EOS precedence and
// the errors.
#include "tokenizer_test_util.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <functional>

namespace attnviz::testing {
namespace {

using json = nlohmann::json;

std::vector<std::string> corpus() {
  return json::parse(slurp(testDir() / "corpus.json")).get<std::vector<std::string>>();
}

// The tokenizer.json folders and @huggingface/tokenizers' ids (made once per build tree).
struct HfReference {
  fs::path dir;
  json ids;
  std::string error;
};

const HfReference& hfReference() {
  static HfReference r = [] {
    HfReference h;
    std::string key = slurp(testDir() / "hf_reference.mjs") + slurp(testDir() / "corpus.json");
    for (const char* pkg : {"@huggingface/tokenizers", "llama-tokenizer-js", "llama3-tokenizer-js"}) {
      if (!fs::exists(npmModules() / pkg / "package.json")) {
        h.error = std::string(pkg) + " is missing: npm install --prefix " + ATTNVIZ_NPM_DIR +
                  " @huggingface/tokenizers@0.2.0 llama-tokenizer-js@1.2.2 "
                  "llama3-tokenizer-js@1.2.0 (./dev test does this)";
        return h;
      }
      key += slurp(npmModules() / pkg / "package.json");
    }
    h.dir = cachedReference("hf", key, [](const fs::path& out) -> std::string {
      const ShellRun run = runShell(
          "node " + shellQuote((testDir() / "hf_reference.mjs").string()) + " " +
          shellQuote(npmModules().string()) + " " + shellQuote(out.string()) + " " +
          shellQuote((testDir() / "corpus.json").string()));
      if (run.rc != 0) return "hf_reference.mjs failed (" + std::to_string(run.rc) + "): " + run.out;
      return "";
    }, h.error);
    if (h.error.empty()) h.ids = json::parse(slurp(h.dir / "reference.json"));
    return h;
  }();
  return r;
}

class HfCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(HfCorpus, MatchesHuggingFaceTokenizers) {
  const HfReference& ref = hfReference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  const std::string name = GetParam();
  const auto tok = loadFolderTokenizer((ref.dir / name).string());
  const std::vector<std::string> texts = corpus();
  const auto special = ref.ids[name]["special"].get<std::vector<std::vector<int>>>();
  const auto plain = ref.ids[name]["plain"].get<std::vector<std::vector<int>>>();
  ASSERT_EQ(special.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(joinIds(tok->encode(texts[i], true)), joinIds(special[i]))
        << name << " corpus entry " << i << ": " << texts[i];
    EXPECT_EQ(joinIds(tok->encode(texts[i], false)), joinIds(plain[i]))
        << name << " corpus entry " << i << ": " << texts[i];
  }
  // Lossless vocabularies give the text back (special tokens written in it included).
  // (A U+2581 written in the text is a space to a SentencePiece-style vocabulary.)
  if (name == "llama2" || name == "llama3" || name == "gpt2_style") {
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (name == "llama2" && texts[i].find("\xE2\x96\x81") != std::string::npos) continue;
      EXPECT_EQ(tok->decode(tok->encode(texts[i], false)), texts[i]) << name << " entry " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, HfCorpus,
                         ::testing::Values("llama2", "llama2_metaspace", "llama3", "qwen2_style",
                                           "gpt2_style"));

TEST(TokenizerJson, RealVocabulariesKnownIds) {
  const HfReference& ref = hfReference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  const auto l2 = loadFolderTokenizer((ref.dir / "llama2").string());
  EXPECT_EQ(l2->size(), 32000);
  EXPECT_EQ(l2->bos(), 1);
  EXPECT_EQ(l2->eos(), 2);
  EXPECT_EQ(l2->unk(), 0);
  EXPECT_EQ(l2->encode(" Hello", false), (std::vector<int>{29871, 15043}));  // "▁▁Hello"
  EXPECT_EQ(l2->pieceBytes(13), "\n");
  EXPECT_EQ(l2->printable(13), "\\n");
  EXPECT_EQ(l2->label(15043), "\u2423Hello");
  EXPECT_TRUE(l2->isSpecial(1));
  EXPECT_EQ(l2->decode({1, 15043, 3186}), "<s>Hello world");
  const auto l3 = loadFolderTokenizer((ref.dir / "llama3").string());
  EXPECT_EQ(l3->size(), 128256);
  EXPECT_EQ(l3->bos(), 128000);
  EXPECT_EQ(l3->eos(), 128001);
  EXPECT_EQ(l3->encode("Hello world", true), (std::vector<int>{128000, 9906, 1917}));
  EXPECT_EQ(l3->pieceBytes(1917), " world");
  EXPECT_NE(l3->kind().find("byte-level"), std::string::npos);
}

// The model fixtures' tokenizer.json files (Llama 2, Llama 3 and Qwen2 styles) encode their
// cases' text to the ids @huggingface/tokenizers gave their author.
TEST(TokenizerJson, ModelFixturesCases) {
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(modelTestDir() / "fixtures" / "llama")) {
    if (!fs::exists(entry.path() / "tokenizer.json")) continue;
    const json cases = json::parse(slurp(entry.path() / "cases.json"));
    const auto tok = loadFolderTokenizer(entry.path().string());
    EXPECT_EQ(tok->encode(cases["text"].get<std::string>(), true),
              cases["ids"].get<std::vector<int>>())
        << entry.path();
    ++seen;
  }
  EXPECT_GE(seen, 3);
}

// ---- Hand-made tokenizer.json files ------------------------------------------------------------

// Every printable ASCII character and a few words, byte-level-free, one char per token.
json charVocab(const std::vector<std::string>& extra = {}) {
  json vocab = json::object();
  int id = 0;
  for (char c = ' '; c <= '~'; ++c) vocab[std::string(1, c)] = id++;
  for (const std::string& w : extra) vocab[w] = id++;
  return vocab;
}

json baseJson(json vocab, json merges = json::array()) {
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"unk_token", nullptr}}}};
}

json added(int id, const std::string& content, json flags = json::object()) {
  json t = {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
            {"rstrip", false},  {"normalized", false}, {"special", true}};
  for (auto& [k, v] : flags.items()) t[k] = v;
  return t;
}

std::unique_ptr<Tokenizer> fromJson(const json& j, const json& config = json()) {
  return tokenizerFromJson(j.dump(), config.is_null() ? "" : config.dump(), "tokenizer.json");
}

std::vector<int> ids(const Tokenizer& t, const std::string& text, bool special = false) {
  return t.encode(text, special);
}

std::string expectInputError(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InputError";
  return "";
}

TEST(TokenizerJson, AddedTokenFlags) {
  json j = baseJson(charVocab());
  const int cat = 95, tag = 96, norm = 97;
  j["added_tokens"] = {added(cat, "cat", {{"single_word", true}, {"special", false}}),
                       added(tag, "<t>", {{"lstrip", true}, {"rstrip", true}}),
                       added(norm, "up", {{"normalized", true}, {"special", false}})};
  j["normalizer"] = {{"type", "Lowercase"}};
  const auto tok = fromJson(j);
  const int c = 'c' - ' ', a = 'a' - ' ', t = 't' - ' ', sp = 0, x = 'x' - ' ';
  EXPECT_EQ(ids(*tok, "cat"), (std::vector<int>{cat}));
  EXPECT_EQ(ids(*tok, "a cat."), (std::vector<int>{a, sp, cat, '.' - ' '}));
  EXPECT_EQ(ids(*tok, "concat"), (std::vector<int>{c, 'o' - ' ', 'n' - ' ', c, a, t}));
  EXPECT_EQ(ids(*tok, "x  <t>  x"), (std::vector<int>{x, tag, x}));  // spaces stripped
  // "normalized": true matches in the normalized (lowercased) text; "<T>" is not "<t>".
  EXPECT_EQ(ids(*tok, "UP"), (std::vector<int>{norm}));
  EXPECT_EQ(ids(*tok, "<T>").size(), 3u);
  EXPECT_TRUE(tok->isSpecial(tag));
  EXPECT_FALSE(tok->isSpecial(cat));
  // Leftmost-longest: "<t>" wins over nothing; "catcat" has no single word.
  EXPECT_EQ(ids(*tok, "catcat").size(), 6u);
  EXPECT_EQ(tok->decode(ids(*tok, "a cat")), "a cat");
}

// Parse-special off: a special added token written in the text is plain text (each character its
// own id here); an added token without "special" is still matched (Hugging Face's
// split_special_tokens, llama.cpp's parse_special).
TEST(TokenizerJson, ParseSpecialOffLeavesSpecialTokensAsText) {
  json j = baseJson(charVocab());
  const int cat = 95, tag = 96;
  j["added_tokens"] = {added(cat, "cat", {{"special", false}}), added(tag, "<t>")};
  const auto tok = fromJson(j);
  auto ch = [](char c) { return c - ' '; };
  EXPECT_TRUE(tok->parseSpecial());  // the default
  EXPECT_EQ(ids(*tok, "a<t>cat"), (std::vector<int>{ch('a'), tag, cat}));
  tok->setParseSpecial(false);
  EXPECT_EQ(ids(*tok, "a<t>cat"), (std::vector<int>{ch('a'), ch('<'), ch('t'), ch('>'), cat}));
  tok->setParseSpecial(true);
  EXPECT_EQ(ids(*tok, "a<t>cat"), (std::vector<int>{ch('a'), tag, cat}));
}

TEST(TokenizerJson, SplitBehaviours) {
  auto splitWith = [](const std::string& behavior, bool invert) {
    json j = baseJson(charVocab({"--", "a-", "-b"}));
    j["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", {{"String", "-"}}},
                          {"behavior", behavior},
                          {"invert", invert}};
    // Merges would glue "a" and "-" when one piece holds both: the pieces show through them.
    json merges = json::array({"- -", "a -", "- b"});
    j["model"]["merges"] = merges;
    const auto tok = fromJson(j);
    std::vector<std::string> pieces;
    for (int id : tok->encode("a--b", false)) pieces.push_back(tok->pieceBytes(id));
    return pieces;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(splitWith("Removed", false), (V{"a", "b"}));
  EXPECT_EQ(splitWith("Isolated", false), (V{"a", "-", "-", "b"}));
  EXPECT_EQ(splitWith("MergedWithPrevious", false), (V{"a-", "-", "b"}));
  EXPECT_EQ(splitWith("MergedWithNext", false), (V{"a", "-", "-b"}));
  EXPECT_EQ(splitWith("Contiguous", false), (V{"a", "--", "b"}));
  EXPECT_EQ(splitWith("Removed", true), (V{"-", "-"}));
}

TEST(TokenizerJson, BosEosPrecedence) {
  json j = baseJson(charVocab());
  j["added_tokens"] = {added(95, "<s>"), added(96, "</s>")};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {95}}, {"tokens", {"<s>"}}}}}}};
  const int a = 'a' - ' ';
  EXPECT_EQ(ids(*fromJson(j), "a", true), (std::vector<int>{95, a}));  // the template alone
  EXPECT_EQ(ids(*fromJson(j), "a", false), (std::vector<int>{a}));
  // tokenizer_config.json's flags decide for their own token; absent ones leave the template.
  EXPECT_EQ(ids(*fromJson(j, {{"add_bos_token", false}}), "a", true), (std::vector<int>{a}));
  EXPECT_EQ(ids(*fromJson(j, {{"add_eos_token", true}, {"eos_token", {{"content", "</s>"}}}}),
                "a", true),
            (std::vector<int>{95, a, 96}));
  const auto tok = fromJson(j, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  EXPECT_EQ(tok->bos(), 95);
  EXPECT_EQ(tok->eos(), 96);
  const std::string err = expectInputError(
      [&] { fromJson(j, {{"add_eos_token", true}, {"eos_token", "<nope>"}}); });
  EXPECT_NE(err.find("add_eos_token"), std::string::npos) << err;
  // RobertaProcessing / BertProcessing: cls ... sep.
  j["post_processor"] = {{"type", "BertProcessing"}, {"cls", {"<s>", 95}}, {"sep", {"</s>", 96}}};
  EXPECT_EQ(ids(*fromJson(j), "a", true), (std::vector<int>{95, a, 96}));
}

TEST(TokenizerJson, WordPieceModel) {
  json j = {{"added_tokens", {added(0, "[UNK]"), added(1, "[CLS]"), added(2, "[SEP]")}},
            {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
            {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
            {"post_processor",
             {{"type", "BertProcessing"}, {"cls", {"[CLS]", 1}}, {"sep", {"[SEP]", 2}}}},
            {"model",
             {{"type", "WordPiece"},
              {"unk_token", "[UNK]"},
              {"continuing_subword_prefix", "##"},
              {"max_input_chars_per_word", 100},
              {"vocab",
               {{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}, {"play", 3}, {"##ing", 4}, {"!", 5},
                {"cafe", 6}}}}}};
  const auto tok = fromJson(j);
  EXPECT_EQ(ids(*tok, "Playing! CAF\xC3\x89 xyz", true), (std::vector<int>{1, 3, 4, 5, 6, 0, 2}));
  EXPECT_EQ(tok->decode({3, 4}), "playing");
}

TEST(TokenizerJson, ByteFallbackAndUnknown) {
  json vocab = charVocab({"<unk>"});
  const int unk = 95;
  json j = baseJson(vocab);
  j["model"]["unk_token"] = "<unk>";
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(ids(*fromJson(j), "a\xC3\xA9\xC3\xA9" "b"),
            (std::vector<int>{'a' - ' ', unk, 'b' - ' '}));  // fused
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(ids(*fromJson(j), "\xC3\xA9\xC3\xA9").size(), 2u);
  // No unk_token, no byte fallback: refused, naming the character.
  json k = baseJson(charVocab());
  const std::string err = expectInputError([&] { ids(*fromJson(k), "caf\xC3\xA9"); });
  EXPECT_NE(err.find("U+00E9"), std::string::npos) << err;
  // Byte fallback.
  json f = baseJson(charVocab({"<0xC3>", "<0xA9>"}));
  f["model"]["byte_fallback"] = true;
  const auto fb = fromJson(f);
  EXPECT_EQ(ids(*fb, "\xC3\xA9"), (std::vector<int>{95, 96}));
  EXPECT_EQ(fb->decode({95, 96}), "\xC3\xA9");
}

TEST(TokenizerJson, FileErrorsNameTheFile) {
  const std::string wordLevel = expectInputError([] {
    tokenizerFromJson(R"({"model": {"type": "WordLevel", "vocab": {"a": 0}}})", "",
                      "/m/tokenizer.json");
  });
  EXPECT_NE(wordLevel.find("/m/tokenizer.json: unsupported tokenizer model type WordLevel"),
            std::string::npos)
      << wordLevel;
  EXPECT_NE(expectInputError([] { tokenizerFromJson("{not json", "", "t.json"); }).find("t.json"),
            std::string::npos);
  // An id near INT_MAX is refused before any table is sized from it.
  const std::string huge = expectInputError([] {
    tokenizerFromJson(R"({"model": {"type": "BPE", "vocab": {"a": 2147483600}, "merges": []}})",
                      "", "t.json");
  });
  EXPECT_NE(huge.find("t.json"), std::string::npos) << huge;
  expectInputError([] {
    tokenizerFromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                          "added_tokens": [{"id": 2147483647, "content": "x"}]})",
                      "", "t.json");
  });
  // A merge that makes a token the vocab lacks; a regex that does not compile; a bad config.
  expectInputError([] {
    tokenizerFromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})",
                      "", "t.json");
  });
  const std::string regex = expectInputError([] {
    tokenizerFromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                          "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
                                            "behavior": "Isolated"}})",
                      "", "t.json");
  });
  EXPECT_NE(regex.find("t.json"), std::string::npos) << regex;
  const std::string cfg = expectInputError([] {
    tokenizerFromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "[1",
                      "t.json", "tokenizer_config.json");
  });
  EXPECT_NE(cfg.find("tokenizer_config.json"), std::string::npos) << cfg;
  // Ids beyond config.json's vocab_size: the tokenizer belongs to another model.
  expectInputError([] {
    tokenizerFromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 7}, "merges": []}})",
                      "", "t.json", "tokenizer_config.json", 5);
  });
}

}  // namespace
}  // namespace attnviz::testing
