// The streaming path (FlashAttention tiling) against the naive double reference at small sizes
// and against the materialised engine up to T = 4096: every mask kind, ALiBi and temperature,
// block sizes that do not divide T, T_q != T_k.
#include "attnviz/engine/engine.h"
#include "attnviz/engine/streaming.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace attnviz {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Case {
  std::string name;
  MaskSpec mask;
  float tau = 1.0f;
};

// Every mask kind alone and in the combinations the convention defines, for [H, Tq, Tk].
std::vector<Case> maskCases(int H, int Tq, int Tk) {
  std::vector<Case> cs;
  cs.push_back({"none", {}, 1.0f});
  MaskSpec m;
  m.causal = true;
  cs.push_back({"causal", m, 1.0f});
  cs.push_back({"causal tau 0.3", m, 0.3f});
  m = {};
  m.window = 5;
  cs.push_back({"window 5", m, 1.0f});
  m.causal = true;
  m.sink = 2;
  cs.push_back({"causal window sink", m, 2.0f});
  m = {};
  m.causal = true;
  m.prefix = 4;
  m.pad = 3;
  cs.push_back({"prefix-LM with padding", m, 1.0f});
  m = {};
  m.alibi = true;
  m.causal = true;
  cs.push_back({"ALiBi causal", m, 0.7f});
  m = {};
  m.customKind = MaskSpec::Custom::Allow;
  m.custom = Tensor3(H, Tq, Tk);
  for (std::size_t n = 0; n < m.custom.data.size(); ++n) m.custom.data[n] = (n * 7919 % 5) != 0;
  // Row 1 of head 0 sees nothing: a fully masked row.
  for (int j = 0; j < Tk && Tq > 1; ++j) m.custom.at(0, 1, j) = 0.0f;
  cs.push_back({"custom allow with a fully masked row", m, 1.0f});
  m = {};
  m.customKind = MaskSpec::Custom::Bias;
  m.custom = ref::randomTensor(1, Tq, Tk, 99, 0.5f);
  for (std::size_t n = 0; n < m.custom.data.size(); n += 3) m.custom.data[n] = kNegInf;
  m.alibi = true;
  cs.push_back({"custom bias with -inf and ALiBi", m, 1.3f});
  m = {};
  m.pad = Tk;  // every key padding: every row fully masked
  cs.push_back({"all padding", m, 1.0f});
  return cs;
}

AttentionParams paramsOf(const Case& c) {
  AttentionParams p;
  p.mask = c.mask;
  p.temperature = c.tau;
  return p;
}

StreamOptions blocks(int br, int bc) {
  StreamOptions o;
  o.blockRows = br;
  o.blockKeys = bc;
  return o;
}

TEST(StreamOutput, MatchesTheDoubleReferenceForEveryMaskAndBlockSize) {
  const int H = 3, Tq = 37, Tk = 53, dk = 16, dv = 12;
  const Tensor3 q = ref::randomTensor(H, Tq, dk, 1), k = ref::randomTensor(H, Tk, dk, 2),
                v = ref::randomTensor(H, Tk, dv, 3);
  for (const Case& c : maskCases(H, Tq, Tk)) {
    const AttentionParams p = paramsOf(c);
    const ref::Result want = ref::attention(q, k, v, p);
    int wantMasked = 0;
    for (const ref::Row& r : want.rows) wantMasked += r.fullyMasked;
    for (auto [br, bc] : {std::pair{1, 1}, {7, 5}, {16, 64}, {128, 512}, {5, 53}}) {
      SCOPED_TRACE(c.name + ", blocks " + std::to_string(br) + " x " + std::to_string(bc));
      int masked = -1;
      const Tensor3 out = streamOutput(q, k, v, p, blocks(br, bc), &masked);
      ASSERT_EQ(out.heads, H);
      ASSERT_EQ(out.rows, Tq);
      ASSERT_EQ(out.cols, dv);
      EXPECT_EQ(masked, wantMasked);
      int bad = 0;
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < Tq; ++i)
          for (int x = 0; x < dv && bad < 5; ++x) {
            const double w = want.o(h, i, x);
            const float got = out.at(h, i, x);
            if (want.row(h, i).fullyMasked ? got != 0.0f : !ref::close(got, w, 1e-5, 1e-4)) {
              ++bad;
              ADD_FAILURE() << "O[" << h << "," << i << "," << x << "] = " << got << ", reference "
                            << w;
            }
          }
    }
  }
}

