// attnviz session: the stages, their generation counters and the displayed matrix.
#include "attnviz/session/session.h"

#include "attnviz/engine/engine_detail.h"
#include "attnviz/render/streamed_export.h"

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace attnviz {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One head's value-weighted weights, out_ij = W_ij |v_j W_O^h| (`norm`: the head's [Tk] value
// norms), -inf where the logits B are: the view's stage and its export alike.
void valueWeightedHead(const float* W, const float* B, const float* norm, int Tq, int Tk,
                       float* out) {
  for (int i = 0; i < Tq; ++i)
    for (int j = 0; j < Tk; ++j) {
      const std::size_t k = std::size_t(i) * Tk + j;
      out[k] = B[k] == kNegInf ? kNegInf : W[k] * norm[j];
    }
}
constexpr std::uint64_t kNever = ~std::uint64_t{0};
// The largest T_q x T_k whose mask expression pooled mode evaluates (a byte a cell, 64 MiB).
constexpr std::size_t kMaxPooledExprCells = std::size_t(8192) * 8192;

// headsStreamed(): the thumbnails' resolution, about this many pixels along the longer axis.
constexpr int kThumbnailPixels = 256;

Tensor3 headSlice(const Tensor3& t, int h) {
  Tensor3 s = Tensor3::uninit(1, t.rows, t.cols);
  std::copy_n(t.head(h), std::size_t(t.rows) * t.cols, s.head(0));
  return s;
}

// The parameters under which head 0 of a one-head engine (given head h's slice of Q, K and V)
// computes what head h of an H-head engine computes: a per-head custom matrix is cut to head
// h; ALiBi (whose slope depends on h and H) and an expression that reads h are folded into the
// custom matrix. The ALiBi term goes in as the additive bias -(m_h |p_i - j|), which the
// engine's row code adds exactly as it subtracts m_h |p_i - j| (a custom bias on top of ALiBi
// is added in one rounding step fewer).
AttentionParams headParams(const AttentionParams& p, int h, int H, int Tq, int Tk) {
  const MaskSpec& m0 = p.mask;
  const ExprGrid* grid = m0.expr.empty() ? nullptr : exprGrid(m0, H, Tq, Tk);
  const bool foldExpr = grid && grid->heads > 1;
  const bool perHead = m0.customKind != MaskSpec::Custom::None && m0.custom.heads > 1;
  AttentionParams out;
  out.temperature = p.temperature;
  MaskSpec& m = out.mask;
  m.causal = m0.causal, m.window = m0.window, m.prefix = m0.prefix, m.sink = m0.sink;
  m.pad = m0.pad, m.chunk = m0.chunk, m.docs = m0.docs, m.softcap = m0.softcap;
  m.alibi = m0.alibi;
  m.expr = m0.expr;
  m.exprCache = m0.exprCache;
  m.customKind = m0.customKind;
  if (m0.customKind != MaskSpec::Custom::None) m.custom = perHead ? headSlice(m0.custom, h) : m0.custom;
  if (!m0.alibi && !foldExpr) return out;
  const bool hadCustom = m.customKind != MaskSpec::Custom::None;
  const bool allowKind = m.customKind == MaskSpec::Custom::Allow;
  const float slope = m0.alibi ? alibiSlopes(H)[std::size_t(h)] : 0.0f;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // ALiBi or a bias matrix: an additive bias; otherwise an allow matrix (exact either way).
  const bool bias = m0.alibi || m.customKind == MaskSpec::Custom::Bias;
  Tensor3 c = Tensor3::uninit(1, Tq, Tk);
  for (int i = 0; i < Tq; ++i) {
    const float pos = static_cast<float>(queryPosition(i, Tq, Tk));
    const std::uint8_t* allowed = foldExpr ? grid->row(h, i) : nullptr;
    const float* old = hadCustom ? m.custom.head(0) + std::size_t(i) * Tk : nullptr;
    float* row = c.head(0) + std::size_t(i) * Tk;
    for (int j = 0; j < Tk; ++j) {
      bool ok = !allowed || allowed[j];
      if (allowKind && old[j] == 0.0f) ok = false;
      if (!bias) {
        row[j] = ok ? 1.0f : 0.0f;
        continue;
      }
      float v = m0.alibi ? -(slope * std::fabs(pos - static_cast<float>(j))) : 0.0f;
      if (hadCustom && !allowKind) v = m0.alibi ? v + old[j] : old[j];
      row[j] = ok ? v : -kInf;
    }
  }
  m.customKind = bias ? MaskSpec::Custom::Bias : MaskSpec::Custom::Allow;
  m.custom = std::move(c);
  m.alibi = false;
  if (foldExpr) {
    m.expr.clear();
    m.exprCache.reset();
  }
  return out;
}

// Max-pools one head's weights [T_q, T_k] at pool x pool cells a pixel (PooledWeights::max).
PooledWeights poolMax(const float* w, int Tq, int Tk, int pool) {
  PooledWeights p;
  p.Tq = Tq, p.Tk = Tk, p.poolQ = p.poolK = pool;
  p.width = (Tk + pool - 1) / pool;
  p.height = (Tq + pool - 1) / pool;
  p.r1 = Tq, p.c1 = Tk;
  p.max.assign(std::size_t(p.width) * p.height, 0.0f);
  // A block of `pool` keys at a time (one vectorised max each): a division per cell made this
  // the largest part of a T = 4096 head after its GEMMs. Weights are finite, so the order of the
  // maxima does not matter.
  for (int i = 0; i < Tq; ++i) {
    float* out = p.max.data() + std::size_t(i / pool) * p.width;
    const float* row = w + std::size_t(i) * Tk;
    for (int c = 0, j0 = 0; j0 < Tk; ++c, j0 += pool) {
      const int n = std::min(pool, Tk - j0);
      out[c] = std::max(out[c], Eigen::Map<const Eigen::ArrayXf>(row + j0, n).maxCoeff());
    }
  }
  return p;
}

std::string formatTemperature(float t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(t));
  return buf;
}

}  // namespace

