// attnviz panel: Attribution. Which heads does one prediction depend on? A zero- or
// mean-ablation sweep, or activation patching from a clean text into the model's text, runs on a
// worker thread (attnviz/model/attribution.h) on a copy of the model view's pass; the layers x
// heads map fills in row by row as the worker finishes each layer, in the diverging colours of
// `attnviz attribute --png` (0 in the middle). Hovering a cell shows its value, clicking it shows
// that head in the heatmap. The selected head's direct effect (the tokens it promotes and
// suppresses) and the logit lens at the position are shown under the map; the export writes the
// figure `attnviz attribute --png` writes for the same arguments, byte for byte.
#include "panels/panels.h"

#include "attnviz/render/attribution_figure.h"
#include "attnviz/render/vector_figure.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

namespace attnviz::gui {

namespace {

const char* const kMethods[] = {"zero-ablation sweep", "mean-ablation sweep",
                                "activation patching"};
const char* const kMethodKeys[] = {"zero", "mean", "patch"};

// The token a typed text names: its one token id, or -1 (not exactly one token).
int typedToken(const Model& m, const char* text) {
  if (!text[0]) return -1;
  const std::vector<int> ids = m.tokenizer().encode(text, false);
  return ids.size() == 1 ? ids[0] : -1;
}

// "-1 = the default" or "#id 'piece'".
std::string tokenText(const Model& m, int id, const char* fallback) {
  if (id < 0) return fallback;
  return "#" + std::to_string(id) + " '" + app::attributionPiece(m, id) + "'";
}

// A token picker: the next-token panel's candidates as buttons, a typed token and the id itself.
bool tokenPicker(AppState& s, const char* label, int& id, char* typed, std::size_t typedSize,
                 const char* fallback) {
  ModelState& m = s.model;
  const Model& model = m.source->model();
  bool changed = false;
  ImGui::PushID(label);
  ImGui::AlignTextToFramePadding();
  ImGui::Text("%s: %s", label, tokenText(model, id, fallback).c_str());
  if (id >= 0) {
    ImGui::SameLine();
    if (ImGui::SmallButton("default")) id = -1, typed[0] = 0, changed = true;
  }
  for (std::size_t k = 0; k < m.after.size(); ++k) {
    if (k > 0) ImGui::SameLine();
    ImGui::PushID(int(k));
    const std::string b = "'" + m.afterLabels[k] + "'";
    if (ImGui::SmallButton(b.c_str())) id = m.after[k].id, changed = true;
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("#%d, p = %.3f after the text (the next-token panel)", m.after[k].id,
                        double(m.after[k].prob));
    ImGui::PopID();
  }
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.5f);
  if (ImGui::InputTextWithHint("##typed", "type a token", typed, typedSize)) {
    const int t = typedToken(model, typed);
    if (t >= 0) id = t, changed = true;
  }
  if (typed[0] && typedToken(model, typed) < 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("(not one token)");
  } else {
    ImGui::SameLine();
    int v = id;
    ImGui::SetNextItemWidth(-1);
    if (ImGui::InputInt("##id", &v, 0, 0)) {
      id = std::clamp(v, -1, model.config().vocabSize - 1);
      changed = true;
    }
  }
  ImGui::PopID();
  return changed;
}

// The worker's half: everything it reads is its own (the model is immutable and shared).
void work(const std::shared_ptr<AttributionRun>& run, const std::shared_ptr<const Model>& model,
          const ForwardResult& viewPass, int method, AttributionTarget at,
          const std::string& clean, const ChatSetting& chat) {
  try {
    // The model view's pass keeps only what the window shows (thumbnails, the last logits row);
    // the sweep and the patches read head outputs (any position's logits are recomputed): one pass
    // here, on the worker, with the same interventions.
    const Capture& c = viewPass.capture;
    const ForwardResult pass =
        c.headOut.all ? viewPass
                      : model->forward(viewPass.ids, viewPass.interventions, Capture::attribution());
    AttributionControl control;
    control.cancel = &run->cancel;
    control.progress = [&](double f) {
      std::lock_guard<std::mutex> lock(run->m);
      run->fraction = f;
    };
    control.row = [&](int row, const std::vector<float>& v) {
      {
        std::lock_guard<std::mutex> lock(run->m);
        std::copy(v.begin(), v.end(), run->values.begin() + std::ptrdiff_t(row) * run->cols);
        ++run->rowsDone;  // rows come from the last layer up
        if (run->firstRowAt < 0) run->firstRowAt = nowSeconds();
      }
      wakeFrameLoop();  // a paced window shows the row at once
    };
    app::AttributionReport report;
    if (method < 2) {
      report = app::reportOf(ablationSweep(*model, pass,
                                           method == 0 ? AblationKind::Zero : AblationKind::Mean,
                                           at, control));
    } else {
      // The clean text is wrapped as the model's text was (the chat format).
      const std::vector<int> ids = encodeModelText(*model, clean, "", chat).ids;
      if (ids.size() != pass.ids.size())
        throw InputError("the clean text is " + std::to_string(ids.size()) +
                         " tokens and the model's text is " + std::to_string(pass.ids.size()) +
                         "; patching needs the same number of tokens");
      const ForwardResult cleanPass =
          model->forward(ids, pass.interventions, Capture::attribution());
      report = app::reportOf(patchHeads(*model, cleanPass, pass, at, control));
    }
    LogitLens lens;
    if (!run->cancel) {
      AttributionControl lensControl;
      lensControl.cancel = &run->cancel;
      lens = logitLens(*model, pass, {report.position, report.target, -1}, lensControl);
    }
    std::lock_guard<std::mutex> lock(run->m);
    run->report = std::move(report);
    run->lens = std::move(lens);
    run->haveReport = true;
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(run->m);
    run->error = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(run->m);
    run->done = true;
    run->finishedAt = nowSeconds();
  }
  wakeFrameLoop();
}

float cellValue(const std::vector<float>& v, int cols, int l, int h) {
  return v[std::size_t(l) * std::size_t(cols) + std::size_t(h)];
}

// The map: rows are layers, columns heads, colours as the figure's (attribution_figure.cpp).
void drawMap(AppState& s, const std::vector<float>& values, int rows, int cols, bool patch) {
  ModelState& m = s.model;
  AttributionState& a = m.attr;
  const float sc = s.ui.uiScale;
  float range = 0.0f;
  for (float v : values)
    if (std::isfinite(v)) range = std::max(range, std::fabs(v));
  if (!(range > 0.0f)) range = 1.0f;
  const float labelW = ImGui::CalcTextSize("L00").x + 4 * sc;
  const float availW = ImGui::GetContentRegionAvail().x - labelW;
  const float cell = std::floor(std::clamp(availW / float(cols), 6.0f, 36.0f * sc));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float headH = ImGui::GetFontSize() + 2 * sc;
  const float x0 = std::floor(origin.x + labelW), y0 = std::floor(origin.y + headH);
  a.grid = {true, x0, y0, cell, rows, cols};
  for (int h = 0; h < cols; h += std::max(1, int(std::ceil(ImGui::CalcTextSize("00").x / cell)))) {
    const std::string t = std::to_string(h);
    dl->AddText(ImVec2(x0 + h * cell + (cell - ImGui::CalcTextSize(t.c_str()).x) * 0.5f, origin.y),
                IM_COL32(150, 150, 160, 255), t.c_str());
  }
  ValueMapping map;
  map.lo = -range, map.hi = range;
  int hoverL = -1, hoverH = -1;
  for (int l = 0; l < rows; ++l) {
    const std::string t = "L" + std::to_string(l);
    dl->AddText(ImVec2(origin.x, y0 + l * cell + (cell - ImGui::GetFontSize()) * 0.5f),
                l == m.layer ? IM_COL32(255, 170, 30, 255) : IM_COL32(150, 150, 160, 255),
                t.c_str());
    for (int h = 0; h < cols; ++h) {
      const float v = cellValue(values, cols, l, h);
      const RGBA8 c = std::isnan(v)         ? kNotComputedColor
                      : !std::isfinite(v) ? kNonFiniteColor
                                          : colormapLookup(ColormapId::Diverging, mapValue(map, v));
      const ImVec2 p(x0 + h * cell, y0 + l * cell), q(p.x + cell, p.y + cell);
      dl->AddRectFilled(p, q, rgbaU32(c));
      if (ImGui::IsMouseHoveringRect(p, q) && ImGui::IsWindowHovered()) hoverL = l, hoverH = h;
    }
  }
  // The shown head outlined (outside its cell, so the cell's colour stays the value's).
  if (m.layer < rows && s.view.head < cols && !s.view.headAverage)
    dl->AddRect(ImVec2(x0 + s.view.head * cell - 1.5f, y0 + m.layer * cell - 1.5f),
                ImVec2(x0 + (s.view.head + 1) * cell + 1.5f, y0 + (m.layer + 1) * cell + 1.5f),
                IM_COL32(255, 170, 30, 255), 0, 0, 1.5f);
  ImGui::SetCursorScreenPos(ImVec2(origin.x, y0));
  ImGui::InvisibleButton("##attr-map", ImVec2(labelW + cols * cell, rows * cell));
  if (hoverL >= 0) {
    const float v = cellValue(values, cols, hoverL, hoverH);
    ImGui::BeginTooltip();
    ImGui::Text("layer %d, head %d", hoverL, hoverH);
    if (std::isnan(v))
      ImGui::TextDisabled("not computed yet");
    else if (patch)
      ImGui::Text("fraction restored = %.4f", double(v));
    else
      ImGui::Text("\xce\x94 log p(target) = %.4f", double(v));
    ImGui::TextDisabled("click to show this head in the heatmap");
    ImGui::EndTooltip();
    if (ImGui::IsItemClicked()) {
      if (m.layer != hoverL) m.layerDirty = true;
      m.layer = hoverL;
      s.view.head = hoverH;
      s.view.headAverage = false;
      s.flash.active = false;
    }
  }
  // A colour bar: -range .. 0 .. range.
  const float barW = cols * cell, barH = 8 * sc;
  const ImVec2 b(x0, y0 + rows * cell + 4 * sc);
  for (int k = 0; k < 64; ++k)
    dl->AddRectFilled(ImVec2(b.x + barW * k / 64.0f, b.y), ImVec2(b.x + barW * (k + 1) / 64.0f, b.y + barH),
                      colormapU32(ColormapId::Diverging, (k + 0.5f) / 64.0f));
  ImGui::SetCursorScreenPos(ImVec2(origin.x, b.y + barH + 2 * sc));
  ImGui::TextDisabled("%+.3g  \xe2\x80\xa6  0  \xe2\x80\xa6  %+.3g  (%s)", -double(range), double(range),
                      patch ? "fraction restored" : "\xce\x94 log p");
}

// The selected head's direct effect on the logits at P: the tokens it promotes and suppresses.
void drawDirectEffect(AppState& s, int position) {
  ModelState& m = s.model;
  AttributionState& a = m.attr;
  const Model& model = m.source->model();
  const int layer = m.layer, head = s.view.head;
  if (head >= m.source->heads()) return;
  auto& e = a.effect;
  if (e.pass != m.passVersion || e.layer != layer || e.head != head || e.position != position) {
    e.pass = m.passVersion, e.layer = layer, e.head = head, e.position = position;
    e.error.clear();
    try {
      e.e = directEffect(model, m.source->pass(), layer, head, position, 5);
    } catch (const std::exception& x) {
      e.error = x.what();
    }
  }
  ImGui::Text("Direct effect of layer %d head %d", layer, head);
  if (!e.error.empty()) {
    ImGui::TextDisabled("%s", e.error.c_str());
    return;
  }
  ImGui::TextDisabled("its output at position %d through W_o, the final norm and the unembedding",
                      e.e.position);
  if (ImGui::BeginTable("##attr-effect", 2, ImGuiTableFlags_SizingStretchSame)) {
    ImGui::TableSetupColumn("promotes");
    ImGui::TableSetupColumn("suppresses");
    ImGui::TableHeadersRow();
    for (std::size_t k = 0; k < std::max(e.e.promoted.size(), e.e.suppressed.size()); ++k) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (k < e.e.promoted.size())
        ImGui::TextColored(ImVec4(0.55f, 0.75f, 1.0f, 1.0f), "%-10s %+.2f",
                           ("'" + m.source->tokenLabel(e.e.promoted[k].id) + "'").c_str(),
                           double(e.e.promoted[k].value));
      ImGui::TableNextColumn();
      if (k < e.e.suppressed.size())
        ImGui::TextColored(ImVec4(1.0f, 0.6f, 0.5f, 1.0f), "%-10s %+.2f",
                           ("'" + m.source->tokenLabel(e.e.suppressed[k].id) + "'").c_str(),
                           double(e.e.suppressed[k].value));
    }
    ImGui::EndTable();
  }
}

