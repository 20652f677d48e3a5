// attnviz panel: the selected query's row, as the heatmap shows it. On the weights stage: its
// distribution over keys as labelled bars, the top keys, the entropy, and the output vector as
// the weighted sum of value rows. In the wrong-axis mode and the head average the bars are the
// heatmap's row (normalised down the columns, or averaged over the heads); on a scores stage
// (QKᵀ ... ÷τ) they are that stage's signed values; on the output stage the row is the output,
// shown with the weights that make it. In pooled mode (long contexts, no materialised matrix)
// the row comes from Session::pooledRow and the keys show as one bar a pixel column plus the
// largest few.
#include "panels/panels.h"
#include "panels/row_inspector.h"

#include "attnviz/session/scene_inputs.h"  // blockOutput

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace attnviz::gui {

using namespace row_inspector;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

RowInspectorValues g_values;

// Sum, largest finite value and its key, and for a distribution the entropy, of a shown row.
RowStats shownStats(const float* w, int n, bool distribution, bool fullyMasked) {
  RowStats st;
  double sum = 0, entropy = 0;
  for (int j = 0; j < n; ++j) {
    const float v = w[j];
    if (!std::isfinite(v)) continue;
    sum += v;
    if (st.argmax < 0 || v > st.max) st.max = v, st.argmax = j;
    if (v > 0.0f) entropy -= double(v) * std::log(double(v));
  }
  st.sum = float(sum);
  st.entropy = distribution ? float(entropy) : std::numeric_limits<float>::quiet_NaN();
  st.fullyMasked = fullyMasked;
  return st;
}

// What the row is, above its numbers: the query, the head (or the average), and what the
// heatmap shows when it is not the plain weights.
void drawRowHeader(AppState& s, const RowView& r) {
  const char* query = s.session.inputs().queryTokens[r.i].c_str();
  if (r.kind == RowKind::Average)
    ImGui::Text("Query %d: '%s'   (average of %d heads)", r.i, query, r.heads);
  else
    ImGui::Text("Query %d: '%s'   (head %d)", r.i, query, r.h);
  if (r.kind == RowKind::WrongAxis) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.62f, 0.45f, 1));
    ImGui::TextWrapped(
        "Wrong axis: as in the heatmap, each weight is normalised over the queries (down its "
        "column), so this row sums to %.3f, not 1.",
        r.st.sum);
    ImGui::PopStyleColor();
  } else if (r.kind == RowKind::Scores) {
    ImGui::TextDisabled("the %s stage, as the heatmap shows it", stageLabel(r.stage));
  } else if (r.stage == ViewStage::Output) {
    ImGui::TextDisabled("The heatmap shows this row's output o_%d (A\xc2\xb7V); its weights:", r.i);
  }
}

