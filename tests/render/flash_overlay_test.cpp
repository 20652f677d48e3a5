// The FlashAttention tile overlay drawn by renderExport: hand-made weights, logits and tile states,
// so every cell's expected colour is known without the walkthrough or the engine.
#include "export_util.h"

#include "attnviz/render/raster.h"
#include "attnviz/engine/tensor.h"

#include <limits>

namespace attnviz::exporttest {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One head, T x T, causal; weights spread over [0, 1]. Tiles of 4 x 3 over T = 10 (3 x 4 tiles,
// the last row and column short): rows 0-3 then 4-7 done, current tile (2, 1), the rest unvisited;
// tiles wholly above the diagonal skipped.
struct Case {
  static constexpr int T = 10, br = 4, bc = 3;
  Tensor3 weights{1, T, T}, logits{1, T, T};
  FlashOverlay flash;
  Case() {
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) {
        weights.at(0, i, j) = j > i ? 0.0f : float((i * 7 + j * 3) % 11) / 10.0f;
        logits.at(0, i, j) = j > i ? kNegInf : 0.5f;
      }
    flash.blockRows = br, flash.blockKeys = bc;
    flash.tileRows = 3, flash.tileCols = 4;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c)
        flash.tiles.push_back(c * bc > std::min(T, (r + 1) * br) - 1 ? FlashTile::Skipped
                              : r * 4 + c <= 2 * 4 + 1               ? FlashTile::Visited
                                                                     : FlashTile::Unvisited);
    flash.currentRow = 2, flash.currentCol = 1;
  }
  FlashTile tileOf(int i, int j) const { return flash.at(i / br, j / bc); }
};

TEST(FlashOverlay, BareCellsShowVisitedWeightsGreyUnvisitedTilesAndTheCurrentOutline) {
  const Case c;
  ExportData data;
  data.weights = &c.weights;
  data.logits = &c.logits;
  ExportOptions o;
  o.bare = true;
  o.cell = 12;
  o.flash = c.flash;
  const Image img = renderExport(data, o);
  ASSERT_EQ(img.width, Case::T * 12);
  EXPECT_EQ(img.cellPx, 12);
  for (int i = 0; i < Case::T; ++i)
    for (int j = 0; j < Case::T; ++j) {
      const RGBA8 px = img.pixel(j * 12 + 6, i * 12 + 6);
      switch (c.tileOf(i, j)) {
        case FlashTile::Unvisited:
          EXPECT_EQ(px, kFlashUnvisitedColor) << i << "," << j;
          break;
        case FlashTile::Visited:
          EXPECT_EQ(
              px, j > i ? kMaskedColor : colormapLookup(ColormapId::Viridis, c.weights.at(0, i, j)))
              << i << "," << j;
          break;
        case FlashTile::Skipped:
          break;  // crossed: checked below
      }
    }
  // The skipped tile (0, 2) (keys 6-8 after rows 0-3) is crossed corner to corner: its top-left
  // pixel is orange.
  ASSERT_EQ(int(c.flash.at(0, 2)), int(FlashTile::Skipped));
  EXPECT_EQ(img.pixel(6 * 12, 0), kFlashSkippedColor);
  // The current tile (2, 1): rows 8-9, keys 3-5, outlined inside its cells.
  EXPECT_EQ(img.pixel(3 * 12 + 1, 8 * 12 + 1), kFlashCurrentColor);
  EXPECT_EQ(img.pixel(6 * 12 - 2, 10 * 12 - 2), kFlashCurrentColor);
  // White borders between tiles: the first pixel column of key block 1 in a visited row.
  EXPECT_EQ(img.pixel(3 * 12, 5 * 12 + 6), kFlashGridColor);
}

TEST(FlashOverlay, ALabelledFigureSaysWhereItsCellsAreAndCarriesTheCaptions) {
  Case c;
  c.flash.captions = {"a caption under the figure"};
  ExportData data;
  data.weights = &c.weights;
  data.logits = &c.logits;
  ExportOptions o;
  o.cell = 16;
  o.flash = c.flash;
  const Image img = renderExport(data, o);
  ASSERT_EQ(img.cellPx, 16);
  // Cell (0, 0) is visited: its weight's colour at the reported place; cell (9, 9) is unvisited.
  EXPECT_EQ(img.pixel(img.heatX + 8, img.heatY + 8),
            colormapLookup(ColormapId::Viridis, c.weights.at(0, 0, 0)));
  EXPECT_EQ(img.pixel(img.heatX + 9 * 16 + 8, img.heatY + 9 * 16 + 8), kFlashUnvisitedColor);
  // The caption adds a line: the figure is taller than without it.
  c.flash.captions.clear();
  o.flash = c.flash;
  EXPECT_GT(img.height, renderExport(data, o).height);
}

TEST(FlashOverlay, IsRefusedOverScoresOrTilesThatDoNotFit) {
  Case c;
  ExportData data;
  data.weights = &c.weights;
  data.logits = &c.logits;
  ExportOptions o;
  o.flash = c.flash;
  o.stage = ExportStage::Scores;
  EXPECT_THROW(renderExport(data, o), UsageError);
  o.stage = ExportStage::Weights;
  o.flash.tileCols = 3;
  EXPECT_THROW(renderExport(data, o), InputError);
}

}  // namespace
}  // namespace attnviz::exporttest
