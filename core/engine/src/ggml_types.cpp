// ggml's tensor types (attnviz/engine/ggml_kernels.h): names and block shapes, and
// dequantization, dot products and matrix-vector products through the kernels of the
// instruction-set level in use (isa/ggml_kernels.cpp, attnviz/engine/isa.h).
#include "attnviz/engine/ggml_kernels.h"

#include "attnviz/engine/engine.h"  // cpuThreads
#include "attnviz/engine/parallel.h"
#include "ggml_table.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnviz {

namespace detail {
const TypeRow* ggmlTypes(Isa isa) {
#if ATTNVIZ_ISA_X86
  if (isa == Isa::Avx512) return ggmlTypesAvx512;
  if (isa == Isa::Avx2) return ggmlTypesAvx2;
#else
  (void)isa;
#endif
  return ggmlTypesBaseline;
}
}  // namespace detail

namespace {

using detail::TypeRow;

// The level's table, chosen once.
const TypeRow* table() {
  static const TypeRow* const t = detail::ggmlTypes(activeIsa());
  return t;
}

const TypeRow* findType(std::uint32_t type) {
  return type < detail::kGgmlTypeCount ? &table()[type] : nullptr;
}

const TypeRow& readable(GgmlType type, std::int64_t n, const char* what) {
  const TypeRow* r = findType(std::uint32_t(type));
  if (!r || !r->dequant) {
    throw std::invalid_argument(std::string(what) + ": cannot read type " +
                                ggmlTypeName(std::uint32_t(type)));
  }
  if (n < 0 || n % r->blockValues != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) +
                                " values are not a whole number of " + r->name + " blocks of " +
                                std::to_string(r->blockValues));
  }
  return *r;
}

}  // namespace

std::string ggmlTypeName(std::uint32_t type) {
  const TypeRow* r = findType(type);
  return r ? std::string(r->name) : "type " + std::to_string(type);
}

bool ggmlTypeLayout(std::uint32_t type, int& blockValues, int& blockBytes) {
  const TypeRow* r = findType(type);
  if (!r || r->blockValues == 0) return false;
  blockValues = r->blockValues;
  blockBytes = r->blockBytes;
  return true;
}

bool ggmlTypeKnown(std::uint32_t type) { return findType(type) != nullptr; }

bool ggmlTypeInfo(std::uint32_t type, int& blockValues, int& blockBytes) {
  const TypeRow* r = findType(type);
  if (!r || !r->dequant) return false;
  blockValues = r->blockValues;
  blockBytes = r->blockBytes;
  return true;
}

std::size_t ggmlRowBytes(GgmlType type, std::int64_t n) {
  const TypeRow* r = findType(std::uint32_t(type));
  if (!r || r->blockValues == 0 || n < 0) return 0;
  return std::size_t(n / r->blockValues) * std::size_t(r->blockBytes);
}

void dequantizeRow(GgmlType type, const void* src, float* dst, std::int64_t n) {
  const TypeRow& r = readable(type, n, "dequantizeRow");
  r.dequant(static_cast<const unsigned char*>(src), dst, n / r.blockValues);
}

void dequantizeRowAt(Isa isa, GgmlType type, const void* src, float* dst, std::int64_t n) {
  const TypeRow& r = readable(type, n, "dequantizeRow");
  detail::ggmlTypes(usableIsa(isa))[std::uint32_t(type)].dequant(
      static_cast<const unsigned char*>(src), dst, n / r.blockValues);
}

float dotRowAt(Isa isa, GgmlType type, const void* row, const float* x, std::int64_t n) {
  const TypeRow& r = readable(type, n, "dotRow");
  return detail::ggmlTypes(usableIsa(isa))[std::uint32_t(type)].dot(
      static_cast<const unsigned char*>(row), x, n / r.blockValues);
}

