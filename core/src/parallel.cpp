#include "parallel.h"

#include "attnviz/engine.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace attnviz {

int cpuThreads() {
  static const int n = [] {
    if (const char* env = std::getenv("ATTNVIZ_THREADS")) {
      const int v = std::atoi(env);
      if (v >= 1) return v;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return n;
}

namespace detail {

void parallelFor(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  const int threads = std::min(cpuThreads(), n);
  if (threads <= 1) {
    for (int t = 0; t < n; ++t) fn(t);
    return;
  }
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex errorMutex;
  auto worker = [&] {
    for (int t = next.fetch_add(1); t < n; t = next.fetch_add(1)) {
      try {
        fn(t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace detail
}  // namespace attnviz
