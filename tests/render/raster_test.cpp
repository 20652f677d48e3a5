// renderExport and writePng called directly: weights and logits are written by hand here, so the
// expected colour of every cell is known without the engine.
#include "export_util.h"

#include "attnviz/render/font.h"
#include "attnviz/engine/tensor.h"

#include <limits>

namespace attnviz::exporttest {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// [H, Tq, Tk] weights with a distinct, lopsided pattern per head, and logits with -inf where
// the weight is exactly zero and j > i (causal-looking), so masked and zero cells both occur.
struct Hand {
  Tensor3 weights, logits;
};
Hand handMade(int H, int Tq, int Tk) {
  Hand d{Tensor3(H, Tq, Tk), Tensor3(H, Tq, Tk)};
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < Tq; ++i)
      for (int j = 0; j < Tk; ++j) {
        const bool masked = j > i + (Tk - Tq);
        // Values spread over [0, 1], different in every head, row and column.
        const float w = masked ? 0.0f : float((h * 37 + i * 11 + j * 5) % 23) / 22.0f;
        d.weights.at(h, i, j) = w;
        d.logits.at(h, i, j) = masked ? kNegInf : (w - 0.5f) * float(4 + h);
      }
  return d;
}

ExportData dataOf(const Hand& d) {
  ExportData e;
  e.weights = &d.weights;
  e.logits = &d.logits;
  return e;
}

TEST(RenderBare, EveryCellCentreIsTheColormapOfItsWeight) {
  const Hand d = handMade(2, 6, 9);
  ExportOptions o;
  o.bare = true;
  o.cell = 7;
  o.head = 1;
  o.colormap = ColormapId::Magma;
  const Image img = renderExport(dataOf(d), o);
  ASSERT_EQ(img.width, 9 * 7);
  ASSERT_EQ(img.height, 6 * 7);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 9; ++j) {
      const RGBA8 got = img.pixel(j * 7 + 3, i * 7 + 3);
      const RGBA8 want = d.logits.at(1, i, j) == kNegInf
                             ? kMaskedColor
                             : colormapLookup(ColormapId::Magma, d.weights.at(1, i, j));
      EXPECT_EQ(got, want) << "cell (" << i << ", " << j << ")";
    }
}

TEST(RenderBare, EveryPixelOfACellHasTheCellColour) {
  const Hand d = handMade(1, 4, 4);
  ExportOptions o;
  o.bare = true;
  o.cell = 5;
  const Image img = renderExport(dataOf(d), o);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      ASSERT_EQ(img.pixel(x, y), img.pixel((x / 5) * 5 + 2, (y / 5) * 5 + 2)) << x << "," << y;
}

TEST(RenderBare, ScoresMapLinearlyFromMinusToPlusTheLargestFiniteLogit) {
  const Hand d = handMade(2, 5, 5);
  ExportOptions o;
  o.bare = true;
  o.cell = 3;
  o.head = 1;
  o.stage = ExportStage::Scores;
  o.colormap = ColormapId::Diverging;
  const Image img = renderExport(dataOf(d), o);
  double m = 0;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j)
      if (std::isfinite(d.logits.at(1, i, j)))
        m = std::max(m, std::fabs(double(d.logits.at(1, i, j))));
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) {
      const double l = d.logits.at(1, i, j);
      const RGBA8 got = img.pixel(j * 3 + 1, i * 3 + 1);
      if (std::isinf(l))
        EXPECT_EQ(got, kMaskedColor);
      else
        EXPECT_TRUE(oneOf(got, colorsFor(ColormapId::Diverging, (l + m) / (2 * m))))
            << i << "," << j;
    }
}

TEST(RenderBare, EveryHeadAtOnceIsRefusedAsUsage) {
  const Hand d = handMade(2, 3, 3);
  ExportOptions o;
  o.bare = true;
  o.cell = 4;
  o.head = -1;
  EXPECT_THROW(renderExport(dataOf(d), o), UsageError);
}

TEST(RenderLimits, HeadOutOfRangeIsUsageError) {
  const Hand d = handMade(2, 3, 3);
  ExportOptions o;
  o.head = 2;
  EXPECT_THROW(renderExport(dataOf(d), o), UsageError);
  o.head = -2;
  EXPECT_THROW(renderExport(dataOf(d), o), UsageError);
}

TEST(RenderLimits, OversizeCellIsRefusedWithTheLimitInTheMessage) {
  const Hand d = handMade(1, 8, 8);
  for (bool bare : {true, false}) {
    ExportOptions o;
    o.bare = bare;
    o.cell = 2100;  // 8 * 2100 = 16800 > 16384
    try {
      renderExport(dataOf(d), o);
      ADD_FAILURE() << "no refusal (bare " << bare << ")";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("16384"), std::string::npos) << e.what();
    }
  }
}

