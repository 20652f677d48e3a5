// attnviz core (render, internal): where a figure's drawing operations go. A figure is laid out
// once as positioned operations; a painter takes them: RasterPainter into an Image's pixels (the
// PNG), VectorRecorder into a VectorFigure (SVG and PDF), TeePainter into both in one pass.
#pragma once

#include "attnviz/engine/tensor.h"
#include "attnviz/render/colormap.h"
#include "attnviz/render/font.h"
#include "attnviz/render/raster.h"
#include "attnviz/render/vector_figure.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnviz::paint {

// Diagonal hatching for masked cells; the phase follows page coordinates so that stripes run on
// across neighbouring masked cells.
inline void hatchRect(Image& im, long x, long y, long w, long h, int period) {
  fillRect(im, x, y, w, h, kMaskedColor);
  const int line = std::max(1, period / 3);
  const long x0 = std::max(0L, x), y0 = std::max(0L, y);
  const long x1 = std::min<long>(im.width, x + w), y1 = std::min<long>(im.height, y + h);
  for (long yy = y0; yy < y1; ++yy)
    for (long xx = x0; xx < x1; ++xx)
      if ((xx + yy) % period < line) blendPixel(im, xx, yy, kMaskedHatchColor, 255);
}

enum class Rot { None, Up };  // Up: reads bottom to top (turned 90 degrees anticlockwise)

inline int rotW(const TextMask& m, Rot r) { return r == Rot::None ? m.width : m.height; }
inline int rotH(const TextMask& m, Rot r) { return r == Rot::None ? m.height : m.width; }

inline void drawText(Image& im, const TextMask& m, long x, long y, RGBA8 c, Rot r) {
  if (r == Rot::None) {
    for (int ty = 0; ty < m.height; ++ty)
      for (int tx = 0; tx < m.width; ++tx) blendPixel(im, x + tx, y + ty, c, m.at(tx, ty));
    return;
  }
  // Turned page pixel (rx, ry) shows text pixel (sx, sy) = (width - 1 - ry, rx).
  for (int ry = 0; ry < m.width; ++ry)
    for (int rx = 0; rx < m.height; ++rx)
      blendPixel(im, x + rx, y + ry, c, m.at(m.width - 1 - ry, rx));
}

// ---------------------------------------------------------------------------------------------
// Where the figure's drawing operations go: the PNG's pixels (RasterPainter), the vector
// figure's list of rectangles, hatched rectangles and text (VectorRecorder, vector_figure.cpp's
// SVG and PDF writers read it), or both at once, so that one layout feeds every format.

class Painter {
 public:
  virtual ~Painter() = default;
  virtual void rect(long x, long y, long w, long h, RGBA8 c) = 0;
  // A masked cell: kMaskedColor with diagonal stripes of kMaskedHatchColor in page phase.
  virtual void hatch(long x, long y, long w, long h, int period) = 0;
  virtual void text(const TextMask& m, long x, long y, RGBA8 c, Rot r) = 0;
  // An 8-bit RGB picture with its top-left at (x, y), each pixel a scale x scale square.
  virtual void picture(long x, long y, const VectorPicture& pic, int scale) = 0;
  // A 1-pixel outline just outside the rectangle (x, y, w, h).
  void frame(long x, long y, long w, long h, RGBA8 c) {
    rect(x - 1, y - 1, w + 2, 1, c);
    rect(x - 1, y + h, w + 2, 1, c);
    rect(x - 1, y, 1, h, c);
    rect(x + w, y, 1, h, c);
  }
};

class RasterPainter final : public Painter {
 public:
  explicit RasterPainter(Image& im) : im_(im) {}
  void rect(long x, long y, long w, long h, RGBA8 c) override { fillRect(im_, x, y, w, h, c); }
  void hatch(long x, long y, long w, long h, int period) override {
    hatchRect(im_, x, y, w, h, period);
  }
  void text(const TextMask& m, long x, long y, RGBA8 c, Rot r) override {
    drawText(im_, m, x, y, c, r);
  }
  void picture(long x, long y, const VectorPicture& pic, int scale) override {
    for (int py = 0; py < pic.height; ++py)
      for (int px = 0; px < pic.width; ++px) {
        const std::uint8_t* s = pic.rgb.data() + (std::size_t(py) * pic.width + px) * 3;
        fillRect(im_, x + long(px) * scale, y + long(py) * scale, scale, scale,
                 RGBA8{s[0], s[1], s[2], 255});
      }
  }

 private:
  Image& im_;
};

