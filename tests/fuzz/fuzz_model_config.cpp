// libFuzzer target: a model folder's JSON files on arbitrary bytes. The first byte chooses the
// parser: even, config.json (parseModelConfig: every family's row of the table); odd,
// model.safetensors.index.json (parseShardIndex). Either it parses into something consistent or
// it throws InputError; nothing else.
#include "attnviz/model/model.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      const attnviz::ModelConfig c = attnviz::parseModelConfig(text, "config.json");
      if (c.nLayer < 1 || c.nHead < 1 || c.nKvHead < 1 || c.nHead % c.nKvHead != 0 ||
          c.headSize < 1 || c.vocabSize < 1 || c.nPositions < 1)
        std::abort();
      if (c.positions == attnviz::PositionKind::Rope) {
        if (c.ropeDim < 2 || c.ropeDim % 2 != 0) std::abort();
        for (double f : c.ropeInvFreq())
          if (!(f > 0) || f != f) std::abort();
      }
      (void)c.describe();
    } else {
      for (const std::string& f : attnviz::parseShardIndex(text, "index.json"))
        if (f.empty() || f.find('/') != std::string::npos) std::abort();
    }
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
