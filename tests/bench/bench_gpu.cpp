// attnviz_bench, GPU cases: the OpenGL compute backend on the shapes of the CPU cases.
//
// Dispatch time is measured to glFinish (the GPU work complete); readback is its own case.
// Wall-clock time is used (UseRealTime): the driver's worker threads do the work.
// Counters as in bench_cpu.cpp: GFLOP/s counts 2 T_q T_k d per GEMM per head for the attention
// cases; GB/s (S read + A written) and GFLOP/s (5 per element) for the re-softmax and its floor.
// Cases and their floors, measured in the same run:
//   BM_GpuFullMha      upload Q, K, V; S = QK^T/sqrt(d); softmax (no mask); O = AV; glFinish
//   BM_GpuTwoGemms     the same without the softmax (its GEMM floor)
//   BM_GpuReSoftmax    softmax from the cached S after a temperature change; glFinish
//   BM_GpuCopySameBytes  glCopyBufferSubData of the same bytes (its memory floor)
//   BM_GpuReadbackWeights  result(kStageWeights): the [H, T, T] weights to host memory
// ATTNVIZ_BENCH_LARGE=1 adds 32 heads x T=8192 (17 GiB of GPU buffers: for real GPUs only).
#define GL_GLEXT_PROTOTYPES 1
#include "bench_util.h"
#include <GL/glcorearb.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "attnviz/gpu/gpu_engine.h"

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

using attnviz::bench::randomTensor;

struct Shape {
  int H, T, d;
};

Shape shapeOf(const benchmark::State& s) {
  return {int(s.range(0)), int(s.range(1)), int(s.range(2))};
}

double gemmFlops(const Shape& s) { return 2.0 * 2.0 * s.H * double(s.T) * s.T * s.d; }

AttentionParams noMask() { return AttentionParams{}; }  // as the CPU cases: every (i, j)

void setAttentionCounters(benchmark::State& state, const Shape& s) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(gemmFlops(s) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void setSoftmaxCounters(benchmark::State& state, double floats) {
  state.counters["GB/s"] =
      benchmark::Counter(2.0 * floats * 4.0 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(5.0 * floats * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

#define GPU_OR_SKIP(state, var)          \
  std::string why_;                      \
  GpuEngine* var = engine(why_);         \
  if (var == nullptr) {                  \
    (state).SkipWithError(why_.c_str()); \
    return;                              \
  }

// Full MHA: upload Q, K, V, S = QK^T/sqrt(d), causal softmax, O = AV; to glFinish.
void BM_GpuFullMha(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  const Tensor3 q = randomTensor(s.H, s.T, s.d, 1), k = randomTensor(s.H, s.T, s.d, 2),
                v = randomTensor(s.H, s.T, s.d, 3);
  const AttentionParams p = noMask();
  gpu->run(q, k, v, p);  // warm-up: allocation and shader first use
  glFinish();
  for (auto _ : state) {
    gpu->run(q, k, v, p);
    glFinish();
  }
  setAttentionCounters(state, s);
}

// Floor for the full MHA: the two GEMMs alone (upload + S, then AV), to glFinish.
void BM_GpuTwoGemms(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  const Tensor3 q = randomTensor(s.H, s.T, s.d, 1), k = randomTensor(s.H, s.T, s.d, 2),
                v = randomTensor(s.H, s.T, s.d, 3);
  gpu->run(q, k, v, noMask());
  glFinish();
  for (auto _ : state) {
    gpu->setInputs(q, k, v);
    gpu->output();
    glFinish();
  }
  setAttentionCounters(state, s);
}

// Re-softmax from the cached S (a temperature change): no GEMM; to glFinish.
void BM_GpuReSoftmax(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  gpu->run(randomTensor(s.H, s.T, s.d, 1), randomTensor(s.H, s.T, s.d, 2),
           randomTensor(s.H, s.T, s.d, 3), noMask());
  glFinish();
  AttentionParams p = noMask();
  int n = 0;  // alternate the temperature, as the GUI's slider does
  for (auto _ : state) {
    p.temperature = (n++ % 2) ? 0.5f : 2.0f;
    gpu->softmax(p);
    glFinish();
  }
  setSoftmaxCounters(state, double(s.H) * s.T * s.T);
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
  setSoftmaxCounters(state, double(s.H) * s.T * s.T);
}

// Readback of the weights [H, T, T] to host memory (what the CLI and export pay).
void BM_GpuReadbackWeights(benchmark::State& state) {
  GPU_OR_SKIP(state, gpu);
  const Shape s = shapeOf(state);
  gpu->run(randomTensor(s.H, s.T, s.d, 1), randomTensor(s.H, s.T, s.d, 2),
           randomTensor(s.H, s.T, s.d, 3), noMask());
  glFinish();
  for (auto _ : state) benchmark::DoNotOptimize(gpu->result(kStageWeights).weights.data.data());
  state.counters["GB/s"] = benchmark::Counter(double(s.H) * s.T * s.T * 4.0 * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
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
