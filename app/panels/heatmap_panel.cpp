// attnviz panel: the heatmap. Rows are queries (labels left), columns are keys (labels on top),
// row 0 at the top. The matrix is one texture coloured in a fragment shader; ImGui draws only
// labels, strips and overlays around it.
#include "gui/heatmap_renderer.h"
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace attnviz::gui {

namespace {

constexpr ImU32 kHighlight = IM_COL32(255, 170, 30, 255);  // the selected row
constexpr ImU32 kHover = IM_COL32(255, 255, 255, 230);
constexpr ImU32 kLabel = IM_COL32(205, 208, 215, 255);
constexpr ImU32 kIndex = IM_COL32(120, 124, 135, 255);
constexpr ImU32 kTitle = IM_COL32(235, 236, 240, 255);
constexpr ImU32 kSumGood = IM_COL32(70, 165, 95, 255);
constexpr ImU32 kSumBad = IM_COL32(215, 70, 60, 255);

std::string shortLabel(const std::string& s, std::size_t maxChars = 14) {
  // Count UTF-8 code points so that non-ASCII tokens are cut on a character boundary.
  std::size_t cps = 0, k = 0;
  for (; k < s.size(); ++k) {
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) {
      if (cps == maxChars) return s.substr(0, k) + "\xe2\x80\xa6";
      ++cps;
    }
  }
  return s;
}

// Shortens and measures n labels; label(k) gives the full text of label k.
template <class Label>
void measureLabels(AxisLabels& out, int n, Label label) {
  out.text.resize(n);
  out.width.resize(n);
  out.maxWidth = 0;
  for (int k = 0; k < n; ++k) {
    out.text[k] = shortLabel(label(k));
    out.width[k] = ImGui::CalcTextSize(out.text[k].c_str()).x;
    out.maxWidth = std::max(out.maxWidth, out.width[k]);
  }
}

// The axis labels of the display matrix, rebuilt only when the tokens, the columns' meaning or
// the font size changed.
const LabelCache& axisLabels(AppState& s) {
  LabelCache& c = s.labels;
  const DisplayMatrix& d = s.display();
  const float fontSize = ImGui::GetFontSize();
  if (c.inputsVersion == s.session.inputsVersion() && c.fontSize == fontSize && c.rows == d.rows &&
      c.cols == d.cols && c.columnsAreKeys == d.columnsAreKeys)
    return c;
  const auto& q = s.session.inputs().queryTokens;
  const auto& k = s.session.inputs().keyTokens;
  measureLabels(c.rowLabels, d.rows,
                [&](int i) { return i < int(q.size()) ? q[i] : std::string(); });
  if (d.columnsAreKeys)
    measureLabels(c.colLabels, d.cols,
                  [&](int j) { return j < int(k.size()) ? k[j] : std::string(); });
  else
    measureLabels(c.colLabels, d.cols, [](int j) { return "d" + std::to_string(j); });
  c.inputsVersion = s.session.inputsVersion();
  c.fontSize = fontSize;
  c.rows = d.rows;
  c.cols = d.cols;
  c.columnsAreKeys = d.columnsAreKeys;
  return c;
}

// Colour of a sum cell: green at 1, red as it moves away; grey when the row is fully masked.
ImU32 sumColour(float sum, bool fullyMasked) {
  if (fullyMasked) return kSumBad;
  const float err = std::min(1.0f, std::fabs(sum - 1.0f) * 4.0f);
  if (err < 2e-3f) return kSumGood;
  const float a = 0.35f + 0.65f * err;
  return IM_COL32(int(70 + (215 - 70) * a), int(165 + (70 - 165) * a), int(95 + (60 - 95) * a),
                  255);
}

ValueMapping currentMapping(const AppState& s) {
  ValueMapping m;
  const DisplayMatrix& d = s.display();
  if (stageIsScore(s.view.stage)) {
    const float mag = std::max({std::fabs(d.minFinite), std::fabs(d.maxFinite), 1e-6f});
    m.lo = -mag;
    m.hi = mag;
    m.scale = ColorScale::Linear;
  } else {
    m.lo = 0.0f;
    // Mean-pooled weights are small (a block's average): always on [0, their largest].
    const bool autoRange = s.view.autoRange || (d.pooled && s.view.pooledMean);
    m.hi = autoRange ? std::max(d.maxFinite, 1e-6f) : 1.0f;
    m.scale = s.view.scale;
    m.gamma = s.view.gamma;
    m.logFloor = s.view.logFloor;
  }
  return m;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

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

// Where everything goes this frame: the matrix rectangle, the cell size and the visible range.
struct HeatmapLayout {
  ImVec2 origin, avail;  // the panel's top-left and size
  ImVec2 p0, p1;         // the matrix on screen
  float visW = 0, visH = 0, fit = 1, cellPx = 1;
  float lineH = 0, sc = 1;
  bool showSums = false;
  float stripW = 0, barW = 0;
  int r0 = 0, r1 = 0, c0 = 0, c1 = 0;  // visible rows and columns
  int rowStep = 1, colStep = 1;        // label every n-th
};

// Margins from the label widths (over every row and column, so they do not jump while
// panning), the cell size that fits the matrix at zoom 1, and the pan clamped to the matrix.
HeatmapLayout layoutHeatmap(AppState& s, const LabelCache& labels) {
  const DisplayMatrix& d = s.display();
  ViewState& v = s.view;
  HeatmapLayout L;
  L.sc = s.ui.uiScale;
  L.lineH = ImGui::GetFontSize();
  const float sc = L.sc, lineH = L.lineH;
  L.origin = ImGui::GetCursorScreenPos();
  L.avail = ImGui::GetContentRegionAvail();
  float rowLabelW = labels.rowLabels.maxWidth, colLabelH = labels.colLabels.maxWidth;
  const float indexW = ImGui::CalcTextSize(std::to_string(d.rows - 1).c_str()).x;
  const float colIndexW = ImGui::CalcTextSize(std::to_string(d.cols - 1).c_str()).x;
  rowLabelW = std::min(rowLabelW, 130 * sc) + indexW + 18 * sc;
  colLabelH = std::min(colLabelH, 120 * sc) + colIndexW + 12 * sc;
  L.showSums = d.isWeights;
  L.stripW = L.showSums ? 44 * sc : 0;
  L.barW = 16 * sc;
  const float barLabelsW = 64 * sc;
  const float marginL = lineH + 8 * sc + rowLabelW;
  const float marginT = lineH + 6 * sc + colLabelH;
  const float marginR = (L.showSums ? L.stripW + 8 * sc : 0) + 16 * sc + L.barW + barLabelsW;
  const float colStripH = (L.showSums && v.wrongAxis) ? 22 * sc + lineH : 0;
  const float marginB = colStripH + 4 * sc;
  const float areaW = std::max(40.0f, L.avail.x - marginL - marginR);
  const float areaH = std::max(40.0f, L.avail.y - marginT - marginB);

  // Cell size: fit the whole matrix at zoom 1; whole pixels when cells are big enough so that
  // cell edges fall on pixel edges.
  float fit = std::min(areaW / d.cols, areaH / d.rows);
  fit = std::min(fit, 72 * sc);
  if (fit >= 3) fit = std::floor(fit);
  L.fit = fit;
  v.zoom = std::clamp(v.zoom, 1.0f, std::max(1.0f, 160 * sc / fit));
  float cellPx = fit * v.zoom;
  if (cellPx >= 3) cellPx = std::floor(cellPx);
  L.cellPx = cellPx;
  L.visW = std::floor(std::min(areaW, d.cols * cellPx));
  L.visH = std::floor(std::min(areaH, d.rows * cellPx));
  v.panX = std::clamp(v.panX, 0.0f, std::max(0.0f, d.cols - L.visW / cellPx));
  v.panY = std::clamp(v.panY, 0.0f, std::max(0.0f, d.rows - L.visH / cellPx));
  L.p0 = ImVec2(std::floor(L.origin.x + marginL), std::floor(L.origin.y + marginT));
  L.p1 = ImVec2(L.p0.x + L.visW, L.p0.y + L.visH);
  L.r0 = std::max(0, int(std::floor(v.panY)));
  L.r1 = std::min(d.rows, int(std::ceil(v.panY + L.visH / cellPx)));
  L.c0 = std::max(0, int(std::floor(v.panX)));
  L.c1 = std::min(d.cols, int(std::ceil(v.panX + L.visW / cellPx)));
  L.rowStep = std::max(1, int(std::ceil((lineH + 1) / cellPx)));
  L.colStep = L.rowStep;
  return L;
}

// Uploads the matrix if it changed and draws the coloured cells. False when this GL cannot
// hold it (said in place of the matrix).
bool drawMatrix(AppState& s, const HeatmapLayout& L, const ValueMapping& mapping) {
  const ViewState& v = s.view;
  const auto tUpload = std::chrono::steady_clock::now();
  s.renderer->upload(s.display());
  if (!s.renderer->error().empty()) {
    ImGui::TextColored(ImVec4(1, 0.45f, 0.38f, 1), "Cannot display: %s",
                       s.renderer->error().c_str());
    return false;
  }
  const auto tRender = std::chrono::steady_clock::now();
  const ImGuiIO& io = ImGui::GetIO();
  HeatmapRenderer::Target t;
  const float fbScale = io.DisplayFramebufferScale.x > 0 ? io.DisplayFramebufferScale.x : 1.0f;
  t.width = int(std::lround(L.visW * fbScale));
  t.height = int(std::lround(L.visH * fbScale));
  t.originX = v.panX;
  t.originY = v.panY;
  t.cellsPerPixel = 1.0f / (L.cellPx * fbScale);
  t.colormap = s.activeColormap();
  t.mapping = mapping;
  t.grid = v.showGrid;
  void* tex = s.renderer->render(t);
  const auto tDone = std::chrono::steady_clock::now();
  s.timing.uploadMs = std::chrono::duration<double, std::milli>(tRender - tUpload).count();
  s.timing.renderMs = std::chrono::duration<double, std::milli>(tDone - tRender).count();
  if (tex) ImGui::GetWindowDrawList()->AddImage(tex, L.p0, L.p1, ImVec2(0, 1), ImVec2(1, 0));
  s.view.geometry = {true, L.p0.x, L.p0.y, L.visW, L.visH, L.cellPx};
  return true;
}

// Mouse and keys over the matrix: hover, wheel zoom, drag pan, paint, click to select a row,
// arrows for rows and heads. Returns whether the view changed; sets `hovered`.
bool handleHeatmapInput(AppState& s, const HeatmapLayout& L, bool& hovered) {
  bool changed = false;
  const DisplayMatrix& d = s.display();
  ViewState& v = s.view;
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 p0 = L.p0;
  const float cellPx = L.cellPx, fit = L.fit, sc = L.sc;
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##heatmap", ImVec2(std::max(1.0f, L.visW), std::max(1.0f, L.visH)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  hovered = ImGui::IsItemHovered();
  const bool active = ImGui::IsItemActive();
  if (hovered) {
    const float cx = (io.MousePos.x - p0.x) / cellPx + v.panX;
    const float cy = (io.MousePos.y - p0.y) / cellPx + v.panY;
    if (cx >= 0 && cy >= 0 && cx < d.cols && cy < d.rows) {
      v.hoverCol = int(cx);
      v.hoverRow = int(cy);
    }
    if (io.MouseWheel != 0.0f) {
      const float newZoom =
          std::clamp(v.zoom * std::pow(1.25f, io.MouseWheel), 1.0f, std::max(1.0f, 160 * sc / fit));
      const float newCell = fit * newZoom;
      v.panX = cx - (io.MousePos.x - p0.x) / newCell;
      v.panY = cy - (io.MousePos.y - p0.y) / newCell;
      v.zoom = newZoom;
      changed = true;
    }
  }
  const bool panDrag =
      active && (ImGui::IsMouseDragging(ImGuiMouseButton_Middle) ||
                 ImGui::IsMouseDragging(ImGuiMouseButton_Right) ||
                 (!v.paintMode && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3.0f)));
  if (panDrag) {
    v.panX -= io.MouseDelta.x / cellPx;
    v.panY -= io.MouseDelta.y / cellPx;
    changed = true;
  }
  if (v.paintMode && active && ImGui::IsMouseDown(ImGuiMouseButton_Left) && v.hoverRow >= 0 &&
      d.columnsAreKeys) {
    s.session.paintCell(v.hoverRow, v.hoverCol, io.KeyShift);
    changed = true;
  }
  if (!v.paintMode && hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
      io.MouseDragMaxDistanceSqr[0] < 9.0f && v.hoverRow >= 0) {
    v.selectedRow = v.selectedRow == v.hoverRow ? -1 : v.hoverRow;
    changed = true;
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Middle)) resetView(s);
  if (ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows) && !io.WantTextInput) {
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow)))
      v.selectedRow = std::min(d.rows - 1, v.selectedRow + 1), changed = true;
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow)))
      v.selectedRow = std::max(0, v.selectedRow - 1), changed = true;
    const int H = s.heads();
    const bool left = ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow));
    const bool right = ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow));
    if ((left || right) && H > 0) {
      v.head = (v.head + (right ? 1 : H - 1)) % H;
      v.headAverage = false;
      changed = true;
    }
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) resetView(s);
  }

  // A click on the key axis toggles a document boundary while they are edited
  // (mask_kinds_panel.cpp).
  changed |= handleKeyAxisClick(s);
  return changed;
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
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = L.origin, p0 = L.p0, p1 = L.p1;
  const float cellPx = L.cellPx, sc = L.sc, lineH = L.lineH;
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
    const std::string idx = std::to_string(i);
    const float tw = labels.rowLabels.width[i];
    const bool hi = i == v.selectedRow;
    const ImU32 col = hi ? kHighlight : (i == v.hoverRow ? kTitle : kLabel);
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
    const std::string idx = std::to_string(j);
    const std::string& tok = labels.colLabels.text[j];
    const float iw = ImGui::CalcTextSize(idx.c_str()).x;
    const ImU32 col = j == v.hoverCol ? kTitle : kLabel;
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
  const char* keysTitle =
      d.columnsAreKeys ? "Keys (columns)   j \xe2\x86\x92" : "Value dimensions (columns)";
  const float ktw = ImGui::CalcTextSize(keysTitle).x;
  dl->AddText(ImVec2(p0.x + std::max(0.0f, (visW - ktw) * 0.5f), origin.y), kTitle, keysTitle);
  const char* queriesTitle = "\xe2\x86\x90 i   Queries (rows)";
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

