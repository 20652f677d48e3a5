#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"

#include <unicode/brkiter.h>
#include <unicode/normalizer2.h>
#include <unicode/utext.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/locid.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <queue>

namespace attnviz::tok {

// ---- UTF-8 ------------------------------------------------------------------------------------

Utf8Char decodeUtf8(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  int len = 0, cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return {};
  }
  if (i + len > s.size()) return {};
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {cp, len};
}

void appendUtf8(std::string& out, int cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8Of(int cp) {
  std::string s;
  appendUtf8(s, cp);
  return s;
}

std::string describeChar(std::string_view s, std::size_t i) {
  char buf[32];
  const Utf8Char c = decodeUtf8(s, i);
  if (c.cp < 0) {
    std::snprintf(buf, sizeof buf, "byte \\x%02X", static_cast<unsigned char>(s[i]));
    return buf;
  }
  std::snprintf(buf, sizeof buf, " (U+%04X)", c.cp);
  if (c.cp < 0x20 || c.cp == 0x7F) return std::string("character") + buf;
  return "'" + std::string(s.substr(i, c.len)) + "'" + buf;
}

std::size_t charStartContaining(std::string_view s, std::size_t at) {
  for (std::size_t i = 0; i < s.size();) {
    const Utf8Char c = decodeUtf8(s, i);
    if (at < i + c.len) return i;
    i += c.len;
  }
  return at;
}

// ---- GPT-2's byte alphabet ---------------------------------------------------------------------

namespace {

struct Alphabet {
  std::array<std::string, 256> spelling;  // byte -> UTF-8
  std::array<int, 512> byteOf;            // code point -> byte, -1 when not in the alphabet
  Alphabet() {
    byteOf.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : 256 + n++;
      byteOf[cp] = b;
      spelling[b] = utf8Of(cp);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

const std::string& byteToAlphabet(unsigned char b) { return alphabet().spelling[b]; }

std::string bytesToAlphabet(std::string_view bytes) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += a.spelling[static_cast<unsigned char>(c)];
  return out;
}

bool alphabetToBytes(std::string_view s, std::string& out) {
  out.clear();
  const Alphabet& a = alphabet();
  for (std::size_t i = 0; i < s.size();) {
    const Utf8Char c = decodeUtf8(s, i);
    if (c.cp < 0 || c.cp >= 512 || a.byteOf[c.cp] < 0) return false;
    out.push_back(static_cast<char>(a.byteOf[c.cp]));
    i += c.len;
  }
  return !out.empty();
}

// ---- Regexes -----------------------------------------------------------------------------------

namespace {

std::string rewritePattern(std::string_view p) {
  std::string out;
  int depth = 0;  // character-class nesting
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[++i];
      if (n == 's') {
        out += "\\p{White_Space}";
      } else if (n == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (c == '[') {
      ++depth;
    } else if (c == ']' && depth > 0) {
      --depth;
    } else if (c == '.' && depth == 0) {
      out += "[^\\n]";
      continue;
    }
    out += c;
  }
  return out;
}

// The text as UTF-16 for ICU, with the byte offset of every code unit (and of the end).
struct Utf16Text {
  icu::UnicodeString u;
  std::vector<std::size_t> byteAt;
  explicit Utf16Text(std::string_view text) {
    byteAt.reserve(text.size() + 1);
    for (std::size_t i = 0; i < text.size();) {
      const Utf8Char c = decodeUtf8(text, i);
      const UChar32 cp = c.cp < 0 ? 0xFFFD : c.cp;
      u.append(cp);
      byteAt.push_back(i);
      if (cp >= 0x10000) byteAt.push_back(i);
      i += c.len;
    }
    byteAt.push_back(text.size());
  }
};

}  // namespace

struct Regex::Impl {
  std::unique_ptr<icu::RegexPattern> pattern;
};

Regex::Regex(std::string_view pattern, const std::string& what) : impl_(std::make_unique<Impl>()) {
  const std::string rewritten = rewritePattern(pattern);
  UErrorCode status = U_ZERO_ERROR;
  UParseError perr;
  impl_->pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(rewritten),
                                                  UREGEX_MULTILINE | UREGEX_UNIX_LINES, perr,
                                                  status));
  if (U_FAILURE(status) || !impl_->pattern) {
    throw InputError(what + ": regex does not compile (" + u_errorName(status) +
                     "): " + std::string(pattern));
  }
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> Regex::findAll(std::string_view text,
                                                                bool keepEmpty) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (text.empty()) return out;
  const Utf16Text t(text);
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(impl_->pattern->matcher(t.u, status));
  if (U_FAILURE(status)) throw InputError(std::string("regex matcher: ") + u_errorName(status));
  // A pathological pattern (catastrophic backtracking) stops with an error instead of hanging:
  // ICU counts the limit in match-engine steps of roughly a millisecond each.
  m->setTimeLimit(20000, status);
  while (m->find(status) && U_SUCCESS(status)) {
    const int32_t a = m->start(status), b = m->end(status);
    if (U_FAILURE(status)) break;
    if (b > a || keepEmpty) out.emplace_back(t.byteAt[a], t.byteAt[b]);
  }
  if (U_FAILURE(status)) {
    throw InputError(status == U_REGEX_TIME_OUT
                         ? std::string("a pre-tokenizer regex ran too long on this text")
                         : std::string("regex matching failed (") + u_errorName(status) + ")");
  }
  return out;
}

std::vector<std::pair<std::size_t, std::size_t>> findAllLiteral(std::string_view text,
                                                                std::string_view literal) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (literal.empty()) return out;
  for (std::size_t at = text.find(literal); at != std::string_view::npos;
       at = text.find(literal, at + literal.size())) {
    out.emplace_back(at, at + literal.size());
  }
  return out;
}

