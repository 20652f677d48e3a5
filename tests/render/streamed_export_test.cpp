// Long-context export: the streamed figure (weights pooled block by block, never held whole) is
// pixel for pixel the materialised one, at sizes where both fit.
#include "attnviz/formats/npy.h"
#include "attnviz/render/streamed_export.h"
#include "export_util.h"
#include "reference.h"

#include <gtest/gtest.h>

namespace attnviz::exporttest {
namespace {

// Writes seeded Q, K, V ([H, T_q, d], [H, T_k, d], [H, T_k, d]) into dir.
void writeInputs(const TempDir& dir, int H, int Tq, int Tk, int d) {
  saveNpy(dir / "q.npy", ref::randomTensor(H, Tq, d, 1));
  saveNpy(dir / "k.npy", ref::randomTensor(H, Tk, d, 2));
  saveNpy(dir / "v.npy", ref::randomTensor(H, Tk, d, 3));
}

// Runs the same export materialised (a budget no input passes) and streamed (budget 0).
void expectStreamedEqualsMaterialised(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--q",         dir / "q.npy", "--k",
                                   dir / "k.npy", "--v",         dir / "v.npy"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto run = [&](const char* budgetMb, const std::string& png) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--png", png});
    a.insert(a.begin(), "export");
    return testing::runBinary(
        a, dir.path, std::string("env -u DISPLAY ATTNVIZ_EXPORT_STREAM_ABOVE_MB=") + budgetMb);
  };
  const CliRun mat = run("1000000", dir / "materialised.png");
  const CliRun str = run("0", dir / "streamed.png");
  ASSERT_EQ(mat.exitCode, 0) << mat.err;
  ASSERT_EQ(str.exitCode, 0) << str.err;
  EXPECT_EQ(str.err, "") << "no progress bar when stderr is not a terminal";
  EXPECT_NE(str.out.find("wrote "), std::string::npos);
  const Image a = decodePng(dir / "materialised.png"), b = decodePng(dir / "streamed.png");
  ASSERT_GT(a.width, 0);
  ASSERT_EQ(a.width, b.width);
  ASSERT_EQ(a.height, b.height);
  long differ = 0;
  for (int y = 0; y < a.height; ++y)
    for (int x = 0; x < a.width; ++x)
      if (a.pixel(x, y) != b.pixel(x, y) && ++differ <= 5)
        ADD_FAILURE() << "pixel (" << x << ", " << y << ") differs";
  EXPECT_EQ(differ, 0);
}

TEST(CliExportStreamed, CausalT4096MaxPoolEqualsTheMaterialisedFigurePixelForPixel) {
  TempDir dir;
  writeInputs(dir, 1, 4096, 4096, 64);
  expectStreamedEqualsMaterialised(dir, {"--mask", "causal"});
}

TEST(CliExportStreamed, EveryHeadWithWindowSinkAlibiAndFewerQueriesEqualsTheMaterialisedFigure) {
  TempDir dir;
  writeInputs(dir, 2, 2500, 4096, 32);
  expectStreamedEqualsMaterialised(
      dir, {"--head", "all", "--mask", "causal", "--mask", "window:900", "--mask", "sink:4",
            "--alibi", "--temperature", "0.5", "--width", "1600"});
}

TEST(RenderStreamed, PaddedKeysAndAnExplicitBudgetMatchTheMaterialisedRender) {
  const Tensor3 q = ref::randomTensor(1, 700, 16, 4), k = ref::randomTensor(1, 900, 16, 5),
                v = ref::randomTensor(1, 900, 16, 6);
  AttentionParams p;
  p.mask.pad = 100;
  p.mask.prefix = 50;
  p.mask.causal = true;
  ExportOptions opt;
  opt.targetWidth = 500;
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const Tensor3 logits = computeLogits(engine->result().scaled, p);
  ExportData data;
  data.weights = &engine->result().weights;
  data.logits = &logits;
  const Image want = renderExport(data, opt);
  const Image got = renderStreamedExport(q, k, v, p, ExportData{}, opt);
  ASSERT_EQ(got.width, want.width);
  ASSERT_EQ(got.height, want.height);
  EXPECT_TRUE(got.rgba == want.rgba);
  // Only labelled weight figures stream; the budget counts 12 bytes a cell.
  EXPECT_TRUE(exportShouldStream(Dims{1, 700, 900, 16, 16}, opt, 12 * 700 * 900 - 1));
  EXPECT_FALSE(exportShouldStream(Dims{1, 700, 900, 16, 16}, opt, 12 * 700 * 900));
  opt.bare = true;
  EXPECT_FALSE(exportShouldStream(Dims{1, 700, 900, 16, 16}, opt, 0));
  EXPECT_THROW(renderStreamedExport(q, k, v, p, ExportData{}, opt), UsageError);
}

}  // namespace
}  // namespace attnviz::exporttest
