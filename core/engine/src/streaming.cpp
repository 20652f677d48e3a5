// Attention in tiles: one B_r x B_c block of scores per thread at a time, never [T_q, T_k].
// The per-row steps (logits with masks and bias, exp, row sums) are the engine's own
// (engine_detail.h), so a streamed row agrees with the materialised one.
#include "attnviz/engine/isa.h"
#include "attnviz/engine/streaming.h"

#include "attnviz/engine/engine.h"
#include "attnviz/engine/engine_detail.h"
#include "attnviz/engine/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cmath>
#include <mutex>
#include <vector>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace attnviz {

namespace {

using detail::kNegInf;
using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;

// The largest of n values >= 0 (0 when n == 0), and their sum. The pixel blocks are short (a
// few to a few dozen keys), too short for the compiler's vector loop with its scalar tail, so
// with AVX-512 the tail is one masked load.
float segmentMax(const float* v, int n) {
#ifdef __AVX512F__
  __m512 acc = _mm512_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) acc = _mm512_max_ps(acc, _mm512_loadu_ps(v + j));
  if (j < n) acc = _mm512_max_ps(acc, _mm512_maskz_loadu_ps(__mmask16((1u << (n - j)) - 1), v + j));
  return _mm512_reduce_max_ps(acc);
#else
  float m = 0.0f;
  for (int j = 0; j < n; ++j) m = std::max(m, v[j]);
  return m;
#endif
}

float segmentSum(const float* v, int n) {
#ifdef __AVX512F__
  __m512 acc = _mm512_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(v + j));
  if (j < n) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(__mmask16((1u << (n - j)) - 1), v + j));
  return _mm512_reduce_add_ps(acc);
#else
  float s = 0.0f;
  for (int j = 0; j < n; ++j) s += v[j];
  return s;
#endif
}

// (m_old - m_new) / tau as the engine scales a logit gap, then exp: the online-softmax rescale.
float rescaleFactor(float mOld, float mNew, float tau) {
  if (mOld == kNegInf) return 0.0f;
  const float invTau = 1.0f / tau;
  return std::exp(std::isfinite(invTau) ? (mOld - mNew) * invTau : (mOld - mNew) / tau);
}

// Reports progress as tasks finish, one call at a time, in tiles computed (a causal block near
// the end has many more tiles than one at the start, so counting blocks would stall the bar).
class Progress {
 public:
  // tilesOf(t): the tiles task t computes; asked for only when there is someone to tell.
  Progress(const std::function<void(double)>& fn, int tasks,
           const std::function<long(int)>& tilesOf)
      : fn_(fn) {
    if (fn_)
      for (int t = 0; t < tasks; ++t) total_ += tilesOf(t);
  }
  void done(long tiles) {
    if (!fn_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ += tiles;
    fn_(total_ > 0 ? double(finished_) / double(total_) : 1.0);
  }

 private:
  const std::function<void(double)>& fn_;
  long total_ = 0, finished_ = 0;
  std::mutex mutex_;
};

// What one query block needs to walk the key blocks of one head.
struct Sweep {
  const Tensor3& q;
  const Tensor3& k;
  const AttentionParams& p;
  float slope, scale;
  int h, i0, i1, Tq, Tk, blockKeys;
  std::vector<detail::RowSpan> spans;