std::vector<std::pair<std::size_t, std::size_t>> splitAt(
    std::string_view text, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
    SplitBehavior behavior, bool invert) {
  using Range = std::pair<std::size_t, std::size_t>;
  // Every span of the text, flagged as a match or not.
  std::vector<std::pair<Range, bool>> spans;
  std::size_t prev = 0;
  for (const Range& m : matches) {
    if (m.first > prev) spans.push_back({{prev, m.first}, false});
    spans.push_back({m, true});
    prev = m.second;
  }
  if (prev < text.size()) spans.push_back({{prev, text.size()}, false});
  if (invert) {
    for (auto& s : spans) s.second = !s.second;
  }
  std::vector<Range> out;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const auto& [r, isMatch] : spans) {
        if (!isMatch) out.push_back(r);
      }
      break;
    case SplitBehavior::Isolated:
      for (const auto& s : spans) out.push_back(s.first);
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool previousMatch = false;
      for (const auto& [r, isMatch] : spans) {
        if (isMatch && !previousMatch && !out.empty()) {
          out.back().second = r.second;
        } else {
          out.push_back(r);
        }
        previousMatch = isMatch;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previousMatch = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        const auto& [r, isMatch] = *it;
        if (isMatch && !previousMatch && !out.empty()) {
          out.back().first = r.first;
        } else {
          out.push_back(r);
        }
        previousMatch = isMatch;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case SplitBehavior::Contiguous: {
      bool previousMatch = false;
      bool first = true;
      for (const auto& [r, isMatch] : spans) {
        if (!first && isMatch == previousMatch) {
          out.back().second = r.second;
        } else {
          out.push_back(r);
        }
        previousMatch = isMatch;
        first = false;
      }
      break;
    }
  }
  std::vector<Range> nonEmpty;
  for (const Range& r : out) {
    if (r.second > r.first) nonEmpty.push_back(r);
  }
  return nonEmpty;
}

// ---- BPE merging -------------------------------------------------------------------------------

void MergeTable::add(int left, int right, int rank, int merged) {
  map_[key(left, right)] = {rank, merged};
}