const char* stageLabel(ViewStage s) {
  switch (s) {
    case ViewStage::RawScores:
      return "QK\xe1\xb5\x80";
    case ViewStage::Scaled:
      return "\xc3\xb7\xe2\x88\x9a"
             "d";
    case ViewStage::Capped:
      return "softcap";
    case ViewStage::Biased:
      return "+ bias & mask";
    case ViewStage::Logits:
      return "\xc3\xb7 \xcf\x84";
    case ViewStage::Weights:
      return "softmax";
    case ViewStage::Output:
      return "A\xc2\xb7V";
    case ViewStage::ValueWeighted:
      return "value-weighted";
    case ViewStage::Rollout:
      return "rollout";
  }
  return "?";
}

const char* stageKey(ViewStage s) {
  switch (s) {
    case ViewStage::RawScores:
      return "qk";
    case ViewStage::Scaled:
      return "scaled";
    case ViewStage::Capped:
      return "capped";
    case ViewStage::Biased:
      return "biased";
    case ViewStage::Logits:
      return "logits";
    case ViewStage::Weights:
      return "weights";
    case ViewStage::Output:
      return "output";
    case ViewStage::ValueWeighted:
      return "value_weighted";
    case ViewStage::Rollout:
      return "rollout";
  }
  return "weights";
}

const char* stageFormula(ViewStage s) {
  switch (s) {
    case ViewStage::RawScores:
      return "cell (i, j) = q_i \xc2\xb7 k_j   (raw dot product, no scaling)";
    case ViewStage::Scaled:
      return "cell (i, j) = q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k";
    case ViewStage::Capped:
      return "cell (i, j) = c \xc2\xb7 tanh(s_ij / c), s_ij = q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k   (Gemma 2 softcap: |cell| < c)";
    case ViewStage::Biased:
      return "cell (i, j) = q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k + b_ij   (masked = \xe2\x88\x92\xe2\x88\x9e; softcapped first when set)";
    case ViewStage::Logits:
      return "cell (i, j) = L_ij = (q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k + b_ij) / \xcf\x84";
    case ViewStage::Weights:
      return "row i = softmax over the keys j of L(i, j): every row sums to 1";
    case ViewStage::Output:
      return "row i = o_i = \xce\xa3_j A_ij v_j   (columns are value dimensions)";
    case ViewStage::ValueWeighted:
      return "cell (i, j) = A_ij \xc2\xb7 \xe2\x80\x96v_j W_O^h\xe2\x80\x96   (the weight times the length of "
             "what key j's value adds to the residual through this head)";
    case ViewStage::Rollout:
      return "cell (i, j) = (\xc3\x82_l \xc2\xb7\xc2\xb7\xc2\xb7 \xc3\x82_0)_ij, \xc3\x82 = \xc2\xbd mean-over-heads A + "
             "\xc2\xbd I   (attention rollout up to this layer)";
  }
  return "";
}

bool stageIsScore(ViewStage s) { return s != ViewStage::Weights && !stageFromSource(s); }

bool stageFromSource(ViewStage s) {
  return s == ViewStage::ValueWeighted || s == ViewStage::Rollout;
}

ViewStage stageFromKey(const std::string& key) {
  for (int k = 0; k < kStageCount; ++k)
    if (key == stageKey(ViewStage(k))) return ViewStage(k);
  throw UsageError(
      "--stage: expected qk, scaled, capped, biased, logits, weights, output, value_weighted or "
      "rollout, got '" + key + "'");
}

Session::Session(std::unique_ptr<AttentionEngine> engine) : engine_(std::move(engine)) {}
Session::~Session() = default;

void Session::setEngine(std::unique_ptr<AttentionEngine> engine) {
  engine_ = std::move(engine);
  haveInputs_ = false;
  result_ = nullptr;
  if (!fromTensors_) pending_ = SceneInputs{};
  bumpInputs();
}

std::unique_ptr<AttentionEngine> Session::releaseEngine() {
  std::unique_ptr<AttentionEngine> e = std::move(engine_);
  haveInputs_ = false;
  result_ = nullptr;
  bumpInputs();
  return e;
}

// ---- what changed ----------------------------------------------------------------------------

void Session::bumpParams() {
  ++requested_.params;
  ++requested_.view;
}

void Session::bumpInputs() {
  ++requested_.inputs;
  maskStale_ = true;
  bumpParams();
}

void Session::setScene(Scene scene) {
  scene_ = std::move(scene);
  fromTensors_ = false;
  mayPool_ = true;
  sourceLabel_.clear();
  queryAxis_.clear(), keyAxis_.clear();
  valueNorms_.clear();
  rollout_.clear();
  pending_ = SceneInputs{};
  bumpInputs();
}

void Session::setTensors(Tensor3 q, Tensor3 k, Tensor3 v, std::vector<std::string> queryTokens,
                         std::vector<std::string> keyTokens, bool mayPool) {
  pending_ = SceneInputs{};
  mayPool_ = mayPool;
  sourceLabel_.clear();
  queryAxis_.clear(), keyAxis_.clear();
  valueNorms_.clear();
  rollout_.clear();
  pending_.q = std::move(q);
  pending_.k = std::move(k);
  pending_.v = std::move(v);
  pending_.queryTokens = std::move(queryTokens);
  pending_.keyTokens = std::move(keyTokens);
  fromTensors_ = true;
  bumpInputs();
}

void Session::touchInputs() { bumpInputs(); }

void Session::touchMask() {
  maskStale_ = true;
  bumpParams();
}

void Session::touchTemperature() { bumpParams(); }

void Session::setTemperature(float tau) {
  scene_.params.temperature = tau;
  touchTemperature();
}

void Session::paintCell(int i, int j, bool allow) {
  const int Tq = tq(), Tk = tk();
  if (pooledMode_) return;  // a T_q x T_k custom matrix is what pooled mode avoids
  if (!haveInputs_ || i < 0 || j < 0 || i >= Tq || j >= Tk) return;
  MaskSpec& m = scene_.params.mask;
  if (m.customKind == MaskSpec::Custom::None || m.custom.rows != Tq || m.custom.cols != Tk) {
    m.customKind = MaskSpec::Custom::Allow;
    m.custom = Tensor3(1, Tq, Tk, 1.0f);
  }
  // Allow: 0 blocks, 1 allows. Bias: -inf blocks; a cleared cell gets no bias.
  const bool isAllow = m.customKind == MaskSpec::Custom::Allow;
  const float value = allow ? (isAllow ? 1.0f : 0.0f) : (isAllow ? 0.0f : kNegInf);
  bool changed = false;
  for (int h = 0; h < m.custom.heads; ++h) {
    float& cell = m.custom.at(h, i, j);
    const bool blocked = isAllow ? cell == 0.0f : cell == kNegInf;
    if (blocked != !allow) {
      cell = value;
      changed = true;
    }
  }
  if (changed) touchMask();
}

