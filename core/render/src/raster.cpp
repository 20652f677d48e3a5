// The CPU heatmap rasterizer behind PNG export: cells, token labels, axis titles, a colour bar
// and a title, composed on a white page with no GL and no window.
//
// Layout works in "figure units" with each heatmap's top-left cell at a known origin; every
// element records its box, the union of the boxes gives the page, and only then (after the size
// check) are pixels allocated and drawn.
#include "attnviz/render/raster.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/render/font.h"
#include "attnviz/render/vector_figure.h"
#include "painter.h"

#include <stb_image_write.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <utility>

namespace attnviz {

void fillRect(Image& im, long x, long y, long w, long h, RGBA8 c) {
  const long x0 = std::max(0L, x), y0 = std::max(0L, y);
  const long x1 = std::min<long>(im.width, x + w), y1 = std::min<long>(im.height, y + h);
  for (long yy = y0; yy < y1; ++yy) {
    std::uint8_t* p = im.rgba.data() + (std::size_t(yy) * im.width + x0) * 4;
    for (long xx = x0; xx < x1; ++xx, p += 4) p[0] = c.r, p[1] = c.g, p[2] = c.b, p[3] = 255;
  }
}

void blendPixel(Image& im, long x, long y, RGBA8 c, int alpha) {
  if (alpha <= 0 || x < 0 || y < 0 || x >= im.width || y >= im.height) return;
  std::uint8_t* p = im.rgba.data() + (std::size_t(y) * im.width + x) * 4;
  const int a = std::min(alpha, 255), ia = 255 - a;
  p[0] = std::uint8_t((c.r * a + p[0] * ia + 127) / 255);
  p[1] = std::uint8_t((c.g * a + p[1] * ia + 127) / 255);
  p[2] = std::uint8_t((c.b * a + p[2] * ia + 127) / 255);
  p[3] = 255;
}

namespace paint {

std::string formatTick(double v, double step, const Font& font) {
  int decimals = 0;
  if (step < 1.0) decimals = std::min(6, int(std::ceil(-std::log10(step) - 1e-9)));
  // 2.5-steps need one more digit.
  const double scaled = step * std::pow(10.0, decimals);
  if (std::fabs(scaled - std::round(scaled)) > 1e-6) ++decimals;
  if (std::fabs(v) < step * 1e-6) v = 0.0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v));
  std::string s = buf;
  if (v < 0) s = (font.hasGlyph(0x2212) ? "\xE2\x88\x92" : "-") + s;
  return s;
}

// Ticks at multiples of a 1-2-2.5-5 step, at most about maxCount of them, within [lo, hi].
std::vector<double> niceTicks(double lo, double hi, int maxCount, double& stepOut) {
  maxCount = std::max(2, maxCount);
  const double raw = (hi - lo) / (maxCount - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10;
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (mag * f >= raw * (1 - 1e-9)) {
      step = mag * f;
      break;
    }
  stepOut = step;
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    ticks.push_back(v);
  return ticks;
}

}  // namespace paint

namespace {

using namespace paint;

constexpr RGBA8 kPaper{255, 255, 255, 255};
constexpr RGBA8 kInk{30, 30, 30, 255};      // titles and labels
constexpr RGBA8 kSoftInk{70, 70, 70, 255};  // tick labels
constexpr RGBA8 kLine{40, 40, 40, 255};     // frames and ticks

// ---------------------------------------------------------------------------------------------
// Pixels


// ---------------------------------------------------------------------------------------------
// A list of positioned drawing operations with their bounding box.

struct Box {
  long x0 = LONG_MAX, y0 = LONG_MAX, x1 = LONG_MIN, y1 = LONG_MIN;
  bool empty() const { return x0 > x1; }
  void add(long x, long y, long w, long h) {
    if (w <= 0 || h <= 0) return;
    x0 = std::min(x0, x), y0 = std::min(y0, y);
    x1 = std::max(x1, x + w), y1 = std::max(y1, y + h);
  }
  long width() const { return empty() ? 0 : x1 - x0; }
  long height() const { return empty() ? 0 : y1 - y0; }
};

using DrawFn = std::function<void(Painter&, long ox, long oy)>;

struct Canvas {
  Box box;
  std::vector<DrawFn> ops;
  long heatX = 0, heatY = 0;  // a figure's first heatmap, top-left (buildFigure sets it)

