// The layers x heads figure: a row of small weights heatmaps per attention site, laid out once in
// page pixels and played into the PNG's pixels and, when asked, the SVG and PDF recording.
#include "attnviz/render/grid_figure.h"

#include "attnviz/render/font.h"
#include "attnviz/render/vector_figure.h"
#include "painter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attnviz {

namespace {

constexpr RGBA8 kPaper = paint::kFigurePaper, kInk = paint::kFigureInk,
                kSoftInk = paint::kFigureSoftInk, kLine = paint::kFigureLine;
using paint::figureText;
std::string fit(const Font& font, std::string s) { return paint::fitToFont(font, std::move(s)); }

constexpr RGBA8 kAblated{214, 39, 40, 255};
constexpr RGBA8 kGroupInk{31, 119, 180, 255};

// One head's panel: the row's weights pooled `f` x `f` further, `cell` pixels a pooled cell, at
// most `maxCells` cells a side (so that a figure of many panels stays within kVectorMaxCells
// cells in all: panels are never drawn under 12 pixels, and 12 x 12 cells a panel at 80 x 64
// panels would be 737k rectangles).
struct PanelGrid {
  int f = 1, nq = 0, nk = 0, cell = 1;
};

PanelGrid panelGrid(const Tensor3& w, int px, int maxCells) {
  PanelGrid g;
  const int side = std::max(w.rows, w.cols);
  const int cellsSide = std::max(1, std::min(px, maxCells));
  g.f = std::max(1, (side + cellsSide - 1) / cellsSide);
  g.nq = (w.rows + g.f - 1) / g.f;
  g.nk = (w.cols + g.f - 1) / g.f;
  g.cell = std::max(1, px / std::max(g.nq, g.nk));
  return g;
}

}  // namespace

int headGridPanelPx(long panels) {
  const double side = std::sqrt(double(kVectorMaxCells) / double(std::max(1L, panels)));
  return std::clamp(int(side), 12, 96);
}

