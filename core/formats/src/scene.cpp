// Scenes: the JSON format (sceneFromJson, sceneToJson, the view object), the names of modes and
// archetypes, and the default scene. The synthetic inputs a scene's text gives are
// core/session's (attnviz/session/scene_inputs.h).
#include "attnviz/engine/request_grammar.h"
#include "attnviz/formats/scene.h"

#include "attnviz/formats/data_dir.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/engine/mask_expr.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace attnviz {

namespace {

using json = nlohmann::json;

// Painted cells are a T_q x T_k matrix, so they stay within materialised sizes (the text itself
// may be as long as kMaxSceneTokens).
constexpr int kMaxTokens = 8192;

struct NameTable {
  const char* name;
  int value;
};
constexpr NameTable kModes[] = {{"self", 0}, {"causal", 1}, {"cross", 2}, {"decode", 3}};
constexpr NameTable kArchetypes[] = {{"previous-token", 0}, {"first-token", 1}, {"same-token", 2},
                                     {"local-window", 3},   {"broad", 4},       {"random", 5}};

int lookup(const NameTable* table, std::size_t n, const std::string& s, const char* what) {
  for (std::size_t i = 0; i < n; ++i)
    if (s == table[i].name) return table[i].value;
  std::string expected;
  for (std::size_t i = 0; i < n; ++i) expected += std::string(i ? ", " : "") + table[i].name;
  throw InputError(std::string("unknown ") + what + " '" + s + "' (expected " + expected + ")");
}

template <typename T>
T field(const json& j, const char* key, T fallback, const std::string& name) {
  if (!j.contains(key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw InputError(name + ": field '" + key + "' has the wrong type");
  }
}

// A JSON integer in [lo, hi], range-checked before any conversion (a number such as 1.67e113
// or 2^64 - 1 is refused, never converted). `what` names the field in the message.
long long checkedInteger(const json& v, long long lo, long long hi, const std::string& what,
                         const std::string& name) {
  const std::string range = " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    // (0 parses as unsigned: the lower bound applies to it too.)
    if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo)))
      throw InputError(name + ": field '" + what + "' = " + std::to_string(u) + range);
    return static_cast<long long>(u);
  }
  if (!v.is_number_integer()) throw InputError(name + ": field '" + what + "' must be an integer");
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi)
    throw InputError(name + ": field '" + what + "' = " + std::to_string(x) + range);
  return x;
}

int intField(const json& j, const char* key, int fallback, int lo, int hi,
             const std::string& name) {
  if (!j.contains(key)) return fallback;
  return static_cast<int>(checkedInteger(j.at(key), lo, hi, key, name));
}

// A JSON number as a float, refused when it is not a number or beyond a float's range.
float checkedFloat(const json& v, const std::string& what, const std::string& name) {
  if (!v.is_number()) throw InputError(name + ": field '" + what + "' must be a number");
  const double x = v.get<double>();
  if (!(std::fabs(x) <= double(std::numeric_limits<float>::max())))
    throw InputError(name + ": field '" + what + "' is outside the range of a float");
  return static_cast<float>(x);
}

float floatField(const json& j, const char* key, float fallback, const std::string& name) {
  return j.contains(key) ? checkedFloat(j.at(key), key, name) : fallback;
}

