// attnviz panel: the Head finder. A window over the layout that reads the tree `attnviz heads`
// writes (or HeadVis's, or Neuronpedia's) or runs the finder on a corpus for the open model on a
// worker (progress and Cancel), then shows every head: a scatter by any two metrics (colour by
// layer), a sortable table, and for the selected head its dashboard: each metric with its rank,
// the max-activation and |q - k| histograms, the top query and key tokens, the heads nearest in
// metric space, and the kept sequences grouped by interval, each drawn as a strip of its
// strongest rows. A click on a sequence runs it through the open model in the main view, on
// that head, where the other panels' interventions apply.
#include "panels/panels.h"

#include "attnviz/model/tokenizers/tokenizer.h"

#include <imgui.h>
#include <imgui_internal.h>  // TableSetColumnSortDirection: a scene's or script's sort

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <unistd.h>

namespace attnviz::gui {

namespace {

namespace fs = std::filesystem;

// Short column headers for the metrics HeadVis and attnviz write (others keep their name).
std::string shortName(const std::string& m) {
  static const std::map<std::string, std::string> names{
      {"self_attention_score", "self"},      {"prev_token_score", "prev"},
      {"pattern_entropy", "entropy"},        {"qk_distance", "|q-k|"},
      {"qk_distance_variance", "|q-k| var"}, {"induction_score", "induction"},
      {"first_token_share", "first tok"},    {"mean_max_activation", "max act"}};
  const auto it = names.find(m);
  return it == names.end() ? m : it->second;
}

unsigned int layerColour(int layer, int layers) {
  return colormapU32(ColormapId::Viridis,
                     layers > 1 ? 0.1f + 0.85f * float(layer) / float(layers - 1) : 0.6f);
}

std::string headName(const HeadTreeRow& r) {
  return "L" + std::to_string(r.layer) + "H" + std::to_string(r.head);
}

std::string valueText(double v) {
  if (std::isnan(v)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

// The rows in the table's order: sorted by `column` (0 layer, 1 head, 2+ metric), undefined
// values last either way, ties in tree order.
void sortRows(HeadFinderState& h) {
  const HeadTree& t = *h.tree;
  h.order.resize(t.rows.size());
  for (std::size_t k = 0; k < t.rows.size(); ++k) h.order[k] = k;
  const int c = h.sortColumn;
  if (c < 0) return;
  const bool desc = h.sortDescending;
  std::stable_sort(h.order.begin(), h.order.end(), [&](std::size_t a, std::size_t b) {
    const HeadTreeRow &ra = t.rows[a], &rb = t.rows[b];
    double va, vb;
    if (c == 0) va = ra.layer, vb = rb.layer;
    else if (c == 1) va = ra.head, vb = rb.head;
    else va = ra.values[std::size_t(c - 2)], vb = rb.values[std::size_t(c - 2)];
    const bool na = std::isnan(va), nb = std::isnan(vb);
    if (na || nb) return !na && nb;
    return desc ? va > vb : va < vb;
  });
}

int metricIndex(const HeadTree& t, const std::string& name) {
  for (std::size_t k = 0; k < t.metrics.size(); ++k)
    if (t.metrics[k] == name) return int(k);
  return -1;
}

int rowOf(const HeadTree& t, int layer, int head) {
  for (std::size_t k = 0; k < t.rows.size(); ++k)
    if (t.rows[k].layer == layer && t.rows[k].head == head) return int(k);
  return -1;
}

// The selected head's file, read once per selection (a bad file: one line in the dashboard).
void loadDashboard(HeadFinderState& h) {
  if (!h.tree || h.selected < 0 || h.dashRow == h.selected) return;
  h.dashRow = h.selected;
  h.dash.reset();
  h.dashError.clear();
  const HeadTreeRow& r = h.tree->rows[std::size_t(h.selected)];
  try {
    h.dash = std::make_shared<HeadDashboardData>(
        readHeadFile(headFilePath(*h.tree, r.layer, r.head)));
  } catch (const std::exception& e) {
    h.dashError = e.what();
  }
}

// The kept sequence's text for the model: its ids decoded (the leading special tokens left out:
// the model's tokenizer adds them again), else its pieces joined (HeadVis's trees hold no ids).
std::string sequenceText(const Model& model, const HeadTreeSequence& q) {
  const Tokenizer& tok = model.tokenizer();
  if (!q.ids.empty()) {
    std::vector<int> ids = q.ids;
    std::size_t skip = 0;
    while (skip < ids.size() && ((tok.bos() && ids[skip] == *tok.bos()) || tok.isSpecial(ids[skip])))
      ++skip;
    ids.erase(ids.begin(), ids.begin() + std::ptrdiff_t(skip));
    return tok.decode(ids);
  }
  std::string text;
  std::size_t k = 0;
  if (tok.bos() && !q.tokens.empty() && q.tokens[0] == tok.printable(*tok.bos())) k = 1;
  for (; k < q.tokens.size(); ++k) {
    const std::string& p = q.tokens[k];
    for (std::size_t c = 0; c < p.size(); ++c) {  // `tokenize --pieces`' escapes undone
      if (p[c] == '\\' && c + 1 < p.size()) {
        const char e = p[c + 1];
        if (e == 'n') { text += '\n'; ++c; continue; }
        if (e == 't') { text += '\t'; ++c; continue; }
        if (e == 'r') { text += '\r'; ++c; continue; }
        if (e == '\\') { text += '\\'; ++c; continue; }
        if (e == 'x' && c + 3 < p.size()) {
          text += char(std::stoi(p.substr(c + 2, 2), nullptr, 16));
          c += 3;
          continue;
        }
      }
      text += p[c];
    }
  }
  if (!text.empty() && text[0] == ' ') text.erase(0, 1);  // the normalizer's leading space
  return text;
}

// The query row of a kept sequence with the largest stored weight off position 0 on both axes
// (where the max activation is taken); -1 when it stores none.
int strongestRow(const HeadTreeSequence& q) {
  int best = -1;
  double bv = -1;
  for (std::size_t e = 0; e < q.indices.size(); ++e) {
    const int row = int(q.indices[e] / q.seqLen), key = int(q.indices[e] % q.seqLen);
    if (row >= 1 && key >= 1 && q.values[e] > bv) bv = q.values[e], best = row;
  }
  return best;
}

// A scene's axes by metric name (xName, yName), on the open tree. A scene that names its tree
// opens it before it reads the axes, so they are applied here and on the next sync.
void applyAxisNames(HeadFinderState& h) {
  if (!h.tree) return;
  const HeadTree& t = *h.tree;
  for (auto [name, axis] : {std::pair<std::string*, int*>{&h.xName, &h.xMetric}, {&h.yName, &h.yMetric}}) {
    if (name->empty()) continue;
    const int m = metricIndex(t, *name);
    if (m < 0) h.error = t.dir + ": no metric '" + *name + "' for the scatter's axis";
    else *axis = m;
    name->clear();
  }
}

}  // namespace

void openHeadTree(AppState& s, const std::string& dir) {
  HeadFinderState& h = s.model.heads;
  auto tree = std::make_shared<HeadTree>(readHeadTree(dir));  // throws InputError: one line
  h.tree = std::move(tree);
  if (!h.tempTree.empty() && dir != h.tempTree) h.removeTempTree();  // no longer shown
  h.open = true;
  h.error.clear();
  std::snprintf(h.treePath, sizeof h.treePath, "%s", dir.c_str());
  h.selected = -1, h.dashRow = -1;
  h.dash.reset();
  h.dashError.clear();
  const HeadTree& t = *h.tree;
  // The axes: previous-token against induction when the tree has them, else the first two.
  const int prev = metricIndex(t, "prev_token_score"), ind = metricIndex(t, "induction_score");
  h.xMetric = prev >= 0 ? prev : 0;
  h.yMetric = ind >= 0 ? ind : std::min<int>(1, int(t.metrics.size()) - 1);
  applyAxisNames(h);
  if (h.sortColumn >= 2 + int(t.metrics.size())) h.sortColumn = -1;
  if (!h.requestSortName.empty()) {
    const int m = metricIndex(t, h.requestSortName);
    if (m < 0) h.error = dir + ": no metric '" + h.requestSortName + "' to sort by";
    else h.requestSort = 2 + m, h.sortColumn = 2 + m, h.sortDescending = true;
    h.requestSortName.clear();
  }
  sortRows(h);
}

bool openHeadFinderSequence(AppState& s, int sequenceId) {
  HeadFinderState& h = s.model.heads;
  ModelState& m = s.model;
  if (!h.tree || h.selected < 0 || !h.dash) return false;
  const HeadTreeRow& r = h.tree->rows[std::size_t(h.selected)];
  const HeadTreeSequence* q = nullptr;
  for (const HeadTreeSequence& c : h.dash->sequences)
    if (c.sequenceId == sequenceId) q = &c;
  if (!q) {
    h.error = headFilePath(*h.tree, r.layer, r.head) + ": no kept sequence " +
              std::to_string(sequenceId);
    return false;
  }
  if (!m.open()) {
    h.error = "open the tree's model (File > Open model) to run a sequence through it";
    return false;
  }
  const Model& model = m.source->model();
  if (r.layer >= m.source->layers() || r.head >= m.source->heads()) {
    h.error = "the open model has " + std::to_string(m.source->layers()) + " layers x " +
              std::to_string(m.source->heads()) + " heads: the tree's L" + std::to_string(r.layer) +
              "H" + std::to_string(r.head) + " is not one of them (another model's tree?)";
    return false;
  }
  const std::string text = sequenceText(model, *q);
  std::snprintf(m.text, sizeof m.text, "%s", text.c_str());
  m.textEditedAt = 0;  // runs at the next frame
  if (m.layer != r.layer) m.layerDirty = true;
  m.layer = r.layer;
  s.view.head = r.head;
  s.view.headAverage = false;
  s.view.stage = ViewStage::Weights;
  s.flash.active = false;
  s.view.selectedRow = strongestRow(*q);
  h.openedLayer = r.layer, h.openedHead = r.head, h.openedSequence = sequenceId;
  h.openedIds = q->ids;
  h.error.clear();
  notify(s, "Sequence " + std::to_string(sequenceId) + " on layer " + std::to_string(r.layer) +
                ", head " + std::to_string(r.head) + " (the Head finder is collapsed: click its title)");
  return true;
}

namespace {

// Starts the finder on the corpus for the open model (the tree goes to outPath, or a folder
// under the temp dir named after the model and the corpus).
void startRun(AppState& s) {
  HeadFinderState& h = s.model.heads;
  ModelState& m = s.model;
  h.wantRun = false;
  if (!m.open()) {
    h.error = "open a model to run the finder on a corpus";
    return;
  }
  h.stopRun();
  const std::string corpus = h.corpusPath;
  std::string out = h.outPath;
  if (out.empty())
    out = (fs::temp_directory_path() / ("attnviz-heads-" + std::to_string(::getpid()) + "-" +
                                        modelName(m.dir) + "-" + corpusName(corpus)))
              .string();
  h.error.clear();
  h.run = std::make_shared<HeadFinderRun>();
  h.run->startedAt = nowSeconds();
  h.run->temp = !h.outPath[0];
  h.progress = std::make_shared<PassProgress>();
  std::shared_ptr<const Model> model = m.source->sharedModel();
  std::shared_ptr<PassProgress> progress = h.progress;
  std::shared_ptr<HeadFinderRun> run = h.run;
  const int seqLen = h.seqLen;
  const long long sequences = h.sequences;
  const std::string dir = m.dir;
  h.job = std::async(std::launch::async, [=]() -> std::string {
    const std::vector<std::string> docs = readCorpusDocuments(corpus, "text");
    const std::vector<std::vector<int>> seqs =
        headFinderSequences(*model, docs, corpus, seqLen, sequences, false);
    PassProgress::Scope scope(progress.get());
    int warmup = 0;
    const HeadFinderSettings settings;
    std::vector<HeadResult> results = runHeadFinder(
        *model, seqs, settings,
        [&](long long i, long long n) {
          {
            std::lock_guard<std::mutex> lock(run->m);
            run->done = i, run->total = n;
          }
          wakeFrameLoop();
        },
        &warmup);
    const ModelConfig& c = model->config();
    HeadTreeInfo info;
    info.modelName = modelName(dir);
    info.datasetName = corpusName(corpus);
    info.layers = c.nLayer, info.heads = c.nHead, info.intervals = settings.intervals;
    char pc[512];
    std::snprintf(pc, sizeof pc,
                  "{\"tool\": \"attnviz (Head finder panel)\", \"seq_len\": %d, \"sequences\": "
                  "%lld, \"warmup\": %d, \"documents_read\": %zu}",
                  seqLen, (long long)seqs.size(), warmup, docs.size());
    info.pipelineConfigJson = pc;
    const Tokenizer& tok = model->tokenizer();
    writeHeadTree(out, info, results, [&](int id) { return tok.printable(id); });
    return out;
  });
}

// A finished run's tree opened; a scripted selection applied once the tree is open.
void syncHeadFinder(AppState& s) {
  HeadFinderState& h = s.model.heads;
  if (h.wantRun && s.model.open() && !s.model.loading.valid()) startRun(s);
  if (h.job.valid() &&
      h.job.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    try {
      const std::string dir = h.job.get();
      openHeadTree(s, dir);
      if (h.run && h.run->temp) h.tempTree = dir;
    } catch (const PassCancelled&) {
      h.error = "the run was cancelled; nothing was written";
    } catch (const std::exception& e) {
      h.error = e.what();
    }
    h.job = {};
    h.progress.reset();
    h.run.reset();
  }
  if (!h.tree) return;
  applyAxisNames(h);
  if (h.requestSort >= 2 && h.sortColumn != h.requestSort) {
    h.sortColumn = h.requestSort, h.sortDescending = true;
    sortRows(h);
  }
  if (h.wantLayer >= 0) {
    const int row = rowOf(*h.tree, h.wantLayer, h.wantHead);
    if (row < 0)
      h.error = h.tree->dir + ": no head L" + std::to_string(h.wantLayer) + "H" +
                std::to_string(h.wantHead) + " in scatter_data.json";
    h.selected = row;
    h.wantLayer = h.wantHead = -1;
  }
  loadDashboard(h);
  if (h.wantSequence >= 0 && h.dash && s.model.open() && !s.model.loading.valid()) {
    openHeadFinderSequence(s, h.wantSequence);
    h.wantSequence = -1;
    ImGui::SetWindowCollapsed("Head finder", true);
  }
}

// A metric picker; returns whether it changed.
bool metricCombo(const char* label, const HeadTree& t, int& m) {
  bool changed = false;
  ImGui::SetNextItemWidth(170 * ImGui::GetIO().FontGlobalScale * ImGui::GetFontSize() / 13.0f);
  if (ImGui::BeginCombo(label, t.metrics[std::size_t(m)].c_str())) {
    for (std::size_t k = 0; k < t.metrics.size(); ++k)
      if (ImGui::Selectable(t.metrics[k].c_str(), int(k) == m)) m = int(k), changed = true;
    ImGui::EndCombo();
  }
  return changed;
}

void drawScatter(AppState& s, float height) {
  HeadFinderState& h = s.model.heads;
  const HeadTree& t = *h.tree;
  const float sc = s.ui.uiScale;
  metricCombo("x##hf", t, h.xMetric);
  ImGui::SameLine();
  metricCombo("y##hf", t, h.yMetric);
  ImGui::SameLine();
  helpMarker("Every head as a point: x and y are two of the tree's metrics, the colour is the "
             "layer (legend below). Hover a point for the head and its values; click it for its "
             "dashboard.");
  const std::size_t X = std::size_t(h.xMetric), Y = std::size_t(h.yMetric);
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  int undefined = 0;
  for (const HeadTreeRow& r : t.rows) {
    if (!std::isfinite(r.values[X]) || !std::isfinite(r.values[Y])) {
      ++undefined;
      continue;
    }
    x0 = std::min(x0, r.values[X]), x1 = std::max(x1, r.values[X]);
    y0 = std::min(y0, r.values[Y]), y1 = std::max(y1, r.values[Y]);
  }
  if (!(x1 >= x0)) x0 = 0, x1 = 1;
  if (!(y1 >= y0)) y0 = 0, y1 = 1;
  if (x1 - x0 < 1e-9) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 < 1e-9) y0 -= 0.5, y1 += 0.5;
  const double px = 0.06 * (x1 - x0), py = 0.06 * (y1 - y0);
  x0 -= px, x1 += px, y0 -= py, y1 += py;

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float axisL = ImGui::GetFontSize() * 3.6f, axisB = ImGui::GetFontSize() * 2.6f;
  const float w = ImGui::GetContentRegionAvail().x - axisL - 4 * sc;
  const float ph = std::max(60.0f, height - axisB - ImGui::GetFrameHeightWithSpacing());
  const ImVec2 p0(origin.x + axisL, origin.y), p1(p0.x + w, p0.y + ph);
  dl->AddRectFilled(p0, p1, IM_COL32(24, 25, 30, 255));
  dl->AddRect(p0, p1, IM_COL32(90, 90, 100, 255));
  auto toScreen = [&](double x, double y) {
    return ImVec2(p0.x + float((x - x0) / (x1 - x0)) * w, p1.y - float((y - y0) / (y1 - y0)) * ph);
  };
  // Ticks: the ends and the middle of each axis.
  const unsigned int grey = IM_COL32(150, 150, 160, 255);
  for (int k = 0; k <= 2; ++k) {
    const double fx = x0 + (x1 - x0) * k / 2, fy = y0 + (y1 - y0) * k / 2;
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", fx);
    const ImVec2 a = toScreen(fx, y0);
    dl->AddLine(ImVec2(a.x, p1.y), ImVec2(a.x, p1.y + 3 * sc), grey);
    const float tw = ImGui::CalcTextSize(b).x;
    dl->AddText(ImVec2(std::clamp(a.x - tw * 0.5f, p0.x, p1.x - tw), p1.y + 3 * sc), grey, b);
    std::snprintf(b, sizeof b, "%.3g", fy);
    const ImVec2 c = toScreen(x0, fy);
    dl->AddLine(ImVec2(p0.x - 3 * sc, c.y), ImVec2(p0.x, c.y), grey);
    dl->AddText(ImVec2(p0.x - 5 * sc - ImGui::CalcTextSize(b).x,
                       std::clamp(c.y - ImGui::GetFontSize() * 0.5f, p0.y, p1.y - ImGui::GetFontSize())),
                grey, b);
  }
  const std::string xl = t.metrics[X] + "  \xe2\x86\x92", yl = t.metrics[Y] + "  \xe2\x86\x92";
  dl->AddText(ImVec2(p0.x + (w - ImGui::CalcTextSize(xl.c_str()).x) * 0.5f,
                     p1.y + 3 * sc + ImGui::GetFontSize()),
              IM_COL32(220, 220, 225, 255), xl.c_str());
  addVerticalText(dl, origin.x, p0.y + (ph + ImGui::CalcTextSize(yl.c_str()).x) * 0.5f,
                  IM_COL32(220, 220, 225, 255), yl.c_str());

  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##hf-scatter", ImVec2(w, ph));
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  int hover = -1;
  float best = 7.0f * sc;
  const float rad = std::max(3.0f, 4.0f * sc);
  for (std::size_t k = 0; k < t.rows.size(); ++k) {
    const HeadTreeRow& r = t.rows[k];
    if (!std::isfinite(r.values[X]) || !std::isfinite(r.values[Y])) continue;
    const ImVec2 p = toScreen(r.values[X], r.values[Y]);
    dl->AddCircleFilled(p, rad, layerColour(r.layer, t.layers));
    if (hovered) {
      const float d = std::hypot(p.x - mouse.x, p.y - mouse.y);
      if (d < best) best = d, hover = int(k);
    }
  }
  if (h.selected >= 0) {
    const HeadTreeRow& r = t.rows[std::size_t(h.selected)];
    if (std::isfinite(r.values[X]) && std::isfinite(r.values[Y])) {
      const ImVec2 p = toScreen(r.values[X], r.values[Y]);
      dl->AddCircle(p, rad + 3 * sc, IM_COL32(255, 170, 30, 255), 0, 2.0f * sc);
      const std::string name = headName(r);
      const float tw = ImGui::CalcTextSize(name.c_str()).x;  // kept inside the plot
      const float tx = p.x + rad + 4 * sc + tw > p1.x ? p.x - rad - 4 * sc - tw : p.x + rad + 4 * sc;
      dl->AddText(ImVec2(tx, p.y - ImGui::GetFontSize()), IM_COL32(255, 170, 30, 255), name.c_str());
    }
  }
  if (hover >= 0) {
    const HeadTreeRow& r = t.rows[std::size_t(hover)];
    dl->AddCircle(toScreen(r.values[X], r.values[Y]), rad + 2 * sc, IM_COL32(255, 255, 255, 255));
    ImGui::BeginTooltip();
    ImGui::Text("layer %d, head %d", r.layer, r.head);
    for (std::size_t m = 0; m < t.metrics.size(); ++m)
      ImGui::Text("%s%-22s %s", m == X || m == Y ? "\xe2\x96\xb8 " : "  ", t.metrics[m].c_str(),
                  valueText(r.values[m]).c_str());
    ImGui::TextDisabled("click for its dashboard");
    ImGui::EndTooltip();
    if (ImGui::IsItemClicked()) h.selected = hover;
  }
  // The legend: one swatch a layer.
  ImGui::SetCursorScreenPos(ImVec2(origin.x, p1.y + axisB));
  ImGui::TextDisabled("layer");
  for (int l = 0; l < t.layers; ++l) {
    ImGui::SameLine();
    const ImVec2 c = ImGui::GetCursorScreenPos();
    const float sz = ImGui::GetFontSize();
    dl->AddRectFilled(ImVec2(c.x, c.y + 2 * sc), ImVec2(c.x + sz - 2 * sc, c.y + sz),
                      layerColour(l, t.layers));
    ImGui::Dummy(ImVec2(sz, sz));
    ImGui::SameLine(0, 2 * sc);
    ImGui::Text("%d", l);
    if (t.layers > 24 && l >= 23) {
      ImGui::SameLine();
      ImGui::TextDisabled("\xe2\x80\xa6 %d", t.layers - 1);
      break;
    }
  }
  if (undefined > 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("  (%d heads undefined on these axes)", undefined);
  }
}

void drawTable(AppState& s, float height) {
  HeadFinderState& h = s.model.heads;
  const HeadTree& t = *h.tree;
  const int cols = 2 + int(t.metrics.size());
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_ScrollX | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_BordersOuter | ImGuiTableFlags_BordersV |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##hf-table", cols, flags, ImVec2(0, height))) return;
  ImGui::TableSetupScrollFreeze(2, 1);
  ImGui::TableSetupColumn("layer", ImGuiTableColumnFlags_DefaultSort);
  ImGui::TableSetupColumn("head");
  for (const std::string& m : t.metrics)
    ImGui::TableSetupColumn(shortName(m).c_str(), ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableHeadersRow();
  for (int c = 2; c < cols; ++c) {  // the full name under a short header
    if (ImGui::TableGetColumnFlags(c) & ImGuiTableColumnFlags_IsHovered) {
      ImGui::SetTooltip("%s\nclick to sort (largest first), again to reverse",
                        t.metrics[std::size_t(c - 2)].c_str());
    }
  }
  if (h.requestSort >= 0 && h.requestSort < cols) {
    ImGui::TableSetColumnSortDirection(h.requestSort, ImGuiSortDirection_Descending, false);
    h.requestSort = -1;
  }
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsDirty) {
    if (specs->SpecsCount > 0) {
      h.sortColumn = specs->Specs[0].ColumnIndex;
      h.sortDescending = specs->Specs[0].SortDirection == ImGuiSortDirection_Descending;
    }
    sortRows(h);
    specs->SpecsDirty = false;
  }
  if (h.order.size() != t.rows.size()) sortRows(h);
  for (std::size_t k : h.order) {
    const HeadTreeRow& r = t.rows[k];
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    char id[32];
    std::snprintf(id, sizeof id, "%d##hf%zu", r.layer, k);
    if (ImGui::Selectable(id, int(k) == h.selected, ImGuiSelectableFlags_SpanAllColumns))
      h.selected = int(k);
    ImGui::TableSetColumnIndex(1);
    ImGui::Text("%d", r.head);
    for (std::size_t m = 0; m < r.values.size(); ++m) {
      ImGui::TableSetColumnIndex(int(m) + 2);
      ImGui::TextUnformatted(valueText(r.values[m]).c_str());
    }
  }
  ImGui::EndTable();
}

// A bar chart of a histogram; `label(b)` names bin b in the tooltip.
void drawBars(const char* id, const std::vector<double>& values, float w, float hgt,
              unsigned int colour, const std::function<std::string(std::size_t)>& label) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(w, hgt));
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + hgt), IM_COL32(24, 25, 30, 255));
  double top = 0;
  for (double v : values)
    if (std::isfinite(v)) top = std::max(top, v);
  if (values.empty() || !(top > 0)) {
    dl->AddText(ImVec2(p0.x + 4, p0.y + 4), IM_COL32(150, 150, 160, 255), "(empty)");
    return;
  }
  const float bw = w / float(values.size());
  int hover = -1;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (std::size_t b = 0; b < values.size(); ++b) {
    const float x = p0.x + bw * float(b);
    const float bh = std::isfinite(values[b]) ? float(values[b] / top) * (hgt - 2) : 0.0f;
    dl->AddRectFilled(ImVec2(x, p0.y + hgt - bh), ImVec2(x + std::max(1.0f, bw - 1), p0.y + hgt),
                      colour);
    if (ImGui::IsItemHovered() && mouse.x >= x && mouse.x < x + bw) hover = int(b);
  }
  if (hover >= 0) {
    ImGui::SetTooltip("%s: %s", label(std::size_t(hover)).c_str(),
                      valueText(values[std::size_t(hover)]).c_str());
  }
}

