// ModelConfig: the family table, filled from config.json.
#include "attnviz/formats/fileio.h"
#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace attnviz {

namespace {

using nlohmann::json;

const json* lookup(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (j.contains(k) && !j[k].is_null()) return &j[k];
  }
  return nullptr;
}

int requireInt(const json& j, const std::string& path, std::initializer_list<const char*> keys) {
  const json* v = lookup(j, keys);
  const char* key = *keys.begin();
  if (!v) throw InputError(path + ": missing \"" + key + "\"");
  if (!v->is_number_integer() || v->get<long long>() < 1 || v->get<long long>() > (1 << 24)) {
    throw InputError(path + ": \"" + key + "\" must be an integer between 1 and 16777216");
  }
  return v->get<int>();
}

int optionalInt(const json& j, const std::string& path, const char* key, int fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return requireInt(j, path, {key});
}

double optionalNumber(const json& j, const std::string& path, const char* key, double fallback,
                      double lo, double hi) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const json& v = j[key];
  if (!v.is_number() || !(v.get<double>() > lo && v.get<double>() < hi)) {
    throw InputError(path + ": \"" + key + "\" must be a number between " + std::to_string(lo) +
                     " and " + std::to_string(hi));
  }
  return v.get<double>();
}

bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

std::optional<int> tokenId(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  const json* v = &j[key];
  if (v->is_array() && !v->empty()) v = &(*v)[0];  // Llama 3: a list of EOS ids
  if (v->is_number_integer() && v->get<long long>() >= 0 && v->get<long long>() < (1 << 30)) {
    return v->get<int>();
  }
  return std::nullopt;
}

void parseActivation(ModelConfig& c, const std::string& path) {
  const std::string& a = c.activationName;
  if (a == "gelu_new" || a == "gelu_fast" || a == "gelu_pytorch_tanh") {
    c.activation = Activation::GeluTanh;
  } else if (a == "gelu") {
    c.activation = Activation::GeluErf;
  } else if (a == "relu") {
    c.activation = Activation::Relu;
  } else if (a == "silu" || a == "swish") {
    c.activation = Activation::Silu;
  } else {
    throw InputError(path + ": activation \"" + a +
                     "\" is not supported (gelu_new, gelu, gelu_fast, gelu_pytorch_tanh, relu, "
                     "silu)");
  }
}

ModelConfig parseGpt2(const json& j, const std::string& path) {
  ModelConfig c;
  c.family = "gpt2";
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
  if (j.contains("activation_function")) {
    if (!j["activation_function"].is_string()) {
      throw InputError(path + ": \"activation_function\" must be a string");
    }
    c.activationName = j["activation_function"].get<std::string>();
  }
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
  c.bosId = tokenId(j, "bos_token_id");
  c.eosId = tokenId(j, "eos_token_id");
  return c;
}

void parseRopeScaling(const json& j, ModelConfig& c, const std::string& path) {
  const json* rs = lookup(j, {"rope_scaling"});
  if (!rs) return;
  if (!rs->is_object()) throw InputError(path + ": \"rope_scaling\" must be an object or null");
  std::string type;
  if (rs->contains("rope_type") && (*rs)["rope_type"].is_string()) {
    type = (*rs)["rope_type"].get<std::string>();
  } else if (rs->contains("type") && (*rs)["type"].is_string()) {
    type = (*rs)["type"].get<std::string>();
  }
  RopeScaling& s = c.ropeScaling;
  if (type == "default" || type.empty()) return;
  s.factor = float(optionalNumber(*rs, path, "factor", 1.0, 0.0, 1e6));
  if (type == "linear") {
    s.kind = RopeScaling::Kind::Linear;
  } else if (type == "llama3") {
    s.kind = RopeScaling::Kind::Llama3;
    s.lowFreqFactor = float(optionalNumber(*rs, path, "low_freq_factor", 1.0, 0.0, 1e6));
    s.highFreqFactor = float(optionalNumber(*rs, path, "high_freq_factor", 4.0, 0.0, 1e6));
    s.originalMaxPositions = optionalInt(*rs, path, "original_max_position_embeddings", 8192);
    if (!(s.highFreqFactor > s.lowFreqFactor)) {
      throw InputError(path + ": rope_scaling: high_freq_factor must be above low_freq_factor");
    }
  } else {
    throw InputError(path + ": rope_scaling type \"" + type +
                     "\" is not supported (linear, llama3)");
  }
}

