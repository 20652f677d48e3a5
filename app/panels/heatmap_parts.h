// attnviz panel internals: what the heatmap's three files share, and nothing else should use.
//   heatmap_panel.cpp     the layout, the cell matrix, mouse and keys, drawHeatmapPanel
//   heatmap_axes.cpp      axis labels and titles, index ticks, the row and column sum strips,
//                         the selected-row and hovered-cell overlays, the colour bar
//   heatmap_tooltips.cpp  the cell tooltip, and pooled mode's matrix and tooltip
#pragma once

#include "panels/panels.h"

#include <imgui.h>

namespace attnviz::gui::heatmap {

inline constexpr ImU32 kHighlight = IM_COL32(255, 170, 30, 255);  // the selected row
inline constexpr ImU32 kHover = IM_COL32(255, 255, 255, 230);
inline constexpr ImU32 kLabel = IM_COL32(205, 208, 215, 255);
inline constexpr ImU32 kIndex = IM_COL32(120, 124, 135, 255);
inline constexpr ImU32 kTitle = IM_COL32(235, 236, 240, 255);
inline constexpr ImU32 kSumGood = IM_COL32(70, 165, 95, 255);
inline constexpr ImU32 kSumBad = IM_COL32(215, 70, 60, 255);

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

// heatmap_panel.cpp
HeatmapLayout layoutHeatmap(AppState& s, const LabelCache& labels);

// heatmap_axes.cpp
void drawColourBar(AppState& s, ImDrawList* dl, ImVec2 p0, float w, float h,
                   const ValueMapping& m);
void drawOverlays(const AppState& s, const HeatmapLayout& L);
void drawAxisLabels(const AppState& s, const HeatmapLayout& L, const LabelCache& labels);
void drawAxisTitles(const AppState& s, const HeatmapLayout& L);
float drawRowSumStrip(const AppState& s, const HeatmapLayout& L);  // returns the colour bar's x
void drawColumnSumStrip(const AppState& s, const HeatmapLayout& L);
void drawIndexTicks(const AppState& s, const HeatmapLayout& L);

// heatmap_tooltips.cpp
void drawCellTooltip(AppState& s);
bool drawPooledMatrix(AppState& s, const HeatmapLayout& L, const ValueMapping& mapping);
void drawPooledTooltip(AppState& s);

}  // namespace attnviz::gui::heatmap