// The hovered cell's tooltip: indices, tokens, score, logit, weight, row sum (the session's
// cellInfo, core's formula); --hover-cell prints it.
void drawCellTooltip(AppState& s) {
  const DisplayMatrix& d = s.display();
  const ViewState& v = s.view;
  const CellInfo ci = s.session.cellInfo(v.hoverRow, v.hoverCol);
  char lines[6][256];
  int n = 0;
  std::snprintf(lines[n++], 256, "row i = %d   query '%s'", ci.i, ci.queryToken.c_str());
  if (d.columnsAreKeys) {
    std::snprintf(lines[n++], 256, "column j = %d   key '%s'", ci.j, ci.keyToken.c_str());
    std::snprintf(lines[n++], 256,
                  "scaled score q\xc2\xb7k/\xe2\x88\x9a"
                  "d = %.4f",
                  ci.scaled);
    if (ci.masked)
      std::snprintf(lines[n++], 256, "logit = -inf (masked)");
    else
      std::snprintf(lines[n++], 256, "logit (s + b)/\xcf\x84 = %.4f", ci.logit);
    std::snprintf(lines[n++], 256, "weight = %.6f", ci.weight);
    std::snprintf(lines[n++], 256, "row sum = %.6f%s", ci.rowSum,
                  d.rowFullyMasked[ci.i] ? " (fully masked row)" : "");
  } else {
    std::snprintf(lines[n++], 256, "value dim %d: o = %.4f", ci.j, ci.shown);
  }
  ImGui::BeginTooltip();
  for (int k = 0; k < n; ++k) ImGui::TextUnformatted(lines[k]);
  if (v.stage != ViewStage::Weights && d.columnsAreKeys)
    ImGui::TextDisabled("shown (%s) = %g", stageLabel(v.stage), ci.shown);
  else if (v.stage == ViewStage::Weights && v.wrongAxis)
    ImGui::TextColored(ImVec4(1, 0.62f, 0.45f, 1),
                       "shown: normalised over queries (wrong axis) = %.6f", ci.shown);
  else if (v.stage == ViewStage::Weights && v.headAverage)
    ImGui::TextDisabled("shown: average over heads = %.6f", ci.shown);
  ImGui::TextDisabled("click: select row   wheel: zoom   drag: pan");
  ImGui::EndTooltip();
  if (s.ui.printHover) {
    std::string line = "hover: i=" + std::to_string(ci.i) + " j=" + std::to_string(ci.j);
    for (int k = 0; k < n; ++k) line += std::string(" | ") + lines[k];
    if (line != s.ui.lastHoverPrinted) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      s.ui.lastHoverPrinted = line;
    }
  }
}

