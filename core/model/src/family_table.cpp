// The family table: one row per family. A row says how config.json's keys (and GGUF metadata)
// set the block description of ModelConfig, and which stored tensor fills each slot of the layer
// skeleton, by its Hugging Face name and llama.cpp's. Adding a family is adding a row here (and a
// tokenizer if it brings a new one); the pass reads only slots and the block description.
#include "model_internal.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <deque>

namespace attnviz {

namespace {

using nlohmann::json;
using namespace json_keys;

bool qkvBias(const ModelConfig& c) { return c.qkvBias; }
bool outBias(const ModelConfig& c) { return c.outBias; }
bool mlpBias(const ModelConfig& c) { return c.mlpBias; }
bool untied(const ModelConfig& c) { return !c.tiedHead; }

// ---- config.json readers

// The keys of every LLaMA-style config (llama, mistral, qwen2/3, gemma2/3, phi3, olmo2).
void llamaStyle(const json& j, const std::string& path, ModelConfig& c) {
  c.nLayer = requireInt(j, path, {"num_hidden_layers"});
  c.nHead = requireInt(j, path, {"num_attention_heads"});
  c.nKvHead = optionalInt(j, path, "num_key_value_heads", c.nHead);
  c.nEmbd = requireInt(j, path, {"hidden_size"});
  c.nInner = requireInt(j, path, {"intermediate_size"});
  c.nPositions = requireInt(j, path, {"max_position_embeddings"});
  c.vocabSize = requireInt(j, path, {"vocab_size"});
  if (c.nHead % c.nKvHead != 0) {
    throw InputError(path + ": num_attention_heads " + std::to_string(c.nHead) +
                     " is not divisible by num_key_value_heads " + std::to_string(c.nKvHead));
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    c.headSize = requireInt(j, path, {"head_dim"});
  } else {
    if (c.nEmbd % c.nHead != 0) {
      throw InputError(path + ": hidden_size " + std::to_string(c.nEmbd) +
                       " is not divisible by num_attention_heads " + std::to_string(c.nHead));
    }
    c.headSize = c.nEmbd / c.nHead;
  }
  if (c.headSize % 2 != 0) {
    throw InputError(path + ": the head size " + std::to_string(c.headSize) +
                     " is odd; RoPE rotates pairs of dimensions");
  }
  c.norm = NormKind::RMSNorm;
  c.layerNormEps = float(optionalNumber(j, path, "rms_norm_eps", 1e-6, 0, 1));
  c.positions = PositionKind::Rope;
  c.ropeStyle = RopeStyle::HalfSplit;
  c.ropeTheta = float(optionalNumber(j, path, "rope_theta", 10000.0, 1.0, 1e12));
  c.ropeDim = c.headSize;
  parseRopeScaling(j, c, path);
  c.mlp = MlpKind::Gated;
  c.activationName = optionalString(j, path, "hidden_act", "silu");
  parseActivation(c, path);
  c.tiedHead = flag(j, "tie_word_embeddings", false);
  const bool attentionBias = flag(j, "attention_bias", false);
  c.qkvBias = attentionBias;
  c.outBias = attentionBias;
  c.mlpBias = flag(j, "mlp_bias", false);
}

void gpt2Json(const json& j, const std::string& path, ModelConfig& c) {
  c.nLayer = requireInt(j, path, {"n_layer"});
  c.nHead = requireInt(j, path, {"n_head"});
  c.nKvHead = c.nHead;
  c.nEmbd = requireInt(j, path, {"n_embd"});
  c.nPositions = requireInt(j, path, {"n_positions", "n_ctx"});
  c.vocabSize = requireInt(j, path, {"vocab_size"});
  if (c.nEmbd % c.nHead != 0) {
    throw InputError(path + ": n_embd " + std::to_string(c.nEmbd) + " is not divisible by n_head " +
                     std::to_string(c.nHead));
  }
  c.headSize = c.nEmbd / c.nHead;
  c.nInner = 4 * c.nEmbd;
  if (j.contains("n_inner") && !j["n_inner"].is_null()) c.nInner = requireInt(j, path, {"n_inner"});
  c.layerNormEps = float(optionalNumber(j, path, "layer_norm_epsilon", 1e-5, 0, 1));
  c.activationName = optionalString(j, path, "activation_function", "gelu_new");
  parseActivation(c, path);
  if (!flag(j, "scale_attn_weights", true)) {
    throw InputError(path + ": scale_attn_weights false (unscaled attention) is not supported");
  }
  if (flag(j, "scale_attn_by_inverse_layer_idx", false)) {
    throw InputError(path + ": scale_attn_by_inverse_layer_idx is not supported");
  }
  c.norm = NormKind::LayerNorm;
  c.positions = PositionKind::Learned;
  c.qkvBias = c.outBias = c.mlpBias = true;
  c.mlp = MlpKind::Plain;
  c.tiedHead = flag(j, "tie_word_embeddings", true);
}

void llamaJson(const json& j, const std::string& path, ModelConfig& c) { llamaStyle(j, path, c); }

void mistralJson(const json& j, const std::string& path, ModelConfig& c) {
  llamaStyle(j, path, c);
  c.slidingWindow = optionalInt(j, path, "sliding_window", 0);
}

void qwen2Json(const json& j, const std::string& path, ModelConfig& c) {
  llamaStyle(j, path, c);
  c.qkvBias = true;
  if (flag(j, "use_sliding_window", false)) {
    c.slidingWindow = optionalInt(j, path, "sliding_window", 0);
    c.windowFromLayer = optionalInt(j, path, "max_window_layers", 0);
  }
}

void qwen3Json(const json& j, const std::string& path, ModelConfig& c) {
  qwen2Json(j, path, c);
  c.qkvBias = flag(j, "attention_bias", false);
  c.qkNorm = QkNorm::PerHead;
}

// Which layers are local: config.json's layer_types list when given ("sliding_attention" /
// "full_attention"), else the family's rule.
void localLayers(const json& j, const std::string& path, ModelConfig& c, int window,
                 bool (*isLocal)(int layer, int pattern), int pattern) {
  c.layerWindows.assign(std::size_t(c.nLayer), 0);
  if (const json* lt = lookup(j, {"layer_types"})) {
    if (!lt->is_array() || int(lt->size()) != c.nLayer) {
      throw InputError(path + ": \"layer_types\" must list one type for each of the " +
                       std::to_string(c.nLayer) + " layers");
    }
    for (int l = 0; l < c.nLayer; ++l) {
      const json& t = (*lt)[std::size_t(l)];
      const std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s == "sliding_attention") {
        c.layerWindows[l] = window;
      } else if (s != "full_attention") {
        throw InputError(path + ": layer_types[" + std::to_string(l) + "] " + t.dump() +
                         " is not supported (sliding_attention, full_attention)");
      }
    }
    return;
  }
  for (int l = 0; l < c.nLayer; ++l)
    if (isLocal(l, pattern)) c.layerWindows[l] = window;
}

// The local layers' own RoPE base, unscaled (Gemma 3's rope_local_base_freq; transformers 5's
// rope_parameters.sliding_attention).
void localRope(ModelConfig& c, float theta) {
  c.layerRopeTheta.assign(std::size_t(c.nLayer), c.ropeTheta);
  for (int l = 0; l < c.nLayer; ++l)
    if (c.layerWindows[l] > 0) c.layerRopeTheta[l] = theta;
  c.scaleLocalRope = false;
}

void gemmaCommon(const json& j, const std::string& path, ModelConfig& c) {
  llamaStyle(j, path, c);
  c.activationName = optionalString(j, path, "hidden_activation",
                                    optionalString(j, path, "hidden_act", "gelu_pytorch_tanh"));
  parseActivation(c, path);
  c.tiedHead = flag(j, "tie_word_embeddings", true);
  c.normPlacement = NormPlacement::Sandwich;
  c.normWeightOffset = 1.0f;
  // HF multiplies by sqrt(d) rounded to the weights' type (float32 here).
  c.embedScale = std::sqrt(float(c.nEmbd));
  // HF's default when the key is absent is 256 (Gemma's head size), not this model's head size.
  const double qpas = optionalNumber(j, path, "query_pre_attn_scalar", 256, 0, 1e9);
  c.scoreScale = float(1.0 / std::sqrt(qpas));
  c.attnSoftcap = float(optionalNumber(j, path, "attn_logit_softcapping", 0, -1, 1e9));
  c.logitSoftcap = float(optionalNumber(j, path, "final_logit_softcapping", 0, -1, 1e9));
}

void gemma2Json(const json& j, const std::string& path, ModelConfig& c) {
  gemmaCommon(j, path, c);
  if (c.attnSoftcap == 0 && !j.contains("attn_logit_softcapping")) c.attnSoftcap = 50.0f;
  if (c.logitSoftcap == 0 && !j.contains("final_logit_softcapping")) c.logitSoftcap = 30.0f;
  const int W = optionalInt(j, path, "sliding_window", 4096);
  // Gemma 2: the even layers are local.
  localLayers(j, path, c, W, [](int l, int) { return l % 2 == 0; }, 2);
  if (const auto local = localRopeTheta(j, path)) localRope(c, *local);
}

void gemma3Json(const json& j, const std::string& path, ModelConfig& c) {
  gemmaCommon(j, path, c);
  // EmbeddingGemma: every position sees the others, with a bidirectional window of its own.
  if (flag(j, "use_bidirectional_attention", false)) {
    throw InputError(path + ": use_bidirectional_attention true (EmbeddingGemma) is not "
                     "supported; gemma3_text runs causal");
  }
  c.qkNorm = QkNorm::PerHead;
  const int W = optionalInt(j, path, "sliding_window", 4096);
  const int pattern = optionalInt(j, path, "sliding_window_pattern", 6);
  // Gemma 3: every pattern-th layer is global, the others local (five to one by default).
  localLayers(j, path, c, W, [](int l, int p) { return (l + 1) % p != 0; }, pattern);
  localRope(c, localRopeTheta(j, path).value_or(float(
                   optionalNumber(j, path, "rope_local_base_freq", 10000.0, 1.0, 1e12))));
}

void phi3Json(const json& j, const std::string& path, ModelConfig& c) {
  llamaStyle(j, path, c);
  if (const json* p = lookup(j, {"partial_rotary_factor"}); p && p->is_number() &&
                                                            p->get<double>() != 1.0) {
    throw InputError(path + ": partial_rotary_factor " + std::to_string(p->get<double>()) +
                     " is not supported (1.0)");
  }
  c.slidingWindow = optionalInt(j, path, "sliding_window", 0);
}

void olmo2Json(const json& j, const std::string& path, ModelConfig& c) {
  llamaStyle(j, path, c);
  c.normPlacement = NormPlacement::After;
  c.qkNorm = QkNorm::Whole;
}

// ---- Encoders (bert, roberta, distilbert): post-norm, bidirectional, learned positions, an
// embedding LayerNorm, biases everywhere; the masked-LM head when the folder has it.

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

// RoBERTa: position ids start at padding_idx + 1 (HF's create_position_ids_from_input_ids for a
// text without padding), so the table's first pad + 1 rows are never read.
void robertaJson(const json& j, const std::string& path, ModelConfig& c) {
  bertStyle(j, path, c);
  const int pad = j.contains("pad_token_id") && j["pad_token_id"].is_number_integer()
                      ? j["pad_token_id"].get<int>()
                      : 1;
  c.positionOffset = pad + 1;
  if (pad < 0 || c.positionOffset >= c.nPositions) {
    throw InputError(path + ": pad_token_id " + std::to_string(pad) +
                     " leaves no positions of max_position_embeddings " +
                     std::to_string(c.nPositions) + " (positions start at pad_token_id + 1)");
  }
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
  const json* start = lookup(j, {"decoder_start_token_id"});
  c.decoderStartId = start && start->is_number_integer() && start->get<long long>() >= 0 &&
                             start->get<long long>() < c.vocabSize
                         ? start->get<int>()
                         : 0;
  const json* pad = lookup(j, {"pad_token_id"});
  c.padId = pad && pad->is_number_integer() && pad->get<long long>() >= 0 &&
                    pad->get<long long>() < c.vocabSize
                ? pad->get<int>()
                : 0;
}

bool plainMlp(const ModelConfig& c) { return c.mlp == MlpKind::Plain; }
bool gatedMlp(const ModelConfig& c) { return c.mlp == MlpKind::Gated; }

// ModernBERT (Warner et al. 2024): a pre-norm bidirectional encoder without biases (unless
// configured), LayerNorms without bias, fused Wqkv, GeGLU (Wi's first half activated, times its
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
  for (const char* key : {"attention_bias", "mlp_bias", "norm_bias", "classifier_bias"}) {
    if (flag(j, key, false)) {
      throw InputError(path + ": " + key + " true is not supported (ModernBERT's layers have no "
                       "biases)");
    }
  }
  c.tiedHead = flag(j, "tie_word_embeddings", true);
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
  const json* start = lookup(j, {"decoder_start_token_id"});
  if (start && start->is_number_integer() && start->get<long long>() >= 0 &&
      start->get<long long>() < c.vocabSize) {
    c.decoderStartId = start->get<int>();
  } else {
    throw InputError(path + ": \"decoder_start_token_id\" must be a token id below vocab_size");
  }
  if (const json* pad = lookup(j, {"pad_token_id"});
      pad && pad->is_number_integer() && pad->get<long long>() >= 0 &&
      pad->get<long long>() < c.vocabSize) {
    c.padId = pad->get<int>();
  }
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

// ---- GGUF readers (the common keys are read by ggufModelConfig)

void gpt2Gguf(const GgufFile& f, ModelConfig& c) {
  c.norm = NormKind::LayerNorm;
  c.layerNormEps = float(f.getFloat("gpt2.attention.layer_norm_epsilon").value_or(1e-5));
  c.positions = PositionKind::Learned;
  c.qkvBias = c.outBias = c.mlpBias = true;
  c.mlp = MlpKind::Plain;
  c.activation = Activation::GeluTanh;
  c.activationName = "gelu_new";
  // GPT-2's fused c_attn and its Conv1D matrices are square in d: a head size or KV head count of
  // its own would not fit them.
  const std::string p = "gpt2.";
  if (c.nKvHead != c.nHead || c.headSize * c.nHead != c.nEmbd) {
    throw InputError(f.path() + ": a gpt2 model needs " + p + "attention.head_count_kv = " +
                     p + "attention.head_count and key_length = embedding_length / head_count "
                     "(the file says " + std::to_string(c.nKvHead) + " KV heads of " +
                     std::to_string(c.headSize) + " for " + std::to_string(c.nHead) +
                     " heads of width " + std::to_string(c.nEmbd) + ")");
  }
}

void ropeGguf(const GgufFile& f, ModelConfig& c, RopeStyle style) {
  const std::string p = c.family == "llama" || c.family == "mistral" ? "llama."
                                                                     : std::string(c.family) + ".";
  c.norm = NormKind::RMSNorm;
  c.layerNormEps = float(f.getFloat(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.positions = PositionKind::Rope;
  c.ropeStyle = style;
  c.ropeTheta = float(f.getFloat(p + "rope.freq_base").value_or(10000.0));
  c.ropeDim = ggufInt(f, p + "rope.dimension_count", c.headSize);
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
        throw InputError(f.path() + ": tensor 'rope_freqs.weight' holds a factor that is not a "
                         "finite number > 0");
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

// llama.cpp's `llama` tensors keep Meta's adjacent RoPE pairs; its `qwen2` tensors rotate halves.
void llamaGguf(const GgufFile& f, ModelConfig& c) { ropeGguf(f, c, RopeStyle::Interleaved); }
void qwen2Gguf(const GgufFile& f, ModelConfig& c) { ropeGguf(f, c, RopeStyle::HalfSplit); }

// ---- The tensors of each layout

using D = Dim;

const std::vector<TensorRow> kLlamaGlobals = {
    {int(Global::Embed), "model.embed_tokens.weight", "token_embd.weight", {D::V, D::D}},
    {int(Global::NormF), "model.norm.weight", "output_norm.weight", {D::D, D::One}},
    {int(Global::Head), "lm_head.weight", "output.weight", {D::V, D::D}, untied},
};

// The attention and MLP tensors of a LLaMA-style layer with separate q, k, v and gate, up, down.
std::vector<TensorRow> llamaAttention() {
  return {
      {int(Slot::Q), "self_attn.q_proj.weight", "attn_q.weight", {D::Dq, D::D}},
      {int(Slot::K), "self_attn.k_proj.weight", "attn_k.weight", {D::Dkv, D::D}},
      {int(Slot::V), "self_attn.v_proj.weight", "attn_v.weight", {D::Dkv, D::D}},
      {int(Slot::O), "self_attn.o_proj.weight", "attn_output.weight", {D::D, D::Dq}},
      {int(Slot::QB), "self_attn.q_proj.bias", "attn_q.bias", {D::Dq, D::One}, qkvBias},
      {int(Slot::KB), "self_attn.k_proj.bias", "attn_k.bias", {D::Dkv, D::One}, qkvBias},
      {int(Slot::VB), "self_attn.v_proj.bias", "attn_v.bias", {D::Dkv, D::One}, qkvBias},
      {int(Slot::OB), "self_attn.o_proj.bias", "attn_output.bias", {D::D, D::One}, outBias},
  };
}
std::vector<TensorRow> llamaMlp() {
  return {
      {int(Slot::Gate), "mlp.gate_proj.weight", "ffn_gate.weight", {D::I, D::D}},
      {int(Slot::Up), "mlp.up_proj.weight", "ffn_up.weight", {D::I, D::D}},
      {int(Slot::Down), "mlp.down_proj.weight", "ffn_down.weight", {D::D, D::I}},
      {int(Slot::GateB), "mlp.gate_proj.bias", "ffn_gate.bias", {D::I, D::One}, mlpBias},
      {int(Slot::UpB), "mlp.up_proj.bias", "ffn_up.bias", {D::I, D::One}, mlpBias},
      {int(Slot::DownB), "mlp.down_proj.bias", "ffn_down.bias", {D::D, D::One}, mlpBias},
  };
}
std::vector<TensorRow> join(std::initializer_list<std::vector<TensorRow>> parts) {
  std::vector<TensorRow> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Pre-norm LLaMA layers: input_layernorm before attention, post_attention_layernorm before the
// MLP (HF's name for it).
const std::vector<TensorRow> kLlamaLayer = join(
    {{{int(Slot::AttnNorm), "input_layernorm.weight", "attn_norm.weight", {D::D, D::One}},
      {int(Slot::MlpNorm), "post_attention_layernorm.weight", "ffn_norm.weight", {D::D, D::One}}},
     llamaAttention(), llamaMlp()});

const std::vector<TensorRow> kQkNormPerHead = {
    {int(Slot::QNorm), "self_attn.q_norm.weight", "attn_q_norm.weight", {D::Dh, D::One}},
    {int(Slot::KNorm), "self_attn.k_norm.weight", "attn_k_norm.weight", {D::Dh, D::One}},
};

// Gemma 2 and 3: four norms a layer; here post_attention_layernorm is the norm after attention.
const std::vector<TensorRow> kGemmaNorms = {
    {int(Slot::AttnNorm), "input_layernorm.weight", "attn_norm.weight", {D::D, D::One}},
    {int(Slot::PostAttnNorm), "post_attention_layernorm.weight", "post_attention_norm.weight",
     {D::D, D::One}},
    {int(Slot::MlpNorm), "pre_feedforward_layernorm.weight", "ffn_norm.weight", {D::D, D::One}},
    {int(Slot::PostMlpNorm), "post_feedforward_layernorm.weight", "post_ffw_norm.weight",
     {D::D, D::One}},
};

// OLMo 2: norms after attention and after the MLP only; q/k norms over the whole width.
const std::vector<TensorRow> kOlmo2Norms = {
    {int(Slot::PostAttnNorm), "post_attention_layernorm.weight", "post_attention_norm.weight",
     {D::D, D::One}},
    {int(Slot::PostMlpNorm), "post_feedforward_layernorm.weight", "post_ffw_norm.weight",
     {D::D, D::One}},
    {int(Slot::QNorm), "self_attn.q_norm.weight", "attn_q_norm.weight", {D::Dq, D::One}},
    {int(Slot::KNorm), "self_attn.k_norm.weight", "attn_k_norm.weight", {D::Dkv, D::One}},
};

// Phi-3: fused qkv_proj ([q; k; v] rows) and gate_up_proj ([gate; up] rows), read as views.
const std::vector<TensorRow> kPhi3Layer = {
    {int(Slot::AttnNorm), "input_layernorm.weight", "attn_norm.weight", {D::D, D::One}},
    {int(Slot::MlpNorm), "post_attention_layernorm.weight", "ffn_norm.weight", {D::D, D::One}},
    {int(Slot::Qkv), "self_attn.qkv_proj.weight", "attn_qkv.weight", {D::Dqkv, D::D}},
    {int(Slot::O), "self_attn.o_proj.weight", "attn_output.weight", {D::D, D::Dq}},
    {int(Slot::GateUp), "mlp.gate_up_proj.weight", "ffn_up.weight", {D::I2, D::D}},
    {int(Slot::Down), "mlp.down_proj.weight", "ffn_down.weight", {D::D, D::I}},
};

// GPT-2: Conv1D matrices, stored [in, out] in folders (the loader transposes the expected shape)
// and [out, in] in GGUF files.
const std::vector<TensorRow> kGpt2Globals = {
    {int(Global::Embed), "wte.weight", "token_embd.weight", {D::V, D::D}},
    {int(Global::Positions), "wpe.weight", "position_embd.weight", {D::Positions, D::D}},
    {int(Global::NormF), "ln_f.weight", "output_norm.weight", {D::D, D::One}},
    {int(Global::NormFB), "ln_f.bias", "output_norm.bias", {D::D, D::One}},
    {int(Global::Head), "lm_head.weight", "output.weight", {D::V, D::D}, untied},
};
const std::vector<TensorRow> kGpt2Layer = {
    {int(Slot::AttnNorm), "ln_1.weight", "attn_norm.weight", {D::D, D::One}},
    {int(Slot::AttnNormB), "ln_1.bias", "attn_norm.bias", {D::D, D::One}},
    {int(Slot::Qkv), "attn.c_attn.weight", "attn_qkv.weight", {D::Dqkv, D::D}},
    {int(Slot::QkvB), "attn.c_attn.bias", "attn_qkv.bias", {D::Dqkv, D::One}},
    {int(Slot::O), "attn.c_proj.weight", "attn_output.weight", {D::D, D::D}},
    {int(Slot::OB), "attn.c_proj.bias", "attn_output.bias", {D::D, D::One}},
    {int(Slot::MlpNorm), "ln_2.weight", "ffn_norm.weight", {D::D, D::One}},
    {int(Slot::MlpNormB), "ln_2.bias", "ffn_norm.bias", {D::D, D::One}},
    {int(Slot::Up), "mlp.c_fc.weight", "ffn_up.weight", {D::I, D::D}},
    {int(Slot::UpB), "mlp.c_fc.bias", "ffn_up.bias", {D::I, D::One}},
    {int(Slot::Down), "mlp.c_proj.weight", "ffn_down.weight", {D::D, D::I}},
    {int(Slot::DownB), "mlp.c_proj.bias", "ffn_down.bias", {D::D, D::One}},
};

// BERT (BertModel, and BertForMaskedLM's "bert." with its "cls.predictions" head). Checkpoints
// converted from TensorFlow name the LayerNorms' weight and bias gamma and beta.
const std::vector<TensorRow> kBertGlobals = {
    {int(Global::Embed), "bert.embeddings.word_embeddings.weight", nullptr, {D::V, D::D}},
    {int(Global::Positions), "bert.embeddings.position_embeddings.weight", nullptr,
     {D::Positions, D::D}},
    {int(Global::TokenTypes), "bert.embeddings.token_type_embeddings.weight", nullptr,
     {D::TypeVocab, D::D}, hasTokenTypes},
    {int(Global::EmbedNorm),
     "bert.embeddings.LayerNorm.weight|bert.embeddings.LayerNorm.gamma",
     nullptr, {D::D, D::One}},
    {int(Global::EmbedNormB),
     "bert.embeddings.LayerNorm.bias|bert.embeddings.LayerNorm.beta",
     nullptr, {D::D, D::One}},
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
    {int(Slot::Q), "attention.self.query.weight", nullptr, {D::Dq, D::D}},
    {int(Slot::QB), "attention.self.query.bias", nullptr, {D::Dq, D::One}},
    {int(Slot::K), "attention.self.key.weight", nullptr, {D::Dkv, D::D}},
    {int(Slot::KB), "attention.self.key.bias", nullptr, {D::Dkv, D::One}},
    {int(Slot::V), "attention.self.value.weight", nullptr, {D::Dkv, D::D}},
    {int(Slot::VB), "attention.self.value.bias", nullptr, {D::Dkv, D::One}},
    {int(Slot::O), "attention.output.dense.weight", nullptr, {D::D, D::Dq}},
    {int(Slot::OB), "attention.output.dense.bias", nullptr, {D::D, D::One}},
    {int(Slot::PostAttnNorm),
     "attention.output.LayerNorm.weight|attention.output.LayerNorm.gamma",
     nullptr, {D::D, D::One}},
    {int(Slot::PostAttnNormB),
     "attention.output.LayerNorm.bias|attention.output.LayerNorm.beta",
     nullptr, {D::D, D::One}},
    {int(Slot::Up), "intermediate.dense.weight", nullptr, {D::I, D::D}},
    {int(Slot::UpB), "intermediate.dense.bias", nullptr, {D::I, D::One}},
    {int(Slot::Down), "output.dense.weight", nullptr, {D::D, D::I}},
    {int(Slot::DownB), "output.dense.bias", nullptr, {D::D, D::One}},
    {int(Slot::PostMlpNorm),
     "output.LayerNorm.weight|output.LayerNorm.gamma",
     nullptr, {D::D, D::One}},
    {int(Slot::PostMlpNormB),
     "output.LayerNorm.bias|output.LayerNorm.beta",
     nullptr, {D::D, D::One}},
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

// ModernBERT (ModernBertForMaskedLM: "model." and the head outside it; ModernBertModel:
// without "model.").
const std::vector<TensorRow> kModernbertGlobals = {
    {int(Global::Embed), "model.embeddings.tok_embeddings.weight", nullptr, {D::V, D::D}},
    {int(Global::EmbedNorm), "model.embeddings.norm.weight", nullptr, {D::D, D::One}},
    {int(Global::NormF), "model.final_norm.weight", nullptr, {D::D, D::One}},
    {int(Global::HeadDense), "head.dense.weight", nullptr, {D::D, D::D}, nullptr, true},
    {int(Global::HeadNorm), "head.norm.weight", nullptr, {D::D, D::One}, nullptr, true},
    {int(Global::HeadBias), "decoder.bias", nullptr, {D::V, D::One}, nullptr, true},
    {int(Global::Head), "decoder.weight", nullptr, {D::V, D::D}, untied},
};
const std::vector<TensorRow> kModernbertLayer = {
    {int(Slot::Qkv), "attn.Wqkv.weight", nullptr, {D::Dqkv, D::D}},
    {int(Slot::AttnNorm), "attn_norm.weight", nullptr, {D::D, D::One}, nullptr, false, 1},
    {int(Slot::O), "attn.Wo.weight", nullptr, {D::D, D::Dq}},
    {int(Slot::MlpNorm), "mlp_norm.weight", nullptr, {D::D, D::One}},
    {int(Slot::GateUp), "mlp.Wi.weight", nullptr, {D::I2, D::D}},
    {int(Slot::Down), "mlp.Wo.weight", nullptr, {D::D, D::I}},
};

// T5 (T5ForConditionalGeneration; T5Model the same without lm_head).
const std::vector<TensorRow> kT5Globals = {
    {int(Global::Embed), "shared.weight|encoder.embed_tokens.weight|decoder.embed_tokens.weight",
     nullptr, {D::V, D::D}},
    {int(Global::RelBias), "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     nullptr, {D::Buckets, D::H}},
    {int(Global::EncRelBias),
     "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", nullptr,
     {D::Buckets, D::H}},
    {int(Global::NormF), "decoder.final_layer_norm.weight", nullptr, {D::D, D::One}},
    {int(Global::EncNormF), "encoder.final_layer_norm.weight", nullptr, {D::D, D::One}},
    {int(Global::Head), "lm_head.weight", nullptr, {D::V, D::D}},
};
// A T5 attention ("SelfAttention", "EncDecAttention") of sub-layer k: its norm and q, k, v, o.
std::vector<TensorRow> t5Attention(int k, const char* name, std::array<Slot, 5> slots) {
  static std::deque<std::string> names;  // the table keeps const char*: the strings live here
  auto keep = [&](const std::string& s) { return names.emplace_back(s).c_str(); };
  const std::string pre = "layer." + std::to_string(k) + ".";
  return {{int(slots[0]), keep(pre + "layer_norm.weight"), nullptr, {D::D, D::One}},
          {int(slots[1]), keep(pre + name + ".q.weight"), nullptr, {D::Dq, D::D}},
          {int(slots[2]), keep(pre + name + ".k.weight"), nullptr, {D::Dkv, D::D}},
          {int(slots[3]), keep(pre + name + ".v.weight"), nullptr, {D::Dkv, D::D}},
          {int(slots[4]), keep(pre + name + ".o.weight"), nullptr, {D::D, D::Dq}}};
}
// Its feed-forward sub-layer k: wi (ReLU) or wi_0 (activated) and wi_1 (gated), then wo.
std::vector<TensorRow> t5Mlp(int k) {
  static std::deque<std::string> names;
  auto keep = [&](const std::string& s) { return names.emplace_back(s).c_str(); };
  const std::string pre = "layer." + std::to_string(k) + ".";
  return {{int(Slot::MlpNorm), keep(pre + "layer_norm.weight"), nullptr, {D::D, D::One}},
          {int(Slot::Up), keep(pre + "DenseReluDense.wi.weight"), nullptr, {D::I, D::D}, plainMlp},
          {int(Slot::Gate), keep(pre + "DenseReluDense.wi_0.weight"), nullptr, {D::I, D::D},
           gatedMlp},
          {int(Slot::Up), keep(pre + "DenseReluDense.wi_1.weight"), nullptr, {D::I, D::D},
           gatedMlp},
          {int(Slot::Down), keep(pre + "DenseReluDense.wo.weight"), nullptr, {D::D, D::I}}};
}
const std::array<Slot, 5> kT5Self = {Slot::AttnNorm, Slot::Q, Slot::K, Slot::V, Slot::O};
const std::array<Slot, 5> kT5Cross = {Slot::XNorm, Slot::XQ, Slot::XK, Slot::XV, Slot::XO};

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

const char* kLlamaPrefix = "model.";
const char* kLlamaLayers = "model.layers.{}.";

const std::vector<FamilyRow>& table() {
  static const std::vector<FamilyRow> rows = {
      {"gpt2", "gpt2", gpt2Json, gpt2Gguf, "", "transformer.", "h.{}.", kGpt2Globals, kGpt2Layer,
       true, "n_positions"},
      {"llama", "llama", llamaJson, llamaGguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kLlamaLayer},
      {"mistral", nullptr, mistralJson, nullptr, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kLlamaLayer},
      {"qwen2", "qwen2", qwen2Json, qwen2Gguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kLlamaLayer},
      {"qwen3", nullptr, qwen3Json, nullptr, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       join({kLlamaLayer, kQkNormPerHead})},
      {"gemma2", nullptr, gemma2Json, nullptr, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       join({kGemmaNorms, llamaAttention(), llamaMlp()})},
      {"gemma3_text", nullptr, gemma3Json, nullptr, kLlamaPrefix, "", kLlamaLayers,
       kLlamaGlobals, join({kGemmaNorms, kQkNormPerHead, llamaAttention(), llamaMlp()})},
      {"phi3", nullptr, phi3Json, nullptr, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kPhi3Layer},
      {"olmo2", nullptr, olmo2Json, nullptr, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       join({kOlmo2Norms, llamaAttention(), llamaMlp()})},
      {"bert", nullptr, bertJson, nullptr, "bert.", "", "bert.encoder.layer.{}.", kBertGlobals,
       kBertLayer},
      {"roberta", nullptr, robertaJson, nullptr, "roberta.", "", "roberta.encoder.layer.{}.",
       kRobertaGlobals, kBertLayer},
      {"distilbert", nullptr, distilbertJson, nullptr, "distilbert.", "",
       "distilbert.transformer.layer.{}.", kDistilbertGlobals, kDistilbertLayer},
      {"modernbert", nullptr, modernbertJson, nullptr, "model.", "", "model.layers.{}.",
       kModernbertGlobals, kModernbertLayer},
      {"t5", nullptr, t5Json, nullptr, "", "", "decoder.block.{}.", kT5Globals,
       join({t5Attention(0, "SelfAttention", kT5Self), t5Attention(1, "EncDecAttention", kT5Cross),
             t5Mlp(2)}),
       false, "n_positions", "encoder.block.{}.",
       join({t5Attention(0, "SelfAttention", kT5Self), t5Mlp(1)})},
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
