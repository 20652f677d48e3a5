// App tests of the row inspector: it shows the heatmap's row in every stage and mode.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "app_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace attnviz::apptest;

namespace {

// A printed row: "heatmap-row: row=I ... sum=S min=A max=B first=F n=N values=v0,v1,..." (the
// heatmap's row of the selected query) or "row-inspector-values: row=I what=W first=F n=N
// values=..." (what the row inspector showed for it).
struct PrintedRow {
  bool found = false;
  int row = -1, first = -1;
  double sum = NAN, min = NAN, max = NAN;
  std::vector<double> values;
};
PrintedRow parsePrintedRow(const std::string& out, const std::string& tag) {
  PrintedRow r;
  const auto at = out.find(tag + ": ");
  if (at == std::string::npos) return r;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  auto field = [&](const std::string& key) -> const char* {
    const auto k = line.find(" " + key + "=");
    return k == std::string::npos ? nullptr : line.c_str() + k + key.size() + 2;
  };
  if (const char* p = field("row")) r.row = std::atoi(p);
  if (const char* p = field("first")) r.first = std::atoi(p);
  if (const char* p = field("sum")) r.sum = std::strtod(p, nullptr);
  if (const char* p = field("min")) r.min = std::strtod(p, nullptr);
  if (const char* p = field("max")) r.max = std::strtod(p, nullptr);
  const char* p = field("values");
  const char* n = field("n");
  if (!p || !n) return r;
  const int count = std::atoi(n);
  for (int k = 0; k < count; ++k) {
    char* end = nullptr;
    r.values.push_back(std::strtod(p, &end));
    if (end == p) return r;
    p = *end == ',' ? end + 1 : end;
  }
  r.found = true;
  return r;
}

// Whether pixel colour `c` is entry round(t * 255) of colormap `id`, give or take one entry (the
// GPU's float rounding).
bool colourOf(attnviz::ColormapId id, float t, RGBA8 c) {
  const auto& table = attnviz::colormapTable(id);
  const int k = int(std::lround(std::clamp(t, 0.0f, 1.0f) * 255.0f));
  for (int d = -1; d <= 1; ++d) {
    const RGBA8 e = table[std::clamp(k + d, 0, attnviz::kColormapSize - 1)];
    if (e.r == c.r && e.g == c.g && e.b == c.b) return true;
  }
  return false;
}

// One case of the test below: the app's arguments, the cell clicked, and how the heatmap colours
// its values.
struct RowCase {
  const char* name;
  std::string args;
  int row, col;
  bool scores, pooled;
};

void expectInspectorShowsHeatmapRow(const RowCase& c) {
  SCOPED_TRACE(c.name);
  const Shot s = runApp(std::string("row-") + c.name,
                        c.args + " --click-cell " + std::to_string(c.row) + "," +
                            std::to_string(c.col),
                        8);
  ASSERT_RAN(s);
  const PrintedRow heat = parsePrintedRow(s.out, "heatmap-row");
  const PrintedRow shown = parsePrintedRow(s.out, "row-inspector-values");
  ASSERT_TRUE(heat.found) << s.out;
  ASSERT_TRUE(shown.found) << s.out;
  ASSERT_EQ(heat.row, c.row) << "the click did not select the row";
  ASSERT_EQ(shown.row, c.row);
  if (c.pooled) {
    ASSERT_NE(s.out.find("pooled: pool=1 exact=1"), std::string::npos) << s.out;
  }
  // Key by key, over the columns the heatmap's row holds.
  ASSERT_LE(shown.first, heat.first);
  ASSERT_GE(shown.first + int(shown.values.size()), heat.first + int(heat.values.size()));
  int differing = 0, firstDiffering = -1;
  for (std::size_t k = 0; k < heat.values.size(); ++k) {
    const double h = heat.values[k], v = shown.values[k + std::size_t(heat.first - shown.first)];
    const bool same =
        std::isinf(h) ? v == h : std::fabs(v - h) <= 1e-6 * std::max(1.0, std::fabs(h));
    if (!same && differing++ == 0) firstDiffering = int(k) + heat.first;
  }
  EXPECT_EQ(differing, 0) << "the inspector's value of key " << firstDiffering
                          << " is not the heatmap's\n"
                          << s.out;
  // The inspector's summary line: the row's sum (the Σ strip's) and its largest value (the
  // pooled tile holds only the keys on screen; the output stage's row is value dimensions).
  if (!c.pooled && std::string(c.name) != "output") {
    InspectedRow r;
    ASSERT_TRUE(parseInspectedRow(s.out, r)) << s.out;
    int top = -1;
    for (std::size_t k = 0; k < heat.values.size(); ++k)
      if (std::isfinite(heat.values[k]) &&
          (top < 0 || heat.values[k] > heat.values[std::size_t(top)]))
        top = int(k);
    ASSERT_GE(top, 0);
    EXPECT_EQ(r.topKey, top + heat.first);
    EXPECT_NEAR(r.topWeight, heat.values[std::size_t(top)], 1e-5);
    EXPECT_NEAR(r.sum, heat.sum, 1e-4 * std::max(1.0, std::fabs(heat.sum)));
  }
  // The colours on screen are the inspector's values through the heatmap's mapping: weights
  // on [0, 1] in viridis, scores and outputs on [-m, m] in the diverging map, m the largest
  // magnitude shown.
  ASSERT_GE(s.g.cell, 4.0f) << "cells too small to sample";
  const float mag = float(std::max({std::fabs(heat.min), std::fabs(heat.max), 1e-6}));
  int checked = 0, wrong = 0;
  for (std::size_t k = 0; k < heat.values.size(); ++k) {
    const int j = heat.first + int(k);
    if (j < s.g.panX || (j + 1 - s.g.panX) * s.g.cell > s.g.w) continue;  // off screen
    const double v = shown.values[k + std::size_t(heat.first - shown.first)];
    const RGBA8 px = s.cell(c.row, j);
    if (std::isinf(v)) {
      EXPECT_TRUE(isMasked(px)) << "key " << j;
      continue;
    }
    const bool ok = c.scores ? colourOf(attnviz::ColormapId::Diverging,
                                        0.5f + 0.5f * float(v) / mag, px)
                             : colourOf(attnviz::ColormapId::Viridis, float(v), px);
    wrong += ok ? 0 : 1;
    ++checked;
  }
  EXPECT_GE(checked, 3) << "too few cells of the row on screen to compare";
  EXPECT_EQ(wrong, 0) << wrong << " of " << checked << " cells of row " << c.row
                      << " are not the colour of the inspector's value";
}

// The row inspector: click a row, and it shows the numbers the heatmap shows for it, in
// every stage and mode: the inspector's values key by key equal the heatmap's row (the display
// matrix, or the pooled tile on screen), its sum and top key are the row's, and each value's
// colour is the heatmap cell's colour on screen.
TEST(AppRowInspector, TheInspectorShowsTheHeatmapsRowInEveryStageAndMode) {
  const std::string average = tempPath("row-average.json");
  std::ofstream(average) << "{\"title\": \"average\", \"query_text\": \"the cat sat on the mat "
                            "and the dog sat on the cat\", \"mode\": \"causal\", \"heads\": 4, "
                            "\"view\": {\"stage\": \"weights\", \"headAverage\": true}}\n";
  const std::vector<RowCase> cases = {
      {"wrong-axis", "--scene " + scene("02-wrong-axis-softmax.json"), 3, 1, false, false},
      {"softcap", "--scene " + scene("11-gemma2-softcap.json"), 3, 2, true, false},
      {"logits", "--scene " + scene("03-causal-triangle.json") + " --stage logits", 5, 1, true,
       false},
      {"qk", "--scene " + scene("10-packed-documents.json") + " --stage qk", 6, 2, true, false},
      {"output", "--scene " + scene("03-causal-triangle.json") + " --stage output", 4, 0, true,
       false},
      {"head-average", "--scene " + average, 7, 3, false, false},
      {"pooled", "--tokens 4096 --heads 2 --head 1 --pooled on --zoom 64 --pan 2000,1990", 2010,
       2000, false, true},
  };
  for (const RowCase& c : cases) expectInspectorShowsHeatmapRow(c);
}

}  // namespace
