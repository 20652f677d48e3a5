// attnviz: what one attribution computed, as `attnviz attribute` and the GUI's Attribution panel
// both report it: the labelled layers x heads figure (--png, the panel's export: the same bytes
// for the same arguments) and the one-line header.
#pragma once

#include "attnviz/model/attribution.h"
#include "attnviz/render/attribution_figure.h"

#include <string>
#include <vector>

namespace attnviz::app {

struct AttributionReport {
  bool patch = false;
  AblationKind kind = AblationKind::Zero;  // the sweep's (patch = false)
  AttributionMatrix values;                // [L, H]; NaN where not computed
  int position = 0, target = 0, foil = 0;  // resolved; foil for a patch
  double logProb = 0.0;                    // the sweep's clean log p(target)
  double mClean = 0.0, mCorrupt = 0.0;     // the patch's logit differences
};

AttributionReport reportOf(const AblationSweep& s);
AttributionReport reportOf(const PatchingResult& p);

// A token id as the reports name it: its printable piece, or "#id" outside the tokenizer.
std::string attributionPiece(const Model& m, int id);

// The figure: title, colour bar title and captions name the method, the position, the target
// (and the foil) and the clean log p (or m_clean and m_corrupt).
AttributionFigure attributionFigure(const Model& m, const AttributionReport& r);

// "attribute: zero-ablation sweep of 2 x 4 heads at position P ('x'), target ..." (stdout).
std::string attributionHeader(const Model& m, const std::vector<int>& ids,
                              const AttributionReport& r);

}  // namespace attnviz::app
