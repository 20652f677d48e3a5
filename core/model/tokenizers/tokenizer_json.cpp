#include "attnviz/model/tokenizers/tokenizer_json.h"

#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>
#include <unicode/uchar.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <unordered_map>

namespace attnviz {

namespace {

using json = nlohmann::json;
using Range = std::pair<std::size_t, std::size_t>;
const std::string kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr int kMaxNesting = 16;
// Ids may have holes, but no table is sized from an id far beyond the number of tokens.
long long idLimit(long long tokens) { return 2 * tokens + 4096; }

// A pre-token and whether it starts where the whole text starts (Metaspace's "first").
struct Piece {
  std::string text;
  bool atStart = false;
};

// ---- JSON helpers ------------------------------------------------------------------------------

struct Ctx {
  std::string file;  // for errors
  [[noreturn]] void fail(const std::string& what) const { throw InputError(file + ": " + what); }
};

std::string typeOf(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string();
}

bool boolOr(const json& j, const char* key, bool dflt) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) throw InputError(std::string(key) + " is not a boolean");
  return j[key].get<bool>();
}

std::string stringOr(const json& j, const char* key, const std::string& dflt) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_string()) throw InputError(std::string(key) + " is not a string");
  return j[key].get<std::string>();
}

// {"String": s} or {"Regex": r}: one of them set.
struct Pattern {
  std::shared_ptr<const tok::Regex> regex;
  std::string literal;
  std::vector<Range> findAll(std::string_view text) const {
    return regex ? regex->findAll(text) : tok::findAllLiteral(text, literal);
  }
};

Pattern parsePattern(const json& j, const Ctx& c, const std::string& where) {
  Pattern p;
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    p.regex = std::make_shared<tok::Regex>(j["Regex"].get<std::string>(), c.file + ": " + where);
  } else if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    p.literal = j["String"].get<std::string>();
  } else {
    c.fail(where + ": pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
  }
  return p;
}

tok::SplitBehavior parseBehavior(const json& j, const Ctx& c, tok::SplitBehavior dflt) {
  const std::string b = stringOr(j, "behavior", "");
  if (b.empty()) return dflt;
  if (b == "Removed") return tok::SplitBehavior::Removed;
  if (b == "Isolated") return tok::SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return tok::SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return tok::SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return tok::SplitBehavior::Contiguous;
  c.fail("unknown split behavior " + b);
}

bool isWhite(std::string_view s, std::size_t i, int* len = nullptr) {
  const tok::Utf8Char ch = tok::decodeUtf8(s, i);
  if (len) *len = ch.len;
  return tok::isWhiteSpace(ch.cp);
}

std::size_t prevCharStart(std::string_view s, std::size_t i) {
  std::size_t k = i;
  for (int n = 0; n < 4 && k > 0; ++n) {
    --k;
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) break;
  }
  // Only a character that decodes to end exactly at i; else the single byte before i.
  if (k + tok::decodeUtf8(s, k).len == i) return k;
  return i - 1;
}

// ---- Normalizers -------------------------------------------------------------------------------

struct NormOp {
  enum Kind { Unicode, Lower, Strip, StripAccents, Replace, Prepend, Bert, Precompiled } kind =
      Unicode;
  tok::NormalForm form = tok::NormalForm::NFC;
  bool left = false, right = false;
  Pattern pattern;
  std::string content;
  tok::BertNormOptions bert;
  std::shared_ptr<const tok::PrecompiledCharsMap> charsMap;

  std::string apply(std::string s) const {
    switch (kind) {
      case Unicode: return tok::normalizeUnicode(s, form);
      case Lower: return tok::lowercase(s);
      case StripAccents: return tok::stripMarks(s);
      case Bert: return tok::bertNormalize(s, bert);
      case Precompiled: return charsMap->normalize(s);
      case Prepend: return s.empty() ? s : content + s;
      case Strip: {
        std::size_t a = 0, b = s.size();
        int len = 0;
        if (left) {
          while (a < b && isWhite(s, a, &len)) a += len;
        }
        if (right) {
          while (b > a) {
            const std::size_t p = prevCharStart(s, b);
            if (!isWhite(s, p)) break;
            b = p;
          }
        }
        return s.substr(a, b - a);
      }
      case Replace: {
        std::string out;
        std::size_t prev = 0;
        for (const Range& m : pattern.findAll(s)) {
          out.append(s, prev, m.first - prev);
          out += content;
          prev = m.second;
        }
        out.append(s, prev, std::string::npos);
        return out;
      }
    }
    return s;
  }
};

void parseNormalizer(const json& j, const Ctx& c, std::vector<NormOp>& ops, int depth) {
  if (j.is_null()) return;
  if (depth > kMaxNesting) c.fail("normalizer: nested too deeply");
  const std::string t = typeOf(j);
  NormOp op;
  if (t == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      c.fail("normalizer Sequence without a normalizers array");
    }
    for (const json& n : j["normalizers"]) parseNormalizer(n, c, ops, depth + 1);
    return;
  } else if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
    op.kind = NormOp::Unicode;
    op.form = t == "NFC"    ? tok::NormalForm::NFC
              : t == "NFD"  ? tok::NormalForm::NFD
              : t == "NFKC" ? tok::NormalForm::NFKC
                            : tok::NormalForm::NFKD;
  } else if (t == "Lowercase") {
    op.kind = NormOp::Lower;
  } else if (t == "StripAccents") {
    op.kind = NormOp::StripAccents;
  } else if (t == "Strip") {
    op.kind = NormOp::Strip;
    op.left = boolOr(j, "strip_left", true);
    op.right = boolOr(j, "strip_right", true);
  } else if (t == "Replace") {
    op.kind = NormOp::Replace;
    op.pattern = parsePattern(j.value("pattern", json()), c, "normalizer Replace");
    op.content = stringOr(j, "content", "");
  } else if (t == "Prepend") {
    op.kind = NormOp::Prepend;
    op.content = stringOr(j, "prepend", "");
  } else if (t == "Precompiled") {
    // SentencePiece's normalization rules (its precompiled_charsmap, base64): T5, mT5, XLM-R.
    const json& m = j.value("precompiled_charsmap", json());
    if (m.is_null()) return;  // no map changes nothing
    if (!m.is_string()) c.fail("normalizer Precompiled: precompiled_charsmap is not a string");
    std::string blob;
    if (!tok::decodeBase64(m.get<std::string>(), blob)) {
      c.fail("normalizer Precompiled: precompiled_charsmap is not base64");
    }
    if (blob.empty()) return;
    op.kind = NormOp::Precompiled;
    op.charsMap = std::make_shared<const tok::PrecompiledCharsMap>(blob, c.file);
  } else if (t == "BertNormalizer") {
    op.kind = NormOp::Bert;
    op.bert.cleanText = boolOr(j, "clean_text", true);
    op.bert.handleChineseChars = boolOr(j, "handle_chinese_chars", true);
    op.bert.lowercase = boolOr(j, "lowercase", true);
    op.bert.stripAccents = boolOr(j, "strip_accents", op.bert.lowercase);
  } else {
    c.fail("unsupported normalizer " + (t.empty() ? std::string("(no type)") : t));
  }
  ops.push_back(std::move(op));
}