// Records what is drawn, in page pixels, for the SVG and PDF writers.
class VectorRecorder final : public Painter {
 public:
  VectorRecorder(VectorFigure& fig, const Font& font) : fig_(fig), font_(font) {}
  void rect(long x, long y, long w, long h, RGBA8 c) override {
    if (w <= 0 || h <= 0) return;
    fig_.items.push_back({VectorItem::Rect, x, y, w, h, c, 0, -1});
  }
  void hatch(long x, long y, long w, long h, int period) override {
    if (w <= 0 || h <= 0) return;
    fig_.items.push_back({VectorItem::Hatch, x, y, w, h, kMaskedColor, period, -1});
  }
  void text(const TextMask& m, long x, long y, RGBA8 c, Rot r) override {
    VectorText t;
    t.text = m.text;
    t.px = m.px;
    t.glyphs = font_.place(m.text, m.px);
    if (t.glyphs.empty()) return;
    for (const PlacedGlyph& g : t.glyphs) {
      bool known = false;
      for (const auto& f : fig_.families) known = known || f.first == g.face;
      if (!known) fig_.families.push_back({g.face, font_.familyName(g.face)});
    }
    // The mask's pen start (penX, ascent) on the page: turned text maps mask column s to page
    // row y + width - s and mask row t to page column x + t.
    t.up = r == Rot::Up;
    t.x = t.up ? double(x + m.ascent) : double(x + m.penX);
    t.y = t.up ? double(y + m.width - m.penX) : double(y + m.ascent);
    t.color = c;
    fig_.items.push_back({VectorItem::Text, x, y, 0, 0, c, 0, int(fig_.texts.size())});
    fig_.texts.push_back(std::move(t));
  }
  void picture(long x, long y, const VectorPicture& pic, int scale) override {
    if (pic.width <= 0 || pic.height <= 0) return;
    fig_.items.push_back({VectorItem::Picture, x, y, long(pic.width) * scale,
                          long(pic.height) * scale, RGBA8{}, 0, int(fig_.pictures.size())});
    fig_.pictures.push_back(pic);
  }

 private:
  VectorFigure& fig_;
  const Font& font_;
};

// Both: the PNG and the vector figure from one pass over the operations (a streamed figure
// computes its pooled weights once).
class TeePainter final : public Painter {
 public:
  TeePainter(Painter& a, Painter& b) : a_(a), b_(b) {}
  void rect(long x, long y, long w, long h, RGBA8 c) override {
    a_.rect(x, y, w, h, c), b_.rect(x, y, w, h, c);
  }
  void hatch(long x, long y, long w, long h, int period) override {
    a_.hatch(x, y, w, h, period), b_.hatch(x, y, w, h, period);
  }
  void text(const TextMask& m, long x, long y, RGBA8 c, Rot r) override {
    a_.text(m, x, y, c, r), b_.text(m, x, y, c, r);
  }
  void picture(long x, long y, const VectorPicture& pic, int scale) override {
    a_.picture(x, y, pic, scale), b_.picture(x, y, pic, scale);
  }

 private:
  Painter &a_, &b_;
};

// ---------------------------------------------------------------------------------------------
// What the figures around the heatmap (the attribution figure, the layers x heads grid) share:
// their inks, text placement and the ASCII spellings the built-in font needs.

constexpr RGBA8 kFigurePaper{255, 255, 255, 255};
constexpr RGBA8 kFigureInk{30, 30, 30, 255};
constexpr RGBA8 kFigureSoftInk{70, 70, 70, 255};
constexpr RGBA8 kFigureLine{40, 40, 40, 255};

// Text with its top-left at (x, y); `up` turns it to read bottom to top (its box is then
// height x width).
inline void figureText(Painter& p, const TextMask& m, long x, long y, RGBA8 c, bool up = false) {
  p.text(m, x, y, c, up ? Rot::Up : Rot::None);
}

// A figure's page: W x H of paper (a page past maxSide a side is a UsageError), the raster
// painter on it and, for SVG and PDF, a recorder of the same operations into `vec`; `painter()`
// draws into what was asked for.
class FigureCanvas {
 public:
  FigureCanvas(long W, long H, long maxSide, bool vector, const Font& font)
      : vector_(vector), vec(std::make_shared<VectorFigure>()), recorder_(*vec, font) {
    if (W > maxSide || H > maxSide)
      throw UsageError("the figure would be " + std::to_string(W) + " x " + std::to_string(H) +
                       " pixels; the limit is " + std::to_string(maxSide) + " a side");
    im.width = int(W), im.height = int(H);
    im.rgba.assign(std::size_t(W) * std::size_t(H) * 4, 255);
    fillRect(im, 0, 0, W, H, kFigurePaper);
  }
  FigureCanvas(const FigureCanvas&) = delete;
  FigureCanvas& operator=(const FigureCanvas&) = delete;
  Painter& painter() { return vector_ ? static_cast<Painter&>(both_) : raster_; }

 private:
  bool vector_;

 public:
  Image im;
  std::shared_ptr<VectorFigure> vec;

 private:
  RasterPainter raster_{im};
  VectorRecorder recorder_;
  TeePainter both_{raster_, recorder_};
};

// A colour bar's ticks: multiples of a 1-2-2.5-5 step, at most about maxCount of them, within
// [lo, hi] (the step in stepOut), and a tick's text with the digits that step needs
// (raster.cpp; the heatmap's bar and the overlay's).
std::vector<double> niceTicks(double lo, double hi, int maxCount, double& stepOut);
std::string formatTick(double v, double step, const Font& font);

// The built-in font draws ASCII only: the symbols the figures' titles use, spelled out when the
// font lacks them.
inline std::string fitToFont(const Font& font, std::string s) {
  static const std::pair<const char*, const char*> subs[] = {
      {"\xCE\x94", "delta "}, {"\xE2\x88\x92", "-"}, {"\xC2\xB7", "|"},
      {"\xC3\x97", "x"},      {"\xE2\x80\x94", "-"}, {"\xCF\x84", "tau"}};
  for (const auto& [from, to] : subs) {
    if (font.hasGlyph(decodeUtf8(from)[0])) continue;
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p))
      s.replace(p, std::char_traits<char>::length(from), to);
  }
  return s;
}

}  // namespace attnviz::paint
