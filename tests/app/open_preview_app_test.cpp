// A model's first pass drawn layer by layer: while the model opens, the window draws each layer's
// heatmap and grid row as the pass finishes it, so the first heatmap comes long before the pass
// ends. The slow random LLaMA folder (tests/app/make_slow_llama.py: 8 layers of width 512) on a
// text of about 1000 tokens takes about a second; --report-timing on the model alone draws frames
// while it opens and reports when the first heatmap was drawn, how many layers were done then,
// and writes that heatmap's matrix (--first-heatmap-npy), which must be the pass's own layer 0
// head 0, as `attnviz model --weights` writes it.
#include "run_shell.h"

#include "attnviz/formats/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

using attnviz::testing::runShell;
using attnviz::testing::runUnderXvfb;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;

namespace {

std::string asset(const std::string& rel) { return std::string(ATTNVIZ_SOURCE_DIR) + "/" + rel; }

// About 1000 tokens, within the text box's 4095 bytes (the app's pass runs on the box's text).
std::string longText() {
  std::string text;
  for (int i = 0; i < 70; ++i) text += "In the beginning God created the heaven and the earth. ";
  return text;
}

}  // namespace

TEST(OpenPreviewApp, TheFirstLayersHeatmapIsDrawnBeforeThePassEnds) {
  const std::string dir = ::testing::TempDir() + "attnviz_open_preview_llama";
  const std::string make = ATTNVIZ_PYTHON " " + asset("tests/app/make_slow_llama.py") + " " +
                           asset("assets/models/kjv-sp-llama") + " " + dir;
  ASSERT_EQ(runShell(make).rc, 0) << make;
  const std::string npy = ::testing::TempDir() + "attnviz_open_preview_first.npy";
  const std::string png = ::testing::TempDir() + "attnviz_open_preview.png";
  const std::string text = longText();
  std::remove(npy.c_str());
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x800x24\" " +
                          ATTNVIZ_BIN + " --size 1280x800 --model " + dir + " --text " +
                          shellQuote(text) + " --report-timing --screenshot " + shellQuote(png) +
                          " --first-heatmap-npy " + shellQuote(npy);
  const ShellRun r = runUnderXvfb(cmd);
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto at = r.out.find("timing: open ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto info = r.out.find(": Model::open ", at);
  ASSERT_NE(info, std::string::npos) << r.out;
  double openMs = 0, firstMs = 0, layerMs = 0, gridMs = 0, lastMs = 0, fullMs = 0;
  int layer = -1, head = -1, T = 0, doneThen = 0, layers = 0, frames = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + info,
                        ": Model::open %lf ms; first heatmap (layer %d, head %d, T=%d) drawn %lf "
                        "ms after the open began, %d of %d layers done then (that layer finished "
                        "at %lf ms); the whole layers x heads grid drawn %lf ms (the last layer "
                        "finished at %lf ms); the full view %lf ms; %d frames meanwhile",
                        &openMs, &layer, &head, &T, &firstMs, &doneThen, &layers, &layerMs, &gridMs,
                        &lastMs, &fullMs, &frames),
            12)
      << r.out;
  EXPECT_EQ(layer, 0);
  EXPECT_EQ(head, 0);
  EXPECT_EQ(layers, 8);
  EXPECT_GT(T, 900);
  // Drawn while the pass ran: fewer than all layers done, before the last layer finished, and
  // before the full view.
  EXPECT_LT(doneThen, layers) << r.out;
  EXPECT_LT(firstMs, lastMs) << r.out;
  EXPECT_LT(firstMs, fullMs) << r.out;
  EXPECT_GE(firstMs, layerMs) << r.out;
  EXPECT_GE(gridMs, lastMs) << r.out;
  EXPECT_NE(r.out.find("screenshot: " + png), std::string::npos) << r.out;

  // The matrix drawn is layer 0, head 0 of the pass, as the command line writes it.
  const std::string ref = ::testing::TempDir() + "attnviz_open_preview_ref.npy";
  const ShellRun cli = runShell(std::string(ATTNVIZ_BIN) + " model --model " + dir + " --text " +
                                shellQuote(text) + " --layer 0 --weights " + shellQuote(ref));
  ASSERT_EQ(cli.rc, 0) << cli.out;
  const attnviz::Tensor3 drawn = attnviz::loadTensorNpy(npy);
  const attnviz::Tensor3 want = attnviz::loadTensorNpy(ref);
  ASSERT_EQ(drawn.heads, 1);
  ASSERT_EQ(drawn.rows, want.rows);
  ASSERT_EQ(drawn.cols, want.cols);
  ASSERT_EQ(want.rows, T);
  double worst = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j)
      worst = std::max(worst, double(std::fabs(drawn.at(0, i, j) - want.at(0, i, j))));
  EXPECT_LE(worst, 1e-6) << "the first heatmap is not layer 0 head 0's weights";
}
