// The pass: the one layer skeleton (Workspace::project, finishLayer, block) and what runs it
// over a whole prompt: forward, re-runs from a layer, the Q/K/V recompute, and the pieces of the
// pass that attribution reads.
#include "attnviz/engine/engine_detail.h"
#include "attnviz/engine/isa.h"
#include "attnviz/engine/parallel.h"
#include "model_internal.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <utility>

namespace attnviz {

// ---------------------------------------------------------------------------------------------
// The skeleton

const Model::Weights::Layer& Model::Workspace::weights(const Weights& w, int l,
                                                       const ModelConfig& c, int rows) {
  const Weights::Layer& L = w.layers[l];
  if (L.lazy.empty()) return L;
  // The layer's pages mapped in one call each: touched one by one, a 1B F16 file's 2.5 GB cost
  // about 1.3 s of page faults a pass on our VMs, against 0.08 s this way.
  for (const Weights::Layer::Lazy& z : L.lazy)
    populatePages(z.src.data, std::size_t(z.src.rows) * z.src.rowBytes);
  // Read as stored by the packed products: every lazy matrix has its stored view (GPT-2's
  // Conv1D matrices, [in, out], have none and are converted).
  if (rows >= kPackedMinRows && packedProducts() && !w.conv1dInMajor) return L;
  if (scratch.size() < w.scratchFloats) scratch = FloatBuffer(w.scratchFloats);
  converted = L;
  for (const Weights::Layer::Lazy& z : L.lazy) {
    convertRows(z.src, 0, z.src.rows, scratch.data() + z.offset);
    converted.p[int(z.slot)] = scratch.data() + z.offset;
  }
  layerViews(converted, c, w.conv1dInMajor);
  return converted;
}

void Model::Workspace::lin(const MatrixRM& x, const LinearView& f, const StoredMatrix& s,
                           MatrixRM& out) {
  if (decode && s && x.rows() == 1) {
    out.resize(1, s.rows);
    matVec(s.type, s.data, s.rows, s.cols, x.data(), out.data());
    if (f.b) out.row(0) += Eigen::Map<const Eigen::RowVectorXf>(f.b, s.rows);
    return;
  }
  if (s && x.rows() > 1 && fastActivations()) {  // the fast path: x rounded to 8 bits
    const int m = int(x.rows());
    resizeFresh(out, m, s.rows);
    if (matMulFast(s.type, s.data, s.rows, s.cols, x.data(), long(x.cols()), m, out.data(),
                   long(s.rows))) {
      if (f.b) out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(f.b, s.rows);
      return;
    }
  }
  if (!f.w && s) {  // kept as stored and not converted (weights()): converted as it is packed
    const int m = int(x.rows());
    resizeFresh(out, m, s.rows);
    linearABt(m, s.rows, s.cols, x.data(), long(x.cols()), storedRows(s), out.data(),
              long(s.rows));
    if (f.b) out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(f.b, s.rows);
    return;
  }
  linear(x, f, out);
}

void Model::Workspace::lins(const MatrixRM& x, std::initializer_list<Out> outs) {
  bool batch = decode && x.rows() == 1;
  for (const Out& o : outs) batch = batch && *o.s;
  if (!batch) {
    for (const Out& o : outs) lin(x, *o.f, *o.s, *o.out);
    return;
  }
  MatVecJob jobs[4];
  int n = 0;
  for (const Out& o : outs) {
    o.out->resize(1, o.s->rows);
    jobs[n++] = {o.s->type, o.s->data, o.s->rows, o.s->cols, x.data(), o.out->data()};
  }
  matVecBatch(jobs, n);
  for (const Out& o : outs)
    if (o.f->b) o.out->row(0) += Eigen::Map<const Eigen::RowVectorXf>(o.f->b, o.s->rows);
}

namespace {

// Free heap bytes past which a finished pass hands its pages back (malloc_trim).
constexpr std::size_t kTrimFreeBytes = std::size_t{16} << 20;

bool normBefore(NormPlacement p) { return p == NormPlacement::Pre || p == NormPlacement::Sandwich; }

// RMSNorm of each head's d_h columns of x [T, n * d_h] with one weight vector [d_h].
void headNorm(const ModelConfig& c, MatrixRM& x, int heads, const float* w) {
  const int T = static_cast<int>(x.rows()), dh = c.headSize;
  MatrixRM head(T, dh), out;
  for (int h = 0; h < heads; ++h) {
    head = x.block(0, h * dh, T, dh);
    normForward(NormKind::RMSNorm, head, w, nullptr, c.layerNormEps, out, c.normWeightOffset);
    x.block(0, h * dh, T, dh) = out;
  }
}

// Whether the encoder's sites (stack 1) are intervened on differently in `a` and `b` (then an
// encoder-decoder's encoder runs again).
bool encoderChanged(const Interventions& a, const Interventions& b) {
  auto of = [](const Interventions& iv) {
    std::vector<std::pair<SiteId, const LayerIntervention*>> out;
    for (const auto& e : iv.entries())
      if (e.first.stack == 1 && e.second->any()) out.push_back(e);
    return out;
  };
  const auto ea = of(a), eb = of(b);
  if (ea.size() != eb.size()) return true;
  for (std::size_t i = 0; i < ea.size(); ++i) {
    const LayerIntervention &x = *ea[i].second, &y = *eb[i].second;
    if (ea[i].first != eb[i].first || x.ablatedHeads != y.ablatedHeads ||
        x.meanAblatedHeads != y.meanAblatedHeads || !x.patchedHeads.empty() ||
        !y.patchedHeads.empty() || x.mask.any() || y.mask.any() ||
        x.temperature != y.temperature || x.ropeOff != y.ropeOff || x.meanUpTo != y.meanUpTo ||
        x.residualEdits != y.residualEdits) {
      return true;
    }
  }
  return false;
}

// x receives a sub-block's result u by the family's placement of norms (`normed`: scratch).
void addResidual(const ModelConfig& c, const Model::Weights::Layer& W, MatrixRM& x, MatrixRM& u,
                 Slot post, Slot postB, MatrixRM& normed) {
  switch (c.normPlacement) {
    case NormPlacement::Pre:
      x += u;
      break;
    case NormPlacement::Sandwich:
    case NormPlacement::After:
      normForward(c.norm, u, W[post], W[postB], c.layerNormEps, normed, c.normWeightOffset);
      x += normed;
      break;
    case NormPlacement::Post:
      u += x;
      normForward(c.norm, u, W[post], W[postB], c.layerNormEps, x, c.normWeightOffset);
      break;
  }
}

}  // namespace

namespace {

// A layer's residual edits on the stream it wrote, x [T, d], in order. A mean is a prefix mean,
// the rule of head mean ablation: position t takes the dimension's mean over positions 0..t of
// the stream as the edit finds it, so no position reads a token after it.
void applyResidualEdits(const ModelConfig& c, const LayerIntervention& li, int layer,
                        MatrixRM& x) {
  const int T = static_cast<int>(x.rows());
  for (const ResidualEdit& e : li.residualEdits) {
    if (e.dim < 0 || e.dim >= c.nEmbd || e.position < -1 || e.position >= T)
      throw InputError("layer " + std::to_string(layer) + ": residual edit of dimension " +
                       std::to_string(e.dim) + " at position " + std::to_string(e.position) +
                       " is outside the stream (" + std::to_string(T) + " x " +
                       std::to_string(c.nEmbd) + ")");
    const int last = e.position < 0 ? T - 1 : e.position;
    std::vector<float> v(std::size_t(last) + 1, 0.0f);
    if (e.toMean) {
      double sum = 0.0;
      for (int t = 0; t <= last; ++t) v[std::size_t(t)] = float((sum += x(t, e.dim)) / (t + 1));
    }
    for (int t = e.position < 0 ? 0 : last; t <= last; ++t) x(t, e.dim) = v[std::size_t(t)];
  }
}

// Each head's row norms of x [T, heads * d_h] into out [heads, T].
void headRowNorms(const MatrixRM& x, int heads, int dh, std::vector<float>& out) {
  const int T = static_cast<int>(x.rows());
  out.assign(std::size_t(heads) * T, 0.0f);
  for (int h = 0; h < heads; ++h)
    for (int t = 0; t < T; ++t) out[std::size_t(h) * T + t] = x.block(t, h * dh, 1, dh).norm();
}

}  // namespace

void Model::Workspace::project(const ModelConfig& c, const Weights::Layer& W, int layer,
                               const MatrixRM& x, int pos0, bool rope, Model::QkNorms* norms) {
  const MatrixRM* in = &x;
  // (A layer whose row lacks the norm, ModernBERT's first, reads x as it is.)
  if (normBefore(c.normPlacement) && W[Slot::AttnNorm]) {
    normForward(c.norm, x, W[Slot::AttnNorm], W[Slot::AttnNormB], c.layerNormEps, a,
                c.normWeightOffset);
    in = &a;
  }
  lins(*in, {{&W.q, &W.qS, &qm}, {&W.k, &W.kS, &km}, {&W.v, &W.vS, &vm}});
  if (norms && c.qkNorm != QkNorm::None) {
    norms->heads = c.nHead, norms->kvHeads = c.nKvHead, norms->tokens = int(x.rows());
    headRowNorms(qm, c.nHead, c.headSize, norms->qBefore);
    headRowNorms(km, c.nKvHead, c.headSize, norms->kBefore);
  }
  if (c.qkNorm == QkNorm::PerHead) {
    headNorm(c, qm, c.nHead, W[Slot::QNorm]);
    headNorm(c, km, c.nKvHead, W[Slot::KNorm]);
  } else if (c.qkNorm == QkNorm::Whole) {
    normForward(NormKind::RMSNorm, qm, W[Slot::QNorm], nullptr, c.layerNormEps, normed,
                c.normWeightOffset);
    std::swap(qm, normed);
    normForward(NormKind::RMSNorm, km, W[Slot::KNorm], nullptr, c.layerNormEps, normed,
                c.normWeightOffset);
    std::swap(km, normed);
  }
  if (norms && c.qkNorm != QkNorm::None) {
    headRowNorms(qm, c.nHead, c.headSize, norms->qAfter);
    headRowNorms(km, c.nKvHead, c.headSize, norms->kAfter);
  }
  const int T = static_cast<int>(x.rows()), dh = c.headSize;
  if (rope && c.positions == PositionKind::Rope) {
    // Each head's slice rotates on its own: rotate per head through a [T, dh] copy.
    auto rotate = [&](MatrixRM& mat, int heads) {
      MatrixRM head(T, dh);
      for (int h = 0; h < heads; ++h) {
        head = mat.block(0, h * dh, T, dh);
        applyRope(c, head, pos0, false, layer);
        mat.block(0, h * dh, T, dh) = head;
      }
    };
    rotate(qm, c.nHead);
    rotate(km, c.nKvHead);
  }
  // The engine scales by 1/sqrt(d_h); a family with its own scale (Gemma's
  // query_pre_attn_scalar) has it folded into q, so every view of q.k sees the real scores.
  if (c.scoreScale > 0.0f) qm *= c.scoreScale * std::sqrt(float(dh));
}

void Model::Workspace::projectCross(const ModelConfig& c, const Weights::Layer& W,
                                    const MatrixRM& x, const MatrixRM* enc) {
  const MatrixRM* in = &x;
  if (normBefore(c.normPlacement)) {
    normForward(c.norm, x, W[Slot::XNorm], W[Slot::XNormB], c.layerNormEps, a,
                c.normWeightOffset);
    in = &a;
  }
  lin(*in, W.xq, W.xqS, qm);
  if (enc) {
    lin(*enc, W.xk, W.xkS, km);
    lin(*enc, W.xv, W.xvS, vm);
  }
  if (c.scoreScale > 0.0f) qm *= c.scoreScale * std::sqrt(float(c.headSize));
}

void Model::Workspace::attnResidual(const ModelConfig& c, const Weights::Layer& W,
                                    const LayerIntervention* li, const Tensor3& o, MatrixRM& x,
                                    Tensor3* keptHeadOut, bool cross) {
  mergeHeads(o, li, merged, keptHeadOut);
  if (cross) {
    lin(merged, W.xo, W.xoS, proj);
  } else {
    lin(merged, W.o, W.oS, proj);
  }
  if (cross) {
    addResidual(c, W, x, proj, Slot::XNorm, Slot::XNormB, normed);
  } else {
    addResidual(c, W, x, proj, Slot::PostAttnNorm, Slot::PostAttnNormB, normed);
  }
}

void Model::Workspace::mlpResidual(const ModelConfig& c, const Weights::Layer& W, MatrixRM& x) {
  const MatrixRM* in = &x;
  if (normBefore(c.normPlacement)) {
    normForward(c.norm, x, W[Slot::MlpNorm], W[Slot::MlpNormB], c.layerNormEps, m,
                c.normWeightOffset);
    in = &m;
  }
  if (c.mlp == MlpKind::Gated) {
    lins(*in, {{&W.up, &W.upS, &hidden}, {&W.gate, &W.gateS, &gate}});
    activationForward(gate, c.activation);
    hidden.array() *= gate.array();
  } else {
    lin(*in, W.up, W.upS, hidden);
    activationForward(hidden, c.activation);
  }
  lin(hidden, W.down, W.downS, out);
  addResidual(c, W, x, out, Slot::PostMlpNorm, Slot::PostMlpNormB, normed);
}

// ---------------------------------------------------------------------------------------------
// A whole prompt

struct Model::OCache {
  std::mutex mutex;
  int layer = -1;
  FloatBuffer o;  // W_o of `layer` as float32 [d, H d_h]
};

Model::Model() : oCache_(std::make_unique<OCache>()) {}
Model::~Model() = default;

std::vector<int> Model::encode(const std::string& text) const {
  std::vector<int> ids = tokenizer_->encode(text, true);
  if (ids.empty()) throw InputError("the text is empty: nothing to run");
  if (static_cast<int>(ids.size()) > config_.nPositions) {
    const FamilyRow* row = familyByName(config_.family);
    const std::string key = !files_.gguf.empty() ? config_.family + ".context_length"
                            : row                ? row->contextKey
                                                 : "max_position_embeddings";
    throw InputError("the text is " + std::to_string(ids.size()) + " tokens, more than the " +
                     std::to_string(config_.nPositions) + " positions (" + key + ") of " +
                     (files_.gguf.empty() ? files_.config : files_.gguf) + "; shorten it");
  }
  return ids;
}

namespace {
thread_local PassProgress* tCurrentProgress = nullptr;
}  // namespace

double PassProgress::fraction() const {
  const int planned = layersPlanned.load();
  if (planned <= 0) return 0.0;
  return std::clamp(double(layersDone.load()) / planned, 0.0, 1.0);
}

PassProgress* PassProgress::current() { return tCurrentProgress; }

PassProgress::Scope::Scope(PassProgress* p) : previous_(tCurrentProgress) { tCurrentProgress = p; }

PassProgress::Scope::~Scope() { tCurrentProgress = previous_; }

void Model::checkIds(const std::vector<int>& ids) const {
  if (ids.empty()) throw InputError("no token ids: nothing to run");
  if (static_cast<int>(ids.size()) > config_.nPositions) {
    throw InputError(std::to_string(ids.size()) + " tokens are more than the " +
                     std::to_string(config_.nPositions) + " positions of the model's context");
  }
  for (int id : ids) {
    if (id < 0 || id >= config_.vocabSize) {
      throw InputError("token id " + std::to_string(id) + " is outside the vocab (0.." +
                       std::to_string(config_.vocabSize - 1) + ")");
    }
  }
}

ForwardResult Model::forward(const std::vector<int>& ids, const Interventions& iv,
                             const Capture& capture, const std::vector<int>& typeIds) const {
  checkIds(ids);
  if (!typeIds.empty()) {
    if (typeIds.size() != ids.size()) {
      throw InputError(std::to_string(typeIds.size()) + " token types for " +
                       std::to_string(ids.size()) + " tokens");
    }
    for (int t : typeIds) {
      if (t < 0 || t >= std::max(1, config_.typeVocabSize)) {
        throw InputError("token type " + std::to_string(t) + " is outside the model's " +
                         std::to_string(std::max(1, config_.typeVocabSize)) + " types");
      }
    }
  }
  if (config_.encoderDecoder()) {
    throw InputError("an encoder-decoder (" + config_.family +
                     ") reads a source and a target: give both (--target or --target-ids)");
  }
  ForwardResult r;
  r.ids = ids;
  r.capture = capture;
  r.layers.resize(config_.nLayer);
  embed(0, ids, typeIds, config_.nLayer > 0 ? r.layers[0].residualIn : r.residualOut);
  rerunFrom(r, 0, iv);
  return r;
}

void Model::embed(int stack, const std::vector<int>& ids, const std::vector<int>& typeIds,
                  MatrixRM& x) const {
  const int T = static_cast<int>(ids.size()), d = config_.nEmbd;
  x.resize(T, d);
  for (int t = 0; t < T; ++t) embedRow(*w_, config_, ids[t], x.row(t).data());
  addPositions(*w_, config_, stack, 0, x);
  if (stack == 0) {
    addEncoderEmbeddings(*w_, config_, typeIds, x);
  } else if (const float* n = w_->global(Global::EncEmbedNorm)) {
    MatrixRM normed;
    normForward(NormKind::LayerNorm, x, n, w_->global(Global::EncEmbedNormB), config_.layerNormEps,
                normed);
    x = std::move(normed);
  }
}

std::shared_ptr<const ForwardResult> Model::runEncoder(const std::vector<int>& source,
                                                       const Interventions& iv,
                                                       const Capture& capture) const {
  auto e = std::make_shared<ForwardResult>();
  e->ids = source;
  e->capture = capture;
  e->layers.resize(config_.nEncoderLayer);
  embed(1, source, {}, e->layers[0].residualIn);
  std::vector<std::shared_ptr<LayerActivations>> fresh;
  MatrixRM out;
  runLayers(*e, 0, iv, fresh, out, 1);
  for (std::size_t i = 0; i < fresh.size(); ++i) e->layers.set(i, std::move(fresh[i]));
  // The encoder's final norm (pre-norm families), which every cross site reads after.
  if (const float* n = w_->global(Global::EncNormF)) {
    normForward(config_.norm, out, n, w_->global(Global::EncNormFB), config_.layerNormEps,
                e->residualOut, config_.normWeightOffset);
  } else {
    e->residualOut = std::move(out);
  }
  e->interventions = iv;
  e->logits.resize(0, config_.vocabSize);
  return e;
}

ForwardResult Model::forwardSeq2Seq(const std::vector<int>& source,
                                    const std::vector<int>& target, const Interventions& iv,
                                    const Capture& capture) const {
  if (!config_.encoderDecoder()) {
    throw InputError("a target is for encoder-decoders; " + config_.family + " reads one text");
  }
  checkIds(source);
  checkIds(target);
  checkRerun(ForwardResult{}, -1, iv);  // the sites and heads of the interventions
  ForwardResult r;
  r.ids = target;
  r.capture = capture;
  r.encoder = runEncoder(source, iv, capture);
  r.layers.resize(config_.nLayer);
  embed(0, target, {}, r.layers[0].residualIn);
  rerunFrom(r, 0, iv);
  return r;
}

void Model::checkRerun(const ForwardResult& r, int fromLayer, const Interventions& iv) const {
  if (fromLayer != -1 && (fromLayer < 0 || fromLayer > config_.nLayer ||
                         static_cast<int>(r.layers.size()) != config_.nLayer)) {
    throw InputError("rerunFrom: layer " + std::to_string(fromLayer) + " is outside the model");
  }
  if (iv.layers.size() > std::size_t(config_.nLayer)) {
    throw InputError("interventions for " + std::to_string(iv.layers.size()) +
                     " layers; the model has " + std::to_string(config_.nLayer));
  }
  for (const auto& [site, li] : iv.entries()) {
    if (!config_.hasSite(site)) {
      throw InputError("an intervention at " + config_.siteName(site) + " (stack " +
                       std::to_string(site.stack) + ", site " + std::to_string(site.site) +
                       "): the model has no such attention site");
    }
    std::vector<int> heads = li->ablatedHeads;
    heads.insert(heads.end(), li->meanAblatedHeads.begin(), li->meanAblatedHeads.end());
    for (const auto& p : li->patchedHeads) heads.push_back(p.first);
    for (int h : heads) {
      if (h < 0 || h >= config_.nHead) {
        throw InputError("ablation " + std::to_string(site.layer) + ":" + std::to_string(h) +
                         " is outside the model");
      }
    }
  }
}

void Model::rerunFrom(ForwardResult& r, int fromLayer, const Interventions& iv) const {
  checkRerun(r, fromLayer, iv);
  // New interventions in the encoder change what every cross site reads: the encoder runs
  // again (into `encoder`, committed with the decoder's layers once nothing can throw).
  std::shared_ptr<const ForwardResult> encoder = r.encoder;
  if (r.encoder && encoderChanged(r.encoder->interventions, iv)) {
    encoder = runEncoder(r.encoder->ids, iv, r.capture);
    fromLayer = 0;
  }
  std::vector<std::shared_ptr<LayerActivations>> fresh;
  MatrixRM out;
  runLayers(r, fromLayer, iv, fresh, out, 0, encoder.get());  // its workspace is freed here
  r.encoder = std::move(encoder);
  commit(r, fromLayer, iv, fresh, out);
  // The workspace now lies as free holes between kept activations: hand its pages back when they
  // are many, so the peak is the mapped file plus what the result holds. A small pass keeps them
  // for the next one (the head finder runs thousands): trimming every pass made each one fault
  // its workspace in again (the shipped kjv-sp-llama over 56 sequences: 107k page faults, 87k).
  // The free top that prepareHeap added is not counted.
  if (::mallinfo2().fordblks > kTrimFreeBytes + heapKeptFree()) trimHeap();
  finish(r);
}

void Model::runLayers(const ForwardResult& r, int fromLayer, const Interventions& iv,
                      std::vector<std::shared_ptr<LayerActivations>>& fresh, MatrixRM& out,
                      int stack, const ForwardResult* encoder) const {
  const int L = config_.layersOf(stack);
  if (fromLayer >= L) {
    out = r.residualOut;
    return;
  }
  if (!encoder) encoder = r.encoder.get();
  const MatrixRM* enc = encoder ? &encoder->residualOut : nullptr;
  // Layers below fromLayer stay as they are (shared with any copy of r); the ones re-run are new
  // objects, so a pass that shares them keeps its own.
  MatrixRM x = r.layers[fromLayer].residualIn;
  Workspace ws;
  PassProgress* progress = PassProgress::current();
  for (int l = fromLayer; l < L; ++l) {
    if (progress && progress->cancel.load()) throw PassCancelled();
    auto act = std::make_shared<LayerActivations>();
    act->residualIn = std::move(x);
    runLayer(*act, l, iv, r.capture, ws, x, stack, enc);
    fresh.push_back(std::move(act));
    if (progress) {
      progress->layersDone.fetch_add(1);
      if (progress->onLayer) progress->onLayer(l);
    }
  }
  out = std::move(x);
}

void Model::commit(ForwardResult& r, int fromLayer, const Interventions& iv,
                   std::vector<std::shared_ptr<LayerActivations>>& fresh, MatrixRM& out) const {
  for (std::size_t i = 0; i < fresh.size(); ++i)
    r.layers.set(std::size_t(fromLayer) + i, std::move(fresh[i]));
  r.residualOut = std::move(out);
  r.interventions = iv;
}

void Model::runLayer(LayerActivations& act, int l, const Interventions& iv, const Capture& cap,
                     Workspace& ws, MatrixRM& next, int stack, const MatrixRM* enc) const {
  // Stack 1's layers follow stack 0's in the weights.
  const int T = static_cast<int>(act.residualIn.rows());
  const Weights::Layer& W = ws.weights(*w_, stack == 1 ? config_.nLayer + l : l, config_, T);
  const ModelConfig& c = config_;
  const int H = c.nHead, dh = c.headSize;
  next = act.residualIn;
  const std::vector<SiteKind> kinds = c.sitesOf(l, stack);
  act.sites.resize(kinds.size());
  for (std::size_t s = 0; s < kinds.size(); ++s) act.sites[s].kind = kinds[s];
  // One site's attention over ws.qm / km / vm (T_k key rows), keeping what the capture asks.
  auto attendSite = [&](int s) -> const Tensor3& {
    SiteActivations& site = act.sites[std::size_t(s)];
    const int Tk = static_cast<int>(ws.km.rows());
    // Each query head reads its group's K/V head where it is (no repeated copy).
    splitHeads(ws.qm, H, dh, ws.q);
    splitHeads(ws.km, c.nKvHead, dh, ws.kvK);
    splitHeads(ws.vm, c.nKvHead, dh, ws.kvV);
    AttentionParams p = siteAttentionParams(c, iv, SiteId{stack, l, s}, T, Tk);
    if (c.positions == PositionKind::Relative && kinds[std::size_t(s)] != SiteKind::Cross) {
      if (ws.biasStack != stack || ws.biasRows != T) {
        ws.bias = attnviz::positionBias(*w_, c, stack, T, T);
        ws.biasStack = stack, ws.biasRows = T;
      }
      addScoreBias(p, ws.bias);
    }
    validateParams(p, H, T, Tk);
    ws.engine->runGrouped(ws.q, ws.kvK, ws.kvV, c.kvGroup(), p);
    const AttentionResult& res = ws.engine->result(kStageWeights | kStageOutput | kStageRows);
    if (stack == 0 && s == 0) {
      if (PassProgress* progress = PassProgress::current(); progress && progress->onWeights)
        progress->onWeights(l, res.weights);
    }
    if (cap.weights.has(l)) {
      site.weights = res.weights;
      site.rows = res.rows;
    }
    if (cap.thumbnail > 0) site.thumb = poolThumb(res.weights, cap.thumbnail);
    if (cap.qkv.has(l)) {  // the workspace's buffers are handed over (new ones next site)
      if (cap.keepQ) site.q = std::move(ws.q);
      site.k = std::move(ws.kvK);
      site.v = std::move(ws.kvV);
    }
    return res.output;
  };
  auto kept = [&](int s) { return cap.headOut.has(l) ? &act.sites[std::size_t(s)].headOut : nullptr; };
  const LayerIntervention* li = iv.find(SiteId{stack, l, 0});
  if (kinds.size() > 1 && kinds[1] == SiteKind::Cross) {
    if (!enc) throw InputError("a cross-attention site needs the encoder's states");
    auto cross = [&]() -> const Tensor3& {
      ws.projectCross(c, W, next, enc);
      return attendSite(1);
    };
    ws.blockWithCross(c, W, l, next, 0, li, [&]() -> const Tensor3& { return attendSite(0); },
                      kept(0), iv.find(SiteId{stack, l, 1}), cross, kept(1));
  } else {
    ws.block(c, W, l, next, 0, li, [&]() -> const Tensor3& { return attendSite(0); }, kept(0));
  }
  if (li) applyResidualEdits(c, *li, l, next);
}

void Model::layerQkv(const ForwardResult& r, int layer, Tensor3& q, Tensor3& k,
                     Tensor3& v) const {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.nLayer || static_cast<int>(r.layers.size()) != c.nLayer) {
    throw InputError("layer " + std::to_string(layer) + " is outside the model");
  }
  const LayerActivations& a = r.layers[layer];
  if (const SiteActivations& self = a.site(0); !self.q.empty()) {
    q = self.q, k = self.k, v = self.v;
    return;
  }
  Workspace ws;
  const LayerIntervention* li = r.interventions.find(layer);
  ws.project(c, ws.weights(*w_, layer, c), layer, a.residualIn, 0, !(li && li->ropeOff));
  splitHeads(ws.qm, c.nHead, c.headSize, q);
  splitHeads(ws.km, c.nKvHead, c.headSize, k);
  splitHeads(ws.vm, c.nKvHead, c.headSize, v);
}