// Scenes saved before painted cells were mask data keep them under view.painted:
// {"rows": R, "cols": C, "blocked": [[i, j], ...]}. They become the custom mask's cells
// (an allow matrix [1, R, C] when the scene has none) and leave the view.
void convertPaintedCells(json& view, MaskSpec& m, const std::string& name) {
  if (!view.is_object() || !view.contains("painted")) return;
  const json p = view.at("painted");
  view.erase("painted");
  if (!p.is_object()) throw InputError(name + ": field 'view.painted' must be an object");
  if (!p.contains("rows") || !p.contains("cols"))
    throw InputError(name + ": field 'view.painted' needs rows and cols");
  const int rows = int(checkedInteger(p.at("rows"), 0, kMaxTokens, "view.painted.rows", name));
  const int cols = int(checkedInteger(p.at("cols"), 0, kMaxTokens, "view.painted.cols", name));
  const json blocked = p.contains("blocked") ? p.at("blocked") : json::array();
  if (!blocked.is_array())
    throw InputError(name + ": field 'view.painted.blocked' must be an array of [i, j]");
  if (blocked.empty() || rows == 0 || cols == 0) return;
  if (m.customKind == MaskSpec::Custom::None) {
    m.customKind = MaskSpec::Custom::Allow;
    m.custom = Tensor3(1, rows, cols, 1.0f);
  } else if (m.custom.rows != rows || m.custom.cols != cols) {
    throw InputError(name + ": field 'view.painted' is " + std::to_string(rows) + "x" +
                     std::to_string(cols) + " but mask.custom is " + m.custom.shapeString());
  }
  const float block =
      m.customKind == MaskSpec::Custom::Allow ? 0.0f : -std::numeric_limits<float>::infinity();
  for (const json& cell : blocked) {
    if (!cell.is_array() || cell.size() != 2)
      throw InputError(name + ": field 'view.painted.blocked' must hold [i, j] pairs");
    const long long i = checkedInteger(cell[0], 0, kMaxTokens, "view.painted.blocked", name);
    const long long j = checkedInteger(cell[1], 0, kMaxTokens, "view.painted.blocked", name);
    if (i >= rows || j >= cols) continue;  // as the old loader did: outside cells are ignored
    for (int h = 0; h < m.custom.heads; ++h) m.custom.at(h, int(i), int(j)) = block;
  }
}

// A "mask" object (a scene's, or one layer's in a model scene's "interventions"); `what` names
// it in errors ("mask", "model.interventions[1].mask").
MaskSpec maskFromJson(const json& m, const std::string& what, const std::string& name) {
  if (!m.is_object()) throw InputError(name + ": field '" + what + "' must be an object");
  MaskSpec k;
  k.causal = field<bool>(m, "causal", false, name);
  k.window = intField(m, "window", 0, 0, 1 << 30, name);
  k.prefix = intField(m, "prefix", 0, 0, 1 << 30, name);
  k.sink = intField(m, "sink", 0, 0, 1 << 30, name);
  k.pad = intField(m, "pad", 0, 0, 1 << 30, name);
  k.alibi = field<bool>(m, "alibi", false, name);
  k.chunk = intField(m, "chunk", 0, 0, 1 << 30, name);
  for (const long long d : field<std::vector<long long>>(m, "docs", {}, name)) {
    if (d < 0 || d > (1 << 30)) throw InputError(name + ": " + what + ".docs must hold ids >= 0");
    k.docs.push_back(static_cast<int>(d));
  }
  k.expr = field<std::string>(m, "expr", "", name);
  if (!k.expr.empty()) {
    try {
      MaskExpr check(k.expr);
    } catch (const UsageError& e) {
      throw InputError(name + ": " + what + ".expr '" + k.expr + "': " + e.what());
    }
  }
  k.softcap = field<float>(m, "softcap", 0.0f, name);
  if (!std::isfinite(k.softcap) || k.softcap < 0.0f) {
    throw InputError(name + ": " + what + ".softcap must be a number >= 0 (0 = off)");
  }
  if (m.contains("custom") && !m.at("custom").is_null()) {
    const json& c = m.at("custom");
    const std::string kind = field<std::string>(c, "kind", "allow", name);
    if (kind != "allow" && kind != "bias") {
      throw InputError(name + ": " + what + ".custom.kind must be 'allow' or 'bias'");
    }
    if (!c.is_object()) throw InputError(name + ": field '" + what + ".custom' must be an object");
    const json shapeJson = c.contains("shape") ? c.at("shape") : json::array();
    if (!shapeJson.is_array() || shapeJson.size() != 3)
      throw InputError(name + ": " + what + ".custom.shape must be [H, T_q, T_k]");
    std::vector<long long> shape;
    for (const json& e : shapeJson)
      shape.push_back(checkedInteger(e, 0, 1 << 30, what + ".custom.shape", name));
    const json dataJson = c.contains("data") ? c.at("data") : json::array();
    if (!dataJson.is_array())
      throw InputError(name + ": field '" + what + ".custom.data' must be an array");
    FloatBuffer data;
    for (const json& e : dataJson) {
      if (e.is_null()) {
        data.push_back(-std::numeric_limits<float>::infinity());  // JSON has no -inf
      } else if (e.is_number()) {
        data.push_back(checkedFloat(e, what + ".custom.data", name));
      } else {
        throw InputError(name + ": " + what + ".custom.data must hold numbers (null = -inf)");
      }
    }
    const std::size_t n =
        checkedElementCount(shape[0], shape[1], shape[2], name + ": " + what + ".custom");
    if (data.size() != n) {
      throw InputError(name + ": " + what + ".custom.data has " + std::to_string(data.size()) +
                       " values, shape needs " + std::to_string(n));
    }
    k.customKind = kind == "allow" ? MaskSpec::Custom::Allow : MaskSpec::Custom::Bias;
    k.custom.heads = static_cast<int>(shape[0]);
    k.custom.rows = static_cast<int>(shape[1]);
    k.custom.cols = static_cast<int>(shape[2]);
    k.custom.data = std::move(data);
  }
  return k;
}

