// attnviz core (internal): a tiny fork-join loop over task indices.
#pragma once

#include <functional>

namespace attnviz::detail {

// Runs fn(t) for t in [0, n) on up to cpuThreads() threads (the caller is one of them).
// Tasks are claimed dynamically, so uneven tasks (causal rows) balance out.
void parallelFor(int n, const std::function<void(int)>& fn);

}  // namespace attnviz::detail