// ---- Pre-tokenizers ----------------------------------------------------------------------------

const tok::Regex& gpt2Pattern() {
  static const tok::Regex re(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      "GPT-2 pattern");
  return re;
}

// The ranges of the characters for which `pred(cp)` holds, one range each.
template <class Pred>
std::vector<Range> charMatches(std::string_view s, Pred pred) {
  std::vector<Range> out;
  for (std::size_t i = 0; i < s.size();) {
    const tok::Utf8Char ch = tok::decodeUtf8(s, i);
    if (pred(ch.cp)) out.emplace_back(i, i + ch.len);
    i += ch.len;
  }
  return out;
}

struct PreOp {
  enum Kind { ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Digits, Punctuation, Bert };
  enum class Scheme { Always, First, Never };
  Kind kind = ByteLevel;
  bool addPrefixSpace = false, useRegex = true;  // ByteLevel
  Pattern pattern;                               // Split
  tok::SplitBehavior behavior = tok::SplitBehavior::Isolated;
  bool invert = false;
  std::string replacement = kMeta;  // Metaspace
  Scheme scheme = Scheme::Always;
  bool split = true;
  bool individualDigits = false;  // Digits

  void apply(const Piece& p, std::vector<Piece>& out) const {
    auto emit = [&](const std::string& text, const std::vector<Range>& ranges, bool mapBytes) {
      for (const Range& r : ranges) {
        std::string t = text.substr(r.first, r.second - r.first);
        out.push_back({mapBytes ? tok::bytesToAlphabet(t) : std::move(t), p.atStart && r.first == 0});
      }
    };
    const std::string& s = p.text;
    switch (kind) {
      case ByteLevel: {
        std::string text = s;
        if (addPrefixSpace && (text.empty() || text[0] != ' ')) text = " " + text;
        const std::vector<Range> ranges =
            useRegex ? tok::splitAt(text, gpt2Pattern().findAll(text),
                                    tok::SplitBehavior::Isolated, false)
                     : std::vector<Range>{{0, text.size()}};
        emit(text, ranges, true);
        return;
      }
      case Split:
        emit(s, tok::splitAt(s, pattern.findAll(s), behavior, invert), false);
        return;
      case Metaspace: {
        std::string text;
        for (char ch : s) {
          if (ch == ' ') {
            text += replacement;
          } else {
            text.push_back(ch);
          }
        }
        const bool prepend = scheme == Scheme::Always || (scheme == Scheme::First && p.atStart);
        if (prepend && !text.starts_with(replacement)) text = replacement + text;
        emit(text,
             split ? tok::splitAt(text, tok::findAllLiteral(text, replacement),
                                  tok::SplitBehavior::MergedWithNext, false)
                   : std::vector<Range>{{0, text.size()}},
             false);
        return;
      }
      case Whitespace: {
        static const tok::Regex re(R"(\w+|[^\w\s]+)", "Whitespace pattern");
        emit(s, tok::splitAt(s, re.findAll(s), tok::SplitBehavior::Removed, true), false);
        return;
      }
      case WhitespaceSplit:
        emit(s, tok::splitAt(s, charMatches(s, tok::isWhiteSpace), tok::SplitBehavior::Removed,
                             false),
             false);
        return;
      case Digits: {
        auto numeric = [](int cp) { return (tok::generalCategoryMask(cp) & U_GC_N_MASK) != 0; };
        emit(s, tok::splitAt(s, charMatches(s, numeric),
                             individualDigits ? tok::SplitBehavior::Isolated
                                              : tok::SplitBehavior::Contiguous,
                             false),
             false);
        return;
      }
      case Punctuation:
        emit(s, tok::splitAt(s, charMatches(s, tok::isBertPunctuation), behavior, false), false);
        return;
      case Bert:
        emit(s, tok::bertPreTokenize(s), false);
        return;
    }
  }
};

void parsePreTokenizer(const json& j, const Ctx& c, std::vector<PreOp>& ops, int depth) {
  if (j.is_null()) return;
  if (depth > kMaxNesting) c.fail("pre_tokenizer: nested too deeply");
  const std::string t = typeOf(j);
  PreOp op;
  if (t == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      c.fail("pre_tokenizer Sequence without a pretokenizers array");
    }
    for (const json& p : j["pretokenizers"]) parsePreTokenizer(p, c, ops, depth + 1);
    return;
  } else if (t == "ByteLevel") {
    op.kind = PreOp::ByteLevel;
    op.addPrefixSpace = boolOr(j, "add_prefix_space", true);
    op.useRegex = boolOr(j, "use_regex", true);
  } else if (t == "Split") {
    op.kind = PreOp::Split;
    op.pattern = parsePattern(j.value("pattern", json()), c, "pre_tokenizer Split");
    op.behavior = parseBehavior(j, c, tok::SplitBehavior::Isolated);
    op.invert = boolOr(j, "invert", false);
  } else if (t == "Metaspace") {
    op.kind = PreOp::Metaspace;
    op.replacement = stringOr(j, "replacement", kMeta);
    if (op.replacement.empty()) c.fail("pre_tokenizer Metaspace: empty replacement");
    const std::string scheme = stringOr(j, "prepend_scheme", "");
    if (scheme == "first") {
      op.scheme = PreOp::Scheme::First;
    } else if (scheme == "never") {
      op.scheme = PreOp::Scheme::Never;
    } else if (scheme == "always") {
      op.scheme = PreOp::Scheme::Always;
    } else if (scheme.empty()) {
      op.scheme = boolOr(j, "add_prefix_space", true) ? PreOp::Scheme::Always
                                                      : PreOp::Scheme::Never;
    } else {
      c.fail("pre_tokenizer Metaspace: unknown prepend_scheme " + scheme);
    }
    op.split = boolOr(j, "split", true);
  } else if (t == "Whitespace") {
    op.kind = PreOp::Whitespace;
  } else if (t == "WhitespaceSplit") {
    op.kind = PreOp::WhitespaceSplit;
  } else if (t == "Digits") {
    op.kind = PreOp::Digits;
    op.individualDigits = boolOr(j, "individual_digits", false);
  } else if (t == "Punctuation") {
    op.kind = PreOp::Punctuation;
    op.behavior = parseBehavior(j, c, tok::SplitBehavior::Isolated);
  } else if (t == "BertPreTokenizer") {
    op.kind = PreOp::Bert;
  } else {
    c.fail("unsupported pre_tokenizer " + (t.empty() ? std::string("(no type)") : t));
  }
  ops.push_back(std::move(op));
}