// A kept sequence as a strip: its `rows` strongest query rows (by their largest weight off
// position 0, where the max activation is taken) over the keys, each cell the stored weight
// (viridis), with the query's own column marked.
void drawStrip(const HeadTreeSequence& q, float w, int rows, float rowH) {
  std::map<int, double> rowMax;
  for (std::size_t e = 0; e < q.indices.size(); ++e) {
    const int r = int(q.indices[e] / q.seqLen);
    if (q.indices[e] % q.seqLen != 0) rowMax[r] = std::max(rowMax[r], q.values[e]);
  }
  std::vector<std::pair<double, int>> strongest;
  for (const auto& [r, v] : rowMax)
    if (r >= 1) strongest.push_back({-v, r});
  std::sort(strongest.begin(), strongest.end());
  if (strongest.size() > std::size_t(rows)) strongest.resize(std::size_t(rows));
  std::vector<int> shown;
  for (const auto& p : strongest) shown.push_back(p.second);
  std::sort(shown.begin(), shown.end());
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float hgt = rowH * float(std::max<std::size_t>(1, shown.size()));
  ImGui::InvisibleButton("##strip", ImVec2(w, hgt));
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + hgt), colormapU32(ColormapId::Viridis, 0.0f));
  const float cw = w / float(std::max(1, q.seqLen));
  int hoverRow = -1, hoverKey = -1;
  double hoverV = 0;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool hovered = ImGui::IsItemHovered();
  for (std::size_t e = 0; e < q.indices.size(); ++e) {
    const int r = int(q.indices[e] / q.seqLen), k = int(q.indices[e] % q.seqLen);
    const auto it = std::find(shown.begin(), shown.end(), r);
    if (it == shown.end()) continue;
    const float y = p0.y + rowH * float(it - shown.begin());
    const float x = p0.x + cw * float(k);
    dl->AddRectFilled(ImVec2(x, y), ImVec2(x + std::max(1.5f, cw), y + rowH - 1),
                      colormapU32(ColormapId::Viridis, float(std::clamp(q.values[e], 0.0, 1.0))));
  }
  for (std::size_t i = 0; i < shown.size(); ++i) {  // the query's own position: a tick
    const float x = p0.x + cw * (float(shown[i]) + 0.5f), y = p0.y + rowH * float(i);
    dl->AddLine(ImVec2(x, y), ImVec2(x, y + rowH - 1), IM_COL32(255, 90, 90, 200), 1.0f);
    if (hovered && mouse.y >= y && mouse.y < y + rowH) {
      hoverRow = shown[i];
      hoverKey = std::clamp(int((mouse.x - p0.x) / cw), 0, q.seqLen - 1);
    }
  }
  if (hoverRow >= 0) {
    for (std::size_t e = 0; e < q.indices.size(); ++e)
      if (q.indices[e] == (long long)hoverRow * q.seqLen + hoverKey) hoverV = q.values[e];
    ImGui::SetTooltip("query %d '%s' \xe2\x86\x92 key %d '%s': %.4f%s\n(red tick: the query's own "
                      "position; click the line above to open the sequence)",
                      hoverRow, q.tokens[std::size_t(hoverRow)].c_str(), hoverKey,
                      q.tokens[std::size_t(hoverKey)].c_str(), hoverV,
                      hoverV == 0 ? " (below the stored top-k)" : "");
  }
}

