#include "attnviz/model/tokenizers/gguf_vocab.h"

#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/gguf.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <queue>
#include <unordered_map>

namespace attnviz {

namespace {

const std::string kMeta = "\xE2\x96\x81";  // U+2581

// ---- Pre-tokenizer regexes: llama.cpp's table (src/llama-vocab.cpp, llm_tokenizer_bpe) ---------

// GPT-2's pattern as llama.cpp writes it (without the final "|\s+": what that alternative would
// match is kept anyway, as text between matches).
const char* const kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3's tokenizer.json pattern (llama.cpp quotes it and runs a case-expanded copy).
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's tokenizer.json pattern (quoted by llama.cpp likewise).
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kPoro = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDeepseekLlmLetters =
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-"
    "Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-"
    "ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

struct PreTokenizer {
  std::vector<std::string> regexes;
  bool ignoreMerges = false;
  bool addBos = false;  // llama.cpp's default for add_bos_token
};

bool preTokenizerFor(const std::string& pre, PreTokenizer& p) {
  auto is = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return pre == n; });
  };
  if (pre.empty() || pre == "default") {
    p.regexes = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  } else if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                 "lfm2"})) {
    p.regexes = {kLlama3};
    p.ignoreMerges = true;
    p.addBos = true;
  } else if (is({"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"})) {
    p.regexes = {kLlama3};
  } else if (pre == "deepseek-llm") {
    p.regexes = {"[\r\n]", kDeepseekLlmLetters, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$",
                 "[一-龥ࠀ-一가-퟿]+", R"(\p{N}+)"};
  } else if (pre == "deepseek-coder") {
    p.regexes = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"};
  } else if (pre == "falcon") {
    p.regexes = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
  } else if (is({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                 "minerva-7b"})) {
    p.regexes = {R"(\p{N})", kGpt2};
  } else if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
                 "jina-v1-en", "jina-v2-code", "roberta-bpe", "a.x-4.0", "mellum", "modern-bert",
                 "mpt", "olmo", "jais", "exaone4"})) {
    p.regexes = {kGpt2};
  } else if (is({"qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2"})) {
    p.regexes = {kQwen2};
  } else if (is({"poro-chat", "bloom", "gpt3-finnish"})) {
    p.regexes = {kPoro};
  } else if (pre == "viking") {
    p.regexes = {kPoro, R"(\p{N})"};
  } else if (pre == "tekken") {
    p.regexes = {kTekken};
    p.ignoreMerges = true;
    p.addBos = true;
  } else if (is({"gpt-4o", "llama4"})) {
    p.regexes = {kGpt4o};
  } else {
    return false;
  }
  return true;
}

// ---- The vocabulary common to every kind -------------------------------------------------------

class GgufTokenizer : public Tokenizer {
 public:
  GgufTokenizer(const GgufVocab& v, const std::string& name, const GgufTokenizerOptions& o);

  std::vector<int> encode(std::string_view text, bool addSpecial) const override;
  PairEncoding encodePair(std::string_view a, std::string_view b, bool addSpecial) const override;
  std::optional<int> mask() const override { return mask_; }
  std::string pieceBytes(int id) const override;
  std::string decode(const std::vector<int>& ids) const override;
  int size() const override { return static_cast<int>(tokens_.size()); }
  std::optional<int> bos() const override { return bos_; }
  std::optional<int> eos() const override { return eos_; }
  std::optional<int> unk() const override { return unk_; }
  bool isSpecial(int id) const override {
    return contains(id) && (type(id) == GgufTokenType::Control || type(id) == GgufTokenType::Unknown);
  }
  std::string kind() const override { return kindName_; }

