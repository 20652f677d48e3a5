// `attnviz export` through the real binary with no display: the PNG is decoded and compared with
// the double-precision reference of the attention convention (tests/reference.h).
#include "export_util.h"

#include "attnviz/formats/npy.h"
#include "reference.h"

namespace attnviz::exporttest {
namespace {

struct Inputs {
  Tensor3 q, k, v;
  std::string qPath, kPath, vPath;
};

Inputs writeInputs(const TempDir& dir, int H, int Tq, int Tk, int d, std::uint32_t seed) {
  Inputs in{ref::randomTensor(H, Tq, d, seed),
            ref::randomTensor(H, Tk, d, seed + 1),
            ref::randomTensor(H, Tk, d, seed + 2),
            dir / "q.npy",
            dir / "k.npy",
            dir / "v.npy"};
  saveNpy(in.qPath, in.q);
  saveNpy(in.kPath, in.k);
  saveNpy(in.vPath, in.v);
  return in;
}

std::vector<std::string> qkv(const Inputs& in) {
  return {"--q", in.qPath, "--k", in.kPath, "--v", in.vPath};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

AttentionParams causal() {
  AttentionParams p;
  p.mask.causal = true;
  return p;
}

void bareCausalCase(const std::string& backend) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 2, 7, 7, 8, 11);
  const CliRun r = runExport(
      qkv(in) + std::vector<std::string>{"--mask", "causal", "--head", "1", "--bare", "--cell", "6",
                                         "--backend", backend, "--png", dir / "a.png"},
      dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "a.png");
  ASSERT_EQ(img.width, 7 * 6);
  ASSERT_EQ(img.height, 7 * 6);
  const ref::Result want = ref::attention(in.q, in.k, in.v, causal());
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 7; ++j) {
      const RGBA8 got = img.pixel(j * 6 + 3, i * 6 + 3);
      if (j > i)
        EXPECT_EQ(got, kMaskedColor) << "cell (" << i << ", " << j << ")";
      else
        EXPECT_TRUE(oneOf(got, colorsFor(ColormapId::Viridis, want.w(1, i, j))))
            << "cell (" << i << ", " << j << ")";
    }
  // The asymmetry that fixes the orientation: query 0 sees only key 0 (weight 1, top-left), the
  // top-right cell is masked, the bottom-left one is not.
  EXPECT_EQ(img.pixel(3, 3), colormapLookup(ColormapId::Viridis, 1.0f));
  EXPECT_EQ(img.pixel(6 * 6 + 3, 3), kMaskedColor);
  EXPECT_NE(img.pixel(3, 6 * 6 + 3), kMaskedColor);
}

TEST(CliExportBare, CausalRowZeroIsAtTheTopAndEveryCellMatchesTheReference) {
  bareCausalCase("cpu");
}

#ifdef ATTNVIZ_EXPORT_TEST_GPU
// The GPU engine on a headless EGL context (Mesa llvmpipe without a GPU): no skipping.
TEST(CliExportBare, GpuBackendGivesTheSameCellsHeadless) { bareCausalCase("gpu"); }
#endif

TEST(CliExportBare, CrossShapeIsExactlyTkCellsWideAndTqCellsTall) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, 5, 12, 4, 3);
  const CliRun r = runExport(
      qkv(in) + std::vector<std::string>{"--bare", "--cell", "4", "--png", dir / "a.png"}, dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "a.png");
  EXPECT_EQ(img.width, 12 * 4);
  EXPECT_EQ(img.height, 5 * 4);
  const ref::Result want = ref::attention(in.q, in.k, in.v, AttentionParams{});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 12; ++j)
      EXPECT_TRUE(
          oneOf(img.pixel(j * 4 + 2, i * 4 + 2), colorsFor(ColormapId::Viridis, want.w(0, i, j))));
}

