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
  const DisplayMatrix& d = s.display;
  const float fontSize = ImGui::GetFontSize();
  if (c.inputsVersion == s.compute.inputsVersion && c.fontSize == fontSize && c.rows == d.rows &&
      c.cols == d.cols && c.columnsAreKeys == d.columnsAreKeys)
    return c;
  const auto& q = s.scene.inputs.queryTokens;
  const auto& k = s.scene.inputs.keyTokens;
  measureLabels(c.rowLabels, d.rows,
                [&](int i) { return i < int(q.size()) ? q[i] : std::string(); });
  if (d.columnsAreKeys)
    measureLabels(c.colLabels, d.cols,
                  [&](int j) { return j < int(k.size()) ? k[j] : std::string(); });
  else
    measureLabels(c.colLabels, d.cols, [](int j) { return "d" + std::to_string(j); });
  c.inputsVersion = s.compute.inputsVersion;
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
  const DisplayMatrix& d = s.display;
  if (stageIsScore(s.view.stage)) {
    const float mag = std::max({std::fabs(d.minFinite), std::fabs(d.maxFinite), 1e-6f});
    m.lo = -mag;
    m.hi = mag;
    m.scale = ColorScale::Linear;
  } else {
    m.lo = 0.0f;
    m.hi = s.view.autoRange ? std::max(d.maxFinite, 1e-6f) : 1.0f;
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

}  // namespace