bool MergeTable::find(int left, int right, int& rank, int& merged) const {
  const auto it = map_.find(key(left, right));
  if (it == map_.end()) return false;
  rank = it->second.first;
  merged = it->second.second;
  return true;
}

void bpeMerge(std::vector<int>& sym, const MergeTable& merges) {
  const int n = static_cast<int>(sym.size());
  if (n < 2 || merges.size() == 0) return;
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int rank, left, leftId, rightId, merged;
  };
  auto later = [](const Cand& a, const Cand& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Cand, std::vector<Cand>, decltype(later)> queue(later);
  std::vector<char> alive(n, 1);
  auto consider = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    int rank = 0, merged = 0;
    if (merges.find(sym[left], sym[next[left]], rank, merged)) {
      queue.push({rank, left, sym[left], sym[next[left]], merged});
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    if (!alive[c.left] || sym[c.left] != c.leftId) continue;
    const int r = next[c.left];
    if (r < 0 || sym[r] != c.rightId) continue;
    sym[c.left] = c.merged;
    alive[r] = 0;
    next[c.left] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  std::vector<int> out;
  for (int i = 0; i != -1; i = next[i]) out.push_back(sym[i]);
  sym = std::move(out);
}

// ---- Normalization and case --------------------------------------------------------------------

namespace {

// Applies `f` (UnicodeString -> UnicodeString) to each run of valid UTF-8; invalid bytes stay.
template <class F>
std::string mapValidRuns(std::string_view text, F f) {
  std::string out;
  std::size_t runStart = 0, i = 0;
  auto flush = [&](std::size_t end) {
    if (end > runStart) {
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(
          icu::StringPiece(text.data() + runStart, static_cast<int32_t>(end - runStart)));
      f(u).toUTF8String(out);
    }
  };
  while (i < text.size()) {
    const Utf8Char c = decodeUtf8(text, i);
    if (c.cp < 0) {
      flush(i);
      out.push_back(text[i]);
      runStart = i + 1;
    }
    i += c.len;
  }
  flush(text.size());
  return out;
}

bool isAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

std::string normalizeUnicode(std::string_view text, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::NFC: n = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::NFD: n = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::NFKC: n = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::NFKD: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status) || !n) throw InputError("ICU normalizer unavailable");
  if (isAscii(text)) return std::string(text);
  return mapValidRuns(text, [&](const icu::UnicodeString& u) {
    UErrorCode st = U_ZERO_ERROR;
    icu::UnicodeString r = n->normalize(u, st);
    return U_SUCCESS(st) ? r : u;
  });
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decodeUtf8(text, i);
    if (c.cp < 0) {
      out.push_back(text[i]);
    } else if (c.cp < 0x80) {
      out.push_back(static_cast<char>(c.cp >= 'A' && c.cp <= 'Z' ? c.cp + 32 : c.cp));
    } else {
      icu::UnicodeString u(static_cast<UChar32>(c.cp));
      u.toLower(icu::Locale::getRoot());
      u.toUTF8String(out);
    }
    i += c.len;
  }
  return out;
}

std::string stripMarks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decodeUtf8(text, i);
    if (c.cp < 0 || !(U_GET_GC_MASK(c.cp) & U_GC_MN_MASK)) out.append(text.substr(i, c.len));
    i += c.len;
  }
  return out;
}

int generalCategoryMask(int cp) { return cp < 0 ? 0 : static_cast<int>(U_GET_GC_MASK(cp)); }

bool isWhiteSpace(int cp) { return cp >= 0 && u_hasBinaryProperty(cp, UCHAR_WHITE_SPACE); }

bool isAlphanumeric(int cp) {
  return cp >= 0 && (U_GET_GC_MASK(cp) & (U_GC_L_MASK | U_GC_N_MASK)) != 0;
}

// ---- BERT ----------------------------------------------------------------------------------------