TEST(CliExportBare, ScoresAreLogitsOnADivergingScaleWithMaskedCellsApart) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, 6, 9, 8, 5);
  const CliRun r = runExport(
      qkv(in) + std::vector<std::string>{"--mask", "window:3", "--temperature", "0.7", "--stage",
                                         "scores", "--bare", "--cell", "5", "--png", dir / "s.png"},
      dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "s.png");
  ASSERT_EQ(img.width, 45);
  ASSERT_EQ(img.height, 30);
  AttentionParams p;
  p.mask.window = 3;
  p.temperature = 0.7f;
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  double m = 0;
  for (double l : want.logits)
    if (std::isfinite(l)) m = std::max(m, std::fabs(l));
  int masked = 0;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 9; ++j) {
      const RGBA8 got = img.pixel(j * 5 + 2, i * 5 + 2);
      const double l = want.l(0, i, j);
      if (std::isinf(l)) {
        ++masked;
        EXPECT_EQ(got, kMaskedColor);
      } else {
        EXPECT_TRUE(oneOf(got, colorsFor(ColormapId::Diverging, (l + m) / (2 * m))))
            << i << "," << j;
      }
    }
  EXPECT_GT(masked, 0);
}

// Locates the heatmap of head h by the reference colours and checks the margins around it.
void expectLabelled(const Image& img, const ref::Result& want, int h, int cell) {
  const std::vector<Pos> at =
      findHeatmaps(img, want.Tq, want.Tk, cell, [&](int i, int j, const RGBA8& c) {
        if (std::isinf(want.l(h, i, j))) return c == kMaskedColor || c == kMaskedHatchColor;
        return oneOf(c, colorsFor(ColormapId::Viridis, want.w(h, i, j)));
      });
  ASSERT_EQ(at.size(), 1u) << "heatmap of head " << h << " not found exactly once";
  const int x0 = at[0].x, y0 = at[0].y, w = want.Tk * cell, hh = want.Tq * cell;
  EXPECT_GT(inkIn(img, 0, y0, x0 - 2, y0 + hh), 20) << "no query labels";
  EXPECT_GT(inkIn(img, x0, y0 - 40, x0 + w, y0 - 2), 20) << "no key labels";
  EXPECT_GT(inkIn(img, 0, 0, img.width, y0 - 40), 20) << "no title";
  EXPECT_GT(inkIn(img, x0 + w + 2, 0, img.width, img.height) +
                inkIn(img, 0, y0 + hh + 2, img.width, img.height),
            200)
      << "no colour bar";
}

void labelledCase(int Tq, int Tk, const std::vector<std::string>& extra, const AttentionParams& p) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, Tq, Tk, 8, 21);
  const CliRun r = runExport(
      qkv(in) + extra + std::vector<std::string>{"--cell", "18", "--png", dir / "l.png"}, dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "l.png");
  ASSERT_GT(img.width, 0);
  expectLabelled(img, ref::attention(in.q, in.k, in.v, p), 0, 18);
}

TEST(CliExportLabelled, SquareCausalHasHeatmapLabelsAndColourBar) {
  labelledCase(9, 9, {"--mask", "causal"}, causal());
}

TEST(CliExportLabelled, CrossFiveByTwelveHasHeatmapLabelsAndColourBar) {
  labelledCase(5, 12, {}, AttentionParams{});
}

TEST(CliExportLabelled, DecodeOneRowHasHeatmapLabelsAndColourBar) {
  labelledCase(1, 14, {"--mask", "causal"}, causal());
}

TEST(CliExportGrid, HeadAllDrawsOnePanelPerHead) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 3, 6, 6, 8, 31);
  const CliRun r =
      runExport(qkv(in) + std::vector<std::string>{"--mask", "causal", "--head", "all", "--cell",
                                                   "14", "--png", dir / "g.png"},
                dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "g.png");
  const ref::Result want = ref::attention(in.q, in.k, in.v, causal());
  for (int h = 0; h < 3; ++h) expectLabelled(img, want, h, 14);
}

TEST(CliExportScene, SceneWithTokensExportsWithinTheTargetWidth) {
  TempDir dir;
  {
    std::ofstream(dir / "s.json") << R"({"query_text": "Le chat \u00e9tait l\u00e0",
      "key_text": "The cat was there today", "mode": "cross", "heads": 4})";
  }
  const CliRun r = runExport(
      {"--scene", dir / "s.json", "--head", "all", "--width", "1000", "--png", dir / "s.png"}, dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(dir / "s.png");
  EXPECT_LE(img.width, 1000);
  EXPECT_GT(img.width, 800);
}

