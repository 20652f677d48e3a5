// attnviz export tests: decoding PNGs, locating heatmaps by their cell colours, running the binary.
#pragma once

#include "attnviz/render/colormap.h"
#include "attnviz/render/raster.h"
#include "run_binary.h"
#include "temp_dir.h"

#include <gtest/gtest.h>
#include <stb_image.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace attnviz::exporttest {

namespace fs = std::filesystem;

using TempDir = attnviz::testing::TempDir;  // temp_dir.h

// Decodes a PNG with stb_image into RGBA; an empty image when it does not decode.
inline Image decodePng(const std::string& path) {
  Image img;
  int w = 0, h = 0, n = 0;
  unsigned char* p = stbi_load(path.c_str(), &w, &h, &n, 4);
  if (!p) return img;
  img.width = w, img.height = h;
  img.rgba.assign(p, p + std::size_t(w) * h * 4);
  stbi_image_free(p);
  return img;
}

using testing::CliRun;
using testing::lineCount;
using testing::slurp;

// Runs `attnviz export <args>` with no display at all (DISPLAY and WAYLAND_DISPLAY unset).
inline CliRun runExport(std::vector<std::string> args, const TempDir& dir) {
  args.insert(args.begin(), "export");
  return testing::runBinary(args, dir.path, "env -u DISPLAY -u WAYLAND_DISPLAY");
}

// Table entries a value t may land on: round(t * 255), plus the neighbour when t * 255 sits so
// close to a half that float32 and double rounding may disagree.
inline std::vector<RGBA8> colorsFor(ColormapId id, double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double x = t * 255.0;
  std::vector<int> idx{int(std::lround(x))};
  const double frac = x - std::floor(x);
  if (std::fabs(frac - 0.5) < 1e-3) idx = {int(std::floor(x)), int(std::floor(x)) + 1};
  std::vector<RGBA8> out;
  for (int i : idx) out.push_back(colormapTable(id)[std::clamp(i, 0, 255)]);
  return out;
}

inline bool oneOf(const RGBA8& c, const std::vector<RGBA8>& set) {
  return std::find(set.begin(), set.end(), c) != set.end();
}

inline bool isWhite(const RGBA8& c) { return c.r == 255 && c.g == 255 && c.b == 255; }

// Pixels that are not page white inside [x0, x1) x [y0, y1) (clipped to the image).
inline int inkIn(const Image& img, int x0, int y0, int x1, int y1) {
  int n = 0;
  for (int y = std::max(0, y0); y < std::min(img.height, y1); ++y)
    for (int x = std::max(0, x0); x < std::min(img.width, x1); ++x) n += !isWhite(img.pixel(x, y));
  return n;
}

// Every top-left corner (x, y) where a Tq x Tk grid of `cell`-pixel cells has its cells' centre,
// top-left and bottom-right pixels all satisfying `ok(i, j, colour)`. Checking the corners pins
// the grid to the pixel: shifted by one, a corner falls on the frame or the page.
struct Pos {
  int x, y;
};
inline std::vector<Pos> findHeatmaps(const Image& img, int Tq, int Tk, int cell,
                                     const std::function<bool(int, int, const RGBA8&)>& ok) {
  std::vector<Pos> found;
  const int w = Tk * cell, h = Tq * cell, c = cell / 2;
  const auto cellOk = [&](int x, int y, int i, int j) {
    const int cx = x + j * cell, cy = y + i * cell;
    return ok(i, j, img.pixel(cx + c, cy + c)) && ok(i, j, img.pixel(cx, cy)) &&
           ok(i, j, img.pixel(cx + cell - 1, cy + cell - 1));
  };
  for (int y = 0; y + h <= img.height; ++y)
    for (int x = 0; x + w <= img.width; ++x) {
      if (!cellOk(x, y, 0, 0)) continue;
      bool all = true;
      for (int i = 0; i < Tq && all; ++i)
        for (int j = 0; j < Tk && all; ++j) all = cellOk(x, y, i, j);
      if (all) found.push_back({x, y});
    }
  return found;
}

}  // namespace attnviz::exporttest