 private:
  enum class Kind { Spm, Bpe, Wpm } kind_ = Kind::Spm;
  std::string name_, kindName_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<int> types_;
  std::unordered_map<std::string, int> ids_;
  std::optional<int> bos_, eos_, unk_, sep_, mask_;
  bool addBos_ = false, addEos_ = false, addSpacePrefix_ = true;
  int byteIds_[256];
  // Special pieces cut out of the text: longest first, with llama.cpp's lstrip/rstrip.
  struct Special {
    int id;
    bool lstrip, rstrip;
  };
  std::vector<Special> specials_;
  // gpt2
  std::vector<tok::Regex> regexes_;
  tok::MergeTable merges_;
  bool ignoreMerges_ = false;

  GgufTokenType type(int id) const {
    return types_.empty() ? GgufTokenType::Normal : static_cast<GgufTokenType>(types_[id]);
  }
  const int* find(std::string_view piece) const {
    const auto it = ids_.find(std::string(piece));
    return it == ids_.end() ? nullptr : &it->second;
  }
  void byteTokens(std::string_view chr, std::vector<int>& out) const;
  void spm(const std::string& text, std::vector<int>& out) const;
  void bpe(std::string_view text, std::vector<int>& out) const;
  void wpm(std::string_view text, std::vector<int>& out) const;
};