json maskToJson(const MaskSpec& m) {
  json mask = {{"causal", m.causal}, {"window", m.window}, {"prefix", m.prefix},
               {"sink", m.sink},     {"pad", m.pad},       {"alibi", m.alibi}};
  if (m.chunk > 0) mask["chunk"] = m.chunk;
  if (!m.docs.empty()) mask["docs"] = m.docs;
  if (!m.expr.empty()) mask["expr"] = m.expr;
  if (m.softcap > 0.0f) mask["softcap"] = m.softcap;
  if (m.customKind != MaskSpec::Custom::None) {
    json data = json::array();
    for (float v : m.custom.data) {
      if (std::isfinite(v)) {
        data.push_back(v);
      } else {
        data.push_back(nullptr);
      }
    }
    mask["custom"] = {{"kind", m.customKind == MaskSpec::Custom::Allow ? "allow" : "bias"},
                      {"shape", {m.custom.heads, m.custom.rows, m.custom.cols}},
                      {"data", data}};
  }
  return mask;
}

}  // namespace

const char* modeName(Mode m) { return kModes[static_cast<int>(m)].name; }
Mode modeFromName(const std::string& s) {
  return static_cast<Mode>(lookup(kModes, std::size(kModes), s, "mode"));
}
const char* archetypeName(Archetype a) { return kArchetypes[static_cast<int>(a)].name; }
Archetype archetypeFromName(const std::string& s) {
  return static_cast<Archetype>(lookup(kArchetypes, std::size(kArchetypes), s, "archetype"));
}
std::vector<Archetype> allArchetypes() {
  return {Archetype::PreviousToken, Archetype::FirstToken, Archetype::SameToken,
          Archetype::LocalWindow,   Archetype::Broad,      Archetype::Random};
}

Scene defaultScene() {
  Scene s;
  s.title = "Six head archetypes on one sentence";
  s.notes =
      "Each row is one query token and shows how it splits its attention over the keys "
      "(columns); every row sums to 1. The six heads differ only in W_q and W_k, yet each "
      "pattern comes out of the real product Q K^T: the previous token, the first token, "
      "repeats of the same word, a local window, an even spread, and noise. Click the "
      "thumbnails on the right to compare them.";
  s.queryText = "the cat sat on the mat because the mat was warm and the cat was tired";
  s.mode = Mode::Causal;
  s.heads = 6;
  s.archetypes = allArchetypes();
  return s;
}

std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

AttentionParams effectiveParams(const Scene& s) {
  AttentionParams p = s.params;
  if (s.mode == Mode::Causal || s.mode == Mode::Decode) p.mask.causal = true;
  return p;
}

// ---- JSON ----

