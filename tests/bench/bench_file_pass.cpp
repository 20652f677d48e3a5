// The prompt pass of a model file in process, as llama.cpp's llama-bench times its pp<T>: the
// file opened once, one pass to warm up (its pages mapped and first touched, the thread pool
// started), then passes timed on their own. `tests/bench/bench_large.sh` times `attnviz model`
// as a whole process instead (open, tokenizer, first touch of every page, the written weights),
// which a one-shot command pays and llama-bench's figure leaves out; the two side by side say
// how much of a gap is the process and how much the pass.
//
//   ATTNVIZ_BENCH_MODEL=/path/to/model.gguf build/tests/bench/attnviz_bench
//     --benchmark_filter=FilePass --benchmark_counters_tabular=true
//
// ATTNVIZ_BENCH_LAYER picks the kept layer (default: the middle one). ATTNVIZ_BENCH_FAST=1 runs
// the passes on the fast path (8-bit activations, as `attnviz model --fast-activations`).
//
// The pass keeps what `attnviz model --layer L --weights` keeps (one layer's attention weights,
// the last logits row). Without ATTNVIZ_BENCH_MODEL the cases are skipped.
#include "attnviz/engine/ggml_kernels.h"  // setFastActivations
#include "attnviz/model/model.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

struct Opened {
  std::unique_ptr<attnviz::Model> model;
  bool warm = false;
};

Opened& opened() {
  static Opened o = [] {
    Opened r;
    if (const char* path = std::getenv("ATTNVIZ_BENCH_MODEL")) r.model = attnviz::Model::open(path);
    return r;
  }();
  return o;
}

// T token ids drawn below the vocabulary (any ids: the pass's cost does not depend on them).
std::vector<int> randomIds(int T, int vocab) {
  std::mt19937 gen(0);
  std::uniform_int_distribution<int> d(1, std::max(1, vocab - 1));
  std::vector<int> ids(static_cast<std::size_t>(T));
  for (int& id : ids) id = d(gen);
  return ids;
}

void FilePass(benchmark::State& state) {
  Opened& o = opened();
  if (!o.model) {
    state.SkipWithError("set ATTNVIZ_BENCH_MODEL to a model file or folder");
    return;
  }
  const attnviz::ModelConfig& c = o.model->config();
  const int T = int(state.range(0));
  const char* layerEnv = std::getenv("ATTNVIZ_BENCH_LAYER");
  const int layer = std::clamp(layerEnv ? std::atoi(layerEnv) : c.nLayer / 2, 0, c.nLayer - 1);
  attnviz::Capture cap = attnviz::Capture::view(0);
  cap.weights = attnviz::LayerSet::just(layer);
  const std::vector<int> ids = randomIds(T, c.vocabSize);
  const char* fastEnv = std::getenv("ATTNVIZ_BENCH_FAST");
  attnviz::setFastActivations(fastEnv && std::string(fastEnv) == "1");
  if (!o.warm) {
    benchmark::DoNotOptimize(o.model->forward(ids, {}, cap).logits.data());
    o.warm = true;
  }
  for (auto _ : state) benchmark::DoNotOptimize(o.model->forward(ids, {}, cap).logits.data());
  state.counters["tokens/s"] =
      benchmark::Counter(double(T), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(FilePass)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1)
    ->Repetitions(3);
