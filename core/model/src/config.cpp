// ModelConfig from config.json: the keys every family shares, then the family's row
// (family_table.cpp); the block description's helpers.
#include "attnviz/formats/fileio.h"
#include "model_internal.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <sstream>

namespace attnviz {

using nlohmann::json;

namespace json_keys {

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

std::string optionalString(const json& j, const std::string& path, const char* key,
                           const std::string& fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) throw InputError(path + ": \"" + key + "\" must be a string");
  return j[key].get<std::string>();
}

}  // namespace json_keys

using namespace json_keys;

namespace {

// config.json's bos_token_id / eos_token_id: a number, or (Llama 3) a list of them.
std::vector<int> tokenIds(const json& j, const char* key) {
  std::vector<int> out;
  if (!j.contains(key)) return out;
  auto one = [&](const json& v) {
    if (v.is_number_integer() && v.get<long long>() >= 0 && v.get<long long>() < (1 << 30))
      out.push_back(v.get<int>());
  };
  if (j[key].is_array()) {
    for (const json& v : j[key]) one(v);
  } else {
    one(j[key]);
  }
  return out;
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

}  // namespace

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

namespace {

// One RoPE object: {"rope_type" (or "type"), "factor", ...}; `what` names it in errors.
void parseRopeObject(const json& rs, const std::string& what, ModelConfig& c,
                     const std::string& path) {
  if (!rs.is_object()) throw InputError(path + ": \"" + what + "\" must be an object or null");
  std::string type;
  if (rs.contains("rope_type") && rs["rope_type"].is_string()) {
    type = rs["rope_type"].get<std::string>();
  } else if (rs.contains("type") && rs["type"].is_string()) {
    type = rs["type"].get<std::string>();
  }
  RopeScaling& s = c.ropeScaling;
  if (type == "default" || type.empty()) return;
  s.factor = float(optionalNumber(rs, path, "factor", 1.0, 0.0, 1e6));
  if (type == "linear") {
    s.kind = RopeScaling::Kind::Linear;
  } else if (type == "llama3") {
    s.kind = RopeScaling::Kind::Llama3;
    s.lowFreqFactor = float(optionalNumber(rs, path, "low_freq_factor", 1.0, 0.0, 1e6));
    s.highFreqFactor = float(optionalNumber(rs, path, "high_freq_factor", 4.0, 0.0, 1e6));
    s.originalMaxPositions = optionalInt(rs, path, "original_max_position_embeddings", 8192);
    if (!(s.highFreqFactor > s.lowFreqFactor)) {
      throw InputError(path + ": " + what + ": high_freq_factor must be above low_freq_factor");
    }
  } else if (type == "longrope" || type == "su") {
    s.kind = RopeScaling::Kind::LongRope;  // the factors and lengths: longRope below
  } else {
    throw InputError(path + ": " + what + " type \"" + type +
                     "\" is not supported (linear, llama3, longrope)");
  }
}

// LongRoPE's keys, as transformers' _compute_longrope_parameters reads them: short_factor and
// long_factor (one per rotated pair), original_max_position_embeddings (in the object, or
// config.json's own key; else max_position_embeddings), attention_factor (else
// sqrt(1 + ln(s) / ln(original)) with s = max_position_embeddings / original, 1 when s <= 1;
// without an original length, s is the object's "factor").
void longRope(const json& j, const json& rs, const std::string& what, ModelConfig& c,
              const std::string& path) {
  RopeScaling& s = c.ropeScaling;
  const int pairs = c.ropeDim / 2;
  auto factors = [&](const char* key) {
    const json* v = lookup(rs, {key});
    if (!v || !v->is_array() || int(v->size()) != pairs) {
      throw InputError(path + ": " + what + "." + key + " must list " + std::to_string(pairs) +
                       " numbers (one per rotated pair of a head)");
    }
    std::vector<float> out;
    for (const json& x : *v) {
      if (!x.is_number() || !(x.get<double>() > 0) || !std::isfinite(x.get<double>())) {
        throw InputError(path + ": " + what + "." + key + " holds " + x.dump() +
                         " (each factor must be a finite number > 0)");
      }
      out.push_back(float(x.get<double>()));
    }
    return out;
  };
  s.shortFactor = factors("short_factor");
  s.longFactor = factors("long_factor");
  const bool inObject = lookup(rs, {"original_max_position_embeddings"}) != nullptr;
  const bool given = inObject || lookup(j, {"original_max_position_embeddings"}) != nullptr;
  double scale = s.factor;
  if (given) {
    s.originalMaxPositions =
        inObject ? requireInt(rs, path, {"original_max_position_embeddings"})
                 : requireInt(j, path, {"original_max_position_embeddings"});
    scale = double(c.nPositions) / double(s.originalMaxPositions);
  } else {
    s.originalMaxPositions = c.nPositions;
  }
  if (const json* af = lookup(rs, {"attention_factor"})) {
    s.attentionFactor = float(optionalNumber(rs, path, "attention_factor", 1.0, 0.0, 1e6));
    (void)af;
  } else if (scale > 1.0 && s.originalMaxPositions > 1) {
    s.attentionFactor =
        float(std::sqrt(1.0 + std::log(scale) / std::log(double(s.originalMaxPositions))));
  } else {
    s.attentionFactor = 1.0f;
  }
}

// transformers 5's rope_parameters: one object, or one per layer type (Gemma 3).
bool perLayerType(const json& rp) {
  return rp.is_object() && (rp.contains("full_attention") || rp.contains("sliding_attention"));
}

}  // namespace

void parseRopeScaling(const json& j, ModelConfig& c, const std::string& path) {
  // Configs written by transformers 5 say RoPE's base and scaling as rope_parameters
  // ({"rope_type", "rope_theta", "factor", ...}), or as one such object per layer type
  // ("full_attention", "sliding_attention"): the full layers' sets the model's base and scaling,
  // the sliding layers' is read by the families with local layers (localRopeTheta).
  if (const json* rp = lookup(j, {"rope_parameters"})) {
    if (!rp->is_object()) throw InputError(path + ": \"rope_parameters\" must be an object");
    const json* one = rp;
    std::string what = "rope_parameters";
    if (perLayerType(*rp)) {
      static const json none = json::object();
      one = rp->contains("full_attention") ? &(*rp)["full_attention"] : &none;
      what += ".full_attention";
      if (!one->is_object()) throw InputError(path + ": \"" + what + "\" must be an object");
    }
    c.ropeTheta = float(optionalNumber(*one, path, "rope_theta", c.ropeTheta, 1.0, 1e12));
    parseRopeObject(*one, what, c, path);
    if (c.ropeScaling.kind == RopeScaling::Kind::LongRope) longRope(j, *one, what, c, path);
    return;
  }
  const json* rs = lookup(j, {"rope_scaling"});
  if (!rs) return;
  parseRopeObject(*rs, "rope_scaling", c, path);
  if (c.ropeScaling.kind == RopeScaling::Kind::LongRope) longRope(j, *rs, "rope_scaling", c, path);
}

std::optional<float> localRopeTheta(const json& j, const std::string& path) {
  const json* rp = lookup(j, {"rope_parameters"});
  if (!rp || !perLayerType(*rp) || !rp->contains("sliding_attention")) return std::nullopt;
  const json& s = (*rp)["sliding_attention"];
  const std::string what = "rope_parameters.sliding_attention";
  if (!s.is_object()) throw InputError(path + ": \"" + what + "\" must be an object");
  const std::string type = optionalString(s, path, "rope_type", "default");
  if (type != "default") {
    throw InputError(path + ": " + what + " type \"" + type +
                     "\" is not supported (the local layers rotate unscaled: default)");
  }
  return float(optionalNumber(s, path, "rope_theta", 10000.0, 1.0, 1e12));
}

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
  const FamilyRow* row = familyByName(type);
  if (!row) {
    throw InputError(path + ": model_type \"" + type + "\" is not supported (" +
                     familyNames(false) + ")");
  }
  ModelConfig c;
  c.family = row->name;
  row->fromJson(j, path, c);
  // An image-text checkpoint may say its ids in text_config only.
  const json* tc = lookup(j, {"text_config"});
  const json& ids = !j.contains("eos_token_id") && tc && tc->is_object() ? *tc : j;
  c.bosId = tokenId(j.contains("bos_token_id") ? j : ids, "bos_token_id");
  c.eosIds = tokenIds(ids, "eos_token_id");
  if (!c.eosIds.empty()) c.eosId = c.eosIds.front();
  return c;
}

