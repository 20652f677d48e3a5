// The CPU backend: Eigen GEMMs per (head, block of query rows), a fused, numerically stable
// softmax per row, and A V. Work is split into (head, row block) tasks across the cores.
#include "attnviz/engine/isa.h"
#include "attnviz/engine/engine.h"

#include "attnviz/engine/engine_detail.h"
#include "attnviz/engine/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace attnviz {

namespace {

constexpr int kRowBlock = detail::kEngineRowBlock;

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

void checkFinite(const Tensor3& t, const char* name) {
  if (Eigen::Map<const Eigen::ArrayXf>(t.data.data(), Eigen::Index(t.data.size())).allFinite())
    return;  // the common case, vectorised; otherwise find the first bad value for the message
  for (std::size_t n = 0; n < t.data.size(); ++n) {
    if (!std::isfinite(t.data[n])) {
      const std::size_t perHead = t.headStride();
      const std::size_t h = n / perHead, r = (n % perHead) / t.cols, c = n % t.cols;
      std::ostringstream s;
      s << name << " contains " << (std::isnan(t.data[n]) ? "NaN" : "Inf") << " at [" << h << ", "
        << r << ", " << c << "]";
      throw InputError(s.str());
    }
  }
}

using detail::kNegInf;

}  // namespace

namespace detail {

RowSpan rowSpan(const MaskSpec& m, int i, int Tq, int Tk) {
  const int p = queryPosition(i, Tq, Tk);
  RowSpan r{0, Tk - 1, 0, Tk};
  if (m.causal || m.window > 0) r.hi = std::min(p, Tk - 1);
  if (m.window > 0) r.lo = std::max(0, p - m.window + 1);
  r.prefixEnd = std::min(Tk, std::max(m.prefix, m.sink));
  r.limit = std::max(0, Tk - m.pad);
  return r;
}

bool rowSpanIsExact(const MaskSpec& m) {
  return m.customKind == MaskSpec::Custom::None && m.chunk <= 0 && m.docs.empty() &&
         m.expr.empty();
}

void rowLogits(const float* scaled, float* z, const AttentionParams& p, float slope, int h, int i,
               int Tq, int Tk, int j0, int j1) {
  const MaskSpec& m = p.mask;
  const int n = j1 - j0;
  ArrayMap L(z, n);
  // Softcap first: every later step reads the capped score c tanh(s / c) (in place is fine).
  const float* s = scaled;
  if (m.softcap > 0.0f) {
    for (int t = 0; t < n; ++t) z[t] = softcapScore(scaled[t], m.softcap);
    s = z;
  }
  const float* custom = nullptr;
  if (m.customKind != MaskSpec::Custom::None) {
    custom = m.custom.head(m.custom.heads == 1 ? 0 : h) + std::size_t(i) * Tk + j0;
  }
  if (m.alibi) {
    const float pos = static_cast<float>(queryPosition(i, Tq, Tk));
    for (int t = 0; t < n; ++t) z[t] = s[t] - slope * std::fabs(pos - static_cast<float>(j0 + t));
    if (m.customKind == MaskSpec::Custom::Bias) L += ConstArrayMap(custom, n);
  } else if (m.customKind == MaskSpec::Custom::Bias) {
    L = ConstArrayMap(s, n) + ConstArrayMap(custom, n);
  } else if (s != z) {
    L = ConstArrayMap(s, n);
  }
  // Outside [lo, hi] only the prefix/sink keys survive; everything past the limit is padding.
  const RowSpan r = rowSpan(m, i, Tq, Tk);
  const int ranges[3][2] = {
      {r.prefixEnd, std::min(r.lo, Tk)}, {std::max(r.hi + 1, r.prefixEnd), Tk}, {r.limit, Tk}};
  for (const auto& range : ranges) {
    const int begin = std::clamp(range[0], j0, j1);
    std::fill(z + (begin - j0), z + (std::clamp(range[1], begin, j1) - j0), kNegInf);
  }
  if (custom && m.customKind == MaskSpec::Custom::Allow) {
    for (int t = 0; t < n; ++t) z[t] = custom[t] == 0.0f ? kNegInf : z[t];
  }
  // The and-terms: the query's chunk, its document, the expression (its grid was evaluated by
  // validateParams, which every caller runs first).
  const int pos = queryPosition(i, Tq, Tk);
  if (m.chunk > 0) {
    const long long c0 = pos >= 0 ? (long long)(pos / m.chunk) * m.chunk : Tk;  // before: none
    const long long c1 = std::min<long long>(Tk, c0 + m.chunk);
    for (int t = 0; t < n; ++t) {
      const int j = j0 + t;
      if (j < c0 || j >= c1) z[t] = kNegInf;
    }
  }
  if (!m.docs.empty()) {
    const int d = pos >= 0 && pos < int(m.docs.size()) ? m.docs[std::size_t(pos)] : -1;
    for (int t = 0; t < n; ++t) {
      const int j = j0 + t;
      if (j >= int(m.docs.size()) || m.docs[std::size_t(j)] != d) z[t] = kNegInf;
    }
  }
  if (!m.expr.empty()) {
    const ExprGrid* g = m.exprCache.get();
    if (!g || g->text != m.expr || g->Tq != Tq || g->Tk != Tk || (g->heads != 1 && h >= g->heads))
      throw std::logic_error("mask expression not evaluated for this shape (validateParams)");
    const std::uint8_t* e = g->row(h, i) + j0;
    for (int t = 0; t < n; ++t) z[t] = e[t] ? z[t] : kNegInf;
  }
}

float chunkedSum(const float* e, int n) {
  float sum = 0.0f;
  for (int j = 0; j < n; j += kSumChunk)
    sum += ConstArrayMap(e + j, std::min(kSumChunk, n - j)).sum();
  return sum;
}

// expShifted: isa/isa.cpp, through the kernels of the level in use.

void throwScoresOverflow(int h) {
  throw InputError("Q K^T overflows float32 in head " + std::to_string(h) +
                   " (inputs too large; rescale Q or K)");
}

}  // namespace detail

