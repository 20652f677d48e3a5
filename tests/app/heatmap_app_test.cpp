// App tests of the heatmap of a scene: the causal mask's colours, the temperature, selecting,
// hovering, the level of detail zoomed out, exporting from the app, the row sums of a softmax over
// the wrong axis, the GPU backend against the CPU, and broken scenes reported.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "app_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

using namespace attnviz::apptest;

namespace {

TEST(AppCausal, CellsAboveTheDiagonalHaveTheMaskedColourAndTheDiagonalDoesNot) {
  const Shot s = runApp("causal", "--scene " + scene("03-causal-triangle.json"));
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, 13);
  ASSERT_EQ(s.g.cols, 13);
  ASSERT_GE(s.g.cell, 8.0f) << "cells too small to test at this window size";
  for (int i = 0; i < s.g.rows; ++i) {
    for (int j = 0; j < s.g.cols; ++j) {
      const RGBA8 c = s.cell(i, j);
      if (j > i) {
        EXPECT_TRUE(isMasked(c)) << "cell (" << i << ", " << j << ") above the diagonal is "
                                 << int(c.r) << "," << int(c.g) << "," << int(c.b);
      } else {
        EXPECT_FALSE(isMasked(c)) << "allowed cell (" << i << ", " << j << ") looks masked";
        EXPECT_GE(tableIndex(attnviz::ColormapId::Viridis, c), 0)
            << "allowed cell (" << i << ", " << j << ") is not a viridis colour";
      }
    }
  }
  // Row 0 sees only key 0, so its weight there is exactly 1: the top of the table.
  EXPECT_EQ(tableIndex(attnviz::ColormapId::Viridis, s.cell(0, 0)), 255);
}

// Spread of colormap indices along row i (max - min), every cell a viridis colour.
int rowSpread(const Shot& s, int i) {
  int lo = 256, hi = -1;
  for (int j = 0; j < s.g.cols; ++j) {
    const int k = tableIndex(attnviz::ColormapId::Viridis, s.cell(i, j));
    EXPECT_GE(k, 0) << "cell (" << i << ", " << j << ") is not a viridis colour";
    lo = std::min(lo, k);
    hi = std::max(hi, k);
  }
  return hi - lo;
}

TEST(AppTemperature, RaisingTheTemperatureFlattensARow) {
  const Shot cold =
      runApp("cold", "--scene " + scene("06-temperature.json") + " --temperature 0.05");
  const Shot hot = runApp("hot", "--scene " + scene("06-temperature.json") + " --temperature 20");
  ASSERT_RAN(cold);
  ASSERT_RAN(hot);
  ASSERT_EQ(cold.g.cols, hot.g.cols);
  const int row = 6;
  const int spreadCold = rowSpread(cold, row), spreadHot = rowSpread(hot, row);
  // Near argmax one key takes almost everything; near uniform every key gets about 1/T.
  EXPECT_GE(spreadCold, 200) << "at tau = 0.05 the row should be close to one-hot";
  EXPECT_LE(spreadHot, 16) << "at tau = 20 the row should be close to uniform";
}

TEST(AppSelection, SelectingARowHighlightsIt) {
  const RGBA8 highlight{255, 170, 30, 255};
  const Shot plain = runApp("unselected", "--scene " + scene("03-causal-triangle.json"));
  const Shot sel =
      runApp("selected", "--scene " + scene("03-causal-triangle.json") + " --select-row 5");
  ASSERT_RAN(plain);
  ASSERT_RAN(sel);
  // The outline runs along the top edge of row 5, across the matrix.
  const int rowTop = int(std::floor(sel.g.y0 + 5 * sel.g.cell));
  auto edgeHasHighlight = [&](const Shot& s) {
    int hits = 0;
    for (int x = int(s.g.x0) + 4; x < int(s.g.x0 + s.g.w) - 4; x += 7) {
      bool found = false;
      for (int y = rowTop - 3; y <= rowTop + 1 && !found; ++y)
        found = near(s.pixel(x, y), highlight, 24);
      hits += found ? 1 : 0;
    }
    return hits;
  };
  const int samples = int((sel.g.w - 8) / 7);
  EXPECT_GE(edgeHasHighlight(sel), samples - 1) << "row 5 is not outlined";
  EXPECT_EQ(edgeHasHighlight(plain), 0) << "a row is outlined with nothing selected";
}

