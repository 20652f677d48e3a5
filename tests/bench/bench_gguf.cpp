// ggml block types, single-threaded, each beside its floor measured in the same run:
//   GgufDequant/<T>       dequantizeRow over a [1024, 4096] matrix of type T into float32 (16 MB)
//   GgufDequantFloor      a memcpy of the same 16 MB of float32 output
//   GgufDotRow/<T>        dotRow of every row of a [8192, 4096] matrix of type T with one x
//                         (decode's matrix-vector product: bound by the stored bytes it reads)
//   GgufDotRowFloor/<T>   a memcpy of the same stored bytes
// Counters: "GB/s" is float32 output written (dequant) or stored bytes read (dotRow, memcpy
// floors: bytes copied); the ratio to the floor is what to read on a shared machine.
// Blocks are random bytes with finite, sane scales (as tools/gguf/quants.py's random_blocks), so
// every code path runs on realistic values.
#include "attnviz/engine/ggml_kernels.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using attnviz::GgmlType;

struct TypeCase {
  GgmlType type;
  std::vector<int> scaleOffsets;  // where each block's fp16 scales sit
};

const TypeCase kTypes[] = {
    {GgmlType::F32, {}},      {GgmlType::F16, {}},      {GgmlType::BF16, {}},
    {GgmlType::Q4_0, {0}},    {GgmlType::Q4_1, {0, 2}}, {GgmlType::Q5_0, {0}},
    {GgmlType::Q5_1, {0, 2}}, {GgmlType::Q8_0, {0}},    {GgmlType::Q2_K, {80, 82}},
    {GgmlType::Q3_K, {108}},  {GgmlType::Q4_K, {0, 2}}, {GgmlType::Q5_K, {0, 2}},
    {GgmlType::Q6_K, {208}},
};

// A half with |value| in [1e-3, 0.1]: exponent 5..11 of 15, random sign and mantissa.
std::uint16_t saneHalf(std::mt19937& gen) {
  const std::uint16_t exp = std::uint16_t(5 + gen() % 7);
  return std::uint16_t(((gen() & 1u) << 15) | (exp << 10) | (gen() & 0x3ffu));
}

// `values` values of `type` stored as ggml stores them.
std::vector<unsigned char> randomRows(const TypeCase& tc, std::int64_t values, unsigned seed) {
  std::mt19937 gen(seed);
  int bv = 0, bb = 0;
  attnviz::ggmlTypeInfo(std::uint32_t(tc.type), bv, bb);
  std::vector<unsigned char> raw(attnviz::ggmlRowBytes(tc.type, values));
  for (auto& b : raw) b = static_cast<unsigned char>(gen());
  if (tc.type == GgmlType::F32) {
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (std::size_t i = 0; i < raw.size(); i += 4) {
      const float v = n(gen);
      std::memcpy(&raw[i], &v, 4);
    }
  } else if (tc.type == GgmlType::F16 || tc.type == GgmlType::BF16) {
    for (std::size_t i = 0; i < raw.size(); i += 2) {
      std::uint16_t h = saneHalf(gen);
      if (tc.type == GgmlType::BF16)
        h = std::uint16_t(0x3c00u | (h & 0x80ffu));  // |v| in [2^-7, 2^-6)
      std::memcpy(&raw[i], &h, 2);
    }
  } else {
    for (std::size_t b = 0; b < raw.size(); b += std::size_t(bb))
      for (int off : tc.scaleOffsets) {
        const std::uint16_t h = saneHalf(gen);
        std::memcpy(&raw[b + std::size_t(off)], &h, 2);
      }
  }
  return raw;
}

constexpr std::int64_t kCols = 4096;

