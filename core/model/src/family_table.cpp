// The family table: one row per family. A row says how config.json's keys (and GGUF metadata)
// set the block description of ModelConfig, and which stored tensor fills each slot of the layer
// skeleton, by its Hugging Face name and llama.cpp's. Adding a family is adding a row here (and a
// tokenizer if it brings a new one); the pass reads only slots and the block description.
#include "family_rows.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <deque>

namespace attnviz {

// ---- What the rows share

namespace family_rows {

bool qkvBias(const ModelConfig& c) { return c.qkvBias; }
bool outBias(const ModelConfig& c) { return c.outBias; }
bool mlpBias(const ModelConfig& c) { return c.mlpBias; }
bool normBias(const ModelConfig& c) { return c.normBias; }
bool headDenseBias(const ModelConfig& c) { return c.headDenseBias; }
bool untied(const ModelConfig& c) { return !c.tiedHead; }
bool plainMlp(const ModelConfig& c) { return c.mlp == MlpKind::Plain; }
bool gatedMlp(const ModelConfig& c) { return c.mlp == MlpKind::Gated; }

std::vector<TensorRow> join(std::initializer_list<std::vector<TensorRow>> parts) {
  std::vector<TensorRow> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The block every encoder row shares, once its sizes are read.
void encoderBlock(const std::string& path, ModelConfig& c) {
  c.nKvHead = c.nHead;
  if (c.nEmbd % c.nHead != 0) {
    throw InputError(path + ": hidden size " + std::to_string(c.nEmbd) +
                     " is not divisible by the " + std::to_string(c.nHead) + " attention heads");
  }
  c.headSize = c.nEmbd / c.nHead;
  c.norm = NormKind::LayerNorm;
  c.normPlacement = NormPlacement::Post;
  c.causal = false;
  c.positions = PositionKind::Learned;
  c.mlp = MlpKind::Plain;
  c.qkvBias = c.outBias = c.mlpBias = true;
  parseActivation(c, path);
  c.headActivation = c.activation;
}

}  // namespace family_rows

namespace {

const std::vector<FamilyRow>& table() {
  static const std::vector<FamilyRow> rows = [] {
    std::vector<FamilyRow> all;
    for (auto part : {family_rows::decoders(), family_rows::encoders(), family_rows::seq2seq()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return rows;
}

}  // namespace

const FamilyRow* familyByName(const std::string& modelType) {
  for (const FamilyRow& r : table())
    if (modelType == r.name) return &r;
  return nullptr;
}

const FamilyRow* familyByGgufArch(const std::string& arch) {
  for (const FamilyRow& r : table())
    if (r.ggufArch && arch == r.ggufArch) return &r;
  return nullptr;
}

std::string familyNames(bool gguf) {
  std::string s;
  for (const FamilyRow& r : table()) {
    const char* n = gguf ? r.ggufArch : r.name;
    if (n) s += (s.empty() ? "" : ", ") + std::string(n);
  }
  return s;
}

std::vector<std::int64_t> resolveShape(const std::array<Dim, 2>& shape, const ModelConfig& c) {
  auto dim = [&](Dim x) -> std::int64_t {
    const std::int64_t dh = c.headSize;
    switch (x) {
      case Dim::One: return 1;
      case Dim::D: return c.nEmbd;
      case Dim::V: return c.vocabSize;
      case Dim::I: return c.nInner;
      case Dim::I2: return 2 * std::int64_t(c.nInner);
      case Dim::Dq: return c.nHead * dh;
      case Dim::Dkv: return c.nKvHead * dh;
      case Dim::Dqkv: return (c.nHead + 2 * std::int64_t(c.nKvHead)) * dh;
      case Dim::Dh: return dh;
      case Dim::Positions: return std::int64_t(c.nPositions) + c.positionOffset;
      case Dim::TypeVocab: return c.typeVocabSize;
      case Dim::Buckets: return c.relBuckets;
      case Dim::H: return c.nHead;
    }
    return 0;
  };
  if (shape[1] == Dim::One) return {dim(shape[0])};
  return {dim(shape[0]), dim(shape[1])};
}

}  // namespace attnviz
