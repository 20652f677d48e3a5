// The overlay figure: an image model's view of an image with a map over its patches, laid out
// once in page pixels and played into the PNG's pixels and, when asked, the SVG and PDF
// recording (the blended image is one picture in all three).
#include "attnviz/render/overlay_figure.h"

#include "attnviz/engine/tensor.h"
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

// Source coordinate of output pixel i on an axis of n cells drawn over `out` pixels, as torch's
// area_pixel_compute_source_index with align_corners=False: clamped at 0.
void taps(int i, int n, int out, int& i0, int& i1, double& f) {
  double s = (double(i) + 0.5) * double(n) / double(out) - 0.5;
  if (s < 0) s = 0;
  i0 = std::min(int(s), n - 1);
  i1 = std::min(i0 + 1, n - 1);
  f = s - double(i0);
}

}  // namespace

int overlayScale(int width, int height) {
  const int side = std::max(1, std::max(width, height));
  return std::max(1, 512 / side);
}

std::vector<double> upsampleBilinear(const std::vector<double>& map, int gridH, int gridW,
                                     int width, int height) {
  std::vector<double> out(std::size_t(width) * std::size_t(height));
  const std::size_t w = std::size_t(width);
  std::vector<int> x0(w), x1(w);
  std::vector<double> fx(w);
  for (int x = 0; x < width; ++x) taps(x, gridW, width, x0[x], x1[x], fx[x]);
  for (int y = 0; y < height; ++y) {
    int y0, y1;
    double fy;
    taps(y, gridH, height, y0, y1, fy);
    const double* r0 = map.data() + std::size_t(y0) * gridW;
    const double* r1 = map.data() + std::size_t(y1) * gridW;
    for (int x = 0; x < width; ++x) {
      const double top = r0[x0[x]] * (1 - fx[x]) + r0[x1[x]] * fx[x];
      const double bottom = r1[x0[x]] * (1 - fx[x]) + r1[x1[x]] * fx[x];
      out[std::size_t(y) * width + x] = top * (1 - fy) + bottom * fy;
    }
  }
  return out;
}

std::vector<std::uint8_t> blendOverlay(const RgbImage& image, const std::vector<double>& up,
                                       double maxValue, ColormapId colormap, double opacity) {
  const double m = maxValue > 0 && std::isfinite(maxValue) ? maxValue : 1.0;
  const int a = int(std::lround(std::clamp(opacity, 0.0, 1.0) * 255.0)), ia = 255 - a;
  const std::size_t n = std::size_t(image.width) * std::size_t(image.height);
  std::vector<std::uint8_t> out(n * 3);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = up[i];
    const RGBA8 c = std::isfinite(v) ? colormapLookup(colormap, float(v / m)) : kNonFiniteColor;
    const std::uint8_t* p = image.rgb.data() + i * 3;
    out[i * 3 + 0] = std::uint8_t((c.r * a + p[0] * ia + 127) / 255);
    out[i * 3 + 1] = std::uint8_t((c.g * a + p[1] * ia + 127) / 255);
    out[i * 3 + 2] = std::uint8_t((c.b * a + p[2] * ia + 127) / 255);
  }
  return out;
}

