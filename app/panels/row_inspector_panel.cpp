// attnviz panel: the selected query's row. Its distribution over keys as labelled bars, the top
// keys, the entropy, and the output vector as the weighted sum of value rows. In pooled mode
// (long contexts, no materialised matrix) the row comes from Session::pooledRow and the keys
// show as one bar a pixel column plus the largest few.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>

namespace attnviz::gui {

namespace {

// One vector (a value row or the output) as a strip of diverging colours.
void vectorStrip(const float* v, int n, float scale, float width, float height) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float cw = width / std::max(1, n);
  for (int k = 0; k < n; ++k) {
    const float t = 0.5f + 0.5f * std::clamp(v[k] / scale, -1.0f, 1.0f);
    dl->AddRectFilled(ImVec2(p.x + k * cw, p.y), ImVec2(p.x + (k + 1) * cw, p.y + height),
                      colormapU32(ColormapId::Diverging, t));
  }
  dl->AddRect(p, ImVec2(p.x + width, p.y + height), IM_COL32(80, 82, 90, 255));
  ImGui::Dummy(ImVec2(width, height));
}

// One query row of the shown head, from the materialised result or from Session::pooledRow.
struct RowView {
  int i = 0, h = 0, Tk = 0, dv = 0;
  const float* w = nullptr;      // [Tk] weights
  RowStats st;
  int allowed = 0;               // keys the mask allows
  std::function<bool(int)> masked;  // whether key j is masked
  const float* V = nullptr;      // [Tk, dv] the head's value rows, or null
  const float* O = nullptr;      // [dv] the output, or null
  int maxBars = 24;              // labelled bars when the keys are too many to list
  bool pooled = false;
};

// Every key at once: one bar a pixel column, the max over the keys it covers (columns whose
// keys are all masked in the masked colour), with a tooltip.
void distributionPlot(const AppState& s, const RowView& r, const std::vector<std::string>& keys) {
  const float sc = s.ui.uiScale;
  const int Tk = r.Tk;
  const float* w = r.w;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 q = ImGui::GetCursorScreenPos();
  const float W = std::max(40.0f, ImGui::GetContentRegionAvail().x), Hh = 44 * sc;
  const float top = std::max(r.st.max, 1e-6f);
  dl->AddRectFilled(q, ImVec2(q.x + W, q.y + Hh), IM_COL32(24, 25, 30, 255));
  const int px = int(W);
  RGBA8 maskedDim = kMaskedColor;
  maskedDim.a = 96;
  for (int x = 0; x < px; ++x) {
    const int j0 = int(std::floor(double(x) * Tk / px)),
              j1 = std::max(j0 + 1, int(std::floor(double(x + 1) * Tk / px)));
    float m = 0.0f;
    bool allMasked = true;
    for (int j = j0; j < std::min(j1, Tk); ++j) {
      m = std::max(m, w[j]);
      allMasked = allMasked && (w[j] > 0.0f ? false : r.masked(j));
    }
    if (allMasked)  // every key of the column masked: the masked colour, dimmed
      dl->AddRectFilled(ImVec2(q.x + x, q.y), ImVec2(q.x + x + 1, q.y + Hh),
                        rgbaU32(maskedDim));
    const float hgt = Hh * m / top;
    if (hgt > 0.5f)
      dl->AddRectFilled(ImVec2(q.x + x, q.y + Hh - hgt), ImVec2(q.x + x + 1, q.y + Hh),
                        colormapU32(s.view.weightColormap, m / top));
  }
  dl->AddRect(q, ImVec2(q.x + W, q.y + Hh), IM_COL32(80, 82, 90, 255));
  ImGui::InvisibleButton("##dist", ImVec2(W, Hh));
  if (ImGui::IsItemHovered()) {
    // The pixel column's keys: the largest of them (a column covers several at long T).
    const double x = ImGui::GetIO().MousePos.x - q.x;
    const int j0 = std::clamp(int(std::floor(x * Tk / W)), 0, Tk - 1);
    const int j1 = std::clamp(int(std::floor((x + 1) * Tk / W)), j0 + 1, Tk);
    int j = j0;
    for (int k = j0; k < j1; ++k)
      if (w[k] > w[j]) j = k;
    if (j1 - j0 > 1)
      ImGui::SetTooltip("keys %d..%d, largest: key %d '%s': %.4f", j0, j1 - 1, j, keys[j].c_str(),
                        w[j]);
    else
      ImGui::SetTooltip("key %d '%s': %.4f", j, keys[j].c_str(), w[j]);
  }
}

// The row: stats, the distribution over keys, the top keys, and the output as a weighted sum of
// value rows. `order` receives the keys by weight (the first topN sorted).
void drawRow(AppState& s, const RowView& r, std::vector<int>& order) {
  const int Tk = r.Tk, dv = r.dv, i = r.i;
  const float* w = r.w;
  const RowStats& st = r.st;
  const auto& keys = s.session.inputs().keyTokens;
  const float sc = s.ui.uiScale;
  ImGui::Text("Query %d: '%s'   (head %d)", i, s.session.inputs().queryTokens[i].c_str(), r.h);
  if (st.fullyMasked) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.45f, 0.38f, 1));
    ImGui::TextWrapped(
        "Fully masked: the mask allows no key for this query, so every weight is 0 and "
        "its output is the zero vector. (PyTorch's softmax would give NaN here.)");
    ImGui::PopStyleColor();
    return;
  }
  ImGui::Text("sum = %.6f   entropy H = %.3f nats", st.sum, st.entropy);
  // Two short lines: one long line was cut off by a narrow side panel.
  ImGui::TextDisabled("at most ln %d = %.3f", r.allowed, std::log(std::max(1, r.allowed)));
  ImGui::TextDisabled("effective keys e^H = %.2f", std::exp(st.entropy));

  // Keys by weight.
  order.resize(Tk);
  std::iota(order.begin(), order.end(), 0);
  const int topN = std::min(Tk, 5);
  // Distribution over keys: one bar per key (all keys when few; the largest otherwise).
  const bool all = Tk <= 24;
  const int nBars = all ? Tk : std::min(Tk, r.maxBars);
  std::partial_sort(order.begin(), order.begin() + std::max(topN, all ? topN : nBars),
                    order.end(), [&](int a, int b) { return w[a] > w[b]; });
  if (!all) {
    distributionPlot(s, r, keys);
    ImGui::TextDisabled("all %d keys (max per pixel); the %d largest:", Tk, nBars);
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float lineH = ImGui::GetTextLineHeight();
  const float labelW = 96 * sc;
  const float barMax = std::max(40.0f, ImGui::GetContentRegionAvail().x - labelW - 64 * sc);
  for (int k = 0; k < nBars; ++k) {
    const int j = all ? k : order[k];
    const ImVec2 p = ImGui::GetCursorScreenPos();
    std::string label = std::to_string(j) + " " + keys[j];
    while (label.size() > 2 && ImGui::CalcTextSize(label.c_str()).x > labelW - 6) label.pop_back();
    const bool masked = r.masked(j);
    dl->AddText(p, masked ? IM_COL32(110, 112, 120, 255) : IM_COL32(210, 212, 220, 255),
                label.c_str());
    const float bw = barMax * w[j] / std::max(st.max, 1e-6f);
    const ImVec2 b0(p.x + labelW, p.y + 2), b1(p.x + labelW + std::max(1.0f, bw), p.y + lineH - 2);
    if (masked)
      dl->AddRectFilled(b0, ImVec2(b0.x + 6, b1.y), rgbaU32(kMaskedColor));
    else
      dl->AddRectFilled(b0, b1, colormapU32(s.view.weightColormap, w[j] / std::max(st.max, 1e-6f)));
    char val[32];
    std::snprintf(val, sizeof val, masked ? "masked" : "%.3f", w[j]);
    dl->AddText(ImVec2(b1.x + 4, p.y), IM_COL32(170, 172, 180, 255), val);
    ImGui::Dummy(ImVec2(labelW + barMax, lineH));
  }

  ImGui::Spacing();
  ImGui::TextUnformatted("Top keys");
  for (int k = 0; k < topN; ++k) {
    const int j = order[k];
    ImGui::TextDisabled("  %d.", k + 1);
    ImGui::SameLine();
    ImGui::Text("key %d '%s'  %.4f", j, keys[j].c_str(), w[j]);
  }

  // The output as a weighted sum of value rows: the three largest terms, then the result.
  if (!r.V || !r.O || dv <= 0) return;
  ImGui::Spacing();
  ImGui::TextUnformatted("Output o_i = \xce\xa3_j a_ij v_j  (the value rows, weighted)");
  const float* V = r.V;
  const float* O = r.O;
  float scale = 1e-6f;
  for (int k = 0; k < dv; ++k) scale = std::max(scale, std::fabs(O[k]));
  for (int k = 0; k < std::min(3, topN); ++k)
    for (int c = 0; c < dv; ++c)
      scale = std::max(scale, std::fabs(V[std::size_t(order[k]) * dv + c]));
  const float stripW = std::max(40.0f, ImGui::GetContentRegionAvail().x - 150 * sc);
  float rest = 1.0f;
  for (int k = 0; k < std::min(3, topN); ++k) {
    const int j = order[k];
    rest -= w[j];
    ImGui::Text("%s%.3f \xc3\x97 v%d", k ? "+ " : "  ", w[j], j);
    ImGui::SameLine(140 * sc);
    vectorStrip(V + std::size_t(j) * dv, dv, scale, stripW, lineH * 0.8f);
  }
  if (Tk > 3)
    ImGui::TextDisabled("+ %d more keys with total weight %.3f", Tk - std::min(3, topN),
                        std::max(0.0f, rest));
  ImGui::Text("= o%d", i);
  ImGui::SameLine(140 * sc);
  vectorStrip(O, dv, scale, stripW, lineH * 0.8f);
  ImGui::TextDisabled("(%d value dimensions, colour = sign and size)", dv);
}