TEST(RenderLimits, TooManyTokensForAnyCellIsRefusedWhenBareOrExplicitElsePooled) {
  Tensor3 w(1, 1, 20000, 0.5f), l(1, 1, 20000, 0.0f);
  ExportData e;
  e.weights = &w;
  e.logits = &l;
  ExportOptions o;  // auto cell, labelled: max-pooled within the default width
  EXPECT_LE(renderExport(e, o).width, o.targetWidth);
  o.cell = 1;  // exact cells asked for: 20000 px is over the limit
  EXPECT_THROW(renderExport(e, o), UsageError);
  o.cell = 0;
  o.bare = true;  // bare is always at least 1 px a cell
  EXPECT_THROW(renderExport(e, o), UsageError);
}

TEST(RenderLimits, ASmallerLimitIsHonoured) {
  const Hand d = handMade(1, 10, 10);
  ExportOptions o;
  o.bare = true;
  o.cell = 11;
  o.maxSide = 100;
  EXPECT_THROW(renderExport(dataOf(d), o), UsageError);
  o.cell = 10;
  EXPECT_EQ(renderExport(dataOf(d), o).width, 100);
}

// Finds head h of `d` in a labelled image (masked cells may be either hatch colour).
std::vector<Pos> findHead(const Image& img, const Hand& d, int h, int cell, ColormapId id) {
  return findHeatmaps(img, d.weights.rows, d.weights.cols, cell, [&](int i, int j, const RGBA8& c) {
    if (d.logits.at(h, i, j) == kNegInf) return c == kMaskedColor || c == kMaskedHatchColor;
    return oneOf(c, colorsFor(id, d.weights.at(h, i, j)));
  });
}

void expectLabelledLayout(const Hand& d, int h, int cell, const std::string& fontPath) {
  ExportOptions o;
  o.head = h;
  o.cell = cell;
  o.fontPath = fontPath;
  const Image img = renderExport(dataOf(d), o);
  const std::vector<Pos> at = findHead(img, d, h, cell, o.colormap);
  ASSERT_EQ(at.size(), 1u) << "heatmap not found exactly once";
  const int x0 = at[0].x, y0 = at[0].y, w = d.weights.cols * cell, hh = d.weights.rows * cell;
  EXPECT_GT(x0, 10);
  EXPECT_GT(y0, 10);
  // Query labels left of the cells, key labels just above them, the colour bar to the right.
  EXPECT_GT(inkIn(img, 0, y0, x0 - 2, y0 + hh), 20) << "no query labels";
  EXPECT_GT(inkIn(img, x0, y0 - 40, x0 + w, y0 - 2), 20) << "no key labels";
  EXPECT_GT(inkIn(img, 0, 0, img.width, y0 - 40), 20) << "no title";
  bool barTop = false, barBottom = false;
  for (int y = 0; y < img.height; ++y)
    for (int x = x0 + w + 2; x < img.width; ++x) {
      barTop = barTop || img.pixel(x, y) == colormapTable(o.colormap)[255];
      barBottom = barBottom || img.pixel(x, y) == colormapTable(o.colormap)[0];
    }
  // A 1-row decode puts the bar underneath instead.
  if (!barTop || !barBottom) {
    for (int y = y0 + hh + 2; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x) {
        barTop = barTop || img.pixel(x, y) == colormapTable(o.colormap)[255];
        barBottom = barBottom || img.pixel(x, y) == colormapTable(o.colormap)[0];
      }
  }
  EXPECT_TRUE(barTop && barBottom) << "no colour bar";
  // The page outside everything is white.
  EXPECT_TRUE(isWhite(img.pixel(0, 0)));
  EXPECT_TRUE(isWhite(img.pixel(img.width - 1, img.height - 1)));
}

TEST(RenderLabelled, SquareHasCellsLabelsAndColourBarWhereExpected) {
  expectLabelledLayout(handMade(2, 8, 8), 1, 24, "");
}

TEST(RenderLabelled, CrossFiveByTwelveHasTheExpectedLayout) {
  expectLabelledLayout(handMade(1, 5, 12), 0, 30, "");
}

TEST(RenderLabelled, DecodeOneRowHasTheExpectedLayout) {
  expectLabelledLayout(handMade(1, 1, 16), 0, 40, "");
}