namespace {

void rowLogits(const float* s, float* logits, const AttentionParams& p, float slope, int h, int i,
               int Tq, int Tk) {
  detail::rowLogits(s, logits, p, slope, h, i, Tq, Tk, 0, Tk);
}

// First index holding `value` (present in the row), scanning 64 keys at a time with a
// branch-free count so the common case stays vectorised.
int firstIndexOf(const float* l, int Tk, float value) {
  int j = 0;
  for (; j + 64 <= Tk; j += 64) {
    int hits = 0;
#pragma omp simd reduction(+ : hits)
    for (int t = 0; t < 64; ++t) hits += l[j + t] == value;
    if (hits) break;
  }
  for (; j < Tk; ++j)
    if (l[j] == value) return j;
  return 0;
}

// Divides a row by tau; a tau so small that 1/tau overflows divides instead of multiplying.
void applyTemperature(float* row, int Tk, float tau) {
  const float inv = 1.0f / tau;
  if (std::isfinite(inv)) {
    ArrayMap(row, Tk) *= inv;
  } else {
    ArrayMap(row, Tk) /= tau;
  }
}

}  // namespace

namespace detail {

// Softmax over keys of (z - max z) / tau, from the biased scores z (-inf where masked), into
// `weights`; returns the row's facts. Subtracting the maximum before dividing by tau keeps tiny
// temperatures finite: the top key gets exp(0) and the others exp(-gap/tau), which may be 0.
// `scratch` holds Tk floats. Five vectorised passes over one cache-resident row (max, argmax,
// exp, sum with entropy, normalise); only the weights go out to memory.
RowStats rowSoftmax(float* z, float* scratch, float* weights, int Tk, float tau) {
  RowStats st;
  const ArrayMap L(z, Tk);
  const float mx = Tk > 0 ? L.maxCoeff() : kNegInf;
  if (mx == kNegInf) {
    std::fill(weights, weights + Tk, 0.0f);
    st.fullyMasked = true;
    return st;
  }
  st.argmax = firstIndexOf(z, Tk, mx);
  // exp(-inf) is exactly 0 (the engine tests hold the vector exp to that), so masked keys, and
  // keys whose gap underflows, get weight 0 with no extra pass.
  detail::expShifted(z, scratch, Tk, mx, tau);
  const ArrayMap E(scratch, Tk);
  const float sum = detail::chunkedSum(scratch, Tk);
  // Entropy: -sum a log a, with log a = (z - mx) / tau - log(sum). A masked key has a = 0 and
  // z = -inf; clamping the gap to the lowest float makes its term 0 instead of 0 * -inf.
  const float dot = (E * (L - mx).cwiseMax(std::numeric_limits<float>::lowest())).sum();
  const float inv = 1.0f / sum;
  ArrayMap(weights, Tk) = E * inv;
  st.entropy = std::max(0.0f, std::log(sum) - dot * inv / tau);
  st.sum = sum * inv;
  st.max = weights[st.argmax];
  return st;
}

}  // namespace detail

