// ggml's tensor types (gguf.h): names and block shapes, and dequantization, dot products and
// matrix-vector products through the kernels of the instruction-set level in use
// (isa/ggml_kernels.cpp, attnviz/engine/isa.h).
#include "attnviz/engine/parallel.h"
#include "attnviz/formats/gguf.h"
#include "ggml_kernels.h"

#include <algorithm>
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

void matVecBatch(const MatVecJob* jobs, int count) {
  // Rows split over the CPU threads in chunks of about 64 KB of stored bytes, claimed
  // dynamically; work under two chunks stays on the calling thread (a wake-up costs more than it
  // saves).
  constexpr std::size_t kChunkBytes = std::size_t(64) << 10;
  struct Task {
    const TypeRow* type;
    const MatVecJob* job;
    std::int64_t r0, r1, nb;
    std::size_t rowBytes;
  };
  std::vector<Task> tasks;
  for (int j = 0; j < count; ++j) {
    const MatVecJob& m = jobs[j];
    const TypeRow& r = readable(m.type, m.n, "matVec");
    const std::int64_t nb = m.n / r.blockValues;
    const std::size_t rowBytes = std::size_t(nb) * std::size_t(r.blockBytes);
    const std::int64_t chunk =
        std::max<std::int64_t>(1, std::int64_t(kChunkBytes / std::max<std::size_t>(rowBytes, 1)));
    for (std::int64_t r0 = 0; r0 < m.nRows; r0 += chunk)
      tasks.push_back({&r, &m, r0, std::min(m.nRows, r0 + chunk), nb, rowBytes});
  }
  auto run = [&](const Task& t) {
    const auto* p = static_cast<const unsigned char*>(t.job->rows);
    for (std::int64_t i = t.r0; i < t.r1; ++i)
      t.job->y[i] = t.type->dot(p + std::size_t(i) * t.rowBytes, t.job->x, t.nb);
  };
  if (tasks.size() < 2) {
    for (const Task& t : tasks) run(t);
    return;
  }
  detail::parallelFor(int(tasks.size()), [&](int t) { run(tasks[std::size_t(t)]); });
}

}  // namespace attnviz