void Session::clearCustomMask() {
  MaskSpec& m = scene_.params.mask;
  if (m.customKind == MaskSpec::Custom::None) return;
  m.customKind = MaskSpec::Custom::None;
  m.custom = Tensor3{};
  touchMask();
}

void Session::setSourceStages(std::vector<float> valueNorms, std::vector<float> rollout) {
  // The tensors given last (before or after the inputs stage ran on them).
  const SceneInputs& in = pending_.q.empty() ? inputs_ : pending_;
  if (!fromTensors_ || in.q.empty())
    throw UsageError("a model's stages need the tensors they belong to (setTensors first)");
  const std::size_t heads = std::size_t(in.q.heads);
  const std::size_t q = std::size_t(in.q.rows), k = std::size_t(in.k.rows);
  if (!valueNorms.empty() && valueNorms.size() != heads * k)
    throw UsageError("value norms: " + std::to_string(valueNorms.size()) + " values for " +
                     std::to_string(heads) + " heads of " + std::to_string(k) + " keys");
  if (!rollout.empty() && rollout.size() != q * k)
    throw UsageError("rollout: " + std::to_string(rollout.size()) + " values for " +
                     std::to_string(q) + " x " + std::to_string(k) + " cells");
  valueNorms_ = std::move(valueNorms);
  rollout_ = std::move(rollout);
  ++requested_.view;
}

bool Session::stageAvailable(ViewStage s) const {
  if (pooledMode_) return s == ViewStage::Weights;
  if (s == ViewStage::ValueWeighted) return !valueNorms_.empty();
  if (s == ViewStage::Rollout) return !rollout_.empty();
  return true;
}

void Session::setBlock(BlockView b) {
  if (b == block_) return;
  block_ = std::move(b);
  ++requested_.view;
}

BlockView Session::fittedBlock() const {
  BlockView b = block_;
  auto fit = [](std::vector<int>& v, int n) {
    v.erase(std::remove_if(v.begin(), v.end(), [n](int x) { return x < 0 || x >= n; }), v.end());
  };
  fit(b.rows, tq());
  fit(b.cols, tk());
  return b;
}

void Session::setView(const View& v) {
  if (v == view_) return;
  view_ = v;
  ++requested_.view;
}

int Session::shownHead() const { return std::clamp(view_.head, 0, std::max(0, heads() - 1)); }

bool Session::allHeadsFresh() const {
  if (pooledMode_) return true;  // no engine heads to refresh
  for (auto f : headFresh_)
    if (!f) return false;
  return true;
}

std::string Session::takeNote() { return std::exchange(note_, std::string()); }

// ---- running ---------------------------------------------------------------------------------

void Session::update() {
  if (!engine_) return;
  if (requested_.inputs != computed_.inputs) runInputs(false);
  if (!haveInputs_) return;  // nothing valid yet (the first inputs failed to build)
  if (requested_.params != computed_.params) runParams();
  if (pooledMode_) {
    runPooled();
    return;
  }
  if (oneHead_) {
    const int h = shownHead();
    if (hostHead_ != h || !headFresh_[h]) runOneHead(h, true);
    const bool average = view_.headAverage && view_.stage == ViewStage::Weights;
    if (average && averageFor_ != computed_.params) computeStreamedAverage();
    const std::uint64_t key = average ? averageVersion_ : headVersion_[h];
    if (displayFor_.view != requested_.view || displayFor_.weights != key) runView();
    return;
  }
  const int h = shownHead();
  bool ran = false;
  if (!headFresh(h)) {
    computeHeads({h});
    ran = true;
  }
  if (view_.headAverage && !allHeadsFresh()) {
    computeHeads({});
    ran = true;
  }
  if (ran) fetchResult();
  const std::uint64_t weightsKey = view_.headAverage ? weightsVersion_ : headVersion_[h];
  if (displayFor_.view != requested_.view || displayFor_.weights != weightsKey) runView();
}

void Session::updateInputs() {
  if (engine_ && requested_.inputs != computed_.inputs) runInputs(false);
}

void Session::computeAllHeads() {
  if (engine_ && requested_.inputs != computed_.inputs) runInputs(true);
  refreshStaleHeads(-1);
}

