// attnviz GUI: scene files. The view (head, stage, colormap, selection, zoom) travels in
// Scene::extraJson under "view", so a saved scene reopens as it was left. Painted cells are
// the scene's custom mask, saved with it.
#include "app_state.h"

#include "attnviz/formats/data_dir.h"
#include "panels/panels.h"
#include "attnviz/formats/npy.h"
#include "attnviz/model/model_names.h"
#include "attnviz/session/request.h"

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

// A scene's path for the Head finder (a tree or a corpus): absolute, else beside the scene file,
// else under the data folder (assets/ in the source tree, share/attnviz installed).
std::string headFinderPath(const std::string& p, const std::string& scene) {
  namespace fs = std::filesystem;
  if (p.empty() || fs::path(p).is_absolute()) return p;
  std::error_code ec;
  const fs::path beside = fs::path(scene).parent_path() / p;
  if (fs::exists(beside, ec)) return beside.string();
  if (const std::string d = dataDir(); !d.empty() && fs::exists(fs::path(d) / p, ec))
    return (fs::path(d) / p).string();
  return p;
}

// "view": {"panels": {"headFinder": {"tree": DIR | "corpus": FILE, "seqLen": N, "select": [L, H],
// "sort": METRIC, "x": METRIC, "y": METRIC, "sequence": ID}}}: the Head finder opens on a tree
// (or runs on a corpus once the model is open), selects a head, sorts its table, sets the
// scatter's axes and opens a kept sequence in the main view.
void applyHeadFinder(AppState& s, const json& o, const std::string& path) {
  HeadFinderState& h = s.model.heads;
  const std::string where = path + ": view.panels.headFinder";
  if (!o.is_object()) throw InputError(where + ": expected an object");
  auto str = [&](const char* key) {
    if (!o.contains(key)) return std::string();
    if (!o[key].is_string() || o[key].get<std::string>().empty() ||
        o[key].get<std::string>().size() >= 1000)
      throw InputError(where + "." + key + ": expected a non-empty string");
    return o[key].get<std::string>();
  };
  const std::string tree = str("tree"), corpus = str("corpus"), sort = str("sort");
  const std::string x = str("x"), y = str("y");
  if (tree.empty() == corpus.empty())
    throw InputError(where + ": expected one of \"tree\" (a folder) and \"corpus\" (a file)");
  h.open = true;
  if (!tree.empty()) openHeadTree(s, headFinderPath(tree, path));
  if (!corpus.empty()) {
    std::snprintf(h.corpusPath, sizeof h.corpusPath, "%s", headFinderPath(corpus, path).c_str());
    h.wantRun = true;
  }
  if (o.contains("seqLen")) {
    if (!o["seqLen"].is_number_integer() || o["seqLen"].get<long long>() < 2 ||
        o["seqLen"].get<long long>() > 65536)
      throw InputError(where + ".seqLen: expected an integer in [2, 65536]");
    h.seqLen = int(o["seqLen"].get<long long>());
  }
  if (o.contains("select")) {
    const json& v = o["select"];
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
        v[0].get<long long>() < 0 || v[1].get<long long>() < 0 || v[0].get<long long>() > 4096 ||
        v[1].get<long long>() > 4096)
      throw InputError(where + ".select: expected [layer, head]");
    h.wantLayer = int(v[0].get<long long>()), h.wantHead = int(v[1].get<long long>());
  }
  if (o.contains("sequence")) {
    if (!o["sequence"].is_number_integer() || o["sequence"].get<long long>() < 0 ||
        o["sequence"].get<long long>() > (1LL << 30))
      throw InputError(where + ".sequence: expected a sequence_id >= 0");
    h.wantSequence = int(o["sequence"].get<long long>());
  }
  if (!sort.empty()) h.requestSortName = sort;
  if (!x.empty()) h.xName = x;
  if (!y.empty()) h.yName = y;
  if (h.tree && !h.requestSortName.empty()) {  // a tree already open: applied now
    const auto& ms = h.tree->metrics;
    const auto it = std::find(ms.begin(), ms.end(), h.requestSortName);
    if (it == ms.end()) throw InputError(where + ".sort: '" + sort + "' is not a metric of " + h.tree->dir);
    h.requestSort = 2 + int(it - ms.begin());
    h.requestSortName.clear();
  }
}