void addGenerationConfig(ModelConfig& c, const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  for (int id : tokenIds(j, "eos_token_id")) {
    if (std::find(c.eosIds.begin(), c.eosIds.end(), id) == c.eosIds.end()) c.eosIds.push_back(id);
  }
  if (!c.eosId && !c.eosIds.empty()) c.eosId = c.eosIds.front();
}

const char* siteKindName(SiteKind k) {
  switch (k) {
    case SiteKind::DecoderSelf: return "self";
    case SiteKind::EncoderSelf: return "encoder self";
    case SiteKind::Cross: return "cross";
  }
  return "?";
}

std::vector<SiteKind> ModelConfig::sitesOf(int layer, int stack) const {
  if (stack < 0 || stack >= stacks() || layer < 0 || layer >= layersOf(stack)) return {};
  if (stack == 1) return {SiteKind::EncoderSelf};
  if (encoderDecoder()) return {SiteKind::DecoderSelf, SiteKind::Cross};
  return {causal ? SiteKind::DecoderSelf : SiteKind::EncoderSelf};
}

std::vector<SiteId> ModelConfig::sites() const {
  std::vector<SiteId> out;
  for (int stack = stacks() - 1; stack >= 0; --stack) {  // an encoder's stack runs first
    for (int l = 0; l < layersOf(stack); ++l) {
      const int n = static_cast<int>(sitesOf(l, stack).size());
      for (int s = 0; s < n; ++s) out.push_back({stack, l, s});
    }
  }
  return out;
}

