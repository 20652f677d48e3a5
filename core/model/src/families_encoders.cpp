// The encoder families' rows (bert, roberta, distilbert, modernbert): their config.json
// readers, bert's GGUF reader, and tensor names (family_table.cpp joins the rows).
#include "family_rows.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <deque>

namespace attnviz {

using namespace family_rows;

namespace {

using nlohmann::json;
using namespace json_keys;
using D = Dim;

// ---- Encoders (bert, roberta, distilbert): post-norm, bidirectional, learned positions, an
// embedding LayerNorm, biases everywhere; the masked-LM head when the folder has it.

void bertStyle(const json& j, const std::string& path, ModelConfig& c) {
  c.nLayer = requireInt(j, path, {"num_hidden_layers"});
  c.nHead = requireInt(j, path, {"num_attention_heads"});
  c.nEmbd = requireInt(j, path, {"hidden_size"});
  c.nInner = requireInt(j, path, {"intermediate_size"});
  c.nPositions = requireInt(j, path, {"max_position_embeddings"});
  c.vocabSize = requireInt(j, path, {"vocab_size"});
  c.typeVocabSize = optionalInt(j, path, "type_vocab_size", 2);
  c.layerNormEps = float(optionalNumber(j, path, "layer_norm_eps", 1e-12, 0, 1));
  c.activationName = optionalString(j, path, "hidden_act", "gelu");
  const std::string pe = optionalString(j, path, "position_embedding_type", "absolute");
  if (pe != "absolute") {
    throw InputError(path + ": position_embedding_type \"" + pe +
                     "\" is not supported (absolute)");
  }
  c.tiedHead = flag(j, "tie_word_embeddings", true);
  encoderBlock(path, c);
}

void bertJson(const json& j, const std::string& path, ModelConfig& c) { bertStyle(j, path, c); }

// llama.cpp's `bert` (what its converter writes for BertModel checkpoints: bge, all-MiniLM, ...):
// the encoder alone, without the masked-LM head (cls.predictions is dropped), so the block is
// the config.json reader's and the head is missing. The sizes come from the common keys
// (context_length is max_position_embeddings); the token types from
// tokenizer.ggml.token_type_count and the token_types tensor. The activation is HF's exact
// GELU, as the checkpoint was trained (llama.cpp's graph runs ggml's tanh-approximated GELU; the
// two differ by about 1e-3 at most in an activation).
void bertGguf(const GgufFile& f, ModelConfig& c) {
  const std::string p = "bert.";
  if (f.getBool(p + "attention.causal").value_or(false)) {
    throw InputError(f.path() + ": " + p + "attention.causal true is not supported (a bert "
                     "encoder attends both ways)");
  }
  const auto eps = f.getFloat(p + "attention.layer_norm_epsilon");
  if (!eps) throw InputError(f.path() + ": missing metadata key " + p + "attention.layer_norm_epsilon");
  if (!(*eps > 0 && *eps < 1)) {
    throw InputError(f.path() + ": " + p + "attention.layer_norm_epsilon must be in (0, 1)");
  }
  c.layerNormEps = float(*eps);
  // Token types: the table's rows (llama.cpp checks them against token_type_count); a file
  // without the table has none.
  c.typeVocabSize = 0;
  if (const GgufTensor* tt = f.findTensor("token_types.weight")) {
    c.typeVocabSize = tt->ne.size() == 2 ? int(std::min<std::int64_t>(tt->ne[1], 1 << 24)) : 0;
    if (const auto n = f.getInt("tokenizer.ggml.token_type_count"); n && *n != c.typeVocabSize) {
      throw InputError(f.path() + ": tokenizer.ggml.token_type_count " + std::to_string(*n) +
                       " disagrees with token_types.weight's " +
                       std::to_string(c.typeVocabSize) + " rows");
    }
  }
  if (c.nKvHead != c.nHead) {
    throw InputError(f.path() + ": " + p + "attention.head_count_kv " +
                     std::to_string(c.nKvHead) + " differs from " + p + "attention.head_count " +
                     std::to_string(c.nHead) + " (a bert layer has one K and V per head)");
  }
  c.activationName = "gelu";
  c.tiedHead = true;
  encoderBlock(f.path(), c);
}

// RoBERTa: position ids start at padding_idx + 1 (HF's create_position_ids_from_input_ids for a
// text without padding), so the table's first pad + 1 rows are never read.
void robertaJson(const json& j, const std::string& path, ModelConfig& c) {
  bertStyle(j, path, c);
  // Checked in 64 bits before the + 1: a pad id near INT_MAX must not wrap.
  const long long pad = j.contains("pad_token_id") && j["pad_token_id"].is_number_integer()
                            ? j["pad_token_id"].get<long long>()
                            : 1;
  if (pad < 0 || pad + 1 >= c.nPositions) {
    throw InputError(path + ": pad_token_id " + std::to_string(pad) +
                     " leaves no positions of max_position_embeddings " +
                     std::to_string(c.nPositions) + " (positions start at pad_token_id + 1)");
  }
  c.positionOffset = int(pad + 1);
  c.nPositions -= c.positionOffset;
  c.headActivation = Activation::GeluErf;  // RobertaLMHead's gelu, whatever hidden_act says
}

void distilbertJson(const json& j, const std::string& path, ModelConfig& c) {
  c.nLayer = requireInt(j, path, {"n_layers"});
  c.nHead = requireInt(j, path, {"n_heads"});
  c.nEmbd = requireInt(j, path, {"dim"});
  c.nInner = requireInt(j, path, {"hidden_dim"});
  c.nPositions = requireInt(j, path, {"max_position_embeddings"});
  c.vocabSize = requireInt(j, path, {"vocab_size"});
  c.typeVocabSize = 0;
  c.layerNormEps = 1e-12f;  // DistilBERT's LayerNorms are built with eps 1e-12
  c.activationName = optionalString(j, path, "activation", "gelu");
  c.tiedHead = flag(j, "tie_word_embeddings", true);
  encoderBlock(path, c);
}

bool hasTokenTypes(const ModelConfig& c) { return c.typeVocabSize > 0; }

// ModernBERT (Warner et al. 2024): a pre-norm bidirectional encoder without biases unless
// configured (attention_bias: Wqkv and Wo; mlp_bias: Wi and Wo; norm_bias: every LayerNorm's;
// classifier_bias: the head's dense layer), fused Wqkv, GeGLU (Wi's first half activated, times its
// second), RoPE with one base for the global layers and another for the local ones; every
// global_attn_every_n_layers-th layer (from 0) is global, the others see keys within
// local_attention / 2 of the query.
void modernbertJson(const json& j, const std::string& path, ModelConfig& c) {
  c.nLayer = requireInt(j, path, {"num_hidden_layers"});
  c.nHead = requireInt(j, path, {"num_attention_heads"});
  c.nEmbd = requireInt(j, path, {"hidden_size"});
  c.nInner = requireInt(j, path, {"intermediate_size"});
  c.nPositions = requireInt(j, path, {"max_position_embeddings"});
  c.vocabSize = requireInt(j, path, {"vocab_size"});
  c.nKvHead = c.nHead;
  if (c.nEmbd % c.nHead != 0 || (c.nEmbd / c.nHead) % 2 != 0) {
    throw InputError(path + ": hidden_size " + std::to_string(c.nEmbd) + " over " +
                     std::to_string(c.nHead) + " heads is not an even head size (RoPE pairs)");
  }
  c.headSize = c.ropeDim = c.nEmbd / c.nHead;
  c.norm = NormKind::LayerNorm;
  c.layerNormEps = float(optionalNumber(j, path, "norm_eps", 1e-5, 0, 1));
  c.normPlacement = NormPlacement::Pre;
  c.causal = false;
  c.positions = PositionKind::Rope;
  c.ropeStyle = RopeStyle::HalfSplit;
  c.ropeTheta = float(optionalNumber(j, path, "global_rope_theta", 160000.0, 1.0, 1e12));
  const float local = float(optionalNumber(j, path, "local_rope_theta", 10000.0, 1.0, 1e12));
  const int window = optionalInt(j, path, "local_attention", 128);
  const int every = optionalInt(j, path, "global_attn_every_n_layers", 3);
  c.layerWindows.assign(std::size_t(c.nLayer), 0);
  c.layerRopeTheta.assign(std::size_t(c.nLayer), c.ropeTheta);
  for (int l = 0; l < c.nLayer; ++l) {
    if (l % every != 0) c.layerWindows[l] = window, c.layerRopeTheta[l] = local;
  }
  c.mlp = MlpKind::Gated;
  c.activationName = optionalString(j, path, "hidden_activation", "gelu");
  parseActivation(c, path);
  {
    ModelConfig head;
    head.activationName = optionalString(j, path, "classifier_activation", "gelu");
    parseActivation(head, path);
    c.headActivation = head.activation;
  }
  c.qkvBias = c.outBias = flag(j, "attention_bias", false);
  c.mlpBias = flag(j, "mlp_bias", false);
  c.normBias = flag(j, "norm_bias", false);
  c.headDenseBias = flag(j, "classifier_bias", false);
  c.tiedHead = flag(j, "tie_word_embeddings", true);
}

const std::vector<TensorRow> kBertGlobals = {
    {int(Global::Embed), "bert.embeddings.word_embeddings.weight", "token_embd.weight", {D::V, D::D}},
    {int(Global::Positions), "bert.embeddings.position_embeddings.weight", "position_embd.weight",
     {D::Positions, D::D}},
    {int(Global::TokenTypes), "bert.embeddings.token_type_embeddings.weight", "token_types.weight",
     {D::TypeVocab, D::D}, hasTokenTypes},
    {int(Global::EmbedNorm),
     "bert.embeddings.LayerNorm.weight|bert.embeddings.LayerNorm.gamma",
     "token_embd_norm.weight", {D::D, D::One}},
    {int(Global::EmbedNormB),
     "bert.embeddings.LayerNorm.bias|bert.embeddings.LayerNorm.beta",
     "token_embd_norm.bias", {D::D, D::One}},
    {int(Global::HeadDense), "cls.predictions.transform.dense.weight", nullptr, {D::D, D::D},
     nullptr, true},
    {int(Global::HeadDenseB), "cls.predictions.transform.dense.bias", nullptr, {D::D, D::One},
     nullptr, true},
    {int(Global::HeadNorm),
     "cls.predictions.transform.LayerNorm.weight|cls.predictions.transform.LayerNorm.gamma",
     nullptr,
     {D::D, D::One}, nullptr, true},
    {int(Global::HeadNormB),
     "cls.predictions.transform.LayerNorm.bias|cls.predictions.transform.LayerNorm.beta",
     nullptr,
     {D::D, D::One}, nullptr, true},
    {int(Global::HeadBias), "cls.predictions.bias|cls.predictions.decoder.bias", nullptr,
     {D::V, D::One}, nullptr, true},
    {int(Global::Head), "cls.predictions.decoder.weight", nullptr, {D::V, D::D}, untied},
};
const std::vector<TensorRow> kBertLayer = {
    {int(Slot::Q), "attention.self.query.weight", "attn_q.weight", {D::Dq, D::D}},
    {int(Slot::QB), "attention.self.query.bias", "attn_q.bias", {D::Dq, D::One}},
    {int(Slot::K), "attention.self.key.weight", "attn_k.weight", {D::Dkv, D::D}},
    {int(Slot::KB), "attention.self.key.bias", "attn_k.bias", {D::Dkv, D::One}},
    {int(Slot::V), "attention.self.value.weight", "attn_v.weight", {D::Dkv, D::D}},
    {int(Slot::VB), "attention.self.value.bias", "attn_v.bias", {D::Dkv, D::One}},
    {int(Slot::O), "attention.output.dense.weight", "attn_output.weight", {D::D, D::Dq}},
    {int(Slot::OB), "attention.output.dense.bias", "attn_output.bias", {D::D, D::One}},
    {int(Slot::PostAttnNorm),
     "attention.output.LayerNorm.weight|attention.output.LayerNorm.gamma",
     "attn_output_norm.weight", {D::D, D::One}},
    {int(Slot::PostAttnNormB),
     "attention.output.LayerNorm.bias|attention.output.LayerNorm.beta",
     "attn_output_norm.bias", {D::D, D::One}},
    {int(Slot::Up), "intermediate.dense.weight", "ffn_up.weight", {D::I, D::D}},
    {int(Slot::UpB), "intermediate.dense.bias", "ffn_up.bias", {D::I, D::One}},
    {int(Slot::Down), "output.dense.weight", "ffn_down.weight", {D::D, D::I}},
    {int(Slot::DownB), "output.dense.bias", "ffn_down.bias", {D::D, D::One}},
    {int(Slot::PostMlpNorm),
     "output.LayerNorm.weight|output.LayerNorm.gamma",
     "layer_output_norm.weight", {D::D, D::One}},
    {int(Slot::PostMlpNormB),
     "output.LayerNorm.bias|output.LayerNorm.beta",
     "layer_output_norm.bias", {D::D, D::One}},
};

// RoBERTa: BERT's layers under "roberta.", the head as "lm_head".
const std::vector<TensorRow> kRobertaGlobals = {
    {int(Global::Embed), "roberta.embeddings.word_embeddings.weight", nullptr, {D::V, D::D}},
    {int(Global::Positions), "roberta.embeddings.position_embeddings.weight", nullptr,
     {D::Positions, D::D}},
    {int(Global::TokenTypes), "roberta.embeddings.token_type_embeddings.weight", nullptr,
     {D::TypeVocab, D::D}, hasTokenTypes},
    {int(Global::EmbedNorm),
     "roberta.embeddings.LayerNorm.weight|roberta.embeddings.LayerNorm.gamma",
     nullptr, {D::D, D::One}},
    {int(Global::EmbedNormB),
     "roberta.embeddings.LayerNorm.bias|roberta.embeddings.LayerNorm.beta",
     nullptr, {D::D, D::One}},
    {int(Global::HeadDense), "lm_head.dense.weight", nullptr, {D::D, D::D}, nullptr, true},
    {int(Global::HeadDenseB), "lm_head.dense.bias", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadNorm), "lm_head.layer_norm.weight", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadNormB), "lm_head.layer_norm.bias", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadBias), "lm_head.bias|lm_head.decoder.bias", nullptr, {D::V, D::One},
     nullptr, true},
    {int(Global::Head), "lm_head.decoder.weight", nullptr, {D::V, D::D}, untied},
};