GgufTokenizer::GgufTokenizer(const GgufVocab& v, const std::string& name,
                             const GgufTokenizerOptions& o)
    : name_(name) {
  std::fill(std::begin(byteIds_), std::end(byteIds_), -1);
  auto fail = [&](const std::string& what) -> void { throw InputError(name + ": " + what); };
  if (v.model == "llama") {
    kind_ = Kind::Spm;
  } else if (v.model == "gpt2") {
    kind_ = Kind::Bpe;
  } else if (v.model == "bert") {
    kind_ = Kind::Wpm;
  } else {
    fail("unsupported tokenizer model '" + v.model + "' (tokenizer.ggml.model)");
  }
  const std::size_t n = v.tokens.size();
  if (n == 0) fail("the vocabulary is empty (tokenizer.ggml.tokens)");
  if (n > (1u << 24)) fail("the vocabulary has " + std::to_string(n) + " tokens, too many");
  if (!v.scores.empty() && v.scores.size() != n) fail("tokenizer.ggml.scores is not one per token");
  if (!v.tokenType.empty() && v.tokenType.size() != n) {
    fail("tokenizer.ggml.token_type is not one per token");
  }
  tokens_ = v.tokens;
  scores_ = v.scores;
  types_ = v.tokenType;
  for (int& t : types_) {
    if (t < 0 || t > 6) t = 0;  // llama.cpp: undefined
  }
  ids_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (tokens_[i].empty()) tokens_[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    if (!ids_.emplace(tokens_[i], static_cast<int>(i)).second) {
      fail("duplicate token '" + tokens_[i] + "' (ids " + std::to_string(ids_[tokens_[i]]) +
           " and " + std::to_string(i) + ")");
    }
  }
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    if (const int* id = find(hex)) byteIds_[b] = *id;
  }

  // Special ids: the file's, else the kind's defaults (when inside the vocabulary).
  auto pick = [&](const std::optional<int>& given, int dflt) -> std::optional<int> {
    if (given && *given >= 0 && static_cast<std::size_t>(*given) < n) return given;
    if (dflt >= 0 && static_cast<std::size_t>(dflt) < n) return dflt;
    return std::nullopt;
  };
  PreTokenizer pre;
  switch (kind_) {
    case Kind::Spm:
      bos_ = pick(v.bos, 1);
      eos_ = pick(v.eos, 2);
      unk_ = pick(v.unk, 0);
      addBos_ = true;
      addSpacePrefix_ = v.addSpacePrefix.value_or(true);
      kindName_ = "GGUF llama (SentencePiece-style BPE over scores)";
      break;
    case Kind::Bpe:
      if (!preTokenizerFor(v.pre, pre)) {
        fail("unknown pre-tokenizer type '" + v.pre + "' (tokenizer.ggml.pre)");
      }
      // llama.cpp defaults both to id 11 (a comma in GPT-2's vocabulary); no id is safer for
      // a model that generates until EOS.
      bos_ = pick(v.bos, -1);
      eos_ = pick(v.eos, -1);
      unk_ = pick(v.unk, -1);
      addBos_ = pre.addBos;
      ignoreMerges_ = pre.ignoreMerges;
      for (const std::string& r : pre.regexes) {
        regexes_.emplace_back(r, name + ": pre-tokenizer '" + v.pre + "'");
      }
      for (std::size_t i = 0; i < v.merges.size(); ++i) {
        const std::string& m = v.merges[i];
        const std::size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) {
          fail("merge " + std::to_string(i) + " ('" + m + "') is not two tokens and a space");
        }
        const int* a = find(std::string_view(m).substr(0, sp));
        const int* b = find(std::string_view(m).substr(sp + 1));
        const int* ab = find(m.substr(0, sp) + m.substr(sp + 1));
        // A merge whose parts or result are not tokens can never apply to tokens: skipped.
        if (a && b && ab) merges_.add(*a, *b, static_cast<int>(i), *ab);
      }
      kindName_ = "GGUF gpt2 (byte-level BPE, pre-tokenizer '" +
              (v.pre.empty() ? std::string("default") : v.pre) + "')";
      break;
    case Kind::Wpm:
      bos_ = pick(v.cls ? v.cls : v.bos, 101);
      eos_ = pick(v.eos, -1);
      unk_ = pick(v.unk, 100);
      sep_ = pick(v.sep, 102);
      addBos_ = true;
      kindName_ = "GGUF bert (WordPiece)";
      break;
  }
  mask_ = pick(v.mask, -1);
  for (const char* name : {"[MASK]", "<mask>"}) {
    if (const int* id = find(name); id && !mask_) mask_ = *id;
  }
  if (v.addBos) addBos_ = *v.addBos;
  if (v.addEos) addEos_ = *v.addEos;
  if (addBos_ && !bos_) fail("add_bos_token is true but the vocabulary has no BOS token");
  if (addEos_ && !eos_) fail("add_eos_token is true but the vocabulary has no EOS token");
  if (kind_ == Kind::Wpm && addBos_ && !sep_) fail("the vocabulary has no [SEP] token");

  // Pieces matched in the text before anything else.
  std::string lowerName = v.name;
  for (char& ch : lowerName) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const bool phi3 = lowerName.find("phi-3") != std::string::npos ||
                    lowerName.find("phi3") != std::string::npos;
  for (std::size_t i = 0; i < n; ++i) {
    const int id = static_cast<int>(i);
    const GgufTokenType t = type(id);
    const bool user = t == GgufTokenType::UserDefined;
    const bool ctrl = t == GgufTokenType::Control || t == GgufTokenType::Unknown;
    if (!user && !(ctrl && o.parseSpecial)) continue;
    bool rstrip = false;
    if (phi3) {
      rstrip = !(tokens_[i] == "<unk>" || tokens_[i] == "<s>" || tokens_[i] == "<|endoftext|>");
    }
    specials_.push_back({id, false, rstrip});
  }
  std::stable_sort(specials_.begin(), specials_.end(), [&](const Special& a, const Special& b) {
    return tokens_[a.id].size() > tokens_[b.id].size();
  });
}

void GgufTokenizer::byteTokens(std::string_view chr, std::vector<int>& out) const {
  for (char c : chr) {
    const int id = byteIds_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_) {
      out.push_back(*unk_);
    } else {
      throw InputError("the text needs " + tok::describeChar(chr, 0) + ", which " + name_ +
                       " cannot express (no token, no byte token, no unknown token)");
    }
  }
}

