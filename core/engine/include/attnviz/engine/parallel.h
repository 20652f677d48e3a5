// attnviz core (internal): a fork-join loop over task indices on a persistent thread pool.
#pragma once

#include <functional>

namespace attnviz::detail {

// Runs fn(t) for t in [0, n) on up to cpuThreads() threads (the caller is one of them).
// Tasks are claimed dynamically, so uneven tasks (causal rows) balance out. The worker threads
// are started once, on the first call that needs them, and then wait for the next loop: a
// slider step costs a wake-up, not a thread creation. A call made from inside a task, or while
// another thread's loop is running, runs its tasks on the calling thread. The first exception a
// task throws is rethrown here once every task has finished.
void parallelFor(int n, const std::function<void(int)>& fn);

// How many threads the pool has started so far (0 before the first parallel loop); for tests.
int poolThreadsStarted();

}  // namespace attnviz::detail
