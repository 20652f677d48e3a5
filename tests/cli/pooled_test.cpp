// Max-pooled labelled exports: too many tokens for a pixel each within --width, so one pixel
// shows the MAX over a block of cells. The heatmap is found by its frame in the decoded PNG, the
// block size is derived from its width, and every pixel is compared with the max over its block
// computed here from the double-precision reference (tests/reference.h) or from hand-made data.
#include "export_util.h"

#include "attnviz/formats/npy.h"
#include "reference.h"

#include <limits>

namespace attnviz::exporttest {
namespace {

constexpr RGBA8 kFrame{40, 40, 40, 255};  // the 1-pixel outline around every heatmap

// The heatmap inside the longest horizontal run of frame pixels (its top edge): the run starts
// one pixel left of the heatmap and ends one right of it; the left edge runs down its height.
struct Heat {
  int x = 0, y = 0, w = 0, h = 0;
};
Heat findFramedHeatmap(const Image& img) {
  int bestLen = 0, bx = 0, by = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width;) {
      int e = x;
      while (e < img.width && img.pixel(e, y) == kFrame) ++e;
      if (e - x > bestLen) bestLen = e - x, bx = x, by = y;
      x = std::max(e, x + 1);
    }
  Heat h;
  h.x = bx + 1, h.y = by + 1, h.w = bestLen - 2;
  int y = h.y;
  while (y < img.height && img.pixel(bx, y) == kFrame) ++y;
  h.h = y - h.y - 1;  // the run ends on the bottom edge
  return h;
}

// The block size per pixel along an axis of T cells drawn as n pixels: ceil(T / n), and n must
// be exactly what that block size gives (ceil(T / f)).
int blockFor(int T, int n) {
  const int f = (T + n - 1) / n;
  EXPECT_EQ((T + f - 1) / f, n) << T << " cells cannot make " << n << " equal blocks";
  return f;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Q, K, V for one head of T tokens (d = 4): random, except that every query's first component
// is positive and key `strong` has a large first component, so it wins every row it can see.
struct StrongKey {
  Tensor3 q, k, v;
  std::vector<std::string> args;
};
StrongKey strongKeyInputs(const TempDir& dir, int T, int strong) {
  StrongKey s{ref::randomTensor(1, T, 4, 71),
              ref::randomTensor(1, T, 4, 72),
              ref::randomTensor(1, T, 4, 73),
              {}};
  for (int i = 0; i < T; ++i) s.q.at(0, i, 0) = 1.0f + std::fabs(s.q.at(0, i, 0));
  s.k.at(0, strong, 0) = 40.0f;
  saveNpy(dir / "q.npy", s.q);
  saveNpy(dir / "k.npy", s.k);
  saveNpy(dir / "v.npy", s.v);
  s.args = {"--q", dir / "q.npy", "--k", dir / "k.npy", "--v", dir / "v.npy"};
  return s;
}

// Every pixel of the pooled heatmap against the max of the reference weights over its block;
// masked only when the whole block is. Returns the number of masked pixels.
int expectPooledWeights(const Image& img, const Heat& hm, const ref::Result& want, int fk, int fq) {
  int masked = 0, bad = 0;
  for (int py = 0; py < hm.h; ++py)
    for (int px = 0; px < hm.w; ++px) {
      double mx = -1;
      for (int i = py * fq; i < std::min(want.Tq, (py + 1) * fq); ++i)
        for (int j = px * fk; j < std::min(want.Tk, (px + 1) * fk); ++j)
          if (!std::isinf(want.l(0, i, j))) mx = std::max(mx, want.w(0, i, j));
      const RGBA8 got = img.pixel(hm.x + px, hm.y + py);
      const bool ok = mx < 0
                          ? got == kMaskedColor
                          : oneOf(got, colorsFor(ColormapId::Viridis, mx)) && got != kMaskedColor;
      masked += mx < 0;
      if (!ok && ++bad <= 5) ADD_FAILURE() << "pixel (" << px << ", " << py << ") max " << mx;
    }
  EXPECT_EQ(bad, 0);
  return masked;
}

TEST(CliExportPooled, ThreeThousandTokensFitTheWidthAndOneStrongKeyIsABrightColumn) {
  TempDir dir;
  const int T = 3000, strong = 1777;
  const StrongKey in = strongKeyInputs(dir, T, strong);
  const CliRun r =
      runExport(in.args + std::vector<std::string>{"--width", "1200", "--png", dir / "p.png"}, dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "p.png");
  EXPECT_LE(img.width, 1200);
  EXPECT_GT(img.width, 900);
  const Heat hm = findFramedHeatmap(img);
  // Pooled: fewer pixels than tokens, the same blocks both ways for a square matrix.
  ASSERT_GT(hm.w, 500);
  ASSERT_LT(hm.w, T);
  EXPECT_EQ(hm.w, hm.h);
  const int fk = blockFor(T, hm.w), fq = blockFor(T, hm.h);
  ASSERT_GE(fk, 2);

  const ref::Result want = ref::attention(in.q, in.k, in.v, AttentionParams{});
  expectPooledWeights(img, hm, want, fk, fq);

  // The strong key's column shows each block's row max (about 1), not the block average
  // (about 1 / fk); its neighbours stay dark.
  const int col = strong / fk;
  for (int py = 0; py < hm.h; py += 97) {
    double rowMax = 0, mean = 0;
    int n = 0;
    for (int i = py * fq; i < std::min(T, (py + 1) * fq); ++i)
      for (int j = col * fk; j < std::min(T, (col + 1) * fk); ++j, ++n) {
        rowMax = std::max(rowMax, want.w(0, i, j));
        mean += want.w(0, i, j);
      }
    mean /= n;
    ASSERT_GT(rowMax, 0.99);
    const RGBA8 got = img.pixel(hm.x + col, hm.y + py);
    EXPECT_TRUE(oneOf(got, colorsFor(ColormapId::Viridis, rowMax))) << "row block " << py;
    EXPECT_FALSE(oneOf(got, colorsFor(ColormapId::Viridis, mean))) << "row block " << py;
    EXPECT_EQ(img.pixel(hm.x + col - 1, hm.y + py), colormapLookup(ColormapId::Viridis, 0.0f));
    EXPECT_EQ(img.pixel(hm.x + col + 1, hm.y + py), colormapLookup(ColormapId::Viridis, 0.0f));
  }
}

TEST(CliExportPooled, CausalPixelIsMaskedOnlyWhenEveryCellItCoversIsMasked) {
  TempDir dir;
  const int T = 3000;
  const StrongKey in = strongKeyInputs(dir, T, 5);
  const CliRun r = runExport(in.args + std::vector<std::string>{"--mask", "causal", "--width",
                                                                "1200", "--png", dir / "c.png"},
                             dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "c.png");
  EXPECT_LE(img.width, 1200);
  const Heat hm = findFramedHeatmap(img);
  ASSERT_LT(hm.w, T);
  const int fk = blockFor(T, hm.w), fq = blockFor(T, hm.h);
  AttentionParams p;
  p.mask.causal = true;
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  const int masked = expectPooledWeights(img, hm, want, fk, fq);
  EXPECT_GT(masked, hm.w * hm.h / 3);
  // Well above the diagonal: every cell masked. On it: the block holds allowed cells.
  EXPECT_EQ(img.pixel(hm.x + hm.w - 10, hm.y + 10), kMaskedColor);
  EXPECT_EQ(img.pixel(hm.x + hm.w / 2 + 20, hm.y + hm.h / 2 - 20), kMaskedColor);
  for (int k = 0; k < std::min(hm.w, hm.h); k += 50)
    EXPECT_NE(img.pixel(hm.x + k, hm.y + k), kMaskedColor) << "diagonal pixel " << k;
}

TEST(CliExportPooled, DecodeRowOfFourThousandKeysFitsTheWidthWithTallerCells) {
  TempDir dir;
  const Tensor3 q = ref::randomTensor(1, 1, 8, 5), k = ref::randomTensor(1, 4096, 8, 6),
                v = ref::randomTensor(1, 4096, 8, 7);
  saveNpy(dir / "q.npy", q);
  saveNpy(dir / "k.npy", k);
  saveNpy(dir / "v.npy", v);
  const CliRun r = runExport(
      {"--q", dir / "q.npy", "--k", dir / "k.npy", "--v", dir / "v.npy", "--png", dir / "d.png"},
      dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "d.png");
  EXPECT_LE(img.width, 1200);  // the default --width
  const Heat hm = findFramedHeatmap(img);
  const int fk = blockFor(4096, hm.w);
  ASSERT_GE(fk, 2);
  EXPECT_GT(hm.h, 4);  // the one query is a strip, not a hairline
  const ref::Result want = ref::attention(q, k, v, AttentionParams{});
  for (int px = 0; px < hm.w; ++px) {
    double mx = 0;
    for (int j = px * fk; j < std::min(4096, (px + 1) * fk); ++j)
      mx = std::max(mx, want.w(0, 0, j));
    for (int y : {0, hm.h / 2, hm.h - 1})
      ASSERT_TRUE(oneOf(img.pixel(hm.x + px, hm.y + y), colorsFor(ColormapId::Viridis, mx)))
          << "pixel " << px << ", " << y;
  }
}

// --- renderExport directly, with hand-made logits --------------------------------------------

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(RenderPooled, ScoresShowTheLargestFiniteLogitAndMaskedOnlyWhenTheWholeBlockIs) {
  const int Tq = 6, Tk = 5000;
  Tensor3 l(1, Tq, Tk, 0.0f), w(1, Tq, Tk, 0.1f);
  for (int i = 0; i < Tq; ++i) {
    for (int j = 2000; j < 3000; ++j) l.at(0, i, j) = kNegInf;  // a masked band
    l.at(0, i, 3000) = 0.5f;  // just past it: allowed, in a block that may start masked
  }
  l.at(0, 2, 100) = 3.0f;    // the largest |logit|: the top of the scale
  l.at(0, 3, 4000) = -2.5f;  // a strong negative among zeros: the pixel shows 0
  l.at(0, 4, 4500) = std::numeric_limits<float>::quiet_NaN();
  ExportData e;
  e.weights = &w;
  e.logits = &l;
  ExportOptions o;
  o.stage = ExportStage::Scores;
  o.colormap = ColormapId::Diverging;
  o.targetWidth = 1000;
  const Image img = renderExport(e, o);
  EXPECT_LE(img.width, 1000);
  const Heat hm = findFramedHeatmap(img);
  const int fk = blockFor(Tk, hm.w);
  ASSERT_GE(fk, 2);
  const int rowPx = hm.h / Tq;  // queries are not pooled: Tq rows of rowPx pixels
  ASSERT_EQ(rowPx * Tq, hm.h);
  const auto at = [&](int j, int i) { return img.pixel(hm.x + j / fk, hm.y + i * rowPx); };
  const RGBA8 top = colormapLookup(ColormapId::Diverging, 1.0f);
  const RGBA8 mid = colormapLookup(ColormapId::Diverging, 0.5f);
  EXPECT_EQ(at(100, 2), top);
  EXPECT_EQ(at(100, 1), mid);
  EXPECT_EQ(at(4000, 3), mid);  // max(-2.5, 0, ...) = 0, not the extreme
  EXPECT_EQ(at(4500, 4), kNonFiniteColor);
  EXPECT_EQ(at(4500, 3), mid);
  // Blocks wholly inside [2000, 3000) are masked; the block holding key 3000 is not, nor is
  // the one holding key 1999.
  for (int j = (2000 + fk - 1) / fk * fk; j + fk <= 3000; j += fk)
    ASSERT_EQ(at(j, 0), kMaskedColor) << "key " << j;
  EXPECT_NE(at(3000, 0), kMaskedColor);
  EXPECT_NE(at(1999, 0), kMaskedColor);
}

TEST(RenderPooled, EveryHeadGridOfLongSequencesStaysWithinTheWidth) {
  const int T = 1500;
  Tensor3 w(2, T, T, 0.0f), l(2, T, T, 0.0f);
  w.at(0, 10, 1000) = 1.0f;
  w.at(1, 1400, 20) = 1.0f;
  ExportData e;
  e.weights = &w;
  e.logits = &l;
  ExportOptions o;
  o.head = -1;
  o.targetWidth = 1200;
  const Image img = renderExport(e, o);
  EXPECT_LE(img.width, 1200);
  // Both single strong cells survive pooling: the brightest colour appears exactly twice.
  const RGBA8 top = colormapLookup(ColormapId::Viridis, 1.0f);
  int hot = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) hot += img.pixel(x, y) == top;
  // The colour bar's top end is the same colour: count only pixels outside it by requiring a
  // dark left neighbour (the bar is a solid gradient block).
  int isolated = 0;
  const RGBA8 low = colormapLookup(ColormapId::Viridis, 0.0f);
  for (int y = 1; y + 1 < img.height; ++y)
    for (int x = 1; x + 1 < img.width; ++x)
      isolated += img.pixel(x, y) == top && img.pixel(x - 1, y) == low &&
                  img.pixel(x + 1, y) == low && img.pixel(x, y - 1) == low &&
                  img.pixel(x, y + 1) == low;
  EXPECT_GT(hot, 2);
  EXPECT_EQ(isolated, 2);
}

}  // namespace
}  // namespace attnviz::exporttest