// The row: stats, the distribution over keys, the top keys, and the output as a weighted sum of
// value rows. `order` receives the keys by value (the first topN sorted).
void drawRow(AppState& s, const RowView& r, std::vector<int>& order) {
  const int Tk = r.Tk, dv = r.dv, i = r.i;
  const float* w = r.w;
  const RowStats& st = r.st;
  const auto& keys = s.session.inputs().keyTokens;
  const float sc = s.ui.uiScale;
  drawRowHeader(s, r);
  if (st.fullyMasked && !isScores(r)) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.45f, 0.38f, 1));
    ImGui::TextWrapped(
        "Fully masked: the mask allows no key for this query, so every weight is 0 and "
        "its output is the zero vector. (PyTorch's softmax would give NaN here.)");
    ImGui::PopStyleColor();
    return;
  }
  if (isScores(r)) {
    if (st.argmax >= 0) {  // two short lines: a narrow side panel cuts a long one off
      int lo = st.argmax;
      for (int j = 0; j < Tk; ++j)
        if (std::isfinite(w[j]) && w[j] < w[lo]) lo = j;
      ImGui::Text("largest = %.4g (key %d)", st.max, st.argmax);
      ImGui::Text("smallest = %.4g (key %d)", w[lo], lo);
    }
    int maskedCells = 0;
    for (int j = 0; j < Tk; ++j) maskedCells += std::isfinite(w[j]) ? 0 : 1;
    if (maskedCells > 0) ImGui::TextDisabled("%d of %d keys masked (-inf)", maskedCells, Tk);
    if (st.fullyMasked)
      ImGui::TextDisabled("the mask allows no key for this query: its weights will be all 0");
  } else if (r.kind == RowKind::WrongAxis) {
    ImGui::Text("sum = %.6f", st.sum);
    ImGui::TextDisabled("(not 1: no distribution over the keys)");
  } else {
    ImGui::Text("sum = %.6f   entropy H = %.3f nats", st.sum, st.entropy);
    // Two short lines: one long line was cut off by a narrow side panel.
    ImGui::TextDisabled("at most ln %d = %.3f", r.allowed, std::log(std::max(1, r.allowed)));
    ImGui::TextDisabled("effective keys e^H = %.2f", std::exp(st.entropy));
  }

  // Keys by value.
  order.resize(Tk);
  std::iota(order.begin(), order.end(), 0);
  const int topN = std::min(Tk, 5);
  // Distribution over keys: one bar per key (all keys when few; the largest otherwise).
  const bool all = Tk <= 24;
  const int nBars = all ? Tk : std::min(Tk, r.maxBars);
  std::partial_sort(order.begin(), order.begin() + std::max(topN, all ? topN : nBars), order.end(),
                    [&](int a, int b) { return w[a] > w[b]; });
  if (!all) {
    distributionPlot(s, r, keys);
    ImGui::TextDisabled("all %d keys (max per pixel); the %d largest:", Tk, nBars);
  }
  keyBars(s, r, order, nBars, all);

  ImGui::Spacing();
  ImGui::TextUnformatted(isScores(r) ? "Largest keys" : "Top keys");
  int shownTop = 0;  // the first topN keys by value that the heatmap does not draw masked
  while (shownTop < topN && !r.masked(order[shownTop])) ++shownTop;
  for (int k = 0; k < shownTop; ++k) {
    const int j = order[k];
    ImGui::TextDisabled("  %d.", k + 1);
    ImGui::SameLine();
    ImGui::Text(isScores(r) ? "key %d '%s'  %.4g" : "key %d '%s'  %.4f", j, keys[j].c_str(), w[j]);
  }

  if (isScores(r)) {
    ImGui::Spacing();
    ImGui::TextDisabled("(this row's weights, entropy and output: the softmax stage)");
    return;
  }
  if (r.kind == RowKind::Average) {
    ImGui::Spacing();
    ImGui::TextDisabled(
        "(the output is per head: pick one head to see o_%d as its value rows, "
        "weighted)",
        i);
    return;
  }

  // The output as a weighted sum of value rows: the three largest terms, then the result.
  if (!r.V || !r.O || dv <= 0) return;
  ImGui::Spacing();
  if (r.kind == RowKind::WrongAxis)
    ImGui::TextWrapped(
        "\xce\xa3_j a_ij v_j with these weights: they sum to %.3f, so it is no weighted average "
        "of the value rows",
        st.sum);
  else
    ImGui::TextUnformatted("Output o_i = \xce\xa3_j a_ij v_j  (the value rows, weighted)");
  const float* V = r.V;
  const float* O = r.O;
  const float lineH = ImGui::GetTextLineHeight();
  float scale = 1e-6f;
  for (int k = 0; k < dv; ++k) scale = std::max(scale, std::fabs(O[k]));
  for (int k = 0; k < std::min(3, shownTop); ++k)
    for (int c = 0; c < dv; ++c)
      scale = std::max(scale, std::fabs(V[std::size_t(order[k]) * dv + c]));
  const float stripW = std::max(40.0f, ImGui::GetContentRegionAvail().x - 150 * sc);
  float rest = st.sum;
  for (int k = 0; k < std::min(3, shownTop); ++k) {
    const int j = order[k];
    rest -= w[j];
    ImGui::Text("%s%.3f \xc3\x97 v%d", k ? "+ " : "  ", w[j], j);
    ImGui::SameLine(140 * sc);
    vectorStrip(V + std::size_t(j) * dv, dv, scale, stripW, lineH * 0.8f);
  }
  if (Tk > 3)
    ImGui::TextDisabled("+ %d more keys with total weight %.3f", Tk - std::min(3, shownTop),
                        std::max(0.0f, rest));
  ImGui::Text("= o%d", i);
  ImGui::SameLine(140 * sc);
  vectorStrip(O, dv, scale, stripW, lineH * 0.8f);
  ImGui::TextDisabled("(%d value dimensions, colour = sign and size)", dv);
}