// Engine weights of head h pooled as the export does: the largest weight among allowed cells.
struct EnginePool {
  std::vector<float> max, mean;
  std::vector<std::uint8_t> masked;
};

EnginePool poolEngine(const Tensor3& w, const Tensor3& logits, int h, int poolQ, int poolK) {
  const int Tq = w.rows, Tk = w.cols;
  const int W = (Tk + poolK - 1) / poolK, Hp = (Tq + poolQ - 1) / poolQ;
  EnginePool e{std::vector<float>(std::size_t(W) * Hp, 0.0f),
               std::vector<float>(std::size_t(W) * Hp, 0.0f),
               std::vector<std::uint8_t>(std::size_t(W) * Hp, 1)};
  for (int y = 0; y < Hp; ++y)
    for (int x = 0; x < W; ++x) {
      double sum = 0;
      int cells = 0;
      float& best = e.max[std::size_t(y) * W + x];
      for (int i = y * poolQ; i < std::min(Tq, (y + 1) * poolQ); ++i)
        for (int j = x * poolK; j < std::min(Tk, (x + 1) * poolK); ++j) {
          ++cells;
          sum += w.at(h, i, j);
          if (logits.at(h, i, j) == kNegInf) continue;
          std::uint8_t& m = e.masked[std::size_t(y) * W + x];
          best = m ? w.at(h, i, j) : std::max(best, w.at(h, i, j));
          m = 0;
        }
      e.mean[std::size_t(y) * W + x] = float(sum / cells);
    }
  return e;
}

// Streamed pooled views against the engine's materialised weights. `exact`: the max-pool must
// be bit-for-bit equal (key blocks a multiple of 256); otherwise within float tolerance.
void expectPooledMatchesEngine(const Tensor3& q, const Tensor3& k, const AttentionParams& p,
                               int poolQ, int poolK, const StreamOptions& opt, bool exact) {
  const Tensor3 v = ref::randomTensor(q.heads, k.rows, 4, 5);
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& r = engine->result();
  const Tensor3 logits = computeLogits(r.scaled, p);
  for (int h = 0; h < q.heads; ++h) {
    const EnginePool want = poolEngine(r.weights, logits, h, poolQ, poolK);
    const PooledWeights got = streamPooledWeights(q, k, h, p, poolQ, poolK, opt);
    ASSERT_EQ(got.width, (k.rows + poolK - 1) / poolK);
    ASSERT_EQ(got.height, (q.rows + poolQ - 1) / poolQ);
    int wantMasked = 0;
    for (int i = 0; i < q.rows; ++i) wantMasked += r.row(h, i).fullyMasked;
    EXPECT_EQ(got.fullyMaskedRows, wantMasked);
    int bad = 0;
    for (std::size_t n = 0; n < want.max.size() && bad < 5; ++n) {
      const bool maxOk =
          exact ? got.max[n] == want.max[n] : ref::close(got.max[n], want.max[n], 1e-6, 1e-5);
      if (!maxOk || got.masked[n] != want.masked[n] ||
          !ref::close(got.mean[n], want.mean[n], 1e-7, 1e-4)) {
        ++bad;
        ADD_FAILURE() << "head " << h << " pixel (" << n / got.width << ", " << n % got.width
                      << "): max " << got.max[n] << " vs " << want.max[n] << ", mean "
                      << got.mean[n] << " vs " << want.mean[n] << ", masked " << int(got.masked[n])
                      << " vs " << int(want.masked[n]);
      }
    }
  }
}

