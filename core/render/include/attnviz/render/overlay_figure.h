// attnviz core: the overlay figure of an image model (`attnviz export --overlay`): the image as
// the model sees it (after resize and crop, before normalisation) with a map over its patches
// (a token's attention row, or the rollout's) upsampled bilinearly to the image's pixels and
// blended over it in a colormap, a colour bar, a title and captions. The same layout feeds the
// PNG, the SVG and the PDF. CPU only, no GL, no window.
#pragma once

#include "attnviz/formats/image.h"  // RgbImage
#include "attnviz/render/colormap.h"
#include "attnviz/render/raster.h"  // Image

#include <string>
#include <vector>

namespace attnviz {

struct OverlayFigure {
  const RgbImage* image = nullptr;  // the image as the model sees it
  int gridH = 0, gridW = 0;         // the patch grid
  std::vector<double> map;          // [gridH, gridW], row by row: the values over the patches
  std::string barTitle = "weight";  // what the colour bar's values are
  std::string title;
  std::vector<std::string> captions;  // lines under the figure (the figure adds its own first)
  ColormapId colormap = ColormapId::Viridis;
  double opacity = 0.6;  // of the colormap over the image, 0..1
  // Page pixels per image pixel (each a square); 0: the largest whole factor that keeps the
  // image's longer side within 512 pixels, at least 1.
  int scale = 0;
  std::string fontPath;  // empty: as the export (ATTNVIZ_FONT, fontconfig, the built-in font)
  int maxSide = 16384;   // UsageError past this many pixels a side
  bool vector = false;   // also record the figure for SVG and PDF (Image::vector)
};

// The display scale renderOverlay uses for an image of this size when OverlayFigure::scale is 0.
int overlayScale(int width, int height);

// The map over the patches resized to width x height pixels by bilinear interpolation with
// align_corners=False (torch's F.interpolate, mode="bilinear"): pixel x samples the grid at
// (x + 0.5) * gridW / width - 0.5, clamped at 0, between the two nearest patch centres (the last
// patch repeated past the edge). [height, width], row by row.
std::vector<double> upsampleBilinear(const std::vector<double>& map, int gridH, int gridW,
                                     int width, int height);

// The overlay's pixels before scaling: each image pixel blended with colormap(v / m), m the
// map's largest value (1 when it is not positive), as out = (c * a + p * (255 - a) + 127) / 255
// per channel with a = round(opacity * 255). 8-bit RGB, [height, width, 3].
std::vector<std::uint8_t> blendOverlay(const RgbImage& image, const std::vector<double>& up,
                                       double maxValue, ColormapId colormap, double opacity);

// Renders the figure: Image::heatX, heatY give the image's top-left corner on the page and
// Image::cellPx the scale. Throws InputError for a missing image or a map whose size does not
// match its grid; UsageError for an opacity outside 0..1 or a page past maxSide.
Image renderOverlay(const OverlayFigure& f);

}  // namespace attnviz