float dotRow(GgmlType type, const void* row, const float* x, std::int64_t n) {
  const TypeRow& r = readable(type, n, "dotRow");
  return r.dot(static_cast<const unsigned char*>(row), x, n / r.blockValues);
}

void matVec(GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n, const float* x,
            float* y) {
  const MatVecJob job{type, rows, nRows, n, x, y};
  matVecBatch(&job, 1);
}

namespace {

// x in two 16-bit parts per group of 32 (detail::QuantX16); false where x has a value that is
// not finite (the float kernels then carry it through as they would).
struct QuantizedX {
  std::vector<std::int16_t> q, r;
  std::vector<float> scale, sum;
  bool quantize(const float* x, std::int64_t n) {
    const std::size_t groups = std::size_t(n / 32);
    q.resize(std::size_t(n));
    r.resize(std::size_t(n));
    scale.resize(groups);
    sum.resize(groups);
    for (std::size_t g = 0; g < groups; ++g) {
      const float* v = x + 32 * g;
      float m = 0.0f;
      bool finite = true;
      for (int i = 0; i < 32; ++i) {
        m = std::max(m, std::fabs(v[i]));
        finite = finite && std::isfinite(v[i]);
      }
      if (!finite) {
        q.clear();
        return false;
      }
      std::int16_t* hi = q.data() + 32 * g;
      std::int16_t* lo = r.data() + 32 * g;
      if (m == 0.0f) {
        std::fill(hi, hi + 32, std::int16_t(0));
        std::fill(lo, lo + 32, std::int16_t(0));
        scale[g] = 0.0f;
        sum[g] = 0.0f;
        continue;
      }
      // In double: t = x / step exactly enough that q + r / 65536 is t to 2^-17 of a step.
      const double inv = 32767.0 / double(m);
      double total = 0.0;
      for (int i = 0; i < 32; ++i) {
        const double t = double(v[i]) * inv;
        const double a = std::clamp(std::nearbyint(t), -32767.0, 32767.0);
        const double b = std::clamp(std::nearbyint((t - a) * 65536.0), -32767.0, 32767.0);
        hi[i] = std::int16_t(a);
        lo[i] = std::int16_t(b);
        total += a + b / 65536.0;
      }
      scale[g] = float(double(m) / 32767.0);
      sum[g] = float(double(scale[g]) * total);
    }
    return true;
  }
};

// One block of `block` values of x rounded to 8-bit integers: d = the largest |x| / 127 (0 for a
// block of zeros), o[i] = x[i] / d to nearest; false (o unset) where a value is not finite.
bool roundBlock8(const float* v, int block, signed char* o, float& d) {
  float m = 0.0f;
  bool finite = true;
  for (int i = 0; i < block; ++i) {
    m = std::max(m, std::fabs(v[i]));
    finite = finite && std::isfinite(v[i]);
  }
  if (!finite) return false;
  const double inv = m == 0.0f ? 0.0 : 127.0 / double(m);
  for (int i = 0; i < block; ++i)
    o[i] = static_cast<signed char>(std::clamp(std::nearbyint(double(v[i]) * inv), -127.0, 127.0));
  d = float(double(m) / 127.0);
  return true;
}

// x rounded to 8-bit integers per block of `block` values (detail::QuantX8), for the fast path;
// false where x has a value that is not finite (the exact kernels then run).
struct QuantizedX8 {
  std::vector<signed char> q;
  std::vector<float> d;
  std::vector<std::int16_t> bsum;
  int block = 0;
  bool quantize(const float* x, std::int64_t n, int blockValues) {
    block = blockValues;
    const std::size_t blocks = std::size_t(n / block);
    q.resize(std::size_t(n));
    d.resize(blocks);
    bsum.assign(block == 256 ? std::size_t(n / 16) : 0, 0);  // the K-quants' (Q8_0 reads none)
    for (std::size_t b = 0; b < blocks; ++b) {
      if (!roundBlock8(x + std::size_t(block) * b, block, q.data() + std::size_t(block) * b,
                       d[b])) {
        q.clear();
        return false;
      }
    }
    for (std::size_t g = 0; g < bsum.size(); ++g) {
      int t = 0;
      for (int i = 0; i < 16; ++i) t += q[16 * g + std::size_t(i)];
      bsum[g] = std::int16_t(t);
    }
    return true;
  }
};

std::atomic<bool> gFastActivations{false};

void matVecBatchWith(const TypeRow* level, const MatVecJob* jobs, int count, bool fast) {
  // Rows split over the CPU threads in chunks claimed dynamically: a quarter of each thread's
  // share of the batch's stored bytes, at least 64 KB and at most 1 MB; work under two chunks
  // stays on the calling thread (a wake-up costs more than it saves). Long chunks keep each
  // thread streaming one range: 8192 x 4096 Q8_0/Q4_K/Q6_K rows from memory (65536 of them, on
  // two threads) read at 29-37 GB/s in 64 KB chunks, 40-48 in 256 KB and 42-51 in 1 MB, against
  // 48-50 for a plain two-thread read; a quarter share keeps the threads' ends near each other.
  // Types with a 16-bit kernel at this level (the K-quants at AVX2 and AVX-512) take x in two
  // 16-bit parts, converted once per job (QuantizedX); the rest take x as it is.
  std::size_t totalBytes = 0;
  for (int j = 0; j < count; ++j) {
    const TypeRow& r = readable(jobs[j].type, jobs[j].n, "matVec");
    totalBytes += std::size_t(std::max<std::int64_t>(jobs[j].nRows, 0)) *
                  std::size_t(jobs[j].n / r.blockValues) * std::size_t(r.blockBytes);
  }
  const std::size_t kChunkBytes =
      std::clamp(totalBytes / std::size_t(4 * std::max(1, cpuThreads())), std::size_t(64) << 10,
                 std::size_t(1) << 20);
  struct Task {
    const TypeRow* type;
    const MatVecJob* job;
    const QuantizedX* xq;
    const QuantizedX8* x8;
    std::int64_t r0, r1, nb;
    std::size_t rowBytes;
  };
  std::vector<Task> tasks;
  std::vector<QuantizedX> quantized(std::size_t(std::max(count, 0)));
  std::vector<QuantizedX8> quantized8(fast ? std::size_t(std::max(count, 0)) : 0);
  for (int j = 0; j < count; ++j) {
    const MatVecJob& m = jobs[j];
    readable(m.type, m.n, "matVec");
    const TypeRow& r = level[std::uint32_t(m.type)];
    const std::int64_t nb = m.n / r.blockValues;
    const std::size_t rowBytes = std::size_t(nb) * std::size_t(r.blockBytes);
    const QuantizedX* xq = nullptr;
    const QuantizedX8* x8 = nullptr;
    if (fast && r.dotQ8 && m.nRows > 0) {
      for (int k = 0; k < j && !x8; ++k)
        if (jobs[k].x == m.x && jobs[k].n == m.n &&
            quantized8[std::size_t(k)].block == r.blockValues &&
            !quantized8[std::size_t(k)].q.empty())
          x8 = &quantized8[std::size_t(k)];
      if (!x8 && quantized8[std::size_t(j)].quantize(m.x, m.n, r.blockValues))
        x8 = &quantized8[std::size_t(j)];
    }
    if (!x8 && r.dotQ16 && m.nRows > 0) {
      // Jobs that share x (q, k and v; gate and up) share its conversion.
      for (int k = 0; k < j && !xq; ++k)
        if (jobs[k].x == m.x && jobs[k].n == m.n && !quantized[std::size_t(k)].q.empty())
          xq = &quantized[std::size_t(k)];
      if (!xq && quantized[std::size_t(j)].quantize(m.x, m.n)) xq = &quantized[std::size_t(j)];
    }
    const std::int64_t chunk =
        std::max<std::int64_t>(1, std::int64_t(kChunkBytes / std::max<std::size_t>(rowBytes, 1)));
    for (std::int64_t r0 = 0; r0 < m.nRows; r0 += chunk)
      tasks.push_back({&r, &m, xq, x8, r0, std::min(m.nRows, r0 + chunk), nb, rowBytes});
  }
  auto run = [&](const Task& t) {
    const auto* p = static_cast<const unsigned char*>(t.job->rows);
    if (t.x8) {
      const detail::QuantX8 x{t.x8->q.data(), t.x8->d.data(), t.x8->bsum.data()};
      for (std::int64_t i = t.r0; i < t.r1; ++i)
        t.job->y[i] = t.type->dotQ8(p + std::size_t(i) * t.rowBytes, x, t.nb);
      return;
    }
    if (t.xq) {
      const detail::QuantX16 x{t.xq->q.data(), t.xq->r.data(), t.xq->scale.data(),
                               t.xq->sum.data()};
      for (std::int64_t i = t.r0; i < t.r1; ++i)
        t.job->y[i] = t.type->dotQ16(p + std::size_t(i) * t.rowBytes, x, t.nb);
      return;
    }
    for (std::int64_t i = t.r0; i < t.r1; ++i)
      t.job->y[i] = t.type->dot(p + std::size_t(i) * t.rowBytes, t.job->x, t.nb);
  };
  if (tasks.size() < 2) {
    for (const Task& t : tasks) run(t);
    return;
  }
  detail::parallelFor(int(tasks.size()), [&](int t) { run(tasks[std::size_t(t)]); });
}

}  // namespace

