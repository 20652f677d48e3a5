// CPU engine benchmarks, each beside its floor measured in the same run
// (docs/design/performance.md):
//   MHA_12x1024x64        makeCpuEngine()->run, 12 heads, T = 1024, d = 64
//   GemmFloor_12x1024x64  the same two GEMMs alone (S = Q K^T / sqrt(d), O = A V)
//   MHA_1x4096x64 / GemmFloor_1x4096x64   one head at T = 4096
//   ReSoftmax_12x1024     engine->softmax after setInputs (S cached): 12 x 1024 x 1024
//   MemcpyFloor_12x1024   a memcpy of the same bytes (read S, write A)
//
// Fairness of the floors:
// * Threads: the engine runs on cpuThreads() threads, forking fresh std::threads for each call
//   and splitting the work into (head, block of query rows) tasks. The floors use the same
//   number of threads, forked the same way per call, so thread start-up is in both. The GEMM floor
//   gives each thread whole heads when H >= threads and otherwise splits one head's query rows
//   into `threads` contiguous chunks: the natural best partition for a plain GEMM, independent of
//   the engine's own block size, so a poor block size in the engine shows in the ratio.
// * Eigen: both use the same Eigen (single-threaded GEMM kernels, no OpenMP), the same row-major
//   float32 matrices and the same -O3 -march=native flags. The floor's GEMMs write into buffers
//   allocated once, as the engine's do after its first run.
// * Memcpy floor: the bytes of S (read) and A (written), 12 x 1024 x 1024 floats each way, split
//   into the same number of threads. The re-softmax also writes row statistics (negligible).
// "Time" is wall-clock (UseRealTime; the rates use it): the engine's work happens on several
// threads. "CPU" is the CPU time of the whole process, all threads together
// (MeasureProcessCPUTime): on a shared machine, where other jobs steal the cores, the ratio of
// CPU times is the steadier comparison of work done.
#include "bench_util.h"
#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

using attnviz::AttentionParams;
using attnviz::MapRM;
using attnviz::Tensor3;

constexpr int kRepetitions = 7;

using attnviz::bench::randomTensor;

// Runs fn(t) for t in [0, threads) on `threads` threads, the caller being one of them (the same
// fork-join shape as the engine's).
template <class Fn>
void onThreads(int threads, Fn&& fn) {
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { fn(t); });
  fn(0);
  for (auto& th : pool) th.join();
}

double attentionFlops(int H, int Tq, int Tk, int dk, int dv) {
  return 2.0 * H * Tq * Tk * dk + 2.0 * H * Tq * Tk * dv;
}

