// attnviz app: an image model's pass and its overlay figure (overlay_view.h).
#include "cli/overlay_view.h"

#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

namespace attnviz::app {

std::string maskPatchText(const std::vector<int>& m) {
  std::string s;
  for (int i : m) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

std::string temperatureText(double t) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "\xCF\x84 = %g", t);
  return buf;
}

double temperatureOfFloat(float t) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf - 1, t);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

std::string interventionsText(const VisionInterventions& iv) {
  std::vector<std::string> parts;
  if (!iv.ablate.empty()) parts.push_back("heads ablated: " + layerHeadListText(iv.ablate));
  if (!iv.maskPatches.empty()) parts.push_back("patches hidden: " + maskPatchText(iv.maskPatches));
  if (iv.temperature != 1.0) parts.push_back(temperatureText(iv.temperature));
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : " \xC2\xB7 ") + p;
  return s;
}

std::string rolloutWords(const RolloutOptions& o) {
  std::string s = o.maxHeads ? "heads' maximum" : "heads averaged";
  if (o.discard > 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, ", lowest %g%% dropped", std::round(o.discard * 1000) / 10);
    s += buf;
  }
  return s + ", + I";
}

VisionPass runVisionPass(const std::string& dir, const std::string& image,
                         const std::function<void(const char*)>& step,
                         const VisionModel* loaded, const VisionInterventions& iv) {
  const auto tell = [&](const char* what) {
    if (step) step(what);
  };
  VisionPass p;
  p.dir = dir;
  p.image = image;
  p.name = std::filesystem::path(dir).filename().string();
  if (p.name.empty()) p.name = std::filesystem::path(dir).parent_path().filename().string();
  if (loaded) {
    p.model = *loaded;
  } else {
    tell("loading");
    p.model = VisionModel::load(dir);
  }
  const VisionConfig& c = p.model.config();
  if (c.channels != 3)
    throw InputError(dir + ": " + std::to_string(c.channels) + " channels; an image file gives 3");
  tell("preprocessing");
  p.pre = preprocessImageFile(image, dir);
  tell("running");
  VisionRunOptions ro;
  ro.weights = true;
  ro.residual = true;
  ro.probe = c.hasProbe;
  ro.ablate = iv.ablate;
  ro.maskPatches = iv.maskPatches;
  ro.temperature = iv.temperature;
  p.interventions = iv;
  p.result = p.model.run(p.pre.pixels, p.pre.height, p.pre.width, ro, image);
  return p;
}

PatchMap overlayChoiceMap(const VisionPass& p, const OverlayChoice& c) {
  const VisionConfig& cfg = p.model.config();
  if (c.token == kProbeOverlayToken) {
    if (!cfg.hasProbe || p.result.probe.empty())
      throw UsageError("--token probe: " + p.name + " (" + cfg.family +
                       ") has no pooling probe (SigLIP's head)");
    if (c.rollout) throw UsageError("--token probe draws the probe's own row: no --rollout");
    if (c.head < 0 || c.head >= cfg.heads)
      throw UsageError("--head " + std::to_string(c.head) + ": out of range, the model has " +
                       std::to_string(cfg.heads) + " heads");
    const int T = p.result.tokens, P = cfg.prefixTokens(), N = p.result.gridH * p.result.gridW;
    PatchMap m;
    m.gridH = p.result.gridH, m.gridW = p.result.gridW;
    m.values.assign(std::size_t(N), 0.0);
    m.token = "probe";
    for (int h = 0; h < cfg.heads; ++h) {
      if (!c.headAverage && h != c.head) continue;
      for (int j = 0; j < N; ++j)
        m.values[std::size_t(j)] += double(p.result.probe[std::size_t(h) * T + P + j]);
    }
    if (c.headAverage)
      for (double& v : m.values) v /= double(cfg.heads);
    return m;
  }
  if (!c.headAverage || c.rollout)
    return overlayPatchMap(p.result, cfg, c.layer, c.head, c.token, c.rollout, c.rolloutOptions);
  PatchMap m = overlayPatchMap(p.result, cfg, c.layer, 0, c.token, false);
  for (int h = 1; h < cfg.heads; ++h) {
    const PatchMap o = overlayPatchMap(p.result, cfg, c.layer, h, c.token, false);
    for (std::size_t k = 0; k < m.values.size(); ++k) m.values[k] += o.values[k];
  }
  for (double& v : m.values) v /= double(cfg.heads);
  return m;
}

