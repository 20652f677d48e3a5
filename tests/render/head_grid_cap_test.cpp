// The layers x heads figure of a large model keeps its SVG and PDF within kVectorMaxCells cells,
// as the heatmap does: 80 layers x 64 heads of 12 x 12 weights drew 737,280 rectangles when the
// panel's 12-pixel floor let every panel keep its 144 cells. Each panel is then a max-pool of
// its weights; one panel's pixels are checked against a naive max over its blocks.
#include "attnviz/render/grid_figure.h"
#include "attnviz/render/vector_figure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace attnviz {
namespace {

TEST(HeadGridCap, EightyLayersOfSixtyFourHeadsStayWithinTheVectorCellCap) {
  const int L = 80, H = 64, T = 12;
  std::vector<Tensor3> rows(L, Tensor3(H, T, T));
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j)  // causal; a different pattern in every panel
          rows[l].at(h, i, j) = j > i ? 0.0f : float(((l * 7 + h * 3 + i * 5 + j) % 11) + 1) / 11.0f;
  HeadGridFigure f;
  for (int l = 0; l < L; ++l) {
    f.rows.push_back(&rows[l]);
    f.rowLabels.push_back("L" + std::to_string(l));
  }
  f.vector = true;
  const Image im = renderHeadGrid(f);
  ASSERT_TRUE(im.vector);
  EXPECT_LE(im.vector->cells, kVectorMaxCells);
  EXPECT_GT(im.vector->cells, kVectorMaxCells / 4);  // pooled no further than the cap needs
  EXPECT_TRUE(im.vector->pooled);
  // Panel (layer 0, head 0) starts at heatX, heatY; its pooled cell (bi, bj) covers a block of
  // f x f weights whose largest value is drawn.
  const int side = int(std::floor(std::sqrt(double(kVectorMaxCells) / double(L * H))));
  const int fct = (T + side - 1) / side, n = (T + fct - 1) / fct;
  ASSERT_GT(im.cellPx, 0);
  for (int bi = 0; bi < n; ++bi)
    for (int bj = 0; bj < n; ++bj) {
      float m = 0.0f;
      for (int i = bi * fct; i < std::min(T, (bi + 1) * fct); ++i)
        for (int j = bj * fct; j < std::min(T, (bj + 1) * fct); ++j) m = std::max(m, rows[0].at(0, i, j));
      const int x = im.heatX + bj * im.cellPx + im.cellPx / 2, y = im.heatY + bi * im.cellPx + im.cellPx / 2;
      const std::size_t at = (std::size_t(y) * im.width + x) * 4;
      const RGBA8 got{im.rgba[at], im.rgba[at + 1], im.rgba[at + 2], im.rgba[at + 3]};
      const RGBA8 want = m == 0.0f ? kMaskedColor : colormapLookup(ColormapId::Viridis, m);
      EXPECT_TRUE(got == want) << "cell " << bi << "," << bj << " max " << m;
    }
}

}  // namespace
}  // namespace attnviz
