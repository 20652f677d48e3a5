// attnviz core: attention that never holds the [T_q, T_k] scores (FlashAttention's tiling).
//
// The queries are cut into blocks of B_r rows and the keys into blocks of B_c keys. Only one
// B_r x B_c tile of scores exists at a time per thread, so memory grows with T, not T^2, and
// key blocks that every row of a query block masks are skipped (for causal attention, about
// half of them). Masks, ALiBi, the custom matrix and the temperature follow the engine exactly
// (docs/design/conventions.md); a fully masked row gives zero weights and a zero output.
//
// * streamOutput: O = softmax(L) V in one sweep over the key blocks with the online softmax:
//   per row a running max m and sum l; when a block raises m, the sum and the partial output
//   are rescaled by exp(m_old - m_new) (in logit units, so the factor already includes tau).
// * streamPooledWeights: the weights of one head pooled onto a pixel grid, in two sweeps per
//   query block: the first finds each row's max logit m, the second exponentiates, sums and
//   pools. With the default blocks, max-pooling is bit-for-bit what the materialised engine's
//   weights give; other blocks agree within float rounding.
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace attnviz {

struct StreamOptions {
  // B_r x B_c. The defaults put every tile where the engine's GEMM blocks fall (its 128-row
  // query blocks; keys in multiples of its GEMM panels and of its 256-key row sums), which is
  // what makes pooled views bit-for-bit the engine's.
  int blockRows = 128;  // B_r: queries per block
  int blockKeys = 768;  // B_c: keys per block
  // Called with the fraction done in [0, 1] as query blocks finish (never concurrently, from
  // whichever worker thread finished the block). May be empty.
  std::function<void(double)> progress;
  // When set and true, the query blocks not yet started are skipped and the call returns early
  // with an incomplete result that the caller must discard (the GUI's worker abandons a region
  // the user has panned away from).
  const std::atomic<bool>* cancel = nullptr;
};

// O [H, T_q, d_v] from Q [H, T_q, d_k], K [H, T_k, d_k], V [H, T_k, d_v]. Validates as the
// engine does (InputError naming the tensor), without its memory limit for materialised scores.
// `fullyMaskedRows`, when given, receives the number of rows (over all heads) with no allowed key.
Tensor3 streamOutput(const Tensor3& q, const Tensor3& k, const Tensor3& v, const AttentionParams& p,
                     const StreamOptions& opt = {}, int* fullyMaskedRows = nullptr);

// One head's weights pooled onto a grid of `height` x `width` pixels: pixel (y, x) covers the
// queries [r0 + y * poolQ, min(r0 + (y + 1) * poolQ, r1)) and the keys
// [c0 + x * poolK, min(c0 + (x + 1) * poolK, c1)). The whole matrix is r0 = c0 = 0, r1 = T_q,
// c1 = T_k; a region (streamPooledRegion) is a window of it.
struct PooledWeights {
  int Tq = 0, Tk = 0, poolQ = 1, poolK = 1, width = 0, height = 0;
  int r0 = 0, r1 = 0, c0 = 0, c1 = 0;  // the queries and keys the grid covers
  std::vector<float> max;            // [height, width] largest weight among the block's allowed
                                     // cells; 0 when every cell is masked
  std::vector<float> mean;           // [height, width] mean weight over all the block's cells,
                                     // a masked cell counting as 0
  std::vector<std::uint8_t> masked;  // [height, width] 1 when every cell of the block is masked
  int fullyMaskedRows = 0;           // rows of [r0, r1) with no allowed key
  std::size_t at(int y, int x) const { return std::size_t(y) * std::size_t(width) + x; }
};

// Q [H, T_q, d_k], K [H, T_k, d_k]; head in [0, H); poolQ, poolK >= 1 (UsageError otherwise).
// withMean = false skips the mean (left empty), which costs a pass over every cell: the
// max-pooled figure does not need it.
PooledWeights streamPooledWeights(const Tensor3& q, const Tensor3& k, int head,
                                  const AttentionParams& p, int poolQ, int poolK,
                                  const StreamOptions& opt = {}, bool withMean = true);

// A window of one head's [T_q, T_k] weights and the pooling it is shown at: the queries
// [r0, r1) and the keys [c0, c1), poolQ x poolK cells a pixel (the last row and column of
// pixels may cover fewer: ragged edges).
struct PoolRegion {
  int r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  int poolQ = 1, poolK = 1;
  bool operator==(const PoolRegion&) const = default;
};

// What the softmax needs of each query row beyond its own cells: the largest logit m_i and
// l_i = sum_j exp((L_ij - m_i)) in the engine's chunks (m_i = -inf and l_i = 0 for a fully
// masked row). With them, a weight is exp(L_ij - m_i) / l_i from its tile alone, so a region
// costs only its own tiles.
struct SoftmaxStats {
  std::vector<float> max, sum;  // [T_q]
  bool covers(int Tq) const { return int(max.size()) == Tq && int(sum.size()) == Tq; }
};

// The weights of `region` of head `head`, pooled (max, and mean when withMean). Without
// `known` stats, each query block of the region sweeps every key block twice (row max, then exp,
// sum and pooling); `found`, when given, receives the stats of the region's rows (sized T_q; the
// other rows are left as they were). With `known` stats for every row (SoftmaxStats::covers), only
// the tiles inside the region are computed, once. The region's corners are clamped to the
// matrix; an empty region or a pooling < 1 is a UsageError. Over the whole matrix with the
// default blocks and no `known` stats this is streamPooledWeights, bit for bit.
PooledWeights streamPooledRegion(const Tensor3& q, const Tensor3& k, int head,
                                 const AttentionParams& p, const PoolRegion& region,
                                 const StreamOptions& opt = {}, bool withMean = true,
                                 const SoftmaxStats* known = nullptr, SoftmaxStats* found = nullptr);

// One query row of one head, computed on its own: the scores q_i . k_j / sqrt(d_k) of every key
// (one matrix-vector product), then the engine's own row code for the logits (masks, ALiBi,
// softcap, tau: docs/design/conventions.md) and the softmax, and the output a_i V. O(T_k d)
// time and O(T_k) memory, so a row of a matrix too large to materialise can be inspected.
struct QueryRow {
  int head = -1, row = -1;
  std::vector<float> logits;   // [T_k] L = (S + b) / tau, -inf where masked
  std::vector<float> weights;  // [T_k] softmax over keys; zeros when fully masked
  std::vector<float> output;   // [d_v] sum_j a_ij v_j (zeros when fully masked); empty without V
  RowStats stats;
  int allowedKeys = 0;  // keys the mask allows (finite logits)
};

// Row i of head `head` from Q [H, T_q, d_k], K [H, T_k, d_k] and V [H, T_k, d_v] (v may be null:
// no output). The parameters must have passed validateParams for these shapes (the session's
// have); shapes and indices are checked (UsageError), the scores' finiteness too (InputError).
QueryRow streamQueryRow(const Tensor3& q, const Tensor3& k, const Tensor3* v,
                        const AttentionParams& p, int head, int i);

// Whether the mask hides at least one cell of head h (some query has a masked key): from the
// mask's structure, without scores. O(T_q) for the interval kinds; scans a custom matrix.
bool maskHidesAnyCell(const MaskSpec& m, int h, int Tq, int Tk);

}  // namespace attnviz
