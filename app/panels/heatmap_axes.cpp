// attnviz panel: the heatmap's surroundings (heatmap_parts.h): axis labels and titles, index
// ticks for long contexts, the row-sum strip (and the column-sum strip of the wrong-axis mode),
// the selected row's outline and the hovered cell's frame, and the colour bar.
#include "gui/heatmap_renderer.h"
#include "panels/heatmap_parts.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace attnviz::gui::heatmap {

namespace {

// Colour of a sum cell: green at 1, red as it moves away; grey when the row is fully masked.
ImU32 sumColour(float sum, bool fullyMasked) {
  if (fullyMasked) return kSumBad;
  const float err = std::min(1.0f, std::fabs(sum - 1.0f) * 4.0f);
  if (err < 2e-3f) return kSumGood;
  const float a = 0.35f + 0.65f * err;
  return IM_COL32(int(70 + (215 - 70) * a), int(165 + (70 - 165) * a), int(95 + (60 - 95) * a),
                  255);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

void drawColourBar(AppState& s, ImDrawList* dl, ImVec2 p0, float w, float h,
                   const ValueMapping& m) {
  const ColormapId cm = s.activeColormap();
  // The bar is the colormap texture itself, t = 1 at the top.
  dl->AddImageQuad(s.renderer->colormapId(cm), p0, ImVec2(p0.x + w, p0.y),
                   ImVec2(p0.x + w, p0.y + h), ImVec2(p0.x, p0.y + h), ImVec2(1, 0.5f),
                   ImVec2(1, 0.5f), ImVec2(0, 0.5f), ImVec2(0, 0.5f));
  dl->AddRect(p0, ImVec2(p0.x + w, p0.y + h), IM_COL32(90, 92, 100, 255));
  // Ticks: evenly spaced in t, labelled with the value that maps there (mapValue inverted).
  for (int k = 0; k <= 4; ++k) {
    const float t = k / 4.0f;
    float lin = t;
    if (m.scale == ColorScale::Gamma) lin = std::pow(t, 1.0f / std::max(m.gamma, 1e-3f));
    if (m.scale == ColorScale::Log) {
      const float f = std::max(m.logFloor, 1e-12f);
      lin = std::exp(std::log(f) * (1.0f - t));
    }
    float v = m.lo + (m.hi - m.lo) * lin;
    const float y = p0.y + h - t * h;
    dl->AddLine(ImVec2(p0.x + w, y), ImVec2(p0.x + w + 4, y), kLabel);
    if (std::fabs(v) < 1e-6f * std::max(1.0f, std::fabs(m.hi - m.lo))) v = 0.0f;  // no "-0.00"
    const std::string label =
        std::fabs(v) >= 1000 || (std::fabs(v) < 0.01f && v != 0) ? fmt("%.0e", v) : fmt("%.2f", v);
    dl->AddText(ImVec2(p0.x + w + 6, y - ImGui::GetFontSize() * 0.5f), kLabel, label.c_str());
  }
  // The masked swatch, hatched like the heatmap.
  const float sy = p0.y + h + 10;
  const float sw = w, sh = ImGui::GetFontSize();
  dl->PushClipRect(ImVec2(p0.x, sy), ImVec2(p0.x + sw, sy + sh), true);
  dl->AddRectFilled(ImVec2(p0.x, sy), ImVec2(p0.x + sw, sy + sh), rgbaU32(kMaskedColor));
  for (float x = -sh; x < sw; x += 8)
    dl->AddLine(ImVec2(p0.x + x, sy + sh), ImVec2(p0.x + x + sh, sy), rgbaU32(kMaskedHatchColor),
                3.0f);
  dl->PopClipRect();
  dl->AddText(ImVec2(p0.x + w + 6, sy), kLabel, "masked");
}

// The selected row's outline and the hovered cell's frame, clipped to the matrix.
void drawOverlays(const AppState& s, const HeatmapLayout& L) {
  const DisplayMatrix& d = s.display();
  const ViewState& v = s.view;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = L.p0, p1 = L.p1;
  const float cellPx = L.cellPx, sc = L.sc;
  auto rowY = [&](float r) { return p0.y + (r - v.panY) * cellPx; };
  auto colX = [&](float c) { return p0.x + (c - v.panX) * cellPx; };
  dl->PushClipRect(p0, p1, true);
  if (v.selectedRow >= 0 && v.selectedRow < d.rows) {
    const float y0 = rowY(float(v.selectedRow)), y1 = rowY(float(v.selectedRow + 1));
    const float th = std::max(2.0f, std::min(3.0f * sc, cellPx * 0.25f));
    dl->AddRect(ImVec2(p0.x, y0 - th * 0.5f), ImVec2(p1.x, std::max(y1, y0 + 1) + th * 0.5f),
                kHighlight, 0, 0, th);
  }
  if (v.hoverRow >= 0 && cellPx >= 4) {
    dl->AddRect(ImVec2(colX(float(v.hoverCol)), rowY(float(v.hoverRow))),
                ImVec2(colX(float(v.hoverCol + 1)), rowY(float(v.hoverRow + 1))), kHover, 0, 0,
                1.5f);
  }
  dl->PopClipRect();
}

// Row labels (queries) on the left and column labels (keys) on top, thinned to one every
// rowStep, plus the selected and hovered ones.
void drawAxisLabels(const AppState& s, const HeatmapLayout& L, const LabelCache& labels) {
  const ViewState& v = s.view;
  const DisplayMatrix& d = s.display();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = L.origin, p0 = L.p0, p1 = L.p1;
  const float cellPx = L.cellPx, sc = L.sc, lineH = L.lineH;
  // An encoder's pair colours its labels by text (A, B) and greys its special tokens; a block
  // view's indices are those of the whole input.
  auto tokenColour = [&](int full, ImU32 plain) {
    const ImU32 c = encoderTokenColour(s, full);
    return c != 0 && plain == kLabel ? c : plain;
  };
  const int r0 = L.r0, r1 = L.r1, c0 = L.c0, c1 = L.c1, rowStep = L.rowStep, colStep = L.colStep;
  auto rowY = [&](float r) { return p0.y + (r - v.panY) * cellPx; };
  auto colX = [&](float c) { return p0.x + (c - v.panX) * cellPx; };
  dl->PushClipRect(ImVec2(origin.x, p0.y - lineH), ImVec2(p0.x, p1.y + lineH), true);
  // Every rowStep-th label, plus the selected and hovered rows (on a backing so they read
  // cleanly over their thinned-out neighbours).
  std::vector<int> rowsToLabel;
  for (int i = (r0 / rowStep) * rowStep; i < r1; i += rowStep) rowsToLabel.push_back(i);
  for (int extra : {v.hoverRow, v.selectedRow})
    if (extra >= r0 && extra < r1 && extra % rowStep != 0) rowsToLabel.push_back(extra);
  for (std::size_t n = 0; n < rowsToLabel.size(); ++n) {
    const int i = rowsToLabel[n];
    const float y = rowY(i + 0.5f) - lineH * 0.5f;
    if (i % rowStep != 0)
      dl->AddRectFilled(ImVec2(origin.x + lineH + 6 * sc, y - 1), ImVec2(p0.x - 1, y + lineH + 1),
                        IM_COL32(30, 31, 36, 255));
    const std::string& tok = labels.rowLabels.text[i];
    const std::string idx = std::to_string(d.fullRow(i));
    const float tw = labels.rowLabels.width[i];
    const bool hi = i == v.selectedRow;
    const ImU32 col = tokenColour(d.fullRow(i), hi ? kHighlight : (i == v.hoverRow ? kTitle : kLabel));
    dl->AddText(ImVec2(p0.x - 12 * sc - tw, y), col, tok.c_str());
    dl->AddText(ImVec2(p0.x - 16 * sc - tw - ImGui::CalcTextSize(idx.c_str()).x, y),
                hi ? kHighlight : kIndex, idx.c_str());
  }
  if (v.selectedRow >= r0 && v.selectedRow < r1) {
    const float y = rowY(v.selectedRow + 0.5f);
    dl->AddTriangleFilled(ImVec2(p0.x - 4, y), ImVec2(p0.x - 1 - 5 * sc, y - 4 * sc),
                          ImVec2(p0.x - 1 - 5 * sc, y + 4 * sc), kHighlight);
  }
  dl->PopClipRect();
  // Column labels (keys) on top, reading upwards: "index token".
  dl->PushClipRect(ImVec2(p0.x - lineH, origin.y), ImVec2(p1.x + lineH, p0.y), true);
  std::vector<int> colsToLabel;
  for (int j = (c0 / colStep) * colStep; j < c1; j += colStep) colsToLabel.push_back(j);
  if (v.hoverCol >= c0 && v.hoverCol < c1 && v.hoverCol % colStep != 0)
    colsToLabel.push_back(v.hoverCol);
  for (int j : colsToLabel) {
    const float x = colX(j + 0.5f) - lineH * 0.5f;
    if (j % colStep != 0)
      dl->AddRectFilled(ImVec2(x - 1, origin.y + lineH + 4 * sc), ImVec2(x + lineH + 1, p0.y - 1),
                        IM_COL32(30, 31, 36, 255));
    const std::string idx = std::to_string(d.fullCol(j));
    const std::string& tok = labels.colLabels.text[j];
    const float iw = ImGui::CalcTextSize(idx.c_str()).x;
    const ImU32 col = d.columnsAreKeys ? tokenColour(d.fullCol(j), j == v.hoverCol ? kTitle : kLabel)
                                       : (j == v.hoverCol ? kTitle : kLabel);
    addVerticalText(dl, x, p0.y - 4 * sc, kIndex, idx.c_str());
    addVerticalText(dl, x, p0.y - 8 * sc - iw, col, tok.c_str());
  }
  dl->PopClipRect();
}

// "Keys (columns)" above and "Queries (rows)" along the left.
void drawAxisTitles(const AppState& s, const HeatmapLayout& L) {
  const DisplayMatrix& d = s.display();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = L.origin, p0 = L.p0;
  const float visW = L.visW, visH = L.visH;
  // An encoder-decoder's site names its sequences ("Keys: the source"): "(columns)" goes in
  // after the first word.
  auto named = [](const std::string& given, const char* plain, const char* where) {
    if (given.empty()) return std::string(plain) + " " + where;
    const std::size_t colon = given.find(':');
    return colon == std::string::npos ? given + " " + where
                                      : given.substr(0, colon) + " " + where + given.substr(colon);
  };
  const std::string keysText =
      d.columnsAreKeys ? named(s.session.keyAxisTitle(), "Keys", "(columns)") + "   j \xe2\x86\x92"
                       : std::string("Value dimensions (columns)");
  const char* keysTitle = keysText.c_str();
  const float ktw = ImGui::CalcTextSize(keysTitle).x;
  dl->AddText(ImVec2(p0.x + std::max(0.0f, (visW - ktw) * 0.5f), origin.y), kTitle, keysTitle);
  const std::string queriesText =
      "\xe2\x86\x90 i   " + named(s.session.queryAxisTitle(), "Queries", "(rows)");
  const char* queriesTitle = queriesText.c_str();
  const float qtw = ImGui::CalcTextSize(queriesTitle).x;
  addVerticalText(dl, origin.x, p0.y + std::max(qtw, (visH + qtw) * 0.5f), kTitle, queriesTitle);
}

// Row-sum strip right of the matrix: every row of the weights sums to 1 (fully masked rows are
// flagged). Returns the x where the colour bar goes.
float drawRowSumStrip(const AppState& s, const HeatmapLayout& L) {
  const DisplayMatrix& d = s.display();
  const ViewState& v = s.view;
  const ImGuiIO& io = ImGui::GetIO();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = L.p0, p1 = L.p1;
  const float cellPx = L.cellPx, sc = L.sc, lineH = L.lineH, visH = L.visH, stripW = L.stripW;
  const int r0 = L.r0, r1 = L.r1;
  auto rowY = [&](float r) { return p0.y + (r - v.panY) * cellPx; };
  float xRight = p1.x + 8 * sc;
  if (!L.showSums) return xRight;
  const float sx0 = xRight, sx1 = xRight + stripW;
  dl->AddText(ImVec2(sx0 + 2, p0.y - lineH - 2), kTitle, "\xce\xa3 row");
  dl->PushClipRect(ImVec2(sx0, p0.y), ImVec2(sx1, p1.y), true);
  if (cellPx >= 1.0f) {
    for (int i = r0; i < r1; ++i) {
      const ImU32 col = sumColour(d.rowSums[i], d.rowFullyMasked[i]);
      dl->AddRectFilled(ImVec2(sx0, rowY(float(i))), ImVec2(sx1, rowY(float(i + 1))), col);
      if (cellPx >= lineH + 2) {
        const std::string txt = d.rowFullyMasked[i] ? "0 \xe2\x88\x85" : fmt("%.2f", d.rowSums[i]);
        dl->AddText(ImVec2(sx0 + 4, rowY(i + 0.5f) - lineH * 0.5f), IM_COL32(255, 255, 255, 255),
                    txt.c_str());
      }
    }
  } else {
    // Several rows per pixel: show the worst row of each pixel.
    for (float y = 0; y < visH; y += 1.0f) {
      const int a = int(v.panY + y / cellPx),
                b = std::min(d.rows, int(v.panY + (y + 1) / cellPx) + 1);
      float worst = 1.0f;
      bool masked = false;
      for (int i = a; i < b; ++i) {
        masked |= d.rowFullyMasked[i] != 0;
        if (std::fabs(d.rowSums[i] - 1.0f) > std::fabs(worst - 1.0f)) worst = d.rowSums[i];
      }
      dl->AddRectFilled(ImVec2(sx0, p0.y + y), ImVec2(sx1, p0.y + y + 1), sumColour(worst, masked));
    }
  }
  dl->PopClipRect();
  if (ImGui::IsMouseHoveringRect(ImVec2(sx0, p0.y), ImVec2(sx1, p1.y))) {
    const int i = int((io.MousePos.y - p0.y) / cellPx + v.panY);
    if (i >= 0 && i < d.rows) {
      ImGui::BeginTooltip();
      if (d.rowFullyMasked[i])
        ImGui::Text(
            "Row %d is fully masked: no key is allowed, so its weights are all 0\n"
            "and its output is 0 (PyTorch would give NaN here).",
            i);
      else
        ImGui::Text("Row %d sums to %.6f", i, d.rowSums[i]);
      if (v.wrongAxis)
        ImGui::TextColored(ImVec4(1, 0.5f, 0.4f, 1), "Wrong axis: rows no longer sum to 1.");
      ImGui::EndTooltip();
    }
  }
  xRight = sx1 + 8 * sc;
  return xRight;
}

// Column-sum strip under the matrix, only in the wrong-axis mode (where columns sum to 1).
void drawColumnSumStrip(const AppState& s, const HeatmapLayout& L) {
  const DisplayMatrix& d = s.display();
  const ViewState& v = s.view;
  if (!L.showSums || !v.wrongAxis) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = L.p0, p1 = L.p1;
  const float cellPx = L.cellPx, sc = L.sc;
  const int c0 = L.c0, c1 = L.c1;
  auto colX = [&](float c) { return p0.x + (c - v.panX) * cellPx; };
  const float sy0 = p1.y + 6 * sc, sy1 = sy0 + 18 * sc;
  dl->PushClipRect(ImVec2(p0.x, sy0), ImVec2(p1.x, sy1), true);
  for (int j = c0; j < c1; ++j) {
    const float sum = d.colSums[j];
    dl->AddRectFilled(ImVec2(colX(float(j)), sy0),
                      ImVec2(std::max(colX(float(j + 1)), colX(float(j)) + 1), sy1),
                      sumColour(sum, false));
  }
  dl->PopClipRect();
  dl->AddText(ImVec2(p0.x, sy1 + 2), kTitle,
              "\xce\xa3 column: each column sums to 1 here (the wrong axis)");
}

// Index ticks along both axes when cells are too narrow for token labels: every `step` cells,
// step the smallest 1, 2 or 5 x 10^k that leaves room for the numbers.
void drawIndexTicks(const AppState& s, const HeatmapLayout& L) {
  const ViewState& v = s.view;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = L.origin, p0 = L.p0, p1 = L.p1;
  const float cellPx = L.cellPx, sc = L.sc, lineH = L.lineH;
  long step = 1;
  for (long base = 1; step * cellPx < 70 * sc; base *= 10) {
    for (long m : {1L, 2L, 5L}) {
      step = base * m;
      if (step * cellPx >= 70 * sc) break;
    }
  }
  auto rowY = [&](double r) { return float(p0.y + (r - v.panY) * cellPx); };
  auto colX = [&](double c) { return float(p0.x + (c - v.panX) * cellPx); };
  dl->PushClipRect(ImVec2(origin.x, p0.y - lineH), ImVec2(p0.x, p1.y + lineH), true);
  for (long i = ((L.r0 + step - 1) / step) * step; i < L.r1; i += step) {
    const float y = rowY(double(i) + 0.5);
    const std::string idx = std::to_string(i);
    dl->AddLine(ImVec2(p0.x - 6 * sc, y), ImVec2(p0.x - 1, y), kIndex);
    dl->AddText(ImVec2(p0.x - 9 * sc - ImGui::CalcTextSize(idx.c_str()).x, y - lineH * 0.5f),
                kLabel, idx.c_str());
  }
  dl->PopClipRect();
  dl->PushClipRect(ImVec2(p0.x - lineH, origin.y), ImVec2(p1.x + lineH, p0.y), true);
  for (long j = ((L.c0 + step - 1) / step) * step; j < L.c1; j += step) {
    const float x = colX(double(j) + 0.5);
    dl->AddLine(ImVec2(x, p0.y - 6 * sc), ImVec2(x, p0.y - 1), kIndex);
    addVerticalText(dl, x - lineH * 0.5f, p0.y - 9 * sc, kLabel, std::to_string(j).c_str());
  }
  dl->PopClipRect();
}

}  // namespace attnviz::gui::heatmap
