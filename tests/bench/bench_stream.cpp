// Streaming (FlashAttention-tiled) benchmarks and the end-to-end command line, each beside its
// floor measured in the same run:
//   StreamOutput_1x32768x64     streamOutput, one head, T = 32768, d = 64, no mask
//   StreamGemmFloor_1x32768x64  its two GEMMs alone, tiled as it tiles them (128 x 768):
//                               S_t = Q_b K_t^T / sqrt(d), O_b += S_t V_t
//   StreamPooled_1x32768x64     streamPooledWeights onto 1171 x 1171 pixels (pool 28 x 28), the
//                               max-pool only (what the export draws)
//   StreamPooledMean_...        the same with the mean-pool too
//   PooledGemmFloor_1x32768x64  the Q K^T tile GEMM twice: the two sweeps' GEMMs, nothing else
//   StreamQueryRow_1x32768x64   streamQueryRow: one causal query row (20000) of T = 32768 with
//                               its output, what the row inspector computes in pooled mode
//   RowMatVecFloor_1x32768x64   its two matrix-vector products alone: K q_i and a_i V
//   StreamOutput_12x1024x64     streamOutput in process at the command line's shape: what
//                               `compute --out` runs between loading and writing
//   CliComputeOut_12x1024x64    `attnviz compute --q --k --v --out` as a child process: load,
//                               compute, write; its wall time, and `child_cpu_ms` its CPU time
//   (compare with MHA_12x1024x64 in bench_cpu.cpp: the engine in process, in the same run)
// Peak RSS: the counter `peak_rss_MB` is the process's peak so far, so run one benchmark per
// process (--benchmark_filter) to read it for that benchmark alone.
// The floors run on cpuThreads() threads with the same fork-join shape as the streaming path.
#include "bench_util.h"
#include "attnviz/formats/npy.h"
#include "attnviz/engine/streaming.h"
#include "attnviz/engine/engine.h"

#include <benchmark/benchmark.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

using attnviz::MatrixRM;
using attnviz::Tensor3;

constexpr int kRepetitions = 3;
constexpr int kLongT = 32768, kD = 64, kBlock = 128;

using attnviz::bench::randomTensor;

void setRss(benchmark::State& state) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["peak_rss_MB"] = double(ru.ru_maxrss) / 1024.0;
  state.counters["threads"] = attnviz::cpuThreads();
}

// Blocks of query rows claimed dynamically by cpuThreads() threads (the caller is one).
template <class Fn>
void onBlocks(int blocks, Fn&& fn) {
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int b = next++; b < blocks; b = next++) fn(b);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < attnviz::cpuThreads(); ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

struct LongInputs {
  Tensor3 q = randomTensor(1, kLongT, kD, 1), k = randomTensor(1, kLongT, kD, 2),
          v = randomTensor(1, kLongT, kD, 3);
};

const LongInputs& longInputs() {
  static const LongInputs in;
  return in;
}