Model::QkNorms Model::layerQkNorms(const ForwardResult& r, int layer) const {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.nLayer || static_cast<int>(r.layers.size()) != c.nLayer)
    throw InputError("layer " + std::to_string(layer) + " is outside the model");
  QkNorms out;
  if (c.qkNorm == QkNorm::None) return out;
  Workspace ws;
  ws.project(c, ws.weights(*w_, layer, c), layer, r.layers[layer].residualIn, 0, false, &out);
  return out;
}

void Model::finish(ForwardResult& r) const {
  MatrixRM f;
  if (!w_->headMissing.empty()) {  // an encoder without its MLM head: no logits
    r.logits.resize(0, config_.vocabSize);
    return;
  }
  if (r.capture.allLogits || r.residualOut.rows() == 0) {
    finalNorm(*w_, config_, r.residualOut, f);
  } else {
    const MatrixRM last = r.residualOut.bottomRows(1);
    finalNorm(*w_, config_, last, f);
  }
  unembed(*w_, config_, f, r.logits);
}

// ---------------------------------------------------------------------------------------------
// For attribution (attribution.h)

MatrixRM Model::lastHidden(const MatrixRM& x) const {
  MatrixRM f;
  finalNorm(*w_, config_, x, f);
  return f;
}

MatrixRM Model::unembedResidual(const MatrixRM& x) const {
  if (x.cols() != config_.nEmbd) {
    throw InputError("unembedResidual: rows of " + std::to_string(x.cols()) +
                     " values; the model's width is " + std::to_string(config_.nEmbd));
  }
  MatrixRM f, logits;
  finalNorm(*w_, config_, x, f);
  unembed(*w_, config_, f, logits);
  return logits;
}

