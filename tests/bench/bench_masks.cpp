// Mask expression benchmarks (the target in docs/design/performance.md: an expression evaluated
// at T = 1024 in <= 30 ms), each beside a floor measured in the same run:
//   MaskExpr_SlidingGlobal_1024   MaskExpr::evaluate of "k <= q && q - k < 128 || k < 4" over
//                                 1024 x 1024 cells (muParser bytecode, cpuThreads() threads)
//   MaskExpr_Dilated_1024         the same for "(q - k) % 2 == 0 && k <= q"
//   CompiledFloor_1024            the first predicate as compiled C++, over the same cells, into
//                                 the same byte grid, on the same number of threads forked per call
//   BlockSparsity_Causal_1024     classifyBlocks of a causal 1024 x 1024 mask in 128 x 128 tiles
// "CPU" is the process CPU time, all threads together (steadier on a shared machine).
// The ratio expression / floor is the interpreter's cost per cell; the absolute time is the one
// the GUI waits for while the user types.
#include "attnviz/engine/blocks.h"
#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask_expr.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace {

constexpr int kT = 1024;

void runExpr(benchmark::State& state, const char* text) {
  const attnviz::MaskExpr e(text);
  std::vector<std::uint8_t> grid(std::size_t(kT) * kT);
  for (auto _ : state) {
    e.evaluate(0, kT, kT, {}, grid.data());
    benchmark::DoNotOptimize(grid.data());
    benchmark::ClobberMemory();
  }
  state.counters["Mcells/s"] =
      benchmark::Counter(double(kT) * kT * state.iterations() / 1e6, benchmark::Counter::kIsRate);
}

void BM_MaskExpr_SlidingGlobal_1024(benchmark::State& s) {
  runExpr(s, "k <= q && q - k < 128 || k < 4");
}
void BM_MaskExpr_Dilated_1024(benchmark::State& s) { runExpr(s, "(q - k) % 2 == 0 && k <= q"); }

void BM_CompiledFloor_1024(benchmark::State& state) {
  std::vector<std::uint8_t> grid(std::size_t(kT) * kT);
  const int threads = attnviz::cpuThreads();
  auto work = [&](int t) {
    for (int i = kT * t / threads; i < kT * (t + 1) / threads; ++i)
      for (int j = 0; j < kT; ++j)
        grid[std::size_t(i) * kT + j] = ((j <= i && i - j < 128) || j < 4) ? 1 : 0;
  };
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
    benchmark::DoNotOptimize(grid.data());
    benchmark::ClobberMemory();
  }
  state.counters["Mcells/s"] =
      benchmark::Counter(double(kT) * kT * state.iterations() / 1e6, benchmark::Counter::kIsRate);
}

void BM_BlockSparsity_Causal_1024(benchmark::State& state) {
  attnviz::MaskSpec m;
  m.causal = true;
  for (auto _ : state) {
    const attnviz::BlockSparsity b = attnviz::classifyBlocks(m, 1, 0, kT, kT, {});
    benchmark::DoNotOptimize(b.partial);
  }
}

#define ATTNVIZ_MASK_BENCH(fn)        \
  BENCHMARK(fn)                       \
      ->Unit(benchmark::kMillisecond) \
      ->UseRealTime()                 \
      ->MeasureProcessCPUTime()       \
      ->Repetitions(5)                \
      ->ReportAggregatesOnly(true)

ATTNVIZ_MASK_BENCH(BM_MaskExpr_SlidingGlobal_1024);
ATTNVIZ_MASK_BENCH(BM_MaskExpr_Dilated_1024);
ATTNVIZ_MASK_BENCH(BM_CompiledFloor_1024);
ATTNVIZ_MASK_BENCH(BM_BlockSparsity_Causal_1024);

}  // namespace