namespace {

bool isChineseChar(int cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool bertWhitespace(int cp) { return cp == '\t' || cp == '\n' || cp == '\r' || isWhiteSpace(cp); }

bool bertControl(int cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return (generalCategoryMask(cp) &
          (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CS_MASK | U_GC_CO_MASK | U_GC_CN_MASK)) != 0;
}

}  // namespace

std::string bertNormalize(std::string_view text, const BertNormOptions& o) {
  std::string s;
  s.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decodeUtf8(text, i);
    if (c.cp < 0) {
      s.push_back(text[i]);  // an invalid byte stays (it cannot be a control character)
    } else if (o.cleanText && (c.cp == 0 || c.cp == 0xFFFD || bertControl(c.cp))) {
      // dropped
    } else if (o.cleanText && bertWhitespace(c.cp)) {
      s.push_back(' ');
    } else if (o.handleChineseChars && isChineseChar(c.cp)) {
      s.push_back(' ');
      s.append(text.substr(i, c.len));
      s.push_back(' ');
    } else {
      s.append(text.substr(i, c.len));
    }
    i += c.len;
  }
  if (o.stripAccents) s = stripMarks(normalizeUnicode(s, NormalForm::NFD));
  if (o.lowercase) s = lowercase(s);
  return s;
}

bool isBertPunctuation(int cp) {
  if (cp >= 0 && cp < 0x80) {
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  }
  return (generalCategoryMask(cp) & U_GC_P_MASK) != 0;
}

std::vector<std::pair<std::size_t, std::size_t>> bertPreTokenize(std::string_view text) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t wordStart = std::string_view::npos;
  auto endWord = [&](std::size_t at) {
    if (wordStart != std::string_view::npos && at > wordStart) out.emplace_back(wordStart, at);
    wordStart = std::string_view::npos;
  };
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decodeUtf8(text, i);
    if (c.cp >= 0 && (c.cp == '\t' || c.cp == '\n' || c.cp == '\r' || isWhiteSpace(c.cp))) {
      endWord(i);
    } else if (c.cp >= 0 && isBertPunctuation(c.cp)) {
      endWord(i);
      out.emplace_back(i, i + c.len);
    } else if (wordStart == std::string_view::npos) {
      wordStart = i;
    }
    i += c.len;
  }
  endWord(text.size());
  return out;
}

// ---- SentencePiece's precompiled character map ------------------------------------------------