MatrixRM Model::headToResidual(int layer, int head, const MatrixRM& o) const {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.nLayer || head < 0 || head >= c.nHead) {
    throw InputError("head " + std::to_string(layer) + ":" + std::to_string(head) +
                     " is outside the model");
  }
  if (o.cols() != c.headSize) {
    throw InputError("headToResidual: rows of " + std::to_string(o.cols()) +
                     " values; the head size is " + std::to_string(c.headSize));
  }
  const Weights::Layer& L = w_->layers[layer];
  LinearView W = L.o;
  std::unique_lock<std::mutex> lock;
  if (!W.w) {
    // Kept as stored: W_o alone is converted (not the whole layer), once per layer, and kept for
    // the next head of the same layer.
    lock = std::unique_lock<std::mutex>(oCache_->mutex);
    StoredMatrix s;  // as stored ([in, out] rows for a GPT-2 folder, as its view reads them)
    for (const Weights::Layer::Lazy& z : L.lazy)
      if (z.slot == Slot::O) s = z.src;
    if (!s) throw InputError("headToResidual: layer " + std::to_string(layer) + " has no W_o");
    if (oCache_->layer != layer) {
      oCache_->o = FloatBuffer(std::size_t(s.rows) * s.cols);
      convertRows(s, 0, s.rows, oCache_->o.data());
      oCache_->layer = layer;
    }
    W.w = oCache_->o.data();
  }
  LinearView s = W;
  s.b = nullptr;
  s.in = c.headSize;
  // [in, out] rows: the head's rows; [out, in] rows: the head's columns (same row stride).
  s.w = W.inMajor ? W.w + long(head) * c.headSize * W.ld : W.w + long(head) * c.headSize;
  MatrixRM out;
  linear(o, s, out);
  return out;
}