  Sweep(const Tensor3& q_, const Tensor3& k_, const AttentionParams& p_, float slope_, int h_,
        int i0_, int i1_, int blockKeys_)
      : q(q_),
        k(k_),
        p(p_),
        slope(slope_),
        scale(1.0f / std::sqrt(float(q_.cols))),
        h(h_),
        i0(i0_),
        i1(i1_),
        Tq(q_.rows),
        Tk(k_.rows),
        blockKeys(blockKeys_) {
    for (int i = i0; i < i1; ++i) spans.push_back(detail::rowSpan(p.mask, i, Tq, Tk));
  }
  int rows() const { return i1 - i0; }
  int keyBlocks() const { return (Tk + blockKeys - 1) / blockKeys; }
  // False when every row of the block masks every key of [j0, j1): the tile is skipped.
  bool needed(int j0, int j1) const {
    return std::any_of(spans.begin(), spans.end(),
                       [&](const detail::RowSpan& s) { return s.mayAllow(j0, j1); });
  }
  // Tiles not skipped among the key blocks that meet the keys [c0, c1), each cut to them.
  long neededTiles(int c0 = 0, int c1 = -1) const {
    if (c1 < 0) c1 = Tk;
    long n = 0;
    for (int j0 = (c0 / blockKeys) * blockKeys; j0 < c1; j0 += blockKeys)
      n += needed(std::max(j0, c0), std::min(c1, j0 + blockKeys));
    return n;
  }
  // Scores of the tile into the top-left rows() x (j1 - j0) of S, then the biased, masked
  // logits of every row in place.
  void logits(MatrixRM& S, int j0, int j1) const {
    const int bc = j1 - j0;
    auto tile = S.topLeftCorner(rows(), bc);
    gemmABt(rows(), bc, q.cols, q.head(h) + std::size_t(i0) * q.cols, q.cols,
            k.head(h) + std::size_t(j0) * k.cols, k.cols, S.data(), long(S.cols()));
    tile *= scale;
    if (!std::isfinite((tile.array() * 0.0f).sum())) detail::throwScoresOverflow(h);
    for (int r = 0; r < rows(); ++r) {
      float* z = &S(r, 0);
      detail::rowLogits(z, z, p, slope, h, i0 + r, Tq, Tk, j0, j1);
    }
  }
};

static_assert(detail::kEngineRowBlock == 128 && detail::kSumChunk == 256,
              "StreamOptions' default blocks follow the engine's (see streaming.h)");

void checkBlocks(const StreamOptions& o) {
  if (o.blockRows < 1 || o.blockKeys < 1)
    throw UsageError("block sizes must be >= 1, got " + std::to_string(o.blockRows) + " x " +
                     std::to_string(o.blockKeys));
}

}  // namespace

Tensor3 streamOutput(const Tensor3& q, const Tensor3& k, const Tensor3& v, const AttentionParams& p,
                     const StreamOptions& opt, int* fullyMaskedRows) {
  checkBlocks(opt);
  const Dims d = detail::validateStreamInputs(q, k, &v);
  validateParams(p, d.H, d.Tq, d.Tk);
  const std::vector<float> slopes = alibiSlopes(d.H);
  const int Br = opt.blockRows, Bc = std::min(opt.blockKeys, d.Tk);
  const int blocks = (d.Tq + Br - 1) / Br;
  Tensor3 out = Tensor3::uninit(d.H, d.Tq, d.dv);  // every row is written below
  std::atomic<int> masked{0};
  Progress progress(opt.progress, d.H * blocks, [&](int t) {
    const int h = t / blocks, i0 = (t % blocks) * Br;
    return Sweep(q, k, p, slopes[h], h, i0, std::min(d.Tq, i0 + Br), Bc).neededTiles();
  });
  detail::parallelFor(d.H * blocks, [&](int t) {
    const int h = t / blocks, i0 = (t % blocks) * Br, i1 = std::min(d.Tq, i0 + Br);
    const Sweep sw(q, k, p, slopes[h], h, i0, i1, Bc);
    const int br = sw.rows();
    thread_local MatrixRM S, acc;
    thread_local std::vector<float> m, l;
    if (S.rows() < br || S.cols() != Bc) S.resize(std::max<Eigen::Index>(br, S.rows()), Bc);
    acc.setZero(br, d.dv);
    m.assign(br, kNegInf);
    l.assign(br, 0.0f);
    for (int kb = 0; kb < sw.keyBlocks(); ++kb) {
      const int j0 = kb * Bc, j1 = std::min(d.Tk, j0 + Bc), bc = j1 - j0;
      if (!sw.needed(j0, j1)) continue;
      sw.logits(S, j0, j1);
      for (int r = 0; r < br; ++r) {
        float* z = &S(r, 0);
        const float mNew = std::max(m[r], Eigen::Map<const Eigen::ArrayXf>(z, bc).maxCoeff());
        if (mNew == kNegInf) {  // nothing allowed yet: this row of P is 0
          std::fill(z, z + bc, 0.0f);
          continue;
        }
        const float alpha = rescaleFactor(m[r], mNew, p.temperature);
        detail::expShifted(z, z, bc, mNew, p.temperature);
        l[r] = l[r] * alpha + detail::chunkedSum(z, bc);
        if (alpha != 1.0f) acc.row(r) *= alpha;
        m[r] = mNew;
      }
      gemmAB(br, int(acc.cols()), bc, S.data(), long(S.cols()), v.head(h) + std::size_t(j0) * v.cols,
             v.cols, acc.data(), long(acc.cols()), true);
    }
    MapRM O = out.mat(h);
    for (int r = 0; r < br; ++r) {
      if (l[r] > 0.0f) {
        O.row(i0 + r) = acc.row(r) * (1.0f / l[r]);
      } else {
        O.row(i0 + r).setZero();  // fully masked: a zero output row
        ++masked;
      }
    }
    if (opt.progress) progress.done(sw.neededTiles());
  });
  if (fullyMaskedRows) *fullyMaskedRows = masked;
  return out;
}