void Session::runInputs(bool fusedRun) {
  computed_.inputs = requested_.inputs;  // a failure is not retried until the next change
  const auto t0 = Clock::now();
  const int oldTq = tq(), oldTk = tk();
  const bool hadInputs = haveInputs_;
  SceneInputs in = !fromTensors_        ? buildSceneInputs(scene_)
                   : pending_.q.empty() ? inputs_  // the same tensors on a new engine
                                        : std::move(pending_);
  pending_ = SceneInputs{};
  // Too large to materialise: the engine is not given the inputs; the pooled pyramid streams
  // the shown head from Q and K (shared with its worker).
  const bool pooled = mayPool_ && policy_.pools(in.q.rows, in.k.rows);
  // Every head's scores and weights over the memory budget: the engine gets the shown head's
  // slice only (runOneHead), the others are run one at a time for their thumbnails.
  const bool oneHead = !pooled && mayPool_ && policy_.oneHead(in.q.heads, in.q.rows, in.k.rows);
  // The first inputs of a session asked for every head: the engine's fused run (GEMMs and
  // softmax per block of rows), with the parameters as they are now.
  const bool fused = fusedRun && !hadInputs && !pooled && !oneHead;
  AttentionParams fusedParams;
  if (pooled) {
    if (in.q.cols != in.k.cols || in.k.rows != in.v.rows || in.q.heads != in.k.heads ||
        in.k.heads != in.v.heads)
      throw InputError("Q, K and V do not fit together: Q [" + std::to_string(in.q.heads) + ", " +
                       std::to_string(in.q.rows) + ", " + std::to_string(in.q.cols) + "], K [" +
                       std::to_string(in.k.heads) + ", " + std::to_string(in.k.rows) + ", " +
                       std::to_string(in.k.cols) + "], V [" + std::to_string(in.v.heads) +
                       ", " + std::to_string(in.v.rows) + ", " + std::to_string(in.v.cols) + "]");
    pooledDims_ = Dims{in.q.heads, in.q.rows, in.k.rows, in.q.cols, in.v.cols};
    biased_ = std::vector<float>();
    biasedHead_ = -1;
  } else if (oneHead) {
    const Dims d = detail::validateStreamInputs(in.q, in.k, &in.v);
    if (d.Tk != in.v.rows || in.q.heads != in.v.heads)
      throw InputError("V " + in.v.shapeString() + " does not fit K " + in.k.shapeString());
    pooledDims_ = d;
  } else if (fused) {
    fusedParams = fromTensors_ ? scene_.params : effectiveParams(scene_);
    engine_->run(in.q, in.k, in.v, fusedParams);
  } else {
    engine_->setInputs(in.q, in.k, in.v);
  }
  // The pyramid's worker reads Q and K in place (pooledQ_ and pooledK_ alias inputs_): it stops
  // before they are replaced.
  pyramid_.clear();
  pyramid_.wait();
  pooledQ_.reset();
  pooledK_.reset();
  inputs_ = std::move(in);
  haveInputs_ = true;
  if (pooled) {  // shared with the worker without a copy (no owner: the session outlives it)
    pooledQ_ = std::shared_ptr<const Tensor3>(std::shared_ptr<const Tensor3>(), &inputs_.q);
    pooledK_ = std::shared_ptr<const Tensor3>(std::shared_ptr<const Tensor3>(), &inputs_.k);
  }
  pooledMode_ = pooled;
  oneHead_ = oneHead;
  engineHead_ = -1;
  hostHead_ = -1;
  host_ = AttentionResult{};
  thumbs_.clear();
  average_ = std::vector<float>();
  averageFor_ = kNever;
  if (oneHead) {
    // Only the shown head's cells are ever written (the rest of the buffers takes no memory);
    // the outputs of every head are small and kept.
    host_.dims = pooledDims_;
    host_.scaled = Tensor3::uninit(pooledDims_.H, pooledDims_.Tq, pooledDims_.Tk);
    host_.weights = Tensor3::uninit(pooledDims_.H, pooledDims_.Tq, pooledDims_.Tk);
    host_.output = Tensor3(pooledDims_.H, pooledDims_.Tq, pooledDims_.dv);
    host_.rows.assign(std::size_t(pooledDims_.H) * pooledDims_.Tq, RowStats{});
    thumbs_.assign(std::size_t(pooledDims_.H), nullptr);
    thumbPool_ = std::max(1, (std::max(pooledDims_.Tq, pooledDims_.Tk) + kThumbnailPixels - 1) /
                                 kThumbnailPixels);
  }
  pooledFor_ = PooledFor{};
  if (!pooled) {
    pyramid_.clear();
    pooledQ_.reset();
    pooledK_.reset();
  }
  const int H = heads();
  slopes_ = alibiSlopes(H);
  headFresh_.assign(H, 0);
  headVersion_.resize(H, 0);
  result_ = nullptr;
  scaledFetched_ = false;
  ++maskGeneration_;  // the biased scores follow S
  view_.head = shownHead();
  // A custom mask (painted cells included) that fitted the old inputs cannot fit new sizes.
  MaskSpec& m = scene_.params.mask;
  if (hadInputs && m.customKind != MaskSpec::Custom::None && m.custom.rows == oldTq &&
      m.custom.cols == oldTk && (oldTq != tq() || oldTk != tk())) {
    m.customKind = MaskSpec::Custom::None;
    m.custom = Tensor3{};
    note_ = "custom mask cleared: it was " + std::to_string(oldTq) + "\xc3\x97" +
            std::to_string(oldTk) + ", the inputs are now " + std::to_string(tq()) + "\xc3\x97" +
            std::to_string(tk());
  }
  maskStale_ = true;
  if (computed_.params == requested_.params) bumpParams();
  if (fused) {
    params_ = std::move(fusedParams);
    maskStale_ = false;
    ++maskGeneration_;
    computed_.params = requested_.params;
    std::fill(headFresh_.begin(), headFresh_.end(), 1);
    for (auto& v : headVersion_) ++v;
    ++weightsVersion_;
    fetchResult();
  }
  timing_.setInputsMs = msSince(t0);
}

void Session::runParams() {
  computed_.params = requested_.params;
  if (maskStale_) {
    AttentionParams p = fromTensors_ ? scene_.params : effectiveParams(scene_);
    // An expression is evaluated cell by cell into a T_q x T_k grid (mask.h): at pooled sizes
    // that grid is what pooled mode avoids.
    if (pooledMode_ && !p.mask.expr.empty() &&
        std::size_t(tq()) * std::size_t(tk()) > kMaxPooledExprCells)
      throw InputError("mask expression: it is evaluated for every cell, and " +
                       std::to_string(tq()) + " x " + std::to_string(tk()) +
                       " cells are too many; at this length use the mask kinds (causal, "
                       "window, prefix, sink, pad, chunk, documents)");
    validateParams(p, heads(), tq(), tk());
    params_ = std::move(p);
    maskStale_ = false;
    ++maskGeneration_;
  } else {
    // A temperature step: the mask (painted cells included) is reused as it is.
    AttentionParams p;
    p.temperature = scene_.params.temperature;
    validateParams(p, heads(), tq(), tk());
    params_.temperature = p.temperature;
  }
  std::fill(headFresh_.begin(), headFresh_.end(), 0);
  if (pooledMode_) return;  // the pyramid's worker runs the softmax (runPooled)
  const auto t0 = Clock::now();
  if (oneHead_) {  // the head on screen; the head average, when shown, in update()
    runOneHead(shownHead(), true);
    timing_.softmaxMs = msSince(t0);
    return;
  }
  // The head on screen first; every head when the average is shown.
  if (view_.headAverage)
    computeHeads({});
  else
    computeHeads({shownHead()});
  fetchResult();
  timing_.softmaxMs = msSince(t0);
}

