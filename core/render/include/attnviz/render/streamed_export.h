// attnviz core: weight figures of long contexts, streamed (the scores are never held whole).
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/render/raster.h"

#include <cstddef>
#include <functional>

namespace attnviz {

// Whether an export should stream: a labelled weights figure (not --bare, no explicit --cell)
// of inputs whose materialised scores, weights and logits (12 bytes a cell over every head)
// would pass `budgetBytes`.
bool exportShouldStream(const Dims& d, const ExportOptions& opt, std::size_t budgetBytes);

// The default budget: 512 MiB, or $ATTNVIZ_EXPORT_STREAM_ABOVE_MB when set (0 streams always).
std::size_t exportStreamBudget();

// The weights figure of Q [H, T_q, d_k], K [H, T_k, d_k] (V [H, T_k, d_v] is validated only)
// under `p`, with `labels`' tokens and description, drawn from the streaming path: pixel for
// pixel what renderExport draws from the materialised weights. `progress(head, fraction)` is
// called as each drawn head is streamed. Throws as validateInputs and renderExport do.
Image renderStreamedExport(const Tensor3& q, const Tensor3& k, const Tensor3& v,
                           const AttentionParams& p, ExportData labels, const ExportOptions& opt,
                           const std::function<void(int, double)>& progress = {});

}  // namespace attnviz