namespace {

// Pooled values of one pixel row over some of its query rows: the largest weight among allowed
// cells, whether any cell was allowed, and the sum of the weights.
struct PixelRow {
  int y = -1;
  std::vector<float> best, sum;
  std::vector<std::uint8_t> any;
  void reset(int y_, int W) {
    y = y_;
    best.assign(W, 0.0f);
    sum.assign(W, 0.0f);
    any.assign(W, 0);
  }
  void merge(const PixelRow& o) {
    for (std::size_t x = 0; x < best.size(); ++x) {
      if (o.any[x]) best[x] = any[x] ? std::max(best[x], o.best[x]) : o.best[x];
      any[x] |= o.any[x];
      sum[x] += o.sum[x];
    }
  }
  void store(PooledWeights& pw) const {
    const int rows = std::min(pw.r1, pw.r0 + (y + 1) * pw.poolQ) - (pw.r0 + y * pw.poolQ);
    for (int x = 0; x < pw.width; ++x) {
      const int cells =
          rows * (std::min(pw.c1, pw.c0 + (x + 1) * pw.poolK) - (pw.c0 + x * pw.poolK));
      pw.max[pw.at(y, x)] = any[x] ? best[x] : 0.0f;
      if (!pw.mean.empty()) pw.mean[pw.at(y, x)] = sum[x] / float(cells);
      pw.masked[pw.at(y, x)] = any[x] ? 0 : 1;
    }
  }
};

}  // namespace

PooledWeights streamPooledWeights(const Tensor3& q, const Tensor3& k, int head,
                                  const AttentionParams& p, int poolQ, int poolK,
                                  const StreamOptions& opt, bool withMean) {
  return streamPooledRegion(q, k, head, p, PoolRegion{0, q.rows, 0, k.rows, poolQ, poolK}, opt,
                            withMean);
}

