// What `attnviz generate` holds at the scale people run: a Llama-3.2-1B-shaped random F32
// checkpoint (16 layers, 32 query heads over 8 KV heads, d 2048, vocab 128256; 4.9 GB) written
// here at start-up (never committed; $ATTNVIZ_BENCH_DIR or the temp folder, removed at exit), and
// a forked child that opens it and generates 4 tokens after a T = 1024 prompt as the command does
// (no attention rows kept). Its peak RSS beside the weights' bytes (mapped in place, so they are
// part of the RSS once read): the target is the weights plus at most 25%.
//   Llama1BGeneratePeakMemory   peak_MB, weights_MB, over_weights_pct
// It writes 4.9 GB, so it runs only with ATTNVIZ_BENCH_LARGE=1 (else it reports a skip):
//   ATTNVIZ_BENCH_LARGE=1 build/tests/bench/attnviz_bench --benchmark_filter=Llama1B
#include "bench_util.h"

#include "attnviz/model/generate.h"
#include "attnviz/model/model.h"

#include <benchmark/benchmark.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace {

namespace fs = std::filesystem;
using S = attnviz::bench::Llama32_1B;

struct Folder {
  fs::path dir;
  std::uintmax_t bytes = 0;
  ~Folder() {
    std::error_code ec;
    if (!dir.empty() && !std::getenv("ATTNVIZ_BENCH_KEEP")) fs::remove_all(dir, ec);
  }
};

const Folder& folder() {
  static Folder f = [] {
    Folder out;
    const char* base = std::getenv("ATTNVIZ_BENCH_DIR");
    out.dir = fs::path(base ? base : fs::temp_directory_path().string()) /
              ("attnviz_llama32_1b_" + std::to_string(::getpid()));
    fs::create_directories(out.dir);
    out.bytes = attnviz::bench::writeLlamaShapedFolder<S>(out.dir);
    return out;
  }();
  return f;
}

void Llama1BGeneratePeakMemory(benchmark::State& state) {
  if (!std::getenv("ATTNVIZ_BENCH_LARGE")) {
    state.SkipWithError("writes a 4.9 GB checkpoint: set ATTNVIZ_BENCH_LARGE=1 to run it");
    return;
  }
  const int T = int(state.range(0));
  const Folder& f = folder();
  for (auto _ : state) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const auto model = attnviz::Model::open(f.dir.string());
      std::vector<int> prompt(T);
      for (int t = 0; t < T; ++t) prompt[t] = 1 + (t * 7919) % (S::kV - 1);
      attnviz::GenerateOptions opts;
      opts.maxNew = 4;
      opts.stopAtEos = false;
      opts.rows = attnviz::LayerSet::none();
      const auto g = attnviz::generate(*model, prompt, {}, opts);
      std::_Exit(g.tokens.size() == 4 ? 0 : 1);
    }
    int status = 0;
    rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("the child failed");
    const double peak = double(ru.ru_maxrss) / 1024.0, weights = double(f.bytes) / (1 << 20);
    state.counters["peak_MB"] = peak;
    state.counters["weights_MB"] = weights;
    state.counters["over_weights_pct"] = 100.0 * (peak - weights) / weights;
  }
}

}  // namespace

BENCHMARK(Llama1BGeneratePeakMemory)
    ->Arg(1024)
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);