void drawDashboard(AppState& s) {
  HeadFinderState& h = s.model.heads;
  const HeadTree& t = *h.tree;
  const float sc = s.ui.uiScale;
  if (h.selected < 0 || h.selected >= int(t.rows.size())) {
    ImGui::TextDisabled("Click a head in the scatter or the table for its dashboard.");
    return;
  }
  const HeadTreeRow& r = t.rows[std::size_t(h.selected)];
  ImGui::Text("Layer %d, head %d", r.layer, r.head);
  ImGui::SameLine();
  ImGui::TextDisabled("(%s)", headFilePath(t, r.layer, r.head).c_str());
  // Metrics with their rank.
  if (ImGui::BeginTable("##hf-metrics", 3, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
    for (std::size_t m = 0; m < t.metrics.size(); ++m) {
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextUnformatted(t.metrics[m].c_str());
      ImGui::TableSetColumnIndex(1);
      ImGui::TextUnformatted(valueText(r.values[m]).c_str());
      ImGui::TableSetColumnIndex(2);
      const int rank = headRank(t, std::size_t(h.selected), m);
      if (rank > 0) {
        if (rank <= 3) ImGui::TextColored(ImVec4(1.0f, 0.67f, 0.12f, 1.0f), "#%d of %zu", rank, t.rows.size());
        else ImGui::TextDisabled("#%d of %zu", rank, t.rows.size());
      } else {
        ImGui::TextDisabled("undefined");
      }
    }
    ImGui::EndTable();
  }
  // The heads most like this one.
  const std::vector<NearHead> near = nearestHeads(t, std::size_t(h.selected), 5);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Which heads are like this one:");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("The nearest heads in metric space: each metric z-scored over every head "
                      "of the tree (mean 0, standard deviation 1), then the Euclidean distance "
                      "over the metrics both heads define.");
  for (const NearHead& n : near) {
    ImGui::SameLine();
    const HeadTreeRow& o = t.rows[n.row];
    const std::string b = headName(o) + " (" + valueText(n.distance).substr(0, 4) + ")";
    // The button in its layer's colour, dimmed so the text stays readable.
    ImVec4 c = ImGui::ColorConvertU32ToFloat4(layerColour(o.layer, t.layers));
    c.w = 0.45f;
    ImGui::PushStyleColor(ImGuiCol_Button, c);
    if (ImGui::SmallButton(b.c_str())) h.selected = int(n.row);
    ImGui::PopStyleColor();
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("distance %.3f in z-scored metric space (Euclidean); click for its dashboard",
                        n.distance);
  }
  if (!h.dashError.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", h.dashError.c_str());
    ImGui::PopTextWrapPos();
    return;
  }
  if (!h.dash) return;
  const HeadDashboardData& d = *h.dash;
  if (d.nSamples >= 0 || std::isfinite(d.meanMaxActivation))
    ImGui::TextDisabled("%lld kept sequences, mean max activation %s",
                        d.nSamples >= 0 ? d.nSamples : (long long)d.sequences.size(),
                        valueText(d.meanMaxActivation).c_str());
  // The two histograms side by side.
  const float half = (ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ItemSpacing.x) * 0.5f;
  const float hh = 70 * sc;
  ImGui::BeginGroup();
  ImGui::TextUnformatted("max activation (every sequence)");
  drawBars("##hf-hist", d.histValues, half, hh, IM_COL32(90, 160, 230, 255), [&](std::size_t b) {
    char t2[64];
    if (b + 1 < d.histEdges.size())
      std::snprintf(t2, sizeof t2, "[%.2f, %.2f)", d.histEdges[b], d.histEdges[b + 1]);
    else
      std::snprintf(t2, sizeof t2, "bin %zu", b);
    return std::string(t2);
  });
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  ImGui::TextUnformatted("|q \xe2\x88\x92 k| of the kept weights");
  // Only the bins up to the last one that holds weight.
  std::size_t lastBin = 0;
  for (std::size_t b = 0; b < d.qkValues.size(); ++b)
    if (d.qkValues[b] > 0) lastBin = b;
  const std::vector<double> qk(d.qkValues.begin(),
                               d.qkValues.begin() + std::ptrdiff_t(std::min(d.qkValues.size(), lastBin + 1)));
  drawBars("##hf-qk", qk, half, hh, IM_COL32(230, 150, 70, 255), [&](std::size_t b) {
    char t2[64];
    if (b + 1 < d.qkEdges.size())
      std::snprintf(t2, sizeof t2, "|q-k| in [%g, %g)", d.qkEdges[b], d.qkEdges[b + 1]);
    else
      std::snprintf(t2, sizeof t2, "bin %zu", b);
    return std::string(t2);
  });
  ImGui::EndGroup();
  // Top tokens.
  if (ImGui::BeginTable("##hf-tokens", 2, ImGuiTableFlags_SizingStretchSame)) {
    ImGui::TableSetupColumn("top query tokens");
    ImGui::TableSetupColumn("top key tokens");
    ImGui::TableHeadersRow();
    const std::size_t n = std::min<std::size_t>(6, std::max(d.topQuery.size(), d.topKey.size()));
    for (std::size_t k = 0; k < n; ++k) {
      ImGui::TableNextRow();
      for (int c = 0; c < 2; ++c) {
        const auto& list = c == 0 ? d.topQuery : d.topKey;
        ImGui::TableSetColumnIndex(c);
        if (k < list.size()) ImGui::Text("'%s'  %.2f", list[k].token.c_str(), list[k].weight);
      }
    }
    ImGui::EndTable();
  }
  // The kept sequences by interval, the top one first.
  std::map<int, std::vector<const HeadTreeSequence*>, std::greater<int>> byInterval;
  for (const HeadTreeSequence& q : d.sequences) byInterval[q.interval].push_back(&q);
  ImGui::Separator();
  ImGui::Text("Kept sequences (%zu), by interval of max activation", d.sequences.size());
  ImGui::SameLine();
  helpMarker("HeadVis's sampling: each sequence falls in an interval of this head's max "
             "activation; the top interval keeps its strongest sequences, the others a random "
             "few. Each strip shows the sequence's strongest query rows over its keys. Click a "
             "sequence's line to run it through the open model in the main view, on this head.");
  if (d.sequences.empty()) ImGui::TextDisabled("none (the corpus ended inside the warm-up)");
  const float w = ImGui::GetContentRegionAvail().x;
  for (const auto& [interval, list] : byInterval) {
    ImGui::TextColored(ImVec4(0.75f, 0.8f, 1.0f, 1.0f), "interval %d%s (%zu)", interval,
                       interval == t.intervals ? ", the top" : "", list.size());
    for (const HeadTreeSequence* q : list) {
      ImGui::PushID(q->sequenceId);
      std::string preview;
      for (std::size_t k = 0; k < q->tokens.size() && preview.size() < 80; ++k) preview += q->tokens[k];
      char line[256];
      std::snprintf(line, sizeof line, "#%d  max %.3f  %d tokens  %s", q->sequenceId,
                    q->maxActivation, q->seqLen, preview.c_str());
      if (ImGui::Selectable(line, h.openedSequence == q->sequenceId && h.openedLayer == r.layer &&
                                      h.openedHead == r.head)) {
        if (openHeadFinderSequence(s, q->sequenceId)) ImGui::SetWindowCollapsed(true);
      }
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("Run this sequence through the open model: the main view shows it on "
                          "layer %d, head %d", r.layer, r.head);
      drawStrip(*q, w, 3, std::max(5.0f, 7 * sc));
      ImGui::PopID();
    }
  }
}

}  // namespace

