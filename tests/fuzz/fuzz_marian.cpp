// libFuzzer target: Marian's tokenizer from bytes. Input: vocab.json's text, then (optionally) a
// NUL byte and the text to encode (at most 256 bytes; without a NUL, a fixed text with Unicode,
// language codes and special-token spellings). The two SentencePiece models are the seed
// folder's (made by make_marian_seeds.py: libsentencepiece parses those, not attnviz). The load
// either throws InputError or gives a tokenizer whose encoded ids, on both sides, are in its
// vocabulary with a piece each, and whose decode() works. Nothing else: no crash, no other
// exception, no sanitizer report.
#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/model/tokenizers/marian.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

const attnviz::MarianFiles& seedFiles() {
  static const attnviz::MarianFiles f = [] {
    attnviz::MarianFiles m;
    const std::string dir = ATTNVIZ_FUZZ_MARIAN_DIR;
    m.source = attnviz::readFile(dir + "/source.spm");
    m.target = attnviz::readFile(dir + "/target.spm");
    m.sourceName = dir + "/source.spm", m.targetName = dir + "/target.spm";
    m.vocabName = "vocab.json";
    return m;
  }();
  return f;
}

void check(const attnviz::Tokenizer& tok, const std::vector<int>& ids) {
  for (int id : ids) {
    if (!tok.contains(id)) std::abort();
    (void)tok.pieceBytes(id);
    (void)tok.label(id);
  }
  (void)tok.decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = bytes.find('\0');
  attnviz::MarianFiles files = seedFiles();
  files.vocab = bytes.substr(0, nul);
  const std::string text = nul == std::string::npos
                               ? std::string(">>fr<< the cat </s> <unk> \xC3\xA9t\xC3\xA9 42 ")
                               : bytes.substr(nul + 1, 256);
  std::unique_ptr<attnviz::Tokenizer> tok;
  try {
    tok = attnviz::marianFromBytes(files, 1 << 16);
  } catch (const attnviz::InputError&) {
    return 0;
  }
  for (bool special : {false, true}) {
    tok->setParseSpecial(special);
    try {
      check(*tok, tok->encode(text, special));
      check(*tok, tok->encodeTarget(text, special));
    } catch (const attnviz::InputError&) {
    }
  }
  return 0;
}
