// attnviz core (model): per-token negative log-likelihood, dense or with StreamingLLM's cache
// (score.h).
#include "attnviz/model/score.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attnviz {

namespace {

// -log softmax(row)[target], in float64.
double nllOf(const float* row, int V, int target) {
  double top = row[0];
  for (int v = 1; v < V; ++v) top = std::max(top, double(row[v]));
  double z = 0;
  for (int v = 0; v < V; ++v) z += std::exp(double(row[v]) - top);
  return std::log(z) + top - double(row[target]);
}

// Drops cache slot `slot` of every layer and moves the slots after it one down; with RoPE each
// moved key is turned to its new slot from the unrotated key kept for it (`plain`, per layer
// [rows, H_kv * d_h]), so no rounding builds up over the steps.
void evict(const ModelConfig& c, KvCache& cache, std::vector<MatrixRM>& plain, int slot) {
  const int n = cache.length(), dh = c.headSize, KV = c.nKvHead;
  for (int l = 0; l < c.nLayer; ++l) {
    MatrixRM& K = cache.k[l];
    MatrixRM& V = cache.v[l];
    for (int r = slot; r + 1 < n; ++r) {
      V.row(r) = V.row(r + 1);
      if (c.positions == PositionKind::Rope) {
        plain[l].row(r) = plain[l].row(r + 1);
        for (int g = 0; g < KV; ++g) {
          MatrixRM key = plain[l].block(r, g * dh, 1, dh);
          applyRope(c, key, r, false, l);
          K.block(r, g * dh, 1, dh) = key;
        }
      } else {
        K.row(r) = K.row(r + 1);
      }
    }
  }
  cache.rows = n - 1;
}

}  // namespace

StreamingCache::StreamingCache(const Model& m, const KvPolicy& policy)
    : m_(m), policy_(policy), plain_(std::size_t(m.config().nLayer)) {
  const ModelConfig& c = m.config();
  if (!c.causal || c.encoderDecoder())
    throw InputError(c.family + " is not a decoder: a StreamingLLM cache is a decoder's");
  if (policy.sinks < 0) throw UsageError("--kv-sinks: expected a number >= 0");
  if (policy.window < 1) throw UsageError("--kv-window: expected a number >= 1");
}

DecodeStep StreamingCache::step(int id, const Interventions& iv, const LayerSet& rows) {
  const ModelConfig& c = m_.config();
  // The first S and the last W tokens before this one: one leaves once the cache passes S + W.
  if (cache_.length() > policy_.sinks + policy_.window) evict(c, cache_, plain_, policy_.sinks);
  const int slot = cache_.length();
  if (c.positions == PositionKind::Learned) {
    // Learned positions were added to the embedding before the K projection: each cached key
    // keeps the position it was written at, and the query takes its own index in the text.
    if (full())
      throw InputError("token " + std::to_string(processed_) + " of the text has no position: " +
                       c.family + " learns " + std::to_string(c.nPositions) +
                       " absolute positions, and a StreamingLLM cache keeps each key at the "
                       "position it was written at");
    cache_.positionOffset = processed_ - slot;
  }
  DecodeStep step = m_.decodeStep(cache_, id, iv, rows);
  ++processed_;
  if (c.positions == PositionKind::Rope) {
    const int dh = c.headSize, KV = c.nKvHead;
    for (int l = 0; l < c.nLayer; ++l) {
      if (plain_[l].rows() <= slot) plain_[l].conservativeResize(cache_.k[l].rows(), KV * dh);
      for (int g = 0; g < KV; ++g) {
        MatrixRM key = cache_.k[l].block(slot, g * dh, 1, dh);
        applyRope(c, key, slot, true, l);
        plain_[l].block(slot, g * dh, 1, dh) = key;
      }
    }
  }
  return step;
}

bool StreamingCache::full() const {
  const int next = m_.config().positions == PositionKind::Learned
                       ? processed_
                       : std::min(cache_.length(), policy_.sinks + policy_.window);
  return next >= m_.config().nPositions;
}

std::vector<float> tokenNll(const Model& m, const std::vector<int>& ids, const KvPolicy& policy,
                            const Interventions& iv) {
  const ModelConfig& c = m.config();
  const int T = static_cast<int>(ids.size()), V = c.vocabSize;
  if (T < 2) throw InputError("score: the text has " + std::to_string(T) +
                              " token(s); scoring needs at least 2");
  if (!c.causal || c.encoderDecoder())
    throw InputError("score: " + c.family + " is not a decoder (no next-token likelihood)");
  std::vector<float> out(std::size_t(T) - 1);
  if (!policy.streaming) {
    Capture cap = Capture::none();
    cap.allLogits = true;
    const ForwardResult r = m.forward(ids, iv, cap);
    for (int t = 0; t + 1 < T; ++t)
      out[t] = float(nllOf(r.logits.row(t).data(), V, ids[t + 1]));
    return out;
  }
  StreamingCache cache(m, policy);
  for (int t = 0; t + 1 < T; ++t) {
    const DecodeStep step = cache.step(ids[t], iv);
    out[t] = float(nllOf(step.logits.data(), V, ids[t + 1]));
  }
  return out;
}

}  // namespace attnviz
