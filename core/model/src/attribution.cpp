// Attribution: ablation sweeps, activation patching, direct effects, the logit lens and attention
// views (attribution.h). Each intervention re-runs the model from its own layer on one kept copy
// of the run; the rows of that copy below the layer are never touched, and the stream entering
// the layer is restored before the layer's sweep starts.
#include "attnviz/model/attribution.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

namespace attnviz {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

int tokensOf(const ForwardResult& r) { return static_cast<int>(r.ids.size()); }

AttributionMatrix emptyMatrix(int rows, int cols) {
  AttributionMatrix m;
  m.rows = rows, m.cols = cols;
  m.values.assign(std::size_t(rows) * std::size_t(cols), kNaN);
  return m;
}

// A [sites, H] matrix: a row per attention site of the model, in pass order.
AttributionMatrix siteMatrix(const ModelConfig& c) {
  const std::vector<SiteId> sites = c.sites();
  AttributionMatrix m = emptyMatrix(static_cast<int>(sites.size()), c.nHead);
  m.sites = sites;
  return m;
}

// The decoder layer a re-run for a change at `site` starts from: the site's own layer, or 0 for
// an encoder's site (the encoder runs again, and every cross site reads it).
int fromLayerOf(const SiteId& site) { return site.stack == 1 ? 0 : site.layer; }

bool cancelled(const AttributionControl& c) {
  return c.cancel && c.cancel->load(std::memory_order_relaxed);
}

void checkRun(const Model& m, const ForwardResult& r, const char* what) {
  const ModelConfig& c = m.config();
  if (r.ids.empty() || static_cast<int>(r.layers.size()) != c.nLayer ||
      (r.logits.rows() != tokensOf(r) && r.logits.rows() != 1) ||
      r.logits.cols() != c.vocabSize) {
    throw InputError(std::string(what) + " is not a complete pass of this model");
  }
}

std::string rangeText(int n) { return n == 1 ? "0" : "0.." + std::to_string(n - 1); }

// Ids sorted by logit (descending), ties by the smaller id; the first k.
std::vector<int> topIds(const float* row, int V, int k) {
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  k = std::clamp(k, 0, V);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  order.resize(k);
  return order;
}

// Position pos's logits computed as Model::rerunLogitsAt computes them (one row), so that a
// re-run that changes nothing gives exactly the baseline.
std::vector<float> logitsAt(const Model& m, const ForwardResult& r, int pos) {
  const MatrixRM z = m.unembedResidual(r.residualOut.row(pos));
  return std::vector<float>(z.data(), z.data() + z.size());
}

// Runs `step(row, col)` -> value over a rows x cols grid with progress, rows and cancellation.
// Rows (layers) go from the last to the first: a step re-runs from its own layer, so the last
// layer's steps are the cheapest, and a view shows its first row soonest.
template <class Step>
void fillMatrix(AttributionMatrix& out, const AttributionControl& control,
                const std::function<void(int)>& beginRow, Step step) {
  const double total = double(out.rows) * double(out.cols);
  double done = 0;
  for (int r = out.rows - 1; r >= 0; --r) {
    if (beginRow) beginRow(r);
    std::vector<float> row(std::size_t(out.cols), kNaN);
    for (int c = 0; c < out.cols; ++c) {
      if (cancelled(control)) {
        out.cancelled = true;
        return;
      }
      row[std::size_t(c)] = step(r, c);
      if (control.progress) control.progress(++done / total);
    }
    std::copy(row.begin(), row.end(), out.values.begin() + std::ptrdiff_t(r) * out.cols);
    out.rowsDone = out.rows - r;
    if (control.row) control.row(r, row);
  }
}

}  // namespace

double logProbOf(const float* logits, int vocab, int id) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int v = 0; v < vocab; ++v) mx = std::max(mx, double(logits[v]));
  double sum = 0.0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - mx);
  return double(logits[id]) - mx - std::log(sum);
}

const char* ablationKindName(AblationKind k) { return k == AblationKind::Zero ? "zero" : "mean"; }