void setAttentionCounters(benchmark::State& state, int H, int T, int d) {
  state.counters["GFLOP"] = benchmark::Counter(attentionFlops(H, T, T, d, d) * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = attnviz::cpuThreads();
}

void runMha(benchmark::State& state, int H, int T, int d) {
  const Tensor3 q = randomTensor(H, T, d, 1), k = randomTensor(H, T, d, 2),
                v = randomTensor(H, T, d, 3);
  AttentionParams p;  // no mask: the two GEMMs cover every (i, j), as in the floor
  auto engine = attnviz::makeCpuEngine();
  engine->run(q, k, v, p);  // warm: buffers allocated
  for (auto _ : state) {
    engine->run(q, k, v, p);
    benchmark::DoNotOptimize(engine->result().output.data.data());
    benchmark::ClobberMemory();
  }
  setAttentionCounters(state, H, T, d);
}

void runGemmFloor(benchmark::State& state, int H, int T, int d) {
  const Tensor3 q = randomTensor(H, T, d, 1), k = randomTensor(H, T, d, 2),
                v = randomTensor(H, T, d, 3);
  Tensor3 s(H, T, T), a = randomTensor(H, T, T, 4), o(H, T, d);
  const float scale = 1.0f / std::sqrt(float(d));
  const int threads = attnviz::cpuThreads();
  // Work items: (head, first row, end row).
  struct Item {
    int h, r0, r1;
  };
  std::vector<std::vector<Item>> perThread(threads);
  if (H >= threads) {
    for (int h = 0; h < H; ++h) perThread[h % threads].push_back({h, 0, T});
  } else {
    const int parts = threads / H;
    for (int h = 0; h < H; ++h)
      for (int c = 0; c < parts; ++c) {
        const int r0 = T * c / parts, r1 = T * (c + 1) / parts;
        perThread[(h * parts + c) % threads].push_back({h, r0, r1});
      }
  }
  auto work = [&](int t) {
    for (const Item& it : perThread[t]) {
      const int n = it.r1 - it.r0;
      MapRM S = s.mat(it.h), O = o.mat(it.h);
      S.middleRows(it.r0, n).noalias() =
          scale * (q.mat(it.h).middleRows(it.r0, n) * k.mat(it.h).transpose());
      O.middleRows(it.r0, n).noalias() = a.mat(it.h).middleRows(it.r0, n) * v.mat(it.h);
    }
  };
  onThreads(threads, work);
  for (auto _ : state) {
    onThreads(threads, work);
    benchmark::DoNotOptimize(s.data.data());
    benchmark::DoNotOptimize(o.data.data());
    benchmark::ClobberMemory();
  }
  setAttentionCounters(state, H, T, d);
}

void BM_MHA_12x1024x64(benchmark::State& state) { runMha(state, 12, 1024, 64); }
void BM_GemmFloor_12x1024x64(benchmark::State& state) { runGemmFloor(state, 12, 1024, 64); }
void BM_MHA_1x4096x64(benchmark::State& state) { runMha(state, 1, 4096, 64); }
void BM_GemmFloor_1x4096x64(benchmark::State& state) { runGemmFloor(state, 1, 4096, 64); }

void setSoftmaxCounters(benchmark::State& state, std::size_t floats) {
  // Bytes moved to and from memory at minimum: read S, write A.
  state.counters["GB"] = benchmark::Counter(2.0 * floats * sizeof(float) * 1e-9,
                                            benchmark::Counter::kIsIterationInvariantRate);
  // ~5 flops per element (scale, subtract max, exp counted as 1, sum, normalise): indicative.
  state.counters["GFLOP"] =
      benchmark::Counter(5.0 * floats * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = attnviz::cpuThreads();
}

void runReSoftmax(benchmark::State& state, bool causal) {
  const int H = 12, T = 1024, d = 64;
  auto engine = attnviz::makeCpuEngine();
  engine->setInputs(randomTensor(H, T, d, 1), randomTensor(H, T, d, 2), randomTensor(H, T, d, 3));
  AttentionParams p;
  p.mask.causal = causal;
  float tau = 1.0f;
  engine->softmax(p);
  for (auto _ : state) {
    // A temperature change, as the GUI's slider makes: the cached S is reused.
    tau = tau == 1.0f ? 0.9f : 1.0f;
    p.temperature = tau;
    engine->softmax(p);
    benchmark::DoNotOptimize(engine->result(attnviz::kStageWeights).weights.data.data());
    benchmark::ClobberMemory();
  }
  setSoftmaxCounters(state, std::size_t(H) * T * T);
}

void BM_ReSoftmax_12x1024(benchmark::State& state) { runReSoftmax(state, false); }
void BM_ReSoftmaxCausal_12x1024(benchmark::State& state) { runReSoftmax(state, true); }

void BM_MemcpyFloor_12x1024(benchmark::State& state) {
  const std::size_t n = std::size_t(12) * 1024 * 1024;
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  const int threads = attnviz::cpuThreads();
  auto work = [&](int t) {
    const std::size_t b = n * t / threads, e = n * (t + 1) / threads;
    std::memcpy(dst.data() + b, src.data() + b, (e - b) * sizeof(float));
  };
  onThreads(threads, work);
  for (auto _ : state) {
    onThreads(threads, work);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  setSoftmaxCounters(state, n);
}

// The same bytes with one thread, for reference.
void BM_MemcpySingleThread_12x1024(benchmark::State& state) {
  const std::size_t n = std::size_t(12) * 1024 * 1024;
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  std::memcpy(dst.data(), src.data(), n * sizeof(float));
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  setSoftmaxCounters(state, n);
}

#define ATTNVIZ_BENCH(fn)             \
  BENCHMARK(fn)                       \
      ->Unit(benchmark::kMillisecond) \
      ->UseRealTime()                 \
      ->MeasureProcessCPUTime()       \
      ->Repetitions(kRepetitions)     \
      ->ReportAggregatesOnly(true)

ATTNVIZ_BENCH(BM_MHA_12x1024x64);
ATTNVIZ_BENCH(BM_GemmFloor_12x1024x64);
ATTNVIZ_BENCH(BM_MHA_1x4096x64);
ATTNVIZ_BENCH(BM_GemmFloor_1x4096x64);
ATTNVIZ_BENCH(BM_ReSoftmax_12x1024);
ATTNVIZ_BENCH(BM_ReSoftmaxCausal_12x1024);
ATTNVIZ_BENCH(BM_MemcpyFloor_12x1024);
ATTNVIZ_BENCH(BM_MemcpySingleThread_12x1024);

}  // namespace