bool drawHeatmapPanel(AppState& s) {
  bool changed = false;
  DisplayMatrix& d = s.display;
  ViewState& v = s.view;
  ImGuiIO& io = ImGui::GetIO();
  const float sc = s.ui.uiScale;
  const float lineH = ImGui::GetFontSize();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  v.geometry.valid = false;
  v.hoverRow = v.hoverCol = -1;
  if (d.rows == 0 || d.cols == 0) {
    ImGui::TextDisabled("No tokens: type some text in the Scene panel.");
    return false;
  }

  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();

  // Margins: label widths over every row and column, so they do not jump while panning.
  const LabelCache& labels = axisLabels(s);
  float rowLabelW = labels.rowLabels.maxWidth, colLabelH = labels.colLabels.maxWidth;
  const float indexW = ImGui::CalcTextSize(std::to_string(d.rows - 1).c_str()).x;
  const float colIndexW = ImGui::CalcTextSize(std::to_string(d.cols - 1).c_str()).x;
  rowLabelW = std::min(rowLabelW, 130 * sc) + indexW + 18 * sc;
  colLabelH = std::min(colLabelH, 120 * sc) + colIndexW + 12 * sc;
  const bool showSums = d.isWeights;
  const float stripW = showSums ? 44 * sc : 0;
  const float barW = 16 * sc, barLabelsW = 64 * sc;
  const float marginL = lineH + 8 * sc + rowLabelW;
  const float marginT = lineH + 6 * sc + colLabelH;
  const float marginR = (showSums ? stripW + 8 * sc : 0) + 16 * sc + barW + barLabelsW;
  const float colStripH = (showSums && v.wrongAxis) ? 22 * sc + lineH : 0;
  const float marginB = colStripH + 4 * sc;
  const float areaW = std::max(40.0f, avail.x - marginL - marginR);
  const float areaH = std::max(40.0f, avail.y - marginT - marginB);

  // Cell size: fit the whole matrix at zoom 1; whole pixels when cells are big enough so that
  // cell edges fall on pixel edges.
  float fit = std::min(areaW / d.cols, areaH / d.rows);
  fit = std::min(fit, 72 * sc);
  if (fit >= 3) fit = std::floor(fit);
  v.zoom = std::clamp(v.zoom, 1.0f, std::max(1.0f, 160 * sc / fit));
  float cellPx = fit * v.zoom;
  if (cellPx >= 3) cellPx = std::floor(cellPx);
  const float visW = std::floor(std::min(areaW, d.cols * cellPx));
  const float visH = std::floor(std::min(areaH, d.rows * cellPx));
  v.panX = std::clamp(v.panX, 0.0f, std::max(0.0f, d.cols - visW / cellPx));
  v.panY = std::clamp(v.panY, 0.0f, std::max(0.0f, d.rows - visH / cellPx));
  const ImVec2 p0(std::floor(origin.x + marginL), std::floor(origin.y + marginT));
  const ImVec2 p1(p0.x + visW, p0.y + visH);

  // The matrix itself.
  const auto tUpload = std::chrono::steady_clock::now();
  s.renderer->upload(d);
  if (!s.renderer->error().empty()) {
    // Larger than this GL's textures: said here, in place of the matrix.
    ImGui::TextColored(ImVec4(1, 0.45f, 0.38f, 1), "Cannot display: %s",
                       s.renderer->error().c_str());
    return false;
  }
  const auto tRender = std::chrono::steady_clock::now();
  HeatmapRenderer::Target t;
  const float fbScale = io.DisplayFramebufferScale.x > 0 ? io.DisplayFramebufferScale.x : 1.0f;
  t.width = int(std::lround(visW * fbScale));
  t.height = int(std::lround(visH * fbScale));
  t.originX = v.panX;
  t.originY = v.panY;
  t.cellsPerPixel = 1.0f / (cellPx * fbScale);
  t.colormap = s.activeColormap();
  t.mapping = currentMapping(s);
  t.grid = v.showGrid;
  void* tex = s.renderer->render(t);
  const auto tDone = std::chrono::steady_clock::now();
  s.timing.uploadMs = std::chrono::duration<double, std::milli>(tRender - tUpload).count();
  s.timing.renderMs = std::chrono::duration<double, std::milli>(tDone - tRender).count();
  if (tex) dl->AddImage(tex, p0, p1, ImVec2(0, 1), ImVec2(1, 0));
  v.geometry = {true, p0.x, p0.y, visW, visH, cellPx};

  // Visible range and how often to label.
  const int r0 = std::max(0, int(std::floor(v.panY)));
  const int r1 = std::min(d.rows, int(std::ceil(v.panY + visH / cellPx)));
  const int c0 = std::max(0, int(std::floor(v.panX)));
  const int c1 = std::min(d.cols, int(std::ceil(v.panX + visW / cellPx)));
  auto rowY = [&](float r) { return p0.y + (r - v.panY) * cellPx; };
  auto colX = [&](float c) { return p0.x + (c - v.panX) * cellPx; };
  const int rowStep = std::max(1, int(std::ceil((lineH + 1) / cellPx)));
  const int colStep = rowStep;

  // Interaction: one invisible button over the matrix.
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##heatmap", ImVec2(std::max(1.0f, visW), std::max(1.0f, visH)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  const bool hovered = ImGui::IsItemHovered();
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
    paintCell(s, v.hoverRow, v.hoverCol, io.KeyShift);
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

  // Block tiles and document boundaries (mask_kinds_panel.cpp); a click on the key axis
  // toggles a document boundary while they are edited.
  drawMaskOverlays(s, dl);
  changed |= handleKeyAxisClick(s);

  // Overlays on the matrix, clipped to it.
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

  // Row labels (queries) on the left: "index token", right-aligned.
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

  // Axis titles.
  const char* keysTitle =
      d.columnsAreKeys ? "Keys (columns)   j \xe2\x86\x92" : "Value dimensions (columns)";
  const float ktw = ImGui::CalcTextSize(keysTitle).x;
  dl->AddText(ImVec2(p0.x + std::max(0.0f, (visW - ktw) * 0.5f), origin.y), kTitle, keysTitle);
  const char* queriesTitle = "\xe2\x86\x90 i   Queries (rows)";
  const float qtw = ImGui::CalcTextSize(queriesTitle).x;
  addVerticalText(dl, origin.x, p0.y + std::max(qtw, (visH + qtw) * 0.5f), kTitle, queriesTitle);

  // Row-sum strip: every row of the weights sums to 1 (fully masked rows are flagged).
  float xRight = p1.x + 8 * sc;
  if (showSums) {
    const float sx0 = xRight, sx1 = xRight + stripW;
    dl->AddText(ImVec2(sx0 + 2, p0.y - lineH - 2), kTitle, "\xce\xa3 row");
    dl->PushClipRect(ImVec2(sx0, p0.y), ImVec2(sx1, p1.y), true);
    if (cellPx >= 1.0f) {
      for (int i = r0; i < r1; ++i) {
        const ImU32 col = sumColour(d.rowSums[i], d.rowFullyMasked[i]);
        dl->AddRectFilled(ImVec2(sx0, rowY(float(i))), ImVec2(sx1, rowY(float(i + 1))), col);
        if (cellPx >= lineH + 2) {
          const std::string txt =
              d.rowFullyMasked[i] ? "0 \xe2\x88\x85" : fmt("%.2f", d.rowSums[i]);
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
        dl->AddRectFilled(ImVec2(sx0, p0.y + y), ImVec2(sx1, p0.y + y + 1),
                          sumColour(worst, masked));
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
  }

  // Column-sum strip (only in the wrong-axis teaching mode, where columns are what sum to 1).
  if (showSums && v.wrongAxis) {
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

  // Colour bar with ticks and the masked swatch.
  const float barH = std::max(80.0f * sc, std::min(visH, 360 * sc) - lineH * 2);
  drawColourBar(s, dl, ImVec2(xRight + 4 * sc, p0.y), barW, barH, t.mapping);

  // Tooltip for the hovered cell.
  if (hovered && v.hoverRow >= 0) {
    const CellInfo ci = cellInfo(s, v.hoverRow, v.hoverCol);
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

  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + avail.y));
  return changed;
}

}  // namespace attnviz::gui