// ---- pooled mode: the streamed pyramid (Session::pooledMode) ---------------------------------

// The shown tile as texels for the renderer: the max (or mean) of each pixel's cells, -inf where
// every cell is masked (hatched, as a masked cell).
void fillTexels(PooledViewState& pv, bool mean) {
  const PooledWeights& w = pv.tile->w;
  DisplayMatrix& m = pv.texels;
  const std::vector<float>& src = mean && !w.mean.empty() ? w.mean : w.max;
  m.rows = w.height;
  m.cols = w.width;
  m.values.resize(src.size());
  for (std::size_t n = 0; n < src.size(); ++n)
    m.values[n] = w.masked[n] ? -std::numeric_limits<float>::infinity() : src[n];
  ++m.version;
  pv.texelsFor = pv.tile->id;
  pv.texelsMean = mean;
}

// Draws the best tile the pyramid has for what is on screen at the pool factor the zoom needs
// (one texel at most a pixel); a coarser one stands in, scaled, while the worker refines.
bool drawPooledMatrix(AppState& s, const HeatmapLayout& L, const ValueMapping& mapping) {
  const ViewState& v = s.view;
  PooledViewState& pv = s.pooledView;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImGuiIO& io = ImGui::GetIO();
  const float fbScale = io.DisplayFramebufferScale.x > 0 ? io.DisplayFramebufferScale.x : 1.0f;
  const double cellsPerPx = 1.0 / (double(L.cellPx) * fbScale);
  const auto tRender = std::chrono::steady_clock::now();
  const PooledPyramid::Pick pick = s.session.pooled().pick(
      L.r0, std::max(L.r0 + 1, L.r1), L.c0, std::max(L.c0 + 1, L.c1),
      PooledPyramid::poolFor(cellsPerPx));
  pv.tile = pick.tile;
  pv.exact = pick.exact;
  s.view.geometry = {true, L.p0.x, L.p0.y, L.visW, L.visH, L.cellPx};
  if (!pv.tile) {
    dl->AddRectFilled(L.p0, L.p1, IM_COL32(28, 28, 33, 255));
    char msg[160];
    std::snprintf(msg, sizeof msg, "streaming the weights of %d \xc3\x97 %d cells\xe2\x80\xa6",
                  s.tq(), s.tk());
    const ImVec2 ts = ImGui::CalcTextSize(msg);
    dl->AddText(ImVec2(L.p0.x + (L.visW - ts.x) * 0.5f, L.p0.y + (L.visH - ts.y) * 0.5f), kTitle,
                msg);
    return true;
  }
  if (pv.texelsFor != pv.tile->id || pv.texelsMean != v.pooledMean) fillTexels(pv, v.pooledMean);
  s.pooledRenderer->upload(pv.texels);
  if (!s.pooledRenderer->error().empty()) {
    ImGui::TextColored(ImVec4(1, 0.45f, 0.38f, 1), "Cannot display: %s",
                       s.pooledRenderer->error().c_str());
    return false;
  }
  const PooledWeights& w = pv.tile->w;
  const float pool = float(w.poolQ);
  HeatmapRenderer::Target t;
  t.width = int(std::lround(L.visW * fbScale));
  t.height = int(std::lround(L.visH * fbScale));
  t.originX = (v.panX - float(w.c0)) / pool;  // in texels of the tile
  t.originY = (v.panY - float(w.r0)) / pool;
  t.cellsPerPixel = float(cellsPerPx) / pool;
  t.colormap = s.activeColormap();
  t.mapping = mapping;
  t.grid = v.showGrid && w.poolQ == 1;
  void* tex = s.pooledRenderer->render(t);
  s.timing.renderMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tRender).count();
  if (tex) dl->AddImage(tex, L.p0, L.p1, ImVec2(0, 1), ImVec2(1, 0));
  if (!pick.exact || s.session.pooled().busy()) {
    // A small "refining" badge in the matrix's top-right corner while the worker computes.
    const char* badge = "refining\xe2\x80\xa6";
    const ImVec2 ts = ImGui::CalcTextSize(badge);
    const ImVec2 b1(L.p1.x - 4 * L.sc, L.p0.y + 4 * L.sc + ts.y + 6 * L.sc);
    const ImVec2 b0(b1.x - ts.x - 12 * L.sc, L.p0.y + 4 * L.sc);
    dl->AddRectFilled(b0, b1, IM_COL32(20, 22, 28, 220), 4 * L.sc);
    dl->AddText(ImVec2(b0.x + 6 * L.sc, b0.y + 3 * L.sc), IM_COL32(255, 200, 90, 255), badge);
  }
  return true;
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