PooledWeights streamPooledRegion(const Tensor3& q, const Tensor3& k, int head,
                                 const AttentionParams& p, const PoolRegion& region,
                                 const StreamOptions& opt, bool withMean, const SoftmaxStats* known,
                                 SoftmaxStats* found) {
  checkBlocks(opt);
  const Dims d = detail::validateStreamInputs(q, k, nullptr);
  validateParams(p, d.H, d.Tq, d.Tk);
  if (head < 0 || head >= d.H)
    throw UsageError("head " + std::to_string(head) + " out of range [0, " + std::to_string(d.H) +
                     ")");
  const int poolQ = region.poolQ, poolK = region.poolK;
  if (poolQ < 1 || poolK < 1)
    throw UsageError("pooling factors must be >= 1, got " + std::to_string(poolQ) + " x " +
                     std::to_string(poolK));
  PooledWeights pw;
  pw.Tq = d.Tq, pw.Tk = d.Tk, pw.poolQ = poolQ, pw.poolK = poolK;
  pw.r0 = std::clamp(region.r0, 0, d.Tq), pw.r1 = std::clamp(region.r1, 0, d.Tq);
  pw.c0 = std::clamp(region.c0, 0, d.Tk), pw.c1 = std::clamp(region.c1, 0, d.Tk);
  if (pw.r1 <= pw.r0 || pw.c1 <= pw.c0)
    throw UsageError("empty region: queries [" + std::to_string(region.r0) + ", " +
                     std::to_string(region.r1) + "), keys [" + std::to_string(region.c0) + ", " +
                     std::to_string(region.c1) + ") of a " + std::to_string(d.Tq) + " x " +
                     std::to_string(d.Tk) + " matrix");
  const int r0 = pw.r0, r1 = pw.r1, c0 = pw.c0, c1 = pw.c1;
  pw.width = (c1 - c0 + poolK - 1) / poolK;
  pw.height = (r1 - r0 + poolQ - 1) / poolQ;
  const std::size_t pixels = std::size_t(pw.width) * std::size_t(pw.height);
  pw.max.assign(pixels, 0.0f);
  if (withMean) pw.mean.assign(pixels, 0.0f);
  pw.masked.assign(pixels, 1);
  const bool useKnown = known && known->covers(d.Tq);
  if (found && !found->covers(d.Tq)) {
    found->max.assign(d.Tq, kNegInf);
    found->sum.assign(d.Tq, 0.0f);
  }

  const float slope = alibiSlopes(d.H)[head];
  const float tau = p.temperature;
  const bool exactSpans = detail::rowSpanIsExact(p.mask);
  const int W = pw.width, Br = opt.blockRows, Bc = std::min(opt.blockKeys, d.Tk);
  // Query blocks fall where the engine's do (cut to the region), so each tile's scores are the
  // engine's to the bit; a pixel row cut by a block boundary is pooled in parts and merged in
  // block order after.
  const int firstBlock = r0 / Br;
  const int blocks = (r1 - 1) / Br - firstBlock + 1;
  auto blockRows = [&](int t, int& i0, int& i1) {
    i0 = std::max(r0, (firstBlock + t) * Br);
    i1 = std::min(r1, (firstBlock + t + 1) * Br);
  };
  // The key blocks the pooling reads: those that meet [c0, c1). Without known stats every key
  // block is read (for the row max and sum) and only the region's keys are pooled.
  const int kbFirst = useKnown ? c0 / Bc : 0;
  const int kbEnd = useKnown ? (c1 - 1) / Bc + 1 : (d.Tk + Bc - 1) / Bc;
  std::vector<PixelRow> firstPart(blocks), lastPart(blocks);
  std::atomic<int> masked{0};
  Progress progress(opt.progress, blocks, [&](int t) {
    int i0, i1;
    blockRows(t, i0, i1);
    const Sweep sw(q, k, p, slope, head, i0, i1, Bc);
    return useKnown ? sw.neededTiles(c0, c1) : 2 * sw.neededTiles();
  });
  detail::parallelFor(blocks, [&](int t) {
    if (opt.cancel && opt.cancel->load()) return;
    int i0, i1;
    blockRows(t, i0, i1);
    const Sweep sw(q, k, p, slope, head, i0, i1, Bc);
    const int br = sw.rows();
    thread_local MatrixRM S;
    thread_local AlignedFloats e;
    thread_local std::vector<float> m, l, rowMax, rowSum;
    thread_local std::vector<std::uint8_t> rowAllowed;
    if (S.rows() < br || S.cols() != Bc) S.resize(std::max<Eigen::Index>(br, S.rows()), Bc);
    e.resize(std::size_t(Bc) + 16);  // a masked tail load never reaches past the buffer
    rowMax.assign(std::size_t(br) * W, 0.0f);
    if (withMean) rowSum.assign(std::size_t(br) * W, 0.0f);
    rowAllowed.assign(std::size_t(br) * W, 0);
    if (useKnown) {
      m.assign(known->max.begin() + i0, known->max.begin() + i1);
      l.assign(known->sum.begin() + i0, known->sum.begin() + i1);
    } else {
      m.assign(br, kNegInf);
      l.assign(br, 0.0f);
      // Sweep 1: each row's max logit (as the engine's row max: exact in any order).
      for (int kb = 0; kb < kbEnd; ++kb) {
        const int j0 = kb * Bc, j1 = std::min(d.Tk, j0 + Bc), bc = j1 - j0;
        if (!sw.needed(j0, j1)) continue;
        sw.logits(S, j0, j1);
        for (int r = 0; r < br; ++r)
          m[r] = std::max(m[r], Eigen::Map<const Eigen::ArrayXf>(&S(r, 0), bc).maxCoeff());
      }
    }
    // Sweep 2: exp against the final max (row sums in the engine's chunks when they are not
    // known), pooled per row over the region's keys.
    for (int kb = kbFirst; kb < kbEnd; ++kb) {
      int j0 = kb * Bc, j1 = std::min(d.Tk, j0 + Bc);
      if (useKnown) j0 = std::max(j0, c0), j1 = std::min(j1, c1);  // only the region's tile
      const int bc = j1 - j0;
      if (!sw.needed(j0, j1)) continue;
      const int a0 = std::max(j0, c0), b1 = std::min(j1, c1);  // the keys pooled, absolute
      sw.logits(S, j0, j1);
      for (int r = 0; r < br; ++r) {
        if (m[r] == kNegInf) continue;
        const float* z = &S(r, 0);
        float* er = e.data();  // aligned, as the engine's scratch row: the vector exp splits alike
        detail::expShifted(z, er, bc, m[r], tau);
        if (!useKnown)
          for (int c = 0; c < bc; c += detail::kSumChunk)
            l[r] += detail::chunkedSum(er + c, std::min(detail::kSumChunk, bc - c));
        for (int x = std::max(0, (a0 - c0) / poolK); a0 < b1 && c0 + x * poolK < b1; ++x) {
          const int a = std::max(a0, c0 + x * poolK) - j0;
          const int b = std::min(b1, c0 + (x + 1) * poolK) - j0;
          const std::size_t o = std::size_t(r) * W + x;
          rowMax[o] = std::max(rowMax[o], segmentMax(er + a, b - a));
          if (withMean) rowSum[o] += segmentSum(er + a, b - a);
          if (rowAllowed[o]) continue;
          rowAllowed[o] = exactSpans ? sw.spans[r].mayAllow(j0 + a, j0 + b)
                                     : std::any_of(z + a, z + b,
                                                   [](float v) { return v != kNegInf; });
        }
      }
    }
    // Weights are e * (1 / l), as the engine normalises; a pixel takes its rows' largest.
    PixelRow part;
    for (int y = (i0 - r0) / poolQ; r0 + y * poolQ < i1; ++y) {
      part.reset(y, W);
      const int y0 = r0 + y * poolQ, y1 = std::min(r1, r0 + (y + 1) * poolQ);
      for (int r = std::max(i0, y0) - i0; r < std::min(i1, y1) - i0; ++r) {
        if (m[r] == kNegInf) continue;
        const float inv = 1.0f / l[r];
        for (int x = 0; x < W; ++x) {
          const std::size_t o = std::size_t(r) * W + x;
          if (rowAllowed[o]) {
            const float w = rowMax[o] * inv;
            part.best[x] = part.any[x] ? std::max(part.best[x], w) : w;
            part.any[x] = 1;
          }
          if (withMean) part.sum[x] += rowSum[o] * inv;
        }
      }
      if (y0 >= i0 && y1 <= i1)
        part.store(pw);
      else
        (y0 < i0 ? firstPart[t] : lastPart[t]) = part;
    }
    if (found && !useKnown) {
      std::copy(m.begin(), m.begin() + br, found->max.begin() + i0);
      std::copy(l.begin(), l.begin() + br, found->sum.begin() + i0);
    }
    masked += int(std::count(m.begin(), m.begin() + br, kNegInf));
    if (opt.progress) progress.done(useKnown ? sw.neededTiles(c0, c1) : 2 * sw.neededTiles());
  });
  if (opt.cancel && opt.cancel->load()) return pw;
  // Pixel rows cut by block boundaries, merged in block order (so the mean is reproducible).
  PixelRow acc;
  for (int t = 0; t < blocks; ++t)
    for (const PixelRow* part : {&firstPart[t], &lastPart[t]}) {
      if (part->y < 0) continue;
      if (acc.y != part->y) {
        if (acc.y >= 0) acc.store(pw);
        acc = *part;
      } else {
        acc.merge(*part);
      }
    }
  if (acc.y >= 0) acc.store(pw);
  pw.fullyMaskedRows = masked;
  return pw;
}