TEST(StreamPooledWeights, MaxPoolIsBitForBitTheEnginesForEveryMask) {
  const int H = 2, Tq = 300, Tk = 700, d = 32;
  const Tensor3 q = ref::randomTensor(H, Tq, d, 11), k = ref::randomTensor(H, Tk, d, 12);
  for (const Case& c : maskCases(H, Tq, Tk)) {
    for (auto [pq, pk] : {std::pair{1, 1}, {3, 7}, {16, 16}, {300, 1}}) {
      SCOPED_TRACE(c.name + ", pool " + std::to_string(pq) + " x " + std::to_string(pk));
      expectPooledMatchesEngine(q, k, paramsOf(c), pq, pk, {}, true);
    }
  }
}

TEST(StreamPooledWeights, AnyBlockSizeMatchesTheEngineWithinFloatTolerance) {
  const int H = 1, Tq = 130, Tk = 250, d = 16;
  const Tensor3 q = ref::randomTensor(H, Tq, d, 21), k = ref::randomTensor(H, Tk, d, 22);
  for (const Case& c : maskCases(H, Tq, Tk)) {
    for (auto [br, bc] : {std::pair{1, 1}, {7, 33}, {50, 100}}) {
      SCOPED_TRACE(c.name + ", blocks " + std::to_string(br) + " x " + std::to_string(bc));
      expectPooledMatchesEngine(q, k, paramsOf(c), 4, 3, blocks(br, bc), false);
    }
  }
}

TEST(StreamPooledWeights, WithoutTheMeanTheMaxPoolIsTheSame) {
  const Tensor3 q = ref::randomTensor(1, 200, 16, 51), k = ref::randomTensor(1, 333, 16, 52);
  for (const Case& c : maskCases(1, 200, 333)) {
    const PooledWeights both = streamPooledWeights(q, k, 0, paramsOf(c), 6, 5);
    const PooledWeights maxOnly = streamPooledWeights(q, k, 0, paramsOf(c), 6, 5, {}, false);
    EXPECT_TRUE(maxOnly.mean.empty()) << c.name;
    EXPECT_EQ(maxOnly.max, both.max) << c.name;
    EXPECT_EQ(maxOnly.masked, both.masked) << c.name;
    EXPECT_EQ(maxOnly.fullyMaskedRows, both.fullyMaskedRows) << c.name;
  }
}

// A region of head h's reference weights pooled by a naive double loop: the largest weight among
// allowed cells (0 when all are masked), the mean over every cell (masked ones count 0).
struct RefPool {
  int width = 0, height = 0;
  std::vector<double> max, mean;
  std::vector<std::uint8_t> masked;
};

RefPool poolReference(const ref::Result& r, int h, const PoolRegion& g) {
  RefPool e;
  e.width = (g.c1 - g.c0 + g.poolK - 1) / g.poolK;
  e.height = (g.r1 - g.r0 + g.poolQ - 1) / g.poolQ;
  const std::size_t n = std::size_t(e.width) * e.height;
  e.max.assign(n, 0.0);
  e.mean.assign(n, 0.0);
  e.masked.assign(n, 1);
  for (int y = 0; y < e.height; ++y)
    for (int x = 0; x < e.width; ++x) {
      const std::size_t o = std::size_t(y) * e.width + x;
      double sum = 0;
      int cells = 0;
      for (int i = g.r0 + y * g.poolQ; i < std::min(g.r1, g.r0 + (y + 1) * g.poolQ); ++i)
        for (int j = g.c0 + x * g.poolK; j < std::min(g.c1, g.c0 + (x + 1) * g.poolK); ++j) {
          ++cells;
          sum += r.w(h, i, j);
          if (r.l(h, i, j) == -ref::kInf) continue;
          e.max[o] = e.masked[o] ? r.w(h, i, j) : std::max(e.max[o], r.w(h, i, j));
          e.masked[o] = 0;
        }
      e.mean[o] = sum / cells;
    }
  return e;
}

