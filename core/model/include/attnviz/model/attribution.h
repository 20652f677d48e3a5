// attnviz model: attribution. Which heads matter for one prediction, and how the prediction forms
// through the layers (docs/design/command-line.md: `attnviz attribute`). GUI-free; the GUI's
// attribution panel and the `attribute` subcommand call the same functions.
//
// A prediction is read at position P of a run (default the last) for a target token (default the
// clean run's most likely next token at P).
//   ablationSweep      Δ[l, h] = log p_ablated(target) − log p(target) at P, each query head in
//                      turn zeroed (or replaced at every position by its mean over the positions)
//   patchHeads         activation patching: each head's output patched from the clean run into
//                      the corrupted one, (m_patched − m_corrupt) / (m_clean − m_corrupt) with
//                      m = logit(target) − logit(foil) at P                              [L, H]
//   patchResidual      the same for the residual stream entering layer l at position t  [L, T]
//   directEffect       one head's output at P straight to the logits (through its slice of W_o,
//                      the final norm linearised at P, the unembedding): the tokens it promotes
//                      and suppresses; directLogitAttribution: every head's share of logit(target)
//   logitLens          the unembedding of every layer's residual stream               [L + 1, T]
//   valueWeightedAttention  ‖α_ij · v_j W_O^h‖ for one head                              [T, T]
//   attentionRollout   Abnar & Zuidema (2020), layer by layer                         [L, T, T]
//   attentionRolloutTo the same up to one layer, from a run that kept no weights      [T, T]
//
// Each intervention re-runs only the layers from its own (Model::rerunLogitsAt on one kept copy of
// the run), never a whole pass. The run's own interventions (a mask, a temperature, ablations)
// stay on; the attribution's is added to them.
#pragma once

#include "attnviz/model/model.h"

#include <atomic>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace attnviz {

// Where the prediction is read. -1 = the default.
struct AttributionTarget {
  int position = -1;  // P in [0, T); -1: the last position
  int target = -1;    // a token id; -1: the (clean) run's most likely next token at P
  int foil = -1;      // patching only; -1: the corrupted run's most likely token at P, or its
                      // second most likely when that is the target
};

// Progress and cancellation of the computations that re-run the model (sweeps, patching) or
// unembed every layer (the logit lens). All members are optional; the callbacks run on the
// calling thread.
struct AttributionControl {
  // After each step (one re-run, or one layer of the lens): the fraction done, in (0, 1].
  std::function<void(double fraction)> progress;
  // After each completed row of the result (a layer): its index and its values, so a view can
  // show the matrix filling in (copy them under the view's own lock). The sweeps and patching
  // fill from the last layer up (its re-runs are the cheapest: the first row comes soonest); the
  // logit lens from layer 0 down.
  std::function<void(int row, const std::vector<float>& values)> row;
  // Read before each step; once true the computation stops and returns what is complete
  // (rowsDone < rows, cancelled = true; the rows not done hold NaN).
  const std::atomic<bool>* cancel = nullptr;
};

// A [rows, cols] matrix of attribution values, filled row by row.
struct AttributionMatrix {
  int rows = 0, cols = 0;
  std::vector<float> values;  // row-major; NaN where not computed (cancelled)
  // Head matrices: the attention site of each row (ModelConfig::sites(), in pass order; a
  // decoder's: one per layer, row l = layer l). Empty for other matrices ([L, T]).
  std::vector<SiteId> sites;
  int rowsDone = 0;  // rows complete: the last rowsDone rows (filled from the last layer up)
  bool cancelled = false;

  float at(int r, int c) const { return values[std::size_t(r) * std::size_t(cols) + c]; }
  bool complete() const { return rowsDone == rows; }
};

// Resolves P and the target against a run: P = -1 becomes the last position, target = -1 the
// run's most likely token at P (ties: the smaller id). Throws InputError for a position outside
// [0, T) or a target outside the vocab [0, vocab).
struct ResolvedTarget {
  int position = 0, target = 0;
};
ResolvedTarget resolveTarget(const ForwardResult& r, const AttributionTarget& at, int vocab);

// log softmax(logits)[id], in double.
double logProbOf(const float* logits, int vocab, int id);

// ---------------------------------------------------------------------------------------------
// Ablation sweep

enum class AblationKind { Zero, Mean };
const char* ablationKindName(AblationKind k);  // "zero", "mean"

struct AblationSweep {
  AblationKind kind = AblationKind::Zero;
  int position = 0, target = 0;
  double logProb = 0.0;   // log p(target) at P in the clean run
  AttributionMatrix delta;  // [sites, H] (decoders: [L, H]): log p_ablated(target) − log p(target)
};

// Every query head of every layer in turn, on `clean` (a pass of m, which it ran with its own
// interventions: they stay on). Each head re-runs from its layer only.
AblationSweep ablationSweep(const Model& m, const ForwardResult& clean, AblationKind kind,
                            const AttributionTarget& at = {},
                            const AttributionControl& control = {});

// ---------------------------------------------------------------------------------------------
// Activation patching

struct PatchingSetup {
  int position = 0, target = 0, foil = 0;
  double mClean = 0.0, mCorrupt = 0.0;  // logit(target) − logit(foil) at P in each run
};