Image renderOverlayChoice(const VisionPass& p, const OverlayChoice& c) {
  const VisionConfig& cfg = p.model.config();
  const PatchMap map = overlayChoiceMap(p, c);
  const std::string dot = " \xC2\xB7 ";
  const std::string& name = p.name;
  OverlayFigure f;
  f.image = &p.pre.seen;
  f.gridH = map.gridH, f.gridW = map.gridW;
  f.map = map.values;
  f.colormap = c.colormap;
  f.opacity = c.opacity;
  f.vector = c.vector;
  f.barTitle = c.rollout ? "rollout" : "weight";
  const std::string heads =
      c.headAverage ? "heads averaged" : "head " + std::to_string(c.head);
  const bool probe = c.token == kProbeOverlayToken;
  f.title = !c.title.empty() ? c.title
            : probe  ? name + dot + "pooling probe" + dot + heads
            : c.rollout
                ? name + dot + "rollout to layer " + std::to_string(c.layer) + " (" +
                      rolloutWords(c.rolloutOptions) + ")" + dot + "token " + map.token
                : name + dot + "layer " + std::to_string(c.layer) + dot + heads + dot +
                      "token " + map.token;
  f.captions.push_back((probe       ? std::string("the pooling probe's attention")
                        : c.rollout ? "the rollout's row of " + map.token
                                    : "the attention row of " + map.token) +
                       " over the patches (" + cfg.family + ", " +
                       std::to_string(p.result.tokens) + " tokens)");
  const VisionInterventions& iv = p.interventions;
  if (!iv.empty()) f.captions.push_back(interventionsText(iv));
  return renderOverlay(f);
}

}  // namespace attnviz::app

