#include "attnviz/model/tokenizers/gpt2_bpe.h"

#include "tokenizer_internal.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"

#include <nlohmann/json.hpp>
#include <unicode/uchar.h>

#include <algorithm>
#include <climits>
#include <filesystem>

namespace attnviz {

namespace {

using tok::decodeUtf8;
using Char = tok::Utf8Char;

enum class Cls { Letter, Number, Space, Other };

Cls classify(int cp) {
  if (cp < 0) return Cls::Other;
  const auto c = static_cast<UChar32>(cp);
  const uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return Cls::Letter;
  if (mask & U_GC_N_MASK) return Cls::Number;
  if (u_isUWhiteSpace(c)) return Cls::Space;
  return Cls::Other;
}

// The text as characters with their classes, for the pattern's look-ahead.
struct Scanned {
  std::vector<std::size_t> pos;  // byte offset of each character, plus the end
  std::vector<Cls> cls;
};

Scanned scan(std::string_view text) {
  Scanned s;
  for (std::size_t i = 0; i < text.size();) {
    const Char c = decodeUtf8(text, i);
    s.pos.push_back(i);
    s.cls.push_back(classify(c.cp));
    i += c.len;
  }
  s.pos.push_back(text.size());
  return s;
}

std::string hexOf(char c) {
  static const char* const digits = "0123456789ABCDEF";
  const auto b = static_cast<unsigned char>(c);
  return std::string("\\x") + digits[b >> 4] + digits[b & 15];
}

// The key of the merge of the tokens with ids a and b.
// vocab.json's events: the top-level object's keys and integer values, in file order. Anything
// else ends the parse: a value that is not an integer names its token (badToken), a top level
// that is not an object sets notObject, malformed JSON leaves parseError.
struct VocabEvents : nlohmann::json_sax<nlohmann::json> {
  std::vector<std::pair<std::string, long long>> entries;  // spelled token, id (-1: not valid)
  std::string pendingKey, badToken, parseError;
  bool hasBadToken = false, notObject = false;
  int depth = 0;

  bool value(long long id) {
    if (depth != 1) return top();
    entries.emplace_back(std::move(pendingKey), id);
    return true;
  }
  bool bad() {
    if (depth != 1) return top();
    badToken = pendingKey;
    hasBadToken = true;
    return false;
  }
  bool top() {
    notObject = true;
    return false;
  }
  bool null() override { return bad(); }
  bool boolean(bool) override { return bad(); }
  bool number_integer(number_integer_t v) override { return v < 0 ? bad() : value(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return v > number_unsigned_t(INT_MAX) ? bad() : value(static_cast<long long>(v));
  }
  bool number_float(number_float_t, const string_t&) override { return bad(); }
  bool string(string_t&) override { return bad(); }
  bool binary(binary_t&) override { return bad(); }
  bool start_object(std::size_t) override {
    if (depth == 0) return ++depth, true;
    return bad();
  }
  bool key(string_t& k) override {
    pendingKey = std::move(k);
    return true;
  }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return depth == 0 ? top() : bad(); }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    parseError = e.what();
    return false;
  }
};

std::uint64_t mergeKey(int a, int b) {
  return std::uint64_t(std::uint32_t(a)) << 32 | std::uint32_t(b);
}

}  // namespace

std::string gpt2ByteToUnicode(unsigned char b) { return tok::byteToAlphabet(b); }

