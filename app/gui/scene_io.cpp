// attnviz GUI: scene files. The view (head, stage, colormap, selection, zoom) travels in
// Scene::extraJson under "view", so a saved scene reopens as it was left. Painted cells are
// the scene's custom mask, saved with it.
#include "app_state.h"

#include "attnviz/formats/data_dir.h"
#include "attnviz/formats/npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace attnviz::gui {

using nlohmann::json;

namespace {

// The scene's saved view (parsed and range-checked by the core) onto the GUI's view.
void applyView(AppState& s, const SceneView& v) {
  ViewState& vs = s.view;
  vs.head = v.head;
  if (!v.stage.empty()) vs.stage = stageFromKey(v.stage);
  if (auto c = colormapFromName(v.weightColormap)) vs.weightColormap = *c;
  if (auto c = colormapFromName(v.scoreColormap)) vs.scoreColormap = *c;
  if (!v.scale.empty())
    vs.scale = v.scale == "log"     ? ColorScale::Log
               : v.scale == "gamma" ? ColorScale::Gamma
                                    : ColorScale::Linear;
  vs.gamma = v.gamma;
  vs.autoRange = v.autoRange;
  vs.wrongAxis = v.wrongAxis;
  vs.headAverage = v.headAverage;
  vs.selectedRow = v.selectedRow;
  vs.zoom = v.zoom;
  vs.panX = v.panX;
  vs.panY = v.panY;
  s.maskEditor.blocksOn = v.blocksOn;  // the block-sparsity overlay (mask_kinds_panel.cpp)
  s.maskEditor.blockRows = v.blockRows;
  s.maskEditor.blockCols = v.blockCols;
  s.flash = FlashState{};  // the FlashAttention stage, rebuilt for the new scene
  s.flash.active = v.flashOn;
  s.flash.blockRows = v.flashBlockRows;
  s.flash.blockKeys = v.flashBlockKeys;
  s.flash.step = v.flashStep;
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
  if (s.flash.active)  // the step as shown: the walkthrough clamps the asked one to its schedule
    view["flash"] = {{"blockRows", s.flash.blockRows},
                     {"blockKeys", s.flash.blockKeys},
                     {"step", s.flash.walk ? s.flash.walk->step() + 1 : s.flash.step}};
  else
    view.erase("flash");
  view.erase("painted");  // painted cells are the scene's custom mask now
  return view.dump();
}

}  // namespace

void resetView(AppState& s) {
  s.view.zoom = 1.0f;
  s.view.panX = s.view.panY = 0.0f;
}

void loadSceneInto(AppState& s, const std::string& path) {
  Scene sc = loadScene(path);  // throws InputError naming the file
  if (sc.model.any()) {  // a model scene: the model view, once the folder has opened
    s.model.sceneTitle = sc.title;
    s.model.sceneNotes = sc.notes;
    const SceneView v = parseSceneView(sc.extraJson, path);
    openModelScene(s, sc, path, false);
    if (sc.extraJson != "{}" && !sc.extraJson.empty()) {  // a saved model view: as it was left
      s.view = ViewState{};
      try {
        applyView(s, v);
      } catch (const UsageError& e) {
        throw InputError(path + ": view." + e.what());
      }
      s.view.head = sc.model.head;  // the model's head wins (the model view shows it)
    }
    return;
  }
  const SceneView v = parseSceneView(sc.extraJson, path);
  closeSources(s);  // a scene replaces an open model or dump
  s.view = ViewState{};
  try {
    applyView(s, v);
  } catch (const UsageError& e) {
    throw InputError(path + ": view." + e.what());
  }
  s.session.setScene(std::move(sc));
  s.scene.path = path;
  notify(s, "Opened " + path);
}

// A model view's folder as a scene names it: relative to the shipped models folder when it lies
// under it (loadScene resolves a relative path there), else absolute.
static std::string sceneModelPath(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) p = fs::absolute(dir).lexically_normal();
  const std::string models = dataSubdir("models");
  if (!models.empty()) {
    std::error_code ec2;
    const fs::path root = fs::weakly_canonical(fs::path(models), ec2);
    if (!ec2) {
      const fs::path rel = p.lexically_relative(root);
      if (!rel.empty() && *rel.begin() != ".." && rel != ".") return rel.generic_string();
    }
  }
  return p.string();
}