void GgufTokenizer::spm(const std::string& text, std::vector<int>& out) const {
  struct Sym {
    std::size_t start, len;
    int prev, next;
  };
  std::vector<Sym> sym;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = static_cast<std::size_t>(tok::decodeUtf8(text, i).len);
    const int k = static_cast<int>(sym.size());
    sym.push_back({i, len, k - 1, i + len < text.size() ? k + 1 : -1});
    i += len;
  }
  if (sym.empty()) return;
  struct Bigram {
    float score;
    int left, right;
    std::size_t size;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto mergeable = [&](int id) {
    const GgufTokenType t = type(id);
    return t == GgufTokenType::Normal || t == GgufTokenType::UserDefined ||
           t == GgufTokenType::Undefined;
  };
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const std::string_view joined(text.data() + sym[l].start, sym[l].len + sym[r].len);
    const int* id = find(joined);
    if (!id || !mergeable(*id)) return;
    queue.push({scores_.empty() ? 0.0f : scores_[*id], l, r, joined.size()});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = sym[b.left];
    Sym& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size || l.next != b.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    consider(l.prev, b.left);
    consider(b.left, l.next);
  }
  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece(text.data() + sym[i].start, sym[i].len);
    if (const int* id = find(piece)) {
      out.push_back(*id);
    } else {
      byteTokens(piece, out);
    }
  }
}

void GgufTokenizer::bpe(std::string_view text, std::vector<int>& out) const {
  using Range = std::pair<std::size_t, std::size_t>;
  std::vector<Range> pieces{{0, text.size()}};
  for (const tok::Regex& re : regexes_) {
    std::vector<Range> next;
    for (const Range& p : pieces) {
      const std::string_view s = text.substr(p.first, p.second - p.first);
      for (const Range& r : tok::splitAt(s, re.findAll(s), tok::SplitBehavior::Isolated, false)) {
        next.emplace_back(p.first + r.first, p.first + r.second);
      }
    }
    pieces = std::move(next);
  }
  std::vector<int> sym;
  for (const Range& p : pieces) {
    const std::string word = tok::bytesToAlphabet(text.substr(p.first, p.second - p.first));
    if (ignoreMerges_) {
      if (const int* id = find(word)) {
        out.push_back(*id);
        continue;
      }
    }
    sym.clear();
    for (std::size_t i = 0; i < word.size();) {
      const int len = tok::decodeUtf8(word, i).len;
      if (const int* id = find(std::string_view(word).substr(i, len))) {
        sym.push_back(*id);
      } else if (unk_) {
        sym.push_back(*unk_);
      } else {
        // The piece's text is the alphabet spelling of `original`: byte k is character k.
        const std::string_view original = text.substr(p.first, p.second - p.first);
        std::size_t k = 0;
        for (std::size_t j = 0; j < i; j += tok::decodeUtf8(word, j).len) ++k;
        throw InputError("the text needs " +
                         tok::describeChar(original, tok::charStartContaining(original, k)) +
                         ", which " + name_ + " cannot express (a byte of it has no token)");
      }
      i += len;
    }
    tok::bpeMerge(sym, merges_);
    out.insert(out.end(), sym.begin(), sym.end());
  }
}

void GgufTokenizer::wpm(std::string_view text, std::vector<int>& out) const {
  const std::string norm = tok::bertNormalize(text, tok::BertNormOptions{});
  for (const auto& [a, b] : tok::bertPreTokenize(norm)) {
    const std::string_view word = std::string_view(norm).substr(a, b - a);
    // A continuation is a piece without the mark (a U+2581 written in the text must not reach
    // a word-start piece).
    auto lookup = [&](std::string_view p, bool cont) {
      const int* id = !cont                   ? find(kMeta + std::string(p))
                      : p.starts_with(kMeta) ? nullptr
                                             : find(p);
      return id ? *id : -1;
    };
    const bool ok = tok::wordPiece(word, 100, lookup, out);
    if (!ok) {
      if (!unk_) {
        throw InputError("the text needs the word '" + std::string(word) + "', which " + name_ +
                         " cannot express (no [UNK] token)");
      }
      out.push_back(*unk_);
    }
  }
}