// --- refusals -------------------------------------------------------------------------------

struct Refusal {
  int code;
  std::string err;
};

Refusal refuse(const std::vector<std::string>& args, const TempDir& dir) {
  const CliRun r = runExport(args, dir);
  EXPECT_EQ(lineCount(r.err), 1) << "stderr: " << r.err;
  return {r.exitCode, r.err};
}

TEST(CliExportErrors, UnknownColormapIsBadUsage) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, 3, 3, 4, 1);
  const Refusal f = refuse(
      qkv(in) + std::vector<std::string>{"--colormap", "rainbow", "--png", dir / "x.png"}, dir);
  EXPECT_EQ(f.code, 2);
  EXPECT_NE(f.err.find("rainbow"), std::string::npos) << f.err;
}

TEST(CliExportErrors, HeadOutOfRangeIsBadUsage) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 2, 3, 3, 4, 1);
  Refusal f =
      refuse(qkv(in) + std::vector<std::string>{"--head", "2", "--png", dir / "x.png"}, dir);
  EXPECT_EQ(f.code, 2);
  EXPECT_NE(f.err.find("head"), std::string::npos) << f.err;
  f = refuse(qkv(in) + std::vector<std::string>{"--head", "first", "--png", dir / "x.png"}, dir);
  EXPECT_EQ(f.code, 2);
}

TEST(CliExportErrors, UnwritablePathIsBadInputNamingThePath) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, 3, 3, 4, 1);
  const std::string bad = dir / "no-such-folder/x.png";
  const Refusal f = refuse(qkv(in) + std::vector<std::string>{"--png", bad}, dir);
  EXPECT_EQ(f.code, 1);
  EXPECT_NE(f.err.find(bad), std::string::npos) << f.err;
}

TEST(CliExportErrors, OversizeImageIsRefusedWithTheLimit) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, 4, 8, 4, 1);
  const Refusal f = refuse(
      qkv(in) + std::vector<std::string>{"--bare", "--cell", "3000", "--png", dir / "x.png"}, dir);
  EXPECT_EQ(f.code, 2);
  EXPECT_NE(f.err.find("16384"), std::string::npos) << f.err;
}

TEST(CliExportErrors, MissingInputFileIsBadInputNamingTheFile) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, 3, 3, 4, 1);
  const std::string missing = dir / "missing.npy";
  const Refusal f =
      refuse({"--q", missing, "--k", in.kPath, "--v", in.vPath, "--png", dir / "x.png"}, dir);
  EXPECT_EQ(f.code, 1);
  EXPECT_NE(f.err.find("missing.npy"), std::string::npos) << f.err;
}

TEST(CliExportErrors, NoInputsOrNoPngIsBadUsage) {
  TempDir dir;
  EXPECT_EQ(refuse({"--png", dir / "x.png"}, dir).code, 2);
  const Inputs in = writeInputs(dir, 1, 3, 3, 4, 1);
  EXPECT_EQ(refuse(qkv(in), dir).code, 2);
  EXPECT_EQ(
      refuse(qkv(in) + std::vector<std::string>{"--stage", "logits", "--png", dir / "x.png"}, dir)
          .code,
      2);
}

TEST(CliExportErrors, AnExistingFileIsUntouchedByAFailedExportAndReplacedByAGoodOne) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 2, 4, 4, 4, 1);
  const std::string out = dir / "keep.png";
  { std::ofstream(out) << "previous figure"; }
  refuse(qkv(in) + std::vector<std::string>{"--bare", "--cell", "9000", "--png", out}, dir);
  refuse(qkv(in) + std::vector<std::string>{"--head", "7", "--png", out}, dir);
  refuse(qkv(in) + std::vector<std::string>{"--colormap", "nope", "--png", out}, dir);
  EXPECT_EQ(
      refuse(qkv(in) + std::vector<std::string>{"--temperature", "0", "--png", out}, dir).code, 2);
  EXPECT_EQ(
      refuse(qkv(in) + std::vector<std::string>{"--temperature", "nan", "--png", out}, dir).code,
      2);
  EXPECT_EQ(slurp(out), "previous figure");
  const CliRun ok = runExport(qkv(in) + std::vector<std::string>{"--png", out}, dir);
  ASSERT_EQ(ok.exitCode, 0) << ok.err;
  EXPECT_GT(decodePng(out).width, 0);
  // No temp files left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.path().extension() == ".png";
  EXPECT_EQ(files, 1);
}