TEST(RenderLabelled, MissingFontFallsBackToTheBuiltInStrokeFont) {
  expectLabelledLayout(handMade(1, 6, 6), 0, 24, "/nonexistent/no-such-font.ttf");
}

TEST(RenderLabelled, ManySmallCellsStillRenderWithThinnedLabels) {
  const Hand d = handMade(1, 300, 300);
  ExportOptions o;
  o.cell = 2;
  const Image img = renderExport(dataOf(d), o);
  EXPECT_LT(img.width, 1200);
  const std::vector<Pos> at = findHead(img, d, 0, 2, o.colormap);
  ASSERT_EQ(at.size(), 1u);
  EXPECT_GT(inkIn(img, 0, at[0].y, at[0].x - 2, at[0].y + 600), 50);
}

TEST(RenderLabelled, TargetWidthIsNotExceeded) {
  const Hand d = handMade(1, 7, 13);
  ExportOptions o;
  o.targetWidth = 900;
  const Image img = renderExport(dataOf(d), o);
  EXPECT_LE(img.width, 900);
  EXPECT_GT(img.width, 700);  // and mostly used
}

TEST(RenderLabelled, NoLabelsLeavesTheMarginBesideTheCellsEmpty) {
  const Hand d = handMade(1, 6, 6);
  ExportOptions o;
  o.cell = 20;
  o.labels = false;
  const Image img = renderExport(dataOf(d), o);
  const std::vector<Pos> at = findHead(img, d, 0, 20, o.colormap);
  ASSERT_EQ(at.size(), 1u);
  // Only the 1-pixel frame sits left of the cells.
  EXPECT_EQ(inkIn(img, 0, at[0].y, at[0].x - 1, at[0].y + 120), 0);
}

TEST(RenderBare, NonFiniteWeightsGetTheirOwnColourAndMissingLogitsMeanNoMask) {
  Tensor3 w(1, 2, 2, 0.25f);
  w.at(0, 1, 0) = std::numeric_limits<float>::quiet_NaN();
  ExportData e;
  e.weights = &w;  // no logits: nothing is masked
  ExportOptions o;
  o.bare = true;
  o.cell = 2;
  const Image img = renderExport(e, o);
  EXPECT_EQ(img.pixel(1, 3), kNonFiniteColor);
  EXPECT_EQ(img.pixel(3, 3), colormapLookup(ColormapId::Viridis, 0.25f));
  o.stage = ExportStage::Scores;  // scores need the logits
  EXPECT_THROW(renderExport(e, o), InputError);
}

TEST(RenderGrid, EveryHeadHasItsOwnPanel) {
  const int H = 5;
  const Hand d = handMade(H, 4, 6);
  ExportOptions o;
  o.head = -1;
  o.cell = 12;
  o.gridColumns = 3;
  const Image img = renderExport(dataOf(d), o);
  std::vector<Pos> where;
  for (int h = 0; h < H; ++h) {
    const std::vector<Pos> at = findHead(img, d, h, 12, o.colormap);
    ASSERT_EQ(at.size(), 1u) << "head " << h;
    where.push_back(at[0]);
  }
  // Three panels in the first row, two in the second, in head order.
  EXPECT_EQ(where[0].y, where[1].y);
  EXPECT_EQ(where[1].y, where[2].y);
  EXPECT_LT(where[0].x, where[1].x);
  EXPECT_LT(where[1].x, where[2].x);
  EXPECT_GT(where[3].y, where[0].y + 4 * 12);
  EXPECT_EQ(where[3].x, where[0].x);
  EXPECT_EQ(where[4].x, where[1].x);
}

TEST(WritePng, DecodesToTheSamePixels) {
  TempDir dir;
  Image img;
  img.width = 3, img.height = 2;
  img.rgba = {255, 0, 0, 255, 0,   255, 0,   255, 0, 0, 255, 255,
              1,   2, 3, 255, 250, 251, 252, 255, 9, 8, 7,   255};
  writePng(dir / "a.png", img);
  const Image back = decodePng(dir / "a.png");
  ASSERT_EQ(back.width, 3);
  ASSERT_EQ(back.height, 2);
  EXPECT_EQ(back.rgba, img.rgba);
}

TEST(WritePng, UnwritablePathThrowsInputErrorAndLeavesNoFile) {
  Image img;
  img.width = img.height = 1;
  img.rgba = {0, 0, 0, 255};
  EXPECT_THROW(writePng("/nonexistent-dir/x.png", img), InputError);
  EXPECT_FALSE(fs::exists("/nonexistent-dir/x.png"));
}