std::vector<int> GgufTokenizer::encode(std::string_view text, bool addSpecial) const {
  // llama.cpp's partition: each special piece, longest first, cuts every text fragment at each
  // of its occurrences.
  struct Frag {
    int id;  // -1: text [a, b)
    std::size_t a, b;
  };
  std::vector<Frag> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  auto isSpace = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  for (const Special& sp : specials_) {
    const std::string& piece = tokens_[sp.id];
    std::vector<Frag> next;
    for (const Frag& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      std::size_t a = f.a;
      const std::size_t b = f.b;
      while (a < b) {
        const std::size_t at = text.substr(0, b).find(piece, a);
        if (at == std::string_view::npos) {
          next.push_back({-1, a, b});
          break;
        }
        std::size_t leftEnd = at;
        if (sp.lstrip) {
          while (leftEnd > a && isSpace(text[leftEnd - 1])) --leftEnd;
        }
        if (leftEnd > a) next.push_back({-1, a, leftEnd});
        next.push_back({sp.id, 0, 0});
        a = at + piece.size();
        if (sp.rstrip) {
          while (a < b && isSpace(text[a])) ++a;
        }
      }
    }
    frags = std::move(next);
  }

  std::vector<int> ids;
  if (addSpecial && addBos_) ids.push_back(*bos_);
  bool prevSpecial = true;
  for (const Frag& f : frags) {
    if (f.id >= 0) {
      ids.push_back(f.id);
      prevSpecial = true;
      continue;
    }
    const std::string_view part = text.substr(f.a, f.b - f.a);
    switch (kind_) {
      case Kind::Spm: {
        std::string s;
        if (addSpacePrefix_ && prevSpecial) s = kMeta;
        for (char ch : part) {
          if (ch == ' ') {
            s += kMeta;
          } else {
            s.push_back(ch);
          }
        }
        spm(s, ids);
        break;
      }
      case Kind::Bpe: bpe(part, ids); break;
      case Kind::Wpm: wpm(part, ids); break;
    }
    prevSpecial = false;
  }
  if (addSpecial) {
    if (kind_ == Kind::Wpm && addBos_) ids.push_back(*sep_);
    if (addEos_) ids.push_back(*eos_);
  }
  return ids;
}

// BERT's pair: [CLS] A [SEP] B [SEP], B [SEP] of type 1 (llama.cpp itself encodes one text).
PairEncoding GgufTokenizer::encodePair(std::string_view a, std::string_view b,
                                       bool addSpecial) const {
  if (kind_ != Kind::Wpm || !bos_ || !sep_) return Tokenizer::encodePair(a, b, addSpecial);
  PairEncoding out;
  auto add = [&](const std::vector<int>& ids, int type) {
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.typeIds.insert(out.typeIds.end(), ids.size(), type);
  };
  if (addSpecial) add({*bos_}, 0);
  add(encode(a, false), 0);
  if (addSpecial) add({*sep_}, 0);
  add(encode(b, false), 1);
  if (addSpecial) add({*sep_}, 1);
  return out;
}

std::string GgufTokenizer::pieceBytes(int id) const {
  if (!contains(id)) throw InputError("token id " + std::to_string(id) + " is not in the vocab");
  const std::string& t = tokens_[id];
  const GgufTokenType ty = type(id);
  if (ty == GgufTokenType::Control || ty == GgufTokenType::Unknown ||
      ty == GgufTokenType::UserDefined) {
    return t;
  }
  if (ty == GgufTokenType::Byte || (kind_ == Kind::Spm && t.size() == 6 && t.starts_with("<0x"))) {
    for (int b = 0; b < 256; ++b) {
      if (byteIds_[b] == id) return std::string(1, static_cast<char>(b));
    }
  }
  std::string out;
  if (kind_ == Kind::Bpe) {
    if (tok::alphabetToBytes(t, out)) return out;
    return t;
  }
  for (std::size_t i = 0; i < t.size();) {
    if (t.compare(i, kMeta.size(), kMeta) == 0) {
      out.push_back(' ');
      i += kMeta.size();
    } else {
      out.push_back(t[i++]);
    }
  }
  return out;
}