void Session::computeHeads(const std::vector<int>& hs) {
  engine_->softmax(params_, hs);
  engine_->output(hs);
  if (hs.empty()) {
    for (int h = 0; h < heads(); ++h) {
      headFresh_[h] = 1;
      ++headVersion_[h];
    }
  } else {
    for (int h : hs) {
      headFresh_[h] = 1;
      ++headVersion_[h];
    }
  }
  ++weightsVersion_;
}

void Session::fetchResult() {
  // S only changes with the inputs; after the first read only what the softmax changed comes
  // back (for the GPU backend this is the whole readback cost).
  result_ =
      &engine_->result(scaledFetched_ ? (kStageWeights | kStageOutput | kStageRows) : kStageAll);
  scaledFetched_ = true;
}

bool Session::refreshStaleHeads(double budgetMs) {
  update();
  if (!haveInputs_ || pooledMode_) return false;
  const auto t0 = Clock::now();
  std::vector<int> stale;
  for (int h = 0; h < heads(); ++h)
    if (!headFresh_[h]) stale.push_back(h);
  if (stale.empty()) return false;
  if (oneHead_) {  // one head at a time through the engine: never more than one materialised
    for (int h : stale) {
      runOneHead(h, false);
      if (budgetMs >= 0 && msSince(t0) > budgetMs) break;
    }
    return true;
  }
  if (budgetMs < 0) {
    computeHeads(stale.size() == std::size_t(heads()) ? std::vector<int>{} : stale);
  } else {
    for (int h : stale) {
      computeHeads({h});
      if (msSince(t0) > budgetMs) break;
    }
  }
  fetchResult();
  return true;
}

void Session::runOneHead(int h, bool shown) {
  const Dims& d = pooledDims_;
  if (engineHead_ != h) {
    engineHead_ = -1;  // a failed setInputs leaves no head
    engine_->setInputs(headSlice(inputs_.q, h), headSlice(inputs_.k, h), headSlice(inputs_.v, h));
    engineHead_ = h;
  }
  engine_->softmax(headParams(params_, h, d.H, d.Tq, d.Tk), {});
  engine_->output({});
  const bool newShown = shown && hostHead_ != h;
  const AttentionResult& r =
      engine_->result(newShown ? kStageAll : (kStageWeights | kStageOutput | kStageRows));
  const std::size_t cells = std::size_t(d.Tq) * d.Tk;
  if (shown) {
    if (newShown) {
      // Fresh buffers: the last shown head's cells go back to the system.
      host_.scaled = Tensor3::uninit(d.H, d.Tq, d.Tk);
      host_.weights = Tensor3::uninit(d.H, d.Tq, d.Tk);
      std::copy_n(r.scaled.head(0), cells, host_.scaled.head(h));
      hostHead_ = h;
      scaledFetched_ = true;
      biasedHead_ = -1;
    }
    std::copy_n(r.weights.head(0), cells, host_.weights.head(h));
    std::copy_n(r.rows.begin(), d.Tq, host_.rows.begin() + std::size_t(h) * d.Tq);
    result_ = &host_;
  }
  std::copy_n(r.output.head(0), std::size_t(d.Tq) * d.dv, host_.output.head(h));
  thumbs_[std::size_t(h)] =
      std::make_shared<const PooledWeights>(poolMax(r.weights.head(0), d.Tq, d.Tk, thumbPool_));
  if (!average_.empty() && averageFor_ == kNever) {  // computeStreamedAverage is summing
    const float* w = r.weights.head(0);
    for (std::size_t k = 0; k < cells; ++k) average_[k] += w[k];
  }
  headFresh_[h] = 1;
  ++headVersion_[h];
  ++weightsVersion_;
}

void Session::computeStreamedAverage() {
  const int H = heads(), shown = shownHead();
  average_.assign(std::size_t(tq()) * tk(), 0.0f);
  averageFor_ = kNever;
  try {
    for (int h = 0; h < H; ++h) runOneHead(h, h == shown);  // sums into average_, in head order
  } catch (...) {
    average_ = std::vector<float>();
    throw;
  }
  averageFor_ = computed_.params;
  ++averageVersion_;
}

std::shared_ptr<const PooledWeights> Session::headThumbnail(int h) const {
  if (!oneHead_ || h < 0 || h >= int(thumbs_.size()) || !headFresh(h)) return nullptr;
  return thumbs_[std::size_t(h)];
}

void Session::buildBiased(int h) {
  // A smaller scene gives the memory back: resize alone kept the capacity of the largest T_q x
  // T_k shown so far (3 MB after a 900-token scene), which the soak saw as growth.
  const std::size_t n = std::size_t(tq()) * tk();
  if (biased_.capacity() > 2 * n + 65536) biased_ = std::vector<float>();
  biased_.resize(n);
  biasedScoresHead(result_->scaled, params_, slopes_, h, biased_.data());
  biasedHead_ = h;
  biasedFor_ = maskGeneration_;
  ++biasedVersion_;
}