// DistilBERT: its own names, no token types.
// ModernBERT (ModernBertForMaskedLM: "model." and the head outside it; ModernBertModel:
// without "model.").
const std::vector<TensorRow> kModernbertGlobals = {
    {int(Global::Embed), "model.embeddings.tok_embeddings.weight", nullptr, {D::V, D::D}},
    {int(Global::EmbedNorm), "model.embeddings.norm.weight", nullptr, {D::D, D::One}},
    {int(Global::EmbedNormB), "model.embeddings.norm.bias", nullptr, {D::D, D::One}, normBias},
    {int(Global::NormF), "model.final_norm.weight", nullptr, {D::D, D::One}},
    {int(Global::NormFB), "model.final_norm.bias", nullptr, {D::D, D::One}, normBias},
    {int(Global::HeadDense), "head.dense.weight", nullptr, {D::D, D::D}, nullptr, true},
    {int(Global::HeadDenseB), "head.dense.bias", nullptr, {D::D, D::One}, headDenseBias, true},
    {int(Global::HeadNorm), "head.norm.weight", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadNormB), "head.norm.bias", nullptr, {D::D, D::One}, normBias, true},
    {int(Global::HeadBias), "decoder.bias", nullptr, {D::V, D::One}, nullptr, true},
    {int(Global::Head), "decoder.weight", nullptr, {D::V, D::D}, untied},
};
const std::vector<TensorRow> kModernbertLayer = {
    {int(Slot::Qkv), "attn.Wqkv.weight", nullptr, {D::Dqkv, D::D}},
    {int(Slot::QkvB), "attn.Wqkv.bias", nullptr, {D::Dqkv, D::One}, qkvBias},
    {int(Slot::AttnNorm), "attn_norm.weight", nullptr, {D::D, D::One}, nullptr, false, 1},
    {int(Slot::AttnNormB), "attn_norm.bias", nullptr, {D::D, D::One}, normBias, false, 1},
    {int(Slot::O), "attn.Wo.weight", nullptr, {D::D, D::Dq}},
    {int(Slot::OB), "attn.Wo.bias", nullptr, {D::D, D::One}, outBias},
    {int(Slot::MlpNorm), "mlp_norm.weight", nullptr, {D::D, D::One}},
    {int(Slot::MlpNormB), "mlp_norm.bias", nullptr, {D::D, D::One}, normBias},
    {int(Slot::GateUp), "mlp.Wi.weight", nullptr, {D::I2, D::D}},
    {int(Slot::GateUpB), "mlp.Wi.bias", nullptr, {D::I2, D::One}, mlpBias},
    {int(Slot::Down), "mlp.Wo.weight", nullptr, {D::D, D::I}},
    {int(Slot::DownB), "mlp.Wo.bias", nullptr, {D::D, D::One}, mlpBias},
};