bool ModelConfig::hasSite(const SiteId& s) const {
  return s.site >= 0 && s.site < static_cast<int>(sitesOf(s.layer, s.stack).size());
}

std::string ModelConfig::siteName(const SiteId& s) const {
  std::string name = (stacks() > 1 && s.stack == 1 ? "enc L" : "L") + std::to_string(s.layer);
  const std::vector<SiteKind> kinds = sitesOf(s.layer, s.stack);
  if (kinds.size() > 1 && s.site >= 0 && s.site < static_cast<int>(kinds.size())) {
    name += std::string(" ") + siteKindName(kinds[s.site]);
  }
  return name;
}

bool ModelConfig::isEos(int id) const {
  if (eosId && *eosId == id) return true;
  return std::find(eosIds.begin(), eosIds.end(), id) != eosIds.end();
}

std::vector<double> ModelConfig::ropeInvFreq(int layer, int seqLen) const {
  const int pairs = ropeDim / 2;
  const float theta = ropeThetaOf(layer);
  std::vector<double> f(pairs);
  for (int i = 0; i < pairs; ++i) {
    // HF computes theta^(-2i/d) in float32; so does this, for agreement to the last bit.
    f[i] = double(1.0f / std::pow(theta, float(2 * i) / float(ropeDim)));
  }
  // Gemma 3: the local layers use their own base without the scaling.
  if (!scaleLocalRope && layer >= 0 && windowOf(layer) > 0) return f;
  if (ropeScaling.kind == RopeScaling::Kind::LongRope) {
    // As transformers computes it: 1 / (factor * theta^(2i/d)), in float32; the long factors once
    // the sequence passes the original length.
    const std::vector<float>& ext = seqLen > ropeScaling.originalMaxPositions
                                        ? ropeScaling.longFactor
                                        : ropeScaling.shortFactor;
    for (int i = 0; i < pairs && i < int(ext.size()); ++i)
      f[i] = double(1.0f / (ext[i] * std::pow(theta, float(2 * i) / float(ropeDim))));
    return f;
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

float ModelConfig::ropeAttentionFactor(int layer) const {
  if (ropeScaling.kind != RopeScaling::Kind::LongRope) return 1.0f;
  if (!scaleLocalRope && layer >= 0 && windowOf(layer) > 0) return 1.0f;
  return ropeScaling.attentionFactor;
}

std::string ModelConfig::describe() const {
  std::ostringstream o;
  char buf[96];
  o << family << ": " << nLayer << " layers";
  if (nEncoderLayer > 0) o << " (decoder) and " << nEncoderLayer << " encoder layers";
  o << ", " << nHead << " query heads, " << nKvHead << " KV heads";
  if (nKvHead == 1 && nHead > 1) {
    o << " (MQA)";
  } else if (nKvHead < nHead) {
    o << " (GQA, " << kvGroup() << " per group)";
  }
  o << ", d = " << nEmbd << ", head size " << headSize << ", MLP " << nInner << ", vocab "
    << vocabSize << ", context " << nPositions;
  o << ", " << (norm == NormKind::RMSNorm ? "RMSNorm" : "LayerNorm");
  switch (positions) {
    case PositionKind::Rope:
      std::snprintf(buf, sizeof buf, "%g", double(ropeTheta));
      o << ", RoPE \xce\xb8 = " << buf << " ("
        << (ropeStyle == RopeStyle::HalfSplit ? "rotate-half" : "adjacent pairs") << ")";
      if (ropeDim > 0 && ropeDim < headSize) {
        o << " on " << ropeDim << " of " << headSize << " dimensions (partial rotary)";
      }
      if (ropeScaling.kind == RopeScaling::Kind::Linear) {
        std::snprintf(buf, sizeof buf, ", linear scaling x%g", double(ropeScaling.factor));
        o << buf;
      } else if (ropeScaling.kind == RopeScaling::Kind::Llama3) {
        std::snprintf(buf, sizeof buf, ", llama3 scaling x%g from %d", double(ropeScaling.factor),
                      ropeScaling.originalMaxPositions);
        o << buf;
      } else if (ropeScaling.kind == RopeScaling::Kind::LongRope) {
        std::snprintf(buf, sizeof buf, ", LongRoPE (long factors past %d, cos/sin x %.4g)",
                      ropeScaling.originalMaxPositions, double(ropeScaling.attentionFactor));
        o << buf;
      }
      if (!ropeFreqFactors.empty()) o << ", per-frequency factors";
      break;
    case PositionKind::Learned: o << ", learned positions"; break;
    case PositionKind::Sinusoidal: o << ", sinusoidal positions"; break;
    case PositionKind::Relative:
      o << ", relative position buckets (" << relBuckets << ", to distance " << relMaxDistance
        << ")";
      break;
  }
  if (positionOffset > 0) o << " from " << positionOffset;
  if (typeVocabSize > 0) o << ", " << typeVocabSize << " token types";
  if (!causal && !encoderDecoder()) o << ", bidirectional";
  if (layerWindows.empty() && slidingWindow > 0) {
    o << ", sliding window " << slidingWindow;
    if (windowFromLayer > 0) o << " from layer " << windowFromLayer;
  }
  if (!layerWindows.empty()) {
    int local = 0;
    for (int w : layerWindows) local += w > 0;
    o << ", " << local << " local and " << nLayer - local << " global layers";
  }
  const std::string block = blockDescription();
  if (!block.empty()) o << ", " << block;
  o << ", " << (mlp == MlpKind::Gated ? "gated " : "") << activationName << " MLP";
  o << ", " << (tiedHead ? "tied" : "untied") << " head";
  return o.str();
}

std::string ModelConfig::blockDescription() const {
  std::vector<std::string> parts;
  switch (normPlacement) {
    case NormPlacement::Pre: break;
    case NormPlacement::Sandwich: parts.push_back("norms before and after each sub-block"); break;
    case NormPlacement::After: parts.push_back("norms after each sub-block"); break;
    case NormPlacement::Post: parts.push_back("post-norm"); break;
  }
  if (qkNorm == QkNorm::PerHead) parts.push_back("q/k RMSNorm per head");
  if (qkNorm == QkNorm::Whole) parts.push_back("q/k RMSNorm over the whole width");
  char buf[96];
  if (scoreScale > 0 &&
      std::fabs(scoreScale * std::sqrt(float(headSize)) - 1.0f) > 1e-6f) {  // not the usual
    std::snprintf(buf, sizeof buf, "scores x %.4g (not 1/sqrt(%d))", double(scoreScale), headSize);
    parts.push_back(buf);
  }
  if (attnSoftcap > 0) {
    std::snprintf(buf, sizeof buf, "scores soft-capped at %g", double(attnSoftcap));
    parts.push_back(buf);
  }
  if (logitSoftcap > 0) {
    std::snprintf(buf, sizeof buf, "logits soft-capped at %g", double(logitSoftcap));
    parts.push_back(buf);
  }
  if (embedScale != 1.0f) {
    std::snprintf(buf, sizeof buf, "embeddings x %.4g", double(embedScale));
    parts.push_back(buf);
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string ModelConfig::layerDescription(int layer) const {
  std::string out = windowOf(layer) > 0 ? "local, window " + std::to_string(windowOf(layer))
                                        : std::string(causal ? "global" : "global (bidirectional)");
  if (positions == PositionKind::Rope) {
    char buf[48];
    std::snprintf(buf, sizeof buf, ", RoPE \xce\xb8 = %g", double(ropeThetaOf(layer)));
    out += buf;
  }
  if (attnSoftcap > 0) out += ", softcap " + std::to_string(int(attnSoftcap));
  return out;
}

}  // namespace attnviz