ResolvedTarget resolveTarget(const Model& m, const ForwardResult& r, const AttributionTarget& at,
                             int vocab) {
  const int T = tokensOf(r);
  ResolvedTarget out;
  if (at.position < -1 || at.position >= T) {
    throw InputError("position " + std::to_string(at.position) + " is outside the " +
                     std::to_string(T) + " tokens (" + rangeText(T) + ")");
  }
  out.position = at.position < 0 ? T - 1 : at.position;
  if (at.target < -1 || at.target >= vocab) {
    throw InputError("target id " + std::to_string(at.target) + " is outside the vocab (" +
                     rangeText(vocab) + ")");
  }
  out.target = at.target >= 0 ? at.target : topIds(logitsAt(m, r, out.position).data(), vocab, 1)[0];
  return out;
}

// ---------------------------------------------------------------------------------------------

AblationSweep ablationSweep(const Model& m, const ForwardResult& clean, AblationKind kind,
                            const AttributionTarget& at, const AttributionControl& control) {
  checkRun(m, clean, "the run to ablate");
  const ModelConfig& c = m.config();
  const int V = c.vocabSize;
  const ResolvedTarget rt = resolveTarget(m, clean, at, V);
  AblationSweep out;
  out.kind = kind;
  out.position = rt.position, out.target = rt.target;
  out.logProb = logProbOf(logitsAt(m, clean, rt.position).data(), V, rt.target);
  out.delta = siteMatrix(c);
  const std::vector<SiteId>& sites = out.delta.sites;
  ForwardResult work = clean;  // the one copy: re-runs overwrite its layers >= l
  work.capture = Capture::none();  // and keep nothing: each re-run reads one logits row
  fillMatrix(
      out.delta, control,
      [&](int r) {
        const int l = fromLayerOf(sites[r]);
        work.layers[l].residualIn = clean.layers[l].residualIn;
      },
      [&](int r, int h) {
        const int l = fromLayerOf(sites[r]);
        Interventions iv = clean.interventions;
        LayerIntervention& li = iv.at(sites[r], c);
        (kind == AblationKind::Zero ? li.ablatedHeads : li.meanAblatedHeads).push_back(h);
        // The mean over the positions up to the one read: what it reads never depends on
        // tokens after it.
        if (kind == AblationKind::Mean) li.meanUpTo = rt.position;
        const std::vector<float> z = m.rerunLogitsAt(work, l, iv, rt.position);
        return float(logProbOf(z.data(), V, rt.target) - out.logProb);
      });
  return out;
}

// ---------------------------------------------------------------------------------------------

PatchingSetup patchingSetup(const Model& m, const ForwardResult& clean,
                            const ForwardResult& corrupt, const AttributionTarget& at) {
  const int vocab = m.config().vocabSize;
  const int Tc = tokensOf(clean), Tx = tokensOf(corrupt);
  if (Tc != Tx) {
    throw InputError("the clean text is " + std::to_string(Tc) + " tokens and the corrupted text " +
                     std::to_string(Tx) + "; patching needs the same number of tokens");
  }
  const ResolvedTarget rt = resolveTarget(m, clean, at, vocab);
  PatchingSetup s;
  s.position = rt.position, s.target = rt.target;
  const std::vector<float> lc = logitsAt(m, clean, s.position);
  const std::vector<float> lx = logitsAt(m, corrupt, s.position);
  const float* zc = lc.data();
  const float* zx = lx.data();
  if (at.foil < -1 || at.foil >= vocab) {
    throw InputError("foil id " + std::to_string(at.foil) + " is outside the vocab (" +
                     rangeText(vocab) + ")");
  }
  if (at.foil >= 0) {
    s.foil = at.foil;
  } else {
    const std::vector<int> top = topIds(zx, vocab, 2);
    s.foil = top[0] != s.target || top.size() < 2 ? top[0] : top[1];
  }
  if (s.foil == s.target) {
    throw InputError("the foil is the target (" + std::to_string(s.target) +
                     "): the logit difference is 0 in every run");
  }
  s.mClean = double(zc[s.target]) - double(zc[s.foil]);
  s.mCorrupt = double(zx[s.target]) - double(zx[s.foil]);
  if (s.mClean == s.mCorrupt) {
    throw InputError("the clean and corrupted runs give the same logit difference logit(" +
                     std::to_string(s.target) + ") - logit(" + std::to_string(s.foil) + ") = " +
                     std::to_string(s.mClean) + " at position " + std::to_string(s.position) +
                     " (the same text twice?): patching has nothing to restore");
  }
  return s;
}

