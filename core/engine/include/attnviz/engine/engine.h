// attnviz core: the attention engine interface shared by the CPU and GPU backends.
//
// Data flow: Q,K,V -> S = Q K^T / sqrt(d_k) (cached; the only QK^T GEMM)
//            -> L = (S + b) / tau with -inf where masked -> A = softmax over keys -> O = A V.
// A change to the temperature, a mask or ALiBi calls softmax() again: no GEMM.
#pragma once

#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace attnviz {

struct Dims {
  int H = 0, Tq = 0, Tk = 0, dk = 0, dv = 0;
};

// Facts about one query row that the UI shows.
struct RowStats {
  float sum = 0.0f;      // sum of the row's weights: 1 unless fully masked
  float max = 0.0f;      // largest weight
  int argmax = -1;       // key index of the largest weight; -1 when fully masked
  float entropy = 0.0f;  // -sum a log a, in nats
  bool fullyMasked = false;
};

struct AttentionResult {
  Dims dims;
  Tensor3 scaled;               // [H, T_q, T_k] q_i . k_j / sqrt(d_k): no bias, mask or tau
  Tensor3 weights;              // [H, T_q, T_k] softmax over keys; fully masked rows are zeros
  Tensor3 output;               // [H, T_q, d_v] A V; fully masked rows are zeros
  std::vector<RowStats> rows;   // [H * T_q], index h * T_q + i
  int fullyMaskedRows() const;  // count over all heads
  const RowStats& row(int h, int i) const { return rows[std::size_t(h) * dims.Tq + i]; }
};

// What result() must hold on return (the GPU backend reads back only these).
enum Stage : unsigned {
  kStageScaled = 1u,
  kStageWeights = 2u,
  kStageOutput = 4u,
  kStageRows = 8u,
  kStageAll = 15u,
};

class AttentionEngine {
 public:
  virtual ~AttentionEngine() = default;

  // "CPU (Eigen, 2 threads)" or "GPU (<GL renderer>)".
  virtual std::string name() const = 0;

  // Validates shapes (throws InputError naming the tensor) and finiteness, then computes and
  // caches S for every head. Q [H,T_q,d_k], K [H,T_k,d_k], V [H,T_k,d_v].
  virtual void setInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v) = 0;

  // Bias, mask, temperature and softmax from the cached S for the listed heads (empty = all):
  // fills weights and row stats. Memory-bound; never a GEMM.
  virtual void softmax(const AttentionParams& p, const std::vector<int>& heads = {}) = 0;

  // O = A V for the listed heads (empty = all).
  virtual void output(const std::vector<int>& heads = {}) = 0;

  // setInputs + softmax + output for every head; a backend may fuse them.
  virtual void run(const Tensor3& q, const Tensor3& k, const Tensor3& v, const AttentionParams& p);

  // Grouped-query attention (GQA; MQA when K and V have one head) in one call: Q is
  // [H, T_q, d_k], K and V hold H / kvGroup heads, and query head h reads K/V head
  // h / kvGroup (kvHeadOf), where they are: no repeated copy. kvGroup = 1 is run(). Fills the
  // weights, the row stats and the output of every query head. The engine keeps no reference to
  // Q, K or V after the call: softmax() may follow (S is cached), output() needs setInputs()
  // first. The default repeats K and V (repeatKvHeads) and calls run(); the CPU engine reads
  // them in place.
  virtual void runGrouped(const Tensor3& q, const Tensor3& k, const Tensor3& v, int kvGroup,
                          const AttentionParams& p);

  // Host copies of the stages in `stages` (a mask of Stage bits). The CPU returns its own
  // buffers; the GPU reads back what was asked for.
  virtual const AttentionResult& result(unsigned stages = kStageAll) = 0;

  virtual Dims dims() const = 0;
};

std::unique_ptr<AttentionEngine> makeCpuEngine();

// Validates Q, K, V as described at setInputs; returns the dimensions.
Dims validateInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v);
// The same for grouped-query attention: K and V have q.heads / kvGroup heads (InputError when
// kvGroup < 1 or the heads do not divide). dims().H is the query heads.
Dims validateInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v, int kvGroup);

// The K/V head that query head h reads when `kvGroup` query heads share each one.
inline int kvHeadOf(int h, int kvGroup) { return h / kvGroup; }
// KV heads [H_kv, T, d] -> [H_kv * kvGroup, T, d]: each repeated for its group of query heads
// (what a backend without grouped attention is given, and `model --weights`' convention).
Tensor3 repeatKvHeads(const Tensor3& kv, int kvGroup);

// The logits L = (S + b) / tau with -inf where masked, for every head: [H, T_q, T_k].
Tensor3 computeLogits(const Tensor3& scaled, const AttentionParams& p);

// The biased scores z = S + b of head h before the temperature (so L = z / tau), -inf where
// masked, row-major [T_q * T_k] into `out`. The same row code as the engine's softmax and
// computeLogits: the one place the logits formula lives.
void biasedScoresHead(const Tensor3& scaled, const AttentionParams& p,
                      const std::vector<float>& slopes, int h, float* out);

// L = z / tau in place, for n values (a tau so small that 1/tau overflows divides instead).
void applyTemperature(float* values, std::size_t n, float tau);

// The wrong-axis softmax (a teaching mode): softmax over the query axis of z / tau, so every
// column with an allowed query sums to 1. `biased` and `out` are [T_q * T_k]; masked cells and
// fully masked columns get 0. Uses the engine's own row softmax on each column.
void softmaxOverQueries(const float* biased, int Tq, int Tk, float tau, float* out);

// One logit (for tooltips); -inf when masked.
float logitAt(const Tensor3& scaled, const AttentionParams& p, const std::vector<float>& slopes,
              int h, int i, int j);

// Number of threads the CPU engine uses.
int cpuThreads();

}  // namespace attnviz