// The streamed region against the naive pooling of the double reference.
void expectRegionMatchesReference(const PooledWeights& got, const ref::Result& want, int h,
                                  const PoolRegion& g, const std::string& what) {
  SCOPED_TRACE(what);
  const RefPool e = poolReference(want, h, g);
  ASSERT_EQ(got.width, e.width);
  ASSERT_EQ(got.height, e.height);
  EXPECT_EQ(got.r0, g.r0);
  EXPECT_EQ(got.c1, g.c1);
  int fully = 0;
  for (int i = g.r0; i < g.r1; ++i) fully += want.row(h, i).fullyMasked;
  EXPECT_EQ(got.fullyMaskedRows, fully);
  int bad = 0;
  for (std::size_t n = 0; n < e.max.size() && bad < 5; ++n) {
    if (got.masked[n] != e.masked[n] || !ref::close(got.max[n], e.max[n], 1e-6, 1e-4) ||
        !ref::close(got.mean[n], e.mean[n], 1e-7, 1e-4)) {
      ++bad;
      ADD_FAILURE() << "pixel (" << n / got.width << ", " << n % got.width << "): max "
                    << got.max[n] << " vs " << e.max[n] << ", mean " << got.mean[n] << " vs "
                    << e.mean[n] << ", masked " << int(got.masked[n]) << " vs "
                    << int(e.masked[n]);
    }
  }
}

// The GUI's pyramid: regions (ragged edges, T not a multiple of the pooling or the blocks) at
// several pool factors, streamed alone and from the row statistics of a whole-matrix pass.
TEST(StreamPooledRegion, RegionsMatchANaivePoolingOfTheReferenceForEveryMask) {
  const int H = 2, Tq = 300, Tk = 700, d = 32;
  const Tensor3 q = ref::randomTensor(H, Tq, d, 61), k = ref::randomTensor(H, Tk, d, 62);
  const Tensor3 v = ref::randomTensor(H, Tk, 4, 63);
  const std::vector<PoolRegion> regions = {
      {0, Tq, 0, Tk, 16, 16}, {0, Tq, 0, Tk, 1, 1},     {37, 211, 95, 650, 4, 4},
      {129, 130, 0, Tk, 1, 3}, {250, 300, 690, 700, 7, 3}, {3, 299, 1, 699, 64, 128}};
  for (const Case& c : maskCases(H, Tq, Tk)) {
    const AttentionParams p = paramsOf(c);
    const ref::Result want = ref::attention(q, k, v, p);
    for (int h = 0; h < H; ++h) {
      SoftmaxStats stats;
      streamPooledRegion(q, k, h, p, {0, Tq, 0, Tk, 32, 32}, {}, false, nullptr, &stats);
      ASSERT_TRUE(stats.covers(Tq));
      for (const PoolRegion& g : regions) {
        const std::string where = c.name + ", head " + std::to_string(h) + ", rows [" +
                                  std::to_string(g.r0) + ", " + std::to_string(g.r1) +
                                  "), keys [" + std::to_string(g.c0) + ", " +
                                  std::to_string(g.c1) + "), pool " + std::to_string(g.poolQ) +
                                  " x " + std::to_string(g.poolK);
        expectRegionMatchesReference(streamPooledRegion(q, k, h, p, g), want, h, g,
                                     where + ", alone");
        expectRegionMatchesReference(streamPooledRegion(q, k, h, p, g, {}, true, &stats), want, h,
                                     g, where + ", from the row statistics");
        expectRegionMatchesReference(
            streamPooledRegion(q, k, h, p, g, blocks(7, 33), true, &stats), want, h, g,
            where + ", blocks 7 x 33");
      }
    }
  }
}

TEST(StreamPooledRegion, TheWholeMatrixIsStreamPooledWeightsBitForBit) {
  const Tensor3 q = ref::randomTensor(1, 260, 16, 71), k = ref::randomTensor(1, 900, 16, 72);
  AttentionParams p;
  p.mask.causal = true;
  const PooledWeights a = streamPooledWeights(q, k, 0, p, 5, 9);
  const PooledWeights b = streamPooledRegion(q, k, 0, p, {0, 260, 0, 900, 5, 9});
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.masked, b.masked);
}