std::vector<std::string_view> gpt2PreTokenize(std::string_view text) {
  const Scanned s = scan(text);
  const int n = static_cast<int>(s.cls.size());
  std::vector<std::string_view> pieces;
  auto runEnd = [&](int k, Cls c) {
    while (k < n && s.cls[k] == c) ++k;
    return k;
  };
  auto emit = [&](int a, int b) { pieces.push_back(text.substr(s.pos[a], s.pos[b] - s.pos[a])); };
  static const char* const kContractions[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  int i = 0;
  while (i < n) {
    const std::size_t at = s.pos[i];
    // 's|'t|'re|'ve|'m|'ll|'d, tried in that order (case-sensitive, as in GPT-2).
    if (text[at] == '\'') {
      bool matched = false;
      for (const char* c : kContractions) {
        const std::string_view suffix(c);
        if (text.substr(at + 1, suffix.size()) == suffix) {
          const std::size_t end = at + 1 + suffix.size();
          int j = i + 1;
          while (s.pos[j] < end) ++j;
          emit(i, j);
          i = j;
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional ASCII space, then a run of
    // one class.
    const int first = (text[at] == ' ' && i + 1 < n && s.cls[i + 1] != Cls::Space) ? i + 1 : i;
    if (s.cls[first] != Cls::Space) {
      const int j = runEnd(first, s.cls[first]);
      emit(i, j);
      i = j;
      continue;
    }
    // '\s+(?!\S)': the whitespace run, less its last character when something follows it;
    // '\s+': a single whitespace character before a non-space.
    const int j = runEnd(i, Cls::Space);
    const int end = (j < n && j - 1 > i) ? j - 1 : j;
    emit(i, end);
    i = end;
  }
  return pieces;
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& vocabPath, const std::string& mergesPath,
                                  int vocabSize) {
  const std::string vocab = readFile(vocabPath);
  return fromText(vocab, readFile(mergesPath), vocabPath, mergesPath, vocabSize);
}

Gpt2Tokenizer Gpt2Tokenizer::fromText(const std::string& vocabJson, const std::string& merges,
                                      const std::string& vocabPath, const std::string& mergesPath,
                                      int vocabSize) {
  Gpt2Tokenizer t;
  // vocab.json read as events (no document tree: at GPT-2's 50257 tokens the tree was most of
  // the tokenizer's load time and memory), then checked entry by entry. A key given twice keeps
  // its last id, as a JSON object does.
  VocabEvents events;
  const bool parsed = nlohmann::json::sax_parse(vocabJson, &events);
  if (events.notObject) {
    throw InputError(vocabPath + ": expected a JSON object mapping tokens to ids");
  }
  if (!parsed) {
    if (events.hasBadToken) {
      throw InputError(vocabPath + ": token '" + events.badToken +
                       "' has an id that is not an integer >= 0");
    }
    throw InputError(vocabPath + ": not valid JSON (" + events.parseError + ")");
  }
  if (events.entries.empty()) {
    throw InputError(vocabPath + ": expected a JSON object mapping tokens to ids");
  }
  std::unordered_map<std::string_view, std::size_t> lastOf;
  lastOf.reserve(events.entries.size());
  for (std::size_t e = 0; e < events.entries.size(); ++e) lastOf[events.entries[e].first] = e;
  const std::size_t vocabCount = lastOf.size();
  std::string bytes;
  t.ids_.reserve(vocabCount);
  for (std::size_t e = 0; e < events.entries.size(); ++e) {
    const std::string& token = events.entries[e].first;
    if (lastOf.at(token) != e) continue;  // a later copy of the key wins
    const long long raw = events.entries[e].second;
    if (raw < 0 || raw > INT_MAX) {
      throw InputError(vocabPath + ": token '" + token + "' has an id that is not an integer >= 0");
    }
    const int id = int(raw);
    if (vocabSize > 0 && id >= vocabSize) {
      throw InputError(vocabPath + ": token id " + std::to_string(id) +
                       " is not below vocab_size " + std::to_string(vocabSize) +
                       " of config.json (the vocab belongs to another model)");
    }
    // Dense ids are the rule; a few holes are fine, but no table is sized from a stray huge id.
    if (static_cast<long long>(id) >= 2LL * static_cast<long long>(vocabCount) + 1024) {
      throw InputError(vocabPath + ": token id " + std::to_string(id) + " is far beyond the " +
                       std::to_string(vocabCount) + " tokens of the vocabulary");
    }
    if (!tok::alphabetToBytes(token, bytes)) {
      throw InputError(vocabPath + ": token '" + token +
                       "' is not spelt in GPT-2's byte alphabet (not a byte-level BPE vocab)");
    }
    if (id >= static_cast<int>(t.present_.size())) {
      t.present_.resize(std::max<std::size_t>(id + 1, vocabCount), false);
      t.pieces_.resize(t.present_.size());
    }
    if (t.present_[id]) {
      throw InputError(vocabPath + ": id " + std::to_string(id) + " is given to two tokens");
    }
    t.present_[id] = true;
    t.pieces_[id] = bytes;
    t.ids_.emplace(bytes, id);
    t.maxId_ = std::max(t.maxId_, id);
  }
  // Single bytes may be missing (a character-level vocab): encode() refuses the texts that need
  // them (vocab.json names no unknown token, so there is none).
  t.vocabName_ = vocabPath;
  if (const auto it = t.ids_.find("<|endoftext|>"); it != t.ids_.end()) t.endOfText_ = it->second;

  t.byteIds_.fill(-1);
  for (int byte = 0; byte < 256; ++byte)
    if (const auto it = t.ids_.find(std::string(1, char(byte))); it != t.ids_.end())
      t.byteIds_[std::size_t(byte)] = it->second;

  t.merges_.reserve(std::size_t(std::count(merges.begin(), merges.end(), '\n')) + 1);
  std::size_t lineStart = 0;
  int lineNo = 0, rank = 0;
  std::string a, b, ab;
  auto where = [&] { return mergesPath + ": line " + std::to_string(lineNo); };
  while (lineStart < merges.size()) {
    std::size_t lineEnd = merges.find('\n', lineStart);
    if (lineEnd == std::string::npos) lineEnd = merges.size();
    std::string_view line(merges.data() + lineStart, lineEnd - lineStart);
    lineStart = lineEnd + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (lineNo == 1 && line.starts_with("#version"))) continue;
    const std::size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos) {
      throw InputError(where() + ": expected two tokens separated by one space");
    }
    if (!tok::alphabetToBytes(line.substr(0, sp), a) || !tok::alphabetToBytes(line.substr(sp + 1), b)) {
      throw InputError(where() + ": a token is not spelt in GPT-2's byte alphabet");
    }
    ab.assign(a).append(b);
    const auto ia = t.ids_.find(a), ib = t.ids_.find(b), iab = t.ids_.find(ab);
    if (ia == t.ids_.end() || ib == t.ids_.end() || iab == t.ids_.end()) {
      throw InputError(where() + ": merge '" + std::string(line) +
                       "' uses or makes a token that is not in " + vocabPath +
                       " (the merges belong to another vocab)");
    }
    // A repeated pair keeps its last rank, as in GPT-2.
    t.merges_[mergeKey(ia->second, ib->second)] = {rank++, iab->second};
  }
  return t;
}

void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<int>& out) const {
  // Symbols are contiguous byte spans of the piece, [start[k], start[k+1]), each with the id of
  // its token: at first one a byte (-1 for a byte the vocab lacks, which no merge takes), then
  // what the merges make (every merge makes a vocab token: fromText checks).
  const std::size_t n = piece.size();
  std::vector<std::size_t> start(n + 1);
  std::vector<int> id(n);
  for (std::size_t k = 0; k < n; ++k) {
    start[k] = k;
    id[k] = byteIds_[static_cast<unsigned char>(piece[k])];
  }
  start[n] = n;
  while (id.size() > 1) {
    // The lowest-ranked adjacent pair.
    int best = INT_MAX, first = -1, second = -1, made = -1;
    for (std::size_t k = 0; k + 1 < id.size(); ++k) {
      if (id[k] < 0 || id[k + 1] < 0) continue;
      const auto it = merges_.find(mergeKey(id[k], id[k + 1]));
      if (it != merges_.end() && it->second.rank < best) {
        best = it->second.rank;
        first = id[k];
        second = id[k + 1];
        made = it->second.id;
      }
    }
    if (best == INT_MAX) break;
    // Merge every occurrence of (first, second), left to right, in place.
    std::size_t w = 0;
    for (std::size_t k = 0; k < id.size(); ++w) {
      start[w] = start[k];
      if (k + 1 < id.size() && id[k] == first && id[k + 1] == second) {
        id[w] = made;
        k += 2;
      } else {
        id[w] = id[k];
        k += 1;
      }
    }
    start[w] = n;
    id.resize(w);
    start.resize(w + 1);
  }
  for (std::size_t k = 0; k < id.size(); ++k) {
    if (id[k] >= 0) {
      out.push_back(id[k]);
    } else {  // a single byte the vocab lacks
      const std::size_t at = tok::charStartContaining(piece, start[k]);
      throw InputError("the text needs " + tok::describeChar(piece, at) + ", which " +
                       (vocabName_.empty() ? std::string("the vocabulary") : vocabName_) +
                       " cannot express (no token for byte " + hexOf(piece[start[k]]) + ")");
    }
  }
}

std::vector<int> Gpt2Tokenizer::encode(std::string_view text, bool /*addSpecial*/) const {
  std::vector<int> ids;
  for (const std::string_view piece : gpt2PreTokenize(text)) bpe(piece, ids);
  return ids;
}

bool Gpt2Tokenizer::contains(int id) const {
  return id >= 0 && id < static_cast<int>(present_.size()) && present_[id];
}

std::string Gpt2Tokenizer::pieceBytes(int id) const {
  if (!contains(id)) throw InputError("token id " + std::to_string(id) + " is not in the vocab");
  return pieces_[id];
}

namespace {

// The tokenizer.json reading with the files' own name for kind().
class BartVocabTokenizer final : public Tokenizer {
 public:
  explicit BartVocabTokenizer(std::unique_ptr<Tokenizer> inner) : inner_(std::move(inner)) {}
  std::vector<int> encode(std::string_view text, bool addSpecial) const override {
    inner_->setParseSpecial(parseSpecial());
    return inner_->encode(text, addSpecial);
  }
  PairEncoding encodePair(std::string_view a, std::string_view b, bool addSpecial) const override {
    inner_->setParseSpecial(parseSpecial());
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
  std::string kind() const override {
    return "vocab.json + merges.txt: byte-level BPE, BART's <s> ... </s>";
  }

 private:
  std::unique_ptr<Tokenizer> inner_;
};

}  // namespace

std::unique_ptr<Tokenizer> loadBartVocabTokenizer(const std::string& vocabPath,
                                                  const std::string& mergesPath,
                                                  const std::string& configPath, int vocabSize) {
  using json = nlohmann::json;
  const std::string vocabText = readFile(vocabPath), mergesText = readFile(mergesPath);
  // The checks (and their messages) of the plain GPT-2 reading.
  (void)Gpt2Tokenizer::fromText(vocabText, mergesText, vocabPath, mergesPath, vocabSize);
  json vocab = json::parse(vocabText);
  json cfg = json::object();
  std::error_code ec;
  if (!configPath.empty() && std::filesystem::exists(configPath, ec)) {
    try {
      cfg = json::parse(readFile(configPath));
    } catch (const json::exception& e) {
      throw InputError(configPath + ": not valid JSON (" + e.what() + ")");
    }
    if (!cfg.is_object()) throw InputError(configPath + ": expected a JSON object");
  }
  auto tokenName = [&](const char* key, const char* dflt) -> std::string {
    if (!cfg.contains(key) || cfg[key].is_null()) return dflt;
    const json& v = cfg[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      return v["content"].get<std::string>();
    }
    throw InputError(configPath + ": " + key + " is neither a string nor {\"content\": ...}");
  };
  const std::string bos = tokenName("bos_token", "<s>"), eos = tokenName("eos_token", "</s>"),
                    cls = tokenName("cls_token", "<s>"), sep = tokenName("sep_token", "</s>"),
                    unk = tokenName("unk_token", "<unk>"), pad = tokenName("pad_token", "<pad>"),
                    mask = tokenName("mask_token", "<mask>");
  for (const std::string* name : {&cls, &sep}) {
    if (!vocab.contains(*name)) {
      throw InputError(vocabPath + ": no '" + *name + "' token (BART's template needs it)");
    }
  }
  json t;
  t["version"] = "1.0";
  t["added_tokens"] = json::array();
  std::vector<std::string> seen;
  for (const std::string* name : {&bos, &pad, &eos, &unk, &cls, &sep, &mask}) {
    if (!vocab.contains(*name) || std::find(seen.begin(), seen.end(), *name) != seen.end()) {
      continue;
    }
    seen.push_back(*name);
    t["added_tokens"].push_back({{"id", vocab[*name]},
                                 {"content", *name},
                                 {"single_word", false},
                                 {"lstrip", name == &mask},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  }
  json merges = json::array();
  for (std::size_t at = 0, lineNo = 1; at < mergesText.size(); ++lineNo) {
    std::size_t end = mergesText.find('\n', at);
    if (end == std::string::npos) end = mergesText.size();
    std::string line = mergesText.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineNo == 1 && line.starts_with("#version"))) continue;
    merges.push_back(std::move(line));
  }
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                        {"use_regex", true}};
  t["post_processor"] = {{"type", "RobertaProcessing"},
                         {"sep", {sep, vocab[sep]}},
                         {"cls", {cls, vocab[cls]}},
                         {"trim_offsets", true},
                         {"add_prefix_space", false}};
  t["decoder"] = {{"type", "ByteLevel"}};
  t["model"] = {{"type", "BPE"},         {"dropout", nullptr}, {"unk_token", nullptr},
                {"fuse_unk", false},     {"byte_fallback", false},
                {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
  json readerConfig = {{"bos_token", bos}, {"eos_token", eos}, {"mask_token", mask}};
  return std::make_unique<BartVocabTokenizer>(
      tokenizerFromJson(t.dump(), readerConfig.dump(), vocabPath,
                        configPath.empty() ? "tokenizer_config.json" : configPath, vocabSize));
}

}  // namespace attnviz