Scene sceneFromJson(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(name + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    throw InputError(name + ": not valid JSON (" + e.what() + ")");  // e.g. a number overflow
  }
  if (!j.is_object()) throw InputError(name + ": a scene must be a JSON object");
  Scene s;
  s.title = field<std::string>(j, "title", s.title, name);
  s.notes = field<std::string>(j, "notes", s.notes, name);
  s.queryText = field<std::string>(j, "query_text", s.queryText, name);
  s.keyText = field<std::string>(j, "key_text", s.keyText, name);
  try {
    s.mode = modeFromName(field<std::string>(j, "mode", modeName(s.mode), name));
  } catch (const InputError& e) {
    throw InputError(name + ": " + e.what());
  }
  s.heads = intField(j, "heads", s.heads, 1, 64, name);
  s.dModel = intField(j, "d_model", s.dModel, 24, 1024, name);
  s.dHead = intField(j, "d_head", s.dHead, 4, 256, name);
  s.seed = static_cast<std::uint32_t>(
      intField(j, "seed", static_cast<int>(s.seed), 0, 2147483647, name));
  s.decodeStep = intField(j, "decode_step", s.decodeStep, -1, kMaxSceneTokens, name);
  s.sharpness = floatField(j, "sharpness", s.sharpness, name);
  if (!std::isfinite(s.sharpness) || s.sharpness <= 0.0f || s.sharpness > 100.0f) {
    throw InputError(name + ": field 'sharpness' must be in (0, 100]");
  }
  if (j.contains("archetypes")) {
    const json& a = j.at("archetypes");
    if (!a.is_array()) throw InputError(name + ": field 'archetypes' must be an array of names");
    for (const json& e : a) {
      if (!e.is_string()) throw InputError(name + ": field 'archetypes' must hold names");
      try {
        s.archetypes.push_back(archetypeFromName(e.get<std::string>()));
      } catch (const InputError& err) {
        throw InputError(name + ": " + err.what());
      }
    }
  } else {
    s.archetypes = allArchetypes();
  }
  s.params.temperature = floatField(j, "temperature", 1.0f, name);
  if (!std::isfinite(s.params.temperature) || s.params.temperature <= 0.0f) {
    throw InputError(name + ": field 'temperature' must be a number > 0");
  }
  if (j.contains("mask")) s.params.mask = maskFromJson(j.at("mask"), "mask", name);
  if (j.contains("tensors")) {
    const json& t = j.at("tensors");
    s.qPath = field<std::string>(t, "q", "", name);
    s.kPath = field<std::string>(t, "k", "", name);
    s.vPath = field<std::string>(t, "v", "", name);
  }
  if (j.contains("model")) {
    const json& m = j.at("model");
    if (!m.is_object()) throw InputError(name + ": field 'model' must be an object");
    SceneModel& sm = s.model;
    sm.path = field<std::string>(m, "path", "", name);
    if (sm.path.empty()) throw InputError(name + ": field 'model.path' must name a model folder");
    sm.text = field<std::string>(m, "text", "", name);
    if (sm.text.empty()) throw InputError(name + ": field 'model.text' must be a non-empty text");
    if (m.contains("layer"))
      sm.layer = int(checkedInteger(m.at("layer"), 0, 1 << 20, "model.layer", name));
    if (m.contains("head"))
      sm.head = int(checkedInteger(m.at("head"), 0, 1 << 20, "model.head", name));
    if (m.contains("ablate")) {
      const json& a = m.at("ablate");
      if (!a.is_array()) throw InputError(name + ": field 'model.ablate' must be a list of \"L:H\"");
      for (const json& e : a) {
        // "L:H" (the decoder's, or the one site's), "enc:L:H" and "cross:L:H" (an
        // encoder-decoder's other sites); the model checks the indices when it opens.
        const SiteHead h = inScene(name, [&] {
          return parseSiteAblation(e.is_string() ? e.get<std::string>() : e.dump(), "model.ablate");
        });
        if (h.site.stack == 0 && h.site.site == 0)
          sm.ablate.emplace_back(h.site.layer, h.head);
        else
          sm.siteAblate.push_back(siteAblationText(h));
      }
    }
    sm.textPair = field<std::string>(m, "text_pair", "", name);
    sm.chat = field<bool>(m, "chat", false, name);
    if (m.contains("system")) {
      sm.system = field<std::string>(m, "system", "", name);
      if (!sm.chat) throw InputError(name + ": field 'model.system' goes with \"chat\": true");
    }
    if (sm.chat && !sm.textPair.empty())
      throw InputError(name + ": model.chat takes one text: drop 'model.text_pair'");
    sm.slice = field<std::string>(m, "slice", "", name);
    sm.target = field<std::string>(m, "target", "", name);
    if (m.contains("mask_source")) {
      const json& ms = m.at("mask_source");
      if (!ms.is_array())
        throw InputError(name + ": field 'model.mask_source' must be a list of source positions");
      for (const json& e : ms)
        sm.maskSource.push_back(int(checkedInteger(e, 0, 1 << 20, "model.mask_source", name)));
      std::sort(sm.maskSource.begin(), sm.maskSource.end());
      sm.maskSource.erase(std::unique(sm.maskSource.begin(), sm.maskSource.end()),
                          sm.maskSource.end());
    }
    sm.site = field<std::string>(m, "site", "", name);
    // enc:L, dec:L, dec:L:self or dec:L:cross (the model checks L when it opens).
    if (!sm.site.empty()) inScene(name, [&] { (void)parseSiteName(sm.site, "model.site"); });
    sm.special = field<std::string>(m, "special", "", name);
    if (!sm.slice.empty() && sm.slice != "all" && sm.slice != "a-a" && sm.slice != "b-b" &&
        sm.slice != "a-b" && sm.slice != "b-a")
      throw InputError(name + ": field 'model.slice' must be \"all\", \"a-a\", \"b-b\", "
                       "\"a-b\" or \"b-a\", got \"" + sm.slice + "\"");
    if (!sm.special.empty() && sm.special != "show" && sm.special != "grey" &&
        sm.special != "hide")
      throw InputError(name + ": field 'model.special' must be \"show\", \"grey\" or "
                       "\"hide\", got \"" + sm.special + "\"");
    if (m.contains("generate")) {
      const json& g = m.at("generate");
      if (!g.is_object())
        throw InputError(name + ": field 'model.generate' must be an object {\"tokens\": N, ...}");
      SceneGenerate& sg = sm.generate;
      if (!g.contains("tokens"))
        throw InputError(name + ": field 'model.generate.tokens' is missing (the number of tokens)");
      sg.tokens = int(checkedInteger(g.at("tokens"), 1, 4096, "model.generate.tokens", name));
      if (g.contains("greedy")) {
        if (!g.at("greedy").is_boolean())
          throw InputError(name + ": field 'model.generate.greedy' must be true or false");
        sg.greedy = g.at("greedy").get<bool>();
      }
      if (g.contains("temperature")) {
        const json& t = g.at("temperature");
        if (!t.is_number() || !(t.get<double>() > 0.0 && t.get<double>() <= 100.0))
          throw InputError(name + ": field 'model.generate.temperature' must be a number in (0, 100]");
        sg.temperature = t.get<double>();
      }
      if (g.contains("top_k"))
        sg.topK = int(checkedInteger(g.at("top_k"), 0, 1 << 20, "model.generate.top_k", name));
      if (g.contains("seed"))
        sg.seed = int(checkedInteger(g.at("seed"), 0, 2147483647, "model.generate.seed", name));
    }
    if (m.contains("attribution")) {
      const json& a = m.at("attribution");
      if (!a.is_object()) throw InputError(name + ": field 'model.attribution' must be an object");
      SceneAttribution& sa = sm.attribution;
      sa.method = field<std::string>(a, "method", "", name);
      if (sa.method != "zero" && sa.method != "mean" && sa.method != "patch")
        throw InputError(name + ": model.attribution.method must be zero, mean or patch, got '" +
                         sa.method + "'");
      auto index = [&](const char* key) {
        return a.contains(key) ? int(checkedInteger(a.at(key), -1, 100'000'000,
                                                    std::string("model.attribution.") + key, name))
                               : -1;
      };
      sa.position = index("position");
      sa.target = index("target");
      sa.foil = index("foil");
      sa.clean = field<std::string>(a, "clean", "", name);
      sa.run = field<bool>(a, "run", false, name);
      if (sa.method == "patch" && sa.clean.empty())
        throw InputError(name + ": model.attribution.clean must be the clean text of a patch");
      if (sa.method != "patch" && (a.contains("clean") || a.contains("foil")))
        throw InputError(name + ": model.attribution.clean and .foil go with method patch");
    }
    if (m.contains("interventions")) {
      const json& a = m.at("interventions");
      if (!a.is_array())
        throw InputError(name + ": field 'model.interventions' must be a list of "
                                "{\"layer\", \"temperature\", \"rope_off\", \"mask\"}");
      for (std::size_t i = 0; i < a.size(); ++i) {
        const json& e = a[i];
        const std::string what = "model.interventions[" + std::to_string(i) + "]";
        if (!e.is_object()) throw InputError(name + ": field '" + what + "' must be an object");
        SceneLayerIntervention li;
        if (!e.contains("layer")) throw InputError(name + ": field '" + what + ".layer' is missing");
        li.layer = int(checkedInteger(e.at("layer"), 0, 1 << 20, what + ".layer", name));
        for (const SceneLayerIntervention& o : sm.interventions)
          if (o.layer == li.layer)
            throw InputError(name + ": " + what + ": layer " + std::to_string(li.layer) +
                             " has two entries");
        if (e.contains("temperature")) {
          li.temperature = checkedFloat(e.at("temperature"), what + ".temperature", name);
          if (!(li.temperature > 0.0f))
            throw InputError(name + ": field '" + what + ".temperature' must be a number > 0");
        }
        if (e.contains("rope_off")) {
          if (!e.at("rope_off").is_boolean())
            throw InputError(name + ": field '" + what + ".rope_off' must be true or false");
          li.ropeOff = e.at("rope_off").get<bool>();
        }
        if (e.contains("mask")) li.mask = maskFromJson(e.at("mask"), what + ".mask", name);
        li.mask.causal = false;  // the pass keeps its own causal mask
        sm.interventions.push_back(std::move(li));
      }
    }
  }
  if (j.contains("view")) {
    json view = j.at("view");
    convertPaintedCells(view, s.params.mask, name);
    s.extraJson = view.dump();
    parseSceneView(s.extraJson, name);  // refuses bad fields now, naming them
  }
  return s;
}