// "view": {"panels": {"residual": true, "cacheLoss": {"sinks": S, "window": W}, "retrieval":
// {"needle", "question", "answer", "depths", "k", "draws"}}}: a model scene opens the
// residual-stream panel, and once its text has run scores it under the three caches and scores
// every head for retrieval (the text as the haystack).
void applyPanels(AppState& s, const std::string& viewText, const std::string& path) {
  json j;
  try {
    j = json::parse(viewText);
  } catch (const json::exception&) {
    return;  // parseSceneView already refused a view that is not JSON
  }
  if (!j.is_object() || !j.contains("panels")) return;
  const json& p = j["panels"];
  if (!p.is_object()) throw InputError(path + ": view.panels: expected an object");
  if (p.contains("residual")) {
    if (!p["residual"].is_boolean())
      throw InputError(path + ": view.panels.residual: expected true or false");
    s.model.showResidual = p["residual"].get<bool>();
  }
  if (p.contains("whyHere")) {
    const json& w = p["whyHere"];
    const std::string where = path + ": view.panels.whyHere";
    if (w.is_boolean()) {
      s.model.showWhyHere = w.get<bool>();
    } else if (w.is_object()) {
      s.model.showWhyHere = true;
      for (const auto& [key, value] : w.items())
        if (key != "tab" && key != "kind")
          throw InputError(where + ": unknown field '" + key + "' (expected tab, kind)");
      if (w.contains("tab")) {
        const std::string tab = w["tab"].is_string() ? w["tab"].get<std::string>() : "";
        if (tab != "split" && tab != "composition")
          throw InputError(where + ".tab: expected \"split\" or \"composition\"");
        s.model.whyHereTab = tab == "split" ? 0 : 1;
        s.model.whyHereTabAsked = true;
      }
      if (w.contains("kind")) {
        const std::string kind = w["kind"].is_string() ? w["kind"].get<std::string>() : "";
        if (kind != "q" && kind != "k" && kind != "v")
          throw InputError(where + ".kind: expected \"q\", \"k\" or \"v\"");
        s.model.whyHereKind = kind == "q" ? 0 : kind == "k" ? 1 : 2;
      }
    } else {
      throw InputError(where + ": expected true, false or an object {tab, kind}");
    }
  }
  if (p.contains("cacheLoss")) {
    const json& c = p["cacheLoss"];
    auto num = [&](const char* key, int lo, int hi) {
      if (!c.is_object() || !c.contains(key) || !c[key].is_number_integer() ||
          c[key].get<long long>() < lo || c[key].get<long long>() > hi)
        throw InputError(path + ": view.panels.cacheLoss." + key + ": expected an integer in [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return int(c[key].get<long long>());
    };
    s.model.cacheLoss.sinks = num("sinks", 0, 4096);
    s.model.cacheLoss.window = num("window", 1, 1 << 20);
    s.model.cacheLoss.scripted = true;
  }
  if (p.contains("retrieval")) {
    const json& r = p["retrieval"];
    RetrievalState& st = s.model.retrieval;
    auto text = [&](const char* key, char* dst, std::size_t size) {
      if (!r.is_object() || !r.contains(key) || !r[key].is_string() ||
          r[key].get<std::string>().size() >= size)
        throw InputError(path + ": view.panels.retrieval." + key + ": expected a string of under " +
                         std::to_string(size) + " bytes");
      std::snprintf(dst, size, "%s", r[key].get<std::string>().c_str());
    };
    auto num = [&](const char* key, int lo, int hi) {
      if (!r.contains(key) || !r[key].is_number_integer() || r[key].get<long long>() < lo ||
          r[key].get<long long>() > hi)
        throw InputError(path + ": view.panels.retrieval." + key + ": expected an integer in [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return int(r[key].get<long long>());
    };
    text("needle", st.needle, sizeof st.needle);
    text("question", st.question, sizeof st.question);
    text("answer", st.answer, sizeof st.answer);
    st.depths = num("depths", 1, 11);
    st.k = num("k", 1, 16);
    st.draws = num("draws", 0, 20);
    st.scripted = true;
  }
  if (p.contains("headFinder")) applyHeadFinder(s, p["headFinder"], path);
  if (p.contains("positionBias")) {  // T5's Position bias panel: whether it is open
    const json& b = p["positionBias"];
    if (!b.is_object() || !b.contains("open") || !b["open"].is_boolean())
      throw InputError(path + ": view.panels.positionBias: expected {\"open\": true or false}");
    s.dump.positionBiasOpen = b["open"].get<bool>();
    s.dump.positionBiasSet = true;
  }
  if (p.contains("alignment")) {  // an encoder-decoder's Alignment panel
    const json& a = p["alignment"];
    AlignmentState& al = s.dump.align;
    if (!a.is_object()) throw InputError(path + ": view.panels.alignment: expected an object");
    auto flag = [&](const char* key, bool& dst) {
      if (!a.contains(key)) return;
      if (!a[key].is_boolean())
        throw InputError(path + ": view.panels.alignment." + key + ": expected true or false");
      dst = a[key].get<bool>();
    };
    if (a.contains("gold")) {
      if (!a["gold"].is_string() || a["gold"].get<std::string>().size() >= sizeof al.gold)
        throw InputError(path + ": view.panels.alignment.gold: expected a string of under " +
                         std::to_string(sizeof al.gold) + " bytes");
      std::snprintf(al.gold, sizeof al.gold, "%s", a["gold"].get<std::string>().c_str());
      al.goldApplied = al.gold;
    }
    flag("shift", al.options.shift);
    flag("mean", al.meanHeads);
    flag("words", al.words);
    if (a.contains("rule")) {
      const std::string r = a["rule"].is_string() ? a["rule"].get<std::string>() : "";
      if (r != "argmax" && r != "threshold")
        throw InputError(path + ": view.panels.alignment.rule: expected \"argmax\" or "
                         "\"threshold\"");
      al.options.rule = r == "argmax" ? AlignRule::Argmax : AlignRule::Threshold;
    }
    if (a.contains("threshold")) {
      const json& t = a["threshold"];
      if (!t.is_number() || !(t.get<double>() > 0.0) || t.get<double>() > 1.0)
        throw InputError(path + ": view.panels.alignment.threshold: expected a number in (0, 1]");
      al.options.threshold = float(t.get<double>());
    }
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
  if (s.flash.active)  // the step as shown: the walkthrough clamps the asked one to its schedule
    view["flash"] = {{"blockRows", s.flash.blockRows},
                     {"blockKeys", s.flash.blockKeys},
                     {"step", s.flash.walk ? s.flash.walk->step() + 1 : s.flash.step}};
  else
    view.erase("flash");
  view.erase("painted");  // painted cells are the scene's custom mask now
  // The research panels a model view had open: the residual stream, the loss by cache.
  json panels = json::object();
  if (s.model.open() && s.model.showResidual) panels["residual"] = true;
  if (s.model.open() && s.model.showWhyHere) {
    if (s.model.whyHereTab == 0 && s.model.whyHereKind == 1)
      panels["whyHere"] = true;
    else
      panels["whyHere"] = {{"tab", s.model.whyHereTab == 0 ? "split" : "composition"},
                           {"kind", std::string(1, "qkv"[std::clamp(s.model.whyHereKind, 0, 2)])}};
  }
  if (s.model.open() && !s.model.cacheLoss.result.dense.empty())
    panels["cacheLoss"] = {{"sinks", s.model.cacheLoss.result.sinks},
                           {"window", s.model.cacheLoss.result.window}};
  if (s.model.open() && !s.model.retrieval.result.cases.empty()) {
    const RetrievalState& r = s.model.retrieval;
    panels["retrieval"] = {{"needle", r.needle}, {"question", r.question}, {"answer", r.answer},
                           {"depths", r.depths}, {"k", r.k}, {"draws", r.draws}};
  }
  if (s.model.heads.open && s.model.heads.tree) {  // the Head finder: its tree and head
    const HeadFinderState& h = s.model.heads;
    json hf = {{"tree", h.tree->dir}};
    if (h.selected >= 0)
      hf["select"] = {h.tree->rows[std::size_t(h.selected)].layer,
                      h.tree->rows[std::size_t(h.selected)].head};
    if (h.sortColumn >= 2) hf["sort"] = h.tree->metrics[std::size_t(h.sortColumn - 2)];
    hf["x"] = h.tree->metrics[std::size_t(h.xMetric)];
    hf["y"] = h.tree->metrics[std::size_t(h.yMetric)];
    panels["headFinder"] = std::move(hf);
  }
  if (s.dump.seq2seq) {  // the Alignment panel's reading and gold
    const AlignmentState& al = s.dump.align;
    panels["alignment"] = {
        {"gold", al.goldApplied},
        {"shift", al.options.shift},
        {"mean", al.meanHeads},
        {"words", al.words},
        {"rule", al.options.rule == AlignRule::Argmax ? "argmax" : "threshold"},
        {"threshold", al.options.threshold}};
  }
  if (s.dump.seq2seq && s.dump.positionBiasOpen) panels["positionBias"] = {{"open", true}};
  if (panels.empty())
    view.erase("panels");
  else
    view["panels"] = panels;
  return view.dump();
}

}  // namespace

void resetView(AppState& s) {
  s.view.zoom = 1.0f;
  s.view.panX = s.view.panY = 0.0f;
}

void loadSceneInto(AppState& s, const std::string& path) {
  if (isImageScene(path)) {  // an image model's view (image_view_panel.cpp)
    loadImageScene(s, path);
    return;
  }
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
      s.dump.align = AlignmentState{};  // a scene's alignment reading, or the defaults
      s.dump.positionBiasOpen = false;
      s.dump.positionBiasSet = true;
      applyPanels(s, sc.extraJson, path);
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
  if (s.image.active) {
    saveImageScene(s, path);
    return;
  }
  if (s.model.open()) {  // a model view: the "model" object (folder, text, layer, head, ablations)
    const ModelSource& src = *s.model.source;
    Scene sc;
    sc.title = s.sceneData().title;
    sc.notes = s.sceneData().notes;
    sc.model.path = sceneModelPath(s.model.dir);
    sc.model.text = src.text();
    sc.model.chat = src.chat().on;
    sc.model.system = src.chat().system;
    // An encoder's pair, the block shown and the special tokens.
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
  if (s.dump.seq2seq) {  // an encoder-decoder: its folder, both texts, the site, ablations
    const Seq2SeqSource& q = *s.dump.seq2seq;
    Scene sc;
    sc.title = s.sceneData().title;
    sc.notes = s.sceneData().notes;
    sc.model.path = sceneModelPath(s.dump.path);
    sc.model.text = q.sourceText();
    sc.model.target = q.targetText();
    // A watched translation: its starting target and length, run again when the scene opens.
    if (s.dump.translate.used()) {
      sc.model.target = s.dump.translate.from;
      sc.model.generate.tokens = std::max(1, s.dump.translate.tokens);
    }
    const int site = std::clamp(s.dump.layer, 0, int(q.sites().size()) - 1);
    sc.model.site = seq2seqSiteName(q.sites()[std::size_t(site)]);
    sc.model.head = s.view.head;
    sc.model.maskSource = q.maskedSource();
    for (const auto& [id, h] : q.ablations()) {
      if (id.stack == 0 && id.site == 0) sc.model.ablate.emplace_back(id.layer, h);
      else sc.model.siteAblate.push_back(siteAblationText({id, h}));
    }
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
  if (isImageFilePath(path) && !std::filesystem::is_directory(path, ec)) {
    if (!s.image.active)
      throw InputError(path + ": an image goes with an image model (open one first: --model DIR)");
    openImageFile(s, path);  // the image view runs it through the open image model
    return;
  }
  if (std::filesystem::is_directory(path, ec) || ext == ".gguf" ||
      (!std::filesystem::exists(path, ec) && looksLikeModelName(path) && ext != ".json" &&
       ext != ".npy" && !isDumpPath(path))) {
    openModel(s, path);  // a model folder, GGUF file or name (File > Open model, or dropped)
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
