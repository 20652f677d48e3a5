// The attribution figure: a labelled matrix of signed values in diverging colours (0 at the
// centre), with axis titles, a colour bar, a title and captions, laid out in pixels and drawn on
// a white page.
#include "attnviz/render/attribution_figure.h"

#include "attnviz/render/colormap.h"
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

std::string cellText(float v) {
  char buf[32];
  const float a = std::fabs(v);
  std::snprintf(buf, sizeof buf, a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : "%.2f", double(v));
  std::string s = buf;
  if (s == "-0.00" || s == "-0.0" || s == "-0") s.erase(0, 1);
  return s;
}

std::string tickText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

}  // namespace

Image renderAttributionFigure(const AttributionFigure& f) {
  if (f.rows < 1 || f.cols < 1 || f.values.size() != std::size_t(f.rows) * std::size_t(f.cols)) {
    throw InputError("attribution figure: " + std::to_string(f.values.size()) + " values for a " +
                     std::to_string(f.rows) + " x " + std::to_string(f.cols) + " matrix");
  }
  float range = f.range;
  if (!(range > 0.0f)) {
    range = 0.0f;
    for (float v : f.values)
      if (std::isfinite(v)) range = std::max(range, std::fabs(v));
    if (!(range > 0.0f)) range = 1.0f;
  }
  int cell = f.cell;
  if (cell <= 0) cell = std::clamp(std::min(720 / f.cols, 540 / f.rows), 6, 48);
  if ((long long)cell * f.cols > f.maxSide || (long long)cell * f.rows > f.maxSide) {
    throw UsageError("the figure would be " + std::to_string((long long)cell * f.cols) + " x " +
                     std::to_string((long long)cell * f.rows) + " pixels of cells; the limit is " +
                     std::to_string(f.maxSide) + " a side");
  }

  Font font = f.fontPath.empty() ? Font() : Font(std::vector<std::string>{f.fontPath});
  const float fsTitle = 17.0f, fsAxis = 14.0f, fsLabel = 12.5f, fsTick = 12.0f;
  const int pad = 16, gap = 6, barW = 14, tickLen = 4;
  const float fsNumber = std::min(12.0f, float(cell) * 0.3f);

  auto label = [](const std::vector<std::string>& v, int i) {
    return i < int(v.size()) ? v[std::size_t(i)] : std::to_string(i);
  };
  const int labelLine = font.lineHeight(fsLabel);
  // Every k-th label, so that neighbours never overlap.
  long rowLabelW = 0, colLabelW = 0;
  for (int r = 0; r < f.rows; ++r)
    rowLabelW = std::max<long>(
        rowLabelW, long(std::ceil(font.measure(fit(font, label(f.rowLabels, r)), fsLabel))));
  for (int c = 0; c < f.cols; ++c)
    colLabelW = std::max<long>(
        colLabelW, long(std::ceil(font.measure(fit(font, label(f.colLabels, c)), fsLabel))));
  const int rowStep = std::max(1, int(std::ceil(labelLine * 1.05 / cell)));
  const int colStep = std::max(1, int(std::ceil(double(colLabelW + gap) / cell)));

  const TextMask title = f.title.empty() ? TextMask{} : font.render(fit(font, f.title), fsTitle);
  const TextMask rowTitle = font.render(fit(font, f.rowTitle), fsAxis);
  const TextMask colTitle = font.render(fit(font, f.colTitle), fsAxis);
  const TextMask barTitle =
      f.valueTitle.empty() ? TextMask{} : font.render(fit(font, f.valueTitle), fsTick);
  std::vector<TextMask> captions;
  for (const std::string& c : f.captions) captions.push_back(font.render(fit(font, c), fsTick));

  // Ticks of the colour bar: -range, -range/2, 0, range/2, range.
  const double ticks[] = {-range, -range / 2, 0.0, range / 2, range};
  long tickW = 0;
  for (double v : ticks)
    tickW = std::max<long>(tickW, long(std::ceil(font.measure(fit(font, tickText(v)), fsTick))));

  const long gw = long(cell) * f.cols, gh = long(cell) * f.rows;
  const long barH = std::max<long>(gh, 160);
  const long gridX = pad + rowTitle.height + gap * 2 + rowLabelW + gap;
  const long topH = (title.height ? title.height + gap * 2 : 0) +
                    std::max<long>(barTitle.height ? barTitle.height + gap : 0, gap);
  const long gridY = pad + topH;
  const long barX = gridX + gw + pad;
  const long right = barX + barW + tickLen + gap + tickW + pad;
  const long belowGrid = gridY + gh + gap + labelLine + gap + colTitle.height;
  long bottom = std::max(belowGrid, gridY + barH + long(fsTick)) + gap;
  long capW = 0;
  for (const TextMask& c : captions) capW = std::max<long>(capW, c.width);
  const long captionsY = bottom + gap;
  for (const TextMask& c : captions) bottom += c.height + gap;
  const long W = std::max(
      {right, long(title.width) + 2L * pad, capW + 2L * pad, gridX + long(colTitle.width) + pad});
  const long H = bottom + pad;
  // The pixels, and with f.vector the same operations recorded for SVG and PDF.
  paint::FigureCanvas canvas(W, H, f.maxSide, f.vector, font);
  Image& im = canvas.im;
  std::shared_ptr<VectorFigure>& vec = canvas.vec;
  paint::Painter& p = canvas.painter();
  if (title.height) figureText(p, title, (W - title.width) / 2, pad, kInk);

  // Cells, with their values where they fit.
  ValueMapping map;
  map.lo = -range, map.hi = range;
  for (int r = 0; r < f.rows; ++r)
    for (int c = 0; c < f.cols; ++c) {
      const float v = f.values[std::size_t(r) * f.cols + c];
      const RGBA8 col = std::isnan(v) ? kNotComputedColor
                        : !std::isfinite(v)
                            ? kNonFiniteColor
                            : colormapLookup(ColormapId::Diverging, mapValue(map, v));
      const long x = gridX + long(c) * cell, y = gridY + long(r) * cell;
      p.rect(x, y, cell, cell, col);
      if (f.numbers && std::isfinite(v) && fsNumber >= 8.0f) {
        const TextMask m = font.render(cellText(v), fsNumber);
        if (m.width <= cell - 4 && m.height <= cell - 2) {
          const double lum = 0.299 * col.r + 0.587 * col.g + 0.114 * col.b;
          figureText(p, m, x + (cell - m.width) / 2, y + (cell - m.height) / 2,
                     lum < 135 ? RGBA8{255, 255, 255, 255} : kInk);
        }
      }
    }
  p.frame(gridX, gridY, gw, gh, kLine);

  // Row labels (right-aligned, centred on their rows) and the turned row title.
  for (int r = 0; r < f.rows; r += rowStep) {
    const TextMask m = font.render(fit(font, label(f.rowLabels, r)), fsLabel);
    figureText(p, m, gridX - gap - m.width, gridY + long(r) * cell + (cell - m.height) / 2,
               kSoftInk);
  }
  if (rowTitle.width <= gh + 2 * labelLine) {
    figureText(p, rowTitle, pad, gridY + (gh - rowTitle.width) / 2, kInk, true);
  } else {
    figureText(p, rowTitle, pad, gridY, kInk, true);
  }
  // Column labels under the grid, and the column title under them.
  for (int c = 0; c < f.cols; c += colStep) {
    const TextMask m = font.render(fit(font, label(f.colLabels, c)), fsLabel);
    figureText(p, m, gridX + long(c) * cell + (cell - m.width) / 2, gridY + gh + gap, kSoftInk);
  }
  figureText(p, colTitle, gridX + (gw - colTitle.width) / 2, gridY + gh + gap + labelLine + gap,
             kInk);

  // The colour bar: high at the top.
  for (long k = 0; k < barH; ++k) {
    const float t = barH > 1 ? 1.0f - float(k) / float(barH - 1) : 0.5f;
    p.rect(barX, gridY + k, barW, 1, colormapLookup(ColormapId::Diverging, t));
  }
  p.frame(barX, gridY, barW, barH, kLine);
  if (barTitle.height) figureText(p, barTitle, barX, gridY - gap - barTitle.height, kInk);
  for (double v : ticks) {
    const long y = gridY + std::lround((range - v) / (2.0 * range) * double(barH - 1));
    p.rect(barX + barW, y, tickLen, 1, kLine);
    const TextMask m = font.render(fit(font, tickText(v)), fsTick);
    figureText(p, m, barX + barW + tickLen + gap, y - m.height / 2, kSoftInk);
  }

  long y = captionsY;
  for (const TextMask& c : captions) {
    figureText(p, c, pad, y, kSoftInk);
    y += c.height + gap;
  }
  im.heatX = int(gridX), im.heatY = int(gridY), im.cellPx = cell;
  if (f.vector) {
    vec->width = im.width, vec->height = im.height;
    vec->cells = long(f.rows) * f.cols;
    im.vector = std::move(vec);
  }
  return std::move(im);
}

}  // namespace attnviz
