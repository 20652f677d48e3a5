// attnviz panel: the heatmap's tooltips (heatmap_parts.h): the hovered cell's, and in pooled
// mode (long contexts) the hovered pixel's, with the pooled matrix itself drawn from the
// streamed pyramid.
#include "gui/heatmap_renderer.h"
#include "panels/heatmap_parts.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace attnviz::gui::heatmap {

// The hovered cell's tooltip: indices, tokens, score, logit, weight, row sum (the session's
// cellInfo, core's formula); --hover-cell prints it.
void drawCellTooltip(AppState& s) {
  const DisplayMatrix& d = s.display();
  const ViewState& v = s.view;
  const CellInfo ci = s.session.cellInfo(v.hoverRow, v.hoverCol);
  char lines[6][256];
  int n = 0;
  // An encoder's pair: which text each token is from (and whether it is a special token).
  auto role = [&](int full) {
    const std::string r = encoderTokenRole(s, full);
    return r.empty() ? r : "   (" + r + ")";
  };
  const int rowLine = n, colLine = n + 1;
  std::snprintf(lines[n++], 256, "row i = %d   query '%s'%s", ci.i, ci.queryToken.c_str(),
                role(ci.i).c_str());
  if (d.columnsAreKeys) {
    std::snprintf(lines[n++], 256, "column j = %d   key '%s'%s", ci.j, ci.keyToken.c_str(),
                  role(ci.j).c_str());
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
                  v.hoverRow >= 0 && v.hoverRow < d.rows && d.rowFullyMasked[v.hoverRow]
                      ? " (fully masked row)"
                      : "");
  } else {
    std::snprintf(lines[n++], 256, "value dim %d: o = %.4f", ci.j, ci.shown);
  }
  ImGui::BeginTooltip();
  for (int k = 0; k < n; ++k) {
    const unsigned int c = k == rowLine ? encoderTokenColour(s, ci.i)
                           : k == colLine && d.columnsAreKeys ? encoderTokenColour(s, ci.j)
                                                              : 0u;
    if (c != 0)
      ImGui::TextColored(ImColor(c), "%s", lines[k]);
    else
      ImGui::TextUnformatted(lines[k]);
  }
  if (s.session.block().active() && s.session.block().renormalise && d.isWeights &&
      !v.wrongAxis)
    ImGui::TextDisabled("shown: renormalised over the keys shown (special tokens hidden) = %.6f",
                        ci.shown);
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

namespace {

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

}  // namespace

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

}  // namespace attnviz::gui::heatmap
