// attnviz GUI: scene files. The view (head, stage, colormap, selection, zoom, painted cells)
// travels in Scene::extraJson under "view", so a saved scene reopens as it was left.
#include "app_state.h"

#include "attnviz/npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace attnviz::gui {

using nlohmann::json;

namespace {

void applyViewJson(AppState& s, const std::string& extra, const std::string& name) {
  json j;
  try {
    j = json::parse(extra.empty() ? "{}" : extra);
  } catch (const json::exception& e) {
    throw InputError(name + ": extra view state is not valid JSON (" + e.what() + ")");
  }
  // Scene files keep this object under "view"; Scene::extraJson is that object.
  if (!j.is_object()) return;
  const json& v = j;
  ViewState& vs = s.view;
  try {
    if (v.contains("head")) vs.head = v["head"].get<int>();
    if (v.contains("stage")) vs.stage = stageFromKey(v["stage"].get<std::string>());
    if (v.contains("weightColormap"))
      if (auto c = colormapFromName(v["weightColormap"].get<std::string>())) vs.weightColormap = *c;
    if (v.contains("scoreColormap"))
      if (auto c = colormapFromName(v["scoreColormap"].get<std::string>())) vs.scoreColormap = *c;
    if (v.contains("scale")) {
      const std::string sc = v["scale"].get<std::string>();
      vs.scale = sc == "log"     ? ColorScale::Log
                 : sc == "gamma" ? ColorScale::Gamma
                                 : ColorScale::Linear;
    }
    if (v.contains("gamma")) vs.gamma = v["gamma"].get<float>();
    if (v.contains("autoRange")) vs.autoRange = v["autoRange"].get<bool>();
    if (v.contains("wrongAxis")) vs.wrongAxis = v["wrongAxis"].get<bool>();
    if (v.contains("headAverage")) vs.headAverage = v["headAverage"].get<bool>();
    if (v.contains("selectedRow")) vs.selectedRow = v["selectedRow"].get<int>();
    if (v.contains("zoom")) vs.zoom = v["zoom"].get<float>();
    if (v.contains("panX")) vs.panX = v["panX"].get<float>();
    if (v.contains("panY")) vs.panY = v["panY"].get<float>();
    if (v.contains("blocks")) {  // the block-sparsity overlay (mask_kinds_panel.cpp)
      const json& b = v["blocks"];
      s.maskEditor.blocksOn = b.value("on", true);
      s.maskEditor.blockRows = std::clamp(b.value("rows", 128), 1, 1 << 16);
      s.maskEditor.blockCols = std::clamp(b.value("cols", 128), 1, 1 << 16);
    }
    if (v.contains("painted")) {
      const json& p = v["painted"];
      s.scene.paintedRows = p.at("rows").get<int>();
      s.scene.paintedCols = p.at("cols").get<int>();
      if (s.scene.paintedRows < 0 || s.scene.paintedCols < 0 ||
          std::size_t(s.scene.paintedRows) * std::size_t(s.scene.paintedCols) >
              (std::size_t{1} << 26))
        throw InputError(name + ": view.painted has a bad size");
      s.scene.painted.assign(std::size_t(s.scene.paintedRows) * s.scene.paintedCols, 1);
      for (const json& cell : p.at("blocked")) {
        const int i = cell.at(0).get<int>(), jj = cell.at(1).get<int>();
        if (i >= 0 && jj >= 0 && i < s.scene.paintedRows && jj < s.scene.paintedCols)
          s.scene.painted[std::size_t(i) * s.scene.paintedCols + jj] = 0;
      }
    }
  } catch (const json::exception& e) {
    throw InputError(name + ": bad view state (" + e.what() + ")");
  }
}

std::string viewJson(const AppState& s, const std::string& previous) {
  json j = json::object();
  try {
    j = json::parse(previous.empty() ? "{}" : previous);
    if (!j.is_object()) j = json::object();
  } catch (const json::exception&) {
    j = json::object();
  }
  const ViewState& v = s.view;
  json view = j;
  const json mine = {
      {"head", v.head},
      {"stage", stageKey(v.stage)},
      {"weightColormap", colormapName(v.weightColormap)},
      {"scoreColormap", colormapName(v.scoreColormap)},
      {"scale", v.scale == ColorScale::Log     ? "log"
                : v.scale == ColorScale::Gamma ? "gamma"
                                               : "linear"},
      {"gamma", v.gamma},
      {"autoRange", v.autoRange},
      {"wrongAxis", v.wrongAxis},
      {"headAverage", v.headAverage},
      {"selectedRow", v.selectedRow},
      {"zoom", v.zoom},
      {"panX", v.panX},
      {"panY", v.panY},
  };
  for (auto it = mine.begin(); it != mine.end(); ++it) view[it.key()] = it.value();
  view["blocks"] = {{"on", s.maskEditor.blocksOn},
                   {"rows", s.maskEditor.blockRows},
                   {"cols", s.maskEditor.blockCols}};
  if (!s.scene.painted.empty()) {
    json blocked = json::array();
    for (int i = 0; i < s.scene.paintedRows; ++i)
      for (int jj = 0; jj < s.scene.paintedCols; ++jj)
        if (!s.scene.painted[std::size_t(i) * s.scene.paintedCols + jj]) blocked.push_back({i, jj});
    view["painted"] = {
        {"rows", s.scene.paintedRows}, {"cols", s.scene.paintedCols}, {"blocked", blocked}};
  }
  return view.dump();
}

}  // namespace