std::string sceneToJson(const Scene& s) {
  json j;
  j["title"] = s.title;
  if (!s.notes.empty()) j["notes"] = s.notes;
  j["query_text"] = s.queryText;
  if (!s.keyText.empty()) j["key_text"] = s.keyText;
  j["mode"] = modeName(s.mode);
  j["heads"] = s.heads;
  j["d_model"] = s.dModel;
  j["d_head"] = s.dHead;
  j["seed"] = s.seed;
  j["decode_step"] = s.decodeStep;
  j["sharpness"] = s.sharpness;
  json arch = json::array();
  for (Archetype a : s.archetypes) arch.push_back(archetypeName(a));
  j["archetypes"] = arch;
  j["temperature"] = s.params.temperature;
  j["mask"] = maskToJson(s.params.mask);
  if (!s.qPath.empty()) j["tensors"] = {{"q", s.qPath}, {"k", s.kPath}, {"v", s.vPath}};
  if (s.model.any()) {
    json ablate = json::array();
    for (auto [l, h] : s.model.ablate) ablate.push_back(std::to_string(l) + ":" + std::to_string(h));
    for (const std::string& a : s.model.siteAblate) ablate.push_back(a);
    j["model"] = {{"path", s.model.path}, {"text", s.model.text}, {"layer", s.model.layer},
                  {"head", s.model.head}, {"ablate", ablate}};
    if (!s.model.textPair.empty()) j["model"]["text_pair"] = s.model.textPair;
    if (s.model.chat) j["model"]["chat"] = true;
    if (s.model.system) j["model"]["system"] = *s.model.system;
    if (!s.model.target.empty()) j["model"]["target"] = s.model.target;
    if (!s.model.site.empty()) j["model"]["site"] = s.model.site;
    if (!s.model.maskSource.empty()) j["model"]["mask_source"] = s.model.maskSource;
    if (!s.model.slice.empty()) j["model"]["slice"] = s.model.slice;
    if (!s.model.special.empty()) j["model"]["special"] = s.model.special;
    const SceneGenerate& g = s.model.generate;
    if (g.any())
      j["model"]["generate"] = {{"tokens", g.tokens}, {"greedy", g.greedy},
                                {"temperature", g.temperature}, {"top_k", g.topK},
                                {"seed", g.seed}};
    if (const SceneAttribution& a = s.model.attribution; a.any()) {
      json o = {{"method", a.method}, {"position", a.position}, {"target", a.target}};
      if (a.method == "patch") o["foil"] = a.foil, o["clean"] = a.clean;
      o["run"] = a.run;
      j["model"]["attribution"] = o;
    }
    if (!s.model.interventions.empty()) {
      json list = json::array();
      for (const SceneLayerIntervention& li : s.model.interventions)
        list.push_back({{"layer", li.layer},
                        {"temperature", li.temperature},
                        {"rope_off", li.ropeOff},
                        {"mask", maskToJson(li.mask)}});
      j["model"]["interventions"] = list;
    }
  }
  json view = json::parse(s.extraJson.empty() ? "{}" : s.extraJson, nullptr, false);
  if (!view.is_discarded() && !view.empty()) j["view"] = view;
  return j.dump(2) + "\n";
}

