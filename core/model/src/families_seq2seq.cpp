// The encoder-decoder families' rows (t5, bart, marian): their config.json readers (and t5's
// GGUF reader) and tensor names, each with its encoder layers' table (family_table.cpp joins the
// rows).
#include "family_rows.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <deque>
#include <optional>

namespace attnviz {

using namespace family_rows;

namespace {

using nlohmann::json;
using namespace json_keys;
using D = Dim;

// The rule of every encoder-decoder for its pad_token_id and decoder_start_token_id: absent (or
// null) is the family's default; anything else must be a token id of the vocabulary, or the
// model is refused naming the key and the vocabulary's size (a wrong start id would silently
// decode from another token).
std::optional<int> seq2seqTokenId(const json& j, const std::string& path, const char* key,
                                  int vocabSize) {
  const json* v = lookup(j, {key});
  if (!v) return std::nullopt;
  if (!v->is_number_integer() || v->get<long long>() < 0 || v->get<long long>() >= vocabSize) {
    throw InputError(path + ": " + key + " " + v->dump() + " is not a token id (vocab_size " +
                     std::to_string(vocabSize) + ")");
  }
  return v->get<int>();
}

// T5 (Raffel et al. 2020; v1.0, and v1.1 / Flan with gated GELU): pre-RMS-norm stacks without
// biases, no score scaling, a relative position bias per head and bucket in each stack's self
// sites (the table in its first layer, shared by the others), final norms in both stacks, the
// tied head reading the states times d^-1/2.
void t5Json(const json& j, const std::string& path, ModelConfig& c) {
  c.nEncoderLayer = requireInt(j, path, {"num_layers"});
  c.nLayer = optionalInt(j, path, "num_decoder_layers", c.nEncoderLayer);
  c.nHead = c.nKvHead = requireInt(j, path, {"num_heads"});
  c.nEmbd = requireInt(j, path, {"d_model"});
  c.headSize = requireInt(j, path, {"d_kv"});
  c.nInner = requireInt(j, path, {"d_ff"});
  c.vocabSize = requireInt(j, path, {"vocab_size"});
  c.nPositions = 1 << 16;  // relative positions: no table bounds the length
  c.relBuckets = optionalInt(j, path, "relative_attention_num_buckets", 32);
  c.relMaxDistance = optionalInt(j, path, "relative_attention_max_distance", 128);
  if (c.relBuckets < 4) {
    throw InputError(path + ": relative_attention_num_buckets must be at least 4");
  }
  // The decoder's causal buckets are exact below num_buckets / 2 and log-spaced from there up to
  // the max distance: a max distance at or below that count leaves no log range.
  if (c.relMaxDistance <= c.relBuckets / 2) {
    throw InputError(path + ": relative_attention_max_distance " +
                     std::to_string(c.relMaxDistance) + " must exceed " +
                     std::to_string(c.relBuckets / 2) +
                     " (relative_attention_num_buckets / 2, the exact buckets)");
  }
  c.layerNormEps = float(optionalNumber(j, path, "layer_norm_epsilon", 1e-6, 0, 1));
  c.norm = NormKind::RMSNorm;
  c.normPlacement = NormPlacement::Pre;
  c.positions = PositionKind::Relative;
  c.causal = true;
  c.scoreScale = 1.0f;  // T5 does not scale q.k
  const std::string ff = optionalString(j, path, "feed_forward_proj", "relu");
  if (ff == "relu") {
    c.mlp = MlpKind::Plain;
    c.activationName = "relu";
  } else if (ff == "gated-gelu") {
    c.mlp = MlpKind::Gated;
    c.activationName = "gelu_new";
  } else if (ff == "gated-relu" || ff == "gated-silu") {
    c.mlp = MlpKind::Gated;
    c.activationName = ff.substr(6);
  } else {
    throw InputError(path + ": feed_forward_proj \"" + ff +
                     "\" is not supported (relu, gated-gelu, gated-relu, gated-silu)");
  }
  parseActivation(c, path);
  c.tiedHead = flag(j, "tie_word_embeddings", true);
  if (c.tiedHead) c.headInputScale = 1.0f / std::sqrt(float(c.nEmbd));
  // T5Config's defaults: pad 0, and the decoder starts from the pad token.
  c.padId = seq2seqTokenId(j, path, "pad_token_id", c.vocabSize).value_or(0);
  c.decoderStartId =
      seq2seqTokenId(j, path, "decoder_start_token_id", c.vocabSize).value_or(*c.padId);
}

// llama.cpp's `t5`: the block of t5Json from the metadata. What a GGUF does not say is what
// llama.cpp assumes: a stack with ffn_gate runs gated GELU (tanh, T5 v1.1 / Flan's gated-gelu),
// one without runs ReLU (v1.0); the buckets reach max_distance 128 (its
// llama_relative_position_bucket); a file without output.weight ties the head to the embedding,
// read as T5 ties it: the states times d^-1/2 (llama.cpp's graph leaves that factor out, so its
// logits are sqrt(d) times the checkpoint's; the argmax is the same). block_count is the
// encoder's depth,
// decoder_block_count the decoder's (the encoder's when absent).
void t5Gguf(const GgufFile& f, ModelConfig& c) {
  const std::string p = "t5.";
  c.nEncoderLayer = c.nLayer;
  c.nLayer = ggufInt(f, p + "decoder_block_count", c.nEncoderLayer);
  if (c.nKvHead != c.nHead) {
    throw InputError(f.path() + ": " + p + "attention.head_count_kv differs from " + p +
                     "attention.head_count (T5 has one K and V per head)");
  }
  if (const auto vl = f.getInt(p + "attention.value_length"); vl && *vl != c.headSize) {
    throw InputError(f.path() + ": " + p + "attention.value_length " + std::to_string(*vl) +
                     " differs from the key length " + std::to_string(c.headSize));
  }
  c.nPositions = 1 << 16;  // relative positions: no table bounds the length
  c.relBuckets = ggufInt(f, p + "attention.relative_buckets_count", 32);
  if (c.relBuckets < 4) {
    throw InputError(f.path() + ": " + p + "attention.relative_buckets_count must be at least 4");
  }
  c.relMaxDistance = 128;
  if (c.relBuckets / 2 >= c.relMaxDistance) {
    throw InputError(f.path() + ": " + p + "attention.relative_buckets_count " +
                     std::to_string(c.relBuckets) +
                     " leaves no log-spaced buckets below llama.cpp's max distance 128 (at most "
                     "255)");
  }
  const auto eps = f.getFloat(p + "attention.layer_norm_rms_epsilon")
                       ? f.getFloat(p + "attention.layer_norm_rms_epsilon")
                       : f.getFloat(p + "attention.layer_norm_epsilon");
  if (eps && !(*eps > 0 && *eps < 1)) {
    throw InputError(f.path() + ": " + p + "attention.layer_norm_rms_epsilon must be in (0, 1)");
  }
  c.layerNormEps = float(eps.value_or(1e-6));
  c.norm = NormKind::RMSNorm;
  c.normPlacement = NormPlacement::Pre;
  c.positions = PositionKind::Relative;
  c.causal = true;
  c.scoreScale = 1.0f;
  const bool gated = f.findTensor("dec.blk.0.ffn_gate.weight") != nullptr;
  c.mlp = gated ? MlpKind::Gated : MlpKind::Plain;
  c.activationName = gated ? "gelu_new" : "relu";
  parseActivation(c, f.path());
  if (c.tiedHead) c.headInputScale = 1.0f / std::sqrt(float(c.nEmbd));
  // The rule of config.json's ids (seq2seqTokenId): absent is the default, anything else must
  // be a token id. llama.cpp writes "no token" as -1 or 2^32 - 1: absent too.
  auto idIn = [&](const std::string& key) -> std::optional<int> {
    const auto v = f.getInt(key);
    if (!v || *v == -1 || *v == 0xFFFFFFFFll) return std::nullopt;
    if (*v < 0 || *v >= c.vocabSize) {
      throw InputError(f.path() + ": " + key + " " + std::to_string(*v) +
                       " is not a token id (vocab_size " + std::to_string(c.vocabSize) + ")");
    }
    return int(*v);
  };
  c.padId = idIn("tokenizer.ggml.padding_token_id").value_or(0);
  c.decoderStartId = idIn(p + "decoder_start_token_id").value_or(*c.padId);
}

// ---- Encoder-decoders (bart): two post-norm stacks of the encoder block; every decoder layer
// adds a cross site over the encoder's last hidden states.

// The keys BART and Marian share: two post-norm stacks of one shape.
void seq2seqJson(const json& j, const std::string& path, ModelConfig& c,
                 const char* defaultActivation) {
  c.nLayer = requireInt(j, path, {"decoder_layers"});
  c.nEncoderLayer = requireInt(j, path, {"encoder_layers"});
  c.nHead = requireInt(j, path, {"decoder_attention_heads"});
  c.nEmbd = requireInt(j, path, {"d_model"});
  c.nInner = requireInt(j, path, {"decoder_ffn_dim"});
  const int encHeads = requireInt(j, path, {"encoder_attention_heads"});
  const int encInner = requireInt(j, path, {"encoder_ffn_dim"});
  if (encHeads != c.nHead || encInner != c.nInner) {
    throw InputError(path + ": an encoder of " + std::to_string(encHeads) + " heads and width " +
                     std::to_string(encInner) + " beside a decoder of " +
                     std::to_string(c.nHead) + " and " + std::to_string(c.nInner) +
                     " is not supported (the stacks must have one shape)");
  }
  c.nPositions = requireInt(j, path, {"max_position_embeddings"});
  c.vocabSize = requireInt(j, path, {"vocab_size"});
  c.activationName = optionalString(j, path, "activation_function", defaultActivation);
  if (flag(j, "normalize_before", false) || flag(j, "add_final_layer_norm", false)) {
    throw InputError(path + ": normalize_before / add_final_layer_norm (pre-norm mBART) is not "
                     "supported (BART's post-norm)");
  }
  c.tiedHead = flag(j, "tie_word_embeddings", true);
  encoderBlock(path, c);
  c.layerNormEps = 1e-5f;  // nn.LayerNorm's default
  c.causal = true;         // the decoder's self sites; the encoder's are bidirectional
  c.padId = seq2seqTokenId(j, path, "pad_token_id", c.vocabSize);
  c.decoderStartId = seq2seqTokenId(j, path, "decoder_start_token_id", c.vocabSize);
  if (!c.decoderStartId) throw InputError(path + ": missing decoder_start_token_id");
}

void bartJson(const json& j, const std::string& path, ModelConfig& c) {
  seq2seqJson(j, path, c, "gelu");
  if (flag(j, "scale_embedding", false)) c.embedScale = std::sqrt(float(c.nEmbd));
  // BART's learned positions are read at position + 2 (the table has two rows more).
  c.positionOffset = 2;
}

// Marian (MarianMTModel): BART's layers with fixed sinusoidal positions, no embedding
// LayerNorm, SiLU ("swish") by default, embeddings scaled by sqrt(d) unless configured off.
void marianJson(const json& j, const std::string& path, ModelConfig& c) {
  seq2seqJson(j, path, c, "swish");
  if (flag(j, "scale_embedding", true)) c.embedScale = std::sqrt(float(c.nEmbd));
  c.positions = PositionKind::Sinusoidal;
  if (c.nEmbd % 2 != 0) {
    throw InputError(path + ": d_model " + std::to_string(c.nEmbd) +
                     " is odd (the sinusoidal positions pair sines with cosines)");
  }
  const int decoderVocab = optionalInt(j, path, "decoder_vocab_size", c.vocabSize);
  if (decoderVocab != c.vocabSize || !flag(j, "share_encoder_decoder_embeddings", true)) {
    throw InputError(path + ": separate source and target embeddings (decoder_vocab_size " +
                     std::to_string(decoderVocab) + ", vocab_size " + std::to_string(c.vocabSize) +
                     ") are not supported (one shared vocabulary)");
  }
}

// BART (BartForConditionalGeneration; BartModel without "model."): the token embedding stored
// once as "shared", the head tied to it, final_logits_bias added to the logits.
const std::vector<TensorRow> kBartGlobals = {
    {int(Global::Embed),
     "model.shared.weight|model.encoder.embed_tokens.weight|model.decoder.embed_tokens.weight",
     nullptr, {D::V, D::D}},
    {int(Global::Positions), "model.decoder.embed_positions.weight", nullptr, {D::Positions, D::D}},
    {int(Global::EmbedNorm), "model.decoder.layernorm_embedding.weight", nullptr, {D::D, D::One}},
    {int(Global::EmbedNormB), "model.decoder.layernorm_embedding.bias", nullptr, {D::D, D::One}},
    {int(Global::EncPositions), "model.encoder.embed_positions.weight", nullptr,
     {D::Positions, D::D}},
    {int(Global::EncEmbedNorm), "model.encoder.layernorm_embedding.weight", nullptr,
     {D::D, D::One}},
    {int(Global::EncEmbedNormB), "model.encoder.layernorm_embedding.bias", nullptr,
     {D::D, D::One}},
    {int(Global::HeadBias), "final_logits_bias", nullptr, {D::One, D::V}},
    {int(Global::Head), "lm_head.weight", nullptr, {D::V, D::D}},
};
// A BART attention site `name` ("self_attn", "encoder_attn"): its projections into the slots
// q, qb, k, kb, v, vb, o, ob (in that order) and its post-norm into norm, normB.
std::vector<TensorRow> bartSite(const char* name, std::array<Slot, 10> slots) {
  static std::deque<std::string> names;  // the table keeps const char*: the strings live here
  auto keep = [&](const std::string& s) { return names.emplace_back(s).c_str(); };
  const std::string n = name;
  const char* parts[] = {".q_proj.weight", ".q_proj.bias", ".k_proj.weight", ".k_proj.bias",
                         ".v_proj.weight", ".v_proj.bias", ".out_proj.weight", ".out_proj.bias",
                         "_layer_norm.weight", "_layer_norm.bias"};
  const std::array<Dim, 2> shapes[] = {{D::Dq, D::D},  {D::Dq, D::One}, {D::Dkv, D::D},
                                       {D::Dkv, D::One}, {D::Dkv, D::D}, {D::Dkv, D::One},
                                       {D::D, D::Dq},  {D::D, D::One},  {D::D, D::One},
                                       {D::D, D::One}};
  std::vector<TensorRow> out;
  for (int i = 0; i < 10; ++i) out.push_back({int(slots[i]), keep(n + parts[i]), nullptr, shapes[i]});
  return out;
}
const std::array<Slot, 10> kSelfSlots = {Slot::Q,  Slot::QB, Slot::K,  Slot::KB,
                                         Slot::V,  Slot::VB, Slot::O,  Slot::OB,
                                         Slot::PostAttnNorm, Slot::PostAttnNormB};
const std::array<Slot, 10> kCrossSlots = {Slot::XQ, Slot::XQB, Slot::XK, Slot::XKB, Slot::XV,
                                          Slot::XVB, Slot::XO, Slot::XOB, Slot::XNorm,
                                          Slot::XNormB};
// Marian: BART's names without positions tables or embedding LayerNorms.
const std::vector<TensorRow> kMarianGlobals = {
    {int(Global::Embed),
     "model.shared.weight|model.encoder.embed_tokens.weight|model.decoder.embed_tokens.weight",
     nullptr, {D::V, D::D}},
    {int(Global::HeadBias), "final_logits_bias", nullptr, {D::One, D::V}},
    {int(Global::Head), "lm_head.weight", nullptr, {D::V, D::D}},
};
const std::vector<TensorRow> kBartMlp = {
    {int(Slot::Up), "fc1.weight", nullptr, {D::I, D::D}},
    {int(Slot::UpB), "fc1.bias", nullptr, {D::I, D::One}},
    {int(Slot::Down), "fc2.weight", nullptr, {D::D, D::I}},
    {int(Slot::DownB), "fc2.bias", nullptr, {D::D, D::One}},
    {int(Slot::PostMlpNorm), "final_layer_norm.weight", nullptr, {D::D, D::One}},
    {int(Slot::PostMlpNormB), "final_layer_norm.bias", nullptr, {D::D, D::One}},
};

// T5 (T5ForConditionalGeneration; T5Model the same without lm_head).
// llama.cpp's names: token_embd, {enc,dec}.blk.0.attn_rel_b, {enc,dec}.output_norm, output.
const std::vector<TensorRow> kT5Globals = {
    {int(Global::Embed), "shared.weight|encoder.embed_tokens.weight|decoder.embed_tokens.weight",
     "token_embd.weight", {D::V, D::D}},
    {int(Global::RelBias), "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     "dec.blk.0.attn_rel_b.weight", {D::Buckets, D::H}},
    {int(Global::EncRelBias),
     "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     "enc.blk.0.attn_rel_b.weight", {D::Buckets, D::H}},
    {int(Global::NormF), "decoder.final_layer_norm.weight", "dec.output_norm.weight",
     {D::D, D::One}},
    {int(Global::EncNormF), "encoder.final_layer_norm.weight", "enc.output_norm.weight",
     {D::D, D::One}},
    {int(Global::Head), "lm_head.weight", "output.weight", {D::V, D::D}},
};
// A T5 attention ("SelfAttention", "EncDecAttention") of sub-layer k: its norm and q, k, v, o;
// in llama.cpp's names `gguf`norm, `gguf`q, ... `gguf`o ("attn_", "cross_attn_").
std::vector<TensorRow> t5Attention(int k, const char* name, const char* gguf,
                                   std::array<Slot, 5> slots) {
  static std::deque<std::string> names;  // the table keeps const char*: the strings live here
  auto keep = [&](const std::string& s) { return names.emplace_back(s).c_str(); };
  const std::string pre = "layer." + std::to_string(k) + ".", g = gguf;
  return {{int(slots[0]), keep(pre + "layer_norm.weight"), keep(g + "norm.weight"), {D::D, D::One}},
          {int(slots[1]), keep(pre + name + ".q.weight"), keep(g + "q.weight"), {D::Dq, D::D}},
          {int(slots[2]), keep(pre + name + ".k.weight"), keep(g + "k.weight"), {D::Dkv, D::D}},
          {int(slots[3]), keep(pre + name + ".v.weight"), keep(g + "v.weight"), {D::Dkv, D::D}},
          {int(slots[4]), keep(pre + name + ".o.weight"), keep(g + "o.weight"), {D::D, D::Dq}}};
}
// Its feed-forward sub-layer k: wi (ReLU) or wi_0 (activated) and wi_1 (gated), then wo
// (llama.cpp: ffn_up, or ffn_gate and ffn_up, then ffn_down).
std::vector<TensorRow> t5Mlp(int k) {
  static std::deque<std::string> names;
  auto keep = [&](const std::string& s) { return names.emplace_back(s).c_str(); };
  const std::string pre = "layer." + std::to_string(k) + ".";
  return {{int(Slot::MlpNorm), keep(pre + "layer_norm.weight"), "ffn_norm.weight", {D::D, D::One}},
          {int(Slot::Up), keep(pre + "DenseReluDense.wi.weight"), "ffn_up.weight", {D::I, D::D},
           plainMlp},
          {int(Slot::Gate), keep(pre + "DenseReluDense.wi_0.weight"), "ffn_gate.weight",
           {D::I, D::D}, gatedMlp},
          {int(Slot::Up), keep(pre + "DenseReluDense.wi_1.weight"), "ffn_up.weight", {D::I, D::D},
           gatedMlp},
          {int(Slot::Down), keep(pre + "DenseReluDense.wo.weight"), "ffn_down.weight",
           {D::D, D::I}}};
}
const std::array<Slot, 5> kT5Self = {Slot::AttnNorm, Slot::Q, Slot::K, Slot::V, Slot::O};
const std::array<Slot, 5> kT5Cross = {Slot::XNorm, Slot::XQ, Slot::XK, Slot::XV, Slot::XO};

}  // namespace

std::vector<FamilyRow> family_rows::seq2seq() {
  return {
      {"t5", "t5", t5Json, t5Gguf, "", "", "decoder.block.{}.", kT5Globals,
       join({t5Attention(0, "SelfAttention", "attn_", kT5Self),
             t5Attention(1, "EncDecAttention", "cross_attn_", kT5Cross), t5Mlp(2)}),
       false, "n_positions", "encoder.block.{}.",
       join({t5Attention(0, "SelfAttention", "attn_", kT5Self), t5Mlp(1)}), "dec.blk."},
      {"bart", nullptr, bartJson, nullptr, "model.", "", "model.decoder.layers.{}.",
       kBartGlobals,
       join({bartSite("self_attn", kSelfSlots), bartSite("encoder_attn", kCrossSlots), kBartMlp}),
       false, "max_position_embeddings", "model.encoder.layers.{}.",
       join({bartSite("self_attn", kSelfSlots), kBartMlp})},
      {"marian", nullptr, marianJson, nullptr, "model.", "", "model.decoder.layers.{}.",
       kMarianGlobals,
       join({bartSite("self_attn", kSelfSlots), bartSite("encoder_attn", kCrossSlots), kBartMlp}),
       false, "max_position_embeddings", "model.encoder.layers.{}.",
       join({bartSite("self_attn", kSelfSlots), kBartMlp})},
  };
}

}  // namespace attnviz
