// attnviz session: an attention dump (dump.h) as the session's source.
//
// A dump holds weights, not always Q and K, so the layer on screen runs on a WeightsEngine: an
// AttentionEngine whose scores are log A (softmax(log A) = A, so every stage reads as for
// computed attention) and whose softmax is renormalizeFromLog: temperature, masks and bias act
// on the recorded weights exactly (dump.h). The output stage is A V when the dump has V.
// No window, no GL: tested without a display (tests/session/model_source_test.cpp).
#pragma once

#include "attnviz/formats/dump.h"
#include "attnviz/session/session.h"

#include <memory>
#include <string>

namespace attnviz {

// Throws InputError when v (if not empty) does not fit the weights [H, T_q, T_k].
std::unique_ptr<AttentionEngine> makeWeightsEngine(Tensor3 weights, Tensor3 v = {});

class DumpSource {
 public:
  explicit DumpSource(Dump dump) : dump_(std::move(dump)) {}
  const Dump& dump() const { return dump_; }
  int layers() const { return int(dump_.layers.size()); }
  // Puts layer `layer` in the session: a WeightsEngine over its weights (the session's engine
  // is replaced; take the old one back with Session::releaseEngine first if it is wanted) and
  // its token lists. Throws UsageError when out of range.
  void showLayer(Session& session, int layer);
  int shownLayer() const { return layer_; }
  bool hasQkv(int layer) const { return dump_.layers.at(layer).hasQkv(); }

 private:
  Dump dump_;
  int layer_ = -1;
};

}  // namespace attnviz
