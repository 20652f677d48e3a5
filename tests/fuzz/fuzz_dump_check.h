// What every dump a loader accepts must satisfy; a violation aborts (a fuzz finding).
#pragma once

#include "attnviz/formats/dump.h"

#include <cmath>
#include <cstdlib>

namespace attnviz::fuzz {

inline void checkDump(const Dump& d) {
  if (d.layers.empty() || d.tokens.empty()) std::abort();
  for (const DumpLayer& l : d.layers) {
    const Tensor3& w = l.weights;
    if (w.heads < 1 || w.data.size() != std::size_t(w.heads) * w.rows * w.cols) std::abort();
    if (int(l.queryTokens.size()) != w.rows || int(l.keyTokens.size()) != w.cols) std::abort();
    for (int h = 0; h < w.heads; ++h) {
      for (int i = 0; i < w.rows; ++i) {
        double sum = 0.0;
        for (int j = 0; j < w.cols; ++j) {
          const float a = w.at(h, i, j);
          if (!(a >= 0.0f) || !std::isfinite(a)) std::abort();
          sum += a;
        }
        if (sum != 0.0 && std::fabs(sum - 1.0) > kDumpRowSumTolerance) std::abort();
      }
    }
    // The re-normalisation of an accepted dump is defined for any temperature.
    if (w.data.size() <= 4096) {
      AttentionParams p;
      p.temperature = 0.3f;
      p.mask.causal = true;
      const AttentionResult r = renormalizeWeights(w, p);
      for (float a : r.weights.data) {
        if (!(a >= 0.0f && a <= 1.0f + 1e-5f)) std::abort();
      }
    }
  }
}

}  // namespace attnviz::fuzz