const std::vector<TensorRow> kDistilbertGlobals = {
    {int(Global::Embed), "distilbert.embeddings.word_embeddings.weight", nullptr, {D::V, D::D}},
    {int(Global::Positions), "distilbert.embeddings.position_embeddings.weight", nullptr,
     {D::Positions, D::D}},
    {int(Global::EmbedNorm), "distilbert.embeddings.LayerNorm.weight", nullptr, {D::D, D::One}},
    {int(Global::EmbedNormB), "distilbert.embeddings.LayerNorm.bias", nullptr, {D::D, D::One}},
    {int(Global::HeadDense), "vocab_transform.weight", nullptr, {D::D, D::D}, nullptr, true},
    {int(Global::HeadDenseB), "vocab_transform.bias", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadNorm), "vocab_layer_norm.weight", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadNormB), "vocab_layer_norm.bias", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadBias), "vocab_projector.bias", nullptr, {D::V, D::One}, nullptr, true},
    {int(Global::Head), "vocab_projector.weight", nullptr, {D::V, D::D}, untied},
};
const std::vector<TensorRow> kDistilbertLayer = {
    {int(Slot::Q), "attention.q_lin.weight", nullptr, {D::Dq, D::D}},
    {int(Slot::QB), "attention.q_lin.bias", nullptr, {D::Dq, D::One}},
    {int(Slot::K), "attention.k_lin.weight", nullptr, {D::Dkv, D::D}},
    {int(Slot::KB), "attention.k_lin.bias", nullptr, {D::Dkv, D::One}},
    {int(Slot::V), "attention.v_lin.weight", nullptr, {D::Dkv, D::D}},
    {int(Slot::VB), "attention.v_lin.bias", nullptr, {D::Dkv, D::One}},
    {int(Slot::O), "attention.out_lin.weight", nullptr, {D::D, D::Dq}},
    {int(Slot::OB), "attention.out_lin.bias", nullptr, {D::D, D::One}},
    {int(Slot::PostAttnNorm), "sa_layer_norm.weight", nullptr, {D::D, D::One}},
    {int(Slot::PostAttnNormB), "sa_layer_norm.bias", nullptr, {D::D, D::One}},
    {int(Slot::Up), "ffn.lin1.weight", nullptr, {D::I, D::D}},
    {int(Slot::UpB), "ffn.lin1.bias", nullptr, {D::I, D::One}},
    {int(Slot::Down), "ffn.lin2.weight", nullptr, {D::D, D::I}},
    {int(Slot::DownB), "ffn.lin2.bias", nullptr, {D::D, D::One}},
    {int(Slot::PostMlpNorm), "output_layer_norm.weight", nullptr, {D::D, D::One}},
    {int(Slot::PostMlpNormB), "output_layer_norm.bias", nullptr, {D::D, D::One}},
};

}  // namespace

std::vector<FamilyRow> family_rows::encoders() {
  return {
      {"bert", "bert", bertJson, bertGguf, "bert.", "", "bert.encoder.layer.{}.", kBertGlobals,
       kBertLayer},
      {"roberta", nullptr, robertaJson, nullptr, "roberta.", "", "roberta.encoder.layer.{}.",
       kRobertaGlobals, kBertLayer},
      {"distilbert", nullptr, distilbertJson, nullptr, "distilbert.", "",
       "distilbert.transformer.layer.{}.", kDistilbertGlobals, kDistilbertLayer},
      {"modernbert", nullptr, modernbertJson, nullptr, "model.", "", "model.layers.{}.",
       kModernbertGlobals, kModernbertLayer},
  };
}

}  // namespace attnviz
