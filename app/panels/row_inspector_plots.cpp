// attnviz panel: the row inspector's pictures (row_inspector.h): a labelled bar per key, every
// key at once as one bar a pixel column, and vectors as strips of diverging colours. Weights
// grow from the left in the weights colormap; scores grow right or left from a middle line in
// the diverging colours the heatmap gives them.
#include "panels/row_inspector.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace attnviz::gui::row_inspector {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The colour of value v, as the heatmap colours it (scores: the diverging map on [-m, m];
// weights: the weights colormap on [0, the row's largest]).
ImU32 valueColour(const AppState& s, const RowView& r, float v) {
  if (isScores(r) && stageFromSource(r.stage))  // non-negative: the weights colormap, [0, max]
    return colormapU32(s.view.weightColormap, v / std::max(r.scoreRange, 1e-6f));
  if (isScores(r))
    return colormapU32(s.view.scoreColormap,
                       0.5f + 0.5f * std::clamp(v / std::max(r.scoreRange, 1e-6f), -1.0f, 1.0f));
  return colormapU32(s.view.weightColormap, v / std::max(r.st.max, 1e-6f));
}

}  // namespace

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

// Columns whose keys are all masked take the masked colour; scores grow up or down from a
// middle line.
void distributionPlot(const AppState& s, const RowView& r, const std::vector<std::string>& keys) {
  const float sc = s.ui.uiScale;
  const int Tk = r.Tk;
  const float* w = r.w;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 q = ImGui::GetCursorScreenPos();
  const float W = std::max(40.0f, ImGui::GetContentRegionAvail().x), Hh = 44 * sc;
  float top = std::max(r.st.max, 1e-6f);
  if (isScores(r)) {
    top = 1e-6f;
    for (int j = 0; j < Tk; ++j)
      if (std::isfinite(w[j])) top = std::max(top, std::fabs(w[j]));
  }
  dl->AddRectFilled(q, ImVec2(q.x + W, q.y + Hh), IM_COL32(24, 25, 30, 255));
  const int px = int(W);
  RGBA8 maskedDim = kMaskedColor;
  maskedDim.a = 96;
  for (int x = 0; x < px; ++x) {
    const int j0 = int(std::floor(double(x) * Tk / px)),
              j1 = std::max(j0 + 1, int(std::floor(double(x + 1) * Tk / px)));
    float m = isScores(r) ? -kInf : 0.0f;
    bool allMasked = true;
    for (int j = j0; j < std::min(j1, Tk); ++j) {
      if (std::isfinite(w[j])) m = std::max(m, w[j]);
      allMasked = allMasked && (std::isfinite(w[j]) && w[j] > 0.0f ? false : r.masked(j));
    }
    if (allMasked)  // every key of the column masked: the masked colour, dimmed
      dl->AddRectFilled(ImVec2(q.x + x, q.y), ImVec2(q.x + x + 1, q.y + Hh), rgbaU32(maskedDim));
    if (!std::isfinite(m)) continue;
    if (isScores(r)) {
      const float mid = q.y + Hh * 0.5f, hgt = Hh * 0.5f * std::fabs(m) / top;
      if (hgt > 0.5f)
        dl->AddRectFilled(ImVec2(q.x + x, m > 0 ? mid - hgt : mid),
                          ImVec2(q.x + x + 1, m > 0 ? mid : mid + hgt), valueColour(s, r, m));
    } else {
      const float hgt = Hh * m / top;
      if (hgt > 0.5f)
        dl->AddRectFilled(ImVec2(q.x + x, q.y + Hh - hgt), ImVec2(q.x + x + 1, q.y + Hh),
                          colormapU32(s.view.weightColormap, m / top));
    }
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

void keyBars(const AppState& s, const RowView& r, const std::vector<int>& order, int nBars,
             bool all) {
  const int Tk = r.Tk;
  const float* w = r.w;
  const RowStats& st = r.st;
  const auto& keys = s.session.inputs().keyTokens;
  const float sc = s.ui.uiScale;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float lineH = ImGui::GetTextLineHeight();
  const float labelW = 96 * sc;
  // Scores print right of the bar area: room for the widest of them ("-0.000166" is wide).
  float textW = 64 * sc;
  if (isScores(r))
    for (int k = 0; k < nBars; ++k) {
      char val[32];
      std::snprintf(val, sizeof val, "%.3g", w[all ? k : order[k]]);
      textW = std::max(textW, ImGui::CalcTextSize(val).x + 8 * sc);
    }
  const float barMax = std::max(40.0f, ImGui::GetContentRegionAvail().x - labelW - textW);
  float absMax = 1e-6f;  // scores: the bars' scale, the row's largest magnitude
  if (isScores(r))
    for (int j = 0; j < Tk; ++j)
      if (std::isfinite(w[j])) absMax = std::max(absMax, std::fabs(w[j]));
  for (int k = 0; k < nBars; ++k) {
    const int j = all ? k : order[k];
    const ImVec2 p = ImGui::GetCursorScreenPos();
    std::string label = std::to_string(j) + " " + keys[j];
    while (label.size() > 2 && ImGui::CalcTextSize(label.c_str()).x > labelW - 6) label.pop_back();
    const bool masked = r.masked(j);
    dl->AddText(p, masked ? IM_COL32(110, 112, 120, 255) : IM_COL32(210, 212, 220, 255),
                label.c_str());
    char val[32];
    std::snprintf(val, sizeof val, masked ? "masked" : isScores(r) ? "%.3g" : "%.3f", w[j]);
    if (isScores(r)) {
      // Signed: from the middle of the bar area, right when positive, left when negative.
      const float mid = p.x + labelW + barMax * 0.5f;
      if (masked) {
        dl->AddRectFilled(ImVec2(mid - 3, p.y + 2), ImVec2(mid + 3, p.y + lineH - 2),
                          rgbaU32(kMaskedColor));
      } else {
        const float bw = std::max(1.0f, barMax * 0.5f * std::fabs(w[j]) / absMax);
        dl->AddRectFilled(ImVec2(w[j] >= 0 ? mid : mid - bw, p.y + 2),
                          ImVec2(w[j] >= 0 ? mid + bw : mid, p.y + lineH - 2),
                          valueColour(s, r, w[j]));
      }
      dl->AddLine(ImVec2(mid, p.y), ImVec2(mid, p.y + lineH), IM_COL32(80, 82, 90, 255));
      dl->AddText(ImVec2(p.x + labelW + barMax + 4, p.y), IM_COL32(170, 172, 180, 255), val);
    } else {
      const float bw = barMax * w[j] / std::max(st.max, 1e-6f);
      const ImVec2 b0(p.x + labelW, p.y + 2),
          b1(p.x + labelW + std::max(1.0f, bw), p.y + lineH - 2);
      if (masked)
        dl->AddRectFilled(b0, ImVec2(b0.x + 6, b1.y), rgbaU32(kMaskedColor));
      else
        dl->AddRectFilled(b0, b1, valueColour(s, r, w[j]));
      dl->AddText(ImVec2(b1.x + 4, p.y), IM_COL32(170, 172, 180, 255), val);
    }
    ImGui::Dummy(ImVec2(labelW + barMax, lineH));
  }
}

}  // namespace attnviz::gui::row_inspector
