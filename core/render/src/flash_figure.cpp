// One FlashAttention step drawn by the export rasterizer: the weights computed so far, with the
// tiles' states on top, so the GUI, Ctrl+S and `attnviz export --flash-step` share one picture.
#include "attnviz/render/flash_figure.h"

#include <cstdio>

namespace attnviz {

std::string flashStepTitle(const FlashWalkthrough& w) {
  if (w.step() < 0)
    return "FlashAttention: before the first step (" + std::to_string(w.steps()) + " steps)";
  const FlashWalkthrough::Tile t = w.current();
  return "FlashAttention step " + std::to_string(w.step() + 1) + "/" + std::to_string(w.steps()) +
         ": query block " + std::to_string(t.queryBlock) + ", key block " +
         std::to_string(t.keyBlock) + (t.skipped ? " (skipped)" : "");
}

FlashOverlay flashOverlay(const FlashWalkthrough& w) {
  FlashOverlay f;
  f.blockRows = w.blockRows(), f.blockKeys = w.blockKeys();
  f.tileRows = w.queryBlocks(), f.tileCols = w.keyBlocks();
  f.tiles.resize(std::size_t(f.tileRows) * f.tileCols);
  for (int s = 0; s < w.steps(); ++s) {
    const FlashWalkthrough::Tile t = w.tile(s);
    f.tiles[std::size_t(s)] = t.skipped                             ? FlashTile::Skipped
                              : w.visited(t.queryBlock, t.keyBlock) ? FlashTile::Visited
                                                                    : FlashTile::Unvisited;
  }
  if (w.step() >= 0) f.currentRow = w.current().queryBlock, f.currentCol = w.current().keyBlock;
  char line[200];
  std::snprintf(line, sizeof line,
                "%d x %d tiles: outlined = this step, grey = not visited yet, crossed = skipped",
                f.blockRows, f.blockKeys);
  f.captions.push_back(line);
  f.captions.push_back("cells: exp(L - m) / l with each row's running max m and sum l so far");
  if (w.done()) {
    std::snprintf(line, sizeof line,
                  "done: max |O_flash - O| = %.3g, max |A_flash - A| = %.3g (vs. materialised)",
                  double(w.maxOutputDifference()), double(w.maxWeightDifference()));
    f.captions.push_back(line);
  }
  return f;
}

Image renderFlashStep(const FlashWalkthrough& w, const std::vector<std::string>& queryTokens,
                      const std::vector<std::string>& keyTokens, const std::string& description,
                      ExportOptions opt) {
  if (opt.stage != ExportStage::Weights)
    throw UsageError("a FlashAttention step is drawn as weights, not scores");
  const MatrixRM weights = w.provisionalWeights();
  const MatrixRM& L = w.logits();
  Tensor3 wt(1, int(weights.rows()), int(weights.cols()));
  Tensor3 lt(1, int(L.rows()), int(L.cols()));
  wt.mat(0) = weights;
  lt.mat(0) = L;
  ExportData data;
  data.weights = &wt;
  data.logits = &lt;
  data.queryTokens = queryTokens;
  data.keyTokens = keyTokens;
  opt.head = 0;
  opt.flash = flashOverlay(w);
  if (opt.title.empty())
    opt.title = flashStepTitle(w) + (description.empty() ? "" : " \xC2\xB7 " + description);
  return renderExport(data, opt);
}

}  // namespace attnviz
