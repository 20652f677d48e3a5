// ModelConfig from GGUF metadata (llama.cpp's key names).
#include "attnviz/formats/gguf.h"
#include "attnviz/model/model.h"

#include <cmath>
#include <map>

namespace attnviz {

namespace {

int metaInt(const GgufFile& f, const std::string& key, std::optional<int> fallback = {}) {
  const auto v = f.getInt(key);
  if (!v) {
    if (fallback) return *fallback;
    throw InputError(f.path() + ": missing metadata key " + key);
  }
  if (*v < 1 || *v > (1 << 24)) {
    throw InputError(f.path() + ": " + key + " = " + std::to_string(*v) +
                     " is outside 1..16777216");
  }
  return int(*v);
}

}  // namespace

ModelConfig ggufModelConfig(const GgufFile& f) {
  const auto archOpt = f.getString("general.architecture");
  if (!archOpt) throw InputError(f.path() + ": missing metadata key general.architecture");
  const std::string arch = *archOpt;
  if (arch != "llama" && arch != "qwen2" && arch != "gpt2") {
    throw InputError(f.path() + ": general.architecture \"" + arch +
                     "\" is not supported (llama, qwen2, gpt2)");
  }
  if (f.tensors().empty()) {
    throw InputError(f.path() + ": a vocab-only GGUF (no tensors): it serves attnviz tokenize, "
                     "not the model pass");
  }
  const std::string p = arch + ".";
  ModelConfig c;
  c.family = arch;
  c.nLayer = metaInt(f, p + "block_count");
  c.nEmbd = metaInt(f, p + "embedding_length");
  c.nInner = metaInt(f, p + "feed_forward_length");
  c.nHead = metaInt(f, p + "attention.head_count");
  c.nKvHead = metaInt(f, p + "attention.head_count_kv", c.nHead);
  c.nPositions = metaInt(f, p + "context_length");
  if (c.nHead % c.nKvHead != 0) {
    throw InputError(f.path() + ": " + p + "attention.head_count " + std::to_string(c.nHead) +
                     " is not divisible by " + p + "attention.head_count_kv " +
                     std::to_string(c.nKvHead));
  }
  if (f.getInt(p + "attention.key_length")) {
    c.headSize = metaInt(f, p + "attention.key_length");
  } else {
    if (c.nEmbd % c.nHead != 0) {
      throw InputError(f.path() + ": " + p + "embedding_length is not divisible by the heads");
    }
    c.headSize = c.nEmbd / c.nHead;
  }
  const GgufTensor* embd = f.findTensor("token_embd.weight");
  if (!embd) throw InputError(f.path() + ": missing tensor 'token_embd.weight'");
  if (embd->ne.size() != 2 || embd->ne[0] != c.nEmbd) {
    throw InputError(f.path() + ": tensor 'token_embd.weight' does not have " +
                     std::to_string(c.nEmbd) + " columns (" + p + "embedding_length)");
  }
  c.vocabSize = int(embd->ne[1]);
  if (const auto vs = f.getInt(p + "vocab_size"); vs && *vs != c.vocabSize) {
    throw InputError(f.path() + ": " + p + "vocab_size " + std::to_string(*vs) +
                     " disagrees with token_embd.weight's " + std::to_string(c.vocabSize) +
                     " rows");
  }
  if (const auto toks = f.getStringArray("tokenizer.ggml.tokens");
      toks && int(toks->size()) > c.vocabSize) {
    throw InputError(f.path() + ": the vocabulary has " + std::to_string(toks->size()) +
                     " tokens, more than token_embd.weight's " + std::to_string(c.vocabSize) +
                     " rows");
  }
  c.tiedHead = f.findTensor("output.weight") == nullptr;
  if (arch == "gpt2") {
    c.norm = NormKind::LayerNorm;
    c.layerNormEps = float(f.getFloat(p + "attention.layer_norm_epsilon").value_or(1e-5));
    c.positions = PositionKind::Learned;
    c.qkvBias = c.outBias = c.mlpBias = true;
    c.mlp = MlpKind::Plain;
    c.activation = Activation::GeluTanh;
    c.activationName = "gelu_new";
  } else {
    c.norm = NormKind::RMSNorm;
    c.layerNormEps = float(f.getFloat(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
    c.positions = PositionKind::Rope;
    c.ropeStyle = arch == "llama" ? RopeStyle::Interleaved : RopeStyle::HalfSplit;
    c.ropeTheta = float(f.getFloat(p + "rope.freq_base").value_or(10000.0));
    c.ropeDim = metaInt(f, p + "rope.dimension_count", c.headSize);
    if (c.ropeDim > c.headSize || c.ropeDim % 2 != 0) {
      throw InputError(f.path() + ": " + p + "rope.dimension_count " + std::to_string(c.ropeDim) +
                       " does not fit the head size " + std::to_string(c.headSize));
    }
    if (const auto st = f.getString(p + "rope.scaling.type"); st && *st == "linear") {
      c.ropeScaling.kind = RopeScaling::Kind::Linear;
      c.ropeScaling.factor = float(f.getFloat(p + "rope.scaling.factor").value_or(1.0));
      if (!(c.ropeScaling.factor > 0)) {
        throw InputError(f.path() + ": " + p + "rope.scaling.factor must be > 0");
      }
    } else if (st && *st != "none") {
      throw InputError(f.path() + ": " + p + "rope.scaling.type \"" + *st +
                       "\" is not supported (none, linear)");
    }
    // Llama 3.1's scaling, as llama.cpp stores it: one divisor per rotated pair.
    if (const GgufTensor* rf = f.findTensor("rope_freqs.weight")) {
      if (rf->type != std::uint32_t(GgmlType::F32) || rf->count() != c.ropeDim / 2) {
        throw InputError(f.path() + ": tensor 'rope_freqs.weight' must be F32 with " +
                         std::to_string(c.ropeDim / 2) + " values");
      }
      c.ropeFreqFactors = f.dequantize(*rf);
      for (float x : c.ropeFreqFactors) {
        if (!(x > 0) || !std::isfinite(x)) {
          throw InputError(f.path() + ": tensor 'rope_freqs.weight' holds a factor that is not "
                           "a finite number > 0");
        }
      }
    }
    c.qkvBias = f.findTensor("blk.0.attn_q.bias") != nullptr;
    c.outBias = f.findTensor("blk.0.attn_output.bias") != nullptr;
    c.mlp = MlpKind::Gated;
    c.activation = Activation::Silu;
    c.activationName = "silu";
    if (const auto w = f.getInt(p + "attention.sliding_window")) c.slidingWindow = int(*w);
  }
  if (const auto b = f.getInt("tokenizer.ggml.bos_token_id")) c.bosId = int(*b);
  if (const auto e = f.getInt("tokenizer.ggml.eos_token_id")) c.eosId = int(*e);
  return c;
}

std::string ggufFileTypeName(const GgufFile& f) {
  // llama.cpp's general.file_type values.
  static const std::map<int, std::string> names = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
      {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
      {18, "Q6_K"},   {32, "BF16"}};
  if (const auto ft = f.getInt("general.file_type")) {
    auto it = names.find(int(*ft));
    if (it != names.end()) return it->second;
  }
  // Else the most common type among the matrices.
  std::map<std::string, int> counts;
  for (const GgufTensor& t : f.tensors()) {
    if (t.ne.size() == 2) ++counts[ggmlTypeName(t.type)];
  }
  std::string best = "F32";
  int n = -1;
  for (const auto& [name, c] : counts) {
    if (c > n) best = name, n = c;
  }
  return best;
}

}  // namespace attnviz
