// attnviz core: FlashAttention step by step, for the teaching stage (no GL, no window).
//
// One head's attention computed tile by tile as FlashAttention does it. The queries are cut
// into blocks of B_r rows and the keys into blocks of B_c; the schedule visits, for each query
// block, every key block in order. A step processes one tile: its scores and logits, then for
// each row of the query block
//   m_new = max(m_old, max_j L_ij)                      the running max (logit units)
//   rescale = exp(m_old - m_new)                        how much the old sum and output shrink
//   l_new = rescale * l_old + sum_j exp(L_ij - m_new)   the running sum
//   acc_new = rescale * acc_old + sum_j exp(L_ij - m_new) v_j
// and the partial output is acc / l. A tile that every row masks (causal tiles above the
// diagonal) is skipped: it is a step of the schedule, marked skipped, that changes nothing.
// After a query block's last tile its partial output is final; after the last step the whole
// output is done and is compared with the materialised softmax (maxOutputDifference).
#pragma once

#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <vector>

namespace attnviz {

class FlashWalkthrough {
 public:
  struct Tile {
    int queryBlock = 0, keyBlock = 0;
    int i0 = 0, i1 = 0;  // query rows [i0, i1)
    int j0 = 0, j1 = 0;  // keys [j0, j1)
    bool skipped = false;
  };
  // One row of the current query block after the current step.
  struct Row {
    float mOld = 0, m = 0;       // running max before and after the step (logits; -inf: none yet)
    float lOld = 0, l = 0;       // running sum before and after
    float rescale = 1;           // exp(mOld - m); 1 when the step changed nothing
    std::vector<float> partial;  // acc / l: [d_v]; zeros while l == 0
  };

  // Q [H, T_q, d_k], K [H, T_k, d_k], V [H, T_k, d_v]; the walkthrough follows head `head`.
  // Throws InputError for bad inputs or parameters, UsageError for block sizes < 1 or a bad head.
  FlashWalkthrough(const Tensor3& q, const Tensor3& k, const Tensor3& v, int head,
                   const AttentionParams& p, int blockRows, int blockKeys);

  int blockRows() const { return br_; }
  int blockKeys() const { return bc_; }
  int queryBlocks() const { return (tq_ + br_ - 1) / br_; }
  int keyBlocks() const { return (tk_ + bc_ - 1) / bc_; }
  int steps() const { return queryBlocks() * keyBlocks(); }
  int skippedSteps() const;

  // The step last processed: -1 before the first. forward()/back() return false at the ends.
  int step() const { return step_; }
  bool forward();
  bool back();
  void seek(int step);  // clamps to [-1, steps() - 1]
  bool done() const { return step_ == steps() - 1; }

  Tile tile(int step) const;  // any step of the schedule
  Tile current() const { return tile(std::max(step_, 0)); }

  // Whether tile (queryBlock, keyBlock) has been processed (the current tile included).
  bool visited(int queryBlock, int keyBlock) const {
    return step_ >= 0 && queryBlock * keyBlocks() + keyBlock <= step_;
  }

  // The current query block's rows (current().i1 - current().i0 of them).
  const std::vector<Row>& rows() const { return rows_; }
  // The current tile's logits L (-inf where masked) and its exp(L - m_new) (0 where masked):
  // [i1 - i0, j1 - j0], row-major; empty for a skipped tile or before the first step.
  const std::vector<float>& tileLogits() const { return tileLogits_; }
  const std::vector<float>& tileExp() const { return tileExp_; }

  // The output as far as computed: rows of finished query blocks hold their final output, the
  // current block its partial output, later rows zeros. [T_q, d_v] row-major.
  const std::vector<float>& output() const { return out_; }
  // The head's logits L [T_q, T_k] (-inf where masked): what every tile reads.
  const MatrixRM& logits() const { return logits_; }
  // The weights as far as the schedule has got: cell (i, j) of a visited tile holds
  // exp(L_ij - m_i) / l_i with row i's running max and sum after the current step (so a finished
  // query block shows its final weights, the current block provisional ones that later tiles
  // rescale); cells of unvisited tiles, masked cells and rows with no allowed key seen yet are 0.
  // [T_q, T_k].
  MatrixRM provisionalWeights() const;
  float provisionalWeight(int i, int j) const;  // one cell of it
  // The engine's materialised output and weights for the head, for comparison.
  const MatrixRM& referenceOutput() const { return refOut_; }
  const MatrixRM& referenceWeights() const { return refWeights_; }
  // max |O_stream - O_materialised| over the rows whose query block is finished (every row once
  // done()); and, for those rows, max |exp(L - m) / l - A| over every cell.
  float maxOutputDifference() const;
  float maxWeightDifference() const;

 private:
  bool finished(int row) const;  // the row's query block has seen every key block
  void replayTo(int step);
  void apply(int step);

  int tq_, tk_, dv_, br_, bc_, head_;
  AttentionParams p_;
  MatrixRM logits_;  // [T_q, T_k] of the head: the small teaching sizes only
  MatrixRM v_;
  MatrixRM refOut_, refWeights_;
  int step_ = -1;
  std::vector<Row> rows_;
  std::vector<std::vector<float>> acc_;  // per row of the current block: [d_v]
  std::vector<float> tileLogits_, tileExp_, out_;
  std::vector<float> finalM_, finalL_;  // per query row once its block is finished
};

}  // namespace attnviz
