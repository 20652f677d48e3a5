// attnviz core: a rendered figure in memory (RGBA8, row 0 at the top), what the rasterizer and
// every figure return and what PNG export writes; apart from raster.h so that a reader of pixels
// needs no rasterizer.
#pragma once

#include "attnviz/render/colormap.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace attnviz {

struct VectorFigure;  // vector_figure.h

struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgba;  // width * height * 4, row 0 at the top
  // Where the (first) heatmap landed: its top-left cell's corner in pixels, and pixels per cell
  // (0 when max-pooled), so a viewer can map a pixel back to a cell.
  int heatX = 0, heatY = 0, cellPx = 0;
  // The same figure for SVG and PDF (vector_figure.h), when ExportOptions::vector asked for it.
  std::shared_ptr<const struct VectorFigure> vector;
  RGBA8 pixel(int x, int y) const;
};

}  // namespace attnviz