MatrixRM Model::directLogits(const MatrixRM& u, const ForwardResult& r, int pos) const {
  const ModelConfig& c = config_;
  const int T = static_cast<int>(r.residualOut.rows()), d = c.nEmbd;
  if (pos < 0 || pos >= T) {
    throw InputError("position " + std::to_string(pos) + " is outside the " + std::to_string(T) +
                     " tokens");
  }
  if (u.cols() != d || r.residualOut.cols() != d) {
    throw InputError("directLogits: vectors of " + std::to_string(u.cols()) +
                     " values; the model's width is " + std::to_string(d));
  }
  // Only a stream that reaches the logits through one final norm and a linear head has direct
  // effects: post-norm blocks renormalise it after every layer, and a masked-LM head's transform
  // (dense, activation, LayerNorm) is not linear.
  if (c.normPlacement == NormPlacement::Post) {
    throw InputError(
        "direct effects need a pre-norm model: post-norm blocks renormalise the residual stream "
        "after every layer, so a head's output has no linear path to the logits");
  }
  if (w_->global(Global::HeadDense)) {
    throw InputError(
        "direct effects need a linear head: this model's logits come through its masked-LM "
        "transform (dense, activation, LayerNorm); ablate the head instead");
  }
  if (!w_->global(Global::NormF))
    throw InputError("direct effects need the model's final norm, which this model lacks");
  // The norm's denominator at pos, computed as normForward computes it.
  const Eigen::ArrayXf row = r.residualOut.row(pos).transpose().array();
  float denom;
  if (c.norm == NormKind::RMSNorm) {
    denom = std::sqrt(row.square().mean() + c.layerNormEps);
  } else {
    const float mean = row.mean();
    denom = std::sqrt((row - mean).square().mean() + c.layerNormEps);
  }
  const Eigen::ArrayXf W =
      Eigen::Map<const Eigen::ArrayXf>(w_->global(Global::NormF), d) + c.normWeightOffset;
  MatrixRM scaled(u.rows(), d);
  for (Eigen::Index i = 0; i < u.rows(); ++i) {
    Eigen::RowVectorXf v = u.row(i);
    if (c.norm == NormKind::LayerNorm) v.array() -= v.mean();
    scaled.row(i) = (v.array() / denom * W.transpose()).matrix();
  }
  // The unembedding without a bias and without the final softcap: direct effects are linear.
  MatrixRM out;
  unembed(*w_, c, scaled, out, true);
  return out;
}

