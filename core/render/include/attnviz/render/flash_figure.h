// attnviz core: the picture of one FlashAttention step (flash_walkthrough.h) as a PNG figure, the
// same one the GUI's FlashAttention stage shows and exports (no GL, no window).
#pragma once

#include "attnviz/engine/flash_walkthrough.h"
#include "attnviz/render/raster.h"

#include <string>
#include <vector>

namespace attnviz {

// "FlashAttention step 7/16: query block 2, key block 1" (steps counted from 1; " (skipped)" for a
// skipped tile); "FlashAttention: before the first step (16 steps)" at step -1.
std::string flashStepTitle(const FlashWalkthrough& w);

// The tile states of the walkthrough's current step: visited, skipped (every cell masked: a
// kernel does no work there), or not yet visited; the current tile; and the captions (the legend,
// what the cells show, and once done the largest differences from the materialised softmax).
FlashOverlay flashOverlay(const FlashWalkthrough& w);

// The figure of the current step: the head's weights as far as computed
// (FlashWalkthrough::provisionalWeights) under the tile overlay, with the tokens on the axes and
// flashStepTitle (plus `description`) as the title unless opt.title is set. opt's stage must be
// weights; its head is ignored (the walkthrough's head is drawn). Throws what renderExport throws.
Image renderFlashStep(const FlashWalkthrough& w, const std::vector<std::string>& queryTokens,
                      const std::vector<std::string>& keyTokens, const std::string& description,
                      ExportOptions opt);

}  // namespace attnviz