// What was drawn, for scripted runs and tests: the summary (s.rowShown) and the row itself,
// key by key (rowInspectorValues), or on the output stage the output row the heatmap shows.
void recordShown(AppState& s, const RowView& r) {
  RowInspectorShown& o = s.rowShown;
  o = RowInspectorShown{};
  o.row = r.i;
  o.head = r.h;
  o.topKey = r.st.argmax;
  o.topWeight = r.st.max;
  o.sum = r.st.sum;
  o.entropy = r.st.entropy;
  o.allowed = r.allowed;
  o.fullyMasked = r.st.fullyMasked;
  o.pooled = r.pooled;
  g_values = RowInspectorValues{};
  g_values.row = r.i;
  if (r.stage == ViewStage::Output && r.kind == RowKind::Weights && !r.pooled) {
    g_values.what = "output";
    if (r.O) g_values.values.assign(r.O, r.O + r.dv);
    return;
  }
  g_values.what = r.kind == RowKind::WrongAxis ? "weights-wrong-axis"
                  : r.kind == RowKind::Average ? "weights-head-average"
                  : r.kind == RowKind::Scores  ? stageKey(r.stage)
                                               : "weights";
  g_values.values.assign(r.w, r.w + r.Tk);
  for (int j = 0; j < r.Tk; ++j)
    if (r.masked(j)) g_values.values[std::size_t(j)] = -kInf;
}

// The value rows of head h, when the inputs have them for every key.
const float* valueRows(const AppState& s, int h) {
  const Tensor3& v = s.session.inputs().v;
  return v.heads > h && v.rows == s.tk() && !v.empty() ? v.head(h) : nullptr;
}

// Pooled mode: the row computed on its own (Session::pooledRow, kept until something changes).
// Only the weights stage exists here, which is what the pooled heatmap shows.
bool drawPooledRow(AppState& s, int i) {
  const std::shared_ptr<const QueryRow> row = s.session.pooledRow(i);
  if (!row) {
    ImGui::TextDisabled("Query %d: the row could not be computed.", i);
    return false;
  }
  RowView r;
  r.i = i;
  r.h = row->head;
  r.Tk = int(row->weights.size());
  r.dv = int(row->output.size());
  r.w = row->weights.data();
  r.st = row->stats;
  r.allowed = row->allowedKeys;
  r.masked = [&row](int j) { return std::isinf(row->logits[std::size_t(j)]); };
  r.V = valueRows(s, r.h);
  r.O = row->output.empty() ? nullptr : row->output.data();
  r.maxBars = 12;
  r.pooled = true;
  recordShown(s, r);
  std::vector<int> order;
  drawRow(s, r, order);
  ImGui::TextDisabled("(row streamed alone: %.2f ms)", s.session.lastPooledRowMs());
  return false;
}

}  // namespace

const RowInspectorValues& rowInspectorValues() { return g_values; }