TEST(FileName, SaysWhichHeadStageAndSceneWithOnlySafeCharacters) {
  ExportOptions o;
  o.head = 3;
  EXPECT_EQ(defaultExportFileName("Causal demo: \"The cat\" / v2", o),
            "attnviz_causal-demo-the-cat-v2_head3_weights.png");
  o.head = -1;
  o.stage = ExportStage::Scores;
  EXPECT_EQ(defaultExportFileName("", o), "attnviz_all-heads_scores.png");
  o.head = 0;
  o.bare = true;
  EXPECT_EQ(defaultExportFileName("\xC3\xA9t\xC3\xA9", o), "attnviz_t_head0_scores_bare.png");
}

TEST(Text, Utf8DecodesAndReplacesMalformedBytes) {
  EXPECT_EQ(decodeUtf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"),
            (std::u32string{U'a', 0xE9, 0x20AC, 0x1F600}));
  EXPECT_EQ(decodeUtf8("\xFFx"), (std::u32string{0xFFFD, U'x'}));
  EXPECT_EQ(decodeUtf8("\xC3"), (std::u32string{0xFFFD}));
  EXPECT_EQ(decodeUtf8("\xC0\xAF"), (std::u32string{0xFFFD}));  // overlong '/'
}

TEST(Text, BuiltInFontDrawsAsciiWithNoFile) {
  const Font f = Font::builtin();
  EXPECT_TRUE(f.isFallback());
  const TextMask m = f.render("Keys", 16);
  EXPECT_GT(m.width, 16);
  int ink = 0;
  for (auto a : m.alpha) ink += a > 128;
  EXPECT_GT(ink, 20);
}

TEST(Text, SystemFontDrawsNonAsciiGlyphs) {
  const Font f;
  if (f.isFallback()) GTEST_SKIP() << "fontconfig finds no font here";
  EXPECT_TRUE(f.hasGlyph(0xE9));   // é
  EXPECT_TRUE(f.hasGlyph(0x3C4));  // τ
  const TextMask e = f.render("e", 24), eAcute = f.render("\xC3\xA9", 24);
  int inkE = 0, inkAcute = 0;
  for (auto a : e.alpha) inkE += a;
  for (auto a : eAcute.alpha) inkAcute += a;
  EXPECT_GT(inkAcute, inkE);  // the accent adds ink
}

// fontconfig finds a face for a code point the UI face lacks, and the text draws it: the glyph
// differs from the replacement box that a code point no font has (plane 16 private use) draws.
TEST(Text, CjkComesFromAFallbackFaceWhenOneIsInstalled) {
  const Font f;
  const bool required = std::getenv("ATTNVIZ_REQUIRE_CJK_FONT") != nullptr;
  if (f.isFallback() || fontForCodepoint(0x65E5).empty()) {
    if (required) FAIL() << "no system font or no CJK font (apt-get install fonts-droid-fallback)";
    GTEST_SKIP() << "no system font or no CJK font here (fonts-droid-fallback)";
  }
  const FontFile cjk = f.faceFor(0x65E5);  // 日
  ASSERT_FALSE(cjk.empty());
  EXPECT_NE(cjk.path, f.path()) << "the UI face has CJK itself; the fallback is not exercised";
  EXPECT_TRUE(f.hasGlyph(0x65E5));
  EXPECT_FALSE(f.hasGlyph(0x10FFFD));
  const TextMask m = f.render("\xE6\x97\xA5", 24), box = f.render("\xF4\x8F\xBF\xBD", 24);
  int ink = 0;
  for (auto a : m.alpha) ink += a > 128;
  EXPECT_GT(ink, 30);
  EXPECT_NE(m.alpha, box.alpha);
  EXPECT_GT(f.measure("\xE6\x97\xA5", 24), 12.0f);
}

// fontconfig's choice is a real, parseable face, and $ATTNVIZ_FONT replaces it.
TEST(Text, DefaultFontComesFromFontconfigAndTheEnvironmentOverridesIt) {
  const FontFile sans = matchFont("sans-serif");
  if (sans.empty()) GTEST_SKIP() << "fontconfig finds no font here";
  EXPECT_TRUE(fs::exists(sans.path)) << sans.path;
  EXPECT_FALSE(Font({sans}).isFallback());
  const char* old = std::getenv("ATTNVIZ_FONT");
  const std::string saved = old ? old : "";
  setenv("ATTNVIZ_FONT", "none", 1);
  EXPECT_TRUE(Font().isFallback());
  if (old) {
    setenv("ATTNVIZ_FONT", saved.c_str(), 1);
  } else {
    unsetenv("ATTNVIZ_FONT");
  }
}

}  // namespace
}  // namespace attnviz::exporttest