// The logit lens at P: what each layer's residual stream would predict there.
void drawLens(AppState& s, const LogitLens& lens, int position, const Model& model) {
  if (lens.rowsDone < lens.layers || position >= lens.tokens) return;
  ImGui::Text("Logit lens at position %d", position);
  ImGui::TextDisabled("the stream entering each layer, unembedded");
  if (ImGui::BeginTable("##attr-lens", 3, ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("stream");
    ImGui::TableSetupColumn("top token");
    ImGui::TableSetupColumn("p(target)");
    ImGui::TableHeadersRow();
    for (int l = 0; l < lens.layers; ++l) {
      const std::size_t i = lens.index(l, position);
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (l + 1 < lens.layers)
        ImGui::Text("into L%d", l);
      else
        ImGui::TextUnformatted("final");
      ImGui::TableNextColumn();
      ImGui::Text("'%s' %.2f", model.tokenizer().label(lens.topId[i]).c_str(),
                  double(lens.topProb[i]));
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", double(lens.targetProb[i]));
    }
    ImGui::EndTable();
  }
  (void)s;
}

}  // namespace

void applySceneAttribution(AppState& s, const SceneAttribution& sa) {
  AttributionState& a = s.model.attr;
  if (!sa.any()) return;
  a.method = sa.method == "mean" ? 1 : sa.method == "patch" ? 2 : 0;
  a.position = sa.position, a.target = sa.target, a.foil = sa.foil;
  std::snprintf(a.clean, sizeof a.clean, "%s", sa.clean.c_str());
  a.targetPiece[0] = a.foilPiece[0] = 0;
  a.wantRun = sa.run;
  a.used = true;
}

