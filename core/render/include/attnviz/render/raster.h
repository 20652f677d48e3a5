// attnviz core: the CPU heatmap rasterizer behind PNG export (no GL, no window).
#pragma once

#include "attnviz/engine/blocks.h"
#include "attnviz/render/colormap.h"
#include "attnviz/render/image.h"
#include "attnviz/engine/engine.h"
#include "attnviz/engine/streaming.h"
#include "attnviz/engine/tensor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

// The FlashAttention walkthrough's tiles over one head (flash_figure.h fills it): the B_r x B_c
// tile grid with each tile's state. Cells of unvisited tiles are kFlashUnvisitedColor whatever
// their value; a skipped tile (every cell masked) is crossed and, where it fits, labelled
// "skipped"; the current step's tile is outlined in kFlashCurrentColor.
enum class FlashTile : std::uint8_t { Unvisited, Visited, Skipped };
constexpr RGBA8 kFlashUnvisitedColor{214, 217, 228};  // pale blue-grey: not computed yet
constexpr RGBA8 kFlashCurrentColor{235, 30, 70};      // crimson outline: this step's tile
constexpr RGBA8 kFlashSkippedColor{255, 150, 20};     // orange cross: skipped (no work)
constexpr RGBA8 kFlashGridColor{255, 255, 255};       // tile borders
struct FlashOverlay {
  int blockRows = 0, blockKeys = 0;  // B_r x B_c; 0: no overlay
  int tileRows = 0, tileCols = 0;
  std::vector<FlashTile> tiles;          // [tileRows, tileCols], row-major
  int currentRow = -1, currentCol = -1;  // the current step's tile; -1: none
  std::vector<std::string> captions;     // lines under a labelled figure
  bool on() const { return blockRows > 0 && blockKeys > 0; }
  FlashTile at(int r, int c) const { return tiles[std::size_t(r) * tileCols + c]; }
};

// What the cells show: the softmax weights, the logits, or a stage a model computes from its
// pass (ExportData::stageValues): the value-weighted weights A_ij * |v_j W_O^h| of each head, or
// the attention rollout up to a layer (one matrix, the heads mixed). The last two map [0, m]
// through the colormap, m the largest value among the drawn heads.
enum class ExportStage { Weights, Scores, ValueWeighted, Rollout };
// True for the stages whose values are ExportData::stageValues.
inline bool exportStageFromModel(ExportStage s) {
  return s == ExportStage::ValueWeighted || s == ExportStage::Rollout;
}

struct ExportOptions {
  ExportStage stage = ExportStage::Weights;
  int head = 0;            // -1: every head as a grid of panels
  bool bare = false;       // only the cells: exactly T_k*cell x T_q*cell pixels, row 0 at the top
  int cell = 0;            // pixels per cell; 0 = chosen from targetWidth
  int targetWidth = 1200;  // used when cell == 0
  ColormapId colormap = ColormapId::Viridis;
  bool labels = true;   // token labels and axis titles (ignored when bare)
  std::string title;    // overrides the generated title when not empty
  int maxSide = 16384;  // refuse (UsageError) images larger than this on a side
  // TrueType font for the text; empty = $ATTNVIZ_FONT, then fontconfig's sans-serif, then the
  // built-in stroke font. A path that does not load also falls back to the built-in font.
  std::string fontPath;
  int gridColumns = 0;  // panels per row when head == -1; 0 = chosen from the shape
  // Block-sparsity overlay, one per head of the data (empty: none). Each tile is outlined,
  // inside its cells, in blockColor(kind) (bare exports too); a labelled figure says under it
  // what share of the dense work a tiled kernel does.
  std::vector<BlockSparsity> blocks;
  // The FlashAttention tile overlay (one head, the weights stage); off unless on().
  FlashOverlay flash;
  // Also record the figure for SVG and PDF (Image::vector): the PNG's layout, except that a
  // figure over kVectorMaxCells cells, or one the PNG max-pools, is laid out again max-pooled
  // to fit that many and says so in its title. The PNG's pixels do not change.
  bool vector = false;
};

struct ExportData {
  const Tensor3* weights = nullptr;  // [H, T_q, T_k]
  const Tensor3* logits = nullptr;   // [H, T_q, T_k]; -inf marks masked cells (required but
                                     // for the rollout, whose one matrix mixes the heads)
  // The value-weighted stage [H, T_q, T_k] (-inf where masked) or the rollout [1, T_q, T_k].
  const Tensor3* stageValues = nullptr;
  std::vector<std::string> queryTokens, keyTokens;  // may be empty: indices are used
  std::string description;                          // e.g. "causal + window:4, tau = 1" for titles
  // The axis titles; empty: "Queries" and "Keys" (an encoder-decoder's cross site names its
  // rows the target and its columns the source).
  std::string queryAxis, keyAxis;

  // Long contexts (weights only): when `weights` is null and `pooled` is set, the weights are
  // never held whole. The figure asks for each drawn head pooled at the grid it laid out
  // (1 x 1 when a cell gets pixels of its own) and draws the max-pool as it would from the
  // whole matrix: the same pixels. `streamedDims` gives the shape, `streamedAnyMasked` whether
  // the mask hides any cell (for the legend).
  std::function<PooledWeights(int head, int poolQ, int poolK)> pooled;
  Dims streamedDims;
  bool streamedAnyMasked = false;
};

// Renders the figure. Throws UsageError for a head out of range, --bare with every head, or an
// oversize image (checked before any pixel is allocated); InputError for missing data.
// Colours: weights map t = w straight through colormapLookup; scores (logits) map linearly from
// [-m, m] with m the largest finite |logit| among the drawn heads, so 0 sits at the centre.
// Masked cells (logit -inf) are kMaskedColor (hatched with kMaskedHatchColor when labelled and
// cells are large enough); non-finite values are kNonFiniteColor.
// Labelled with cell == 0: when the cells cannot get a pixel each within targetWidth (or the
// heatmap would pass 1.5 widths in height), the heatmap is max-pooled: one pixel per f x f block
// (an axis under 8 pixels is not pooled), showing the largest unmasked value of the block
// (weights: max weight; scores: max finite logit), kNonFiniteColor if any unmasked cell is NaN
// or infinite, kMaskedColor only when every cell is masked; a caption under the figure says
// "max-pooled: 1 px = f keys x f queries". Bare exports and an explicit cell never pool.
Image renderExport(const ExportData& data, const ExportOptions& opt);

// Pixels of an Image, shared by the figures: a filled rectangle (clipped to the image), and one
// pixel blended over what is there with `alpha` in 0..255.
void fillRect(Image& im, long x, long y, long w, long h, RGBA8 c);
void blendPixel(Image& im, long x, long y, RGBA8 c, int alpha);

// A file name that says what the figure is, for the GUI's save dialog:
// "attnviz_<title>_head3_weights.png", "..._all-heads_scores.png", "..._head0_weights_bare.png".
// The title is reduced to lowercase ASCII letters, digits and '-' (at most 40 characters).
std::string defaultExportFileName(const std::string& sceneTitle, const ExportOptions& opt);

// Encodes with stb_image_write and writes atomically. Throws InputError naming the path.
void writePng(const std::string& path, const Image& img);

}  // namespace attnviz
