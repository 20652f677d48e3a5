// The heatmap's level of detail: level L of the pyramid must hold, for every texel, the max
// over the 2^L x 2^L block of cells it stands for (clipped at the matrix edge), computed here
// naively from level 0.
#include "gui/heatmap_renderer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace {

using attnviz::gui::maxPyramid;

float naiveBlockMax(const std::vector<float>& m, int cols, int rows, int level, int tx, int ty) {
  const int b = 1 << level;
  float best = -std::numeric_limits<float>::infinity();
  for (int y = ty * b; y < std::min(rows, (ty + 1) * b); ++y)
    for (int x = tx * b; x < std::min(cols, (tx + 1) * b); ++x)
      best = std::max(best, m[std::size_t(y) * cols + x]);
  return best;
}

TEST(MaxPyramid, EveryLevelHoldsTheMaxOfItsBlockForOddShapes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (auto [cols, rows] :
       {std::pair{37, 23}, std::pair{1, 9}, std::pair{64, 1}, std::pair{129, 130}}) {
    std::vector<float> m(std::size_t(cols) * rows);
    for (float& v : m) v = u(rng) < 0.3f ? -std::numeric_limits<float>::infinity() : u(rng);
    const auto levels = maxPyramid(m, cols, rows);
    int w = cols, h = rows;
    for (std::size_t l = 0; l < levels.size(); ++l) {
      ASSERT_EQ(levels[l].size(), std::size_t(w) * h) << "level " << l;
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          ASSERT_EQ(levels[l][std::size_t(y) * w + x], naiveBlockMax(m, cols, rows, int(l), x, y))
              << cols << "x" << rows << " level " << l << " texel " << x << "," << y;
      if (w == 1 && h == 1) {
        EXPECT_EQ(l + 1, levels.size()) << "the pyramid ends at 1x1";
      }
      w = (w + 1) / 2;
      h = (h + 1) / 2;
    }
    EXPECT_EQ(levels.back().size(), 1u);
  }
}

TEST(MaxPyramid, ABlockIsMaskedOnlyWhenAllOfItIsAndNaNIsNeverHidden) {
  const float inf = std::numeric_limits<float>::infinity();
  // 4 x 2: the left 2x2 block is all masked, the right one has one allowed zero weight.
  const std::vector<float> m = {-inf, -inf, -inf, 0.0f,  //
                                -inf, -inf, -inf, -inf};
  const auto levels = maxPyramid(m, 4, 2);
  ASSERT_GE(levels.size(), 2u);
  EXPECT_EQ(levels[1][0], -inf);
  EXPECT_EQ(levels[1][1], 0.0f);
  const std::vector<float> n = {0.5f, std::nanf(""), 0.25f, 1.0f};
  const auto ln = maxPyramid(n, 2, 2);
  EXPECT_TRUE(std::isnan(ln.back()[0])) << "a NaN must reach the top so it shows as non-finite";
}

TEST(MaxPyramid, ReusedLevelBuffersHoldOnlyTheNewMatrixAfterAShapeChange) {
  // The renderer keeps its level buffers between uploads: a larger matrix first, then a
  // smaller one of another shape, must leave exactly the smaller one's block maxima.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<std::vector<float>> upper;
  for (auto [cols, rows] :
       {std::pair{67, 45}, std::pair{9, 20}, std::pair{1, 1}, std::pair{3, 2}}) {
    std::vector<float> m(std::size_t(cols) * rows);
    for (float& v : m) v = u(rng) < 0.2f ? -std::numeric_limits<float>::infinity() : u(rng);
    attnviz::gui::maxPyramidLevels(m.data(), cols, rows, upper);
    int w = cols, h = rows, levels = 1;
    while (w > 1 || h > 1) w = (w + 1) / 2, h = (h + 1) / 2, ++levels;
    ASSERT_EQ(upper.size(), std::size_t(levels - 1)) << cols << "x" << rows;
    w = cols, h = rows;
    for (std::size_t l = 0; l < upper.size(); ++l) {
      w = (w + 1) / 2;
      h = (h + 1) / 2;
      ASSERT_EQ(upper[l].size(), std::size_t(w) * h) << cols << "x" << rows << " level " << l + 1;
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          ASSERT_EQ(upper[l][std::size_t(y) * w + x],
                    naiveBlockMax(m, cols, rows, int(l + 1), x, y))
              << cols << "x" << rows << " level " << l + 1 << " texel " << x << "," << y;
    }
  }
}

}  // namespace