Image renderOverlay(const OverlayFigure& f) {
  if (!f.image || f.image->width < 1 || f.image->height < 1 ||
      f.image->rgb.size() != std::size_t(f.image->width) * std::size_t(f.image->height) * 3)
    throw InputError("overlay figure: no image to draw");
  if (f.gridH < 1 || f.gridW < 1 || f.map.size() != std::size_t(f.gridH) * std::size_t(f.gridW))
    throw InputError("overlay figure: the map has " + std::to_string(f.map.size()) +
                     " values for a " + std::to_string(f.gridH) + " x " + std::to_string(f.gridW) +
                     " patch grid");
  if (!(f.opacity >= 0.0 && f.opacity <= 1.0))
    throw UsageError("--opacity: expected a value in 0..1");
  const RgbImage& img = *f.image;
  const int k = f.scale > 0 ? f.scale : overlayScale(img.width, img.height);
  const long imgW = long(img.width) * k, imgH = long(img.height) * k;
  if (imgW > f.maxSide || imgH > f.maxSide)
    throw UsageError("the image would be " + std::to_string(imgW) + " x " + std::to_string(imgH) +
                     " pixels; the limit is " + std::to_string(f.maxSide) + " a side");

  // The map at the image's pixels and blended over it: the one picture every format draws.
  const std::vector<double> up = upsampleBilinear(f.map, f.gridH, f.gridW, img.width, img.height);
  double m = 0;
  for (double v : f.map)
    if (std::isfinite(v)) m = std::max(m, v);
  const double top = m > 0 ? m : 1.0;
  VectorPicture pic;
  pic.width = img.width, pic.height = img.height;
  pic.rgb = blendOverlay(img, up, top, f.colormap, f.opacity);

  Font font = f.fontPath.empty() ? Font() : Font(std::vector<std::string>{f.fontPath});
  const float fsTitle = 17.0f, fsTick = 12.0f;
  const int pad = 16, barW = 14, tickLen = 4, tgap = 6;

  char buf[160];
  std::vector<std::string> captionText;
  std::snprintf(buf, sizeof buf,
                "%d x %d patches, upsampled bilinearly to %d x %d pixels; colours at %d%% over "
                "the image",
                f.gridW, f.gridH, img.width, img.height, int(std::lround(f.opacity * 100)));
  captionText.push_back(buf);
  for (const std::string& c : f.captions) captionText.push_back(c);

  const TextMask title = f.title.empty() ? TextMask{} : font.render(fit(font, f.title), fsTitle);
  std::vector<TextMask> captions;
  for (const std::string& c : captionText) captions.push_back(font.render(fit(font, c), fsTick));
  const TextMask barTitle = font.render(fit(font, f.barTitle), fsTick);

  const long titleH = title.height ? title.height + tgap * 2 : 0;
  const long imgX = pad, imgY = pad + titleH + barTitle.height + tgap;
  const long barH = std::max<long>(imgH, 120);
  const long barX = imgX + imgW + pad;
  const int tickLine = font.lineHeight(fsTick);
  double step = 1;
  const std::vector<double> ticks =
      paint::niceTicks(0.0, top, std::min(11, int(barH / (tickLine * 2.2)) + 1), step);
  long tickW = 0;
  for (double v : ticks)
    tickW = std::max<long>(tickW, long(std::ceil(font.measure(paint::formatTick(v, step, font),
                                                              fsTick))));
  const long right = barX + barW + tickLen + tgap + tickW + pad;
  long bottom = std::max(imgY + imgH, imgY + barH + long(fsTick) / 2) + tgap;
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

  p.picture(imgX, imgY, pic, k);
  p.frame(imgX, imgY, imgW, imgH, kLine);

  // The colour bar: 0 (bottom) to the map's largest value (top).
  for (long y = 0; y < barH; ++y) {
    const float t = barH > 1 ? 1.0f - float(y) / float(barH - 1) : 0.5f;
    p.rect(barX, imgY + y, barW, 1, colormapLookup(f.colormap, t));
  }
  p.frame(barX, imgY, barW, barH, kLine);
  figureText(p, barTitle, barX, imgY - tgap / 2 - barTitle.height, kInk);
  for (double v : ticks) {
    const long y = imgY + std::lround((1.0 - v / top) * double(barH - 1));
    p.rect(barX + barW, y, tickLen, 1, kLine);
    const TextMask tm = font.render(paint::formatTick(v, step, font), fsTick);
    figureText(p, tm, barX + barW + tickLen + tgap, y - tm.height / 2, kSoftInk);
  }

  long y = captionsY;
  for (const TextMask& c : captions) {
    figureText(p, c, pad, y, kSoftInk);
    y += c.height + tgap;
  }
  im.heatX = int(imgX), im.heatY = int(imgY), im.cellPx = k;
  if (f.vector) {
    vec->width = im.width, vec->height = im.height;
    vec->cells = 0;
    im.vector = std::move(vec);
  }
  return std::move(im);
}

}  // namespace attnviz
