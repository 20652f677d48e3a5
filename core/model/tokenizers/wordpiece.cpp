// A bare vocab.txt: the files say what transformers' BERT tokenizer would build from them, and
// that is written as the tokenizer.json it converts to, which tokenizer_json.cpp then reads.
#include "attnviz/model/tokenizers/wordpiece.h"

#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <unordered_map>

namespace attnviz {

namespace {

using json = nlohmann::json;

// The tokenizer.json reading with the vocab.txt's own name for kind().
class VocabTxtTokenizer final : public Tokenizer {
 public:
  explicit VocabTxtTokenizer(std::unique_ptr<Tokenizer> inner) : inner_(std::move(inner)) {}
  std::vector<int> encode(std::string_view text, bool addSpecial) const override {
    return inner_->encode(text, addSpecial);
  }
  PairEncoding encodePair(std::string_view a, std::string_view b, bool addSpecial) const override {
    return inner_->encodePair(a, b, addSpecial);
  }
  std::string pieceBytes(int id) const override { return inner_->pieceBytes(id); }
  std::string decode(const std::vector<int>& ids) const override { return inner_->decode(ids); }
  int size() const override { return inner_->size(); }
  bool contains(int id) const override { return inner_->contains(id); }
  std::optional<int> bos() const override { return inner_->bos(); }
  std::optional<int> eos() const override { return inner_->eos(); }
  std::optional<int> unk() const override { return inner_->unk(); }
  std::optional<int> mask() const override { return inner_->mask(); }
  bool isSpecial(int id) const override { return inner_->isSpecial(id); }
  std::string kind() const override { return "vocab.txt: WordPiece (BERT)"; }

 private:
  std::unique_ptr<Tokenizer> inner_;
};

}  // namespace

std::unique_ptr<Tokenizer> vocabTxtTokenizer(const std::string& vocabText,
                                             const std::string& configText,
                                             const std::string& vocabName,
                                             const std::string& configName, int vocabSize) {
  auto fail = [&](const std::string& what) -> void { throw InputError(vocabName + ": " + what); };
  // One token a line; the newline after the last one ends it (no empty token after it). A line
  // may end in CR LF (a vocab.txt saved on Windows): the CR is part of the line end, as for
  // transformers (text mode) and the Rust library (lines()).
  json vocab = json::object();
  std::vector<std::string> byId;
  for (std::size_t pos = 0; pos < vocabText.size();) {
    std::size_t end = vocabText.find('\n', pos);
    if (end == std::string::npos) end = vocabText.size();
    std::string token = vocabText.substr(pos, end - pos);
    if (!token.empty() && token.back() == '\r') token.pop_back();
    for (std::size_t i = 0; i < token.size();) {
      const tok::Utf8Char c = tok::decodeUtf8(token, i);
      if (c.cp < 0) fail("line " + std::to_string(byId.size() + 1) + " is not valid UTF-8");
      i += c.len;
    }
    vocab[token] = byId.size();  // a repeated token keeps the later id
    byId.push_back(std::move(token));
    pos = end + 1;
  }
  if (byId.empty()) fail("empty (no tokens)");

  json cfg = json::object();
  if (!configText.empty()) {
    try {
      cfg = json::parse(configText);
    } catch (const json::exception& e) {
      throw InputError(configName + ": not valid JSON (" + e.what() + ")");
    }
    if (!cfg.is_object()) throw InputError(configName + ": expected a JSON object");
  }
  auto flag = [&](const char* key, std::optional<bool> dflt) -> json {
    if (!cfg.contains(key) || cfg[key].is_null()) return dflt ? json(*dflt) : json();
    if (!cfg[key].is_boolean()) throw InputError(configName + ": " + key + " is not a boolean");
    return cfg[key];
  };
  auto tokenName = [&](const char* key, const char* dflt) -> std::string {
    if (!cfg.contains(key) || cfg[key].is_null()) return dflt;
    const json& v = cfg[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      return v["content"].get<std::string>();
    }
    throw InputError(configName + ": " + key + " is neither a string nor {\"content\": ...}");
  };
  const std::string unk = tokenName("unk_token", "[UNK]"), sep = tokenName("sep_token", "[SEP]"),
                    pad = tokenName("pad_token", "[PAD]"), cls = tokenName("cls_token", "[CLS]"),
                    mask = tokenName("mask_token", "[MASK]");
  for (const std::string* name : {&cls, &sep}) {
    if (!vocab.contains(*name)) fail("no '" + *name + "' token (BERT's template needs it)");
  }

  json t;
  t["version"] = "1.0";
  t["added_tokens"] = json::array();
  for (const std::string* name : {&pad, &unk, &cls, &sep, &mask}) {
    if (!vocab.contains(*name)) continue;
    t["added_tokens"].push_back({{"id", vocab[*name]},
                                 {"content", *name},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  }
  const json lower = flag("do_lower_case", true);
  t["normalizer"] = {{"type", "BertNormalizer"},
                     {"clean_text", true},
                     {"handle_chinese_chars", flag("tokenize_chinese_chars", true)},
                     {"strip_accents", flag("strip_accents", std::nullopt)},
                     {"lowercase", lower}};
  t["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  t["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", cls + ":0 $A:0 " + sep + ":0"},
                         {"pair", cls + ":0 $A:0 " + sep + ":0 $B:1 " + sep + ":1"},
                         {"special_tokens",
                          {{cls, {{"id", cls}, {"ids", {vocab[cls]}}, {"tokens", {cls}}}},
                           {sep, {{"id", sep}, {"ids", {vocab[sep]}}, {"tokens", {sep}}}}}}};
  t["model"] = {{"type", "WordPiece"},
                {"continuing_subword_prefix", "##"},
                {"max_input_chars_per_word", 100},
                {"vocab", std::move(vocab)}};
  if (t["model"]["vocab"].contains(unk)) t["model"]["unk_token"] = unk;
  // mask_token is set in the config given to the reader, so mask() is the configured one.
  const json readerConfig = {{"mask_token", mask}};
  return std::make_unique<VocabTxtTokenizer>(
      tokenizerFromJson(t.dump(), readerConfig.dump(), vocabName, configName, vocabSize));
}

std::unique_ptr<Tokenizer> loadVocabTxtTokenizer(const std::string& vocabPath,
                                                 const std::string& configPath, int vocabSize) {
  const std::string text = readFile(vocabPath);
  std::string config;
  std::error_code ec;
  if (!configPath.empty() && std::filesystem::exists(configPath, ec)) config = readFile(configPath);
  return vocabTxtTokenizer(text, config, vocabPath,
                           configPath.empty() ? "tokenizer_config.json" : configPath, vocabSize);
}

}  // namespace attnviz