  void op(long x, long y, long w, long h, DrawFn f) {
    box.add(x, y, w, h);
    ops.push_back(std::move(f));
  }
  void rect(long x, long y, long w, long h, RGBA8 c) {
    op(x, y, w, h, [=](Painter& im, long ox, long oy) { im.rect(ox + x, oy + y, w, h, c); });
  }
  void frame(long x, long y, long w, long h, RGBA8 c) {
    op(x - 1, y - 1, w + 2, h + 2,
       [=](Painter& im, long ox, long oy) { im.frame(ox + x, oy + y, w, h, c); });
  }
  void text(const TextMask& m, long x, long y, RGBA8 c, Rot r) {
    const long w = rotW(m, r), h = rotH(m, r);
    op(x, y, w, h,
       [m, x, y, c, r](Painter& im, long ox, long oy) { im.text(m, ox + x, oy + y, c, r); });
  }
  void append(const Canvas& o, long dx, long dy) {
    if (!o.box.empty()) box.add(o.box.x0 + dx, o.box.y0 + dy, o.box.width(), o.box.height());
    for (const DrawFn& f : o.ops)
      ops.push_back([f, dx, dy](Painter& im, long ox, long oy) { f(im, ox + dx, oy + dy); });
  }
};

// ---------------------------------------------------------------------------------------------
// Text helpers

// The built-in font draws ASCII only: spell the few symbols the titles use.
std::string fitText(const Font& font, const std::string& s) {
  static const std::pair<const char*, const char*> subs[] = {
      {"\xC2\xB7", "|"},       {"\xCF\x84", "tau"},   {"\xE2\x88\x92", "-"},
      {"\xE2\x80\xA6", "..."}, {"\xE2\x80\x94", "-"}, {"\xC3\x97", "x"}};
  std::string out = s;
  for (const auto& [from, to] : subs) {
    const char32_t cp = decodeUtf8(from)[0];
    if (font.hasGlyph(cp)) continue;
    for (std::size_t p = out.find(from); p != std::string::npos; p = out.find(from, p + 1))
      out.replace(p, std::char_traits<char>::length(from), to);
  }
  return out;
}

// The first `maxCp` code points of s, with an ellipsis when cut.
std::string truncateLabel(const std::string& s, std::size_t maxCp) {
  std::size_t cps = 0, i = 0;
  while (i < s.size()) {
    if (cps == maxCp) return s.substr(0, i) + "\xE2\x80\xA6";
    const unsigned char c = static_cast<unsigned char>(s[i]);
    i += c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    ++cps;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// The figure

struct Sizes {
  float fs;  // base text size in pixels
  float title, axis, panel, label, tick;
  int pad, gap, tickLen, barW;
};

Sizes sizesFor(float fs) {
  Sizes s{};
  s.fs = fs;
  s.title = fs * 1.2f;
  s.axis = fs * 1.0f;
  s.panel = fs * 0.95f;
  s.label = fs * 0.85f;
  s.tick = fs * 0.8f;
  s.pad = int(std::lround(fs * 1.1f));
  s.gap = std::max(3, int(std::lround(fs * 0.35f)));
  s.tickLen = std::max(3, int(std::lround(fs * 0.3f)));
  s.barW = std::max(10, int(std::lround(fs * 1.1f)));
  return s;
}

struct Source {
  const Tensor3* values;  // what the cells show: weights or logits; null when streamed
  const Tensor3* logits;  // masking; may be null for weights
  ExportStage stage;
  ColormapId cmap;
  float range;  // scores: m of [-m, m]
  int Tq, Tk;
  const std::vector<BlockSparsity>* blocks = nullptr;  // overlay per head, if any
  // Streamed weights: pooled on demand (ExportData::pooled) instead of read from `values`.
  const std::function<PooledWeights(int, int, int)>* pooled = nullptr;
  const FlashOverlay* flash = nullptr;  // the FlashAttention tiles, if any

  bool masked(int h, int i, int j) const {
    return logits && logits->at(h, i, j) == -std::numeric_limits<float>::infinity();
  }
  // A cell of a tile the FlashAttention schedule has not reached: no value yet.
  bool unvisited(int i, int j) const {
    return flash && flash->at(i / flash->blockRows, j / flash->blockKeys) == FlashTile::Unvisited;
  }
  RGBA8 color(int h, int i, int j) const {
    if (unvisited(i, j)) return kFlashUnvisitedColor;
    if (masked(h, i, j)) return kMaskedColor;
    const float v = values->at(h, i, j);
    if (!std::isfinite(v)) return kNonFiniteColor;
    return finiteColor(v);
  }
  RGBA8 finiteColor(float v) const {
    if (stage == ExportStage::Weights) return colormapLookup(cmap, v);
    ValueMapping m;
    m.lo = exportStageFromModel(stage) ? 0.0f : -range, m.hi = range;
    return colormapLookup(cmap, mapValue(m, v));
  }
};

// How cells land on pixels. Exact: square cells of `cell` pixels. Max-pooled: one pixel per
// block of `poolK` keys (cell 1) and, on the query axis, either one pixel per block of `poolQ`
// queries or, when that axis is not pooled, `cellQ` pixels per query. Block x covers keys
// [x * poolK, min((x + 1) * poolK, T_k)), so only the last block of an axis may be short.
struct Grid {
  int cell = 1;  // pixels per key block (and per query block unless cellQ is set)
  int poolK = 1, poolQ = 1;
  int cellQ = 0;  // pixels per query block; 0 = cell
  int rowPx() const { return cellQ > 0 ? cellQ : cell; }
  bool pooled() const { return poolK > 1 || poolQ > 1; }
  long width(int Tk) const { return long((Tk + poolK - 1) / poolK) * cell; }
  long height(int Tq) const { return long((Tq + poolQ - 1) / poolQ) * rowPx(); }
  long keyX(int j) const { return long(j / poolK) * cell; }       // left pixel of key j
  long queryY(int i) const { return long(i / poolQ) * rowPx(); }  // top pixel of query i
  double keyPixels() const { return double(cell) / poolK; }       // pixels per key
  double queryPixels() const { return double(rowPx()) / poolQ; }
  bool operator==(const Grid& o) const {
    return cell == o.cell && poolK == o.poolK && poolQ == o.poolQ && rowPx() == o.rowPx();
  }
};

// Head h max-pooled into one pixel per poolK x poolQ block, top-left at (x, y). A pixel shows the
// largest value among the block's unmasked cells (the strongest weight or logit is never averaged
// away), kNonFiniteColor when any unmasked cell is NaN or infinite, and kMaskedColor only when
// every cell of the block is masked.
DrawFn pooledHeatmapOp(const Source& src, int h, long x, long y, const Grid& g) {
  const int poolK = g.poolK, poolQ = g.poolQ, cw = g.cell, ch = g.rowPx();
  if (src.pooled) {
    // Streamed: the same rule, evaluated block by block by the streaming path.
    return [src, h, x, y, poolK, poolQ, cw, ch](Painter& im, long ox, long oy) {
      const PooledWeights pw = (*src.pooled)(h, poolQ, poolK);
      for (int py = 0; py < pw.height; ++py)
        for (int px = 0; px < pw.width; ++px) {
          const std::size_t n = pw.at(py, px);
          const RGBA8 c = pw.masked[n] ? kMaskedColor : src.finiteColor(pw.max[n]);
          im.rect(ox + x + long(px) * cw, oy + y + long(py) * ch, cw, ch, c);
        }
    };
  }
  return [src, h, x, y, poolK, poolQ, cw, ch](Painter& im, long ox, long oy) {
    const int W = (src.Tk + poolK - 1) / poolK, Hp = (src.Tq + poolQ - 1) / poolQ;
    enum : unsigned char { kNone, kValue, kBad };
    std::vector<float> best(std::size_t(W), 0.0f);
    std::vector<unsigned char> state(std::size_t(W), kNone), sawUnvisited(std::size_t(W), 0);
    for (int py = 0; py < Hp; ++py) {
      std::fill(state.begin(), state.end(), kNone);
      std::fill(sawUnvisited.begin(), sawUnvisited.end(), 0);
      const int i1 = std::min(src.Tq, (py + 1) * poolQ);
      for (int i = py * poolQ; i < i1; ++i)
        for (int px = 0; px < W; ++px) {
          const int j1 = std::min(src.Tk, (px + 1) * poolK);
          float& b = best[std::size_t(px)];
          unsigned char& st = state[std::size_t(px)];
          for (int j = px * poolK; j < j1; ++j) {
            if (src.unvisited(i, j)) {
              sawUnvisited[std::size_t(px)] = 1;
              continue;
            }
            if (src.masked(h, i, j)) continue;
            const float v = src.values->at(h, i, j);
            if (!std::isfinite(v)) {
              st = kBad;
            } else if (st == kNone) {
              b = v, st = kValue;
            } else if (st == kValue && v > b) {
              b = v;
            }
          }
        }
      for (int px = 0; px < W; ++px) {
        const unsigned char st = state[std::size_t(px)];
        const RGBA8 c = st == kNone && sawUnvisited[std::size_t(px)] ? kFlashUnvisitedColor
                        : st == kNone                                ? kMaskedColor
                        : st == kBad                                 ? kNonFiniteColor
                                     : src.finiteColor(best[std::size_t(px)]);
        im.rect(ox + x + long(px) * cw, oy + y + long(py) * ch, cw, ch, c);
      }
    }
  };
}

// The block-sparsity overlay of one head at (x, y): each tile outlined, 1 pixel inside its
// cells, in its kind's colour.
DrawFn blocksOp(const BlockSparsity& b, long x, long y, const Grid& g, int Tq, int Tk) {
  return [b, x, y, g, Tq, Tk](Painter& im, long ox, long oy) {
    for (int r = 0; r < b.tileRows; ++r)
      for (int c = 0; c < b.tileCols; ++c) {
        const int i0 = r * b.size.rows, i1 = std::min(Tq, i0 + b.size.rows);
        const int j0 = c * b.size.cols, j1 = std::min(Tk, j0 + b.size.cols);
        const long x0 = ox + x + g.keyX(j0), x1 = ox + x + g.keyX(j1 - 1) + g.cell;
        const long y0 = oy + y + g.queryY(i0), y1 = oy + y + g.queryY(i1 - 1) + g.rowPx();
        const RGBA8 col = blockColor(b.at(r, c));
        im.rect(x0, y0, x1 - x0, 1, col);
        im.rect(x0, y1 - 1, x1 - x0, 1, col);
        im.rect(x0, y0, 1, y1 - y0, col);
        im.rect(x1 - 1, y0, 1, y1 - y0, col);
      }
  };
}

// The FlashAttention tiles over a heatmap at (x, y): white borders between tiles, an orange cross
// over skipped ones and a 3-pixel crimson outline, inside its cells, around the current tile.
DrawFn flashOp(const FlashOverlay& f, long x, long y, const Grid& g, int Tq, int Tk) {
  return [f, x, y, g, Tq, Tk](Painter& im, long ox, long oy) {
    auto bounds = [&](int r, int c, long& x0, long& y0, long& x1, long& y1) {
      const int i0 = r * f.blockRows, i1 = std::min(Tq, i0 + f.blockRows);
      const int j0 = c * f.blockKeys, j1 = std::min(Tk, j0 + f.blockKeys);
      x0 = ox + x + g.keyX(j0), x1 = ox + x + g.keyX(j1 - 1) + g.cell;
      y0 = oy + y + g.queryY(i0), y1 = oy + y + g.queryY(i1 - 1) + g.rowPx();
    };
    long x0, y0, x1, y1;
    for (int r = 0; r < f.tileRows; ++r)
      for (int c = 0; c < f.tileCols; ++c) {
        bounds(r, c, x0, y0, x1, y1);
        if (c > 0) im.rect(x0, y0, 1, y1 - y0, kFlashGridColor);
        if (r > 0) im.rect(x0, y0, x1 - x0, 1, kFlashGridColor);
        if (f.at(r, c) != FlashTile::Skipped) continue;
        // Both diagonals, two pixels thick where the tile is big enough.
        const long w = x1 - x0, h = y1 - y0, n = std::max(w, h);
        const int thick = std::min(w, h) >= 16 ? 2 : 1;
        for (long k = 0; k < n; ++k) {
          const long px = x0 + k * w / n, py = y0 + k * h / n, qy = y1 - 1 - k * h / n;
          im.rect(px, py, thick, thick, kFlashSkippedColor);
          im.rect(px, qy - thick + 1, thick, thick, kFlashSkippedColor);
        }
      }
    if (f.currentRow >= 0 && f.currentCol >= 0) {
      bounds(f.currentRow, f.currentCol, x0, y0, x1, y1);
      const long t = std::min<long>(3, std::max<long>(1, std::min(x1 - x0, y1 - y0) / 4));
      im.rect(x0, y0, x1 - x0, t, kFlashCurrentColor);
      im.rect(x0, y1 - t, x1 - x0, t, kFlashCurrentColor);
      im.rect(x0, y0, t, y1 - y0, kFlashCurrentColor);
      im.rect(x1 - t, y0, t, y1 - y0, kFlashCurrentColor);
    }
  };
}

// Singular or plural: "1 query", "4 queries".
std::string countOf(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string poolCaption(const Grid& g) {
  if (g.poolQ == 1) return "max-pooled over keys: 1 px = " + countOf(g.poolK, "key", "keys");
  if (g.poolK == 1)
    return "max-pooled over queries: 1 px = " + countOf(g.poolQ, "query", "queries");
  return "max-pooled: 1 px = " + countOf(g.poolK, "key", "keys") + " \xC3\x97 " +
         countOf(g.poolQ, "query", "queries");
}

// Cells of head h at (x, y), `cell` pixels each. Hatching only where labelled cells are big
// enough to show it.
DrawFn heatmapOp(const Source& src, int h, long x, long y, int cell, bool hatch) {
  return [src, h, x, y, cell, hatch](Painter& im, long ox, long oy) {
    const int period = std::clamp(cell / 2, 4, 9);
    for (int i = 0; i < src.Tq; ++i)
      for (int j = 0; j < src.Tk; ++j) {
        const long cx = ox + x + long(j) * cell, cy = oy + y + long(i) * cell;
        if (hatch && cell >= 6 && src.masked(h, i, j) && !src.unvisited(i, j))
          im.hatch(cx, cy, cell, cell, period);
        else
          im.rect(cx, cy, cell, cell, src.color(h, i, j));
      }
  };
}

// The smallest step in 1, 2, 5, 10, 20, 50, ... with step * cell >= need (cell: pixels per
// token, below 1 when max-pooled).
int labelStep(double need, double cell) {
  for (long base = 1;; base *= 10)
    for (int f : {1, 2, 5})
      if (double(base * f) * cell >= need) return int(base * f);
}

struct Labels {
  std::vector<std::string> rows, cols;  // one per query / key
};

// One head's panel with its heatmap's top-left at (0, 0): labels, ticks, optional panel title.
Canvas buildPanel(const Source& src, int h, const Grid& grid, const Labels& labels,
                  const Font& font, const Sizes& sz, bool rowLabels, bool colLabels,
                  const std::string& panelTitle) {
  Canvas c;
  const int cell = grid.cell;
  const long heatW = grid.width(src.Tk), heatH = grid.height(src.Tq);
  c.op(0, 0, heatW, heatH,
       grid.pooled() || src.pooled ? pooledHeatmapOp(src, h, 0, 0, grid)
                                   : heatmapOp(src, h, 0, 0, cell, true));
  if (src.blocks && h < int(src.blocks->size()))
    c.op(0, 0, heatW, heatH, blocksOp((*src.blocks)[std::size_t(h)], 0, 0, grid, src.Tq, src.Tk));
  if (src.flash) {
    c.op(0, 0, heatW, heatH, flashOp(*src.flash, 0, 0, grid, src.Tq, src.Tk));
    // "skipped" inside skipped tiles wide enough to hold it.
    const float px = std::max(8.0f, sz.tick * 0.85f);
    TextMask m = font.render("skipped", px);
    const FlashOverlay& f = *src.flash;
    for (int r = 0; r < f.tileRows; ++r)
      for (int col = 0; col < f.tileCols; ++col) {
        if (f.at(r, col) != FlashTile::Skipped) continue;
        const int i0 = r * f.blockRows, i1 = std::min(src.Tq, i0 + f.blockRows);
        const int j0 = col * f.blockKeys, j1 = std::min(src.Tk, j0 + f.blockKeys);
        const long x0 = grid.keyX(j0), x1 = grid.keyX(j1 - 1) + cell;
        const long y0 = grid.queryY(i0), y1 = grid.queryY(i1 - 1) + grid.rowPx();
        if (m.width + 6 > x1 - x0 || m.height + 6 > y1 - y0) continue;
        const long tx = (x0 + x1) / 2 - m.width / 2, ty = (y0 + y1) / 2 - m.height / 2;
        c.rect(tx - 2, ty - 1, m.width + 4, m.height + 2, kPaper);
        c.text(m, tx, ty, kInk, Rot::None);
      }
  }
  c.frame(0, 0, heatW, heatH, kLine);

  long topExtent = 1;  // how far above the heatmap things reach
  if (rowLabels || colLabels) {
    // Labels shrink with the cells down to a floor, then thin out.
    const float px = std::clamp(float(std::min(cell, grid.rowPx())) * 0.8f,
                                std::max(8.0f, sz.fs * 0.6f), sz.label);
    const int asc = font.ascent(px), line = font.lineHeight(px);
    const int capMid = int(std::lround(asc * 0.36f));  // baseline to the middle of capitals

    const int rowStep = labelStep(line * 1.1, grid.queryPixels());
    for (int i = 0; rowLabels && i < src.Tq; i += rowStep) {
      TextMask m = font.render(fitText(font, labels.rows[i]), px);
      const long cy = grid.queryY(i) + grid.rowPx() / 2;
      const long right = rowStep > 1 ? -sz.tickLen - sz.gap : -sz.gap;
      if (rowStep > 1) c.rect(-sz.tickLen, cy, sz.tickLen, 1, kLine);
      c.text(m, right - m.width, cy + capMid - asc, kInk, Rot::None);
    }

    // Key labels: horizontal when every one fits inside its cell, else turned to read upwards.
    float widest = 0;
    for (const auto& s : labels.cols) widest = std::max(widest, font.measure(fitText(font, s), px));
    const bool flat = widest + 4 <= cell;
    const int colStep = flat ? 1 : labelStep(line * 1.1, grid.keyPixels());
    const long bottom = colStep > 1 ? -sz.tickLen - sz.gap : -sz.gap;
    for (int j = 0; colLabels && j < src.Tk; j += colStep) {
      TextMask m = font.render(fitText(font, labels.cols[j]), px);
      const long cx = grid.keyX(j) + cell / 2;
      if (colStep > 1) c.rect(cx, -sz.tickLen, 1, sz.tickLen, kLine);
      if (flat) {
        c.text(m, cx - m.width / 2, bottom - m.height, kInk, Rot::None);
      } else {
        // Turned text: its baseline is the vertical line x = left + ascent.
        const long left = cx + capMid - asc, top = bottom - m.width;
        c.text(m, left, top, kInk, Rot::Up);
      }
    }
    topExtent = std::max(1L, -c.box.y0);
  }
  if (!panelTitle.empty()) {
    TextMask m = font.render(fitText(font, panelTitle), sz.panel);
    c.text(m, heatW / 2 - m.width / 2, -topExtent - sz.gap - m.height, kInk, Rot::None);
  }
  return c;
}

struct FigureSpec {
  const Source* src;
  std::vector<int> heads;
  const Labels* labels;
  const Font* font;
  std::string title;
  bool showLabels;
  bool anyMasked;
  int columns;  // panels per row
  bool showPoolCaption = true;  // say under a pooled figure what a pixel holds
  std::string queryAxis = "Queries", keyAxis = "Keys";  // the axis titles
};

// What the colour bar's values are.
const char* barTitle(ExportStage s) {
  switch (s) {
    case ExportStage::Weights:
      return "weight";
    case ExportStage::Scores:
      return "logit";
    case ExportStage::ValueWeighted:
      return "A |v W_O|";
    case ExportStage::Rollout:
      return "rollout";
  }
  return "";
}

// The colour bar with its ticks, title and the "masked" legend; bar's top-left at (0, 0).
Canvas buildColorBar(const Source& src, const Font& font, const Sizes& sz, long length,
                     bool vertical, bool legend, int cellSize) {
  Canvas c;
  const double lo =
      src.stage == ExportStage::Weights || exportStageFromModel(src.stage) ? 0.0 : -double(src.range);
  const double hi = src.stage == ExportStage::Weights ? 1.0 : double(src.range);
  const long bw = sz.barW;
  const ColormapId id = src.cmap;
  const long bx = vertical ? bw : length, by = vertical ? length : bw;
  c.op(0, 0, bx, by, [=](Painter& im, long ox, long oy) {
    for (long k = 0; k < length; ++k) {
      // Vertical bars run high at the top, horizontal ones high at the right; the end pixels
      // are the table's ends, where the end ticks point.
      const float f = length > 1 ? float(k) / float(length - 1) : 0.5f;
      const float t = vertical ? 1.0f - f : f;
      const RGBA8 col = colormapLookup(id, t);
      if (vertical)
        im.rect(ox, oy + k, bw, 1, col);
      else
        im.rect(ox + k, oy, 1, bw, col);
    }
  });
  c.frame(0, 0, bx, by, kLine);

  const int tickLine = font.lineHeight(sz.tick);
  double step = 1;
  const int maxTicks = vertical ? int(length / (tickLine * 2.2)) + 1
                                : int(length / (font.measure("-0.00", sz.tick) * 2.0)) + 1;
  const std::vector<double> ticks = niceTicks(lo, hi, std::min(maxTicks, 11), step);
  for (double v : ticks) {
    const double f = (v - lo) / (hi - lo);
    const long pos = std::lround(f * double(length - 1));
    TextMask m = font.render(formatTick(v, step, font), sz.tick);
    if (vertical) {
      const long y = length - 1 - pos;
      c.rect(bw, y, sz.tickLen, 1, kLine);
      const int asc = font.ascent(sz.tick), capMid = int(std::lround(asc * 0.36f));
      c.text(m, bw + sz.tickLen + sz.gap, y + capMid - asc, kSoftInk, Rot::None);
    } else {
      c.rect(pos, bw, 1, sz.tickLen, kLine);
      c.text(m, pos - m.width / 2, bw + sz.tickLen + 1, kSoftInk, Rot::None);
    }
  }

  // The bar's title: above a vertical bar, to the left of a horizontal one.
  TextMask name = font.render(barTitle(src.stage), sz.tick);
  if (vertical)
    c.text(name, 0, -sz.gap * 2 - name.height, kInk, Rot::None);
  else
    c.text(name, -sz.gap * 2 - name.width, bw / 2 - name.height / 2, kInk, Rot::None);

  if (legend) {
    const long sw = bw;
    long sx, sy;
    if (vertical) {
      sx = 0, sy = length + sz.gap * 3;
    } else {
      sx = c.box.x1 + sz.gap * 4, sy = 0;
    }
    // The swatch looks like the cells: hatched only when they are.
    const int period = std::clamp(cellSize / 2, 4, 9);
    c.op(sx, sy, sw, sw, [=](Painter& im, long ox, long oy) {
      if (cellSize >= 6)
        im.hatch(ox + sx, oy + sy, sw, sw, period);
      else
        im.rect(ox + sx, oy + sy, sw, sw, kMaskedColor);
    });
    c.frame(sx, sy, sw, sw, kLine);
    TextMask m = font.render("masked", sz.tick);
    c.text(m, sx + sw + sz.gap * 2, sy + sw / 2 - m.height / 2, kInk, Rot::None);
  }
  return c;
}

Canvas buildFigure(const FigureSpec& f, const Grid& g, float fs) {
  const int cell = g.cell;
  const Font& font = *f.font;
  const Sizes sz = sizesFor(fs);
  const Source& src = *f.src;
  const bool grid = f.heads.size() > 1;
  Canvas fig;

  // Panels share their axes: query labels on the first column only, key labels on the first
  // row only, so the heatmaps keep the room.
  const int cols = std::max(1, std::min<int>(f.columns, int(f.heads.size())));
  const int rows = (int(f.heads.size()) + cols - 1) / cols;
  const auto panelTitle = [&](int h) { return grid ? "head " + std::to_string(h) : std::string(); };
  std::vector<Canvas> panels;
  Box u;
  for (std::size_t k = 0; k < f.heads.size(); ++k) {
    const bool firstCol = k % cols == 0, firstRow = k < std::size_t(cols);
    panels.push_back(buildPanel(src, f.heads[k], g, *f.labels, font, sz, f.showLabels && firstCol,
                                f.showLabels && firstRow, panelTitle(f.heads[k])));
    const Box& b = panels.back().box;
    u.add(b.x0, b.y0, b.width(), b.height());
  }
  const long heatW = g.width(src.Tk), heatH = g.height(src.Tq);
  // How far a panel without key labels reaches above its heatmap (its title).
  const long titleExtent = grid ? -buildPanel(src, f.heads[0], Grid{}, *f.labels, font, sz, false,
                                              false, panelTitle(f.heads[0]))
                                       .box.y0
                                : 0;
  const long pitchX = heatW + sz.pad + sz.gap, pitchY = heatH + sz.gap * 2 + titleExtent;
  for (std::size_t k = 0; k < panels.size(); ++k) {
    const long r = long(k) / cols, col = long(k) % cols;
    fig.append(panels[k], col * pitchX - u.x0, r * pitchY - u.y0);
  }
  // Heatmap span: from the first panel's top-left to the last row's bottom-right.
  const long heatTop = -u.y0, heatLeft = -u.x0;
  const long spanBottom = (rows - 1) * pitchY - u.y0 + heatH;
  const long spanRight = (cols - 1) * pitchX - u.x0 + heatW;
  const Box grids = fig.box;

  // Axis titles. "Queries" is turned and centred on the span when it fits, else written flat
  // at the left of the first row.
  if (f.showLabels) {
    TextMask q = font.render(f.queryAxis, sz.axis);
    const long spanH = spanBottom - heatTop;
    if (q.width <= spanH) {
      fig.text(q, grids.x0 - sz.gap * 2 - q.height, heatTop + spanH / 2 - q.width / 2, kInk,
               Rot::Up);
    } else {
      fig.text(q, grids.x0 - sz.gap * 3 - q.width, heatTop + heatH / 2 - q.height / 2, kInk,
               Rot::None);
    }
    TextMask k = font.render(f.keyAxis, sz.axis);
    fig.text(k, (heatLeft + spanRight) / 2 - k.width / 2, grids.y0 - sz.gap * 2 - k.height, kInk,
             Rot::None);
  }

  // Colour bar: beside the grid when the span is tall enough, else under it.
  const long legendH = f.anyMasked ? sz.barW + sz.gap * 3 : 0;
  const long spanH = spanBottom - heatTop;
  const bool vertical = spanH - legendH >= long(fs * 7);
  if (vertical) {
    const long len =
        grid ? std::max<long>(long(fs * 10), std::min<long>(spanH - legendH, long(fs * 22)))
             : spanH - legendH;
    Canvas bar =
        buildColorBar(src, font, sz, std::min(len, spanH - legendH), true, f.anyMasked, cell);
    fig.append(bar, grids.x1 + sz.pad, heatTop);
  } else {
    const long len = std::clamp<long>(spanRight - heatLeft, long(fs * 14), long(fs * 26));
    Canvas bar = buildColorBar(src, font, sz, len, false, f.anyMasked, cell);
    // Start under the first heatmap, further right if the bar title (left of the bar) would
    // stick out past the row labels.
    fig.append(bar, std::max(heatLeft, grids.x0 - bar.box.x0), grids.y1 + sz.pad);
  }

  // Max-pooled heatmaps say so under the figure, whatever the title.
  if (g.pooled() && f.showPoolCaption) {
    TextMask cap = font.render(fitText(font, poolCaption(g)), sz.tick);
    fig.text(cap, heatLeft, fig.box.y1 + sz.gap * 2, kSoftInk, Rot::None);
  }
  // The block overlay's meaning and the work it saves, under the figure.
  if (src.blocks) {
    double lo = 1.0, hi = 0.0;
    for (int h : f.heads) {
      lo = std::min(lo, (*src.blocks)[std::size_t(h)].workFraction());
      hi = std::max(hi, (*src.blocks)[std::size_t(h)].workFraction());
    }
    const BlockSize b = (*src.blocks)[std::size_t(f.heads[0])].size;
    char line[128];
    if (hi - lo < 0.0005)
      std::snprintf(line, sizeof line, "%dx%d tiles: a tiled kernel does %.0f%% of the dense work",
                    b.rows, b.cols, 100.0 * lo);
    else
      std::snprintf(line, sizeof line,
                    "%dx%d tiles: a tiled kernel does %.0f-%.0f%% of the dense work", b.rows,
                    b.cols, 100.0 * lo, 100.0 * hi);
    for (const char* text : {static_cast<const char*>(line),
                             "outlines: green full, orange partial, pale empty (skipped)"}) {
      TextMask cap = font.render(fitText(font, text), sz.tick);
      fig.text(cap, heatLeft, fig.box.y1 + sz.gap, kSoftInk, Rot::None);
    }
  }

  // The FlashAttention overlay's legend and the step's numbers, under the figure.
  if (src.flash)
    for (const std::string& text : src.flash->captions) {
      TextMask cap = font.render(fitText(font, text), sz.tick);
      fig.text(cap, heatLeft, fig.box.y1 + sz.gap, kSoftInk, Rot::None);
    }

  fig.heatX = heatLeft, fig.heatY = heatTop;
  if (!f.title.empty()) {
    // A title wider than the figure breaks at its " · " separators, so that a long description
    // (a mask expression, the block counts) never widens the page and shrinks the heatmap.
    const std::string sep = " \xC2\xB7 ";
    std::vector<std::string> lines;
    const double maxW = std::max<double>(double(fig.box.width()), 240.0);
    std::string cur;
    for (std::size_t pos = 0; pos <= f.title.size();) {
      std::size_t end = f.title.find(sep, pos);
      if (end == std::string::npos) end = f.title.size();
      const std::string part = f.title.substr(pos, end - pos);
      const std::string joined = cur.empty() ? part : cur + sep + part;
      if (!cur.empty() && font.measure(fitText(font, joined), sz.title) > maxW) {
        lines.push_back(cur);
        cur = part;
      } else {
        cur = joined;
      }
      pos = end + sep.size();
    }
    lines.push_back(cur);
    const long cx = (fig.box.x0 + fig.box.x1) / 2;
    long bottom = fig.box.y0 - sz.pad;
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      TextMask t = font.render(fitText(font, *it), sz.title);
      fig.text(t, cx - t.width / 2, bottom - t.height, kInk, Rot::None);
      bottom -= t.height + sz.gap / 2;
    }
  }
  return fig;
}

// The vector figure's grid: `g` (the PNG's) with blocks m times coarser on each axis that keeps
// 8 blocks or more, for the smallest m that brings the heatmaps within kVectorMaxCells; each
// block m times the pixels, so the page keeps about its size.
Grid vectorGrid(const Grid& g, int Tq, int Tk, long heads) {
  const auto blocks = [](int n, int pool) { return long((n + pool - 1) / pool); };
  const auto count = [&](const Grid& x) {
    return heads * blocks(Tq, x.poolQ) * blocks(Tk, x.poolK);
  };
  Grid out = g;
  for (int m = 2; count(out) > kVectorMaxCells; ++m) {
    const bool k = blocks(Tk, g.poolK * m) >= 8, q = blocks(Tq, g.poolQ * m) >= 8;
    if (!k && !q) break;  // under 8 x 8 blocks a head: few enough whatever the heads
    Grid n = g;
    if (k) n.poolK = g.poolK * m, n.cell = g.cell * m;
    const int row = q ? g.rowPx() * m : g.rowPx();
    if (q) n.poolQ = g.poolQ * m;
    n.cellQ = row != n.cell ? row : 0;
    out = n;
  }
  return out;
}

// What the vector figure's title says of its pooling.
std::string vectorPoolNote(const Grid& g) {
  return "max-pooled: each cell the largest of " + countOf(g.poolK, "key", "keys") +
         " \xC3\x97 " + countOf(g.poolQ, "query", "queries");
}

[[noreturn]] void refuseSize(long long w, long long h, int maxSide, const char* hint) {
  throw UsageError("the image would be " + std::to_string(w) + " x " + std::to_string(h) +
                   " pixels; the limit is " + std::to_string(maxSide) + " a side (" + hint + ")");
}

std::string stageWord(ExportStage s) {
  switch (s) {
    case ExportStage::Weights:
      return "Attention weights";
    case ExportStage::Scores:
      return "Logits (scaled scores)";
    case ExportStage::ValueWeighted:
      return "Value-weighted attention (A \xC2\xB7 |v W_O|)";
    case ExportStage::Rollout:
      return "Attention rollout";
  }
  return "";
}

std::string stageDataName(ExportStage s) {
  switch (s) {
    case ExportStage::Weights:
      return "weights";
    case ExportStage::Scores:
      return "logits";
    case ExportStage::ValueWeighted:
      return "value-weighted weights";
    case ExportStage::Rollout:
      return "rollout";
  }
  return "";
}

}  // namespace

Image renderExport(const ExportData& data, const ExportOptions& opt) {
  const Tensor3* values = opt.stage == ExportStage::Weights  ? data.weights
                          : opt.stage == ExportStage::Scores ? data.logits
                                                             : data.stageValues;
  // The rollout's one matrix mixes the heads: no per-head mask goes with it.
  const Tensor3* maskOf = opt.stage == ExportStage::Rollout ? nullptr : data.logits;
  const bool streamed = !values && data.pooled;
  if (streamed && opt.stage != ExportStage::Weights)
    throw UsageError("export: streamed (long) inputs draw the weights stage only");
  if (streamed && opt.bare)
    throw UsageError("export: streamed (long) inputs draw labelled figures only, not --bare");
  if (!streamed && (!values || values->empty()))
    throw InputError(std::string("export: no ") +
                     stageDataName(opt.stage) + " to draw");
  if (!streamed && maskOf && !maskOf->sameShape(*values))
    throw InputError("export: logits " + maskOf->shapeString() + " and " +
                     stageDataName(opt.stage) + " " +
                     values->shapeString() + " differ in shape");
  const int H = streamed ? data.streamedDims.H : values->heads;
  const int Tq = streamed ? data.streamedDims.Tq : values->rows;
  const int Tk = streamed ? data.streamedDims.Tk : values->cols;
  if (streamed && (H < 1 || Tq < 1 || Tk < 1))
    throw InputError("export: streamed weights have no shape");
  if (opt.head < -1 || opt.head >= H)
    throw UsageError("head " + std::to_string(opt.head) + " is out of range: the input has " +
                     std::to_string(H) +
                     (H == 1 ? " head (0)" : " heads (0.." + std::to_string(H - 1) + ")"));
  if (opt.cell < 0 || opt.cell > opt.maxSide)
    throw UsageError("cell size " + std::to_string(opt.cell) + " is out of range (1.." +
                     std::to_string(opt.maxSide) + " pixels)");
  if (opt.cell == 0 && (opt.targetWidth < 1 || opt.targetWidth > opt.maxSide))
    throw UsageError("width " + std::to_string(opt.targetWidth) + " is out of range (1.." +
                     std::to_string(opt.maxSide) + " pixels)");

  std::vector<int> heads;
  if (opt.head >= 0)
    heads.push_back(opt.head);
  else
    for (int h = 0; h < H; ++h) heads.push_back(h);

  Source src{values, maskOf, opt.stage, opt.colormap, 1.0f, Tq, Tk};
  if (!opt.blocks.empty()) {
    if (int(opt.blocks.size()) != H)
      throw InputError("export: block overlay for " + std::to_string(opt.blocks.size()) +
                       " heads, the data has " + std::to_string(H));
    src.blocks = &opt.blocks;
  }
  if (opt.flash.on()) {
    const FlashOverlay& f = opt.flash;
    if (heads.size() != 1 || opt.stage != ExportStage::Weights || streamed)
      throw UsageError("export: the FlashAttention tiles are drawn over one head's weights");
    if (f.tileRows != (Tq + f.blockRows - 1) / f.blockRows ||
        f.tileCols != (Tk + f.blockKeys - 1) / f.blockKeys ||
        f.tiles.size() != std::size_t(f.tileRows) * std::size_t(f.tileCols))
      throw InputError("export: FlashAttention tiles do not cover the " + std::to_string(Tq) +
                       " x " + std::to_string(Tk) + " matrix");
    src.flash = &opt.flash;
  }
  bool anyMasked = streamed && data.streamedAnyMasked;
  if (streamed) src.pooled = &data.pooled;
  float m = 0;
  for (int h : streamed ? std::vector<int>{} : heads)
    for (int i = 0; i < Tq; ++i)
      for (int j = 0; j < Tk; ++j) {
        anyMasked = anyMasked || src.masked(h, i, j);
        const float v = values->at(h, i, j);
        if (std::isfinite(v)) m = std::max(m, std::fabs(v));
      }
  src.range = m > 0 ? m : 1.0f;

  if (opt.bare) {
    if (heads.size() != 1)
      throw UsageError("a bare export draws one head; choose one with --head N");
    const int cell = opt.cell > 0 ? opt.cell : std::max(1, opt.targetWidth / Tk);
    const long long w = (long long)Tk * cell, hgt = (long long)Tq * cell;
    if (w > opt.maxSide || hgt > opt.maxSide)
      refuseSize(w, hgt, opt.maxSide, "use a smaller --cell");
    if (opt.vector && (long long)Tq * Tk > kVectorMaxCells)
      throw UsageError("a bare SVG or PDF draws every cell, and " + std::to_string(Tq) + " x " +
                       std::to_string(Tk) + " is over " + std::to_string(kVectorMaxCells) +
                       "; export a labelled figure (it max-pools) or a PNG");
    Image img;
    img.width = int(w), img.height = int(hgt);
    img.rgba.assign(std::size_t(w) * std::size_t(hgt) * 4, 255);
    RasterPainter raster(img);
    auto vec = std::make_shared<VectorFigure>();
    const Font font = Font::builtin();  // a bare figure has no text
    VectorRecorder recorder(*vec, font);
    TeePainter both(raster, recorder);
    Painter& p = opt.vector ? static_cast<Painter&>(both) : raster;
    heatmapOp(src, heads[0], 0, 0, cell, false)(p, 0, 0);
    Grid g;
    g.cell = cell;
    if (src.blocks) blocksOp(opt.blocks[std::size_t(heads[0])], 0, 0, g, Tq, Tk)(p, 0, 0);
    if (src.flash) flashOp(*src.flash, 0, 0, g, Tq, Tk)(p, 0, 0);
    img.cellPx = cell;
    if (opt.vector) {
      vec->width = img.width, vec->height = img.height;
      vec->cells = long(Tq) * Tk;
      img.vector = std::move(vec);
    }
    return img;
  }

  // Labelled figure. Heatmaps alone already too big: refuse before laying anything out.
  Font font = opt.fontPath.empty() ? Font() : Font(std::vector<std::string>{opt.fontPath});
  Labels labels;
  for (int i = 0; i < Tq; ++i)
    labels.rows.push_back(i < int(data.queryTokens.size()) ? truncateLabel(data.queryTokens[i], 14)
                                                           : std::to_string(i));
  for (int j = 0; j < Tk; ++j)
    labels.cols.push_back(j < int(data.keyTokens.size()) ? truncateLabel(data.keyTokens[j], 14)
                                                         : std::to_string(j));

  int columns = opt.gridColumns;
  if (heads.size() > 1 && columns <= 0) {
    // Aim for a page about 3:2 wide, counting some margin around each panel.
    const double pw = Tk + 0.25 * std::max(Tq, Tk) + 4, ph = Tq + 0.25 * std::max(Tq, Tk) + 4;
    double best = 1e9;
    for (int c = 1; c <= int(heads.size()); ++c) {
      const int r = (int(heads.size()) + c - 1) / c;
      const double score =
          std::fabs(std::log((c * pw) / (r * ph) / 1.5)) + 0.05 * (c * r - int(heads.size()));
      if (score < best) best = score, columns = c;
    }
  }
  columns = std::max(1, std::min(columns, int(heads.size())));
  const int rowsOfPanels = (int(heads.size()) + columns - 1) / columns;

  std::string title = opt.title;
  if (title.empty()) {
    title = stageWord(opt.stage) + " \xC2\xB7 " +
            (opt.stage == ExportStage::Rollout ? std::string("every head")
             : heads.size() == 1               ? "head " + std::to_string(heads[0])
                                               : std::to_string(H) + " heads");
    if (!data.description.empty()) title += " \xC2\xB7 " + data.description;
  }
  FigureSpec spec{&src, heads, &labels, &font, title, opt.labels, anyMasked, columns};
  if (!data.queryAxis.empty()) spec.queryAxis = data.queryAxis;
  if (!data.keyAxis.empty()) spec.keyAxis = data.keyAxis;

  const auto checkHeat = [&](long long cell) {
    const long long w = (long long)Tk * cell * columns, h = (long long)Tq * cell * rowsOfPanels;
    if (w > opt.maxSide || h > opt.maxSide)
      refuseSize(w, h, opt.maxSide,
                 opt.cell > 0 ? "use a smaller --cell" : "too many tokens to draw");
  };

  int cell = opt.cell;
  float fs;
  bool pool = false;  // max-pool the cells: they cannot get a pixel each within the target
  if (cell > 0) {
    checkHeat(cell);
    const double pageW = double(Tk) * cell * columns;
    fs = float(std::clamp(std::sqrt(pageW) * 0.55, 11.0, 22.0));
  } else {
    fs = float(std::clamp(opt.targetWidth / 75.0, 11.0, 22.0));
    // The page grows linearly with the cell, plus margins that depend a little on it (labels
    // shrink, turn or thin out): solve for the width from a trial layout, re-solve from the
    // result, and keep the height within 1.5 widths.
    const double perCellW = double(Tk) * columns, perCellH = double(Tq) * rowsOfPanels;
    const long pad = std::lround(fs * 1.1f);
    cell = int(std::clamp<long long>(
        std::min<long long>(opt.maxSide / (long long)perCellW, opt.maxSide / (long long)perCellH),
        1, 8));
    for (int pass = 0; pass < 3; ++pass) {
      if (perCellW * cell > opt.maxSide || perCellH * cell > opt.maxSide) {
        pool = true;  // not even one pixel a cell fits on the page
        break;
      }
      const Canvas t = buildFigure(spec, Grid{cell}, fs);
      const double fixedW = double(t.box.width()) - cell * perCellW + 2.0 * pad;
      const double fixedH = double(t.box.height()) - cell * perCellH + 2.0 * pad;
      double c = (opt.targetWidth - fixedW) / perCellW;
      c = std::min(c, (opt.targetWidth * 1.5 - fixedH) / perCellH);
      if (c < 1) {
        pool = true;
        break;
      }
      // Past ~96 px a cell only makes a few tokens look enormous.
      const int next = std::clamp(int(std::floor(c)), 1, 96);
      if (next == cell) break;
      cell = next;
    }
    if (!pool) checkHeat(cell);
  }

  const long pad = std::lround(fs * 1.1f);
  Grid grid{cell};
  Canvas fig;
  if (!pool) {
    fig = buildFigure(spec, grid, fs);
    if (opt.cell == 0) {
      // Never wider than asked while a smaller cell can help.
      while (cell > 1 && fig.box.width() + 2 * pad > opt.targetWidth) {
        const long over = fig.box.width() + 2 * pad - opt.targetWidth;
        cell = std::max(1, cell - int((over + long(Tk) * columns - 1) / (long(Tk) * columns)));
        grid = Grid{cell};
        fig = buildFigure(spec, grid, fs);
      }
      // One pixel a cell is still too wide: pool instead.
      pool = fig.box.width() + 2 * pad > opt.targetWidth;
    }
  }
  if (pool) {
    // Max-pooled: one pixel per block of cells. Blocks are square (f keys x f queries, the
    // smallest f that fits), so the heatmap keeps the matrix's shape as exact cells do; an axis
    // that would shrink to a sliver of under 8 pixels (a decode row, a short prompt) is not
    // pooled, and its queries get taller pixels. The margins come from a trial layout, as above.
    grid = Grid{};
    for (int pass = 0; pass < 3; ++pass) {
      const Canvas t = buildFigure(spec, grid, fs);
      const double fixedW = double(t.box.width()) - double(grid.width(Tk)) * columns + 2.0 * pad;
      const double fixedH =
          double(t.box.height()) - double(grid.height(Tq)) * rowsOfPanels + 2.0 * pad;
      const double availW = std::max(1.0, (opt.targetWidth - fixedW) / columns);
      const double availH = std::max(1.0, (opt.targetWidth * 1.5 - fixedH) / rowsOfPanels);
      const double c = std::min(availW / Tk, availH / Tq);
      const int f = std::max(1, int(std::ceil(1.0 / c - 1e-9)));
      Grid next;
      next.poolK = (Tk + f - 1) / f < 8 ? 1 : f;
      next.poolQ = (Tq + f - 1) / f < 8 ? 1 : f;
      // Queries that need no pooling get taller pixels: up to 24 px each, and no taller in all
      // than a quarter of the pooled width.
      if (next.poolQ == 1 && next.poolK > 1) {
        const double pooledW = double(next.width(Tk));
        next.cellQ = int(std::clamp(
            std::floor(std::min({availH, std::max(double(Tq), pooledW / 4)}) / Tq), 1.0, 24.0));
      }
      if (next == grid) break;
      grid = next;
    }
    fig = buildFigure(spec, grid, fs);
    // Never wider than asked: coarser key blocks until it fits (or one pixel is left).
    while (fig.box.width() + 2 * pad > opt.targetWidth && grid.width(Tk) > 1) {
      const long w = grid.width(Tk);
      const bool square = grid.poolQ == grid.poolK;
      while (grid.width(Tk) == w) ++grid.poolK;
      if (square) grid.poolQ = grid.poolK;
      fig = buildFigure(spec, grid, fs);
    }
  }
  const long long W = fig.box.width() + 2LL * pad, Hgt = fig.box.height() + 2LL * pad;
  if (W > opt.maxSide || Hgt > opt.maxSide)
    refuseSize(W, Hgt, opt.maxSide,
               opt.cell > 0 ? "use a smaller --cell" : "use a smaller --width");

  Image img;
  img.width = int(W), img.height = int(Hgt);
  img.rgba.assign(std::size_t(W) * std::size_t(Hgt) * 4, 255);
  fillRect(img, 0, 0, W, Hgt, kPaper);
  const long ox = pad - fig.box.x0, oy = pad - fig.box.y0;
  RasterPainter raster(img);
  const auto heatCells = [&](const Grid& g) {
    return long(heads.size()) * ((Tq + g.poolQ - 1) / g.poolQ) * long((Tk + g.poolK - 1) / g.poolK);
  };
  if (!opt.vector) {
    for (const DrawFn& f : fig.ops) f(raster, ox, oy);
  } else {
    auto vec = std::make_shared<VectorFigure>();
    VectorRecorder recorder(*vec, font);
    if (!grid.pooled() && heatCells(grid) <= kVectorMaxCells) {
      // The PNG's layout as it is: one pass draws both.
      TeePainter both(raster, recorder);
      for (const DrawFn& f : fig.ops) f(both, ox, oy);
      vec->width = img.width, vec->height = img.height;
      vec->cells = heatCells(grid);
    } else {
      for (const DrawFn& f : fig.ops) f(raster, ox, oy);
      // Max-pooled: coarser blocks until the cells fit, the page about the PNG's size, and the
      // title says how the cells were pooled.
      const Grid vg = vectorGrid(grid, Tq, Tk, long(heads.size()));
      FigureSpec vspec = spec;
      vspec.title = title + " \xC2\xB7 " + vectorPoolNote(vg);
      vspec.showPoolCaption = false;
      const Canvas vfig = buildFigure(vspec, vg, fs);
      vec->width = int(vfig.box.width() + 2 * pad), vec->height = int(vfig.box.height() + 2 * pad);
      for (const DrawFn& f : vfig.ops) f(recorder, pad - vfig.box.x0, pad - vfig.box.y0);
      vec->cells = heatCells(vg);
      vec->pooled = true;
    }
    img.vector = std::move(vec);
  }
  img.heatX = int(ox + fig.heatX), img.heatY = int(oy + fig.heatY);
  img.cellPx = grid.pooled() ? 0 : grid.cell;
  return img;
}

std::string defaultExportFileName(const std::string& sceneTitle, const ExportOptions& opt) {
  std::string slug;
  for (unsigned char ch : sceneTitle) {
    if (slug.size() >= 40) break;
    if (std::isalnum(ch) && ch < 0x80) {
      slug.push_back(char(std::tolower(ch)));
    } else if (!slug.empty() && slug.back() != '-') {
      slug.push_back('-');
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  std::string name = "attnviz";
  if (!slug.empty()) name += "_" + slug;
  name += opt.head < 0 ? "_all-heads" : "_head" + std::to_string(opt.head);
  name += opt.stage == ExportStage::Weights         ? "_weights"
          : opt.stage == ExportStage::Scores        ? "_scores"
          : opt.stage == ExportStage::ValueWeighted ? "_value-weighted"
                                                    : "_rollout";
  if (opt.bare) name += "_bare";
  return name + ".png";
}

void writePng(const std::string& path, const Image& img) {
  if (img.width <= 0 || img.height <= 0 ||
      img.rgba.size() != std::size_t(img.width) * std::size_t(img.height) * 4)
    throw InputError(path + ": cannot write an empty or malformed image");
  std::string bytes;
  const auto sink = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), std::size_t(size));
  };
  const int ok = stbi_write_png_to_func(sink, &bytes, img.width, img.height, 4, img.rgba.data(),
                                        img.width * 4);
  if (!ok || bytes.empty()) throw InputError(path + ": PNG encoding failed");
  writeFileAtomic(path, bytes);
}

}  // namespace attnviz
