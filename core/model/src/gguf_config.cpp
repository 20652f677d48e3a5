// ModelConfig from GGUF metadata (llama.cpp's key names).
#include "attnviz/formats/gguf.h"

#include "attnviz/engine/ggml_kernels.h"
#include "model_internal.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace attnviz {

int ggufInt(const GgufFile& f, const std::string& key, std::optional<int> fallback) {
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

ModelConfig ggufModelConfig(const GgufFile& f) {
  const auto archOpt = f.getString("general.architecture");
  if (!archOpt) throw InputError(f.path() + ": missing metadata key general.architecture");
  const std::string arch = *archOpt;
  const FamilyRow* row = familyByGgufArch(arch);
  if (!row) {
    throw InputError(f.path() + ": general.architecture \"" + arch + "\" is not supported (" +
                     familyNames(true) + ")");
  }
  if (f.tensors().empty()) {
    throw InputError(f.path() + ": a vocab-only GGUF (no tensors): it serves attnviz tokenize, "
                     "not the model pass");
  }
  const std::string p = arch + ".";
  ModelConfig c;
  c.family = row->name;
  c.nLayer = ggufInt(f, p + "block_count");
  c.nEmbd = ggufInt(f, p + "embedding_length");
  c.nInner = ggufInt(f, p + "feed_forward_length");
  c.nHead = ggufInt(f, p + "attention.head_count");
  c.nKvHead = ggufInt(f, p + "attention.head_count_kv", c.nHead);
  c.nPositions = ggufInt(f, p + "context_length");
  if (c.nHead % c.nKvHead != 0) {
    throw InputError(f.path() + ": " + p + "attention.head_count " + std::to_string(c.nHead) +
                     " is not divisible by " + p + "attention.head_count_kv " +
                     std::to_string(c.nKvHead));
  }
  if (f.getInt(p + "attention.key_length")) {
    c.headSize = ggufInt(f, p + "attention.key_length");
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
  row->fromGguf(f, c);
  if (const auto b = f.getInt("tokenizer.ggml.bos_token_id")) c.bosId = int(*b);
  // Every end token the file names: EOS, and the end of a turn or a message (Llama 3's
  // <|eot_id|> and <|eom_id|>).
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const auto e = f.getInt(key);
    if (!e || *e < 0 || *e >= c.vocabSize) continue;
    if (!c.eosId) c.eosId = int(*e);
    if (std::find(c.eosIds.begin(), c.eosIds.end(), int(*e)) == c.eosIds.end())
      c.eosIds.push_back(int(*e));
  }
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