SceneAttribution sceneAttribution(const AppState& s) {
  const AttributionState& a = s.model.attr;
  SceneAttribution sa;
  if (!a.used) return sa;
  sa.method = kMethodKeys[a.method];
  sa.position = a.position, sa.target = a.target;
  if (a.method == 2) sa.foil = a.foil, sa.clean = a.clean;
  sa.run = a.wantRun || a.run != nullptr;
  return sa;
}

void startAttribution(AppState& s) {
  ModelState& m = s.model;
  AttributionState& a = m.attr;
  a.wantRun = false;
  if (!m.source || !m.source->ready()) return;
  a.stop();
  a.used = true;
  const int L = m.source->layers(), H = m.source->heads();
  auto run = std::make_shared<AttributionRun>();
  run->rows = L, run->cols = H;
  run->values.assign(std::size_t(L) * H, std::numeric_limits<float>::quiet_NaN());
  run->startedAt = nowSeconds();
  a.run = run;
  a.runPass = m.passVersion;
  a.runIds = m.source->pass().ids;
  a.firstShownAt = -1;
  AttributionTarget at{a.position, a.target, a.method == 2 ? a.foil : -1};
  a.worker = std::thread(work, run, m.source->sharedModel(), m.source->pass(), a.method, at,
                         std::string(a.clean), m.source->chat());
}

