// attnviz GUI: the state of the mask panel's extended controls (chunk, documents, expression,
// softcap, block sparsity) that is not part of the mask itself: text being typed, its error,
// and the block counts cached for the view.
#pragma once

#include "attnviz/engine/blocks.h"

#include <cstdint>
#include <string>

namespace attnviz::gui {

struct MaskEditorState {
  // The expression field. What the user types is applied when it compiles; otherwise the error
  // shows under the field and the mask keeps exprApplied, the last good text.
  char expr[1024] = "";
  std::string exprApplied;  // the mask's expr the field last showed or applied
  std::string exprError;
  // The document ids typed as text ("0,0,1,1"), with the same rule.
  char docs[8192] = "";
  std::string docsApplied;
  std::string docsError;
  bool editDocBoundaries = false;  // a click on the heatmap's key axis toggles a boundary
  // Block sparsity: the overlay on the heatmap and the counts under the mask.
  bool blocksOn = false;
  int blockRows = 128, blockCols = 128;
  BlockSparsity blocks;   // of the shown head
  std::string blocksKey;  // what `blocks` was computed for
  std::string blocksError;
};

}  // namespace attnviz::gui
