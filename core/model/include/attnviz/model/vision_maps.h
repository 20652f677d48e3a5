// attnviz model: what the overlay figure draws over an image, from an image model's pass: one
// token's attention row over the patches (one head of one layer), or the attention rollout's.
#pragma once

#include "attnviz/model/vision.h"

#include <string>
#include <vector>

namespace attnviz {

// The attention rollout of an image model's pass up to `layer` (Abnar & Zuidema 2020): per layer
// A' = 0.5 * (mean over heads of A) + 0.5 * I, rows renormalised, multiplied from layer 0:
// R = A'_layer ... A'_1 A'_0. [T, T] row-major; row i says how much of token i at that layer
// comes from each input token. `r` must hold the weights (VisionRunOptions::weights).
//
// The options follow the common vit-explain practice: the heads fused by their mean or their
// maximum, then (discard > 0) the lowest floor(discard * T * T) entries of the fused matrix set
// to 0 before the identity is added, except the CLS-to-CLS entry (index 0 of the flattened
// matrix) which is never discarded; ties broken by the lower flat index.
struct RolloutOptions {
  bool maxHeads = false;  // fuse the heads by their maximum (else their mean)
  double discard = 0;     // fraction of the fused entries zeroed, 0..0.9
};
std::vector<double> visionRollout(const VisionResult& r, const VisionConfig& c, int layer,
                                  const RolloutOptions& o = {});

// Values over the patch grid, row by row, and what they are.
struct PatchMap {
  int gridH = 0, gridW = 0;
  std::vector<double> values;  // [gridH, gridW]
  std::string token;           // "CLS", "REG0", "p(1,2)", "mean of the patch queries"
};

// Which row the map is.
constexpr int kDefaultOverlayToken = -1;  // CLS, or the mean of the patch queries without one
// token: an index in the model's token order (CLS, DIST, REG0.., patches), or
// kDefaultOverlayToken. rollout: the row of visionRollout(r, c, layer), else head `head`'s row in
// `layer`. The columns kept are the patches'. Throws UsageError for a layer, head or token out
// of range, naming the option (--layer, --head, --token).
PatchMap overlayPatchMap(const VisionResult& r, const VisionConfig& c, int layer, int head,
                         int token, bool rollout, const RolloutOptions& ro = {});

}  // namespace attnviz
