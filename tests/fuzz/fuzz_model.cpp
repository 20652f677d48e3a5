// libFuzzer target: attnviz::Model::open on a GGUF file of arbitrary bytes, the whole loader: the
// GGUF reader, the model config from its metadata (every architecture's row of the family table),
// the GGUF tokenizer, the tensor table's names, shapes and types, and the memory budget's choice
// (a small budget on odd first bytes, so the kept-as-stored path runs too). A model that opens
// runs a three-token pass and one decode step (an encoder-decoder: a three-token source and the
// start id). Either it works or it throws InputError; nothing
// else. Seeds: tests/fuzz/make_model_seeds.py.
#include "attnviz/model/model.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  static const std::string path = "/tmp/attnviz_fuzz_model_" + std::to_string(::getpid()) + ".gguf";
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    const std::int64_t budget = data[size - 1] % 2 ? 256 : -1;
    const auto m = attnviz::Model::open(path, {}, budget);
    const attnviz::ModelConfig& c = m->config();
    if (c.nLayer < 1 || c.nHead < 1 || c.nKvHead < 1 || c.vocabSize < 1) std::abort();
    // Passes only on small models (a fuzzed header may claim a huge but valid one).
    if (std::int64_t(c.nEmbd) * c.nInner * c.nLayer > (1 << 22) || c.vocabSize > 4096) return 0;
    std::vector<int> ids;
    for (int t = 0; t < 3 && t < c.nPositions; ++t) ids.push_back(t % c.vocabSize);
    if (c.encoderDecoder()) {  // the source through the encoder, the start id through the decoder
      const attnviz::ForwardResult r = m->forwardSeq2Seq(ids, {c.decoderStartId.value_or(0)});
      if (r.logits.cols() != c.vocabSize) std::abort();
      return 0;
    }
    const attnviz::ForwardResult r = m->forward(ids);
    if (r.logits.cols() != c.vocabSize) std::abort();
    attnviz::KvCache cache = m->cacheFrom(r);
    if (int(ids.size()) < c.nPositions) (void)m->decodeStep(cache, 0);
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