// The hovered pixel of the pooled view: which queries and keys it covers and the pooled value.
void drawPooledTooltip(AppState& s) {
  const PooledViewState& pv = s.pooledView;
  const ViewState& v = s.view;
  if (!pv.tile) return;
  const PooledWeights& w = pv.tile->w;
  const int i = v.hoverRow, j = v.hoverCol;
  if (i < w.r0 || i >= w.r1 || j < w.c0 || j >= w.c1) return;
  const int P = w.poolQ, y = (i - w.r0) / P, x = (j - w.c0) / P;
  const int a = w.r0 + y * P, b = std::min(w.r1, a + P);
  const int c = w.c0 + x * P, e = std::min(w.c1, c + P);
  const std::size_t n = w.at(y, x);
  const auto& qt = s.session.inputs().queryTokens;
  const auto& kt = s.session.inputs().keyTokens;
  char lines[6][256];
  int count = 0;
  if (P == 1) {
    std::snprintf(lines[count++], 256, "row i = %d   query '%s'", i,
                  i < int(qt.size()) ? qt[i].c_str() : "");
    std::snprintf(lines[count++], 256, "column j = %d   key '%s'", j,
                  j < int(kt.size()) ? kt[j].c_str() : "");
  } else {
    std::snprintf(lines[count++], 256, "queries i = %d..%d (%d rows)", a, b - 1, b - a);
    std::snprintf(lines[count++], 256, "keys j = %d..%d (%d columns)", c, e - 1, e - c);
  }
  if (w.masked[n])
    std::snprintf(lines[count++], 256, "every cell masked (weight 0)");
  else
    std::snprintf(lines[count++], 256, P == 1 ? "weight = %.6f" : "max weight = %.6f",
                  double(w.max[n]));
  if (!w.mean.empty() && P > 1)
    std::snprintf(lines[count++], 256, "mean weight = %.6g", double(w.mean[n]));
  std::snprintf(lines[count++], 256, "pooled %d \xc3\x97 %d cells a pixel, streamed%s", P, P,
                pv.exact ? "" : " (refining)");
  ImGui::BeginTooltip();
  for (int k = 0; k < count; ++k) ImGui::TextUnformatted(lines[k]);
  ImGui::TextDisabled("click: select row   wheel: zoom   drag: pan");
  ImGui::EndTooltip();
  if (s.ui.printHover) {
    std::string line = "hover: i=" + std::to_string(i) + " j=" + std::to_string(j);
    for (int k = 0; k < count; ++k) line += std::string(" | ") + lines[k];
    if (line != s.ui.lastHoverPrinted) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      s.ui.lastHoverPrinted = line;
    }
  }
}

}  // namespace