namespace {

// A q/k-norm family's model (Qwen3, Gemma 3: RMSNorm per head; OLMo 2: over the whole width):
// query i's ‖q_i‖ in the shown head and ‖k_i‖ in its KV head before and after the norm, and
// every key's ‖k_j‖ before and after as two bar plots on one scale. RoPE turns q and k without
// changing their norms.
void drawQkNorms(AppState& s, int i, int h) {
  if (!s.model.open() || !s.model.source->ready() || s.model.source->shownLayer() != s.model.layer)
    return;
  const Model::QkNorms& n = s.model.source->shownQkNorms();
  const ModelConfig& c = s.model.source->model().config();
  if (n.heads == 0 || h < 0 || h >= n.heads || i < 0 || i >= n.tokens) return;
  const int T = n.tokens, g = c.kvHeadOf(h);
  const float* kb = n.kBefore.data() + std::size_t(g) * T;
  const float* ka = n.kAfter.data() + std::size_t(g) * T;
  const float qb = n.qBefore[std::size_t(h) * T + i], qa = n.qAfter[std::size_t(h) * T + i];
  g_values.kvHead = g;
  g_values.qBefore = qb, g_values.qAfter = qa, g_values.kBefore = kb[i], g_values.kAfter = ka[i];
  ImGui::Spacing();
  ImGui::Text("q/k norm (%s, before RoPE)",
              c.qkNorm == QkNorm::Whole ? "RMSNorm over the whole width" : "RMSNorm per head");
  ImGui::Text("\xe2\x80\x96q%d\xe2\x80\x96  %.3f \xe2\x86\x92 %.3f   (head %d)", i, qb, qa, h);
  ImGui::Text("\xe2\x80\x96k%d\xe2\x80\x96  %.3f \xe2\x86\x92 %.3f   (KV head %d)", i, kb[i], ka[i], g);
  float top = 1e-6f;
  for (int j = 0; j < T; ++j) top = std::max({top, kb[j], ka[j]});
  const float w = std::max(60.0f, ImGui::GetContentRegionAvail().x);
  const float hgt = ImGui::GetTextLineHeight() * 2.2f;
  char label[64];
  std::snprintf(label, sizeof label, "\xe2\x80\x96k_j\xe2\x80\x96 before (max %.2f)", top);
  ImGui::PlotHistogram("##kbefore", kb, T, 0, label, 0.0f, top, ImVec2(w, hgt));
  ImGui::PlotHistogram("##kafter", ka, T, 0, "\xe2\x80\x96k_j\xe2\x80\x96 after", 0.0f, top,
                       ImVec2(w, hgt));
  ImGui::TextDisabled("keys j = 0..%d, one scale: the norm evens out the keys' lengths", T - 1);
}

}  // namespace

