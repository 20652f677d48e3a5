// attnviz core: the layers x heads figure (`attnviz export --grid`, the app's Export dialog on a
// model): every attention site of a pass as a row of small weights heatmaps, one per head, with
// row and head labels, a colour bar, a title and captions. The same layout feeds the PNG, the
// SVG and the PDF. CPU only, no GL, no window.
#pragma once

#include "attnviz/engine/tensor.h"
#include "attnviz/render/colormap.h"
#include "attnviz/render/raster.h"  // Image

#include <string>
#include <vector>

namespace attnviz {

struct HeadGridFigure {
  // One per row (an attention site): its weights [H, n_q, n_k], possibly already max-pooled
  // (a pass's thumbnails); a cell of exactly 0 is a block where every weight is masked.
  std::vector<const Tensor3*> rows;
  std::vector<std::string> rowLabels;  // "L0", "L3 local (window 4)", "enc L1", ...
  // How many tokens a side of a cell of `rows` already covers (1: unpooled), per row; empty: 1.
  std::vector<int> rowPool;
  // [row][head] != 0: the head is ablated in that site (drawn with a red frame); may be empty.
  std::vector<std::vector<char>> ablated;
  int kvGroup = 1;  // > 1: query heads sharing a KV head are labelled "kv g" above the grid
  std::string title;
  std::vector<std::string> captions;  // lines under the figure (the figure adds its own first)
  ColormapId colormap = ColormapId::Viridis;
  // Pixels a side of one head's panel; 0: from the number of panels (the whole figure stays
  // within kVectorMaxCells cells, 16..96 pixels a panel).
  int panelPx = 0;
  std::string fontPath;  // empty: as the export (ATTNVIZ_FONT, fontconfig, the built-in font)
  int maxSide = 16384;   // UsageError past this many pixels a side
  bool vector = false;   // also record the figure for SVG and PDF (Image::vector)
};

// The panel side renderHeadGrid uses for `panels` heads in all when panelPx is 0.
int headGridPanelPx(long panels);

// Renders the figure. Each panel max-pools its head's weights further by the smallest whole
// factor that fits panelPx (a block's largest weight; masked only when every weight of the block
// is), each cell one rectangle. Throws InputError for no rows, a null or empty tensor or label
// counts that do not match; UsageError when the image would pass maxSide.
Image renderHeadGrid(const HeadGridFigure& f);

}  // namespace attnviz