namespace {

void checkPair(const Model& m, const ForwardResult& clean, const ForwardResult& corrupt) {
  if (tokensOf(clean) != tokensOf(corrupt)) return;  // patchingSetup names both lengths
  checkRun(m, clean, "the clean run");
  checkRun(m, corrupt, "the corrupted run");
}

}  // namespace

PatchingResult patchHeads(const Model& m, const ForwardResult& clean, const ForwardResult& corrupt,
                          const AttributionTarget& at, const AttributionControl& control) {
  checkPair(m, clean, corrupt);
  const ModelConfig& c = m.config();
  PatchingResult out;
  out.setup = patchingSetup(m, clean, corrupt, at);
  const PatchingSetup& s = out.setup;
  out.fraction = siteMatrix(c);
  const std::vector<SiteId>& sites = out.fraction.sites;
  ForwardResult work = corrupt;
  work.capture = Capture::none();
  fillMatrix(
      out.fraction, control,
      [&](int r) {
        const int l = fromLayerOf(sites[r]);
        work.layers[l].residualIn = corrupt.layers[l].residualIn;
      },
      [&](int r, int h) {
        const int l = fromLayerOf(sites[r]);
        Interventions iv = corrupt.interventions;
        iv.at(sites[r], c).patchedHeads.emplace_back(h,
                                                     MatrixRM(clean.site(sites[r]).headOut.mat(h)));
        const std::vector<float> z = m.rerunLogitsAt(work, l, iv, s.position);
        const double mp = double(z[s.target]) - double(z[s.foil]);
        return float((mp - s.mCorrupt) / (s.mClean - s.mCorrupt));
      });
  return out;
}

PatchingResult patchResidual(const Model& m, const ForwardResult& clean,
                             const ForwardResult& corrupt, const AttributionTarget& at,
                             const AttributionControl& control) {
  checkPair(m, clean, corrupt);
  const ModelConfig& c = m.config();
  PatchingResult out;
  out.setup = patchingSetup(m, clean, corrupt, at);
  const PatchingSetup& s = out.setup;
  const int T = tokensOf(corrupt);
  out.fraction = emptyMatrix(c.nLayer, T);
  ForwardResult work = corrupt;
  work.capture = Capture::none();
  fillMatrix(
      out.fraction, control,
      [&](int l) { work.layers[l].residualIn = corrupt.layers[l].residualIn; },
      [&](int l, int t) {
        // Through work.layers each time: the re-run replaces layer l (a reference would dangle).
        work.layers[l].residualIn.row(t) = clean.layers[l].residualIn.row(t);
        const std::vector<float> z = m.rerunLogitsAt(work, l, corrupt.interventions, s.position);
        work.layers[l].residualIn.row(t) = corrupt.layers[l].residualIn.row(t);
        const double mp = double(z[s.target]) - double(z[s.foil]);
        return float((mp - s.mCorrupt) / (s.mClean - s.mCorrupt));
      });
  return out;
}

// ---------------------------------------------------------------------------------------------

namespace {

void checkLayer(const ModelConfig& c, int layer) {
  if (layer < 0 || layer >= c.nLayer) {
    throw InputError("layer " + std::to_string(layer) + " is outside the model (" +
                     std::to_string(c.nLayer) + " layers)");
  }
}

void checkHead(const ModelConfig& c, int layer, int head) {
  if (layer < 0 || layer >= c.nLayer || head < 0 || head >= c.nHead) {
    throw InputError("head " + std::to_string(layer) + ":" + std::to_string(head) +
                     " is outside the model (" + std::to_string(c.nLayer) + " layers of " +
                     std::to_string(c.nHead) + " heads)");
  }
}

}  // namespace

