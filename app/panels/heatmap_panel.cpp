// attnviz panel: the heatmap. Rows are queries (labels left), columns are keys (labels on top),
// row 0 at the top. The matrix is one texture coloured in a fragment shader; ImGui draws only
// labels, strips and overlays around it (heatmap_axes.cpp), and the tooltips
// (heatmap_tooltips.cpp, with pooled mode's matrix). This file: the layout, the cell matrix and
// the input over it.
#include "gui/heatmap_renderer.h"
#include "panels/heatmap_parts.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace attnviz::gui {

namespace heatmap {

namespace {

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

// An encoder's special tokens greyed out: their rows and columns under a translucent shade
// (the cells stay readable; the tooltip still gives their numbers).
void drawSpecialTokenShade(const AppState& s, const HeatmapLayout& L) {
  const ModelState& m = s.model;
  const DisplayMatrix& d = s.display();
  if (!m.source || m.special != int(SpecialTokens::Grey) || d.pooled) return;
  const TokenSegments& seg = m.source->segments();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(L.p0, L.p1, true);
  const ImU32 shade = IM_COL32(24, 24, 28, 170);
  auto special = [&](int full) {
    return full >= 0 && full < seg.size() && seg.special[std::size_t(full)];
  };
  const ViewState& v = s.view;
  for (int i = L.r0; i < L.r1; ++i)
    if (special(d.fullRow(i))) {
      const float y = L.p0.y + (i - v.panY) * L.cellPx;
      dl->AddRectFilled(ImVec2(L.p0.x, y), ImVec2(L.p1.x, y + L.cellPx), shade);
    }
  if (d.columnsAreKeys)
    for (int j = L.c0; j < L.c1; ++j)
      if (special(d.fullCol(j)) ) {
        const float x = L.p0.x + (j - v.panX) * L.cellPx;
        dl->AddRectFilled(ImVec2(x, L.p0.y), ImVec2(x + L.cellPx, L.p1.y), shade);
      }
  dl->PopClipRect();
}

// The axis labels of the display matrix, rebuilt only when the tokens, the columns' meaning or
// the font size changed.
const LabelCache& axisLabels(AppState& s) {
  LabelCache& c = s.labels;
  const DisplayMatrix& d = s.display();
  const float fontSize = ImGui::GetFontSize();
  if (c.inputsVersion == s.session.inputsVersion() && c.fontSize == fontSize && c.rows == d.rows &&
      c.cols == d.cols && c.columnsAreKeys == d.columnsAreKeys && c.rowIndex == d.rowIndex &&
      c.colIndex == d.colIndex)
    return c;
  const auto& q = s.session.inputs().queryTokens;
  const auto& k = s.session.inputs().keyTokens;
  // A block view (an encoder's slice, its special tokens hidden) shows some rows and columns.
  measureLabels(c.rowLabels, d.rows, [&](int i) {
    const int f = d.fullRow(i);
    return f >= 0 && f < int(q.size()) ? q[f] : std::string();
  });
  if (d.columnsAreKeys)
    measureLabels(c.colLabels, d.cols, [&](int j) {
      const int f = d.fullCol(j);
      return f >= 0 && f < int(k.size()) ? k[f] : std::string();
    });
  else
    measureLabels(c.colLabels, d.cols, [](int j) { return "d" + std::to_string(j); });
  c.inputsVersion = s.session.inputsVersion();
  c.fontSize = fontSize;
  c.rows = d.rows;
  c.cols = d.cols;
  c.rowIndex = d.rowIndex;
  c.colIndex = d.colIndex;
  c.columnsAreKeys = d.columnsAreKeys;
  return c;
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
    // The value-weighted stage has no natural top (a norm): always on [0, its largest].
    const bool autoRange = s.view.autoRange || (d.pooled && s.view.pooledMean) ||
                           (s.view.stage == ViewStage::ValueWeighted &&
                            s.session.stageAvailable(ViewStage::ValueWeighted));
    m.hi = autoRange ? std::max(d.maxFinite, 1e-6f) : 1.0f;
    m.scale = s.view.scale;
    m.gamma = s.view.gamma;
    m.logFloor = s.view.logFloor;
  }
  return m;
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

}  // namespace

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

}  // namespace heatmap

bool drawHeatmapPanel(AppState& s) {
  using namespace heatmap;
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
  drawSpecialTokenShade(s, L);
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