// What was drawn, for scripted runs and tests.
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
}

// The value rows of head h, when the inputs have them for every key.
const float* valueRows(const AppState& s, int h) {
  const Tensor3& v = s.session.inputs().v;
  return v.heads > h && v.rows == s.tk() && !v.empty() ? v.head(h) : nullptr;
}

// Pooled mode: the row computed on its own (Session::pooledRow, kept until something changes).
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

bool drawRowInspectorPanel(AppState& s) {
  const int i = s.view.selectedRow;
  s.rowShown = RowInspectorShown{};
  if (i >= 0 && i < s.tq() && s.session.pooledMode()) return drawPooledRow(s, i);
  if (i < 0 || i >= s.tq() || !s.session.hasResult()) {
    ImGui::TextDisabled("Click a row of the heatmap to inspect that query.");
    return false;
  }
  const int h = s.shownHead();
  const AttentionResult& res = s.session.result();
  const int Tk = s.tk(), dv = res.dims.dv;
  RowView r;
  r.i = i;
  r.h = h;
  r.Tk = Tk;
  r.dv = dv;
  r.w = res.weights.head(h) + std::size_t(i) * Tk;
  r.st = res.row(h, i);
  r.masked = [&](int j) {
    return std::isinf(logitAt(res.scaled, s.session.params(), s.session.slopes(), h, i, j));
  };
  for (int j = 0; j < Tk; ++j) r.allowed += r.masked(j) ? 0 : 1;
  r.V = valueRows(s, h);
  r.O = res.output.head(h) + std::size_t(i) * dv;
  recordShown(s, r);
  std::vector<int> order;
  drawRow(s, r, order);
  if (r.st.fullyMasked) return false;

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