DirectEffect directEffect(const Model& m, const ForwardResult& r, int layer, int head, int position,
                          int k) {
  checkRun(m, r, "the run");
  const ModelConfig& c = m.config();
  checkHead(c, layer, head);
  const ResolvedTarget rt = resolveTarget(m, r, {position, 0, -1}, c.vocabSize);
  DirectEffect out;
  out.layer = layer, out.head = head, out.position = rt.position;
  const MatrixRM o = r.site({0, layer, 0}).headOut.mat(head).row(rt.position);
  const MatrixRM z = m.directLogits(m.headToResidual(layer, head, o), r, rt.position);
  out.logits.assign(z.data(), z.data() + z.size());
  const int V = c.vocabSize;
  for (int id : topIds(out.logits.data(), V, k)) out.promoted.push_back({id, out.logits[id]});
  std::vector<float> neg(out.logits.size());
  for (std::size_t i = 0; i < neg.size(); ++i) neg[i] = -out.logits[i];
  for (int id : topIds(neg.data(), V, k)) out.suppressed.push_back({id, out.logits[id]});
  return out;
}

AttributionMatrix directLogitAttribution(const Model& m, const ForwardResult& r,
                                         const AttributionTarget& at) {
  checkRun(m, r, "the run");
  const ModelConfig& c = m.config();
  const ResolvedTarget rt = resolveTarget(m, r, at, c.vocabSize);
  AttributionMatrix out = siteMatrix(c);
  for (int row = 0; row < out.rows; ++row) {
    const SiteId& site = out.sites[std::size_t(row)];
    MatrixRM u(c.nHead, c.nEmbd);
    for (int h = 0; h < c.nHead; ++h) {
      const MatrixRM o = r.site(site).headOut.mat(h).row(rt.position);
      u.row(h) = m.headToResidual(site.layer, h, o).row(0);
    }
    const MatrixRM z = m.directLogits(u, r, rt.position);
    for (int h = 0; h < c.nHead; ++h) out.values[std::size_t(row) * c.nHead + h] = z(h, rt.target);
    out.rowsDone = row + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

LogitLens logitLens(const Model& m, const ForwardResult& r, const AttributionTarget& at,
                    const AttributionControl& control) {
  checkRun(m, r, "the run");
  const ModelConfig& c = m.config();
  const int V = c.vocabSize, T = tokensOf(r), L = c.nLayer;
  LogitLens out;
  out.layers = L + 1, out.tokens = T;
  out.target = resolveTarget(m, r, at, V).target;
  const std::size_t n = std::size_t(L + 1) * std::size_t(T);
  out.topId.assign(n, -1);
  out.topProb.assign(n, kNaN);
  out.targetProb.assign(n, kNaN);
  for (int l = 0; l <= L; ++l) {
    if (cancelled(control)) {
      out.cancelled = true;
      break;
    }
    const MatrixRM z = m.unembedResidual(l < L ? r.layers[l].residualIn : r.residualOut);
    std::vector<float> row(static_cast<std::size_t>(T));
    for (int t = 0; t < T; ++t) {
      const float* zt = z.row(t).data();
      const int top = topIds(zt, V, 1)[0];
      const double mx = zt[top];
      double sum = 0.0;
      for (int v = 0; v < V; ++v) sum += std::exp(double(zt[v]) - mx);
      const std::size_t i = out.index(l, t);
      out.topId[i] = top;
      out.topProb[i] = float(1.0 / sum);
      out.targetProb[i] = float(std::exp(double(zt[out.target]) - mx) / sum);
      row[std::size_t(t)] = out.targetProb[i];
    }
    out.rowsDone = l + 1;
    if (control.progress) control.progress(double(l + 1) / double(L + 1));
    if (control.row) control.row(l, row);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

namespace {

// Layer `layer`'s weights [H, T, T] as the run computed them: the kept ones, else recomputed
// from the layer's residual stream (its Q, K, V, then the attention with the run's interventions
// there). `scratch` holds a recomputed copy.
const Tensor3& layerWeights(const Model& m, const ForwardResult& r, int layer,
                            AttentionEngine*& engine, std::unique_ptr<AttentionEngine>& owned,
                            Tensor3& scratch) {
  const SiteActivations& a = r.layers[layer].site(0);
  if (!a.weights.empty()) return a.weights;
  const ModelConfig& c = m.config();
  Tensor3 q, k, v;
  m.layerQkv(r, layer, q, k, v);
  if (!engine) {
    owned = makeCpuEngine();
    engine = owned.get();
  }
  const AttentionParams p = layerAttentionParams(c, r.interventions, layer, q.rows);
  engine->runGrouped(q, k, v, c.kvGroup(), p);
  scratch = engine->result(kStageWeights).weights;
  return scratch;
}

// Â_l = 0.5 · (mean over heads of A) + 0.5 · I, rows renormalised.
Eigen::MatrixXd rolloutStep(const Tensor3& w) {
  const int T = w.rows, H = w.heads;
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(T, T);
  for (int h = 0; h < H; ++h) A += w.mat(h).cast<double>();
  A /= double(H);
  A = 0.5 * A + 0.5 * Eigen::MatrixXd::Identity(T, T);
  for (int i = 0; i < T; ++i) {
    const double s = A.row(i).sum();
    if (s > 0) A.row(i) /= s;
  }
  return A;
}

}  // namespace

std::vector<float> valueNorms(const Model& m, const ForwardResult& r, int layer) {
  const ModelConfig& c = m.config();
  checkLayer(c, layer);
  if (static_cast<int>(r.layers.size()) != c.nLayer || r.ids.empty()) {
    throw InputError("the run is not a complete pass of this model");
  }
  const SiteActivations& a = r.layers[layer].site(0);
  Tensor3 q, k, v;
  const Tensor3* V = &a.v;
  if (a.v.empty()) {
    m.layerQkv(r, layer, q, k, v);
    V = &v;
  }
  const int T = V->rows;
  std::vector<float> out(std::size_t(c.nHead) * std::size_t(T));
  for (int h = 0; h < c.nHead; ++h) {
    // V is kept once per KV head: the query head's group's.
    const MatrixRM f = m.headToResidual(layer, h, MatrixRM(V->mat(c.kvHeadOf(h))));
    for (int j = 0; j < T; ++j) out[std::size_t(h) * T + j] = f.row(j).norm();
  }
  return out;
}

MatrixRM valueWeightedAttention(const Model& m, const ForwardResult& r, int layer, int head) {
  const ModelConfig& c = m.config();
  checkHead(c, layer, head);
  const std::vector<float> norms = valueNorms(m, r, layer);
  AttentionEngine* engine = nullptr;
  std::unique_ptr<AttentionEngine> owned;
  Tensor3 scratch;
  const Tensor3& w = layerWeights(m, r, layer, engine, owned, scratch);
  const int T = w.rows;
  MatrixRM out = w.mat(head);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) out(i, j) *= norms[std::size_t(head) * T + j];
  return out;
}

Tensor3 attentionRollout(const ForwardResult& r) {
  const int L = static_cast<int>(r.layers.size());
  if (L == 0) return {};
  for (int l = 0; l < L; ++l)
    if (r.layers[l].site(0).weights.empty())
      throw InputError("the run did not keep layer " + std::to_string(l) +
                       "'s weights (attentionRolloutTo recomputes them)");
  const int T = r.layers[0].site(0).weights.rows;
  Tensor3 out = Tensor3::uninit(L, T, T);
  Eigen::MatrixXd R;
  for (int l = 0; l < L; ++l) {
    const Eigen::MatrixXd A = rolloutStep(r.layers[l].site(0).weights);
    R = l == 0 ? A : Eigen::MatrixXd(A * R);
    out.mat(l) = R.cast<float>();
  }
  return out;
}

MatrixRM attentionRolloutTo(const Model& m, const ForwardResult& r, int layer,
                            const std::atomic<bool>* cancel) {
  const ModelConfig& c = m.config();
  checkLayer(c, layer);
  if (static_cast<int>(r.layers.size()) != c.nLayer || r.ids.empty()) {
    throw InputError("the run is not a complete pass of this model");
  }
  AttentionEngine* engine = nullptr;
  std::unique_ptr<AttentionEngine> owned;
  Tensor3 scratch;
  Eigen::MatrixXd R;
  for (int l = 0; l <= layer; ++l) {
    if (cancel && cancel->load(std::memory_order_relaxed)) return {};
    const Eigen::MatrixXd A = rolloutStep(layerWeights(m, r, l, engine, owned, scratch));
    R = l == 0 ? A : Eigen::MatrixXd(A * R);
  }
  return R.cast<float>();
}

}  // namespace attnviz