TEST(AppSelection, ClickingACellSelectsItsRowThroughImGuiInput) {
  const RGBA8 highlight{255, 170, 30, 255};
  const Shot s =
      runApp("click", "--scene " + scene("03-causal-triangle.json") + " --click-cell 7,2", 8);
  ASSERT_RAN(s);
  const int rowTop = int(std::floor(s.g.y0 + 7 * s.g.cell));
  const int x = int(s.g.x0 + s.g.w * 0.5f);
  bool found = false;
  for (int y = rowTop - 3; y <= rowTop + 1 && !found; ++y)
    found = near(s.pixel(x, y), highlight, 24);
  EXPECT_TRUE(found) << "clicking cell (7, 2) did not outline row 7";
}

TEST(AppHover, HoveringACellShowsItsIndicesTokensAndWeights) {
  const Shot s =
      runApp("hover", "--scene " + scene("03-causal-triangle.json") + " --hover-cell 3,2");
  ASSERT_RAN(s);
  // "once upon a time ...": query 3 is "time", key 2 is "a".
  EXPECT_NE(s.out.find("hover: i=3 j=2"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("row i = 3   query 'time'"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("column j = 2   key 'a'"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("weight = "), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("row sum = 1.000000"), std::string::npos) << s.out;
}

TEST(AppHover, HoveringAMaskedCellSaysItIsMaskedWithZeroWeight) {
  const Shot s =
      runApp("hover-masked", "--scene " + scene("03-causal-triangle.json") + " --hover-cell 2,9");
  ASSERT_RAN(s);
  EXPECT_NE(s.out.find("hover: i=2 j=9"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("logit = -inf (masked)"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("weight = 0.000000"), std::string::npos) << s.out;
}

TEST(AppLevelOfDetail, ZoomedOutAStrongKeyIsNotAveragedAway) {
  // 1500 tokens in about 600 pixels: each pixel covers 2-3 cells along each axis. Head 1 of the
  // default scene is the first-token archetype: nearly all weight on key 0, a one-cell column.
  const Shot s = runApp("lod", "--tokens 1500 --head 1 --heads 2", 6);
  ASSERT_RAN(s);
  ASSERT_LT(s.g.cell, 0.6f) << "not zoomed out";
  int bright = 0, rows = 0;
  const int x = int(s.g.x0);  // the pixel column holding key 0
  for (int y = int(s.g.y0) + 2; y < int(s.g.y0 + s.g.h) - 2; y += 3) {
    const int k = tableIndex(attnviz::ColormapId::Viridis, s.pixel(x, y));
    ++rows;
    bright += k >= 128 ? 1 : 0;
  }
  // An average over 2-3 keys would at most halve the colour index; the max keeps it high.
  EXPECT_GE(bright, rows * 9 / 10) << bright << " of " << rows << " pixel rows show key 0 bright";
}

TEST(AppErrors, ABrokenSceneFileIsReportedInOneLineNamingIt) {
  const std::string bad = tempPath("broken.json");
  std::ofstream(bad) << "{ \"title\": \"x\", \"heads\": ";
  const Shot s = runApp("broken", "--scene " + bad, 2);
  EXPECT_EQ(s.rc, 1) << s.out;
  EXPECT_NE(s.out.find(bad), std::string::npos) << s.out;
  EXPECT_EQ(s.width, 0) << "a screenshot was written despite the error";
}

TEST(AppExport, ExportingFromTheAppWritesALabelledPngAndSaysWhere) {
  const std::string out = tempPath("export.png");
  std::remove(out.c_str());
  const Shot s =
      runApp("export-run", "--scene " + scene("03-causal-triangle.json") + " --export " + out, 3);
  ASSERT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("exported: " + out), std::string::npos) << s.out;
  int w = 0, h = 0, n = 0;
  unsigned char* data = stbi_load(out.c_str(), &w, &h, &n, 4);
  ASSERT_NE(data, nullptr) << "export did not write a PNG";
  stbi_image_free(data);
  // 13 x 13 cells plus labels, title and colour bar: wider and taller than the bare grid.
  EXPECT_GT(w, 13 * 8);
  EXPECT_GT(h, 13 * 8);
}

TEST(AppErrors, ASceneWithNoTokensShowsAnErrorInsteadOfCrashing) {
  const std::string empty = tempPath("empty.json");
  std::ofstream(empty)
      << "{\"title\": \"empty\", \"query_text\": \"   \", \"mode\": \"causal\", \"heads\": 2}";
  const Shot s = runApp("empty", "--scene " + empty, 4);
  EXPECT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("query text has no tokens"), std::string::npos) << s.out;
  EXPECT_GT(s.width, 0) << "the app did not keep running to draw a frame";
}

TEST(AppWrongAxis, RowSumsStopBeingOneWhenTheSoftmaxRunsOverQueries) {
  // The row-sum strip sits 8 px right of the matrix and is 44 px wide; sample near its right
  // edge, clear of the printed sum.
  const RGBA8 good{70, 165, 95, 255};
  const Shot right = runApp("axis-right", "--scene " + scene("03-causal-triangle.json"));
  const Shot wrong =
      runApp("axis-wrong", "--scene " + scene("03-causal-triangle.json") + " --wrong-axis");
  ASSERT_RAN(right);
  ASSERT_RAN(wrong);
  auto strip = [](const Shot& s, int i) {
    return s.pixel(int(s.g.x0 + s.g.w + 8 + 41), int(s.g.y0 + (i + 0.5f) * s.g.cell));
  };
  int rightGood = 0, wrongGood = 0;
  for (int i = 0; i < right.g.rows; ++i) {
    rightGood += strip(right, i) == good ? 1 : 0;
    wrongGood += strip(wrong, i) == good ? 1 : 0;
  }
  EXPECT_EQ(rightGood, right.g.rows) << "every row of a softmax over keys sums to 1";
  // Over queries, only a row whose sum happens to land on 1 stays green; most do not.
  EXPECT_LE(wrongGood, 2) << "rows still sum to 1 with the softmax over the wrong axis";
}

TEST(AppBackends, TheGpuBackendOnTheWindowsContextAgreesWithTheCpuInTheTooltip) {
  const std::string args =
      "--scene " + scene("07-sliding-window.json") + " --hover-cell 9,7 --temperature 0.7";
  const Shot gpu = runApp("backend-gpu", args + " --backend gpu");
  const Shot cpu = runApp("backend-cpu", args + " --backend cpu");
  ASSERT_RAN(gpu);
  ASSERT_RAN(cpu);
  EXPECT_NE(gpu.out.find("backend: GPU"), std::string::npos) << gpu.out;
  EXPECT_NE(cpu.out.find("backend: CPU"), std::string::npos) << cpu.out;
  const double wg = numberAfter(gpu.out, "weight = "), wc = numberAfter(cpu.out, "weight = ");
  const double sg = numberAfter(gpu.out,
                                "scaled score q\xc2\xb7k/\xe2\x88\x9a"
                                "d = "),
               sc = numberAfter(cpu.out,
                                "scaled score q\xc2\xb7k/\xe2\x88\x9a"
                                "d = ");
  ASSERT_FALSE(std::isnan(wg)) << gpu.out;
  ASSERT_FALSE(std::isnan(wc)) << cpu.out;
  EXPECT_GT(wc, 0.0) << "the hovered cell should be inside the window";
  EXPECT_NEAR(wg, wc, 1e-5 + 1e-4 * std::fabs(wc));
  EXPECT_NEAR(sg, sc, 1e-3 + 1e-4 * std::fabs(sc));
}

}  // namespace