QueryRow streamQueryRow(const Tensor3& q, const Tensor3& k, const Tensor3* v,
                        const AttentionParams& p, int head, int i) {
  if (q.heads != k.heads || q.cols != k.cols || q.cols < 1 ||
      (v && (v->heads != k.heads || v->rows != k.rows)))
    throw UsageError("streamQueryRow: Q, K and V do not fit together");
  if (head < 0 || head >= q.heads || i < 0 || i >= q.rows)
    throw UsageError("streamQueryRow: head " + std::to_string(head) + ", row " +
                     std::to_string(i) + " out of range [0, " + std::to_string(q.heads) +
                     ") x [0, " + std::to_string(q.rows) + ")");
  const int Tq = q.rows, Tk = k.rows;
  QueryRow r;
  r.head = head;
  r.row = i;
  r.logits.resize(Tk);
  r.weights.resize(Tk);
  // s = K q_i / sqrt(d_k), scaled after the product as the engine's GEMM is.
  Eigen::Map<Eigen::VectorXf> s(r.logits.data(), Tk);
  s.noalias() = k.mat(head) * q.mat(head).row(i).transpose();
  s *= 1.0f / std::sqrt(float(q.cols));
  if (!std::isfinite((s.array() * 0.0f).sum())) detail::throwScoresOverflow(head);
  const float slope = p.mask.alibi ? alibiSlopes(q.heads)[std::size_t(head)] : 0.0f;
  detail::rowLogits(r.logits.data(), r.logits.data(), p, slope, head, i, Tq, Tk, 0, Tk);
  std::vector<float> scratch(std::size_t(Tk) + 1);
  r.stats = detail::rowSoftmax(r.logits.data(), scratch.data(), r.weights.data(), Tk,
                               p.temperature);
  applyTemperature(r.logits.data(), std::size_t(Tk), p.temperature);
  for (float z : r.logits) r.allowedKeys += z != kNegInf;
  if (v) {
    r.output.assign(std::size_t(v->cols), 0.0f);
    if (!r.stats.fullyMasked && v->cols > 0)
      Eigen::Map<Eigen::RowVectorXf>(r.output.data(), v->cols).noalias() =
          Eigen::Map<const Eigen::RowVectorXf>(r.weights.data(), Tk) * v->mat(head);
  }
  return r;
}