// --blocks: every tile outlined, inside its cells, in its kind's colour; the kind counted here
// cell by cell with the reference rule. The cells inside the outline keep their colours.
TEST(CliExportBlocks, OverlayOutlinesEachTileInTheColourOfABruteForceKind) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 1, 12, 12, 8, 31);
  const CliRun r = runExport(
      qkv(in) + std::vector<std::string>{"--mask", "causal", "--mask", "chunk:8", "--bare",
                                         "--cell", "4", "--blocks", "4", "--png", dir / "b.png"},
      dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("blocks 4x4: 9 tiles"), std::string::npos) << r.out;
  const Image img = decodePng(dir / "b.png");
  ASSERT_EQ(img.width, 48);
  MaskSpec m;
  m.causal = true;
  m.chunk = 8;
  int kinds[3] = {0, 0, 0};
  for (int tr = 0; tr < 3; ++tr)
    for (int tc = 0; tc < 3; ++tc) {
      int yes = 0;
      for (int i = tr * 4; i < tr * 4 + 4; ++i)
        for (int j = tc * 4; j < tc * 4 + 4; ++j) yes += ref::allowed(m, 0, i, j, 12, 12);
      const BlockKind want = yes == 0    ? BlockKind::Empty
                             : yes == 16 ? BlockKind::Full
                                         : BlockKind::Partial;
      ++kinds[int(want)];
      const int x0 = tc * 16, y0 = tr * 16;
      for (const auto& [x, y] : {std::pair{x0, y0}, std::pair{x0 + 15, y0 + 15},
                                 std::pair{x0 + 7, y0}, std::pair{x0, y0 + 9}})
        EXPECT_EQ(img.pixel(x, y), blockColor(want)) << "tile (" << tr << ", " << tc << ")";
      // The centre of the tile's second cell on the diagonal is a cell colour, not overlay.
      const int i = tr * 4 + 1, j = tc * 4 + 1;
      if (!ref::allowed(m, 0, i, j, 12, 12)) {
        EXPECT_EQ(img.pixel(j * 4 + 2, i * 4 + 2), kMaskedColor) << i << "," << j;
      }
    }
  EXPECT_GT(kinds[int(BlockKind::Empty)], 0);
  EXPECT_GT(kinds[int(BlockKind::Partial)], 0);
  EXPECT_GT(kinds[int(BlockKind::Full)], 0);
}

TEST(CliExportBlocks, LabelledFigureWithOverlayAndNewKinds) {
  TempDir dir;
  const Inputs in = writeInputs(dir, 2, 20, 20, 8, 32);
  const CliRun r = runExport(
      qkv(in) + std::vector<std::string>{"--mask", "doc:0,0,0,0,0,1,1,1,1,1,1,1,2,2,2,2,2,2,2,2",
                                         "--mask-expr", "k <= q", "--softcap", "3", "--head", "all",
                                         "--blocks", "8", "--png", dir / "c.png"},
      dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("blocks 8x8"), std::string::npos) << r.out;
  EXPECT_GT(decodePng(dir / "c.png").width, 0);
}

TEST(CliExportBlocks, BadBlockSizeIsBadUsageBeforeReadingInputs) {
  TempDir dir;
  const CliRun r = runExport({"--q", dir / "missing.npy", "--k", dir / "missing.npy", "--v",
                              dir / "missing.npy", "--blocks", "8x", "--png", dir / "d.png"},
                             dir);
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("--blocks 8x"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace attnviz::exporttest
