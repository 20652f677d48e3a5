#include "attnviz/model/tokenizers/tokenizer.h"

#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"

#include <cstdio>

namespace attnviz {

namespace {

std::string hexByte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

// Copies valid UTF-8 through and rewrites control characters and invalid bytes with
// `escape(byte)`.
template <class Escape>
std::string escapeBytes(std::string_view s, Escape escape) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const tok::Utf8Char c = tok::decodeUtf8(s, i);
    if (c.cp >= 0x20 && c.cp != 0x7F) {
      out.append(s.substr(i, c.len));
    } else {
      out += escape(static_cast<unsigned char>(s[i]));
    }
    i += c.len;
  }
  return out;
}

}  // namespace

std::string tokenPrintableOf(const std::string& bytes) {
  return escapeBytes(bytes, [](unsigned char b) -> std::string {
    if (b == '\n') return "\\n";
    if (b == '\r') return "\\r";
    if (b == '\t') return "\\t";
    return hexByte(b);
  });
}

std::string tokenLabelOf(const std::string& piece) {
  std::string_view bytes = piece;
  std::string out;
  if (!bytes.empty() && bytes.front() == ' ') {
    out = "\u2423";
    bytes.remove_prefix(1);
  }
  return out + escapeBytes(bytes, [](unsigned char b) -> std::string {
           if (b == '\n') return "\u21B5";
           if (b == '\t') return "\u2192";
           return hexByte(b);
         });
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  for (int id : ids) text += pieceBytes(id);
  return text;
}

PairEncoding Tokenizer::encodePair(std::string_view, std::string_view, bool) const {
  throw InputError(kind() + ": this tokenizer has no pair template");
}

// An id the vocabulary lacks (a model's embedding may have more rows than its tokenizer has
// tokens) is shown as "#id": a label never throws, so no view is left half-built.
std::string Tokenizer::label(int id) const {
  if (!contains(id)) return "#" + std::to_string(id);
  try {
    return tokenLabelOf(pieceBytes(id));
  } catch (const std::exception&) {
    return "#" + std::to_string(id);
  }
}

std::string Tokenizer::printable(int id) const {
  if (!contains(id)) return "#" + std::to_string(id);
  try {
    return tokenPrintableOf(pieceBytes(id));
  } catch (const std::exception&) {
    return "#" + std::to_string(id);
  }
}

}  // namespace attnviz