void Session::runView() {
  const auto t0 = Clock::now();
  DisplayMatrix& d = display_;
  const int h = shownHead();
  const int Tq = tq(), Tk = tk();
  const AttentionResult& r = *result_;
  const int dv = r.dims.dv;
  if (biasedHead_ != h || biasedFor_ != maskGeneration_) buildBiased(h);
  const float* S = r.scaled.head(h);
  const float* B = biased_.data();
  const float tau = params_.temperature;
  // A model's stage the source has not supplied (yet) shows the weights.
  const ViewStage stage = stageAvailable(view_.stage) ? view_.stage : ViewStage::Weights;

  d.pooled = false;
  d.columnsAreKeys = stage != ViewStage::Output;
  d.isWeights = stage == ViewStage::Weights;
  d.rows = Tq;
  d.cols = d.columnsAreKeys ? Tk : dv;
  d.values.resize(std::size_t(d.rows) * d.cols);
  const std::size_t n = std::size_t(Tq) * Tk;
  float* out = d.values.data();
  switch (stage) {
    case ViewStage::RawScores: {
      const float root = std::sqrt(float(r.dims.dk));
      for (std::size_t k = 0; k < n; ++k) out[k] = S[k] * root;
      break;
    }
    case ViewStage::Scaled:
      std::copy(S, S + n, out);
      break;
    case ViewStage::Capped:
      for (std::size_t k = 0; k < n; ++k) out[k] = softcapScore(S[k], params_.mask.softcap);
      break;
    case ViewStage::Biased:
      std::copy(B, B + n, out);
      break;
    case ViewStage::Logits:
      std::copy(B, B + n, out);
      applyTemperature(out, n, tau);
      break;
    case ViewStage::Weights:
      if (view_.wrongAxis) {
        softmaxOverQueries(B, Tq, Tk, tau, out);
        for (std::size_t k = 0; k < n; ++k)
          if (B[k] == kNegInf) out[k] = kNegInf;
      } else if (view_.headAverage) {
        const int H = heads();
        if (oneHead_ && average_.size() == n) {
          std::copy(average_.begin(), average_.end(), out);  // the sum, head by head
        } else {
          std::fill(out, out + n, 0.0f);
          for (int hh = 0; hh < H; ++hh) {
            const float* W = r.weights.head(hh);
            for (std::size_t k = 0; k < n; ++k) out[k] += W[k];
          }
        }
        for (std::size_t k = 0; k < n; ++k)
          out[k] = (B[k] == kNegInf && out[k] == 0.0f) ? kNegInf : out[k] / H;
      } else {
        const float* W = r.weights.head(h);
        for (std::size_t k = 0; k < n; ++k) out[k] = B[k] == kNegInf ? kNegInf : W[k];
      }
      break;
    case ViewStage::Output: {
      const float* O = r.output.head(h);
      std::copy(O, O + std::size_t(Tq) * dv, out);
      break;
    }
    case ViewStage::ValueWeighted:
      valueWeightedHead(r.weights.head(h), B, valueNorms_.data() + std::size_t(h) * Tk, Tq, Tk,
                        out);
      break;
    case ViewStage::Rollout:
      std::copy(rollout_.begin(), rollout_.end(), out);
      break;
  }

  // A block view: only its rows (and, over keys, its columns) stay; a weights stage may be
  // renormalised over the kept keys. The model's own stages are shown whole.
  d.rowIndex.clear();
  d.colIndex.clear();
  if (block_.active() && !stageFromSource(stage)) {
    const BlockView b = fittedBlock();
    BlockView cut = b;
    if (!d.columnsAreKeys) {
      cut.cols.resize(std::size_t(d.cols));
      for (int j = 0; j < d.cols; ++j) cut.cols[std::size_t(j)] = j;
    }
    std::vector<float> part;
    cutBlock(d.values.data(), d.rows, d.cols, cut,
             b.renormalise && stage == ViewStage::Weights && !view_.wrongAxis, part);
    d.values = std::move(part);
    d.rows = int(cut.rows.size());
    d.cols = int(cut.cols.size());
    d.rowIndex = b.rows;
    if (d.columnsAreKeys) d.colIndex = b.cols;
  }

  // Sums along both axes of what is shown, and which rows are fully masked.
  d.rowSums.assign(d.rows, 0.0f);
  d.colSums.assign(d.cols, 0.0f);
  d.rowFullyMasked.assign(d.rows, 0);
  d.fullyMaskedRows = 0;
  d.firstFullyMaskedRow = -1;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int i = 0; i < d.rows; ++i) {
    const float* row = d.values.data() + std::size_t(i) * d.cols;
    double sum = 0;
    for (int j = 0; j < d.cols; ++j) {
      const float v = row[j];
      if (std::isfinite(v)) {
        sum += v;
        d.colSums[j] += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    d.rowSums[i] = float(sum);
    if (d.columnsAreKeys) {
      bool allowed = false;
      const float* brow = B + std::size_t(d.fullRow(i)) * Tk;
      for (int j = 0; j < d.cols && !allowed; ++j) allowed = brow[d.fullCol(j)] != kNegInf;
      d.rowFullyMasked[i] = !allowed;
    } else {
      d.rowFullyMasked[i] = r.row(h, d.fullRow(i)).fullyMasked;
    }
    if (d.rowFullyMasked[i]) {
      if (d.firstFullyMaskedRow < 0) d.firstFullyMaskedRow = i;
      ++d.fullyMaskedRows;
    }
  }
  if (lo > hi) lo = hi = 0.0f;
  d.minFinite = lo;
  d.maxFinite = hi;
  ++d.version;
  computed_.view = requested_.view;
  displayFor_.view = requested_.view;
  displayFor_.weights = oneHead_ ? (view_.headAverage && stage == ViewStage::Weights
                                        ? averageVersion_
                                        : headVersion_[h])
                      : view_.headAverage ? weightsVersion_
                                          : headVersion_[h];
  timing_.displayMs = msSince(t0);
}

// ---- pooled mode ------------------------------------------------------------------------------

void Session::setPooledPolicy(const PooledPolicy& p) {
  if (p.mode == policy_.mode && p.maxCells == policy_.maxCells) return;
  policy_ = p;
  bumpInputs();
}

void Session::runPooled() {
  const PooledFor want{computed_.inputs, computed_.params, shownHead(), view_.pooledMean};
  if (!(want == pooledFor_)) {
    pooledFor_ = want;
    PooledSource src;
    src.q = pooledQ_;
    src.k = pooledK_;
    src.head = want.head;
    src.params = params_;
    src.mean = want.mean;
    src.key = ++pooledKey_;
    pyramid_.setSource(std::move(src));
  }
  if (std::string e = pyramid_.takeError(); !e.empty()) throw InputError(e);
  if (displayFor_.view != requested_.view || pooledDisplayFor_ != pyramid_.coarseVersion() ||
      !display_.pooled)
    runPooledView();
}

std::shared_ptr<const QueryRow> Session::pooledRow(int i) {
  if (!haveInputs_ || !pooledMode_ || !pooledQ_ || i < 0 || i >= tq()) return nullptr;
  const PooledRowFor want{computed_.inputs, computed_.params, shownHead(), i};
  if (want == pooledRowFor_) return pooledRow_;
  pooledRowFor_ = want;
  pooledRow_.reset();
  const auto t0 = Clock::now();
  try {
    pooledRow_ = std::make_shared<const QueryRow>(
        streamQueryRow(*pooledQ_, *pooledK_, inputs_.v.empty() ? nullptr : &inputs_.v, params_,
                       want.head, i));
  } catch (const std::exception&) {
    // Scores that overflow: the pyramid's worker meets them too and reports them (update()).
  }
  pooledRowMs_ = msSince(t0);
  return pooledRow_;
}

// The display's shape and row flags from the pyramid's row statistics; no cells.
void Session::runPooledView() {
  DisplayMatrix& d = display_;
  pooledDisplayFor_ = pyramid_.coarseVersion();
  const std::shared_ptr<const SoftmaxStats> stats = pyramid_.stats();
  const std::shared_ptr<const PooledTile> coarse = pyramid_.coarse();
  d.pooled = true;
  d.columnsAreKeys = true;
  d.isWeights = true;
  d.rows = tq();
  d.cols = tk();
  d.values = std::vector<float>();
  d.colSums.assign(d.cols, 0.0f);
  d.rowSums.assign(d.rows, 1.0f);
  d.rowFullyMasked.assign(d.rows, 0);
  d.fullyMaskedRows = 0;
  d.firstFullyMaskedRow = -1;
  if (stats && stats->covers(d.rows)) {
    for (int i = 0; i < d.rows; ++i) {
      if (stats->sum[i] > 0.0f) continue;
      d.rowSums[i] = 0.0f;
      d.rowFullyMasked[i] = 1;
      if (d.firstFullyMaskedRow < 0) d.firstFullyMaskedRow = i;
      ++d.fullyMaskedRows;
    }
  }
  d.minFinite = 0.0f;
  d.maxFinite = 1.0f;
  if (coarse) {
    const std::vector<float>& v = view_.pooledMean && !coarse->w.mean.empty() ? coarse->w.mean
                                                                                : coarse->w.max;
    d.maxFinite = v.empty() ? 0.0f : *std::max_element(v.begin(), v.end());
  }
  ++d.version;
  computed_.view = requested_.view;
  displayFor_.view = requested_.view;
}

// ---- results ---------------------------------------------------------------------------------

CellInfo Session::cellInfo(int di, int dj) const {
  CellInfo ci;
  if (!haveInputs_ || !result_ || di < 0 || di >= display_.rows) return ci;
  // Display indices to the whole matrix's (a block view shows part of it).
  const int i = display_.fullRow(di), j = dj >= 0 && dj < display_.cols ? display_.fullCol(dj) : -1;
  if (i < 0 || i >= tq()) return ci;
  const AttentionResult& r = *result_;
  const int h = shownHead();
  ci.i = i;
  ci.j = j;
  if (i < int(inputs_.queryTokens.size())) ci.queryToken = inputs_.queryTokens[i];
  if (display_.columnsAreKeys) {
    if (j < 0 || j >= tk()) return ci;
    if (j < int(inputs_.keyTokens.size())) ci.keyToken = inputs_.keyTokens[j];
    ci.scaled = r.scaled.at(h, i, j);
    if (biasedHead_ == h && biased_.size() == std::size_t(tq()) * tk()) {
      float z = biased_[std::size_t(i) * tk() + j];
      applyTemperature(&z, 1, params_.temperature);
      ci.logit = z;
    } else {
      ci.logit = logitAt(r.scaled, params_, slopes_, h, i, j);
    }
    ci.masked = ci.logit == kNegInf;
    ci.weight = r.weights.at(h, i, j);
    double sum = 0;
    for (int k = 0; k < tk(); ++k) sum += r.weights.at(h, i, k);
    ci.rowSum = float(sum);
  }
  if (dj >= 0 && dj < display_.cols && di < display_.rows && !display_.values.empty())
    ci.shown = display_.values[std::size_t(di) * display_.cols + dj];
  if (display_.isWeights && !display_.rowIndex.empty()) ci.rowSum = display_.rowSums[di];
  return ci;
}

Tensor3 Session::logits() const { return computeLogits(result_->scaled, params_); }

std::string Session::describe() const {
  std::string desc = sourceLabel_.empty() ? std::string() : sourceLabel_ + " \xC2\xB7 ";
  // The causal mode shows as "mask: causal"; the other modes name themselves.
  if (!fromTensors_ && scene_.mode != Mode::Causal)
    desc = std::string(modeName(scene_.mode)) + " \xC2\xB7 ";
  desc += "mask: " + describeMask(params_.mask) +
          " \xC2\xB7 \xCF\x84 = " + formatTemperature(params_.temperature);
  if (block_.active() && !block_.label.empty()) desc += " \xC2\xB7 " + block_.label;
  return desc;
}

Image Session::exportImage(const ExportRequest& request) {
  update();
  if (!haveInputs_) throw InputError("nothing to export: the inputs did not build");
  if (request.head >= heads())
    throw UsageError(
        "--head " + std::to_string(request.head) + ": out of range, the input has " +
        std::to_string(heads()) +
        (heads() == 1 ? " head (0)" : " heads (0.." + std::to_string(heads() - 1) + ")"));
  if (exportStageFromModel(request.stage)) return exportModelStage(request);
  if (pooledMode_) {
    // Never materialised: the labelled weights figure streams, pixel for pixel what the
    // materialised export draws.
    if (request.stage != ExportStage::Weights || request.bare || request.cell > 0)
      throw UsageError("the inputs (" + std::to_string(tq()) + " x " + std::to_string(tk()) +
                       " per head) are too large to materialise: only the labelled weights "
                       "figure, at an automatic cell size, can be exported (it streams)");
    ExportData data;
    data.queryTokens = inputs_.queryTokens;
    data.keyTokens = inputs_.keyTokens;
    data.description = describe();
    data.queryAxis = queryAxis_, data.keyAxis = keyAxis_;
    return renderStreamedExport(inputs_.q, inputs_.k, inputs_.v, params_, std::move(data),
                                request);
  }
  if (oneHead_) {
    ExportData data;
    data.queryTokens = inputs_.queryTokens;
    data.keyTokens = inputs_.keyTokens;
    data.description = describe();
    data.queryAxis = queryAxis_, data.keyAxis = keyAxis_;
    // The labelled weights figure streams, pixel for pixel what the materialised export draws.
    if (request.stage == ExportStage::Weights && !request.bare && request.cell <= 0)
      return renderStreamedExport(inputs_.q, inputs_.k, inputs_.v, params_, std::move(data),
                                  request);
    // Otherwise the drawn heads only, one at a time through the engine (the others' cells are
    // never written, so they take no memory).
    const Dims& d = pooledDims_;
    Tensor3 W = Tensor3::uninit(d.H, d.Tq, d.Tk), L = Tensor3::uninit(d.H, d.Tq, d.Tk);
    const std::vector<float> one = alibiSlopes(1);
    for (int h = 0; h < d.H; ++h) {
      if (request.head >= 0 && h != request.head) continue;
      runOneHead(h, false);
      const AttentionParams hp = headParams(params_, h, d.H, d.Tq, d.Tk);
      const AttentionResult& r = engine_->result(kStageAll);
      std::copy_n(r.weights.head(0), std::size_t(d.Tq) * d.Tk, W.head(h));
      biasedScoresHead(r.scaled, hp, one, 0, L.head(h));
      applyTemperature(L.head(h), std::size_t(d.Tq) * d.Tk, params_.temperature);
    }
    data.weights = &W;
    data.logits = &L;
    return renderExport(data, request);
  }
  if (request.stage == ExportStage::Weights) {
    if (request.head < 0) {
      computeAllHeads();
    } else if (!headFresh(request.head)) {
      computeHeads({request.head});
      fetchResult();
    }
  }
  const Tensor3 L = logits();
  ExportData data;
  data.weights = &result_->weights;
  data.logits = &L;
  data.queryTokens = inputs_.queryTokens;
  data.keyTokens = inputs_.keyTokens;
  data.description = describe();
  data.queryAxis = queryAxis_, data.keyAxis = keyAxis_;
  if (!block_.active()) return renderExport(data, request);
  // A block view draws the block the display shows: the same cut, the same renormalisation.
  const BlockView b = fittedBlock();
  const int H = heads(), R = int(b.rows.size()), C = int(b.cols.size());
  if (R == 0 || C == 0) throw UsageError("the block shown has no rows or no keys to export");
  Tensor3 W = Tensor3::uninit(H, R, C), LB = Tensor3::uninit(H, R, C);
  std::vector<float> part;
  for (int h = 0; h < H; ++h) {
    if (request.head >= 0 && h != request.head) {
      std::fill_n(W.head(h), std::size_t(R) * C, 0.0f);
      std::fill_n(LB.head(h), std::size_t(R) * C, 0.0f);
      continue;
    }
    cutBlock(result_->weights.head(h), tq(), tk(), b, b.renormalise, part);
    std::copy(part.begin(), part.end(), W.head(h));
    cutBlock(L.head(h), tq(), tk(), b, false, part);
    std::copy(part.begin(), part.end(), LB.head(h));
  }
  data.weights = &W;
  data.logits = &LB;
  data.queryTokens.clear();
  data.keyTokens.clear();
  for (int i : b.rows)
    data.queryTokens.push_back(i < int(inputs_.queryTokens.size()) ? inputs_.queryTokens[i] : "");
  for (int j : b.cols)
    data.keyTokens.push_back(j < int(inputs_.keyTokens.size()) ? inputs_.keyTokens[j] : "");
  return renderExport(data, request);
}

// The stages a model computes from its pass, exported as themselves: the value-weighted weights
// of the drawn heads (the shown weights, after τ and the masks, times |v_j W_O^h|), or the
// layer's rollout (one matrix; any head asked for draws it).
Image Session::exportModelStage(const ExportRequest& request) {
  const bool rollout = request.stage == ExportStage::Rollout;
  if (rollout ? rollout_.empty() : valueNorms_.empty())
    throw UsageError(std::string("the ") + (rollout ? "rollout" : "value-weighted") +
                     " stage is a model layer's: export it from --model DIR --layer L or a "
                     "model scene" +
                     (rollout ? " (the rollout is computed for up to 1024 tokens)" : ""));
  if (pooledMode_ || oneHead_)
    throw UsageError("the inputs (" + std::to_string(tq()) + " x " + std::to_string(tk()) +
                     " per head) are too large to materialise: only the weights figure can be "
                     "exported");
  ExportData data;
  data.queryTokens = inputs_.queryTokens;
  data.keyTokens = inputs_.keyTokens;
  data.description = describe();
  data.queryAxis = queryAxis_, data.keyAxis = keyAxis_;
  const int Tq = tq(), Tk = tk();
  if (rollout) {
    Tensor3 R = Tensor3::uninit(1, Tq, Tk);
    if (rollout_.size() != std::size_t(Tq) * Tk)
      throw InputError("rollout: " + std::to_string(rollout_.size()) + " values for " +
                       std::to_string(Tq) + " x " + std::to_string(Tk));
    std::copy(rollout_.begin(), rollout_.end(), R.head(0));
    data.stageValues = &R;
    ExportRequest one = request;
    one.head = 0;
    one.blocks.clear();
    return renderExport(data, one);
  }
  if (request.head < 0) {
    computeAllHeads();
  } else if (!headFresh(request.head)) {
    computeHeads({request.head});
    fetchResult();
  }
  const Tensor3 L = logits();
  const int H = heads();
  Tensor3 VW = Tensor3::uninit(H, Tq, Tk);
  for (int h = 0; h < H; ++h) {
    float* out = VW.head(h);
    if (request.head >= 0 && h != request.head) {
      std::fill(out, out + std::size_t(Tq) * Tk, 0.0f);  // not drawn
      continue;
    }
    valueWeightedHead(result_->weights.head(h), L.head(h),
                      valueNorms_.data() + std::size_t(h) * Tk, Tq, Tk, out);
  }
  data.weights = &result_->weights;
  data.logits = &L;
  data.stageValues = &VW;
  return renderExport(data, request);
}

}  // namespace attnviz
