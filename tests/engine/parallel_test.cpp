// The thread pool behind parallelFor (core/engine/src/parallel.cpp): every index runs once per
// loop, and no worker is still inside a loop's function once parallelFor has returned (the
// sanitizer build runs these under ASan, where a late call would touch the dead loop's stack).
#include "attnviz/engine/engine.h"  // cpuThreads
#include "attnviz/engine/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using attnviz::detail::parallelFor;

// Many loops back to back, of every size from 1 to 64 tasks and with some tasks slow, each
// counting into its own stack array: a worker that joined late and ran a task of a loop that had
// already returned would show as a count of 2, or a task never run as 0.
TEST(ParallelFor, EveryIndexRunsOnceInEachOfManyBackToBackLoops) {
  for (int loop = 0; loop < 20000; ++loop) {
    const int n = 1 + loop % 64;
    std::vector<std::atomic<int>> counts(static_cast<std::size_t>(n));
    parallelFor(n, [&](int t) {
      if (loop % 997 == 0 && t == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      counts[std::size_t(t)].fetch_add(1, std::memory_order_relaxed);
    });
    for (int t = 0; t < n; ++t) ASSERT_EQ(counts[std::size_t(t)].load(), 1) << "loop " << loop;
  }
}

// Tasks that a worker runs are slower than the caller's (which take long enough for a worker to
// join): the caller runs out of tasks first and must wait for the worker's, so each loop's counts
// are whole when parallelFor returns.
TEST(ParallelFor, TheCallerWaitsForTasksAWorkerIsStillRunning) {
  if (attnviz::cpuThreads() < 2) GTEST_SKIP() << "one CPU thread: no workers";
  const std::thread::id caller = std::this_thread::get_id();
  int onWorkers = 0;
  for (int loop = 0; loop < 200; ++loop) {
    std::vector<std::atomic<int>> counts(16);
    std::atomic<int> elsewhere{0};
    parallelFor(16, [&](int t) {
      if (std::this_thread::get_id() != caller) {
        elsewhere.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      counts[std::size_t(t)].fetch_add(1);
    });
    for (auto& c : counts) ASSERT_EQ(c.load(), 1) << "loop " << loop;
    onWorkers += elsewhere.load();
  }
  EXPECT_GT(onWorkers, 0) << "no task ran on a worker: the test saw no waiting";
}

// A loop after the pool has slept (past its polling time): the workers are woken, and the loop
// still runs every index once.
TEST(ParallelFor, LoopsAfterTheWorkersSleptRunEveryIndex) {
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    std::vector<std::atomic<int>> counts(100);
    parallelFor(100, [&](int t) { counts[std::size_t(t)].fetch_add(1); });
    for (auto& c : counts) ASSERT_EQ(c.load(), 1);
  }
}

TEST(ParallelFor, AnExceptionReachesTheCallerAndThePoolGoesOn) {
  EXPECT_THROW(parallelFor(50,
                           [](int t) {
                             if (t == 17) throw std::runtime_error("task 17");
                           }),
               std::runtime_error);
  std::atomic<int> sum{0};
  parallelFor(50, [&](int t) { sum += t; });
  EXPECT_EQ(sum.load(), 50 * 49 / 2);
}

// A parallelFor inside a task runs inline on that thread, every index once.
TEST(ParallelFor, NestedLoopsRunInline) {
  std::vector<std::atomic<int>> counts(8 * 8);
  parallelFor(8, [&](int i) {
    parallelFor(8, [&](int j) { counts[std::size_t(i * 8 + j)].fetch_add(1); });
  });
  for (auto& c : counts) EXPECT_EQ(c.load(), 1);
}

}  // namespace