// ---- Added tokens ------------------------------------------------------------------------------

struct AddedToken {
  std::string content;
  int id = -1;
  bool special = false, lstrip = false, rstrip = false, singleWord = false, normalized = false;
};

struct Segment {
  bool token = false;
  int id = -1;
  std::size_t a = 0, b = 0;
};

bool isWordChar(int cp) {
  return cp == '_' ||
         (tok::generalCategoryMask(cp) & (U_GC_L_MASK | U_GC_N_MASK | U_GC_M_MASK)) != 0;
}

// The text cut at the added tokens `m` finds (values index `tokens`), as Hugging Face's
// AddedVocabulary does: leftmost-longest, single_word, lstrip and rstrip.
std::vector<Segment> splitAdded(std::string_view text, const tok::LiteralMatcher& m,
                                const std::vector<AddedToken>& tokens) {
  std::vector<Segment> out;
  if (m.empty()) {
    if (!text.empty()) out.push_back({false, -1, 0, text.size()});
    return out;
  }
  std::size_t from = 0, pos = 0;
  const std::size_t n = text.size();
  while (pos < n) {
    int index = -1;
    const std::size_t len = m.longestAt(text, pos, index);
    if (len == 0) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + len;
    const AddedToken& t = tokens[index];
    if (t.singleWord) {
      const bool startOk =
          start == 0 || !isWordChar(tok::decodeUtf8(text, prevCharStart(text, start)).cp);
      const bool stopOk = stop == n || !isWordChar(tok::decodeUtf8(text, stop).cp);
      if (!startOk || !stopOk) {
        pos = stop;
        continue;
      }
    }
    if (t.lstrip) {
      while (start > from) {
        const std::size_t p = prevCharStart(text, start);
        if (!isWhite(text, p)) break;
        start = p;
      }
    }
    if (t.rstrip) {
      int l = 0;
      while (stop < n && isWhite(text, stop, &l)) stop += l;
    }
    if (start > from) out.push_back({false, -1, from, start});
    out.push_back({true, t.id, start, stop});
    from = pos = stop;
  }
  if (from < n) out.push_back({false, -1, from, n});
  return out;
}

// ---- The tokenizer -----------------------------------------------------------------------------

enum class PrefixMode { None, Start, EachSection };

// One item of a post-processor template: a sequence (0 = A, 1 = B) or special ids, with the
// type id the template gives it.
struct TemplateItem {
  int sequence = -1;  // -1: the special ids
  std::vector<int> ids;
  int typeId = 0;
};

class JsonTokenizer final : public Tokenizer {
 public:
  JsonTokenizer(const std::string& jsonText, const std::string& configText,
                const std::string& jsonName, const std::string& configName, int vocabSize);

  std::vector<int> encode(std::string_view text, bool addSpecial) const override;
  PairEncoding encodePair(std::string_view a, std::string_view b, bool addSpecial) const override;
  std::optional<int> mask() const override { return mask_; }
  std::string pieceBytes(int id) const override;
  std::string decode(const std::vector<int>& ids) const override;
  int size() const override { return static_cast<int>(present_.size()); }
  bool contains(int id) const override {
    return id >= 0 && id < size() && present_[static_cast<std::size_t>(id)];
  }
  std::optional<int> bos() const override { return bos_; }
  std::optional<int> eos() const override { return eos_; }
  std::optional<int> unk() const override { return unk_; }
  bool isSpecial(int id) const override { return contains(id) && special_[id]; }
  std::string kind() const override { return kind_; }

 private:
  Ctx c_;
  std::string kind_;
  std::vector<NormOp> norm_;
  std::vector<PreOp> pre_;
  // The model.
  bool wordPieceModel_ = false, unigramModel_ = false;
  // Unigram: the pieces' scores by id, the pieces in a trie (values are ids), and the score an
  // unknown character gets (the lowest score - 10, as the tokenizers library).
  std::vector<double> scores_;
  tok::LiteralMatcher pieceTrie_;
  double unkScore_ = 0;
  std::unordered_map<std::string, int> vocab_;
  tok::MergeTable merges_;
  bool byteFallback_ = false, fuseUnk_ = false, ignoreMerges_ = false;
  std::string contPrefix_, endSuffix_;
  int maxInputChars_ = 100;
  std::optional<int> unk_;
  int byteIds_[256];
  // Added tokens and special ids.
  std::vector<AddedToken> added_;
  tok::LiteralMatcher rawMatcher_, normMatcher_;
  // The same without the special added tokens (for parseSpecial() off).
  tok::LiteralMatcher rawPlainMatcher_, normPlainMatcher_;
  std::vector<int> prefix_, suffix_;
  std::optional<std::vector<TemplateItem>> pair_;  // the post_processor's pair template
  std::optional<int> bos_, eos_, mask_;
  // id -> token text, presence, added, special.
  std::vector<std::string> text_;
  std::vector<char> present_, added_flag_, special_;
  bool byteLevel_ = false, metaspaceDecode_ = false;
  PrefixMode prefixMode_ = PrefixMode::None;