void matVecBatch(const MatVecJob* jobs, int count) {
  matVecBatchWith(table(), jobs, count, gFastActivations.load(std::memory_order_relaxed));
}

void matVecAt(Isa isa, GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n,
              const float* x, float* y, bool fast) {
  const MatVecJob job{type, rows, nRows, n, x, y};
  matVecBatchWith(detail::ggmlTypes(usableIsa(isa)), &job, 1, fast);
}

namespace {

// Whether the pass kernels of `isa` can take their VNNI form: AVX512-VNNI at AVX-512, AVX-VNNI
// (its 256-bit form) at AVX2.
// ATTNVIZ_NO_VNNI=1 takes the other form (to time what a CPU without VNNI runs).
bool cpuHasVnni(Isa isa) {
#if ATTNVIZ_ISA_X86 && (defined(__GNUC__) || defined(__clang__))
  static const bool off = [] {
    const char* e = std::getenv("ATTNVIZ_NO_VNNI");
    return e && std::string(e) == "1";
  }();
  if (off) return false;
  static const bool has512 = [] {
    __builtin_cpu_init();
    return bool(__builtin_cpu_supports("avx512vnni"));
  }();
  static const bool has256 = [] {
    __builtin_cpu_init();
    return bool(__builtin_cpu_supports("avxvnni"));
  }();
  return isa == Isa::Avx512 ? has512 : isa == Isa::Avx2 ? has256 : false;
#else
  (void)isa;
  return false;
#endif
}

// A prompt's rows of x rounded for the pass kernels (detail::PassX8): every element is written
// by round8 before it is read, so none is zero-filled first.
struct PassXBuffers {
  std::vector<signed char, NoInitAllocator<signed char>> q;
  FloatBuffer d, sum16, sum32;
};

bool matMulFastWith(const TypeRow* level, bool vnni, GgmlType type, const void* rows,
                    std::int64_t nRows, std::int64_t n, const float* X, std::int64_t ldx,
                    std::int64_t m, float* Y, std::int64_t ldy) {
  readable(type, n, "matMulFast");
  const TypeRow& r = level[std::uint32_t(type)];
  if (!r.pass8 || !r.round8 || m < 1 || nRows < 1 || n < 1) return false;
  const std::int64_t nb = n / 256;
  PassXBuffers b;
  b.q.resize(std::size_t(m * n));
  b.d.resize(std::size_t(m * nb));
  b.sum16.resize(std::size_t(m * (n / 16)));
  b.sum32.resize(std::size_t(m * (n / 32)));
  std::atomic<bool> finite{true};
  constexpr int kXRows = 16;
  detail::parallelFor(int((m + kXRows - 1) / kXRows), [&](int g) {
    const std::int64_t t1 = std::min(m, std::int64_t(g + 1) * kXRows);
    for (std::int64_t t = std::int64_t(g) * kXRows; t < t1 && finite; ++t) {
      if (!r.round8(X + t * ldx, nb, b.q.data() + t * n, b.d.data() + t * nb,
                    b.sum16.data() + t * (n / 16))) {
        finite = false;
        return;
      }
      for (std::int64_t k = 0; k < n / 32; ++k)
        b.sum32[std::size_t(t * (n / 32) + k)] = b.sum16[std::size_t(t * (n / 16) + 2 * k)] +
                                                 b.sum16[std::size_t(t * (n / 16) + 2 * k + 1)];
    }
  });
  if (!finite) return false;
  const detail::PassX8 x{b.q.data(), b.d.data(), b.sum16.data(), b.sum32.data(), n};
  const std::size_t rowBytes = std::size_t(nb) * std::size_t(r.blockBytes);
  const std::size_t scratchBytes = std::size_t(nb) * detail::kPass8ScratchPerBlock * 2;
  const auto* base = static_cast<const unsigned char*>(rows);
  const int groups =
      int((nRows + std::int64_t(detail::kPass8Rows) - 1) / std::int64_t(detail::kPass8Rows));
  detail::parallelFor(groups, [&](int g) {
    // Each thread's repacked rows (12 KB per 256 values for 32 rows: 96 KB at n = 2048), kept
    // between calls.
    thread_local std::vector<unsigned char> scratch;
    if (scratch.size() < scratchBytes + 64) scratch.resize(scratchBytes + 64);
    auto* aligned = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<std::uintptr_t>(scratch.data()) + 63) & ~std::uintptr_t(63));
    const std::int64_t r0 = std::int64_t(g) * std::int64_t(detail::kPass8Rows);
    const int nr = int(std::min<std::int64_t>(std::int64_t(detail::kPass8Rows), nRows - r0));
    r.pass8(base + std::size_t(r0) * rowBytes, rowBytes, nr, nb, x, m, Y, ldy, r0, aligned, vnni);
  });
  return true;
}

}  // namespace

bool matMulFast(GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n, const float* X,
                std::int64_t ldx, std::int64_t m, float* Y, std::int64_t ldy) {
  return matMulFastWith(table(), cpuHasVnni(activeIsa()), type, rows, nRows, n, X, ldx, m, Y, ldy);
}

bool matMulFastAt(Isa isa, bool vnni, GgmlType type, const void* rows, std::int64_t nRows,
                  std::int64_t n, const float* X, std::int64_t ldx, std::int64_t m, float* Y,
                  std::int64_t ldy) {
  const Isa level = usableIsa(isa);
  return matMulFastWith(detail::ggmlTypes(level), vnni && cpuHasVnni(level), type, rows, nRows, n,
                        X, ldx, m, Y, ldy);
}

bool fastPassKernel(GgmlType type) {
  const TypeRow* r = findType(std::uint32_t(type));
  return r && r->pass8;
}

void setFastActivations(bool on) { gFastActivations.store(on, std::memory_order_relaxed); }
bool fastActivations() { return gFastActivations.load(std::memory_order_relaxed); }
bool fastActivationKernel(GgmlType type) {
  const TypeRow* r = findType(std::uint32_t(type));
  return r && r->dotQ8;
}

}  // namespace attnviz