SceneView parseSceneView(const std::string& viewJson, const std::string& name) {
  SceneView v;
  json j = json::parse(viewJson.empty() ? "{}" : viewJson, nullptr, false);
  if (j.is_discarded()) throw InputError(name + ": field 'view' is not valid JSON");
  if (!j.is_object()) return v;
  auto text = [&](const char* key, std::string& out) {
    if (!j.contains(key)) return;
    if (!j.at(key).is_string())
      throw InputError(name + ": field 'view." + key + "' must be a string");
    out = j.at(key).get<std::string>();
  };
  auto flag = [&](const char* key, bool& out) {
    if (!j.contains(key)) return;
    if (!j.at(key).is_boolean())
      throw InputError(name + ": field 'view." + key + "' must be true or false");
    out = j.at(key).get<bool>();
  };
  auto integer = [&](const char* key, int& out, int lo, int hi) {
    if (j.contains(key))
      out = int(checkedInteger(j.at(key), lo, hi, std::string("view.") + key, name));
  };
  auto number = [&](const char* key, float& out) {
    if (j.contains(key)) out = checkedFloat(j.at(key), std::string("view.") + key, name);
  };
  integer("head", v.head, 0, 1 << 20);
  text("stage", v.stage);
  text("weightColormap", v.weightColormap);
  text("scoreColormap", v.scoreColormap);
  text("scale", v.scale);
  number("gamma", v.gamma);
  flag("autoRange", v.autoRange);
  flag("wrongAxis", v.wrongAxis);
  flag("headAverage", v.headAverage);
  integer("selectedRow", v.selectedRow, -1, 1 << 30);
  number("zoom", v.zoom);
  number("panX", v.panX);
  number("panY", v.panY);
  if (j.contains("blocks")) {  // the block-sparsity overlay: {"on", "rows", "cols"}
    const json& b = j.at("blocks");
    if (!b.is_object()) throw InputError(name + ": field 'view.blocks' must be an object");
    v.blocksOn = true;
    if (b.contains("on")) {
      if (!b.at("on").is_boolean())
        throw InputError(name + ": field 'view.blocks.on' must be true or false");
      v.blocksOn = b.at("on").get<bool>();
    }
    if (b.contains("rows"))
      v.blockRows = int(checkedInteger(b.at("rows"), 1, 1 << 16, "view.blocks.rows", name));
    if (b.contains("cols"))
      v.blockCols = int(checkedInteger(b.at("cols"), 1, 1 << 16, "view.blocks.cols", name));
  }
  if (j.contains("flash")) {  // the FlashAttention stage: {"on", "blockRows", "blockKeys", "step"}
    const json& f = j.at("flash");
    if (!f.is_object()) throw InputError(name + ": field 'view.flash' must be an object");
    v.flashOn = true;
    if (f.contains("on")) {
      if (!f.at("on").is_boolean())
        throw InputError(name + ": field 'view.flash.on' must be true or false");
      v.flashOn = f.at("on").get<bool>();
    }
    if (f.contains("blockRows"))
      v.flashBlockRows =
          int(checkedInteger(f.at("blockRows"), 1, 1 << 16, "view.flash.blockRows", name));
    if (f.contains("blockKeys"))
      v.flashBlockKeys =
          int(checkedInteger(f.at("blockKeys"), 1, 1 << 16, "view.flash.blockKeys", name));
    if (f.contains("step"))
      v.flashStep = int(checkedInteger(f.at("step"), 0, 1 << 30, "view.flash.step", name));
  }
  return v;
}

Scene loadScene(const std::string& path) {
  Scene s = sceneFromJson(readFile(path), path);
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  for (std::string* p : {&s.qPath, &s.kPath, &s.vPath}) {
    if (!p->empty() && std::filesystem::path(*p).is_relative()) *p = (base / *p).string();
  }
  // A model scene names a shipped model by its folder under the data dir's models/.
  if (s.model.any() && std::filesystem::path(s.model.path).is_relative()) {
    const std::string models = dataSubdir("models");
    if (models.empty())
      throw InputError(path + ": model.path '" + s.model.path +
                       "' is relative, and no models folder was found (share/attnviz/models)");
    s.model.path = (std::filesystem::path(models) / s.model.path).string();
  }
  return s;
}

void saveScene(const std::string& path, const Scene& s) { writeFileAtomic(path, sceneToJson(s)); }

}  // namespace attnviz
