// App tests of the masks: painting a cell with the mouse, the extended mask presets (chunks,
// documents, the blocks overlay, Gemma 2's softcap) and the typed mask expression, each against
// the rule written here.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "app_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace attnviz::apptest;

namespace {

TEST(AppMask, PaintingACellWithTheMouseMasksIt) {
  const Shot before = runApp("paint-before", "--scene " + scene("01-rows-sum-to-one.json"));
  const Shot after =
      runApp("paint-after",
             "--scene " + scene("01-rows-sum-to-one.json") + " --paint --click-cell 6,3", 8);
  ASSERT_RAN(before);
  ASSERT_RAN(after);
  EXPECT_FALSE(isMasked(before.cell(6, 3))) << "self-attention with no mask: nothing is masked";
  EXPECT_TRUE(isMasked(after.cell(6, 3))) << "the painted cell (6, 3) is not drawn masked";
  EXPECT_FALSE(isMasked(after.cell(6, 4))) << "its neighbour was painted too";
  EXPECT_FALSE(isMasked(after.cell(5, 3))) << "its neighbour was painted too";
}

// --- extended mask presets: chunk, documents, expressions, softcap ---------------------------

// Chunked causal (C = 8): a key in an earlier chunk is masked, one in the query's chunk is not.
TEST(AppMaskPresets, LlamaChunkedAttentionMasksEarlierChunks) {
  const Shot s = runApp("chunked", "--scene " + scene("09-llama4-chunked-attention.json"));
  ASSERT_RAN(s);
  for (int i = 0; i < s.g.rows; ++i)
    for (int j = 0; j <= i; ++j) {
      const bool allowed = i / 8 == j / 8;  // the rule, written here
      EXPECT_EQ(isMasked(s.cell(i, j)), !allowed) << "cell (" << i << ", " << j << ")";
    }
}

// Packed documents: the ids in the scene file, the rule doc(i) == doc(j) and j <= i.
TEST(AppMaskPresets, PackedDocumentsKeepEachDocumentToItself) {
  const Shot s = runApp("documents", "--scene " + scene("10-packed-documents.json"));
  ASSERT_RAN(s);
  // Documents end after each "<eos>" token of the scene's text (tokens 7, 17, 30, 35).
  auto doc = [](int t) { return (t > 7) + (t > 17) + (t > 30); };
  for (int i = 0; i < s.g.rows; ++i)
    for (int j = 0; j <= i; ++j)
      EXPECT_EQ(isMasked(s.cell(i, j)), doc(i) != doc(j)) << "cell (" << i << ", " << j << ")";
}

// The blocks overlay: each 32 x 32 tile is outlined in the colour of its kind, counted here from
// the scene's expression (k < 4 || q - k < 24, with causal) cell by cell.
TEST(AppMaskPresets, HowSparseDrawsEachTileInTheColourOfItsBruteForceKind) {
  const Shot s = runApp("blocks", "--scene " + scene("12-how-sparse-is-my-mask.json"));
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, 160);
  const int B = 32, T = 160;
  int kinds[3] = {0, 0, 0};
  for (int r = 0; r < T / B; ++r)
    for (int c = 0; c < T / B; ++c) {
      int yes = 0;
      for (int i = r * B; i < (r + 1) * B; ++i)
        for (int j = c * B; j < (c + 1) * B; ++j) yes += j <= i && (j < 4 || i - j < 24);
      const RGBA8 want = yes == 0       ? attnviz::kBlockEmptyColor
                         : yes == B * B ? attnviz::kBlockFullColor
                                        : attnviz::kBlockPartialColor;
      ++kinds[yes == 0 ? 0 : yes == B * B ? 2 : 1];
      // The middle of the tile's left and top edges: the outline is 2 whole pixels inside the
      // tile, from the pixel its first cell starts in.
      const int x0 = int(std::floor(s.g.x0 + (c * B - s.g.panX) * s.g.cell));
      const int y0 = int(std::floor(s.g.y0 + (r * B - s.g.panY) * s.g.cell));
      const int mid = int(B * s.g.cell * 0.5f);
      const RGBA8 left = s.pixel(x0 + 1, y0 + mid);
      const RGBA8 top = s.pixel(x0 + mid, y0 + 1);
      EXPECT_TRUE(near(left, want, 24))
          << "tile (" << r << ", " << c << ") left edge: " << int(left.r) << "," << int(left.g)
          << "," << int(left.b);
      EXPECT_TRUE(near(top, want, 24)) << "tile (" << r << ", " << c << ") top edge: " << int(top.r)
                                       << "," << int(top.g) << "," << int(top.b);
    }
  EXPECT_GT(kinds[0], 0);  // the test means something: both kinds occur
  EXPECT_GT(kinds[1], 0);
}

// Gemma 2 softcap (c = 20 in the scene): the tooltip's logit is c tanh(s / c) of its scaled score,
// computed here, for a cell whose score is far past the cap.
TEST(AppMaskPresets, GemmaSoftcapSaturatesTheLogitAtTheCap) {
  const Shot s =
      runApp("softcap", "--scene " + scene("11-gemma2-softcap.json") + " --hover-cell 3,2");
  ASSERT_RAN(s);
  // The scene opens on the softcap stage, which comes before the mask: no cell is hatched.
  EXPECT_FALSE(isMasked(s.cell(0, 5)));
  EXPECT_FALSE(isMasked(s.cell(5, 0)));
  const double scaled = numberAfter(s.out,
                                    "scaled score q\xc2\xb7k/\xe2\x88\x9a"
                                    "d = ");
  const double logit = numberAfter(s.out, "logit (s + b)/\xcf\x84 = ");
  ASSERT_FALSE(std::isnan(scaled)) << s.out;
  ASSERT_FALSE(std::isnan(logit)) << s.out;
  EXPECT_GT(std::fabs(scaled), 30.0) << "the test needs a score past the cap";
  EXPECT_NEAR(logit, 20.0 * std::tanh(scaled / 20.0), 1e-3) << s.out;
  EXPECT_LT(std::fabs(logit), 20.0);
}

// The expression field: a good expression applies, a bad one leaves the last good mask.
TEST(AppMaskExpression, ATypedExpressionAppliesAndABadOneKeepsTheLastGoodMask) {
  const Shot good = runApp("expr-good", "--scene " + scene("09-llama4-chunked-attention.json") +
                                            " --type-mask-expr \"(q - k) % 2 == 0\"");
  ASSERT_RAN(good);
  for (int i = 0; i < good.g.rows; ++i)
    for (int j = 0; j <= i; ++j) {
      const bool allowed = i / 8 == j / 8 && (i - j) % 2 == 0;  // chunk:8 + causal + expr
      EXPECT_EQ(isMasked(good.cell(i, j)), !allowed) << "cell (" << i << ", " << j << ")";
    }
  const Shot bad = runApp("expr-bad", "--scene " + scene("09-llama4-chunked-attention.json") +
                                          " --type-mask-expr \"(q - k) % 2 == kk\"");
  ASSERT_RAN(bad);
  for (int i = 0; i < bad.g.rows; ++i)
    for (int j = 0; j <= i; ++j)
      EXPECT_EQ(isMasked(bad.cell(i, j)), i / 8 != j / 8) << "cell (" << i << ", " << j << ")";
}

}  // namespace