namespace attnviz::app {

namespace {

nlohmann::json readJsonFile(const std::string& path) {
  const std::string text = readFile(path);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw InputError(path + ": not a JSON object");
  return j;
}

}  // namespace

bool isImageSceneFile(const std::string& path) {
  try {
    const nlohmann::json j = readJsonFile(path);
    return j.contains("model") && j["model"].is_object() && j["model"].contains("image");
  } catch (...) {
    return false;
  }
}

ImageScene readImageScene(const std::string& path) {
  const nlohmann::json j = readJsonFile(path);
  ImageScene sc;
  const auto bad = [&](const std::string& field, const std::string& what) {
    return InputError(path + ": field '" + field + "' " + what);
  };
  if (j.contains("title")) {
    if (!j["title"].is_string()) throw bad("title", "must be a string");
    sc.title = j["title"].get<std::string>();
  }
  if (j.contains("notes")) {
    if (!j["notes"].is_string()) throw bad("notes", "must be a string");
    sc.notes = j["notes"].get<std::string>();
  }
  const nlohmann::json& m = j.at("model");
  if (!m.contains("path") || !m["path"].is_string() || m["path"].get<std::string>().empty())
    throw bad("model.path", "must name an image model's folder");
  if (!m["image"].is_string() || m["image"].get<std::string>().empty())
    throw bad("model.image", "must name an image file");
  sc.model = m["path"].get<std::string>();
  sc.image = m["image"].get<std::string>();
  const auto relative = [&](std::string& p) {  // relative paths: from the scene's folder
    if (!p.empty() && std::filesystem::path(p).is_relative()) {
      const std::filesystem::path near = std::filesystem::path(path).parent_path() / p;
      std::error_code ec;
      if (std::filesystem::exists(near, ec)) p = near.string();
    }
  };
  relative(sc.model);
  relative(sc.image);
  if (m.contains("ablate")) {
    if (!m["ablate"].is_array()) throw bad("model.ablate", "must be a list of \"L:H\"");
    std::vector<std::string> items;
    for (const auto& a : m["ablate"]) {
      if (!a.is_string()) throw bad("model.ablate", "must be a list of \"L:H\"");
      items.push_back(a.get<std::string>());
    }
    try {
      sc.interventions.ablate = parseLayerHeadList(items);
    } catch (const UsageError&) {
      throw bad("model.ablate", "must be a list of \"L:H\"");
    }
  }
  if (m.contains("mask_patches")) {
    if (!m["mask_patches"].is_array()) throw bad("model.mask_patches", "must be a list of patch indices");
    for (const auto& i : m["mask_patches"]) {
      if (!i.is_number_integer() || i.get<long long>() < 0 || i.get<long long>() > (1 << 30))
        throw bad("model.mask_patches", "must be a list of patch indices");
      sc.interventions.maskPatches.push_back(int(i.get<long long>()));
    }
  }
  if (m.contains("temperature")) {
    const nlohmann::json& t = m["temperature"];
    if (!t.is_number() || !(t.get<double>() > 0.0) || !std::isfinite(t.get<double>()) ||
        t.get<double>() > double(std::numeric_limits<float>::max()))
      throw bad("model.temperature", "must be a number > 0");
    sc.interventions.temperature = t.get<double>();
  }
  if (!j.contains("view")) return sc;
  const nlohmann::json& v = j["view"];
  if (!v.is_object()) throw bad("view", "must be an object");
  OverlayChoice& c = sc.choice;
  const auto index = [&](const char* key, int& out) {
    if (!v.contains(key)) return;
    if (!v[key].is_number_integer() || v[key].get<long long>() < 0 ||
        v[key].get<long long>() > (1 << 30))
      throw bad(std::string("view.") + key, "must be an index >= 0");
    out = int(v[key].get<long long>());
  };
  const auto flag = [&](const char* key, bool& out) {
    if (!v.contains(key)) return;
    if (!v[key].is_boolean()) throw bad(std::string("view.") + key, "must be true or false");
    out = v[key].get<bool>();
  };
  index("layer", c.layer);
  index("head", c.head);
  flag("head_average", c.headAverage);
  flag("rollout", c.rollout);
  if (v.contains("token")) {
    const nlohmann::json& t = v["token"];
    if (t.is_string() && (t == "cls" || t == "default")) {
      c.token = kDefaultOverlayToken;
    } else if (t.is_string() && t == "probe") {
      c.token = kProbeOverlayToken;
    } else if (t.is_number_integer() && t.get<long long>() >= 0 && t.get<long long>() < (1 << 30)) {
      c.token = int(t.get<long long>());
    } else {
      throw bad("view.token", "must be \"cls\", \"default\", \"probe\" or a token index");
    }
  }
  if (v.contains("opacity")) {
    if (!v["opacity"].is_number() || !(v["opacity"].get<double>() >= 0) ||
        !(v["opacity"].get<double>() <= 1))
      throw bad("view.opacity", "must be a number in 0..1");
    c.opacity = v["opacity"].get<double>();
  }
  if (v.contains("rollout_heads")) {
    if (!v["rollout_heads"].is_string() ||
        (v["rollout_heads"] != "mean" && v["rollout_heads"] != "max"))
      throw bad("view.rollout_heads", "must be \"mean\" or \"max\"");
    c.rolloutOptions.maxHeads = v["rollout_heads"] == "max";
  }
  if (v.contains("rollout_discard")) {
    if (!v["rollout_discard"].is_number() || !(v["rollout_discard"].get<double>() >= 0) ||
        !(v["rollout_discard"].get<double>() <= 0.9))
      throw bad("view.rollout_discard", "must be a number in 0..0.9");
    c.rolloutOptions.discard = v["rollout_discard"].get<double>();
  }
  if (v.contains("side")) {
    if (!v["side"].is_string() ||
        (v["side"] != "tokens" && v["side"] != "grid" && v["side"] != "norms"))
      throw bad("view.side", "must be \"tokens\", \"grid\" or \"norms\"");
    sc.side = v["side"].get<std::string>();
  }
  if (v.contains("norm_threshold")) {
    if (!v["norm_threshold"].is_number() || !(v["norm_threshold"].get<double>() >= 1) ||
        !(v["norm_threshold"].get<double>() <= 100))
      throw bad("view.norm_threshold", "must be a number in 1..100");
    sc.normThreshold = v["norm_threshold"].get<double>();
  }
  if (v.contains("colormap")) {
    const std::optional<ColormapId> id =
        v["colormap"].is_string() ? colormapFromName(v["colormap"].get<std::string>())
                                  : std::nullopt;
    if (!id) throw bad("view.colormap", "must be viridis, magma, gray or diverging");
    c.colormap = *id;
  }
  return sc;
}

std::string imageSceneJson(const ImageScene& sc) {
  nlohmann::json j;
  if (!sc.title.empty()) j["title"] = sc.title;
  if (!sc.notes.empty()) j["notes"] = sc.notes;
  j["model"] = {{"path", sc.model}, {"image", sc.image}};
  if (!sc.interventions.ablate.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (auto [l, h] : sc.interventions.ablate) a.push_back(std::to_string(l) + ":" + std::to_string(h));
    j["model"]["ablate"] = a;
  }
  if (!sc.interventions.maskPatches.empty()) j["model"]["mask_patches"] = sc.interventions.maskPatches;
  if (sc.interventions.temperature != 1.0) j["model"]["temperature"] = sc.interventions.temperature;
  const OverlayChoice& c = sc.choice;
  nlohmann::json v = {{"layer", c.layer},     {"head", c.head},
                      {"head_average", c.headAverage}, {"rollout", c.rollout},
                      {"opacity", c.opacity}, {"colormap", colormapName(c.colormap)}};
  v["rollout_heads"] = c.rolloutOptions.maxHeads ? "max" : "mean";
  v["rollout_discard"] = c.rolloutOptions.discard;
  v["side"] = sc.side;
  v["norm_threshold"] = sc.normThreshold;
  if (c.token == kDefaultOverlayToken)
    v["token"] = "default";
  else if (c.token == kProbeOverlayToken)
    v["token"] = "probe";
  else
    v["token"] = c.token;
  j["view"] = v;
  return j.dump(2) + "\n";
}

}  // namespace attnviz::app
