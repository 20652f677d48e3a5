// attnviz core: the figures as SVG and PDF. The layout is the PNG's (raster.cpp lays a figure out
// once and draws it through a painter): here it arrives as a list of rectangles (one per cell, or
// per pooled block), hatched rectangles (masked cells) and lines of text, in page pixels, and is
// written as SVG (rect and text elements) or PDF (cairo: filled paths and text in the PNG's font).
#pragma once

#include "attnviz/render/colormap.h"
#include "attnviz/render/font.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnviz {

struct Image;

// One line of text: the glyphs Font::place gives for it, from the pen's start on the baseline.
struct VectorText {
  std::string text;
  float px = 0;  // the PNG's pixel size (ascent + descent)
  std::vector<PlacedGlyph> glyphs;
  double x = 0, y = 0;  // the pen's start on the baseline, page pixels
  bool up = false;      // turned 90 degrees anticlockwise: reads bottom to top
  RGBA8 color;
};

// An 8-bit RGB picture (rows top to bottom, R, G, B interleaved) placed on the page: the overlay
// figure's image with its map blended in. Drawn with each pixel a `scale` x `scale` square, no
// smoothing, as the PNG draws it.
struct VectorPicture {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgb;  // width * height * 3
};

struct VectorItem {
  enum Kind : unsigned char { Rect, Hatch, Text, Picture } kind = Rect;
  long x = 0, y = 0, w = 0, h = 0;  // page pixels (Text: unused; Picture: its box on the page)
  RGBA8 color;                      // Rect: its fill
  int period = 0;                   // Hatch: the stripes' period in pixels (a third of it ink)
  int text = -1;                    // Text: index into VectorFigure::texts; Picture: into pictures
};

// Hatching as the PNG draws it: pixel (x, y) of the page is kMaskedHatchColor when
// (x + y) mod period < hatchInk(period), else kMaskedColor.
inline int hatchInk(int period) { return period / 3 > 1 ? period / 3 : 1; }

struct VectorFigure {
  int width = 0, height = 0;  // the page, in pixels (1 px = 1 pt in the PDF)
  std::vector<VectorItem> items;  // in drawing order, over a white page
  std::vector<VectorText> texts;
  std::vector<VectorPicture> pictures;
  std::vector<std::pair<FontFile, std::string>> families;  // each face used, with its family
  long cells = 0;       // heatmap rectangles drawn (cells, or pooled blocks)
  bool pooled = false;  // max-pooled (the title says so)
};

// A vector figure over this many heatmap cells is max-pooled until it is not (the PNG keeps its
// own layout): an SVG or PDF of millions of rectangles helps no one.
constexpr long kVectorMaxCells = 250000;

// The documents, byte for byte the same for the same figure (no dates, no random ids).
std::string svgDocument(const VectorFigure& fig);
std::string pdfDocument(const VectorFigure& fig);

// Write the vector figure an export recorded (ExportOptions::vector) atomically. Throw
// InputError naming the path when the image carries none or the file cannot be written.
void writeSvg(const std::string& path, const Image& img);
void writePdf(const std::string& path, const Image& img);

// The format a file name asks for by its extension, any case: .svg, .pdf, else PNG (the app's
// export dialogs). writeFigure writes `img` in it (a vector format needs Image::vector).
enum class FigureFormat { Png, Svg, Pdf };
FigureFormat figureFormatOfPath(const std::string& path);
void writeFigure(const std::string& path, const Image& img, FigureFormat format);

}  // namespace attnviz