Image renderHeadGrid(const HeadGridFigure& f) {
  const int R = int(f.rows.size());
  if (R < 1) throw InputError("layers x heads figure: no rows to draw");
  if (int(f.rowLabels.size()) != R)
    throw InputError("layers x heads figure: " + std::to_string(f.rowLabels.size()) +
                     " row labels for " + std::to_string(R) + " rows");
  if (!f.rowPool.empty() && int(f.rowPool.size()) != R)
    throw InputError("layers x heads figure: " + std::to_string(f.rowPool.size()) +
                     " pooling factors for " + std::to_string(R) + " rows");
  int H = 0;
  long panels = 0;
  for (const Tensor3* t : f.rows) {
    if (!t || t->empty()) throw InputError("layers x heads figure: a row has no weights");
    H = std::max(H, t->heads);
    panels += t->heads;
  }
  const int px = f.panelPx > 0 ? f.panelPx : headGridPanelPx(panels);
  if (px > f.maxSide) throw UsageError("panel size " + std::to_string(px) + " is too large");
  // Cells a panel's side may have: the PNG and the vector figure draw the same cells.
  const int maxCells =
      int(std::floor(std::sqrt(double(kVectorMaxCells) / double(std::max(1L, panels)))));

  Font font = f.fontPath.empty() ? Font() : Font(std::vector<std::string>{f.fontPath});
  const float fsTitle = 17.0f, fsLabel = 12.5f, fsTick = 12.0f;
  const int pad = 16, gap = std::max(2, px / 12), barW = 14, tickLen = 4, tgap = 6;
  const int pitch = px + gap;

  // Head labels every k-th head so that neighbours never overlap.
  long headLabelW = 0;
  for (int h = 0; h < H; ++h)
    headLabelW =
        std::max<long>(headLabelW, long(std::ceil(font.measure("h" + std::to_string(h), fsLabel))));
  const int headStep = std::max(1, int(std::ceil(double(headLabelW + tgap) / pitch)));
  long rowLabelW = 0;
  for (const std::string& l : f.rowLabels)
    rowLabelW = std::max<long>(rowLabelW, long(std::ceil(font.measure(fit(font, l), fsLabel))));
  const int labelLine = font.lineHeight(fsLabel);

  // How the rows were pooled, for the captions.
  int maxPool = 1;
  for (int r = 0; r < R; ++r) {
    const int before = f.rowPool.empty() ? 1 : std::max(1, f.rowPool[std::size_t(r)]);
    maxPool = std::max(maxPool, before * panelGrid(*f.rows[std::size_t(r)], px, maxCells).f);
  }
  std::vector<std::string> captionText;
  if (maxPool > 1)
    captionText.push_back("max-pooled: a cell is the largest weight of up to " +
                          std::to_string(maxPool) + " x " + std::to_string(maxPool) + " tokens");
  bool anyAblated = false;
  for (const auto& row : f.ablated)
    for (char a : row) anyAblated = anyAblated || a;
  if (anyAblated) captionText.push_back("red frame: the head is ablated in this pass");
  for (const std::string& c : f.captions) captionText.push_back(c);

  const TextMask title = f.title.empty() ? TextMask{} : font.render(fit(font, f.title), fsTitle);
  std::vector<TextMask> captions;
  for (const std::string& c : captionText) captions.push_back(font.render(fit(font, c), fsTick));
  const TextMask barTitle = font.render("weight", fsTick);
  const double ticks[] = {0.0, 0.25, 0.5, 0.75, 1.0};
  long tickW = 0;
  char buf[16];
  for (double v : ticks) {
    std::snprintf(buf, sizeof buf, "%g", v);
    tickW = std::max<long>(tickW, long(std::ceil(font.measure(buf, fsTick))));
  }

  const long gridW = long(H) * pitch - gap, gridH = long(R) * pitch - gap;
  const long gridX = pad + rowLabelW + tgap;
  const long groupH = f.kvGroup > 1 ? labelLine + 2 : 0;
  const long titleH = title.height ? title.height + tgap * 2 : 0;
  const long headLabelY = pad + titleH + groupH;
  const long gridY = std::max(headLabelY + labelLine + tgap, pad + titleH + barTitle.height + tgap);
  const long barH = std::max<long>(gridH, 120);
  const long barX = gridX + gridW + pad;
  const long right = barX + barW + tickLen + tgap + tickW + pad;
  long bottom = std::max(gridY + gridH, gridY + barH + long(fsTick) / 2) + tgap;
  long capW = 0;
  for (const TextMask& c : captions) capW = std::max<long>(capW, c.width);
  const long captionsY = bottom + tgap;
  for (const TextMask& c : captions) bottom += c.height + tgap;
  const long W = std::max({right, long(title.width) + 2L * pad, capW + 2L * pad});
  const long Ht = bottom + pad;
  // The pixels, and with f.vector the same operations recorded for SVG and PDF.
  paint::FigureCanvas canvas(W, Ht, f.maxSide, f.vector, font);
  Image& im = canvas.im;
  std::shared_ptr<VectorFigure>& vec = canvas.vec;
  paint::Painter& p = canvas.painter();
  if (title.height) figureText(p, title, (W - title.width) / 2, pad, kInk);

  // Grouped-query attention: "kv g" over the query heads that share KV head g.
  if (f.kvGroup > 1)
    for (int g = 0; g * f.kvGroup < H; ++g) {
      const TextMask m = font.render("kv " + std::to_string(g), fsLabel);
      const long gx = gridX + long(g) * f.kvGroup * pitch;
      const long gw = long(std::min(f.kvGroup, H - g * f.kvGroup)) * pitch - gap;
      if (m.width <= gw + gap) figureText(p, m, gx + (gw - m.width) / 2, pad + titleH, kGroupInk);
      p.rect(gx, pad + titleH + labelLine, gw, 1, kGroupInk);
    }
  for (int h = 0; h < H; h += headStep) {
    const TextMask m = font.render("h" + std::to_string(h), fsLabel);
    figureText(p, m, gridX + long(h) * pitch + (px - m.width) / 2, headLabelY, kSoftInk);
  }

  long cells = 0;
  for (int r = 0; r < R; ++r) {
    const Tensor3& w = *f.rows[std::size_t(r)];
    const long y0 = gridY + long(r) * pitch;
    const TextMask lm = font.render(fit(font, f.rowLabels[std::size_t(r)]), fsLabel);
    figureText(p, lm, gridX - tgap - lm.width, y0 + (px - lm.height) / 2, kSoftInk);
    const PanelGrid g = panelGrid(w, px, maxCells);
    for (int h = 0; h < w.heads; ++h) {
      const long x0 = gridX + long(h) * pitch;
      for (int bi = 0; bi < g.nq; ++bi)
        for (int bj = 0; bj < g.nk; ++bj) {
          const int i1 = std::min(w.rows, (bi + 1) * g.f), j1 = std::min(w.cols, (bj + 1) * g.f);
          float m = 0.0f;
          bool finite = true;
          for (int i = bi * g.f; i < i1; ++i)
            for (int j = bj * g.f; j < j1; ++j) {
              const float v = w.at(h, i, j);
              if (!std::isfinite(v))
                finite = false;
              else
                m = std::max(m, v);
            }
          const RGBA8 c = !finite     ? kNonFiniteColor
                          : m == 0.0f ? kMaskedColor
                                      : colormapLookup(f.colormap, m);
          p.rect(x0 + long(bj) * g.cell, y0 + long(bi) * g.cell, g.cell, g.cell, c);
        }
      cells += long(g.nq) * g.nk;
      const long pw = long(g.nk) * g.cell, ph = long(g.nq) * g.cell;
      const bool ablated = r < int(f.ablated.size()) && h < int(f.ablated[std::size_t(r)].size()) &&
                           f.ablated[std::size_t(r)][std::size_t(h)];
      if (ablated) {
        p.frame(x0, y0, pw, ph, kAblated);
        p.frame(x0 - 1, y0 - 1, pw + 2, ph + 2, kAblated);
      }
    }
  }

  // The colour bar: weights 0 (bottom) to 1 (top).
  for (long k = 0; k < barH; ++k) {
    const float t = barH > 1 ? 1.0f - float(k) / float(barH - 1) : 0.5f;
    p.rect(barX, gridY + k, barW, 1, colormapLookup(f.colormap, t));
  }
  p.frame(barX, gridY, barW, barH, kLine);
  figureText(p, barTitle, barX, gridY - tgap / 2 - barTitle.height, kInk);
  for (double v : ticks) {
    const long y = gridY + std::lround((1.0 - v) * double(barH - 1));
    p.rect(barX + barW, y, tickLen, 1, kLine);
    std::snprintf(buf, sizeof buf, "%g", v);
    const TextMask m = font.render(buf, fsTick);
    figureText(p, m, barX + barW + tickLen + tgap, y - m.height / 2, kSoftInk);
  }

  long y = captionsY;
  for (const TextMask& c : captions) {
    figureText(p, c, pad, y, kSoftInk);
    y += c.height + tgap;
  }
  im.heatX = int(gridX), im.heatY = int(gridY), im.cellPx = panelGrid(*f.rows[0], px, maxCells).cell;
  if (f.vector) {
    vec->width = im.width, vec->height = im.height;
    vec->cells = cells;
    vec->pooled = maxPool > 1;
    im.vector = std::move(vec);
  }
  return std::move(im);
}

}  // namespace attnviz
