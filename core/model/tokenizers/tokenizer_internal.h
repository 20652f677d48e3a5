// attnviz model: pieces the tokenizer kinds share (private to core/model/tokenizers).
//   - UTF-8 walking that keeps invalid bytes (each a one-byte "character" of its own);
//   - GPT-2's byte alphabet (the printable spelling of bytes in byte-level vocabularies);
//   - regexes in Hugging Face's dialect (Oniguruma, Ruby syntax) compiled by ICU;
//   - split behaviours (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous);
//   - rank-ordered BPE merging over ids;
//   - Unicode normalization and case mapping (ICU), leaving invalid bytes as they are;
//   - a leftmost-longest literal matcher for added and special tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace attnviz::tok {

// ---- SentencePiece -----------------------------------------------------------------------------

// Loads a serialized SentencePiece model into `sp` (tokenizer.model, spiece.model, Marian's
// source.spm / target.spm): InputError "<name>: not a SentencePiece model (...)" when it does not
// parse, "not a usable SentencePiece model (...)" when libsentencepiece throws from inside (an
// empty piece), "has no pieces" when it has none. Defined in sentencepiece.cpp.
void loadSentencePieceModel(sentencepiece::SentencePieceProcessor& sp, const std::string& bytes,
                            const std::string& name);

// ---- UTF-8 ------------------------------------------------------------------------------------

// One character: its code point (-1 for a byte that does not start valid UTF-8) and its length.
struct Utf8Char {
  int cp = -1;
  int len = 1;
};
Utf8Char decodeUtf8(std::string_view s, std::size_t i);
void appendUtf8(std::string& out, int cp);
std::string utf8Of(int cp);
// "'é' (U+00E9)" for a character, "byte \xFF" for an invalid byte: how errors name a character.
std::string describeChar(std::string_view s, std::size_t i);
// The character of `s` that contains byte offset `at` (for naming it in errors).
std::size_t charStartContaining(std::string_view s, std::size_t at);

// ---- GPT-2's byte alphabet ---------------------------------------------------------------------

// The UTF-8 spelling of byte b ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF as themselves, the
// rest as U+0100 + n in byte order).
const std::string& byteToAlphabet(unsigned char b);
std::string bytesToAlphabet(std::string_view bytes);
// A token spelt in the alphabet -> raw bytes; false when a character is not in the alphabet (or
// the token is empty).
bool alphabetToBytes(std::string_view s, std::string& out);

// ---- Regexes -----------------------------------------------------------------------------------

// A pattern in Hugging Face's dialect (tokenizer.json's {"Regex": ...}; Oniguruma with Ruby
// syntax), compiled by ICU with these rewrites so that ICU matches what Oniguruma matches:
//   \s, \S  -> \p{White_Space}, \P{White_Space} (Oniguruma's \s; spelt out so that it does
//              not depend on the ICU version: older documentation gives [\t\n\f\r\p{Z}])
//   .       -> [^\n]                             (Oniguruma's dot excludes only \n)
//   ^, $    line anchors at \n only              (UREGEX_MULTILINE | UREGEX_UNIX_LINES)
class Regex {
 public:
  // Throws InputError "<what>: regex does not compile (<ICU error>): <pattern>".
  Regex(std::string_view pattern, const std::string& what);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  // The non-empty matches in `text`, left to right, as byte ranges (`keepEmpty`: the empty ones
  // too, as (p, p)). Bytes that are not valid UTF-8 are matched as U+FFFD but keep their place.
  std::vector<std::pair<std::size_t, std::size_t>> findAll(std::string_view text,
                                                           bool keepEmpty = false) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A literal pattern's matches (tokenizer.json's {"String": ...}).
std::vector<std::pair<std::size_t, std::size_t>> findAllLiteral(std::string_view text,
                                                                std::string_view literal);

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
// Hugging Face's split of `text` at `matches` (sorted, non-overlapping): the non-empty pieces as
// byte ranges. `invert` swaps what counts as a match.
std::vector<std::pair<std::size_t, std::size_t>> splitAt(
    std::string_view text, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
    SplitBehavior behavior, bool invert);

// ---- BPE merging -------------------------------------------------------------------------------

// (left id, right id) -> (rank, merged id); lower ranks merge first.
class MergeTable {
 public:
  void add(int left, int right, int rank, int merged);
  bool find(int left, int right, int& rank, int& merged) const;
  std::size_t size() const { return map_.size(); }

 private:
  static std::uint64_t key(int a, int b) {
    return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
  }
  std::unordered_map<std::uint64_t, std::pair<int, int>> map_;
};

// Merges `symbols` in place: repeatedly the adjacent pair with the lowest rank (the leftmost on
// a tie), as Hugging Face's BPE and GPT-2 do.
void bpeMerge(std::vector<int>& symbols, const MergeTable& merges);

// ---- Normalization and case --------------------------------------------------------------------

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalizeUnicode(std::string_view text, NormalForm form);
// Each character's full lowercase mapping, with no context (as Rust's char::to_lowercase).
std::string lowercase(std::string_view text);
// Drops nonspacing marks (general category Mn).
std::string stripMarks(std::string_view text);
int generalCategoryMask(int cp);   // U_GC_*_MASK of a code point (0 for -1)
bool isWhiteSpace(int cp);         // Unicode White_Space
bool isAlphanumeric(int cp);       // letters and numbers (L*, N*)

