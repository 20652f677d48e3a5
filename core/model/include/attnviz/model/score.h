// attnviz core (model): how well a model predicts a text, token by token (`attnviz score`), with
// the whole context or with StreamingLLM's cache (Xiao et al. 2023): the first S tokens (the
// attention sinks) and the last W, at cache positions. CPU only.
#pragma once

#include "attnviz/model/model.h"

#include <vector>

namespace attnviz {

struct KvPolicy {
  bool streaming = false;  // false: every token sees all the tokens before it (one pass)
  int sinks = 0;           // S: the first tokens, kept for good
  int window = 0;          // W >= 1: the most recent tokens before the query
};

// StreamingLLM's cache for a decoder that steps one token at a time: each step first evicts the
// oldest token after the sinks once the cache holds S + W tokens, then runs the token at the next
// cache slot. With RoPE each moved key is turned to its new slot from an unrotated copy kept for
// it, so no rounding builds up. With learned absolute positions (GPT-2) the position is in the
// embedding before the K projection: each cached key keeps the position it was written at, and
// the token takes its own index in the text, so the text cannot pass the learned positions.
// `score` and `generate --kv-sinks` step through it. Throws UsageError for a window < 1 or
// sinks < 0, InputError for an encoder or an encoder-decoder (and, from the step, when S + W + 1
// slots, or with learned positions the text, do not fit the model's positions).
class StreamingCache {
 public:
  StreamingCache(const Model& m, const KvPolicy& policy);
  DecodeStep step(int id, const Interventions& iv = {}, const LayerSet& rows = LayerSet::none());
  int length() const { return cache_.length(); }
  // The next token would have no position: S + W + 1 slots past the model's positions, or with
  // learned positions the text at its end.
  bool full() const;

 private:
  const Model& m_;
  KvPolicy policy_;
  KvCache cache_;
  std::vector<MatrixRM> plain_;  // RoPE: per layer each cached key before its rotation
  int processed_ = 0;            // the tokens stepped so far (the next one's index in the text)
};

// Entry t (0 <= t < T - 1) is -log p(ids[t + 1] | ids[0..t]) in nats, from float64 softmaxes of
// the float32 logits. Streaming: the decoder runs one token a step over a KV cache that, while
// token t is processed, holds the first S and the last W tokens before t (each with the K and V
// computed when it was processed, nothing recomputed); positions are cache positions (the sinks
// 0..S-1, the window next, the query after them), so RoPE turns each cached key to its slot;
// learned positions stay each token's index in the text (StreamingCache). Throws InputError for fewer than 2 ids, an
// encoder or an encoder-decoder, or (dense) a text longer than the context; UsageError for a
// window < 1 or sinks < 0. `iv` (ablations, residual edits...) runs inside the pass; a streaming
// cache takes what a decode step takes (residual edits are refused there).
std::vector<float> tokenNll(const Model& m, const std::vector<int>& ids, const KvPolicy& policy,
                            const Interventions& iv = {});

}  // namespace attnviz