TEST(StreamPooledRegion, RefusesAnEmptyRegionAndStopsWhenCancelled) {
  const Tensor3 q = ref::randomTensor(1, 300, 8, 81), k = ref::randomTensor(1, 300, 8, 82);
  EXPECT_THROW(streamPooledRegion(q, k, 0, {}, {10, 10, 0, 300, 1, 1}), UsageError);
  EXPECT_THROW(streamPooledRegion(q, k, 0, {}, {0, 300, 400, 500, 1, 1}), UsageError);
  EXPECT_THROW(streamPooledRegion(q, k, 0, {}, {0, 300, 0, 300, 0, 1}), UsageError);
  std::atomic<bool> cancel{true};
  StreamOptions opt;
  opt.cancel = &cancel;
  SoftmaxStats found;
  const PooledWeights pw = streamPooledRegion(q, k, 0, {}, {0, 300, 0, 300, 1, 1}, opt, true,
                                              nullptr, &found);
  // Nothing was computed: every pixel is still as initialised (masked), no row statistics.
  EXPECT_EQ(std::count(pw.masked.begin(), pw.masked.end(), 0), 0);
  EXPECT_EQ(std::count(found.sum.begin(), found.sum.end(), 0.0f), 300);
}

// At T = 4096 (causal, with a window and a sink), regions at the GUI's pool factors, refined
// from the whole-matrix pass's row statistics, against the naive pooling of the reference.
TEST(StreamPooledRegion, CausalT4096PyramidLevelsMatchTheReference) {
  const int T = 4096, d = 64;
  const Tensor3 q = ref::randomTensor(1, T, d, 91), k = ref::randomTensor(1, T, d, 92),
                v = ref::randomTensor(1, T, 1, 93);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 3000;
  p.mask.sink = 3;
  const ref::Result want = ref::attention(q, k, v, p);
  SoftmaxStats stats;
  const PoolRegion whole{0, T, 0, T, 8, 8};
  expectRegionMatchesReference(streamPooledRegion(q, k, 0, p, whole, {}, true, nullptr, &stats),
                               want, 0, whole, "the whole matrix at 8 x 8");
  for (const PoolRegion& g : {PoolRegion{1024, 3072, 512, 2560, 4, 4},
                              PoolRegion{2900, 3413, 77, 2100, 2, 2},
                              PoolRegion{3968, 4096, 3900, 4096, 1, 1}}) {
    expectRegionMatchesReference(streamPooledRegion(q, k, 0, p, g, {}, true, &stats), want, 0, g,
                                 "region at pool " + std::to_string(g.poolQ));
  }
}

TEST(StreamLongContext, CausalT4096OutputAndMaxPoolMatchTheMaterialisedEngine) {
  const int T = 4096, d = 64;
  const Tensor3 q = ref::randomTensor(1, T, d, 31), k = ref::randomTensor(1, T, d, 32),
                v = ref::randomTensor(1, T, d, 33);
  AttentionParams p;
  p.mask.causal = true;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3& want = engine->result().output;
  for (auto [br, bc] : {std::pair{128, 512}, {100, 300}}) {
    const Tensor3 got = streamOutput(q, k, v, p, blocks(br, bc));
    float worst = 0;
    for (std::size_t n = 0; n < got.data.size(); ++n)
      worst = std::max(
          worst, std::fabs(got.data[n] - want.data[n]) / (1e-5f + 1e-4f * std::fabs(want.data[n])));
    EXPECT_LE(worst, 1.0f) << "blocks " << br << " x " << bc;
  }
  expectPooledMatchesEngine(q, k, p, 4, 4, {}, true);
}

TEST(StreamLongContext, CrossAttentionWithWindowAndSinkMatchesTheEngine) {
  const int Tq = 1000, Tk = 3001, d = 64;
  const Tensor3 q = ref::randomTensor(2, Tq, d, 41), k = ref::randomTensor(2, Tk, d, 42),
                v = ref::randomTensor(2, Tk, d, 43);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 700;
  p.mask.sink = 4;
  p.mask.alibi = true;
  p.temperature = 0.8f;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3& want = engine->result().output;
  const Tensor3 got = streamOutput(q, k, v, p, blocks(96, 200));
  for (std::size_t n = 0; n < got.data.size(); ++n)
    ASSERT_TRUE(ref::close(got.data[n], want.data[n], 1e-5, 1e-4))
        << "element " << n << ": " << got.data[n] << " vs " << want.data[n];
  expectPooledMatchesEngine(q, k, p, 5, 9, {}, true);
}