bool drawRowInspectorPanel(AppState& s) {
  const int i = s.view.selectedRow;
  s.rowShown = RowInspectorShown{};
  g_values = RowInspectorValues{};
  if (i >= 0 && i < s.tq() && s.session.pooledMode()) return drawPooledRow(s, i);
  const DisplayMatrix& d = s.display();
  if (i < 0 || i >= s.tq() || !s.session.hasResult() || d.pooled || i >= d.rows ||
      (d.columnsAreKeys && d.cols != s.tk()) || !d.rowIndex.empty()) {
    if (!d.rowIndex.empty() && i >= 0)  // an encoder's slice or hidden special tokens
      ImGui::TextDisabled("The inspector reads whole rows: set the slice to All and show the "
                          "special tokens to inspect this query.");
    else
      ImGui::TextDisabled("Click a row of the heatmap to inspect that query.");
    return false;
  }
  const View& view = s.session.view();  // what the display matrix was built for
  const int h = s.shownHead();
  const AttentionResult& res = s.session.result();
  const int Tk = s.tk(), dv = res.dims.dv;
  const float* shown = d.values.data() + std::size_t(i) * d.cols;  // the heatmap's row
  const bool fullyMasked = d.rowFullyMasked[i] != 0;
  RowView r;
  r.i = i;
  r.h = h;
  r.Tk = Tk;
  r.dv = dv;
  r.stage = view.stage;
  for (int j = 0; j < Tk; ++j)
    r.allowed +=
        std::isinf(logitAt(res.scaled, s.session.params(), s.session.slopes(), h, i, j)) ? 0 : 1;
  r.V = valueRows(s, h);
  std::vector<float> wrongOutput;
  if (view.stage == ViewStage::Weights && view.wrongAxis) {
    r.kind = RowKind::WrongAxis;
    r.w = shown;
    r.st = shownStats(shown, Tk, false, fullyMasked);
    r.masked = [shown](int j) { return std::isinf(shown[j]); };
    if (r.V && dv > 0) {  // Σ_j a_ij v_j with the wrong-axis weights
      wrongOutput.assign(std::size_t(dv), 0.0f);
      for (int j = 0; j < Tk; ++j)
        if (std::isfinite(shown[j]))
          for (int c = 0; c < dv; ++c) wrongOutput[c] += shown[j] * r.V[std::size_t(j) * dv + c];
      r.O = wrongOutput.data();
    }
  } else if (view.stage == ViewStage::Weights && view.headAverage) {
    r.kind = RowKind::Average;
    r.heads = res.dims.H;
    r.w = shown;
    r.st = shownStats(shown, Tk, true, fullyMasked);
    r.masked = [shown](int j) { return std::isinf(shown[j]); };
    r.V = nullptr;
  } else if ((stageIsScore(view.stage) && view.stage != ViewStage::Output) ||
             (stageFromSource(view.stage) && s.session.stageAvailable(view.stage))) {
    r.kind = RowKind::Scores;
    r.w = shown;
    r.st = shownStats(shown, Tk, false, fullyMasked);
    r.masked = [shown](int j) { return std::isinf(shown[j]); };
    r.scoreRange = std::max({std::fabs(d.minFinite), std::fabs(d.maxFinite), 1e-6f});
    r.V = nullptr;
  } else {
    // The weights stage of one head, and the output stage (the output row with its weights).
    r.kind = RowKind::Weights;
    r.w = res.weights.head(h) + std::size_t(i) * Tk;
    r.st = res.row(h, i);
    r.masked = [&](int j) {
      return std::isinf(logitAt(res.scaled, s.session.params(), s.session.slopes(), h, i, j));
    };
    r.O = res.output.head(h) + std::size_t(i) * dv;
  }
  recordShown(s, r);
  std::vector<int> order;
  drawRow(s, r, order);
  drawQkNorms(s, i, h);
  if (r.st.fullyMasked || r.kind == RowKind::WrongAxis || r.kind == RowKind::Scores) return false;

  // The block output of a synthetic scene: every head's o_i side by side, then W_o.
  const float sc = s.ui.uiScale;
  const float lineH = ImGui::GetTextLineHeight();
  const float stripW = std::max(40.0f, ImGui::GetContentRegionAvail().x - 150 * sc);
  const Tensor3& wo = s.session.inputs().wo;
  if (!wo.empty() && wo.rows == res.dims.H * dv) {
    ImGui::Spacing();
    ImGui::TextUnformatted("Block output  concat_h(o_i) \xc2\xb7 W_o  (all heads)");
    if (!s.session.allHeadsFresh()) {
      ImGui::TextDisabled("(waiting for the other heads)");
    } else {
      Tensor3 heads(res.dims.H, 1, dv);
      for (int hh = 0; hh < res.dims.H; ++hh)
        std::copy_n(res.output.head(hh) + std::size_t(i) * dv, dv, heads.head(hh));
      const Tensor3 y = blockOutput(heads, wo);  // [1, 1, d_model]
      float yScale = 1e-6f;
      for (float x : y.data) yScale = std::max(yScale, std::fabs(x));
      ImGui::Text("= y%d", i);
      ImGui::SameLine(140 * sc);
      vectorStrip(y.data.data(), y.cols, yScale, stripW, lineH * 0.8f);
      ImGui::TextDisabled("(%d heads \xc3\x97 %d values \xe2\x86\x92 W_o \xe2\x86\x92 %d dims)",
                          res.dims.H, dv, y.cols);
    }
  }
  return false;
}

}  // namespace attnviz::gui
