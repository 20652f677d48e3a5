// attnviz app tests: the real attnviz binary (ATTNVIZ_BIN) runs a scripted number of frames under
// Xvfb (ATTNVIZ_XVFB_RUN), saves what it drew, and the tests decode the PNG and look at the pixels
// of known cells. What the app printed (its geometry, the row inspector's line, the model grid)
// is parsed here; the expected colours come from the colormap table and the masked colours of
// colormap.h, never from the app's own output. Shared by the app suites (tests/app).
#pragma once

#include "attnviz/render/colormap.h"
#include "run_shell.h"

#include <gtest/gtest.h>
#include <stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace attnviz::apptest {

using attnviz::RGBA8;
using attnviz::testing::shellQuote;  // run_shell.h

struct Geometry {
  float x0 = 0, y0 = 0, w = 0, h = 0, cell = 0, panX = 0, panY = 0;
  int rows = 0, cols = 0;
  bool valid = false;
};

struct Shot {
  int rc = -1;
  std::string out;
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
  Geometry g;

  RGBA8 pixel(int x, int y) const {
    const unsigned char* p = &rgba[(std::size_t(y) * width + x) * 4];
    return RGBA8{p[0], p[1], p[2], p[3]};
  }
  // Centre pixel of cell (i, j) of the heatmap.
  RGBA8 cell(int i, int j) const {
    const int x = int(std::floor(g.x0 + (j + 0.5f - g.panX) * g.cell));
    const int y = int(std::floor(g.y0 + (i + 0.5f - g.panY) * g.cell));
    return pixel(x, y);
  }
};

inline std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "attnviz_app_" + name;
}

// `attnviz <args>` in a 1280 x 800 window under Xvfb, as a shell command.
inline std::string appCommand(const std::string& args) {
  return std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x800x24\" " + ATTNVIZ_BIN +
         " --size 1280x800 " + args;
}

// Runs `cmd` (an appCommand), three tries in all. xvfb-run -a can race with another test
// starting a server at the same moment, and under ASan LeakSanitizer's own tracer has crashed
// once in a few hundred runs ("Tracer caught signal 11", a fatal error of the tool, not a leak
// report); such failures are the harness's, not the app's, so they are retried. A leak found
// still fails: its report is not a fatal error.
inline testing::ShellRun runAppCommand(const std::string& cmd) {
  testing::ShellRun r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = testing::runShell(cmd);
    if (r.rc < 0) break;
    if (r.out.find("xvfb-run: error") == std::string::npos &&
        r.out.find("LeakSanitizer has encountered a fatal error") == std::string::npos)
      break;
  }
  return r;
}

// Runs attnviz under Xvfb with `args` and returns its output and decoded screenshot.
inline Shot runApp(const std::string& name, const std::string& args, int frames = 6) {
  Shot s;
  const std::string png = tempPath(name + ".png");
  std::remove(png.c_str());
  const testing::ShellRun r = runAppCommand(
      appCommand("--frames " + std::to_string(frames) + " --screenshot " + png + " " + args));
  s.rc = r.rc;
  s.out = r.out;
  if (r.rc < 0) return s;
  // Some runs crash the tracer every time (GCC 12's LeakSanitizer at the exit of a process that
  // ran the thread pool; seen three times in a row for one scene, while ATTNVIZ_THREADS=1 never
  // crashes it): the leak check could not run, but the app ran to its end (its screenshot line
  // printed) and neither sanitizer reported an error, so the run counts as the app's success. A
  // leak found still fails: its report is an ERROR, not a fatal error of the tool.
  if (s.rc != 0 && s.out.find("LeakSanitizer has encountered a fatal error") != std::string::npos &&
      s.out.find("ERROR: LeakSanitizer") == std::string::npos &&
      s.out.find("ERROR: AddressSanitizer") == std::string::npos &&
      s.out.find("runtime error:") == std::string::npos &&
      s.out.find("screenshot: " + png) != std::string::npos) {
    std::printf("note: %s: LeakSanitizer's tracer crashed at exit in all 3 tries; no leak check\n",
                name.c_str());
    s.rc = 0;
  }
  int n = 0;
  unsigned char* data = stbi_load(png.c_str(), &s.width, &s.height, &n, 4);
  if (data) {
    s.rgba.assign(data, data + std::size_t(s.width) * s.height * 4);
    stbi_image_free(data);
  }
  const auto at = s.out.find("geometry:");
  if (at != std::string::npos) {
    s.g.valid =
        std::sscanf(s.out.c_str() + at,
                    "geometry: x0=%f y0=%f w=%f h=%f cell=%f rows=%d cols=%d panX=%f panY=%f",
                    &s.g.x0, &s.g.y0, &s.g.w, &s.g.h, &s.g.cell, &s.g.rows, &s.g.cols, &s.g.panX,
                    &s.g.panY) == 9;
  }
  return s;
}

