// attnviz_bench, GPU cases: the OpenGL compute backend on the shapes of the CPU cases.
//
// Dispatch time is measured to glFinish (the GPU work complete); readback is its own case.
// Wall-clock time is used (UseRealTime): the driver's worker threads do the work.
// Counters: FLOP/s counts 2 T_q T_k d per GEMM per head (the softmax's few flops per element
// are not counted); bytes/s for the memory-bound cases.
// ATTNVIZ_BENCH_LARGE=1 adds 32 heads x T=8192 (17 GiB of GPU buffers: for real GPUs only).
#define GL_GLEXT_PROTOTYPES 1
#include "attnviz/gpu_engine.h"

#include <GL/glcorearb.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

namespace {

using namespace attnviz;

// One engine (and headless context) for every GPU case; nullptr with a reason when none.
GpuEngine* engine(std::string& why) {
  static std::string reason;
  static std::unique_ptr<GpuEngine> e = [] {
    try {
      auto made = makeGpuEngineHeadless();
      std::fprintf(stderr, "attnviz_bench: GPU cases on %s\n", made->renderer().c_str());
      return made;
    } catch (const std::exception& ex) {
      reason = ex.what();
      return std::unique_ptr<GpuEngine>{};
    }
  }();
  why = reason;
  return e.get();
}

Tensor3 randomTensor(int H, int rows, int cols, unsigned seed) {
  Tensor3 t(H, rows, cols);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& x : t.data) x = n(gen);
  return t;
}

struct Shape {
  int H, T, d;
};

Shape shapeOf(const benchmark::State& s) {
  return {int(s.range(0)), int(s.range(1)), int(s.range(2))};
}

double gemmFlops(const Shape& s) { return 2.0 * 2.0 * s.H * double(s.T) * s.T * s.d; }

AttentionParams causal() {
  AttentionParams p;
  p.mask.causal = true;
  return p;
}

#define GPU_OR_SKIP(state, var)             \
  std::string why_;                         \
  GpuEngine* var = engine(why_);            \
  if (var == nullptr) {                     \
    (state).SkipWithError(why_.c_str());    \
    return;                                 \
  }

// Full MHA: upload Q, K, V, S = QK^T/sqrt(d), causal softmax, O = AV; to glFinish.
void BM_GpuFullMha(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  const Tensor3 q = randomTensor(s.H, s.T, s.d, 1), k = randomTensor(s.H, s.T, s.d, 2),
                v = randomTensor(s.H, s.T, s.d, 3);
  const AttentionParams p = causal();
  gpu->run(q, k, v, p);  // warm-up: allocation and shader first use
  glFinish();
  for (auto _ : state) {
    gpu->run(q, k, v, p);
    glFinish();
  }
  state.counters["FLOP/s"] = benchmark::Counter(gemmFlops(s), benchmark::Counter::kIsIterationInvariantRate);
}

// Floor for the full MHA: the two GEMMs alone (upload + S, then AV), to glFinish.
void BM_GpuTwoGemms(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  const Tensor3 q = randomTensor(s.H, s.T, s.d, 1), k = randomTensor(s.H, s.T, s.d, 2),
                v = randomTensor(s.H, s.T, s.d, 3);
  gpu->run(q, k, v, causal());
  glFinish();
  for (auto _ : state) {
    gpu->setInputs(q, k, v);
    gpu->output();
    glFinish();
  }
  state.counters["FLOP/s"] = benchmark::Counter(gemmFlops(s), benchmark::Counter::kIsIterationInvariantRate);
}

// Re-softmax from the cached S (a temperature change): no GEMM; to glFinish.
void BM_GpuReSoftmax(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  gpu->run(randomTensor(s.H, s.T, s.d, 1), randomTensor(s.H, s.T, s.d, 2),
           randomTensor(s.H, s.T, s.d, 3), causal());
  glFinish();
  AttentionParams p = causal();
  int n = 0;
  for (auto _ : state) {
    p.temperature = (n++ % 2) ? 0.5f : 2.0f;
    gpu->softmax(p);
    glFinish();
  }
  const double elems = double(s.H) * s.T * s.T;
  state.SetBytesProcessed(std::int64_t(state.iterations() * elems * 8.0));  // read S, write A
  state.counters["elements/s"] = benchmark::Counter(elems, benchmark::Counter::kIsIterationInvariantRate);
}

// Floor for the re-softmax: a GPU-side copy of the same bytes (S -> A).
void BM_GpuCopySameBytes(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  const std::size_t bytes = std::size_t(s.H) * s.T * s.T * 4;
  GLuint bufs[2];
  glGenBuffers(2, bufs);
  for (GLuint b : bufs) {
    glBindBuffer(GL_COPY_WRITE_BUFFER, b);
    glBufferData(GL_COPY_WRITE_BUFFER, GLsizeiptr(bytes), nullptr, GL_DYNAMIC_COPY);
  }
  glBindBuffer(GL_COPY_READ_BUFFER, bufs[0]);
  glBindBuffer(GL_COPY_WRITE_BUFFER, bufs[1]);
  glFinish();
  for (auto _ : state) {
    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, GLsizeiptr(bytes));
    glFinish();
  }
  glDeleteBuffers(2, bufs);
  state.SetBytesProcessed(std::int64_t(state.iterations() * double(bytes) * 2.0));
}

// Readback of the weights [H, T, T] to host memory (what the CLI and export pay).
void BM_GpuReadbackWeights(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  gpu->run(randomTensor(s.H, s.T, s.d, 1), randomTensor(s.H, s.T, s.d, 2),
           randomTensor(s.H, s.T, s.d, 3), causal());
  glFinish();
  for (auto _ : state) benchmark::DoNotOptimize(gpu->result(kStageWeights).weights.data.data());
  state.SetBytesProcessed(std::int64_t(state.iterations() * double(s.H) * s.T * s.T * 4.0));
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"H", "T", "d"});
  b->Args({12, 1024, 64});
  b->Args({1, 4096, 64});
  if (const char* large = std::getenv("ATTNVIZ_BENCH_LARGE"); large && std::string(large) == "1") {
    b->Args({32, 8192, 64});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

void softmaxShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"H", "T", "d"});
  b->Args({12, 1024, 64});
  if (const char* large = std::getenv("ATTNVIZ_BENCH_LARGE"); large && std::string(large) == "1") {
    b->Args({32, 8192, 64});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_GpuFullMha)->Apply(shapes);
BENCHMARK(BM_GpuTwoGemms)->Apply(shapes);
BENCHMARK(BM_GpuReSoftmax)->Apply(softmaxShapes);
BENCHMARK(BM_GpuCopySameBytes)->Apply(softmaxShapes);
BENCHMARK(BM_GpuReadbackWeights)->Apply(softmaxShapes);

}  // namespace