std::string GgufTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  bool prevSpecial = true;
  for (int id : ids) {
    std::string bytes = pieceBytes(id);
    const GgufTokenType t = type(id);
    const bool special = t == GgufTokenType::Control || t == GgufTokenType::Unknown ||
                         t == GgufTokenType::UserDefined;
    const bool drops = kind_ == Kind::Wpm || (kind_ == Kind::Spm && addSpacePrefix_);
    if (drops && !special && prevSpecial && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    prevSpecial = special;
    out += bytes;
  }
  return out;
}

}  // namespace

GgufVocab readGgufVocab(const GgufFile& f) {
  GgufVocab v;
  const auto model = f.getString("tokenizer.ggml.model");
  if (!model) throw InputError(f.path() + ": no tokenizer (tokenizer.ggml.model is missing)");
  v.model = *model;
  v.pre = f.getString("tokenizer.ggml.pre").value_or("");
  v.name = f.getString("general.name").value_or("");
  auto tokens = f.getStringArray("tokenizer.ggml.tokens");
  if (!tokens) throw InputError(f.path() + ": no tokenizer.ggml.tokens");
  v.tokens = std::move(*tokens);
  const std::size_t n = v.tokens.size();
  if (auto scores = f.getFloatArray("tokenizer.ggml.scores")) {
    if (scores->size() < n) {
      throw InputError(f.path() + ": tokenizer.ggml.scores has " + std::to_string(scores->size()) +
                       " entries for " + std::to_string(n) + " tokens");
    }
    scores->resize(n);
    v.scores = std::move(*scores);
  }
  if (const auto types = f.getIntArray("tokenizer.ggml.token_type")) {
    if (types->size() < n) {
      throw InputError(f.path() + ": tokenizer.ggml.token_type has " +
                       std::to_string(types->size()) + " entries for " + std::to_string(n) +
                       " tokens");
    }
    v.tokenType.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t t = (*types)[i];
      v.tokenType.push_back(t >= 0 && t <= 6 ? static_cast<int>(t) : 0);
    }
  }
  if (auto merges = f.getStringArray("tokenizer.ggml.merges")) v.merges = std::move(*merges);
  auto id = [&](const char* key) -> std::optional<int> {
    const auto x = f.getInt(key);
    if (!x || *x < 0 || static_cast<std::uint64_t>(*x) >= n) return std::nullopt;
    return static_cast<int>(*x);
  };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.unk = id("tokenizer.ggml.unknown_token_id");
  v.sep = id("tokenizer.ggml.seperator_token_id");  // llama.cpp's spelling
  v.pad = id("tokenizer.ggml.padding_token_id");
  v.cls = id("tokenizer.ggml.cls_token_id");
  v.mask = id("tokenizer.ggml.mask_token_id");
  v.addBos = f.getBool("tokenizer.ggml.add_bos_token");
  v.addEos = f.getBool("tokenizer.ggml.add_eos_token");
  v.addSpacePrefix = f.getBool("tokenizer.ggml.add_space_prefix");
  return v;
}

std::unique_ptr<Tokenizer> makeGgufTokenizer(const GgufVocab& vocab, const std::string& name,
                                             const GgufTokenizerOptions& options) {
  return std::make_unique<GgufTokenizer>(vocab, name, options);
}

std::unique_ptr<Tokenizer> loadGgufTokenizer(const GgufFile& file,
                                             const GgufTokenizerOptions& options) {
  return makeGgufTokenizer(readGgufVocab(file), file.path(), options);
}

std::unique_ptr<Tokenizer> loadGgufTokenizer(const GgufFile& file) {
  return loadGgufTokenizer(file, GgufTokenizerOptions{});
}

}  // namespace attnviz