bool drawHeadFinderPanel(AppState& s) {
  HeadFinderState& h = s.model.heads;
  syncHeadFinder(s);
  if (!h.open) return false;
  const float sc = s.ui.uiScale;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.04f, vp->WorkPos.y + 30 * sc),
                          ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x * 0.92f, vp->WorkSize.y - 80 * sc),
                           ImGuiCond_FirstUseEver);
  // Opaque over the layout (the root window draws no background of its own).
  ImGui::PushStyleColor(ImGuiCol_WindowBg, IM_COL32(30, 31, 36, 255));
  const bool shown = ImGui::Begin("Head finder", &h.open, ImGuiWindowFlags_NoSavedSettings);
  ImGui::PopStyleColor();
  if (!shown) {
    ImGui::End();
    return false;
  }
  // Open a tree, or run the finder on a corpus.
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Tree");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.3f);
  const bool enter = ImGui::InputTextWithHint("##hf-tree", "a folder written by attnviz heads or HeadVis",
                                              h.treePath, sizeof h.treePath,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Open##hf") || enter) {
    try {
      openHeadTree(s, h.treePath);
    } catch (const std::exception& e) {
      h.error = e.what();
    }
  }
  ImGui::SameLine(0, 20 * sc);
  ImGui::TextUnformatted("or corpus");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.35f);
  ImGui::InputTextWithHint("##hf-corpus", ".txt (blank-line separated), .jsonl or a folder",
                           h.corpusPath, sizeof h.corpusPath);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70 * sc);
  ImGui::InputInt("seq len##hf", &h.seqLen, 0, 0);
  h.seqLen = std::clamp(h.seqLen, 2, 1 << 16);
  ImGui::SameLine();
  const bool running = h.job.valid();
  ImGui::BeginDisabled(running || !s.model.open() || !h.corpusPath[0]);
  if (ImGui::Button("Run on the open model")) h.wantRun = true;
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", s.model.open()
                                ? "attnviz heads --model (the open model) --corpus FILE --seq-len N, "
                                  "on a worker; the tree opens when it is written"
                                : "open a model first (File > Open model)");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(std::max(120 * sc, ImGui::GetContentRegionAvail().x));
  ImGui::InputTextWithHint("##hf-out", "keep the tree in (empty: a temp folder, removed on close)",
                           h.outPath, sizeof h.outPath);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("%s", "attnviz heads --out DIR: a folder to keep the run's tree in. Empty, "
                            "the tree goes to a temp folder that is removed when another tree "
                            "opens and when attnviz closes.");
  if (running && h.run) {
    long long done = 0, total = 0;
    {
      std::lock_guard<std::mutex> lock(h.run->m);
      done = h.run->done, total = h.run->total;
    }
    const double el = nowSeconds() - h.run->startedAt;
    const double rate = el > 0 ? double(done) / el : 0;
    char over[128];
    std::snprintf(over, sizeof over, "sequence %lld / %lld  \xc2\xb7  %.1f seq/s  \xc2\xb7  ETA %.0f s",
                  done, total, rate, rate > 0 ? double(total - done) / rate : 0.0);
    ImGui::ProgressBar(total > 0 ? float(done) / float(total) : 0.0f,
                       ImVec2(ImGui::GetContentRegionAvail().x - 80 * sc, 0), over);
    ImGui::SameLine();
    if (ImGui::Button("Cancel##hf") && h.progress) h.progress->cancel = true;
  }
  if (!h.error.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", h.error.c_str());
    ImGui::PopTextWrapPos();
  }
  if (!h.tree) {
    ImGui::TextDisabled("No tree open. `attnviz heads --model M --corpus C --out DIR` writes one; "
                        "`attnviz --model M --heads DIR` opens it here.");
    ImGui::End();
    return false;
  }
  const HeadTree& t = *h.tree;
  ImGui::TextDisabled("%s on %s  \xc2\xb7  %d layers x %d heads  \xc2\xb7  %zu heads, %zu metrics  "
                      "\xc2\xb7  %s",
                      t.modelName.empty() ? "?" : t.modelName.c_str(),
                      t.datasetName.empty() ? "?" : t.datasetName.c_str(), t.layers, t.heads,
                      t.rows.size(), t.metrics.size(), t.dir.c_str());
  const float leftW = std::floor(ImGui::GetContentRegionAvail().x * 0.46f);
  const float bodyH = ImGui::GetContentRegionAvail().y;
  ImGui::BeginChild("##hf-left", ImVec2(leftW, bodyH), false);
  const float scatterH = std::floor(bodyH * 0.55f);
  drawScatter(s, scatterH);
  drawTable(s, ImGui::GetContentRegionAvail().y);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##hf-right", ImVec2(0, bodyH), true);
  loadDashboard(h);
  drawDashboard(s);
  ImGui::EndChild();
  ImGui::End();
  return false;
}

