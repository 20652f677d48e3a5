// attnviz app: an image model's pass and its overlay figure (overlay_view.h).
#include "cli/overlay_view.h"

#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>

#include <optional>

#include <filesystem>
#include <string>

namespace attnviz::app {

VisionPass runVisionPass(const std::string& dir, const std::string& image,
                         const std::function<void(const char*)>& step,
                         const VisionModel* loaded) {
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
  p.result = p.model.run(p.pre.pixels, p.pre.height, p.pre.width, ro, image);
  return p;
}

PatchMap overlayChoiceMap(const VisionPass& p, const OverlayChoice& c) {
  const VisionConfig& cfg = p.model.config();
  if (!c.headAverage || c.rollout)
    return overlayPatchMap(p.result, cfg, c.layer, c.head, c.token, c.rollout);
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
  f.title = !c.title.empty() ? c.title
            : c.rollout
                ? name + dot + "rollout to layer " + std::to_string(c.layer) +
                      " (heads averaged, + I)" + dot + "token " + map.token
                : name + dot + "layer " + std::to_string(c.layer) + dot + heads + dot +
                      "token " + map.token;
  f.captions.push_back((c.rollout ? "the rollout's row of " : "the attention row of ") +
                       map.token + " over the patches (" + cfg.family + ", " +
                       std::to_string(p.result.tokens) + " tokens)");
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
    } else if (t.is_number_integer() && t.get<long long>() >= 0 && t.get<long long>() < (1 << 30)) {
      c.token = int(t.get<long long>());
    } else {
      throw bad("view.token", "must be \"cls\", \"default\" or a token index");
    }
  }
  if (v.contains("opacity")) {
    if (!v["opacity"].is_number() || !(v["opacity"].get<double>() >= 0) ||
        !(v["opacity"].get<double>() <= 1))
      throw bad("view.opacity", "must be a number in 0..1");
    c.opacity = v["opacity"].get<double>();
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
  j["model"] = {{"path", sc.model}, {"image", sc.image}};
  const OverlayChoice& c = sc.choice;
  nlohmann::json v = {{"layer", c.layer},     {"head", c.head},
                      {"head_average", c.headAverage}, {"rollout", c.rollout},
                      {"opacity", c.opacity}, {"colormap", colormapName(c.colormap)}};
  if (c.token == kDefaultOverlayToken)
    v["token"] = "default";
  else
    v["token"] = c.token;
  j["view"] = v;
  return j.dump(2) + "\n";
}

}  // namespace attnviz::app
