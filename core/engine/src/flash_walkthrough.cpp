// FlashAttention's online softmax replayed tile by tile for the teaching stage. Teaching sizes
// are small, so the head's logits are computed once with the engine and each step reads its
// tile from them; going back replays the schedule from the start.
#include "attnviz/engine/flash_walkthrough.h"

#include "attnviz/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnviz {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

FlashWalkthrough::FlashWalkthrough(const Tensor3& q, const Tensor3& k, const Tensor3& v, int head,
                                   const AttentionParams& p, int blockRows, int blockKeys)
    : p_(p) {
  const Dims d = validateInputs(q, k, v);
  validateParams(p, d.H, d.Tq, d.Tk);
  if (head < 0 || head >= d.H)
    throw UsageError("head " + std::to_string(head) + " out of range [0, " + std::to_string(d.H) +
                     ")");
  if (blockRows < 1 || blockKeys < 1)
    throw UsageError("block sizes must be >= 1, got " + std::to_string(blockRows) + " x " +
                     std::to_string(blockKeys));
  tq_ = d.Tq, tk_ = d.Tk, dv_ = d.dv, head_ = head;
  br_ = std::min(blockRows, tq_), bc_ = std::min(blockKeys, tk_);
  auto engine = makeCpuEngine();
  engine->setInputs(q, k, v);
  engine->softmax(p, {head});
  engine->output({head});
  const AttentionResult& r = engine->result(kStageAll);
  refWeights_ = r.weights.mat(head);
  refOut_ = r.output.mat(head);
  logits_ = computeLogits(r.scaled, p).mat(head);
  v_ = v.mat(head);
  out_.assign(std::size_t(tq_) * dv_, 0.0f);
  finalM_.assign(tq_, kNegInf);
  finalL_.assign(tq_, 0.0f);
}

FlashWalkthrough::Tile FlashWalkthrough::tile(int s) const {
  Tile t;
  s = std::clamp(s, 0, steps() - 1);
  t.queryBlock = s / keyBlocks();
  t.keyBlock = s % keyBlocks();
  t.i0 = t.queryBlock * br_, t.i1 = std::min(tq_, t.i0 + br_);
  t.j0 = t.keyBlock * bc_, t.j1 = std::min(tk_, t.j0 + bc_);
  t.skipped = (logits_.block(t.i0, t.j0, t.i1 - t.i0, t.j1 - t.j0).array() == kNegInf).all();
  return t;
}

int FlashWalkthrough::skippedSteps() const {
  int n = 0;
  for (int s = 0; s < steps(); ++s) n += tile(s).skipped;
  return n;
}

bool FlashWalkthrough::forward() {
  if (step_ + 1 >= steps()) return false;
  apply(step_ + 1);
  return true;
}

bool FlashWalkthrough::back() {
  if (step_ < 0) return false;
  replayTo(step_ - 1);
  return true;
}

void FlashWalkthrough::seek(int s) { replayTo(std::clamp(s, -1, steps() - 1)); }

void FlashWalkthrough::replayTo(int s) {
  std::fill(out_.begin(), out_.end(), 0.0f);
  std::fill(finalM_.begin(), finalM_.end(), kNegInf);
  std::fill(finalL_.begin(), finalL_.end(), 0.0f);
  rows_.clear();
  acc_.clear();
  tileLogits_.clear();
  tileExp_.clear();
  step_ = -1;
  for (int t = 0; t <= s; ++t) apply(t);
}

