// attnviz core (model): the neuron view of one attention cell. The scaled score of query i and
// key j in a head, s_ij = q_i · k_j / sqrt(d_h) (as the pass computed q and k: rotated, the
// family's own score scale folded into q), split into its parts: one term q_d k_d / sqrt(d_h) a
// dimension, and for RoPE models one term a frequency pair, as run (rotated) and with the
// rotation taken out of q and k (each turned back by its own position). The terms of each split
// sum to its score. CPU only.
#pragma once

#include "attnviz/model/model.h"

#include <vector>

namespace attnviz {

struct NeuronView {
  float score = 0;                  // q_i · k_j / sqrt(d_h), as the heatmap's scaled stage
  std::vector<float> q, k;          // [d_h] the rows as run
  std::vector<float> terms;         // [d_h] q_d k_d / sqrt(d_h)
  // RoPE models: one term a rotated pair p (its two dimensions in the family's pair layout),
  // then one for all the dimensions that do not rotate (partial rotary; 0 when none).
  std::vector<float> pairTerms;     // as run
  std::vector<float> plainTerms;    // rotation removed
  std::vector<double> wavelength;   // [pairs] tokens a full turn of pair p takes (2 pi / theta_p)
  float plainScore = 0;             // the score with the rotation removed: sum of plainTerms
};

// The neuron view of row q (query at position i) and row k (key at position j) of `layer`'s
// head, both d_h long, as the pass computed them. `ropeOn`: whether the pass rotated them (false:
// the layer runs with RoPE off, or the family has no RoPE: no pair split). Throws InputError for
// a head size that does not match. `seqLen`: the length of the pass the rows come from (which
// LongRoPE factors rotated them); 0: max(i, j) + 1.
NeuronView neuronView(const ModelConfig& c, int layer, const float* q, const float* k, int dh,
                      int i, int j, bool ropeOn, int seqLen = 0);

}  // namespace attnviz