  void parseModel(const json& m, int vocabSize);
  void parseAdded(const json& a);
  void parsePostProcessor(const json& p, int depth);
  std::vector<TemplateItem> parseTemplate(const json& t, const json& specials,
                                          const std::string& key);
  std::vector<int> encodeText(std::string_view text) const;
  void applyConfig(const json& cfg, const std::string& configName);
  std::optional<int> idOf(const std::string& content) const;
  std::string normalize(std::string s) const {
    for (const NormOp& op : norm_) s = op.apply(std::move(s));
    return s;
  }
  void model(const std::string& piece, std::vector<int>& out) const;
  void bpe(const std::string& piece, std::vector<int>& out) const;
  void parseUnigram(const json& m, int vocabSize);
  void unigram(const std::string& piece, std::vector<int>& out) const;
  [[noreturn]] void cannotExpress(std::string_view piece, std::size_t at) const;
};

JsonTokenizer::JsonTokenizer(const std::string& jsonText, const std::string& configText,
                             const std::string& jsonName, const std::string& configName,
                             int vocabSize) {
  c_.file = jsonName;
  std::fill(std::begin(byteIds_), std::end(byteIds_), -1);
  json j;
  try {
    j = json::parse(jsonText);
  } catch (const json::exception& e) {
    c_.fail(std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    c_.fail("not a tokenizer.json (no \"model\" object)");
  }
  try {
    parseModel(j["model"], vocabSize);
    if (j.contains("added_tokens")) parseAdded(j["added_tokens"]);
    if (j.contains("normalizer")) parseNormalizer(j["normalizer"], c_, norm_, 0);
    if (j.contains("pre_tokenizer")) parsePreTokenizer(j["pre_tokenizer"], c_, pre_, 0);
    if (j.contains("post_processor")) parsePostProcessor(j["post_processor"], 0);
    // How pieces decode: byte-level when a ByteLevel step is anywhere; U+2581 as a space when a
    // Metaspace step, a Prepend or a Replace to or from it is.
    const std::string all = j.value("decoder", json()).dump() + j.value("normalizer", json()).dump() +
                            j.value("pre_tokenizer", json()).dump();
    byteLevel_ = all.find("\"ByteLevel\"") != std::string::npos;
    metaspaceDecode_ = !byteLevel_ && (all.find("Metaspace") != std::string::npos ||
                                       all.find(kMeta) != std::string::npos);
  } catch (const json::exception& e) {
    c_.fail(std::string("unexpected structure (") + e.what() + ")");
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.starts_with(jsonName + ":")) throw;
    c_.fail(what);
  }
  // The space that encoding puts in front of the text (decode() takes it off again).
  for (const NormOp& op : norm_) {
    if (op.kind == NormOp::Prepend && (op.content == kMeta || op.content == " ")) {
      prefixMode_ = PrefixMode::EachSection;
    }
  }
  for (const PreOp& op : pre_) {
    if (op.kind == PreOp::Metaspace && op.scheme == PreOp::Scheme::Always) {
      prefixMode_ = PrefixMode::EachSection;
    }
    if (op.kind == PreOp::Metaspace && op.scheme == PreOp::Scheme::First &&
        prefixMode_ == PrefixMode::None) {
      prefixMode_ = PrefixMode::Start;
    }
    if (op.kind == PreOp::ByteLevel && op.addPrefixSpace) prefixMode_ = PrefixMode::EachSection;
  }
  if (wordPieceModel_) prefixMode_ = PrefixMode::Start;

  // Normalized added tokens are searched for in normalized text, spelt as normalized.
  for (std::size_t i = 0; i < added_.size(); ++i) {
    const std::string spelt =
        added_[i].normalized ? normalize(added_[i].content) : added_[i].content;
    (added_[i].normalized ? normMatcher_ : rawMatcher_).add(spelt, static_cast<int>(i));
    if (!added_[i].special) {
      (added_[i].normalized ? normPlainMatcher_ : rawPlainMatcher_).add(spelt, static_cast<int>(i));
    }
  }
  if (!configText.empty()) {
    json cfg;
    try {
      cfg = json::parse(configText);
    } catch (const json::exception& e) {
      throw InputError(configName + ": not valid JSON (" + e.what() + ")");
    }
    if (!cfg.is_object()) throw InputError(configName + ": expected a JSON object");
    try {
      applyConfig(cfg, configName);
    } catch (const json::exception& e) {
      throw InputError(configName + ": unexpected structure (" + e.what() + ")");
    }
  }
  if (!mask_) {
    for (const char* name : {"[MASK]", "<mask>"}) {
      if (const auto id = idOf(name); id && !mask_) mask_ = id;
    }
  }
  if (!bos_ && !prefix_.empty()) bos_ = prefix_.front();
  if (!eos_ && !suffix_.empty()) eos_ = suffix_.back();

  kind_ = std::string("tokenizer.json: ") +
          (wordPieceModel_ ? "WordPiece" : unigramModel_ ? "Unigram" : "BPE") +
          (byteLevel_ ? ", byte-level" : "") + (byteFallback_ ? ", byte fallback" : "");
}

