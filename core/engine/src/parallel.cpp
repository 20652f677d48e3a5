// The persistent pool behind parallelFor: cpuThreads() - 1 workers, started on first use, that
// poll briefly and then sleep on a condition variable between loops. One loop runs at a time; the
// caller works too, and waits only for workers that joined before it ran out of tasks.
#include "attnviz/engine/parallel.h"

#include "attnviz/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace attnviz {

int cpuThreads() {
  static const int n = [] {
    // ATTNVIZ_THREADS: at most kMaxThreads (a larger value, or one that is not a number, is
    // read as that bound or ignored, never as thousands of threads).
    constexpr int kMaxThreads = 256;
    if (const char* env = std::getenv("ATTNVIZ_THREADS")) {
      const long v = std::strtol(env, nullptr, 10);
      if (v >= 1) return int(std::min<long>(v, kMaxThreads));
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return n;
}

namespace detail {

namespace {

thread_local bool tInsideTask = false;

class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  // Runs the loop on the pool; false when the pool is busy with another caller's loop.
  bool run(int n, int threads, const std::function<void(int)>& fn) {
    std::unique_lock<std::mutex> caller(callerMutex_, std::try_to_lock);
    if (!caller.owns_lock()) return false;
    start(threads - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      n_ = n;
      next_.store(0);
      error_ = nullptr;
      helpers_ = std::min(threads - 1, int(workers_.size()));
      finished_.store(0, std::memory_order_relaxed);
      const std::uint64_t job = job_.load(std::memory_order_relaxed) + 1;
      gate_.store((job & kJobBits) << 32, std::memory_order_relaxed);
      job_.store(job, std::memory_order_release);
    }
    wake_.notify_all();
    work();
    // Every task is claimed. Close the gate: a worker that has not joined this loop by now (still
    // waking up) skips it, so the caller waits only for tasks already running, never for a
    // wake-up.
    const int joined = int(gate_.fetch_or(kClosed, std::memory_order_acq_rel) & kCountBits);
    spinUntil([&] { return finished_.load(std::memory_order_acquire) == joined; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return finished_.load(std::memory_order_relaxed) == joined; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

  int started() {
    std::lock_guard<std::mutex> lock(mutex_);
    return int(workers_.size());
  }

 private:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // A decode step runs some 150 short loops back to back (a few tens of microseconds each, a few
  // microseconds apart). Sleeping on the condition variable between them costs a futex wake-up
  // per loop on each side, which on a virtual machine can take longer than the loop's work, so
  // both sides first poll for up to kSpin; past it they sleep as before. 50 us was too short on
  // our 2-vCPU VMs: once a worker fell asleep it woke late for every later loop (each wake-up
  // slower than the gap to the next loop), and a decode step ran at half speed for whole runs
  // (SmolDecode/2 medians of 25-60 ms instead of 12-15 ms in about a third of the runs; none in
  // seven runs at 500 and 1000 us).
  template <class Ready>
  static void spinUntil(Ready ready) {
    constexpr auto kSpin = std::chrono::microseconds(500);
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (;;) {
      for (int k = 0; k < 16; ++k) {
        if (ready()) return;
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
      }
      if (std::chrono::steady_clock::now() >= until) return;
      std::this_thread::yield();  // a thread this one waits for may need this CPU
    }
  }

  // Starts workers up to `want`. A thread the system refuses (std::system_error: a process limit,
  // no memory for its stack) is not an error: the loops run on the workers there are, the caller
  // included, and no more are asked for.
  void start(int want) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!refused_ && int(workers_.size()) < want) {
      const int index = int(workers_.size());
      try {
        workers_.emplace_back([this, index] { loop(index); });
      } catch (const std::system_error&) {
        refused_ = true;
      }
    }
  }

  // Claims tasks until none are left.
  void work() {
    const bool wasInside = tInsideTask;
    tInsideTask = true;
    for (int t = next_.fetch_add(1); t < n_; t = next_.fetch_add(1)) {
      try {
        (*fn_)(t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    tInsideTask = wasInside;
  }

  void loop(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      spinUntil([&] { return job_.load(std::memory_order_acquire) != seen; });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || (job_ != seen && index < helpers_); });
        if (stop_) return;
        seen = job_;
      }
      // Join loop `seen` unless its caller has closed the gate (or moved on to a later loop).
      std::uint64_t g = gate_.load(std::memory_order_acquire);
      bool joined = false;
      while (g >> 32 == (seen & kJobBits) && !(g & kClosed)) {
        if (gate_.compare_exchange_weak(g, g + 1, std::memory_order_acq_rel)) {
          joined = true;
          break;
        }
      }
      if (!joined) continue;
      work();
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.fetch_add(1, std::memory_order_acq_rel);
      done_.notify_one();
    }
  }

  // gate_: the loop's number (its low 32 bits) above bit 32, bit 31 set once the caller has
  // stopped taking helpers, and below it how many workers joined.
  static constexpr std::uint64_t kJobBits = 0xFFFFFFFFu, kClosed = std::uint64_t(1) << 31,
                                 kCountBits = kClosed - 1;

  std::mutex callerMutex_;  // one loop at a time
  std::mutex mutex_, errorMutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  bool refused_ = false;  // the system refused a thread: start no more
  const std::function<void(int)>* fn_ = nullptr;
  int n_ = 0;
  std::atomic<int> next_{0};
  int helpers_ = 0;             // workers taking part in the current loop
  std::atomic<std::uint64_t> gate_{0};
  std::atomic<int> finished_{0};  // workers that joined the loop and finished it (under mutex_)
  std::atomic<std::uint64_t> job_{0};  // loops started (changed under mutex_)
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace

void parallelFor(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  const int threads = std::min(cpuThreads(), n);
  if (threads <= 1 || tInsideTask || !Pool::instance().run(n, threads, fn)) {
    for (int t = 0; t < n; ++t) fn(t);
  }
}

int poolThreadsStarted() { return Pool::instance().started(); }

}  // namespace detail
}  // namespace attnviz
