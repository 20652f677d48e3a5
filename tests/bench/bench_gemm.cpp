// The linear layers' product (linearABt, attnviz/engine/isa.h) at a Llama-3.2-1B layer's shapes
// with T = 512 rows, beside two floors measured in the same run:
//   LinearPacked/<type>/<shape>  linearABt: the packed kernels at the active level, B's rows
//                                float32 (type 0) or converted from stored F16 (1) / Q4_K (2)
//                                blocks as they are packed
//   LinearEigen/<shape>          the same product through Eigen's kernels of the same level, a
//                                block of B's rows a task (linear()'s path before the packed one)
//   FmaPeak                      the FMA units' peak: independent FMAs on every thread, nothing
//                                loaded (GFLOP/s; a GEMM's ceiling)
// Times are the process's CPU time, all threads together (on a shared machine the wall time moves
// with the load, the CPU time much less); GFLOP/s is per core: flops / CPU seconds.
// Shapes: 0 = q/o [2048 x 2048], 1 = up/gate [8192 x 2048], 2 = down [2048 x 8192].
#include "attnviz/engine/engine.h"
#include "attnviz/engine/isa.h"
#include "attnviz/engine/parallel.h"
#include "attnviz/engine/tensor.h"
#include "attnviz/engine/ggml_kernels.h"

#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int kT = 512;
constexpr int kShapes[3][2] = {{2048, 2048}, {8192, 2048}, {2048, 8192}};  // [out, in]

std::vector<float> randomFloats(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : v) x = d(gen);
  return v;
}

std::uint16_t toHalf(float f) {  // normal range only (the values here are)
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const int e = int((u >> 23) & 0xff) - 127 + 15;
  if (e <= 0) return std::uint16_t(sign);
  return std::uint16_t(sign | (std::uint32_t(e) << 10) | ((u >> 13) & 0x3ff));
}

struct Stored {
  attnviz::GgmlType type;
  std::vector<unsigned char> bytes;
  std::size_t rowBytes;
};

Stored makeStored(attnviz::GgmlType type, int rows, int cols) {
  Stored s{type, {}, attnviz::ggmlRowBytes(type, cols)};
  s.bytes.resize(s.rowBytes * std::size_t(rows));
  std::mt19937 gen(7);
  if (type == attnviz::GgmlType::F16) {
    const std::vector<float> w = randomFloats(std::size_t(rows) * cols, 3);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const std::uint16_t h = toHalf(0.02f * w[i]);
      std::memcpy(&s.bytes[2 * i], &h, 2);
    }
  } else {  // Q4_K: random codes and scales, d and dmin small halves
    for (auto& b : s.bytes) b = static_cast<unsigned char>(gen());
    const std::size_t blocks = s.bytes.size() / 144;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::uint16_t d = toHalf(0.001f), dmin = toHalf(0.0005f);
      std::memcpy(&s.bytes[b * 144], &d, 2);
      std::memcpy(&s.bytes[b * 144 + 2], &dmin, 2);
    }
  }
  return s;
}

void fillStored(const void* ctx, int r, int k0, int kc, float* out) {
  const Stored& s = *static_cast<const Stored*>(ctx);
  const std::size_t offset = attnviz::ggmlRowBytes(s.type, k0);  // k0: whole blocks
  attnviz::dequantizeRow(s.type, s.bytes.data() + std::size_t(r) * s.rowBytes + offset, out, kc);
}

void setFlops(benchmark::State& state, int n, int k) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kT * n * k * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// type: 0 F32, 1 F16, 2 Q4_K
void LinearPacked(benchmark::State& state) {
  const int type = int(state.range(0)), shape = int(state.range(1));
  const int n = kShapes[shape][0], k = kShapes[shape][1];
  const std::vector<float> A = randomFloats(std::size_t(kT) * k, 1);
  std::vector<float> B, C(std::size_t(kT) * n);
  Stored st;
  attnviz::GemmRows rows;
  if (type == 0) {
    B = randomFloats(std::size_t(n) * k, 2);
    rows.f32 = B.data(), rows.ld = k;
  } else {
    st = makeStored(type == 1 ? attnviz::GgmlType::F16 : attnviz::GgmlType::Q4_K, n, k);
    rows.fill = &fillStored, rows.ctx = &st;
  }
  for (auto _ : state) {
    attnviz::linearABt(kT, n, k, A.data(), k, rows, C.data(), n);
    benchmark::DoNotOptimize(C.data());
  }
  setFlops(state, n, k);
}

void LinearEigen(benchmark::State& state) {
  const int shape = int(state.range(0));
  const int n = kShapes[shape][0], k = kShapes[shape][1];
  const std::vector<float> A = randomFloats(std::size_t(kT) * k, 1), B = randomFloats(std::size_t(n) * k, 2);
  std::vector<float> C(std::size_t(kT) * n);
  const int chunk = n >= 4096 ? 1024 : std::max(64, (n + attnviz::cpuThreads() - 1) / attnviz::cpuThreads());
  const auto& eigen = attnviz::detail::gemmKernels(attnviz::activeIsa());
  for (auto _ : state) {
    attnviz::detail::parallelFor((n + chunk - 1) / chunk, [&](int t) {
      const int r0 = t * chunk, nr = std::min(n, r0 + chunk) - r0;
      eigen.abt(kT, nr, k, A.data(), k, B.data() + std::size_t(r0) * k, k, C.data() + r0, n, false);
    });
    benchmark::DoNotOptimize(C.data());
  }
  setFlops(state, n, k);
}

// 12 independent chains of AVX-512 FMAs (16 floats, 2 flops each) on every thread, nothing
// loaded or stored: the FMA units' peak, the ceiling of any float32 GEMM on this machine.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fmaChains(int iters, float seed) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  float s = 0;
  for (int i = 0; i < 12; ++i) s += _mm512_reduce_add_ps(acc[i]);
  return s;
}

void FmaPeak(benchmark::State& state) {
  if (attnviz::activeIsa() != attnviz::Isa::Avx512) {
    state.SkipWithError("needs AVX-512");
    return;
  }
  constexpr int kIters = 1 << 22;
  const int threads = attnviz::cpuThreads();
  std::atomic<float> sink{0};
  for (auto _ : state) {
    attnviz::detail::parallelFor(threads, [&](int t) {
      const float s = fmaChains(kIters, float(t));
      sink = sink + s;
    });
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 16 * 12 * double(kIters) * threads * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(FmaPeak)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
#endif

}  // namespace

BENCHMARK(LinearPacked)->ArgsProduct({{0, 1, 2}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(LinearEigen)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