void JsonTokenizer::parseModel(const json& m, int vocabSize) {
  std::string type = typeOf(m);
  if (type.empty()) {  // older files: the fields say which model it is
    if (m.contains("merges")) {
      type = "BPE";
    } else if (m.contains("vocab") && m["vocab"].is_array()) {
      type = "Unigram";
    } else if (m.contains("max_input_chars_per_word")) {
      type = "WordPiece";
    } else {
      type = "WordLevel";
    }
  }
  if (type == "Unigram") {
    parseUnigram(m, vocabSize);
    return;
  }
  if (type != "BPE" && type != "WordPiece") c_.fail("unsupported tokenizer model type " + type);
  wordPieceModel_ = type == "WordPiece";
  if (!m.contains("vocab") || !m["vocab"].is_object()) c_.fail("model.vocab is not an object");
  const json& vocab = m["vocab"];
  const long long count = static_cast<long long>(vocab.size());
  int maxId = -1;
  vocab_.reserve(vocab.size());
  for (const auto& [token, idv] : vocab.items()) {
    if (!idv.is_number_integer() || idv.get<long long>() < 0 ||
        idv.get<long long>() >= idLimit(count)) {
      c_.fail("model.vocab: token '" + token + "' has an id that is not an integer in [0, " +
              std::to_string(idLimit(count)) + ")");
    }
    const int id = idv.get<int>();
    if (vocabSize > 0 && id >= vocabSize) {
      c_.fail("token id " + std::to_string(id) + " is not below vocab_size " +
              std::to_string(vocabSize) + " of config.json (the tokenizer belongs to another model)");
    }
    vocab_.emplace(token, id);
    maxId = std::max(maxId, id);
  }
  text_.assign(static_cast<std::size_t>(maxId + 1), std::string());
  present_.assign(text_.size(), 0);
  for (const auto& [token, id] : vocab_) {
    if (present_[id]) c_.fail("model.vocab: id " + std::to_string(id) + " is given to two tokens");
    present_[id] = 1;
    text_[id] = token;
  }
  added_flag_.assign(text_.size(), 0);
  special_.assign(text_.size(), 0);

  const std::string unk = stringOr(m, "unk_token", "");
  if (!unk.empty()) {
    const auto it = vocab_.find(unk);
    if (it == vocab_.end()) c_.fail("model.unk_token '" + unk + "' is not in the vocab");
    unk_ = it->second;
  }
  if (wordPieceModel_) {
    contPrefix_ = stringOr(m, "continuing_subword_prefix", "##");
    if (m.contains("max_input_chars_per_word") && m["max_input_chars_per_word"].is_number_integer()) {
      maxInputChars_ = static_cast<int>(
          std::clamp<long long>(m["max_input_chars_per_word"].get<long long>(), 1, 1 << 20));
    }
    return;
  }
  byteFallback_ = boolOr(m, "byte_fallback", false);
  fuseUnk_ = boolOr(m, "fuse_unk", false);
  ignoreMerges_ = boolOr(m, "ignore_merges", false);
  contPrefix_ = stringOr(m, "continuing_subword_prefix", "");
  endSuffix_ = stringOr(m, "end_of_word_suffix", "");
  if (byteFallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const auto it = vocab_.find(name);
      if (it != vocab_.end()) byteIds_[b] = it->second;
    }
  }
  if (!m.contains("merges")) return;
  const json& merges = m["merges"];
  if (!merges.is_array()) c_.fail("model.merges is not an array");
  int rank = 0;
  for (const json& mj : merges) {
    std::string a, b;
    if (mj.is_string()) {
      const std::string s = mj.get<std::string>();
      const std::size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) c_.fail("merge '" + s + "' is not two tokens separated by a space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
      a = mj[0].get<std::string>();
      b = mj[1].get<std::string>();
    } else {
      c_.fail("merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const std::string merged =
        a + (contPrefix_.empty() || !b.starts_with(contPrefix_) ? b : b.substr(contPrefix_.size()));
    const auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(merged);
    if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end()) {
      c_.fail("merge '" + a + " " + b + "' uses or makes a token that is not in the vocab");
    }
    merges_.add(ia->second, ib->second, rank++, im->second);
  }
}

// Unigram (SentencePiece's model as the tokenizers library runs it): "vocab" is [[piece, score],
// ...] with the id the position, "unk_id" an id or null, "byte_fallback" <0xNN> pieces for what
// no piece covers.
void JsonTokenizer::parseUnigram(const json& m, int vocabSize) {
  unigramModel_ = true;
  if (!m.contains("vocab") || !m["vocab"].is_array()) c_.fail("model.vocab is not an array");
  const json& vocab = m["vocab"];
  if (vocab.empty()) c_.fail("model.vocab is empty (a Unigram model needs at least <unk>)");
  if (vocabSize > 0 && static_cast<long long>(vocab.size()) > vocabSize) {
    c_.fail(std::to_string(vocab.size()) + " pieces do not fit vocab_size " +
            std::to_string(vocabSize) +
            " of config.json (the tokenizer belongs to another model)");
  }
  const std::size_t n = vocab.size();
  text_.assign(n, std::string());
  present_.assign(n, 1);
  scores_.assign(n, 0.0);
  double minScore = 0;
  for (std::size_t id = 0; id < n; ++id) {
    const json& e = vocab[id];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number()) {
      c_.fail("model.vocab: entry " + std::to_string(id) + " is not [piece, score]");
    }
    text_[id] = e[0].get<std::string>();
    scores_[id] = e[1].get<double>();
    if (!std::isfinite(scores_[id])) {
      c_.fail("model.vocab: the score of entry " + std::to_string(id) + " is not finite");
    }
    minScore = id == 0 ? scores_[id] : std::min(minScore, scores_[id]);
    vocab_[text_[id]] = static_cast<int>(id);  // a repeated piece: the later id, as the library
  }
  for (const auto& [piece, id] : vocab_) pieceTrie_.add(piece, id);
  unkScore_ = minScore - 10.0;
  added_flag_.assign(n, 0);
  special_.assign(n, 0);
  if (m.contains("unk_id") && !m["unk_id"].is_null()) {
    if (!m["unk_id"].is_number_integer() || m["unk_id"].get<long long>() < 0 ||
        m["unk_id"].get<long long>() >= static_cast<long long>(n)) {
      c_.fail("model.unk_id is not an id of the vocab (0.." + std::to_string(n - 1) + ")");
    }
    unk_ = m["unk_id"].get<int>();
  }
  byteFallback_ = boolOr(m, "byte_fallback", false);
  if (byteFallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const auto it = vocab_.find(name);
      if (it != vocab_.end()) byteIds_[b] = it->second;
    }
  }
}

