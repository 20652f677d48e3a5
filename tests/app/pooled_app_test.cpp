// App tests of long contexts: the pooled view against the materialised one, its row inspector,
// and T = 32768 within a bounded memory.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "app_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace attnviz::apptest;

namespace {

// ---- long contexts: the pooled view -----------------------------------------------------------

// The pixels of the heatmap rectangle of two runs laid out alike: how many differ.
int heatmapPixelsDiffering(const Shot& a, const Shot& b, int& distinctColours) {
  int differ = 0;
  std::vector<std::uint32_t> seen;
  for (int y = int(a.g.y0); y < int(a.g.y0 + a.g.h); ++y)
    for (int x = int(a.g.x0); x < int(a.g.x0 + a.g.w); ++x) {
      const RGBA8 p = a.pixel(x, y), q = b.pixel(x, y);
      differ += !(p == q);
      const std::uint32_t key = (std::uint32_t(p.r) << 16) | (std::uint32_t(p.g) << 8) | p.b;
      if (seen.size() < 64 && std::find(seen.begin(), seen.end(), key) == seen.end())
        seen.push_back(key);
    }
  distinctColours = int(seen.size());
  return differ;
}

// T = 4096, where both fit: the pooled view forced on draws exactly the materialised view's
// pixels, at zoom 1 (the coarse level) and zoomed in (a refined tile), head 1 (first-token: a
// one-cell column a max-pool must keep).
TEST(AppPooled, AtT4096ThePooledViewDrawsTheMaterialisedPixels) {
  for (const std::string view : {"", " --zoom 3 --pan 1500,0"}) {
    SCOPED_TRACE(view.empty() ? "zoom 1" : view);
    const std::string args = "--tokens 4096 --heads 2 --head 1" + view;
    const Shot full = runApp("pooled-off", args + " --pooled off", 4);
    const Shot pooled = runApp("pooled-on", args + " --pooled on", 4);
    ASSERT_RAN(full);
    ASSERT_RAN(pooled);
    EXPECT_EQ(full.out.find("pooled:"), std::string::npos) << full.out;
    ASSERT_NE(pooled.out.find("pooled: pool="), std::string::npos) << pooled.out;
    EXPECT_NE(pooled.out.find("exact=1"), std::string::npos) << pooled.out;
    // Zoom 1 is the coarse level (4 x 4 cells a texel); zoomed in, a refined tile.
    const int pool = std::atoi(pooled.out.c_str() + pooled.out.find("pooled: pool=") + 13);
    EXPECT_EQ(pool == 4, view.empty()) << pooled.out;
    ASSERT_EQ(pooled.g.rows, 4096);
    ASSERT_EQ(pooled.g.x0, full.g.x0);
    ASSERT_EQ(pooled.g.y0, full.g.y0);
    ASSERT_EQ(pooled.g.w, full.g.w);
    ASSERT_EQ(pooled.g.h, full.g.h);
    ASSERT_EQ(pooled.g.cell, full.g.cell);
    ASSERT_EQ(pooled.g.panX, full.g.panX);
    int colours = 0;
    EXPECT_EQ(heatmapPixelsDiffering(pooled, full, colours), 0);
    EXPECT_GE(colours, 8) << "the heatmap is nearly uniform: nothing was compared";
  }
}

// The row inspector in pooled mode shows the selected query's row, computed on its own, and it
// is the row the materialised engine gives (top key and weight, sum, entropy, allowed keys); on
// the previous-token head (head 0) the top key is the previous token.
TEST(AppPooled, TheRowInspectorShowsTheSelectedRowWithoutTheMatrix) {
  for (const int head : {0, 4}) {
    SCOPED_TRACE("head " + std::to_string(head));
    const std::string args = "--tokens 1500 --head " + std::to_string(head) + " --select-row 1000";
    const Shot pooled = runApp("row-pooled", args + " --pooled on", 4);
    const Shot full = runApp("row-full", args + " --pooled off", 4);
    ASSERT_RAN(pooled);
    ASSERT_RAN(full);
    ASSERT_NE(pooled.out.find("pooled: pool="), std::string::npos) << pooled.out;
    InspectedRow p, f;
    ASSERT_TRUE(parseInspectedRow(pooled.out, p)) << pooled.out;
    ASSERT_TRUE(parseInspectedRow(full.out, f)) << full.out;
    EXPECT_EQ(p.pooled, 1);
    EXPECT_EQ(f.pooled, 0);
    EXPECT_EQ(p.row, 1000);
    EXPECT_EQ(p.head, head);
    EXPECT_EQ(p.topKey, f.topKey);
    EXPECT_EQ(p.allowed, 1001) << "causal: keys 0..1000";
    EXPECT_EQ(p.allowed, f.allowed);
    EXPECT_EQ(p.fullyMasked, 0);
    EXPECT_NEAR(p.topWeight, f.topWeight, 1e-5);
    EXPECT_NEAR(p.sum, 1.0, 1e-5);
    EXPECT_NEAR(p.entropy, f.entropy, 1e-4);
    if (head == 0) {
      EXPECT_EQ(p.topKey, 999) << "the previous-token head";
    }
  }
}

// T = 32768 (4 GiB of scores a head): the GUI opens in pooled mode within a bounded memory,
// draws the causal triangle with the previous-token diagonal at zoom 1, and refines to one
// token a cell when zoomed in, with the tooltip naming what a pixel covers.
TEST(AppPooled, T32768OpensPooledDrawsTheTriangleAndRefinesWhenZoomed) {
  const Shot s = runApp("pooled-32k", "--tokens 32768 --heads 2 --hover-cell 100,50", 4);
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, 32768);
  ASSERT_NE(s.out.find("pooled: pool=32 exact=1"), std::string::npos) << s.out;
  long rss = 0;
  const auto at = s.out.find("peak_rss_mb=");
  ASSERT_NE(at, std::string::npos);
  rss = std::atol(s.out.c_str() + at + 12);
  EXPECT_LT(rss, 1024) << "peak RSS " << rss << " MB";
  // Above the diagonal masked, below allowed (viridis), the diagonal bright.
  int masked = 0, allowed = 0, brightDiagonal = 0, samples = 0;
  for (int k = 6; k < 17; ++k) {  // below the tooltip, which sits near the top-left corner
    const float f = k / 20.0f;
    const int x = int(s.g.x0 + f * s.g.w), y = int(s.g.y0 + f * s.g.h);
    masked += isMasked(s.pixel(x + int(0.1f * s.g.w), y));
    allowed += tableIndex(attnviz::ColormapId::Viridis, s.pixel(x, y + int(0.1f * s.g.h))) >= 0;
    brightDiagonal += tableIndex(attnviz::ColormapId::Viridis, s.pixel(x, y)) >= 200;
    ++samples;
  }
  EXPECT_EQ(masked, samples);
  EXPECT_EQ(allowed, samples);
  EXPECT_GE(brightDiagonal, samples * 8 / 10);
  // The hovered pixel's tooltip names the 32 x 32 block of queries and keys it pools.
  const auto hover = s.out.find("hover: i=");
  ASSERT_NE(hover, std::string::npos) << s.out;
  int i = -1, j = -1, a = -1, b = -1, n = -1, c = -1, e = -1;
  ASSERT_EQ(std::sscanf(s.out.c_str() + hover,
                        "hover: i=%d j=%d | queries i = %d..%d (%d rows) | keys j = %d..%d", &i,
                        &j, &a, &b, &n, &c, &e),
            7)
      << s.out;
  EXPECT_TRUE(a % 32 == 0 && b == a + 31 && n == 32 && a <= i && i <= b) << s.out;
  EXPECT_TRUE(c % 32 == 0 && e == c + 31 && c <= j && j <= e) << s.out;

  const Shot z = runApp("pooled-32k-zoom",
                        "--tokens 32768 --heads 2 --zoom 1500 --pan 20000,19990 "
                        "--hover-cell 20005,20004",
                        4);
  ASSERT_RAN(z);
  ASSERT_NE(z.out.find("pooled: pool=1 exact=1"), std::string::npos) << z.out;
  ASSERT_GE(z.g.cell, 16.0f);
  EXPECT_NE(z.out.find("hover: i=20005 j=20004 | row i = 20005"), std::string::npos) << z.out;
  // One token a cell: masked above the diagonal, the previous key bright (head 0).
  EXPECT_TRUE(isMasked(z.cell(20003, 20010)));  // above the tooltip
  EXPECT_GE(tableIndex(attnviz::ColormapId::Viridis, z.cell(20005, 20004)), 128);
}

}  // namespace