void FlashWalkthrough::apply(int s) {
  const Tile t = tile(s);
  const int br = t.i1 - t.i0, bc = t.j1 - t.j0;
  if (t.keyBlock == 0) {  // a new query block: nothing seen yet
    rows_.assign(br, Row{kNegInf, kNegInf, 0.0f, 0.0f, 1.0f, std::vector<float>(dv_, 0.0f)});
    acc_.assign(br, std::vector<float>(dv_, 0.0f));
  }
  tileLogits_.clear();
  tileExp_.clear();
  if (!t.skipped) {
    tileLogits_.resize(std::size_t(br) * bc);
    tileExp_.resize(std::size_t(br) * bc);
  }
  for (int r = 0; r < br; ++r) {
    Row& row = rows_[r];
    row.mOld = row.m, row.lOld = row.l, row.rescale = 1.0f;
    if (t.skipped) continue;
    float mx = kNegInf;
    for (int c = 0; c < bc; ++c) {
      const float L = logits_(t.i0 + r, t.j0 + c);
      tileLogits_[std::size_t(r) * bc + c] = L;
      mx = std::max(mx, L);
    }
    const float mNew = std::max(row.m, mx);
    if (mNew != row.m) row.rescale = row.m == kNegInf ? 0.0f : std::exp(row.m - mNew);
    std::vector<float>& acc = acc_[r];
    float sum = 0.0f;
    for (float& a : acc) a *= row.rescale;
    for (int c = 0; c < bc; ++c) {
      const float L = tileLogits_[std::size_t(r) * bc + c];
      const float e = mNew == kNegInf ? 0.0f : std::exp(L - mNew);
      tileExp_[std::size_t(r) * bc + c] = e;
      sum += e;
      if (e != 0.0f)
        for (int x = 0; x < dv_; ++x) acc[x] += e * v_(t.j0 + c, x);
    }
    row.m = mNew;
    row.l = row.rescale * row.l + sum;
  }
  for (int r = 0; r < br; ++r) {
    Row& row = rows_[r];
    for (int x = 0; x < dv_; ++x) row.partial[x] = row.l > 0.0f ? acc_[r][x] / row.l : 0.0f;
    std::copy(row.partial.begin(), row.partial.end(), out_.begin() + std::size_t(t.i0 + r) * dv_);
    if (t.keyBlock == keyBlocks() - 1) finalM_[t.i0 + r] = row.m, finalL_[t.i0 + r] = row.l;
  }
  step_ = s;
}

bool FlashWalkthrough::finished(int i) const {
  if (step_ < 0) return false;
  const Tile t = tile(step_);
  return i < t.i0 || (i < t.i1 && t.keyBlock == keyBlocks() - 1);
}

MatrixRM FlashWalkthrough::provisionalWeights() const {
  MatrixRM w(tq_, tk_);
  for (int i = 0; i < tq_; ++i)
    for (int j = 0; j < tk_; ++j) w(i, j) = provisionalWeight(i, j);
  return w;
}

float FlashWalkthrough::provisionalWeight(int i, int j) const {
  if (step_ < 0 || i < 0 || j < 0 || i >= tq_ || j >= tk_) return 0.0f;
  const Tile cur = tile(step_);
  const bool current = i >= cur.i0 && i < cur.i1;
  if (i >= cur.i1 || (current && j >= cur.j1)) return 0.0f;  // not visited yet
  const float m = current ? rows_[i - cur.i0].m : finalM_[i];
  const float l = current ? rows_[i - cur.i0].l : finalL_[i];
  const float L = logits_(i, j);
  return l > 0.0f && L != kNegInf ? std::exp(L - m) / l : 0.0f;
}

float FlashWalkthrough::maxOutputDifference() const {
  float worst = 0.0f;
  for (int i = 0; i < tq_; ++i) {
    if (!finished(i)) continue;
    for (int x = 0; x < dv_; ++x)
      worst = std::max(worst, std::fabs(out_[std::size_t(i) * dv_ + x] - refOut_(i, x)));
  }
  return worst;
}

float FlashWalkthrough::maxWeightDifference() const {
  float worst = 0.0f;
  for (int i = 0; i < tq_; ++i) {
    if (!finished(i)) continue;
    for (int j = 0; j < tk_; ++j) {
      const float a = finalL_[i] > 0.0f ? std::exp(logits_(i, j) - finalM_[i]) / finalL_[i] : 0.0f;
      worst = std::max(worst, std::fabs(a - refWeights_(i, j)));
    }
  }
  return worst;
}

}  // namespace attnviz