// The best segmentation by the pieces' scores (Viterbi over the byte positions; a character no
// one-character piece covers is the unknown token at unkScore_), then consecutive unknowns fused
// into one (each run one <unk>, or with byte_fallback its bytes when every byte has a piece), as
// the tokenizers library's Unigram::encode_optimized and tokenize.
void JsonTokenizer::unigram(const std::string& piece, std::vector<int>& out) const {
  struct Best {
    double score = 0;
    long long from = -1;  // -1: not reached
    int id = -1;
  };
  const std::size_t n = piece.size();
  std::vector<Best> best(n + 1);
  best[0].from = 0;
  for (std::size_t at = 0; at < n;) {
    const int charLen = tok::decodeUtf8(piece, at).len;
    const double here = best[at].score;
    bool single = false;
    auto offer = [&](std::size_t len, int id, double score) {
      Best& b = best[at + len];
      if (b.from < 0 || here + score > b.score) b = {here + score, static_cast<long long>(at), id};
    };
    pieceTrie_.eachAt(piece, at, [&](std::size_t len, int id) {
      offer(len, id, scores_[static_cast<std::size_t>(id)]);
      if (static_cast<int>(len) == charLen) single = true;
    });
    if (!single) {
      if (!unk_) cannotExpress(piece, at);
      offer(static_cast<std::size_t>(charLen), *unk_, unkScore_);
    }
    at += static_cast<std::size_t>(charLen);
  }
  // Back from the end: (start, end, id), unknowns merged with their unknown neighbours.
  std::vector<std::pair<std::pair<std::size_t, std::size_t>, int>> parts;
  for (std::size_t end = n; end > 0;) {
    const Best& b = best[end];
    if (b.from < 0) cannotExpress(piece, tok::charStartContaining(piece, end - 1));
    const auto start = static_cast<std::size_t>(b.from);
    if (b.id == unk_ && !parts.empty() && parts.back().second == *unk_ &&
        parts.back().first.first == end) {
      parts.back().first.first = start;
    } else {
      parts.push_back({{start, end}, b.id});
    }
    end = start;
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    const auto [range, id] = *it;
    if (!(unk_ && id == *unk_)) {
      out.push_back(id);
      continue;
    }
    const std::string_view text(piece.data() + range.first, range.second - range.first);
    // A run of unknowns that is itself a piece (it would have to be "<unk>"'s own spelling) is
    // that piece; else byte fallback when every byte has a piece; else <unk>.
    if (const auto v = vocab_.find(std::string(text)); v != vocab_.end()) {
      out.push_back(v->second);
      continue;
    }
    bool bytesOk = byteFallback_;
    for (char b : text) bytesOk = bytesOk && byteIds_[static_cast<unsigned char>(b)] >= 0;
    if (bytesOk) {
      for (char b : text) out.push_back(byteIds_[static_cast<unsigned char>(b)]);
    } else {
      out.push_back(*unk_);
    }
  }
}

void JsonTokenizer::parseAdded(const json& a) {
  if (a.is_null()) return;
  if (!a.is_array()) c_.fail("added_tokens is not an array");
  const long long limit = idLimit(static_cast<long long>(vocab_.size() + a.size()));
  for (const json& t : a) {
    AddedToken tok;
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() ||
        !t.contains("id") || !t["id"].is_number_integer()) {
      c_.fail("added_tokens: an entry without a string content and an integer id");
    }
    tok.content = t["content"].get<std::string>();
    const long long id = t["id"].get<long long>();
    if (id < 0 || id >= limit) {
      c_.fail("added_tokens: id " + std::to_string(id) + " of '" + tok.content +
              "' is out of range");
    }
    if (tok.content.empty()) c_.fail("added_tokens: empty content for id " + std::to_string(id));
    tok.id = static_cast<int>(id);
    tok.special = boolOr(t, "special", false);
    tok.lstrip = boolOr(t, "lstrip", false);
    tok.rstrip = boolOr(t, "rstrip", false);
    tok.singleWord = boolOr(t, "single_word", false);
    tok.normalized = boolOr(t, "normalized", !tok.special);
    if (tok.id >= static_cast<int>(text_.size())) {
      const std::size_t n = static_cast<std::size_t>(tok.id) + 1;
      text_.resize(n);
      present_.resize(n, 0);
      added_flag_.resize(n, 0);
      special_.resize(n, 0);
    }
    if (present_[tok.id] && text_[tok.id] != tok.content) {
      c_.fail("added_tokens: id " + std::to_string(tok.id) + " is '" + tok.content +
              "' but the vocab has '" + text_[tok.id] + "'");
    }
    present_[tok.id] = 1;
    text_[tok.id] = tok.content;
    added_flag_[tok.id] = 1;
    special_[tok.id] = tok.special ? 1 : 0;
    added_.push_back(std::move(tok));
  }
}

std::optional<int> JsonTokenizer::idOf(const std::string& content) const {
  for (const AddedToken& t : added_) {
    if (t.content == content) return t.id;
  }
  const auto it = vocab_.find(content);
  if (it != vocab_.end()) return it->second;
  return std::nullopt;
}

void JsonTokenizer::parsePostProcessor(const json& p, int depth) {
  if (p.is_null()) return;
  if (depth > kMaxNesting) c_.fail("post_processor: nested too deeply");
  const std::string t = typeOf(p);
  auto idOrFail = [&](const std::string& content) {
    const auto id = idOf(content);
    if (!id) c_.fail("post_processor: special token '" + content + "' is not in the vocabulary");
    return *id;
  };
  if (t == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array()) {
      c_.fail("post_processor Sequence without a processors array");
    }
    for (const json& q : p["processors"]) parsePostProcessor(q, depth + 1);
  } else if (t == "ByteLevel") {
    // Offsets only.
  } else if (t == "TemplateProcessing") {
    const json specials = p.value("special_tokens", json::object());
    bool seenSequence = false;
    for (const TemplateItem& item : parseTemplate(p.value("single", json()), specials, "single")) {
      if (item.sequence >= 0) {
        seenSequence = true;
        continue;
      }
      auto& to = seenSequence ? suffix_ : prefix_;
      to.insert(to.end(), item.ids.begin(), item.ids.end());
    }
    if (p.contains("pair") && !p["pair"].is_null()) {
      pair_ = parseTemplate(p["pair"], specials, "pair");
    }
  } else if (t == "RobertaProcessing" || t == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const json& v = p.value(key, json());
      if (!v.is_array() || v.size() != 2 || !v[0].is_string()) {
        c_.fail("post_processor " + t + ": " + key + " is not [token, id]");
      }
      const int id = idOrFail(v[0].get<std::string>());
      (std::string(key) == "cls" ? prefix_ : suffix_).push_back(id);
    }
    // BERT: [CLS] A [SEP] B [SEP], B [SEP] of type 1. RoBERTa: <s> A </s></s> B </s>, every
    // type 0 (the Rust library's RobertaProcessing; RoBERTa has one token type).
    const int cls = prefix_.back(), sep = suffix_.back();
    const int second = t == "BertProcessing" ? 1 : 0;
    pair_ = std::vector<TemplateItem>{{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}};
    if (t == "RobertaProcessing") pair_->push_back({-1, {sep}, second});
    pair_->push_back({1, {}, second});
    pair_->push_back({-1, {sep}, second});
  } else {
    c_.fail("unsupported post_processor " + (t.empty() ? std::string("(no type)") : t));
  }
}