// `attnviz <args>` without a window: its output, with "(exit status not 0)" appended on failure.
inline std::string runCli(const std::string& args) {
  const testing::ShellRun r = testing::runShell(std::string(ATTNVIZ_BIN) + " " + args);
  return r.rc == 0 ? r.out : r.out + "\n(exit status not 0)";
}

// A shipped preset (assets/scenes) and a shipped model folder (assets/models).
inline std::string scene(const char* file) { return std::string(ATTNVIZ_SCENES) + "/" + file; }
inline std::string shippedModel(const std::string& name) {
  return std::string(ATTNVIZ_SCENES) + "/../models/" + name;
}

inline bool isMasked(RGBA8 c) { return c == kMaskedColor || c == kMaskedHatchColor; }

// Index of `c` in a colormap table, or -1 when it is not one of its entries.
inline int tableIndex(ColormapId id, RGBA8 c) {
  const auto& t = colormapTable(id);
  for (int k = 0; k < kColormapSize; ++k)
    if (t[k].r == c.r && t[k].g == c.g && t[k].b == c.b) return k;
  return -1;
}

// Whether `c` is the viridis colour of a value within one table step of `x` (in [0, 255]);
// neighbouring entries of the table can share an RGB8 colour, so indices are not compared.
inline bool viridisNear(RGBA8 c, double x) {
  const auto& t = colormapTable(ColormapId::Viridis);
  for (int k = std::max(0, int(std::floor(x)) - 1); k <= std::min(255, int(std::ceil(x)) + 1); ++k)
    if (t[k].r == c.r && t[k].g == c.g && t[k].b == c.b) return true;
  return false;
}

inline bool near(RGBA8 a, RGBA8 b, int tol) {
  return std::abs(a.r - b.r) <= tol && std::abs(a.g - b.g) <= tol && std::abs(a.b - b.b) <= tol;
}

#define ASSERT_RAN(shot)                                                 \
  ASSERT_EQ((shot).rc, 0) << (shot).out;                                 \
  ASSERT_GT((shot).width, 0) << "no screenshot decoded\n" << (shot).out; \
  ASSERT_TRUE((shot).g.valid) << "no geometry line\n" << (shot).out

// The number printed after `key` in `text`; NaN when `key` is missing.
inline double numberAfter(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return std::nan("");
  return std::atof(text.c_str() + at + key.size());
}

// The rest of the line after `key` in `out`; empty when `key` is missing.
inline std::string outLine(const std::string& out, const std::string& key) {
  const auto at = out.find(key);
  if (at == std::string::npos) return "";
  return out.substr(at + key.size(), out.find('\n', at) - at - key.size());
}

inline std::vector<unsigned char> fileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

// A PNG decoded to RGBA; width 0 when it does not decode.
struct Decoded {
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
};

inline Decoded decode(const std::string& path) {
  Decoded d;
  int n = 0;
  unsigned char* data = stbi_load(path.c_str(), &d.width, &d.height, &n, 4);
  if (data) {
    d.rgba.assign(data, data + std::size_t(d.width) * d.height * 4);
    stbi_image_free(data);
  }
  return d;
}

// The layers x heads grid of the model view and the dump view: "model-grid: ...".
struct ModelGrid {
  float x0 = 0, y0 = 0, thumb = 0, pitch = 0;
  int layers = 0, heads = 0;
  bool valid = false;
};

inline ModelGrid modelGrid(const std::string& out) {
  ModelGrid g;
  const auto at = out.find("model-grid:");
  if (at != std::string::npos)
    g.valid = std::sscanf(out.c_str() + at,
                          "model-grid: x0=%f y0=%f thumb=%f pitch=%f layers=%d heads=%d", &g.x0,
                          &g.y0, &g.thumb, &g.pitch, &g.layers, &g.heads) == 6;
  return g;
}

// What the row inspector printed: "row-inspector: row=... fully_masked=...".
struct InspectedRow {
  int row = -1, head = -1, pooled = -1, topKey = -1, allowed = -1, fullyMasked = -1;
  double topWeight = -1, sum = -1, entropy = -1;
};
inline bool parseInspectedRow(const std::string& out, InspectedRow& r) {
  const auto at = out.find("row-inspector: ");
  return at != std::string::npos &&
         std::sscanf(out.c_str() + at,
                     "row-inspector: row=%d head=%d pooled=%d top_key=%d top_weight=%lf sum=%lf "
                     "entropy=%lf allowed=%d fully_masked=%d",
                     &r.row, &r.head, &r.pooled, &r.topKey, &r.topWeight, &r.sum, &r.entropy,
                     &r.allowed, &r.fullyMasked) == 9;
}

}  // namespace attnviz::apptest