namespace {

using detail::rowSoftmax;

class CpuEngine final : public AttentionEngine {
 public:
  std::string name() const override {
    return "CPU (Eigen, " + std::to_string(cpuThreads()) + " threads)";
  }

  // Q and K are read during the call only (S is what later calls need); V is kept, for output().
  void setInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v) override {
    const Dims d = validateInputs(q, k, v);
    vOwned_ = v;
    bind(q, k, vOwned_, 1);
    allocate(d, false);
    detail::parallelFor(taskCount(allHeads()), [&](int t) {
      const auto [h, r0, r1] = task(allHeads(), t);
      scoresBlock(h, r0, r1);
    });
    q_ = k_ = nullptr;
  }

  void softmax(const AttentionParams& p, const std::vector<int>& heads) override {
    const Dims& d = res_.dims;
    validateParams(p, d.H, d.Tq, d.Tk);
    const std::vector<int> hs = resolve(heads);
    const std::vector<float> slopes = alibiSlopes(d.H);
    detail::parallelFor(taskCount(hs), [&](int t) {
      const auto [h, r0, r1] = task(hs, t);
      softmaxBlock(p, slopes, h, r0, r1);
    });
  }

  void output(const std::vector<int>& heads) override {
    if (!v_) throw UsageError("output() after runGrouped() needs setInputs() first");
    const std::vector<int> hs = resolve(heads);
    detail::parallelFor(taskCount(hs), [&](int t) {
      const auto [h, r0, r1] = task(hs, t);
      outputBlock(h, r0, r1);
    });
  }

  void run(const Tensor3& q, const Tensor3& k, const Tensor3& v,
           const AttentionParams& p) override {
    const Dims d = validateInputs(q, k, v);
    validateParams(p, d.H, d.Tq, d.Tk);
    vOwned_ = v;
    fused(d, q, k, vOwned_, 1, p);
  }

  void runGrouped(const Tensor3& q, const Tensor3& k, const Tensor3& v, int kvGroup,
                  const AttentionParams& p) override {
    const Dims d = validateInputs(q, k, v, kvGroup);
    validateParams(p, d.H, d.Tq, d.Tk);
    vOwned_ = Tensor3();
    fused(d, q, k, v, kvGroup, p);
    v_ = nullptr;  // the caller's V is not kept
  }

  const AttentionResult& result(unsigned) override { return res_; }
  Dims dims() const override { return res_.dims; }

 private:
  struct Task {
    int h, r0, r1;
  };