ModelConfig parseLlama(const json& j, const std::string& path, const std::string& type) {
  ModelConfig c;
  c.family = type;
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
  c.activationName = "silu";
  if (j.contains("hidden_act")) {
    if (!j["hidden_act"].is_string()) throw InputError(path + ": \"hidden_act\" must be a string");
    c.activationName = j["hidden_act"].get<std::string>();
  }
  parseActivation(c, path);
  c.tiedHead = flag(j, "tie_word_embeddings", false);
  const bool attentionBias = flag(j, "attention_bias", false);
  c.qkvBias = attentionBias || type == "qwen2";
  c.outBias = attentionBias;
  c.mlpBias = flag(j, "mlp_bias", false);
  if (type == "mistral") {
    c.slidingWindow = optionalInt(j, path, "sliding_window", 0);
  } else if (type == "qwen2") {
    if (flag(j, "use_sliding_window", false)) {
      c.slidingWindow = optionalInt(j, path, "sliding_window", 0);
      c.windowFromLayer = optionalInt(j, path, "max_window_layers", 0);
    }
  }
  c.bosId = tokenId(j, "bos_token_id");
  c.eosId = tokenId(j, "eos_token_id");
  return c;
}

}  // namespace

ModelConfig loadModelConfig(const std::string& path) {
  return parseModelConfig(readFile(path), path);
}

ModelConfig parseModelConfig(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InputError(path + ": expected a JSON object");
  std::string type = "gpt2";
  if (j.contains("model_type")) {
    if (!j["model_type"].is_string()) throw InputError(path + ": \"model_type\" must be a string");
    type = j["model_type"].get<std::string>();
  }
  if (type == "gpt2") return parseGpt2(j, path);
  if (type == "llama" || type == "mistral" || type == "qwen2") return parseLlama(j, path, type);
  throw InputError(path + ": model_type \"" + type +
                   "\" is not supported (gpt2, llama, mistral, qwen2)");
}

std::vector<double> ModelConfig::ropeInvFreq() const {
  const int pairs = ropeDim / 2;
  std::vector<double> f(pairs);
  for (int i = 0; i < pairs; ++i) {
    // HF computes theta^(-2i/d) in float32; so does this, for agreement to the last bit.
    f[i] = double(1.0f / std::pow(ropeTheta, float(2 * i) / float(ropeDim)));
  }
  if (!ropeFreqFactors.empty()) {
    for (int i = 0; i < pairs && i < int(ropeFreqFactors.size()); ++i)
      f[i] = double(float(f[i]) / ropeFreqFactors[i]);
  }
  const RopeScaling& s = ropeScaling;
  if (s.kind == RopeScaling::Kind::Linear) {
    for (double& x : f) x /= s.factor;
  } else if (s.kind == RopeScaling::Kind::Llama3) {
    // Llama 3.1: long wavelengths slowed by the factor, short ones kept, a smooth band between.
    const double lowWave = s.originalMaxPositions / s.lowFreqFactor;
    const double highWave = s.originalMaxPositions / s.highFreqFactor;
    for (double& x : f) {
      const double wave = 2.0 * M_PI / x;
      if (wave < highWave) continue;
      if (wave > lowWave) {
        x /= s.factor;
      } else {
        const double smooth = (s.originalMaxPositions / wave - s.lowFreqFactor) /
                              (s.highFreqFactor - s.lowFreqFactor);
        x = (1.0 - smooth) * x / s.factor + smooth * x;
      }
    }
  }
  return f;
}

std::string ModelConfig::describe() const {
  std::ostringstream o;
  o << family << ": " << nLayer << " layers, " << nHead << " query heads, " << nKvHead
    << " KV heads";
  if (nKvHead == 1 && nHead > 1) {
    o << " (MQA)";
  } else if (nKvHead < nHead) {
    o << " (GQA, " << kvGroup() << " per group)";
  }
  o << ", head size " << headSize << ", " << (norm == NormKind::RMSNorm ? "RMSNorm" : "LayerNorm");
  if (positions == PositionKind::Rope) {
    o << ", RoPE \xce\xb8=" << ropeTheta << " ("
      << (ropeStyle == RopeStyle::HalfSplit ? "rotate-half" : "adjacent pairs") << ")";
    if (ropeScaling.kind == RopeScaling::Kind::Linear) o << " linear x" << ropeScaling.factor;
    if (ropeScaling.kind == RopeScaling::Kind::Llama3) o << " llama3 x" << ropeScaling.factor;
  } else {
    o << ", learned positions";
  }
  if (slidingWindow > 0) o << ", sliding window " << slidingWindow;
  o << ", " << (mlp == MlpKind::Gated ? "gated " : "") << activationName << " MLP";
  o << ", " << (tiedHead ? "tied" : "untied") << " head";
  return o.str();
}

}  // namespace attnviz
