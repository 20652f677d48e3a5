// libFuzzer target: a tokenizer.json parsed from bytes, then a short text encoded with it.
// Input: the tokenizer.json text, then (optionally) a NUL byte and the text to encode (at most
// 256 bytes are used; without a NUL, a fixed text with Unicode, digits, spaces and special-token
// spellings). The parse either throws InputError or gives a tokenizer whose ids are all in its
// vocabulary, each with a piece, and whose decode() works; encoding may throw InputError (a
// character the vocabulary cannot express, a regex that runs too long). Nothing else: no crash,
// no other exception, no sanitizer report.
#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = bytes.find('\0');
  const std::string json = bytes.substr(0, nul);
  const std::string text =
      nul == std::string::npos
          ? std::string("Hello  world\n<s>caf\xC3\xA9 123 \xF0\x9F\x98\x80 <|endoftext|>\xFF")
          : bytes.substr(nul + 1, 256);
  std::unique_ptr<attnviz::Tokenizer> tok;
  try {
    tok = attnviz::tokenizerFromJson(json, "", "tokenizer.json");
  } catch (const attnviz::InputError&) {
    return 0;
  }
  for (bool special : {false, true}) {
    try {
      const std::vector<int> ids = tok->encode(text, special);
      for (int id : ids) {
        if (!tok->contains(id)) std::abort();
        (void)tok->pieceBytes(id);
        (void)tok->label(id);
      }
      (void)tok->decode(ids);
    } catch (const attnviz::InputError&) {
    }
  }
  return 0;
}