  // New buffers for a new shape. Every head's scores are computed at once, so S is never
  // zero-filled; the weights and the output are only when some heads may stay uncomputed
  // (softmax/output of a subset after setInputs), not for run(), which writes every head.
  void allocate(const Dims& d, bool everyHeadWritten) {
    res_.dims = d;
    auto make = [&](int cols, bool written) {
      return written ? Tensor3::uninit(d.H, d.Tq, cols) : Tensor3(d.H, d.Tq, cols);
    };
    if (res_.scaled.heads != d.H || res_.scaled.rows != d.Tq || res_.scaled.cols != d.Tk) {
      res_.scaled = make(d.Tk, true);
      res_.weights = make(d.Tk, everyHeadWritten);
    }
    if (res_.output.heads != d.H || res_.output.rows != d.Tq || res_.output.cols != d.dv) {
      res_.output = make(d.dv, everyHeadWritten);
    }
    res_.rows.assign(std::size_t(d.H) * d.Tq, RowStats{});
    all_.resize(d.H);
    for (int h = 0; h < d.H; ++h) all_[h] = h;
  }

  const std::vector<int>& allHeads() const { return all_; }

  void bind(const Tensor3& q, const Tensor3& k, const Tensor3& v, int group) {
    q_ = &q;
    k_ = &k;
    v_ = &v;
    group_ = group;
  }

  // Scores, softmax and A V fused per block: the block of S is still in cache when the softmax
  // and A V read it. Q and K are read only here.
  void fused(const Dims& d, const Tensor3& q, const Tensor3& k, const Tensor3& v, int group,
             const AttentionParams& p) {
    bind(q, k, v, group);
    allocate(d, true);
    const std::vector<float> slopes = alibiSlopes(d.H);
    detail::parallelFor(taskCount(allHeads()), [&](int t) {
      const auto [h, r0, r1] = task(allHeads(), t);
      scoresBlock(h, r0, r1);
      softmaxBlock(p, slopes, h, r0, r1);
      outputBlock(h, r0, r1);
    });
    q_ = k_ = nullptr;
  }

  std::vector<int> resolve(const std::vector<int>& heads) const {
    if (heads.empty()) return all_;
    for (int h : heads) {
      if (h < 0 || h >= res_.dims.H) {
        throw UsageError("head " + std::to_string(h) + " out of range [0, " +
                         std::to_string(res_.dims.H) + ")");
      }
    }
    return heads;
  }

  int blocksPerHead() const { return (res_.dims.Tq + kRowBlock - 1) / kRowBlock; }
  int taskCount(const std::vector<int>& hs) const {
    return static_cast<int>(hs.size()) * blocksPerHead();
  }
  Task task(const std::vector<int>& hs, int t) const {
    const int b = t % blocksPerHead();
    const int r0 = b * kRowBlock;
    return {hs[t / blocksPerHead()], r0, std::min(res_.dims.Tq, r0 + kRowBlock)};
  }

  void scoresBlock(int h, int r0, int r1) {
    const Dims& d = res_.dims;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
    MapRM S = res_.scaled.mat(h);
    auto block = S.middleRows(r0, r1 - r0);
    const Tensor3& K = *k_;
    gemmABt(r1 - r0, d.Tk, d.dk, q_->head(h) + std::size_t(r0) * q_->cols, q_->cols,
            K.head(kvHeadOf(h, group_)), K.cols, block.data(), long(d.Tk));
    block *= scale;
    // Checked while the block is still in cache: finite inputs can still overflow float32.
    if (!std::isfinite((block.array() * 0.0f).sum())) {  // 0 * inf and 0 * NaN are NaN
      detail::throwScoresOverflow(h);
    }
  }

  void softmaxBlock(const AttentionParams& p, const std::vector<float>& slopes, int h, int r0,
                    int r1) {
    const Dims& d = res_.dims;
    // Aligned scratch: the vectorised reductions then split the row the same way in every
    // thread and every run, so results are bit-for-bit reproducible.
    thread_local std::vector<float, Eigen::aligned_allocator<float>> logits, scratch;
    logits.resize(std::size_t(d.Tk));
    scratch.resize(std::size_t(d.Tk));
    for (int i = r0; i < r1; ++i) {
      rowLogits(&res_.scaled.at(h, i, 0), logits.data(), p, slopes[h], h, i, d.Tq, d.Tk);
      res_.rows[std::size_t(h) * d.Tq + i] =
          rowSoftmax(logits.data(), scratch.data(), &res_.weights.at(h, i, 0), d.Tk, p.temperature);
    }
  }