// Checks a clean/corrupted pair and resolves P, the target (from the clean run) and the foil
// (from the corrupted run). Throws InputError when the runs differ in length (naming both
// lengths), when m_clean == m_corrupt (nothing to restore: for example the same text twice), or
// when the foil is the target; InputError for a position, target or foil out of range.
PatchingSetup patchingSetup(const Model& m, const ForwardResult& clean,
                            const ForwardResult& corrupt, const AttributionTarget& at);

struct PatchingResult {
  PatchingSetup setup;
  // [sites, H] (patchHeads; decoders: [L, H]) or [L, T] (patchResidual): (m_patched − m_corrupt) / (m_clean − m_corrupt)
  AttributionMatrix fraction;
};

// Head h of layer l: the corrupted run with that head's output [T, d_h] replaced by the clean
// run's (LayerActivations::headOut), re-run from layer l. Both runs are passes of m with the
// same interventions (the corrupted run's are kept).
PatchingResult patchHeads(const Model& m, const ForwardResult& clean, const ForwardResult& corrupt,
                          const AttributionTarget& at = {},
                          const AttributionControl& control = {});

// Layer l, position t: the corrupted run with row t of the residual stream entering layer l
// replaced by the clean run's, re-run from layer l. [L, T]; row 0 swaps the embeddings.
PatchingResult patchResidual(const Model& m, const ForwardResult& clean,
                             const ForwardResult& corrupt, const AttributionTarget& at = {},
                             const AttributionControl& control = {});

// ---------------------------------------------------------------------------------------------
// Direct effects (no re-run)

struct TokenScore {
  int id = 0;
  float value = 0.0f;
};

struct DirectEffect {
  int layer = 0, head = 0, position = 0;
  std::vector<float> logits;                     // [V]: the head's direct contribution
  std::vector<TokenScore> promoted, suppressed;  // the k largest (largest first) and the k
                                                 // smallest (most negative first)
};

// Head `head` of layer `layer`: its output at P (headOut, after the run's interventions) through
// its slice of W_o, the final norm linearised at P (divided by the run's norm denominator at P,
// times the norm's weight; LayerNorm also centres) and the unembedding. Throws InputError for a
// layer, head or position out of range.
DirectEffect directEffect(const Model& m, const ForwardResult& r, int layer, int head,
                          int position = -1, int k = 10);

// [sites, H] (decoders: [L, H]): every head's direct contribution to logit(target) at P, as directEffect computes it.
AttributionMatrix directLogitAttribution(const Model& m, const ForwardResult& r,
                                         const AttributionTarget& at = {});

// ---------------------------------------------------------------------------------------------
// Logit lens

struct LogitLens {
  int layers = 0;  // L + 1 rows: row l is the stream entering layer l, row L the final stream
  int tokens = 0;  // T
  int target = 0;
  std::vector<int> topId;         // [L + 1, T] the most likely token (ties: the smaller id)
  std::vector<float> topProb;     // [L + 1, T] its probability
  std::vector<float> targetProb;  // [L + 1, T] the target's probability
  int rowsDone = 0;
  bool cancelled = false;

  std::size_t index(int l, int t) const { return std::size_t(l) * std::size_t(tokens) + t; }
};

// softmax(unembed(final_norm(stream_l[t]))) for every layer l (and the final stream) and
// position t. The target defaults to the run's most likely token at P (at.position).
LogitLens logitLens(const Model& m, const ForwardResult& r, const AttributionTarget& at = {},
                    const AttributionControl& control = {});

// ---------------------------------------------------------------------------------------------
// Attention views

// [H, T]: ‖v_j W_O^h‖ for every query head h and key j of `layer`: the length of what key j's
// value adds to the residual stream through head h's slice of W_o (no bias). V is the kept one,
// else recomputed from the layer's residual stream. Throws InputError for a layer out of range.
std::vector<float> valueNorms(const Model& m, const ForwardResult& r, int layer);

// [T, T]: ‖α_ij · v_j W_O^h‖ (Kobayashi et al. 2020): the weight times valueNorms' norm of key j.
// Weights the run did not keep are recomputed (as in attentionRolloutTo). Throws InputError for
// a layer or head out of range.
MatrixRM valueWeightedAttention(const Model& m, const ForwardResult& r, int layer, int head);

// [L, T, T]: attention rollout (Abnar & Zuidema 2020). Per layer Â_l = 0.5 · mean over heads of
// A + 0.5 · I with rows renormalised; R_0 = Â_0, R_l = Â_l R_(l−1). Slice l is the rollout up to
// and including layer l; the last is the whole model's. Every layer's weights must be kept
// (InputError otherwise).
Tensor3 attentionRollout(const ForwardResult& r);

// [T, T]: the rollout up to and including `layer` (slice `layer` of attentionRollout) from any
// run: the weights it did not keep are recomputed layer by layer from the residual stream with
// the run's interventions, one layer held at a time. Costs one T³ product per layer. Returns an
// empty matrix when `cancel` is set. Throws InputError for a layer out of range.
MatrixRM attentionRolloutTo(const Model& m, const ForwardResult& r, int layer,
                            const std::atomic<bool>* cancel = nullptr);

}  // namespace attnviz