void printHeadFinder(const AppState& s) {
  const HeadFinderState& h = s.model.heads;
  if (!h.print && !h.open) return;  // scripted runs: whenever the window is open
  if (!h.error.empty()) std::printf("head-finder-error: %s\n", h.error.c_str());
  if (!h.tree) {
    std::printf("head-finder: tree=-\n");
    return;
  }
  const HeadTree& t = *h.tree;
  const std::string sort = h.sortColumn == 0   ? "layer"
                           : h.sortColumn == 1 ? "head"
                           : h.sortColumn >= 2 ? t.metrics[std::size_t(h.sortColumn - 2)]
                                               : "-";
  const HeadTreeRow* sel = h.selected >= 0 ? &t.rows[std::size_t(h.selected)] : nullptr;
  std::printf("head-finder: tree=%s heads=%zu metrics=%zu sort=%s descending=%d selected=%s x=%s y=%s\n",
              t.dir.c_str(), t.rows.size(), t.metrics.size(), sort.c_str(), int(h.sortDescending),
              sel ? (std::to_string(sel->layer) + "," + std::to_string(sel->head)).c_str() : "-",
              t.metrics[std::size_t(h.xMetric)].c_str(), t.metrics[std::size_t(h.yMetric)].c_str());
  for (std::size_t k : h.order) {
    const HeadTreeRow& r = t.rows[k];
    const double v = h.sortColumn >= 2 ? r.values[std::size_t(h.sortColumn - 2)] : NAN;
    if (std::isnan(v))
      std::printf("head-finder-row\t%d\t%d\tnan\n", r.layer, r.head);
    else
      std::printf("head-finder-row\t%d\t%d\t%.6f\n", r.layer, r.head, v);
  }
  if (sel) {
    std::string ranks;
    for (std::size_t m = 0; m < t.metrics.size(); ++m)
      ranks += (m ? "," : "") + t.metrics[m] + ":" +
               std::to_string(headRank(t, std::size_t(h.selected), m));
    std::printf("head-finder-dashboard: layer=%d head=%d sequences=%zu ranks=%s error=%s\n",
                sel->layer, sel->head, h.dash ? h.dash->sequences.size() : std::size_t(0),
                ranks.c_str(), h.dashError.empty() ? "-" : h.dashError.c_str());
    std::string near;
    for (const NearHead& n : nearestHeads(t, std::size_t(h.selected), 5))
      near += (near.empty() ? "" : ",") + headName(t.rows[n.row]) + ":" + valueText(n.distance);
    std::printf("head-finder-near: %s\n", near.c_str());
  }
  if (h.openedSequence >= 0) {
    std::string ids;
    for (int id : h.openedIds) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    std::printf("head-finder-opened: layer=%d head=%d sequence=%d ids=%s\n", h.openedLayer,
                h.openedHead, h.openedSequence, ids.empty() ? "-" : ids.c_str());
    if (s.model.open()) {
      std::string v;
      for (int id : s.model.source->pass().ids) v += (v.empty() ? "" : ",") + std::to_string(id);
      std::printf("head-finder-view: layer=%d head=%d ids=%s\n", s.model.layer, s.view.head,
                  v.c_str());
    }
  }
}

}  // namespace attnviz::gui