  void outputBlock(int h, int r0, int r1) {
    const Dims& d = res_.dims;
    const Tensor3& V = *v_;
    gemmAB(r1 - r0, V.cols, d.Tk, &res_.weights.at(h, r0, 0), long(d.Tk),
           V.head(kvHeadOf(h, group_)), V.cols, &res_.output.at(h, r0, 0), res_.output.cols);
  }

  // Q and K while a call computes S; V while output() may read it: vOwned_ (setInputs, run) or
  // the caller's (during runGrouped only). Query head h reads K/V head h / group_.
  const Tensor3 *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  Tensor3 vOwned_;
  int group_ = 1;
  AttentionResult res_;
  std::vector<int> all_;
};

}  // namespace

int AttentionResult::fullyMaskedRows() const {
  return static_cast<int>(
      std::count_if(rows.begin(), rows.end(), [](const RowStats& r) { return r.fullyMasked; }));
}

void AttentionEngine::run(const Tensor3& q, const Tensor3& k, const Tensor3& v,
                          const AttentionParams& p) {
  setInputs(q, k, v);
  softmax(p, {});
  output({});
}

void AttentionEngine::runGrouped(const Tensor3& q, const Tensor3& k, const Tensor3& v,
                                 int kvGroup, const AttentionParams& p) {
  validateInputs(q, k, v, kvGroup);
  if (kvGroup == 1) return run(q, k, v, p);
  run(q, repeatKvHeads(k, kvGroup), repeatKvHeads(v, kvGroup), p);
}

Tensor3 repeatKvHeads(const Tensor3& kv, int kvGroup) {
  if (kvGroup < 1) throw InputError("a KV group of " + std::to_string(kvGroup) + " query heads");
  if (kvGroup == 1) return kv;
  Tensor3 out = Tensor3::uninit(kv.heads * kvGroup, kv.rows, kv.cols);
  for (int h = 0; h < out.heads; ++h) out.mat(h) = kv.mat(kvHeadOf(h, kvGroup));
  return out;
}

namespace {

void checkShapes(const Tensor3& q, const Tensor3& k, const Tensor3* v, int group = 1) {
  const std::string vs = v ? v->shapeString() : "(not used)";
  if (q.empty() || k.empty() || (v && v->empty())) {
    throw InputError("Q, K and V must be non-empty (got Q " + q.shapeString() + ", K " +
                     k.shapeString() + ", V " + vs + ")");
  }
  if (group < 1 || (group > 1 && (q.heads % group != 0 || (v && k.heads != v->heads)))) {
    throw InputError("grouped-query attention: " + std::to_string(q.heads) +
                     " query heads cannot share K/V heads in groups of " + std::to_string(group));
  }
  if (group > 1 && q.heads != k.heads * group) {
    throw InputError("K/V head counts do not match the groups: Q " + q.shapeString() + ", K " +
                     k.shapeString() + ", V " + vs + " with " + std::to_string(group) +
                     " query heads a KV head");
  }
  if (group == 1 && (q.heads != k.heads || (v && q.heads != v->heads))) {
    throw InputError("head counts differ: Q " + q.shapeString() + ", K " + k.shapeString() +
                     ", V " + vs);
  }
  if (q.cols != k.cols) {
    throw InputError("d_k differs: Q " + q.shapeString() + " and K " + k.shapeString() +
                     " must share the last axis");
  }
  if (v && k.rows != v->rows) {
    throw InputError("T_k differs: K " + k.shapeString() + " and V " + vs +
                     " must have the same number of keys");
  }
}

}  // namespace

Dims detail::validateStreamInputs(const Tensor3& q, const Tensor3& k, const Tensor3* v) {
  checkShapes(q, k, v);
  checkFinite(q, "Q");
  checkFinite(k, "K");
  if (v) checkFinite(*v, "V");
  return Dims{q.heads, q.rows, k.rows, q.cols, v ? v->cols : 0};
}

Dims validateInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v) {
  return validateInputs(q, k, v, 1);
}