bool maskHidesAnyCell(const MaskSpec& m, int h, int Tq, int Tk) {
  if (Tq <= 0 || Tk <= 0) return false;
  if (m.customKind != MaskSpec::Custom::None) {
    const float* c = m.custom.head(m.custom.heads == 1 ? 0 : h);
    const std::size_t n = std::size_t(Tq) * Tk;
    const float blocked = m.customKind == MaskSpec::Custom::Allow ? 0.0f : kNegInf;
    if (std::find(c, c + n, blocked) != c + n) return true;
  }
  if (!detail::rowSpanIsExact(m)) {
    // Chunks, documents and expressions cut holes the row spans cannot describe: ask the rule
    // row by row (the first hidden cell ends the search, so a real mask answers at once).
    const ExprGrid* grid = m.expr.empty() ? nullptr : exprGrid(m, h + 1, Tq, Tk);
    std::vector<std::uint8_t> row(std::size_t(Tk), 0);
    for (int i = 0; i < Tq; ++i) {
      allowedRow(m, grid, h, i, Tq, Tk, row.data());
      if (std::find(row.begin(), row.end(), std::uint8_t{0}) != row.end()) return true;
    }
    return false;
  }
  for (int i = 0; i < Tq; ++i) {
    const detail::RowSpan s = detail::rowSpan(m, i, Tq, Tk);
    // |([0, prefixEnd) u [lo, hi]) n [0, limit)| < Tk
    const long a = std::min(s.prefixEnd, s.limit);
    const long bLo = s.lo, bHi = std::min(s.hi + 1, s.limit);
    const long b = std::max(0L, bHi - bLo);
    const long both = std::max(0L, std::min<long>(a, bHi) - bLo);
    if (a + b - both < Tk) return true;
  }
  return false;
}

}  // namespace attnviz