bool decodeBase64(std::string_view text, std::string& out) {
  out.clear();
  std::uint32_t acc = 0;
  int bits = 0;
  for (char ch : text) {
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+') v = 62;
    else if (ch == '/') v = 63;
    else if (ch == '=' || ch == '\n' || ch == '\r' || ch == ' ') continue;
    else return false;
    acc = (acc << 6) | std::uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

PrecompiledCharsMap::PrecompiledCharsMap(std::string_view blob, const std::string& what) {
  auto u32At = [&](std::size_t at) {
    return std::uint32_t(static_cast<unsigned char>(blob[at])) |
           std::uint32_t(static_cast<unsigned char>(blob[at + 1])) << 8 |
           std::uint32_t(static_cast<unsigned char>(blob[at + 2])) << 16 |
           std::uint32_t(static_cast<unsigned char>(blob[at + 3])) << 24;
  };
  if (blob.empty()) return;
  if (blob.size() < 4) throw InputError(what + ": precompiled_charsmap is shorter than 4 bytes");
  const std::uint32_t trieBytes = u32At(0);
  if (trieBytes % 4 != 0 || trieBytes > blob.size() - 4 || trieBytes == 0) {
    throw InputError(what + ": precompiled_charsmap's trie size " + std::to_string(trieBytes) +
                     " does not fit its " + std::to_string(blob.size()) + " bytes");
  }
  units_.resize(trieBytes / 4);
  for (std::size_t i = 0; i < units_.size(); ++i) units_[i] = u32At(4 + 4 * i);
  normalized_.assign(blob.substr(4 + trieBytes));
}

std::optional<std::string_view> PrecompiledCharsMap::shortestPrefix(std::string_view key) const {
  // Darts-clone's unit layout: bit 8 "has leaf", bits 0-7 (and 31) the label, the offset in
  // bits 10-30 shifted left by 8 when bit 9 is set; a leaf's value is its low 31 bits.
  auto offset = [](std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  auto label = [](std::uint32_t u) { return u & ((1u << 31) | 0xFFu); };
  const std::size_t n = units_.size();
  if (n == 0) return std::nullopt;
  std::size_t pos = offset(units_[0]);
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0) break;
    pos ^= c;
    if (pos >= n) return std::nullopt;
    const std::uint32_t unit = units_[pos];
    if (label(unit) != c) return std::nullopt;
    pos ^= offset(unit);
    if (pos >= n) return std::nullopt;
    if ((unit >> 8) & 1u) {
      const std::size_t at = units_[pos] & ((1u << 31) - 1);
      if (at >= normalized_.size()) return std::string_view();  // past the strings: empty
      const std::size_t end = normalized_.find('\0', at);
      return std::string_view(normalized_).substr(
          at, (end == std::string::npos ? normalized_.size() : end) - at);
    }
  }
  return std::nullopt;
}

namespace {

// Extended grapheme cluster boundaries of UTF-8 text, as byte offsets (0 and the end included).
std::vector<std::size_t> graphemeBounds(std::string_view text) {
  std::vector<std::size_t> out{0};
  UErrorCode status = U_ZERO_ERROR;
  UText* ut = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
  std::unique_ptr<icu::BreakIterator> it(
      icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
  if (U_SUCCESS(status) && it) {
    it->setText(ut, status);
    if (U_SUCCESS(status)) {
      for (int32_t b = it->next(); b != icu::BreakIterator::DONE; b = it->next()) {
        out.push_back(static_cast<std::size_t>(b));
      }
    }
  }
  utext_close(ut);
  if (out.back() != text.size()) {  // no break iterator: one character a cluster
    out.assign({0});
    for (std::size_t i = 0; i < text.size();) out.push_back(i += decodeUtf8(text, i).len);
  }
  return out;
}

}  // namespace

std::string PrecompiledCharsMap::normalize(std::string_view text) const {
  if (units_.empty() || text.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  const std::vector<std::size_t> bounds = graphemeBounds(text);
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    const std::string_view g = text.substr(bounds[k], bounds[k + 1] - bounds[k]);
    if (g.size() < 6) {
      if (const auto r = shortestPrefix(g)) {
        out += *r;
        continue;
      }
    }
    for (std::size_t i = 0; i < g.size();) {
      const Utf8Char c = decodeUtf8(g, i);
      const std::string_view ch = g.substr(i, c.len);
      const auto r = c.cp >= 0 ? shortestPrefix(ch) : std::nullopt;
      out += r ? *r : ch;
      i += c.len;
    }
  }
  return out;
}

// ---- Literal token matcher ---------------------------------------------------------------------

void LiteralMatcher::add(const std::string& text, int value) {
  if (text.empty()) return;
  int node = 0;
  for (char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    auto it = nodes_[node].next.find(b);
    if (it == nodes_[node].next.end()) {
      nodes_.push_back(Node{});
      const int created = static_cast<int>(nodes_.size()) - 1;
      nodes_[node].next.emplace(b, created);
      node = created;
    } else {
      node = it->second;
    }
  }
  nodes_[node].terminal = true;
  nodes_[node].value = value;
}

std::size_t LiteralMatcher::longestAt(std::string_view text, std::size_t pos, int& value) const {
  std::size_t best = 0;
  int node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto it = nodes_[node].next.find(static_cast<unsigned char>(text[i]));
    if (it == nodes_[node].next.end()) break;
    node = it->second;
    if (nodes_[node].terminal) {
      best = i + 1 - pos;
      value = nodes_[node].value;
    }
  }
  return best;
}

}  // namespace attnviz::tok