std::vector<float> Model::rerunLogitsAt(ForwardResult& r, int fromLayer, const Interventions& iv,
                                        int pos) const {
  checkRerun(r, fromLayer, iv);
  std::shared_ptr<const ForwardResult> encoder = r.encoder;
  if (r.encoder && encoderChanged(r.encoder->interventions, iv)) {
    encoder = runEncoder(r.encoder->ids, iv, r.capture);
    fromLayer = 0;
  }
  // (as_const: the non-const [] would copy a layer another pass shares)
  const MatrixRM& in = config_.nLayer > 0 ? std::as_const(r.layers)[0].residualIn : r.residualOut;
  if (pos < 0 || pos >= in.rows()) {
    throw InputError("position " + std::to_string(pos) + " is outside the " +
                     std::to_string(in.rows()) + " tokens");
  }
  std::vector<std::shared_ptr<LayerActivations>> fresh;
  MatrixRM out;
  runLayers(r, fromLayer, iv, fresh, out, 0, encoder.get());
  const MatrixRM x = out.row(pos);
  r.encoder = std::move(encoder);
  commit(r, fromLayer, iv, fresh, out);
  MatrixRM f, logits;
  finalNorm(*w_, config_, x, f);
  unembed(*w_, config_, f, logits);
  return std::vector<float>(logits.data(), logits.data() + logits.size());
}

}  // namespace attnviz
