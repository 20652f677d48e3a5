// libFuzzer target: a tokenizer.json parsed from bytes, then a short text encoded with it (alone
// and as both halves of a pair); the same bytes are also read as a WordPiece vocab.txt.
// Input: the tokenizer.json text, then (optionally) a NUL byte and the text to encode (at most
// 256 bytes are used; without a NUL, a fixed text with Unicode, digits, spaces and special-token
// spellings). The parse either throws InputError or gives a tokenizer whose ids are all in its
// vocabulary, each with a piece, and whose decode() works; encoding may throw InputError (a
// character the vocabulary cannot express, a regex that runs too long). Nothing else: no crash,
// no other exception, no sanitizer report.
#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"
#include "attnviz/model/tokenizers/wordpiece.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

namespace {

void checkIds(const attnviz::Tokenizer& tok, const std::vector<int>& ids) {
  for (int id : ids) {
    if (!tok.contains(id)) std::abort();
    (void)tok.pieceBytes(id);
    (void)tok.label(id);
  }
  (void)tok.decode(ids);
}

void exercise(const std::function<std::unique_ptr<attnviz::Tokenizer>()>& load,
              const std::string& text) {
  std::unique_ptr<attnviz::Tokenizer> tok;
  try {
    tok = load();
  } catch (const attnviz::InputError&) {
    return;
  }
  for (bool special : {false, true}) {
    try {
      checkIds(*tok, tok->encode(text, special));
    } catch (const attnviz::InputError&) {
    }
    try {
      const attnviz::PairEncoding p = tok->encodePair(text, text, special);
      if (p.typeIds.size() != p.ids.size()) std::abort();
      checkIds(*tok, p.ids);
    } catch (const attnviz::InputError&) {
    }
  }
  if (const auto m = tok->mask(); m && !tok->contains(*m)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = bytes.find('\0');
  const std::string json = bytes.substr(0, nul);
  const std::string text =
      nul == std::string::npos
          ? std::string("Hello  world\n<s>caf\xC3\xA9 123 \xF0\x9F\x98\x80 <|endoftext|>\xFF "
                        "[MASK]")
          : bytes.substr(nul + 1, 256);
  exercise([&] { return attnviz::tokenizerFromJson(json, "", "tokenizer.json"); }, text);
  exercise([&] { return attnviz::vocabTxtTokenizer(json, "", "vocab.txt"); }, text);
  return 0;
}