void flopCounter(benchmark::State& state, double gemms) {
  state.counters["GFLOP"] = benchmark::Counter(gemms * 2.0 * kLongT * double(kLongT) * kD * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

void BM_StreamOutput_1x32768x64(benchmark::State& state) {
  const LongInputs& in = longInputs();
  for (auto _ : state) {
    Tensor3 o = attnviz::streamOutput(in.q, in.k, in.v, {});
    benchmark::DoNotOptimize(o.data.data());
  }
  flopCounter(state, 2);
  setRss(state);
}

// The GEMMs the streaming path cannot avoid, tiled as it tiles them (B_r x B_c = 128 x 768, the
// tile of scores in cache), with nothing in between: S_t = Q_b K_t^T / sqrt(d), then either
// O_b += S_t V_t (the output's second GEMM) or S_t = Q_b K_t^T again (the pooled view's second
// sweep).
void runGemmFloor(benchmark::State& state, bool secondIsQK) {
  const LongInputs& in = longInputs();
  const float scale = 1.0f / std::sqrt(float(kD));
  constexpr int kTile = 768;
  Tensor3 out(1, kLongT, kD);
  const int blocks = kLongT / kBlock;
  auto work = [&](int b) {
    thread_local MatrixRM S, acc;
    S.resize(kBlock, kTile);
    acc.setZero(kBlock, kD);
    auto Q = in.q.mat(0).middleRows(b * kBlock, kBlock);
    for (int j0 = 0; j0 < kLongT; j0 += kTile) {
      const int n = std::min(kTile, kLongT - j0);
      auto St = S.leftCols(n);
      St.noalias() = scale * (Q * in.k.mat(0).middleRows(j0, n).transpose());
      if (secondIsQK) {
        St.noalias() = scale * (Q * in.k.mat(0).middleRows(j0, n).transpose());
        acc.col(0) += St.col(0);
      } else {
        acc.noalias() += St * in.v.mat(0).middleRows(j0, n);
      }
    }
    out.mat(0).middleRows(b * kBlock, kBlock) = acc;
  };
  onBlocks(blocks, work);
  for (auto _ : state) {
    onBlocks(blocks, work);
    benchmark::DoNotOptimize(out.data.data());
    benchmark::ClobberMemory();
  }
  flopCounter(state, 2);
  setRss(state);
}

void BM_StreamGemmFloor_1x32768x64(benchmark::State& state) { runGemmFloor(state, false); }
void BM_PooledGemmFloor_1x32768x64(benchmark::State& state) { runGemmFloor(state, true); }

void runPooled(benchmark::State& state, bool withMean) {
  const LongInputs& in = longInputs();
  const int pool = (kLongT + 1199) / 1200;
  for (auto _ : state) {
    attnviz::PooledWeights pw =
        attnviz::streamPooledWeights(in.q, in.k, 0, {}, pool, pool, {}, withMean);
    benchmark::DoNotOptimize(pw.max.data());
  }
  flopCounter(state, 2);
  setRss(state);
}

void BM_StreamPooled_1x32768x64(benchmark::State& state) { runPooled(state, false); }
void BM_StreamPooledMean_1x32768x64(benchmark::State& state) { runPooled(state, true); }

void BM_StreamQueryRow_1x32768x64(benchmark::State& state) {
  const LongInputs& in = longInputs();
  attnviz::AttentionParams p;
  p.mask.causal = true;
  for (auto _ : state) {
    attnviz::QueryRow r = attnviz::streamQueryRow(in.q, in.k, &in.v, p, 0, 20000);
    benchmark::DoNotOptimize(r.output.data());
  }
}

void BM_RowMatVecFloor_1x32768x64(benchmark::State& state) {
  const LongInputs& in = longInputs();
  Eigen::VectorXf s(kLongT);
  Eigen::RowVectorXf o(kD);
  for (auto _ : state) {
    s.noalias() = in.k.mat(0) * in.q.mat(0).row(20000).transpose();
    o.noalias() = s.transpose() * in.v.mat(0);
    benchmark::DoNotOptimize(s.data());
    benchmark::DoNotOptimize(o.data());
    benchmark::ClobberMemory();
  }
}

void BM_StreamOutput_12x1024x64(benchmark::State& state) {
  const Tensor3 q = randomTensor(12, 1024, kD, 1), k = randomTensor(12, 1024, kD, 2),
                v = randomTensor(12, 1024, kD, 3);
  for (auto _ : state) {
    Tensor3 o = attnviz::streamOutput(q, k, v, {});
    benchmark::DoNotOptimize(o.data.data());
  }
  setRss(state);
}

// --- the command line end to end -------------------------------------------------------------

struct CliFiles {
  std::string dir;
  CliFiles() {
    dir = (std::filesystem::temp_directory_path() / ("attnviz_bench_" + std::to_string(getpid())))
              .string();
    std::filesystem::create_directories(dir);
    attnviz::saveNpy(dir + "/q.npy", randomTensor(12, 1024, 64, 1));
    attnviz::saveNpy(dir + "/k.npy", randomTensor(12, 1024, 64, 2));
    attnviz::saveNpy(dir + "/v.npy", randomTensor(12, 1024, 64, 3));
  }
  ~CliFiles() { std::filesystem::remove_all(dir); }
};

void BM_CliComputeOut_12x1024x64(benchmark::State& state) {
  static const CliFiles files;
  const std::string q = files.dir + "/q.npy", k = files.dir + "/k.npy", v = files.dir + "/v.npy",
                    o = files.dir + "/o.npy";
  std::vector<std::string> args = {ATTNVIZ_BINARY, "compute", "--q",   q, "--k", k,
                                   "--v",          v,         "--out", o};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  double childCpu = 0;
  for (auto _ : state) {
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
      state.SkipWithError("cannot start attnviz");
      break;
    }
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      state.SkipWithError("attnviz compute failed");
      break;
    }
    childCpu += ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec * 1e-3 + ru.ru_stime.tv_sec * 1e3 +
                ru.ru_stime.tv_usec * 1e-3;
  }
  state.counters["child_cpu_ms"] = benchmark::Counter(childCpu, benchmark::Counter::kAvgIterations);
}

#define ATTNVIZ_STREAM_BENCH(fn)      \
  BENCHMARK(fn)                       \
      ->Unit(benchmark::kMillisecond) \
      ->UseRealTime()                 \
      ->MeasureProcessCPUTime()       \
      ->Repetitions(kRepetitions)     \
      ->ReportAggregatesOnly(true)

ATTNVIZ_STREAM_BENCH(BM_StreamOutput_1x32768x64)->Iterations(1);
ATTNVIZ_STREAM_BENCH(BM_StreamGemmFloor_1x32768x64)->Iterations(1);
ATTNVIZ_STREAM_BENCH(BM_StreamPooled_1x32768x64)->Iterations(1);
ATTNVIZ_STREAM_BENCH(BM_StreamPooledMean_1x32768x64)->Iterations(1);
ATTNVIZ_STREAM_BENCH(BM_PooledGemmFloor_1x32768x64)->Iterations(1);
ATTNVIZ_STREAM_BENCH(BM_StreamQueryRow_1x32768x64)->Unit(benchmark::kMicrosecond);
ATTNVIZ_STREAM_BENCH(BM_RowMatVecFloor_1x32768x64)->Unit(benchmark::kMicrosecond);
ATTNVIZ_STREAM_BENCH(BM_StreamOutput_12x1024x64);
ATTNVIZ_STREAM_BENCH(BM_CliComputeOut_12x1024x64);

}  // namespace
