// The decoder families' rows (gpt2, llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3,
// olmo2): their config.json and GGUF readers and tensor names (family_table.cpp joins the rows).
#include "family_rows.h"

#include "attnviz/engine/ggml_kernels.h"  // GgmlType

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <deque>

namespace attnviz {

using namespace family_rows;

namespace {

using nlohmann::json;
using namespace json_keys;
using D = Dim;

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
  // Partial rotary (Phi-4-mini 0.75, StableLM, GPT-NeoX, Persimmon): the first
  // int(head_dim * factor) dimensions of each head rotate (their halves paired), the rest pass.
  if (const json* p = lookup(j, {"partial_rotary_factor"})) {
    if (!p->is_number() || !(p->get<double>() > 0 && p->get<double>() <= 1)) {
      throw InputError(path + ": \"partial_rotary_factor\" must be a number in (0, 1]");
    }
    c.ropeDim = int(double(c.headSize) * p->get<double>());
    if (c.ropeDim < 2 || c.ropeDim % 2 != 0) {
      throw InputError(path + ": partial_rotary_factor " + p->dump() + " of head_dim " +
                       std::to_string(c.headSize) + " rotates " + std::to_string(c.ropeDim) +
                       " dimensions (RoPE rotates pairs: a positive even count)");
    }
  }
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

// Gemma 3's image-text checkpoints (Gemma3ForConditionalGeneration, model_type gemma3: 4B, 12B,
// 27B): the language model is a gemma3_text model described by text_config, whose keys the
// checkpoint may leave to Gemma3TextConfig's defaults; its tensors live under
// "language_model.model." ("model.language_model." as newer transformers save them), the vision
// tower's and the projector's beside them, which are not read.
void gemma3MultimodalJson(const json& j, const std::string& path, ModelConfig& c) {
  const json* tc = lookup(j, {"text_config"});
  if (!tc || !tc->is_object()) {
    throw InputError(path + ": model_type gemma3 needs a \"text_config\" object (the language "
                     "model's)");
  }
  // transformers' Gemma3TextConfig defaults, for the keys text_config leaves out.
  json text = {{"vocab_size", 262208},
               {"hidden_size", 2304},
               {"intermediate_size", 9216},
               {"num_hidden_layers", 26},
               {"num_attention_heads", 8},
               {"num_key_value_heads", 4},
               {"head_dim", 256},
               {"hidden_activation", "gelu_pytorch_tanh"},
               {"max_position_embeddings", 131072},
               {"rms_norm_eps", 1e-6},
               {"rope_theta", 1000000.0},
               {"query_pre_attn_scalar", 256},
               {"sliding_window", 4096},
               {"rope_local_base_freq", 10000.0},
               {"sliding_window_pattern", 6},
               {"tie_word_embeddings", true}};
  for (const auto& [k, v] : tc->items()) {
    if (!v.is_null()) text[k] = v;
  }
  // A top-level tie_word_embeddings is the whole model's (the head tied to the language model's
  // embedding).
  if (const json* tie = lookup(j, {"tie_word_embeddings"}); tie && tie->is_boolean())
    text["tie_word_embeddings"] = *tie;
  if (const json* mt = lookup(text, {"model_type"});
      mt && !(mt->is_string() && mt->get<std::string>() == "gemma3_text")) {
    throw InputError(path + ": text_config.model_type " + mt->dump() +
                     " is not supported (gemma3_text)");
  }
  gemma3Json(text, path + " (text_config)", c);
  c.family = "gemma3_text";
  c.layout = "gemma3";
  c.note = lookup(j, {"vision_config"})
               ? "vision tower not loaded: the language model of a gemma3 image-text checkpoint"
               : "the language model of a gemma3 checkpoint";
}

void phi3Json(const json& j, const std::string& path, ModelConfig& c) {
  llamaStyle(j, path, c);
  c.slidingWindow = optionalInt(j, path, "sliding_window", 0);
}

void olmo2Json(const json& j, const std::string& path, ModelConfig& c) {
  llamaStyle(j, path, c);
  c.normPlacement = NormPlacement::After;
  c.qkNorm = QkNorm::Whole;
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

// The metadata keys' prefix: the row's GGUF architecture ("gemma3" for gemma3_text).
std::string ggufPrefix(const ModelConfig& c) {
  const FamilyRow* row = familyByName(c.family);
  return std::string(row && row->ggufArch ? row->ggufArch : c.family.c_str()) + ".";
}

void ropeGguf(const GgufFile& f, ModelConfig& c, RopeStyle style) {
  const std::string p = ggufPrefix(c);
  c.norm = NormKind::RMSNorm;
  c.layerNormEps = float(f.getFloat(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.positions = PositionKind::Rope;
  c.ropeStyle = style;
  c.ropeTheta = float(f.getFloat(p + "rope.freq_base").value_or(10000.0));
  c.ropeDim = ggufInt(f, p + "rope.dimension_count", c.headSize);
  // Below the head size: a partial rotary factor (the first dimension_count dimensions rotate).
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

// llama.cpp runs qwen3, gemma2, gemma3, phi3 and olmo2 with NEOX RoPE (halves) and its converter
// leaves their q/k rows as Hugging Face stores them: HalfSplit, nothing permuted.
void qwen3Gguf(const GgufFile& f, ModelConfig& c) {
  ropeGguf(f, c, RopeStyle::HalfSplit);
  c.qkNorm = QkNorm::PerHead;
}

// A metadata number that must be finite and > 0 (`positive`) or >= 0 when present.
std::optional<double> ggufNumber(const GgufFile& f, const std::string& key, bool positive) {
  const auto v = f.getFloat(key);
  if (v && (!std::isfinite(*v) || *v < 0 || (positive && *v == 0))) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *v);
    throw InputError(f.path() + ": " + key + " = " + buf + " must be a finite number " +
                     (positive ? "> 0" : ">= 0"));
  }
  return v;
}

// Gemma 2 and 3 as llama.cpp stores them. Its converter writes every norm weight with Gemma's +1
// already added (w + 1), so the file's weights are used as they are (no offset here, where the
// config.json readers use 1 + w). The embeddings are scaled by sqrt(d); the MLP is GeGLU (tanh).
// GGUF has no query_pre_attn_scalar: llama.cpp scales the scores by 1/sqrt(d / heads) for the
// 27B models (`bigLayers` layers: 46 for Gemma 2, 62 for Gemma 3) and by 1/sqrt(head size) for the
// others. Local layers: `attention.sliding_window_pattern` when the file has it (a period p:
// layer l is local iff l % p < p - 1; or one flag a layer, true = local), else the family's
// period (2 for Gemma 2: the even layers; 6 for Gemma 3).
void gemmaGguf(const GgufFile& f, ModelConfig& c, int window, int period, int bigLayers) {
  const std::string p = ggufPrefix(c);
  ropeGguf(f, c, RopeStyle::HalfSplit);
  c.activation = Activation::GeluTanh;
  c.activationName = "gelu_pytorch_tanh";
  c.normPlacement = NormPlacement::Sandwich;
  c.normWeightOffset = 0.0f;
  c.embedScale = std::sqrt(float(c.nEmbd));
  c.scoreScale = c.nLayer == bigLayers ? float(1.0 / std::sqrt(double(c.nEmbd / c.nHead))) : 0.0f;
  c.slidingWindow = 0;
  c.layerWindows.assign(std::size_t(c.nLayer), 0);
  if (window <= 0) return;
  const std::string key = p + "attention.sliding_window_pattern";
  const GgufValue* v = f.find(key);
  if (v && v->type == GgufValueType::Array) {
    const std::vector<std::int64_t> flags = *f.getIntArray(key);
    if (int(flags.size()) != c.nLayer) {
      throw InputError(f.path() + ": " + key + " must hold one flag for each of the " +
                       std::to_string(c.nLayer) + " layers (it holds " +
                       std::to_string(flags.size()) + ")");
    }
    for (int l = 0; l < c.nLayer; ++l)
      if (flags[std::size_t(l)] != 0) c.layerWindows[l] = window;
    return;
  }
  if (v) period = ggufInt(f, key);
  for (int l = 0; l < c.nLayer; ++l)
    if (l % period < period - 1) c.layerWindows[l] = window;
}

void gemma2Gguf(const GgufFile& f, ModelConfig& c) {
  const std::string p = ggufPrefix(c);
  // llama.cpp's defaults when the keys are absent: window 4096, caps 50 and 30; it always caps.
  const int window = ggufInt(f, p + "attention.sliding_window", 4096);
  gemmaGguf(f, c, window, 2, 46);
  c.attnSoftcap = float(ggufNumber(f, p + "attn_logit_softcapping", true).value_or(50.0));
  c.logitSoftcap = float(ggufNumber(f, p + "final_logit_softcapping", true).value_or(30.0));
}

void gemma3Gguf(const GgufFile& f, ModelConfig& c) {
  const std::string p = ggufPrefix(c);
  // No window (key absent or 0): every layer global, as llama.cpp reads it.
  int window = 0;
  if (const auto w = f.getInt(p + "attention.sliding_window"); w && *w != 0)
    window = ggufInt(f, p + "attention.sliding_window");
  gemmaGguf(f, c, window, 6, 62);
  c.qkNorm = QkNorm::PerHead;
  // Gemma 3 has no attention cap unless the file says one (llama.cpp's own gemma3 graph applies
  // none); the final cap is optional (0 = none).
  c.attnSoftcap = float(ggufNumber(f, p + "attn_logit_softcapping", false).value_or(0.0));
  c.logitSoftcap = float(ggufNumber(f, p + "final_logit_softcapping", false).value_or(0.0));
  // The local layers rotate with their own base (llama.cpp: 10000 unless rope.freq_base_swa
  // says otherwise) and without the global layers' scaling.
  localRope(c, float(ggufNumber(f, p + "rope.freq_base_swa", true).value_or(10000.0)));
}

void phi3Gguf(const GgufFile& f, ModelConfig& c) {
  const std::string p = ggufPrefix(c);
  ropeGguf(f, c, RopeStyle::HalfSplit);
  // Phi-3's LongRoPE (the 128k models and Phi-4-mini), as llama.cpp stores it: the factors as two
  // F32 tensors of one value per rotated pair, the original length and the attention factor as
  // keys. Which factors apply follows transformers (the sequence's length against the original
  // length), as config.json's rope_scaling "longrope" does.
  const GgufTensor* longT = f.findTensor("rope_factors_long.weight");
  const GgufTensor* shortT = f.findTensor("rope_factors_short.weight");
  if (longT || shortT) {
    if (!longT || !shortT) {
      throw InputError(f.path() + ": LongRoPE needs both tensors 'rope_factors_long.weight' and "
                       "'rope_factors_short.weight' (one is missing)");
    }
    RopeScaling& s = c.ropeScaling;
    auto factors = [&](const GgufTensor& t, const char* name) {
      if (t.type != std::uint32_t(GgmlType::F32) || t.count() != c.ropeDim / 2) {
        throw InputError(f.path() + ": tensor '" + name + "' must be F32 with " +
                         std::to_string(c.ropeDim / 2) + " values (one per rotated pair)");
      }
      std::vector<float> v = f.dequantize(t);
      for (float x : v)
        if (!(x > 0) || !std::isfinite(x))
          throw InputError(f.path() + ": tensor '" + name +
                           "' holds a factor that is not a finite number > 0");
      return v;
    };
    s.kind = RopeScaling::Kind::LongRope;
    s.longFactor = factors(*longT, "rope_factors_long.weight");
    s.shortFactor = factors(*shortT, "rope_factors_short.weight");
    const auto orig = f.getInt(p + "rope.scaling.original_context_length");
    if (!orig || *orig < 1 || *orig > (1 << 30)) {
      throw InputError(f.path() + ": LongRoPE needs " + p +
                       "rope.scaling.original_context_length (a length >= 1)");
    }
    s.originalMaxPositions = int(*orig);
    s.attentionFactor = float(f.getFloat(p + "rope.scaling.attn_factor").value_or(1.0));
    if (!(s.attentionFactor > 0) || !std::isfinite(s.attentionFactor)) {
      throw InputError(f.path() + ": " + p + "rope.scaling.attn_factor must be a finite number > 0");
    }
  }
  // The window, when the file has one, applies to every layer (as config.json's sliding_window;
  // llama.cpp currently runs Phi-3 without it).
}

void olmo2Gguf(const GgufFile& f, ModelConfig& c) {
  const std::string p = ggufPrefix(c);
  ropeGguf(f, c, RopeStyle::HalfSplit);
  c.normPlacement = NormPlacement::After;
  c.qkNorm = QkNorm::Whole;
  if (c.slidingWindow > 0) {
    throw InputError(f.path() + ": " + p + "attention.sliding_window " +
                     std::to_string(c.slidingWindow) +
                     " (OLMo 3's local layers) is not supported for olmo2 (none)");
  }
}

// ---- The tensors of each layout

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
const char* kLlamaPrefix = "model.";
const char* kLlamaLayers = "model.layers.{}.";

// Gemma 3's image-text checkpoints: the language model's tensors under "language_model.model."
// (the prefix other checkpoints replace by "model.language_model."), its head as
// "language_model.lm_head.weight" or "lm_head.weight".
const std::vector<TensorRow> kGemma3MultimodalGlobals = {
    {int(Global::Embed), "language_model.model.embed_tokens.weight", nullptr, {D::V, D::D}},
    {int(Global::NormF), "language_model.model.norm.weight", nullptr, {D::D, D::One}},
    {int(Global::Head), "language_model.lm_head.weight|lm_head.weight", nullptr, {D::V, D::D},
     untied},
};

}  // namespace

std::vector<FamilyRow> family_rows::decoders() {
  return {
      {"gpt2", "gpt2", gpt2Json, gpt2Gguf, "", "transformer.", "h.{}.", kGpt2Globals, kGpt2Layer,
       true, "n_positions"},
      {"llama", "llama", llamaJson, llamaGguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kLlamaLayer},
      {"mistral", nullptr, mistralJson, nullptr, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kLlamaLayer},
      {"qwen2", "qwen2", qwen2Json, qwen2Gguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kLlamaLayer},
      {"qwen3", "qwen3", qwen3Json, qwen3Gguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       join({kLlamaLayer, kQkNormPerHead})},
      {"gemma2", "gemma2", gemma2Json, gemma2Gguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       join({kGemmaNorms, llamaAttention(), llamaMlp()})},
      {"gemma3_text", "gemma3", gemma3Json, gemma3Gguf, kLlamaPrefix, "", kLlamaLayers,
       kLlamaGlobals, join({kGemmaNorms, kQkNormPerHead, llamaAttention(), llamaMlp()})},
      {"gemma3", nullptr, gemma3MultimodalJson, nullptr, "language_model.model.",
       "model.language_model.", "language_model.model.layers.{}.", kGemma3MultimodalGlobals,
       join({kGemmaNorms, kQkNormPerHead, llamaAttention(), llamaMlp()})},
      {"phi3", "phi3", phi3Json, phi3Gguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       kPhi3Layer},
      {"olmo2", "olmo2", olmo2Json, olmo2Gguf, kLlamaPrefix, "", kLlamaLayers, kLlamaGlobals,
       join({kOlmo2Norms, llamaAttention(), llamaMlp()})},
  };
}

}  // namespace attnviz