// ---- SentencePiece's precompiled character map ------------------------------------------------

// A SentencePiece normalizer's precompiled_charsmap (NormalizerSpec's field in a .model file;
// base64 in tokenizer.json's Precompiled normalizer): a little-endian u32 byte size of a Darts
// double-array trie, the trie's u32 units, then NUL-terminated replacement strings that the
// trie's values index. Throws InputError "<what>: ..." when the blob is malformed (every read
// of the trie is bounds-checked, so a crafted map cannot read outside it).
class PrecompiledCharsMap {
 public:
  PrecompiledCharsMap(std::string_view blob, const std::string& what);
  // Hugging Face's Precompiled normalizer (the tokenizers library, which matches
  // SentencePiece's output on its test sets): the text cut into extended grapheme clusters; a
  // cluster shorter than 6 bytes that the trie knows (its shortest known prefix) is replaced
  // whole, else each character is replaced by its own entry or kept. Invalid bytes are kept.
  std::string normalize(std::string_view text) const;
  bool empty() const { return units_.empty(); }

 private:
  // The replacement of the shortest prefix of `key` in the trie, if any.
  std::optional<std::string_view> shortestPrefix(std::string_view key) const;
  std::vector<std::uint32_t> units_;
  std::string normalized_;
};

// Standard base64 (RFC 4648, '=' padding optional, whitespace skipped); false on another byte.
bool decodeBase64(std::string_view text, std::string& out);

// ---- BERT ----------------------------------------------------------------------------------------

// Hugging Face's BertNormalizer: clean_text drops NUL, U+FFFD and other-category characters (Cc,
// Cf, Cs, Co, Cn; tab, CR and LF are whitespace) and turns whitespace into ' ';
// handle_chinese_chars puts spaces around CJK ideographs; strip_accents is NFD then no Mn;
// lowercase is each character's full lowercase.
struct BertNormOptions {
  bool cleanText = true, handleChineseChars = true, stripAccents = true, lowercase = true;
};
std::string bertNormalize(std::string_view text, const BertNormOptions& o);
bool isBertPunctuation(int cp);  // ASCII punctuation or Unicode P*
// BertPreTokenizer: whitespace removed, each punctuation character its own piece.
std::vector<std::pair<std::size_t, std::size_t>> bertPreTokenize(std::string_view text);

// WordPiece on one word: greedy longest match from the left, `lookup(piece, continuation)`
// giving an id or -1. False when a part has no token or the word has more than `maxChars`
// characters (the caller then emits the unknown token for the whole word).
template <class Lookup>
bool wordPiece(std::string_view word, int maxChars, Lookup lookup, std::vector<int>& out) {
  std::vector<std::size_t> bounds;  // character starts, plus the end
  for (std::size_t i = 0; i < word.size(); i += decodeUtf8(word, i).len) bounds.push_back(i);
  if (static_cast<int>(bounds.size()) > maxChars) return false;
  bounds.push_back(word.size());
  std::vector<int> parts;
  std::size_t s = 0;
  while (s + 1 < bounds.size()) {
    int found = -1;
    std::size_t e = bounds.size() - 1;
    for (; e > s; --e) {
      found = lookup(word.substr(bounds[s], bounds[e] - bounds[s]), s > 0);
      if (found >= 0) break;
    }
    if (found < 0) return false;
    parts.push_back(found);
    s = e;
  }
  out.insert(out.end(), parts.begin(), parts.end());
  return true;
}

// ---- Literal token matcher ---------------------------------------------------------------------

// Finds, scanning left to right, the longest token that starts at each position (leftmost-
// longest, as Hugging Face's added-token splitter).
class LiteralMatcher {
 public:
  void add(const std::string& text, int value);
  bool empty() const { return nodes_.size() <= 1; }
  // The longest token starting at `pos`: its length and value; 0 when none.
  std::size_t longestAt(std::string_view text, std::size_t pos, int& value) const;
  // Every token starting at `pos`, shortest first: f(length, value).
  template <class F>
  void eachAt(std::string_view text, std::size_t pos, F&& f) const {
    int node = 0;
    for (std::size_t i = pos; i < text.size(); ++i) {
      const auto it = nodes_[node].next.find(static_cast<unsigned char>(text[i]));
      if (it == nodes_[node].next.end()) return;
      node = it->second;
      if (nodes_[node].terminal) f(i + 1 - pos, nodes_[node].value);
    }
  }

 private:
  struct Node {
    std::unordered_map<unsigned char, int> next;
    int value = -1;
    bool terminal = false;
  };
  std::vector<Node> nodes_{Node{}};
};

// Cuts `text` at the matcher's tokens (leftmost-longest; none when `on` is false): each token's
// id goes to `ids`, and each stretch between them to `encodePart(begin, end)`, in order.
template <class EncodePart>
void splitAtLiterals(std::string_view text, const LiteralMatcher& m, bool on, std::vector<int>& ids,
                     EncodePart&& encodePart) {
  std::size_t from = 0, pos = 0;
  while (pos < text.size()) {
    int id = -1;
    const std::size_t len = m.empty() || !on ? 0 : m.longestAt(text, pos, id);
    if (len == 0) {
      ++pos;
      continue;
    }
    encodePart(from, pos);
    ids.push_back(id);
    from = pos = pos + len;
  }
  encodePart(from, text.size());
}

}  // namespace attnviz::tok