void saveSceneFrom(AppState& s, const std::string& path) {
  if (s.model.open()) {  // a model view: the "model" object (folder, text, layer, head, ablations)
    const ModelSource& src = *s.model.source;
    Scene sc;
    sc.title = s.sceneData().title;
    sc.notes = s.sceneData().notes;
    sc.model.path = sceneModelPath(s.model.dir);
    sc.model.text = src.text();
    // An encoder's pair, the block shown and the special tokens (issue 32).
    if (!src.model().config().causal) {
      sc.model.textPair = src.textPair();
      if (s.model.slice != int(PairSlice::All) && src.segments().pair)
        sc.model.slice = pairSliceKey(PairSlice(s.model.slice));
      if (s.model.special != int(SpecialTokens::Show))
        sc.model.special = specialTokensKey(SpecialTokens(s.model.special));
    }
    sc.model.layer = s.model.layer;
    sc.model.head = s.view.head;
    for (int l = 0; l < src.layers(); ++l)
      for (int h = 0; h < src.heads(); ++h)
        if (src.ablated(l, h)) sc.model.ablate.emplace_back(l, h);
    // The masks, τ and RoPE switches of every layer that has one (ablations are listed above).
    const Interventions& iv = src.interventions();
    for (int l = 0; l < static_cast<int>(iv.layers.size()); ++l) {
      const LayerIntervention& e = iv.layers[l];
      if (!e.mask.any() && e.temperature == 1.0f && !e.ropeOff) continue;
      SceneLayerIntervention li;
      li.layer = l;
      li.mask = e.mask;
      li.mask.causal = false;
      li.temperature = e.temperature;
      li.ropeOff = e.ropeOff;
      sc.model.interventions.push_back(std::move(li));
    }
    const GenerateState& g = s.model.gen;
    if (g.used()) {  // the Generate panel's settings, started again when the scene reopens
      sc.model.generate.tokens = std::clamp(g.n, 1, 4096);
      sc.model.generate.greedy = !g.sample;
      sc.model.generate.temperature = double(std::max(g.temperature, 0.01f));
      sc.model.generate.topK = std::max(g.topK, 0);
      sc.model.generate.seed = std::max(g.seed, 0);
    }
    sc.model.attribution = sceneAttribution(s);
    sc.extraJson = viewJson(s, "{}");
    saveScene(path, sc);
    s.scene.path = path;
    return;
  }
  Scene sc = s.sceneData();
  sc.extraJson = viewJson(s, sc.extraJson);
  saveScene(path, sc);
  s.scene.path = path;
}

void openDroppedFile(AppState& s, const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    openModel(s, path);  // a model folder (File > Open model, or dropped)
  } else if (isDumpPath(path)) {
    openDump(s, path);
  } else if (ext == ".json") {
    loadSceneInto(s, path);
  } else if (ext == ".npy") {
    s.ui.npyPending = path;
  } else {
    throw InputError(path + ": not a scene (.json), tensor (.npy), dump (.safetensors, .npz) or model folder");
  }
}

void useNpyAs(AppState& s, const std::string& path, char role) {
  Scene& sc = s.session.editScene();
  if (role == 'm') {
    const MaskFile mf = loadMaskNpy(path);
    MaskSpec& m = sc.params.mask;
    m.customKind = mf.isBool ? MaskSpec::Custom::Allow : MaskSpec::Custom::Bias;
    m.custom = mf.values;
    validateParams(effectiveParams(sc), s.heads(), s.tq(), s.tk());  // shape check, now
    s.session.touchMask();
    notify(s, "Custom mask from " + path);
    return;
  }
  loadTensorNpy(path);  // validates now, so a bad file is reported at the drop
  std::string& slot = role == 'q' ? sc.qPath : role == 'k' ? sc.kPath : sc.vPath;
  slot = std::filesystem::absolute(path).string();
  if (!sc.qPath.empty() && !sc.kPath.empty() && !sc.vPath.empty()) {
    s.session.touchInputs();
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