TEST(StreamOutput, RefusesOverflowingScoresLikeTheEngine) {
  Tensor3 q = ref::randomTensor(1, 4, 8, 1), k = ref::randomTensor(1, 6, 8, 2);
  const Tensor3 v = ref::randomTensor(1, 6, 8, 3);
  for (float& x : q.data) x = 3e19f;
  for (float& x : k.data) x = 3e19f;
  EXPECT_THROW(streamOutput(q, k, v, {}), InputError);
  EXPECT_THROW(streamPooledWeights(q, k, 0, {}, 1, 1), InputError);
}

TEST(StreamPooledWeights, RefusesABadHeadOrPooling) {
  const Tensor3 q = ref::randomTensor(2, 4, 8, 1), k = ref::randomTensor(2, 6, 8, 2);
  EXPECT_THROW(streamPooledWeights(q, k, 2, {}, 1, 1), UsageError);
  EXPECT_THROW(streamPooledWeights(q, k, 0, {}, 0, 1), UsageError);
  EXPECT_THROW(streamOutput(q, k, ref::randomTensor(2, 6, 3, 3), {}, blocks(0, 4)), UsageError);
}

TEST(MaskHidesAnyCell, AgreesWithTheCellRuleForEveryMask) {
  for (auto [Tq, Tk] : {std::pair{1, 1}, {1, 9}, {9, 9}, {5, 12}, {12, 5}}) {
    std::vector<Case> cs = maskCases(1, Tq, Tk);
    MaskSpec m;
    m.prefix = Tk;  // everything visible again despite causal
    m.causal = true;
    cs.push_back({"prefix covers all", m, 1.0f});
    m = {};
    m.window = Tk + Tq;
    cs.push_back({"wide window", m, 1.0f});
    // The kinds whose holes no row span describes: chunks and documents.
    m = {};
    m.chunk = 4;
    cs.push_back({"chunk:4", m, 1.0f});
    m.chunk = Tq + Tk;
    cs.push_back({"one chunk covers all", m, 1.0f});
    m = {};
    m.docs.assign(std::size_t(Tk), 0);
    cs.push_back({"one document", m, 1.0f});
    for (int j = 0; j < Tk; ++j) m.docs[j] = j / 3;
    cs.push_back({"documents of 3", m, 1.0f});
    for (const Case& c : cs) {
      bool want = false;
      for (int i = 0; i < Tq; ++i)
        for (int j = 0; j < Tk; ++j)
          want =
              want || !ref::allowed(c.mask, 0, i, j, Tq, Tk) ||
              (c.mask.customKind == MaskSpec::Custom::Bias && c.mask.custom.at(0, i, j) == kNegInf);
      EXPECT_EQ(maskHidesAnyCell(c.mask, 0, Tq, Tk), want) << c.name << " at " << Tq << " x " << Tk;
    }
  }
}

TEST(MaskHidesAnyCell, ExpressionsFollowTheirCells) {
  for (auto [Tq, Tk] : {std::pair{1, 1}, {9, 9}, {5, 12}}) {
    for (const char* expr : {"1", "k <= q", "(q - k) % 2 == 0", "q >= 0"}) {
      MaskSpec m;
      m.expr = expr;
      // Brute force: the cell rule, one cell at a time.
      bool want = false;
      for (int i = 0; i < Tq; ++i)
        for (int j = 0; j < Tk; ++j) want = want || !maskAllowed(m, 0, i, j, Tq, Tk);
      EXPECT_EQ(maskHidesAnyCell(m, 0, Tq, Tk), want) << expr << " at " << Tq << " x " << Tk;
    }
  }
}

}  // namespace
}  // namespace attnviz