// A TemplateProcessing template: "[CLS]:0 $A:0 [SEP]:0" (a string, items split at spaces: "$",
// "$A", "$B" or "$<type id>" for a sequence, anything else a special token, ":<type id>" after
// either), or the serialized array of {"Sequence": {"id", "type_id"}} and {"SpecialToken":
// {"id", "type_id"}}. A special token's ids come from special_tokens, else the vocabulary.
std::vector<TemplateItem> JsonTokenizer::parseTemplate(const json& t, const json& specials,
                                                       const std::string& key) {
  const std::string where = "post_processor TemplateProcessing \"" + key + "\"";
  std::vector<std::pair<std::string, int>> names;  // "$A" / "$B" or a special token's name
  auto typeIdOf = [&](const std::string& digits) {
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      c_.fail(where + ": '" + digits + "' is not a type id");
    }
    return std::stoi(digits);
  };
  if (t.is_string()) {
    const std::string s = t.get<std::string>();
    std::size_t i = 0;
    while (i < s.size()) {
      const std::size_t j = std::min(s.find(' ', i), s.size());
      std::string item = s.substr(i, j - i);
      i = j + 1;
      if (item.empty()) continue;
      int typeId = 0;
      if (const std::size_t colon = item.rfind(':'); colon != std::string::npos && colon > 0) {
        typeId = typeIdOf(item.substr(colon + 1));
        item = item.substr(0, colon);
      }
      if (item[0] == '$') {
        const std::string rest = item.substr(1);
        if (rest == "B" || rest == "b") {
          names.emplace_back("$B", typeId);
        } else if (rest.empty() || rest == "A" || rest == "a") {
          names.emplace_back("$A", typeId);
        } else {
          names.emplace_back("$A", typeIdOf(rest));
        }
        continue;
      }
      names.emplace_back(item, typeId);
    }
  } else if (t.is_array()) {
    for (const json& item : t) {
      const char* kind = item.is_object() && item.contains("Sequence")       ? "Sequence"
                         : item.is_object() && item.contains("SpecialToken") ? "SpecialToken"
                                                                              : nullptr;
      if (!kind || !item[kind].is_object() || !item[kind].contains("id") ||
          !item[kind]["id"].is_string()) {
        c_.fail(where + ": an item is neither a SpecialToken nor a Sequence");
      }
      const json& body = item[kind];
      int typeId = 0;
      if (body.contains("type_id")) {
        if (!body["type_id"].is_number_integer() || body["type_id"].get<long long>() < 0 ||
            body["type_id"].get<long long>() > 1'000'000) {
          c_.fail(where + ": type_id is not a small non-negative integer");
        }
        typeId = body["type_id"].get<int>();
      }
      const std::string id = body["id"].get<std::string>();
      if (std::string(kind) == "Sequence") {
        if (id != "A" && id != "B") c_.fail(where + ": sequence '" + id + "' is neither A nor B");
        names.emplace_back("$" + id, typeId);
      } else {
        names.emplace_back(id, typeId);
      }
    }
  } else {
    c_.fail("post_processor TemplateProcessing without a \"" + key + "\" template");
  }
  std::vector<TemplateItem> items;
  for (const auto& [name, typeId] : names) {
    TemplateItem item;
    item.typeId = typeId;
    if (name == "$A" || name == "$B") {
      item.sequence = name == "$A" ? 0 : 1;
      items.push_back(std::move(item));
      continue;
    }
    if (specials.is_object() && specials.contains(name) && specials[name].is_object() &&
        specials[name].contains("ids") && specials[name]["ids"].is_array()) {
      for (const json& idj : specials[name]["ids"]) {
        if (!idj.is_number_integer() || !contains(idj.get<long long>() > INT32_MAX ||
                                                          idj.get<long long>() < 0
                                                      ? -1
                                                      : static_cast<int>(idj.get<long long>()))) {
          c_.fail("post_processor: special token '" + name + "' has an id outside the vocabulary");
        }
        item.ids.push_back(idj.get<int>());
      }
    } else {
      const auto id = idOf(name);
      if (!id) c_.fail("post_processor: special token '" + name + "' is not in the vocabulary");
      item.ids.push_back(*id);
    }
    items.push_back(std::move(item));
  }
  return items;
}

void JsonTokenizer::applyConfig(const json& cfg, const std::string& configName) {
  auto tokenName = [&](const char* key) -> std::optional<std::string> {
    if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    const json& v = cfg[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      return v["content"].get<std::string>();
    }
    throw InputError(configName + ": " + key + " is neither a string nor {\"content\": ...}");
  };
  auto flag = [&](const char* key) -> std::optional<bool> {
    if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    if (!cfg[key].is_boolean()) throw InputError(configName + ": " + key + " is not a boolean");
    return cfg[key].get<bool>();
  };
  const auto bosName = tokenName("bos_token"), eosName = tokenName("eos_token");
  if (bosName) bos_ = idOf(*bosName);
  if (eosName) eos_ = idOf(*eosName);
  if (const auto maskName = tokenName("mask_token")) mask_ = idOf(*maskName);
  if (const auto addBos = flag("add_bos_token")) {
    prefix_.clear();
    if (*addBos) {
      if (!bos_) {
        throw InputError(configName + ": add_bos_token is true but bos_token " +
                         (bosName ? "'" + *bosName + "' is not in the vocabulary" : "is not set"));
      }
      prefix_.push_back(*bos_);
    }
  }
  if (const auto addEos = flag("add_eos_token")) {
    suffix_.clear();
    if (*addEos) {
      if (!eos_) {
        throw InputError(configName + ": add_eos_token is true but eos_token " +
                         (eosName ? "'" + *eosName + "' is not in the vocabulary" : "is not set"));
      }
      suffix_.push_back(*eos_);
    }
  }
}

void JsonTokenizer::cannotExpress(std::string_view piece, std::size_t at) const {
  throw InputError("the text needs " + tok::describeChar(piece, at) + ", which " + c_.file +
                   " cannot express (no token, no byte fallback, no unk_token)");
}