Dims validateInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v, int kvGroup) {
  checkShapes(q, k, &v, kvGroup);
  const std::size_t cells = checkedElementCount(q.heads, q.rows, k.rows, "scores");
  // Scores, weights and (for --scores or export) logits: refuse cleanly rather than let the
  // kernel kill the process when memory runs out.
  const double need = 3.0 * double(cells) * sizeof(float);
  const double have = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  if (have > 0 && need > 0.8 * have) {
    std::ostringstream s;
    s.precision(3);
    s << "scores of shape [" << q.heads << ", " << q.rows << ", " << k.rows << "] need about "
      << need / (1 << 30) << " GiB, more than this machine's " << have / (1 << 30)
      << " GiB of memory allows";
    throw InputError(s.str());
  }
  checkFinite(q, "Q");
  checkFinite(k, "K");
  checkFinite(v, "V");
  return Dims{q.heads, q.rows, k.rows, q.cols, v.cols};
}

void biasedScoresHead(const Tensor3& scaled, const AttentionParams& p,
                      const std::vector<float>& slopes, int h, float* out) {
  const int Tq = scaled.rows, Tk = scaled.cols;
  const float slope = h < static_cast<int>(slopes.size()) ? slopes[h] : 0.0f;
  exprGrid(p.mask, h + 1, Tq, Tk);  // the expression's cells, when the caller did not validate
  for (int i = 0; i < Tq; ++i) {
    rowLogits(scaled.head(h) + std::size_t(i) * Tk, out + std::size_t(i) * Tk, p, slope, h, i, Tq,
              Tk);
  }
}

void applyTemperature(float* values, std::size_t n, float tau) {
  applyTemperature(values, static_cast<int>(n), tau);
}

void softmaxOverQueries(const float* biased, int Tq, int Tk, float tau, float* out) {
  // Column j of the biased scores, as a row, through the same softmax as the key axis.
  std::vector<float> column(Tq), scratch(Tq), weights(Tq);
  for (int j = 0; j < Tk; ++j) {
    for (int i = 0; i < Tq; ++i) column[i] = biased[std::size_t(i) * Tk + j];
    rowSoftmax(column.data(), scratch.data(), weights.data(), Tq, tau);
    for (int i = 0; i < Tq; ++i) out[std::size_t(i) * Tk + j] = weights[i];
  }
}

Tensor3 computeLogits(const Tensor3& scaled, const AttentionParams& p) {
  const int H = scaled.heads, Tq = scaled.rows, Tk = scaled.cols;
  validateParams(p, H, Tq, Tk);
  Tensor3 out = Tensor3::uninit(H, Tq, Tk);  // every row is written below
  const std::vector<float> slopes = alibiSlopes(H);
  detail::parallelFor(H, [&](int h) {
    float* head = &out.at(h, 0, 0);
    biasedScoresHead(scaled, p, slopes, h, head);
    for (int i = 0; i < Tq; ++i) applyTemperature(head + std::size_t(i) * Tk, Tk, p.temperature);
  });
  return out;
}

float logitAt(const Tensor3& scaled, const AttentionParams& p, const std::vector<float>& slopes,
              int h, int i, int j) {
  const int Tq = scaled.rows, Tk = scaled.cols;
  if (!maskAllowed(p.mask, h, i, j, Tq, Tk)) return kNegInf;
  const float slope = h < static_cast<int>(slopes.size()) ? slopes[h] : 0.0f;
  float x = softcapScore(scaled.at(h, i, j), p.mask.softcap);
  if (p.mask.alibi) x -= slope * std::fabs(static_cast<float>(queryPosition(i, Tq, Tk) - j));
  if (p.mask.customKind == MaskSpec::Custom::Bias) {
    x += p.mask.custom.at(p.mask.custom.heads == 1 ? 0 : h, i, j);
  }
  return x / p.temperature;
}

std::unique_ptr<AttentionEngine> makeCpuEngine() { return std::make_unique<CpuEngine>(); }

}  // namespace attnviz