void GgufDequant(benchmark::State& state) {
  const TypeCase& tc = kTypes[state.range(0)];
  const std::int64_t rows = 1024;
  const std::vector<unsigned char> raw = randomRows(tc, rows * kCols, 1);
  const std::size_t rowBytes = attnviz::ggmlRowBytes(tc.type, kCols);
  std::vector<float> out(std::size_t(rows * kCols));
  for (auto _ : state) {
    for (std::int64_t r = 0; r < rows; ++r)
      attnviz::dequantizeRow(tc.type, raw.data() + std::size_t(r) * rowBytes,
                             out.data() + r * kCols, kCols);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(attnviz::ggmlTypeName(std::uint32_t(tc.type)));
  state.counters["GB/s"] = benchmark::Counter(double(out.size()) * 4.0 * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void GgufDequantFloor(benchmark::State& state) {
  const std::size_t n = std::size_t(1024 * kCols);
  std::vector<float> src(n, 1.0f), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * 4);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(double(n) * 4.0 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void GgufDotRow(benchmark::State& state) {
  const TypeCase& tc = kTypes[state.range(0)];
  const std::int64_t rows = 8192;
  const std::vector<unsigned char> raw = randomRows(tc, rows * kCols, 2);
  const std::size_t rowBytes = attnviz::ggmlRowBytes(tc.type, kCols);
  std::vector<float> x(kCols), y(rows);
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(gen);
  for (auto _ : state) {
    for (std::int64_t r = 0; r < rows; ++r)
      y[std::size_t(r)] =
          attnviz::dotRow(tc.type, raw.data() + std::size_t(r) * rowBytes, x.data(), kCols);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(attnviz::ggmlTypeName(std::uint32_t(tc.type)));
  state.counters["GB/s"] =
      benchmark::Counter(double(raw.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void GgufDotRowFloor(benchmark::State& state) {
  const TypeCase& tc = kTypes[state.range(0)];
  const std::size_t bytes = attnviz::ggmlRowBytes(tc.type, 8192 * kCols);
  std::vector<unsigned char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(attnviz::ggmlTypeName(std::uint32_t(tc.type)));
  state.counters["GB/s"] =
      benchmark::Counter(double(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Decode's product: matVec over 8192 x 4096 stored values on every thread (the K-quants at
// AVX-512 take x rounded to 16 bits, the rest the float kernels of GgufDotRow); GB/s of stored
// bytes, against GgufDotRowFloor's memcpy of the same bytes.
void GgufMatVec(benchmark::State& state) {
  const TypeCase& tc = kTypes[state.range(0)];
  const std::int64_t rows = 8192;
  const std::vector<unsigned char> raw = randomRows(tc, rows * kCols, 2);
  std::vector<float> x(kCols), y(rows);
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(gen);
  for (auto _ : state) {
    attnviz::matVec(tc.type, raw.data(), rows, kCols, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(attnviz::ggmlTypeName(std::uint32_t(tc.type)));
  state.counters["GB/s"] =
      benchmark::Counter(double(raw.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The same through the fast path (setFastActivations): x rounded to 8 bits per block for Q8_0
// and the K-quants at AVX2 and AVX-512; the other types as GgufMatVec.
void GgufMatVecFast(benchmark::State& state) {
  attnviz::setFastActivations(true);
  GgufMatVec(state);
  attnviz::setFastActivations(false);
}

constexpr int kTypeCount = int(sizeof(kTypes) / sizeof(kTypes[0]));

BENCHMARK(GgufDequant)->DenseRange(0, kTypeCount - 1)->Unit(benchmark::kMillisecond);
BENCHMARK(GgufDequantFloor)->Unit(benchmark::kMillisecond);
BENCHMARK(GgufDotRow)->DenseRange(0, kTypeCount - 1)->Unit(benchmark::kMillisecond);
BENCHMARK(GgufMatVec)->DenseRange(0, kTypeCount - 1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(GgufMatVecFast)
    ->DenseRange(0, kTypeCount - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(GgufDotRowFloor)->DenseRange(0, kTypeCount - 1)->Unit(benchmark::kMillisecond);

}  // namespace