void resetView(AppState& s) {
  s.view.zoom = 1.0f;
  s.view.panX = s.view.panY = 0.0f;
}

void loadSceneInto(AppState& s, const std::string& path) {
  Scene sc = loadScene(path);  // throws InputError naming the file
  s.view = ViewState{};
  s.scene.painted.clear();
  s.scene.paintedRows = s.scene.paintedCols = 0;
  applyViewJson(s, sc.extraJson, path);
  s.scene.scene = std::move(sc);
  s.scene.path = path;
  s.scene.paintEnabled = true;
  markInputsDirty(s);
  notify(s, "Opened " + path);
}

void saveSceneFrom(AppState& s, const std::string& path) {
  Scene sc = s.scene.scene;
  sc.extraJson = viewJson(s, sc.extraJson);
  saveScene(path, sc);
  s.scene.path = path;
}

void openDroppedFile(AppState& s, const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json") {
    loadSceneInto(s, path);
  } else if (ext == ".npy") {
    s.ui.npyPending = path;
  } else {
    throw InputError(path + ": not a scene (.json) or tensor (.npy) file");
  }
}

void useNpyAs(AppState& s, const std::string& path, char role) {
  Scene& sc = s.scene.scene;
  if (role == 'm') {
    const MaskFile mf = loadMaskNpy(path);
    MaskSpec& m = sc.params.mask;
    m.customKind = mf.isBool ? MaskSpec::Custom::Allow : MaskSpec::Custom::Bias;
    m.custom = mf.values;
    validateParams(effectiveParams(sc), s.heads(), s.tq(), s.tk());  // shape check, now
    markParamsDirty(s);
    notify(s, "Custom mask from " + path);
    return;
  }
  loadTensorNpy(path);  // validates now, so a bad file is reported at the drop
  std::string& slot = role == 'q' ? sc.qPath : role == 'k' ? sc.kPath : sc.vPath;
  slot = std::filesystem::absolute(path).string();
  if (!sc.qPath.empty() && !sc.kPath.empty() && !sc.vPath.empty()) {
    markInputsDirty(s);
    notify(s, "Using Q, K and V from files");
  } else {
    std::string missing;
    if (sc.qPath.empty()) missing += " Q";
    if (sc.kPath.empty()) missing += " K";
    if (sc.vPath.empty()) missing += " V";
    notify(s,
           std::string(1, char(std::toupper(role))) + " set from " + path +
               "; still needed:" + missing,
           10);
  }
}

}  // namespace attnviz::gui
