// libFuzzer target: the GPT-2 loaders and tokenizer. The first byte picks what the rest is:
//   0  text for encode() with a fixture's tokenizer: the pieces cover the text and decode(encode)
//      gives it back byte for byte (invalid UTF-8 included);
//   1  vocab.json, a NUL byte, then merges.txt, for Gpt2Tokenizer::fromText;
//   2  config.json for parseModelConfig.
// Anything may throw InputError; nothing else (no crash, no other exception, no sanitizer report).
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/gpt2_bpe.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        static const attnviz::Gpt2Tokenizer tok = attnviz::Gpt2Tokenizer::load(
            ATTNVIZ_FUZZ_MODEL_DIR "/vocab.json", ATTNVIZ_FUZZ_MODEL_DIR "/merges.txt");
        std::string joined;
        for (std::string_view p : attnviz::gpt2PreTokenize(rest)) {
          if (p.empty()) std::abort();
          joined += p;
        }
        if (joined != rest) std::abort();
        if (tok.decode(tok.encode(rest)) != rest) std::abort();
        break;
      }
      case 1: {
        const std::size_t nul = rest.find('\0');
        if (nul == std::string::npos) return 0;
        const auto tok = attnviz::Gpt2Tokenizer::fromText(rest.substr(0, nul), rest.substr(nul + 1),
                                                          "vocab.json", "merges.txt", 1000);
        const std::string text = "The cat's 42 \xE6\x97\xA5 \xFF!";
        if (tok.decode(tok.encode(text)) != text) std::abort();
        break;
      }
      default: {
        const attnviz::ModelConfig c = attnviz::parseModelConfig(rest, "config.json");
        if (c.nEmbd % c.nHead != 0 || c.headDim() < 1 || c.nInner < 1) std::abort();
        break;
      }
    }
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