void JsonTokenizer::bpe(const std::string& piece, std::vector<int>& out) const {
  if (ignoreMerges_) {
    const auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int> sym;
  bool lastUnk = false;
  std::string s;
  for (std::size_t i = 0; i < piece.size();) {
    const tok::Utf8Char ch = tok::decodeUtf8(piece, i);
    const std::string_view chr(piece.data() + i, ch.len);
    s.clear();
    if (i > 0 && !contPrefix_.empty()) s = contPrefix_;
    s.append(chr);
    if (i + ch.len == piece.size() && !endSuffix_.empty()) s += endSuffix_;
    const auto it = vocab_.find(s);
    if (it != vocab_.end()) {
      sym.push_back(it->second);
      lastUnk = false;
    } else {
      bool bytesOk = byteFallback_;
      if (bytesOk) {
        for (char b : s) bytesOk = bytesOk && byteIds_[static_cast<unsigned char>(b)] >= 0;
      }
      if (bytesOk) {
        for (char b : s) sym.push_back(byteIds_[static_cast<unsigned char>(b)]);
        lastUnk = false;
      } else if (unk_) {
        if (!(fuseUnk_ && lastUnk)) sym.push_back(*unk_);
        lastUnk = true;
      } else {
        cannotExpress(piece, i);
      }
    }
    i += ch.len;
  }
  tok::bpeMerge(sym, merges_);
  out.insert(out.end(), sym.begin(), sym.end());
}

void JsonTokenizer::model(const std::string& piece, std::vector<int>& out) const {
  if (piece.empty()) return;
  if (unigramModel_) {
    unigram(piece, out);
    return;
  }
  if (!wordPieceModel_) {
    bpe(piece, out);
    return;
  }
  const bool ok = tok::wordPiece(piece, maxInputChars_,
                                 [&](std::string_view p, bool cont) {
                                   const auto it = vocab_.find(cont ? contPrefix_ + std::string(p)
                                                                    : std::string(p));
                                   return it == vocab_.end() ? -1 : it->second;
                                 },
                                 out);
  if (!ok) {
    if (!unk_) cannotExpress(piece, 0);
    out.push_back(*unk_);
  }
}

std::vector<int> JsonTokenizer::encode(std::string_view text, bool addSpecial) const {
  if (!addSpecial) return encodeText(text);
  std::vector<int> ids = prefix_;
  const std::vector<int> body = encodeText(text);
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

PairEncoding JsonTokenizer::encodePair(std::string_view a, std::string_view b,
                                       bool addSpecial) const {
  if (!pair_) throw InputError(c_.file + ": the post_processor has no pair template");
  const std::vector<int> seq[2] = {encodeText(a), encodeText(b)};
  PairEncoding out;
  for (const TemplateItem& item : *pair_) {
    if (item.sequence < 0 && !addSpecial) continue;
    const std::vector<int>& ids = item.sequence < 0 ? item.ids : seq[item.sequence];
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.typeIds.insert(out.typeIds.end(), ids.size(), item.typeId);
  }
  return out;
}

std::vector<int> JsonTokenizer::encodeText(std::string_view text) const {
  std::vector<int> ids;
  const tok::LiteralMatcher& rawMatcher = parseSpecial() ? rawMatcher_ : rawPlainMatcher_;
  const tok::LiteralMatcher& normMatcher = parseSpecial() ? normMatcher_ : normPlainMatcher_;
  for (const Segment& raw : splitAdded(text, rawMatcher, added_)) {
    if (raw.token) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string normalized = normalize(std::string(text.substr(raw.a, raw.b - raw.a)));
    for (const Segment& seg : splitAdded(normalized, normMatcher, added_)) {
      if (seg.token) {
        ids.push_back(seg.id);
        continue;
      }
      std::vector<Piece> pieces{{normalized.substr(seg.a, seg.b - seg.a), raw.a == 0 && seg.a == 0}};
      for (const PreOp& op : pre_) {
        std::vector<Piece> next;
        for (const Piece& p : pieces) op.apply(p, next);
        pieces = std::move(next);
      }
      for (const Piece& p : pieces) model(p.text, ids);
    }
  }
  return ids;
}

std::string JsonTokenizer::pieceBytes(int id) const {
  if (!contains(id)) throw InputError("token id " + std::to_string(id) + " is not in the vocab");
  const std::string& t = text_[id];
  if (added_flag_[id]) return t;
  if (wordPieceModel_) {
    if (!contPrefix_.empty() && t.starts_with(contPrefix_)) return t.substr(contPrefix_.size());
    return " " + t;
  }
  std::string bytes;
  if (byteLevel_) {
    if (tok::alphabetToBytes(t, bytes)) return bytes;
    return t;
  }
  if (byteFallback_ && t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
    const auto hex = [](char ch) {
      return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
    };
    const int hi = hex(t[3]), lo = hex(t[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  if (!metaspaceDecode_) return t;
  for (std::size_t i = 0; i < t.size();) {
    if (t.compare(i, kMeta.size(), kMeta) == 0) {
      bytes.push_back(' ');
      i += kMeta.size();
    } else {
      bytes.push_back(t[i++]);
    }
  }
  return bytes;
}

std::string JsonTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  bool sawText = false, prevAdded = true;
  for (int id : ids) {
    std::string bytes = pieceBytes(id);
    const bool added = added_flag_[id] != 0;
    const bool runStart = prefixMode_ == PrefixMode::EachSection ? prevAdded
                          : prefixMode_ == PrefixMode::Start     ? !sawText
                                                                 : false;
    if (!added && runStart && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    if (!added) sawText = true;
    prevAdded = added;
    out += bytes;
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizerFromJson(const std::string& jsonText,
                                             const std::string& configText,
                                             const std::string& jsonName,
                                             const std::string& configName, int vocabSize) {
  return std::make_unique<JsonTokenizer>(jsonText, configText, jsonName, configName, vocabSize);
}

std::unique_ptr<Tokenizer> loadTokenizerJson(const std::string& jsonPath,
                                             const std::string& configPath, int vocabSize) {
  const std::string text = readFile(jsonPath);
  std::string config;
  if (!configPath.empty() && std::filesystem::exists(configPath)) config = readFile(configPath);
  return tokenizerFromJson(text, config, jsonPath, configPath.empty() ? "tokenizer_config.json"
                                                                      : configPath,
                           vocabSize);
}

}  // namespace attnviz