bool drawHeatmapPanel(AppState& s) {
  const DisplayMatrix& d = s.display();
  ViewState& v = s.view;
  v.geometry.valid = false;
  v.hoverRow = v.hoverCol = -1;
  if (d.rows == 0 || d.cols == 0) {
    ImGui::TextDisabled("No tokens: type some text in the Scene panel.");
    return false;
  }
  const LabelCache& labels = axisLabels(s);
  const HeatmapLayout L = layoutHeatmap(s, labels);
  const ValueMapping mapping = currentMapping(s);
  if (d.pooled ? !drawPooledMatrix(s, L, mapping) : !drawMatrix(s, L, mapping)) return false;
  bool hovered = false;
  const bool changed = handleHeatmapInput(s, L, hovered);
  drawOverlays(s, L);
  drawMaskOverlays(s, ImGui::GetWindowDrawList());  // block tiles, document boundaries
  if (d.pooled && L.cellPx < L.lineH + 1)
    drawIndexTicks(s, L);  // token labels only once a cell is tall enough to hold one
  else
    drawAxisLabels(s, L, labels);
  drawAxisTitles(s, L);
  const float xRight = drawRowSumStrip(s, L);
  drawColumnSumStrip(s, L);
  const float barH = std::max(80.0f * L.sc, std::min(L.visH, 360 * L.sc) - L.lineH * 2);
  drawColourBar(s, ImGui::GetWindowDrawList(), ImVec2(xRight + 4 * L.sc, L.p0.y), L.barW, barH,
                mapping);
  if (hovered && v.hoverRow >= 0) {
    if (d.pooled)
      drawPooledTooltip(s);
    else
      drawCellTooltip(s);
  }
  ImGui::SetCursorScreenPos(ImVec2(L.origin.x, L.origin.y + L.avail.y));
  return changed;
}

}  // namespace attnviz::gui
