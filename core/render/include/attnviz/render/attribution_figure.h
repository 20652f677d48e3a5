// attnviz core: the attribution figure (`attnviz attribute --png`, the GUI's attribution export):
// a labelled matrix of signed values (layers x heads, or layers x positions) in diverging colours
// with 0 in the middle, a colour bar, a title and captions. CPU only, no GL, no window.
#pragma once

#include "attnviz/render/raster.h"  // Image, writePng

#include <string>
#include <vector>

namespace attnviz {

// Cells not computed (NaN: a cancelled sweep) are drawn in this pale grey.
constexpr RGBA8 kNotComputedColor{214, 217, 228, 255};

struct AttributionFigure {
  int rows = 0, cols = 0;
  std::vector<float> values;  // [rows, cols], row-major; row 0 at the top; NaN: not computed
  std::string title;          // above the figure ("" for none)
  std::string rowTitle = "layer", colTitle = "head";  // axis titles
  std::vector<std::string> rowLabels, colLabels;      // empty: 0, 1, 2, ...
  std::string valueTitle;                             // the colour bar's title
  std::vector<std::string> captions;                  // lines under the figure
  // Colours map [-range, range] through the diverging colormap, 0 at the centre; 0 = the
  // largest finite |value| (1 when every value is 0).
  float range = 0.0f;
  bool numbers = true;  // each cell's value written in it where the cell is large enough
  int cell = 0;         // pixels per cell; 0 = chosen from the shape (6..48)
  std::string fontPath;  // empty: as the export (ATTNVIZ_FONT, fontconfig, the built-in font)
  int maxSide = 16384;   // UsageError past this many pixels a side
  bool vector = false;   // also record the figure for SVG and PDF (Image::vector)
};

// Renders the figure. Throws InputError when values does not hold rows x cols values (or the
// shape is empty), UsageError when the image would pass maxSide.
Image renderAttributionFigure(const AttributionFigure& f);

}  // namespace attnviz
