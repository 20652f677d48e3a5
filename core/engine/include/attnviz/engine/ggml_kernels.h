// attnviz engine: ggml's tensor types and the kernels over their stored blocks: the type table
// (names and block shapes of every type ggml defines), dequantization, dot products and decode's
// matrix-vector products, compiled once per instruction-set level (src/isa/ggml_kernels.cpp,
// attnviz/engine/isa.h) and served from the level in use. The blocks come from a GGUF file
// (attnviz/formats/gguf.h reads the container) or from a safetensors F16/BF16 tensor.
#pragma once

#include "attnviz/engine/isa.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace attnviz {

// ggml's tensor type ids (the ones attnviz reads, and the names of the rest for messages).
enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

// "Q4_K", "IQ2_XXS", ... or "type 99" for an id ggml does not define.
std::string ggmlTypeName(std::uint32_t type);
// Values per block (1 for F32/F16/BF16, 32 for the legacy quants, 256 for K-quants) and bytes per
// block; false for a type attnviz cannot dequantize (IQ types, Q8_1, unknown ids).
bool ggmlTypeInfo(std::uint32_t type, int& blockValues, int& blockBytes);
// Bytes of n values (n a multiple of the block size).
std::size_t ggmlRowBytes(GgmlType type, std::int64_t n);
// The block layout of every type ggml defines for files, readable or not (IQ types, Q8_1, I8 ...
// included); false for unknown ids and for ids ggml removed (Q4_2, Q4_0_4_4, ...).
bool ggmlTypeLayout(std::uint32_t type, int& blockValues, int& blockBytes);
// Whether ggml has (or had) a type with this id, so ggmlTypeName() gives it a real name.
bool ggmlTypeKnown(std::uint32_t type);

// Dequantizes n values (a multiple of the type's block size) of `type` at src into dst, exactly
// as ggml's block layouts define them (float32 arithmetic in ggml's order).
// src needs no alignment. Throws std::invalid_argument for a type ggmlTypeInfo() refuses or an n
// that is not a whole number of blocks (a caller's bug: GgufFile validated its tensors).
void dequantizeRow(GgmlType type, const void* src, float* dst, std::int64_t n);
// dot(row, x) over n values of a stored row, without expanding it to float32 first (decode's
// matrix-vector products read the blocks as they are stored). Agrees with
// dot(dequantizeRow(row), x) to float32 rounding (~1e-6 of sum |w_i x_i|), not bit for bit: the
// AVX-512 kernels scale each block's sum once. Same preconditions and errors as dequantizeRow.
float dotRow(GgmlType type, const void* row, const float* x, std::int64_t n);
// The same two through the kernels of one instruction-set level (attnviz/engine/isa.h; a level
// this CPU lacks reads as the best it has), for tests that compare the levels.
void dequantizeRowAt(Isa isa, GgmlType type, const void* src, float* dst, std::int64_t n);
float dotRowAt(Isa isa, GgmlType type, const void* row, const float* x, std::int64_t n);
// y[r] = dot(row r, x) for r in [0, nRows): a stored [nRows, n] matrix times x (decode's
// matrix-vector product), checked once for the whole matrix, with dotRow's agreement to float32
// rounding. Rows are split over the CPU threads (engine's thread pool) in chunks of 64 KB to 1 MB
// of stored bytes (a quarter of each thread's share); each y[r] is the same whichever thread
// computes it. Most types take dotRow's
// kernels; the K-quants (Q4_K, Q5_K, Q6_K at AVX2 and AVX-512) take x once in two 16-bit integer
// parts and multiply the codes in integers (ggml_kernels.h, QuantX16), so y[r] differs from
// dotRow in the last bits.
void matVec(GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n, const float* x,
            float* y);
// The same through the kernels of one instruction-set level, for tests that compare the levels.
// `fast`: the fast path's kernels where the level has them (setFastActivations below).
void matVecAt(Isa isa, GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n,
              const float* x, float* y, bool fast = false);
// Several matVec products in one parallel loop (decode's q, k and v; gate and up): one wake-up of
// the thread pool instead of one per matrix, the same y as matVec on each.
struct MatVecJob {
  GgmlType type = GgmlType::F32;
  const void* rows = nullptr;
  std::int64_t nRows = 0, n = 0;
  const float* x = nullptr;
  float* y = nullptr;
};
void matVecBatch(const MatVecJob* jobs, int count);

// The fast path, off by default and process-wide (the CLI's --fast-activations, the app's
// Compute menu): decode's matrix-vector products (matVec, matVecBatch) on Q8_0, Q4_K, Q5_K and
// Q6_K rows round x to 8-bit integers, one scale per block of the weights (1/127 of the block's
// largest |x|), and sum each block's products in integers, as llama.cpp does. Faster (fewer
// instructions per stored byte), but no longer exact to float32 rounding: each product carries
// x's rounding, up to half a step of 1/127 of its block's largest |x|. Other types, the baseline
// level, and an x with a value that is not finite take the exact kernels whatever the setting.
void setFastActivations(bool on);
bool fastActivations();
// Whether the level in use has the fast path's kernel for `type`.
bool fastActivationKernel(GgmlType type);

// The fast path in a prompt's products (a pass with fastActivations() on: the CLI's model,
// heads and generate, the app's views): Y[t, r] = dot(stored row r, X row t) for t < m,
// r < nRows, each row of X rounded to 8 bits per 256 values as decode's fast path rounds x, the
// products summed in integers (VNNI where the CPU has it: AVX512-VNNI, or AVX-VNNI at the AVX2
// level). The K-quants Q4_K, Q5_K and Q6_K at the AVX2 and AVX-512 levels; false (Y untouched)
// for other types and the baseline level, or an X with a value
// that is not finite: the caller then takes the exact products. Y's rows are ldy floats apart,
// X's ldx.
bool matMulFast(GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n, const float* X,
                std::int64_t ldx, std::int64_t m, float* Y, std::int64_t ldy);
// The same through one level's kernels, with or without VNNI (vnni = false takes the two-step
// byte products that CPUs without VNNI run), for tests.
bool matMulFastAt(Isa isa, bool vnni, GgmlType type, const void* rows, std::int64_t nRows,
                  std::int64_t n, const float* X, std::int64_t ldx, std::int64_t m, float* Y,
                  std::int64_t ldy);
// Whether the level in use has matMulFast's kernel for `type`.
bool fastPassKernel(GgmlType type);

}  // namespace attnviz
