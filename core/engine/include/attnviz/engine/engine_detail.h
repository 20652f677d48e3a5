// attnviz core (internal): the per-row pieces of the CPU engine that the streaming path
// (streaming.cpp) shares, so that a streamed row is computed exactly as the engine computes it.
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"

#include <Eigen/Core>

#include <algorithm>
#include <limits>

namespace attnviz::detail {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The engine computes S in blocks of this many query rows (one GEMM each).
inline constexpr int kEngineRowBlock = 128;

// Row sums are taken kSumChunk keys at a time (each chunk an Eigen sum, the chunks added in key
// order), so a row streamed in key blocks that are a multiple of kSumChunk sums bit-for-bit as
// the engine's whole row does. The chunk is a multiple of every SIMD width.
inline constexpr int kSumChunk = 256;
float chunkedSum(const float* e, int n);

// The biased scores z = S + b of row i of head h over the keys [j0, j1), with -inf where masked.
// `s` and `z` point at key j0 and may be the same buffer. The temperature is applied later,
// after the row maximum is subtracted.
void rowLogits(const float* s, float* z, const AttentionParams& p, float slope, int h, int i,
               int Tq, int Tk, int j0, int j1);

// exp of a row's gaps x = (z - max z) / tau <= 0, less the smallest normal float and never
// below 0: exactly 0 for masked keys (-inf) and for gaps whose exp underflows (below about
// -87.3), and the float exp itself wherever it is above 2^-100 (FLT_MIN is then under half an
// ulp of it). Eigen's vector exp differs by instruction set down there: its SSE and AVX2 versions
// clamp the input and give 2.9e-39 for -inf (a masked key with weight, and 2.9e-39 * -inf in the
// entropy), its AVX-512 version 0 or a subnormal. Subtract-and-max keeps the expression
// vectorised (Eigen 3.4's select() is evaluated one scalar at a time, scalar expf included).
template <class Derived>
auto expOfGap(const Eigen::ArrayBase<Derived>& x) {
  return (x.exp() - std::numeric_limits<float>::min()).max(0.0f);
}

// exp((z - mx) / tau) for n keys into e (which may be z), as expOfGap: masked keys (z = -inf)
// give exactly 0.
void expShifted(const float* z, float* e, int n, float mx, float tau);

// Softmax over keys of (z - max z) / tau from the biased scores z (-inf where masked, Tk of
// them) into `weights`, with the row's facts (a fully masked row: zeros, fullyMasked). `scratch`
// holds Tk floats. The engine's row softmax (cpu_engine.cpp).
RowStats rowSoftmax(float* z, float* scratch, float* weights, int Tk, float tau);

// The allowed keys of query row i lie in [0, prefixEnd) or [lo, hi], and below `limit`; the
// custom matrix can only remove keys from that set. Used to skip key blocks that are wholly
// masked for every row of a query block.
struct RowSpan {
  int lo, hi, prefixEnd, limit;
  bool mayAllow(int j0, int j1) const {  // some key of [j0, j1) may be allowed
    const int e = std::min(j1, limit);
    return (j0 < std::min(prefixEnd, e)) || (std::max(j0, lo) <= std::min(hi, e - 1));
  }
};
RowSpan rowSpan(const MaskSpec& m, int i, int Tq, int Tk);
// Whether rowSpan's set is exactly the allowed set (no term that removes single cells, such as
// the custom matrix), so that mayAllow answers "is a key of [j0, j1) allowed" exactly. A new
// and-term of the mask rule must make this false while it is on.
bool rowSpanIsExact(const MaskSpec& m);

// Throws the engine's InputError for Q K^T overflowing float32 in head h.
[[noreturn]] void throwScoresOverflow(int h);

// Validates Q, K (and V when given) as AttentionEngine::setInputs does, without the memory check
// for materialised scores (the streaming path never holds them).
Dims validateStreamInputs(const Tensor3& q, const Tensor3& k, const Tensor3* v);

}  // namespace attnviz::detail
