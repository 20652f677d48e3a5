// attnviz engine (internal): the table one level of isa/ggml_kernels.cpp exports, one row per ggml
// type id: name, block shape, and (for the types attnviz reads) the block dequantizer and the dot
// product of stored blocks with float32 values.
#pragma once

#include "attnviz/engine/ggml_kernels.h"
#include "attnviz/engine/isa.h"

#include <cstdint>

namespace attnviz::detail {

// Each takes nb whole blocks (n values for the float types) at src.
using DequantFn = void (*)(const unsigned char* src, float* y, std::int64_t nb);
using DotFn = float (*)(const unsigned char* src, const float* x, std::int64_t nb);

// x in two 16-bit integer parts, for decode's matrix-vector products (matVecBatch converts x
// once for all the rows): per group g of 32 values, x[i] = scale[g] * (q[i] + r[i] / 65536) to
// float32 rounding (q the value in steps of 1/32767 of the group's largest |x|, r what is left
// in steps of 1/65536 of a step; scale 0 where the group is all zeros), and sum[g] is the sum of
// the group's values so written (the K-quants' min terms).
struct QuantX16 {
  const std::int16_t* q;
  const std::int16_t* r;
  const float* scale;
  const float* sum;
};
// The dot product of nb stored blocks with x given so (x.q at the first block's first value).
using DotQ16Fn = float (*)(const unsigned char* src, const QuantX16& x, std::int64_t nb);

// x rounded to 8-bit integers for the fast path (attnviz/engine/ggml_kernels.h,
// setFastActivations): per block b of the weights' block size (32 values for Q8_0, 256 for the
// K-quants) x[i] ~ d[b] * q[i], d[b] = the block's largest |x| / 127 (0 for a block of zeros), q
// rounded to nearest. For the K-quants, bsum[16 j + k] is the sum of q over values 16 k ..
// 16 k + 15 of 256-value block j (their min and offset terms); Q8_0's x has none.
struct QuantX8 {
  const signed char* q;
  const float* d;
  const std::int16_t* bsum;
};
using DotQ8Fn = float (*)(const unsigned char* src, const QuantX8& x, std::int64_t nb);

// A prompt's rows of x rounded as QuantX8 rounds x (256-value blocks), for the fast path's
// products in a pass (matMulFast): row t's codes at q + t n, its scales at d + t (n / 256), and
// the sums of its codes per 16 and per 32 values (as floats, exact) at sum16 + t (n / 16) and
// sum32 + t (n / 32).
struct PassX8 {
  const signed char* q;
  const float* d;
  const float* sum16;
  const float* sum32;
  std::int64_t n;
};
// Y[t, r0 + r] = dot(stored row r, x row t) for t < m, r < nRows <= kPass8Rows: the rows
// (rowBytes apart, nb blocks each) repacked 16 at a time (8 at AVX2) into `scratch`
// (kPass8ScratchPerBlock bytes per block and 16 rows, 64-byte aligned) and multiplied with every
// row of x; `vnni` where the CPU has the level's VNNI (AVX512-VNNI at AVX-512, AVX-VNNI at AVX2).
using Pass8Fn = void (*)(const unsigned char* rows, std::size_t rowBytes, int nRows,
                         std::int64_t nb, const PassX8& x, std::int64_t m, float* Y,
                         std::int64_t ldy, std::int64_t r0, unsigned char* scratch, bool vnni);
// x's rows for PassX8: nb blocks of 256 values at x rounded as QuantX8 rounds them (q, d per
// block) and the sums of q per 16 values; false (the rest unset) where a value is not finite.
using Round8Fn = bool (*)(const float* x, std::int64_t nb, signed char* q, float* d, float* sum16);
constexpr std::size_t kPass8Rows = 32;
constexpr std::size_t kPass8ScratchPerBlock = 256 * 16 + 2 * 16 * 16 * 4;

struct TypeRow {
  const char* name;
  int blockValues;
  int blockBytes;
  DequantFn dequant;
  DotFn dot;
  // Where the level has one (the K-quants at AVX-512): integer products of the codes with x in two
  // 16-bit parts, for matVecBatch; nullptr elsewhere (matVecBatch then calls dot).
  DotQ16Fn dotQ16 = nullptr;
  // The fast path's kernel on 8-bit x (Q8_0 and the K-quants Q4_K, Q5_K, Q6_K at AVX2 and
  // AVX-512); nullptr elsewhere (the exact kernels then run whatever the setting).
  DotQ8Fn dotQ8 = nullptr;
  // The fast path in a pass's products (the K-quants Q4_K, Q5_K, Q6_K at AVX2 and AVX-512); nullptr
  // elsewhere (the exact products then run whatever the setting).
  Pass8Fn pass8 = nullptr;
  Round8Fn round8 = nullptr;  // with pass8
};

constexpr std::uint32_t kGgmlTypeCount = 42;

// Each level's table (kGgmlTypeCount rows); only x86-64 builds have the AVX2 and AVX-512 ones.
extern const TypeRow* const ggmlTypesBaseline;
extern const TypeRow* const ggmlTypesAvx2;
extern const TypeRow* const ggmlTypesAvx512;

// The table of a level (the baseline's where this build lacks it; callers pass a usableIsa()).
const TypeRow* ggmlTypes(Isa isa);

}  // namespace attnviz::detail