std::string exportAttribution(AppState& s, const std::string& path) {
  ModelState& m = s.model;
  if (!m.source) throw UsageError("no model is open");
  const std::shared_ptr<AttributionRun> run = m.attr.run;
  app::AttributionReport report;
  {
    if (!run) throw UsageError("the attribution has not run: press Run first");
    std::lock_guard<std::mutex> lock(run->m);
    if (!run->haveReport)
      throw UsageError(run->error.empty() ? "the attribution is still running" : run->error);
    report = run->report;
  }
  // PNG, or SVG or PDF by the path's extension: the bytes `attnviz attribute` writes.
  AttributionFigure fig = app::attributionFigure(m.source->model(), report);
  const FigureFormat format = figureFormatOfPath(path);
  fig.vector = format != FigureFormat::Png;
  writeFigure(path, renderAttributionFigure(fig), format);
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.string();
}

bool drawAttributionPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  AttributionState& a = m.attr;
  const Model& model = m.source->model();
  a.grid.valid = false;

  ImGui::SetNextItemWidth(-1);
  ImGui::Combo("##attr-method", &a.method, kMethods, 3);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "zero: each head's output zeroed in turn; mean: replaced at every position by its mean "
        "over the positions.\nBoth write \xce\x94 log p(target) = log p_ablated - log p.\n"
        "patching: the model's text is the corrupted run; each head's output is patched in from "
        "the clean text\n(the same number of tokens), and the map shows the fraction of "
        "logit(target) - logit(foil) it restores.");
  if (a.method == 2) {
    ImGui::TextUnformatted("clean text (the model's text is the corrupted run):");
    ImGui::InputTextMultiline("##attr-clean", a.clean, sizeof a.clean,
                              ImVec2(-1, ImGui::GetTextLineHeight() * 3));
    const int t = int(m.source->pass().ids.size());
    int n = int(model.encode(a.clean).size());
    // Under the chat format both texts carry the same template around them (the worker wraps
    // the clean text too): compared here as plain texts, the template's tokens added back.
    if (m.source->chat().on) n += t - int(model.encode(m.source->text()).size());
    if (n != t)
      ImGui::TextColored(ImVec4(1, 0.6f, 0.4f, 1), "%d tokens; the text has %d (they must match)",
                         n, t);
  }
  const int T = int(m.source->pass().ids.size());
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderInt("##attr-pos", &a.position, -1, T - 1,
                   a.position < 0 ? "position: the last" : "position %d");
  tokenPicker(s, "target", a.target, a.targetPiece, sizeof a.targetPiece,
              "the most likely next token");
  if (a.method == 2)
    tokenPicker(s, "foil", a.foil, a.foilPiece, sizeof a.foilPiece,
                "the corrupted run's most likely other token");

  const bool running = a.run && !a.run->done;
  if (ImGui::Button(running ? "Running\xe2\x80\xa6" : "Run", ImVec2(ImGui::GetContentRegionAvail().x * 0.5f, 0)) &&
      !running)
    startAttribution(s);
  ImGui::SameLine();
  if (ImGui::Button("Cancel", ImVec2(-1, 0)) && a.run) a.run->cancel = true;
  if (!a.run) {
    ImGui::TextDisabled("Run: every head in turn, re-running from its layer only.");
    return false;
  }

  std::vector<float> values;
  int rows = 0, cols = 0, rowsDone = 0;
  bool done = false, haveReport = false;
  std::string error;
  double fraction = 0, first = -1, finished = -1;
  app::AttributionReport report;
  LogitLens lens;
  {
    AttributionRun& r = *a.run;
    std::lock_guard<std::mutex> lock(r.m);
    values = r.values;
    rows = r.rows, cols = r.cols, rowsDone = r.rowsDone;
    done = r.done, haveReport = r.haveReport, error = r.error;
    fraction = r.fraction, first = r.firstRowAt, finished = r.finishedAt;
    if (haveReport && done) report = r.report, lens = r.lens;
  }
  if (rowsDone > 0 && a.firstShownAt < 0) a.firstShownAt = nowSeconds();
  const double t0 = a.run->startedAt;
  ImGui::PushTextWrapPos(0.0f);
  if (!error.empty()) ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", error.c_str());
  if (!done)
    ImGui::TextDisabled("%d of %d layers (from the last up) \xc2\xb7 %.0f%% \xc2\xb7 %.2f s", rowsDone, rows,
                        100.0 * fraction, nowSeconds() - t0);
  else if (haveReport)
    ImGui::TextDisabled("%s%d of %d layers in %.2f s (first row after %.0f ms)",
                        a.run->cancel ? "cancelled: " : "", rowsDone, rows, finished - t0,
                        first >= 0 ? 1000.0 * (first - t0) : 0.0);
  if (haveReport && done) {
    if (report.patch)
      ImGui::Text("P = %d, target '%s' vs foil '%s': m_clean %.3f, m_corrupt %.3f", report.position,
                  app::attributionPiece(model, report.target).c_str(),
                  app::attributionPiece(model, report.foil).c_str(), report.mClean, report.mCorrupt);
    else
      ImGui::Text("P = %d, target '%s': log p = %.3f", report.position,
                  app::attributionPiece(model, report.target).c_str(), report.logProb);
  }
  if (a.runPass != m.passVersion)
    ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "(computed before the text or interventions changed: Run again)");
  ImGui::PopTextWrapPos();
  drawMap(s, values, rows, cols, a.run && haveReport ? report.patch : a.method == 2);

  if (haveReport && done) {
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.6f);
    ImGui::InputText("##attr-export", a.exportPath, sizeof a.exportPath);
    ImGui::SameLine();
    if (ImGui::Button("Export PNG", ImVec2(-1, 0))) {
      try {
        notify(s, "Exported " + exportAttribution(s, a.exportPath));
      } catch (const std::exception& e) {
        reportError(s, e.what());
      }
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("the figure `attnviz attribute --png` writes for the same text and options");
  }
  ImGui::Separator();
  drawDirectEffect(s, haveReport && done ? report.position : -1);
  if (haveReport && done && a.runPass == m.passVersion) {
    ImGui::Separator();
    drawLens(s, lens, report.position, model);
  }
  return false;
}

}  // namespace attnviz::gui
