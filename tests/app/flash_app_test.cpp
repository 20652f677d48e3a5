// App tests of the FlashAttention stage against the online softmax worked out here.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "attnviz/formats/npy.h"
#include "attnviz/render/raster.h"
#include "app_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace attnviz::apptest;

namespace {

// ---- the FlashAttention stage ----------------------------------------------------------------
// A causal scene over Q, K, V that the test writes itself, opened in the FlashAttention stage at
// a step and exported from the app: every cell of the PNG against the online softmax worked out
// here in double (the keys each row has seen so far, its max and sum over them).

struct FlashScene {
  int T = 0, d = 0;
  std::vector<float> q, k;  // [T, d]
  std::string path;
};

// Q, K, V of a simple 64-bit LCG in [-2.5, 2.5), saved as .npy beside a causal scene that opens
// in the FlashAttention stage with tiles br x bc.
FlashScene writeFlashScene(const std::string& tag, int T, int d, int br, int bc,
                           std::uint64_t seed) {
  FlashScene f;
  f.T = T, f.d = d;
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float((double(state >> 11) / double(1ull << 53) * 2.0 - 1.0) * 2.5);
  };
  std::vector<float> v(std::size_t(T) * d);
  f.q.resize(v.size());
  f.k.resize(v.size());
  for (auto* x : {&f.q, &f.k, &v})
    for (float& e : *x) e = next();
  const std::string dir = tempPath(tag + "-dir");
  std::filesystem::create_directories(dir);
  attnviz::saveNpy(dir + "/q.npy", {T, d}, f.q.data());
  attnviz::saveNpy(dir + "/k.npy", {T, d}, f.k.data());
  attnviz::saveNpy(dir + "/v.npy", {T, d}, v.data());
  std::string text;
  for (int i = 0; i < T; ++i) text += (i ? " t" : "t") + std::to_string(i);
  f.path = dir + "/scene.json";
  std::ofstream(f.path) << "{\"title\": \"flash test\", \"query_text\": \"" << text
                        << "\", \"mode\": \"causal\", \"heads\": 1, \"d_head\": " << d
                        << ", \"tensors\": {\"q\": \"q.npy\", \"k\": \"k.npy\", \"v\": \"v.npy\"},"
                        << " \"view\": {\"flash\": {\"blockRows\": " << br
                        << ", \"blockKeys\": " << bc << "}}}\n";
  return f;
}

double flashLogit(const FlashScene& f, int i, int j) {
  if (j > i) return -INFINITY;  // causal
  double dot = 0;
  for (int x = 0; x < f.d; ++x) dot += double(f.q[i * f.d + x]) * double(f.k[j * f.d + x]);
  return dot / std::sqrt(double(f.d));
}

struct ExportGeometry {
  int x0 = 0, y0 = 0, cell = 0;
  bool valid = false;
};
ExportGeometry exportGeometry(const std::string& out) {
  ExportGeometry g;
  const auto at = out.find("export-geometry:");
  if (at != std::string::npos)
    g.valid = std::sscanf(out.c_str() + at, "export-geometry: x0=%d y0=%d cell=%d", &g.x0, &g.y0,
                          &g.cell) == 3;
  return g;
}

// Checks the exported PNG of step `step` (counted from 1) of tiles br x bc: unvisited tiles grey,
// visited cells the viridis colour of exp(L - m) / l over the keys seen so far, masked cells
// masked, skipped tiles crossed in orange, the current tile outlined.
void expectFlashPicture(const FlashScene& f, const Decoded& png, const ExportGeometry& g, int br,
                        int bc, int step) {
  const int T = f.T, KB = (T + bc - 1) / bc;
  const int cur = step - 1, cqb = cur / KB, ckb = cur % KB;
  auto pixel = [&](int x, int y) {
    const unsigned char* p = &png.rgba[(std::size_t(y) * png.width + x) * 4];
    return RGBA8{p[0], p[1], p[2], p[3]};
  };
  int unvisited = 0, visited = 0;
  for (int i = 0; i < T; ++i) {
    const int qb = i / br;
    // Keys row i has seen after this step.
    const int seen = qb < cqb ? T : qb == cqb ? std::min(T, (ckb + 1) * bc) : 0;
    double m = -INFINITY, l = 0;
    for (int j = 0; j < seen; ++j) m = std::max(m, flashLogit(f, i, j));
    for (int j = 0; j < seen; ++j) l += std::exp(flashLogit(f, i, j) - m);
    for (int j = 0; j < T; ++j) {
      const int kb = j / bc;
      const int i1 = std::min(T, (qb + 1) * br) - 1;
      const bool skipped = kb * bc > i1;  // every cell of the tile is above the diagonal
      if (skipped) continue;
      const RGBA8 c = pixel(g.x0 + j * g.cell + g.cell / 2, g.y0 + i * g.cell + g.cell / 2);
      const bool tileVisited = qb * KB + kb <= cur;
      if (!tileVisited) {
        ++unvisited;
        EXPECT_EQ(c, attnviz::kFlashUnvisitedColor) << "unvisited cell (" << i << ", " << j << ")";
      } else if (j > i) {
        EXPECT_TRUE(isMasked(c)) << "masked cell (" << i << ", " << j << ")";
      } else {
        ++visited;
        const double w = std::exp(flashLogit(f, i, j) - m) / l;
        EXPECT_TRUE(viridisNear(c, w * 255.0))
            << "cell (" << i << ", " << j << ") is " << int(c.r) << "," << int(c.g) << ","
            << int(c.b) << ", the online softmax so far gives " << w;
      }
    }
  }
  if (step < (T + br - 1) / br * KB) {
    EXPECT_GT(unvisited, 0);
  }
  EXPECT_GT(visited, 0);
  // Skipped tiles carry the orange cross; the current tile its crimson outline.
  for (int qb = 0; qb * br < T; ++qb)
    for (int kb = 0; kb < KB; ++kb) {
      const int i0 = qb * br, i1 = std::min(T, i0 + br), j0 = kb * bc, j1 = std::min(T, j0 + bc);
      if (j0 <= i1 - 1) continue;
      int orange = 0;
      for (int y = g.y0 + i0 * g.cell; y < g.y0 + i1 * g.cell; ++y)
        for (int x = g.x0 + j0 * g.cell; x < g.x0 + j1 * g.cell; ++x)
          orange += pixel(x, y) == attnviz::kFlashSkippedColor;
      EXPECT_GT(orange, 0) << "skipped tile (" << qb << ", " << kb << ") is not crossed";
    }
  EXPECT_EQ(pixel(g.x0 + ckb * bc * g.cell + 1, g.y0 + cqb * br * g.cell + 1),
            attnviz::kFlashCurrentColor)
      << "the current tile is not outlined";
}

// "flash: ... <key>=<number>" from the scripted run's output; NAN when missing.
double flashField(const std::string& out, const std::string& key) {
  const auto line = out.find("flash: ");
  if (line == std::string::npos) return NAN;
  const auto at = out.find(" " + key + "=", line);
  if (at == std::string::npos) return NAN;
  return std::atof(out.c_str() + at + key.size() + 2);
}

TEST(AppFlash, AMiddleStepShowsTheOnlineSoftmaxSoFarAndGreyUnvisitedTiles) {
  // T = 21 is a multiple of neither 5 nor 7: the last row and column of tiles are short.
  const FlashScene f = writeFlashScene("flash-mid", 21, 16, 5, 7, 3);
  const std::string png = tempPath("flash-mid-export.png");
  std::remove(png.c_str());
  // Step 7 is query block 2 (rows 10-14) against key block 0 (keys 0-6): those rows allow keys
  // they have not seen yet, so their cells are provisional, larger than the final weights.
  const Shot s = runApp("flash-mid", "--scene " + f.path + " --flash-step 7 --export " + png, 5);
  ASSERT_RAN(s);
  EXPECT_EQ(flashField(s.out, "step"), 7) << s.out;
  EXPECT_EQ(flashField(s.out, "steps"), 15) << s.out;  // 5 query blocks x 3 key blocks
  EXPECT_EQ(flashField(s.out, "queryBlock"), 2) << s.out;
  EXPECT_EQ(flashField(s.out, "keyBlock"), 0) << s.out;
  const ExportGeometry g = exportGeometry(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  ASSERT_GE(g.cell, 8) << "cells too small to test";
  const Decoded d = decode(png);
  ASSERT_GT(d.width, 0) << s.out;
  expectFlashPicture(f, d, g, 5, 7, 7);
}

TEST(AppFlash, TheLastStepIsTheSoftmaxAndReportsItsDifferenceFromTheMaterialisedOne) {
  const FlashScene f = writeFlashScene("flash-end", 21, 16, 5, 7, 11);
  const std::string png = tempPath("flash-end-export.png");
  std::remove(png.c_str());
  // --flash-blocks overrides the scene's 5 x 7: 8 x 8 tiles over T = 21, 3 x 3 = 9 steps.
  const Shot s = runApp(
      "flash-end", "--scene " + f.path + " --flash-blocks 8x8 --flash-step 9 --export " + png, 5);
  ASSERT_RAN(s);
  EXPECT_EQ(flashField(s.out, "steps"), 9) << s.out;
  EXPECT_EQ(flashField(s.out, "done"), 1) << s.out;
  EXPECT_LE(flashField(s.out, "maxOutputDiff"), 1e-5) << s.out;
  EXPECT_LE(flashField(s.out, "maxWeightDiff"), 1e-5) << s.out;
  const ExportGeometry g = exportGeometry(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  const Decoded d = decode(png);
  ASSERT_GT(d.width, 0) << s.out;
  // At the last step every row has seen every key: the cells are the softmax itself.
  expectFlashPicture(f, d, g, 8, 8, 9);
}

TEST(AppFlash, TheWindowShowsTheOnlineSoftmaxSoFarToo) {
  const FlashScene f = writeFlashScene("flash-screen", 21, 16, 5, 7, 5);
  const Shot s = runApp("flash-screen", "--scene " + f.path + " --flash-step 4", 5);
  ASSERT_RAN(s);
  ASSERT_GE(s.g.cell, 4.0f) << "cells too small to test at this window size";
  Decoded shot;
  shot.width = s.width, shot.height = s.height, shot.rgba = s.rgba;
  expectFlashPicture(f, shot, ExportGeometry{int(s.g.x0), int(s.g.y0), int(s.g.cell), true}, 5, 7,
                     4);
}

TEST(AppFlash, BadFlashFieldsAndStepsAreRefusedWithOneLine) {
  const std::string bad = tempPath("flash-bad.json");
  std::ofstream(bad) << "{\"query_text\": \"a b c\", \"view\": {\"flash\": {\"blockRows\": 0}}}\n";
  const std::string png = tempPath("flash-bad.png");
  std::remove(png.c_str());
  std::string out = runCli("export --scene " + bad + " --png " + png);
  EXPECT_NE(out.find("view.flash.blockRows"), std::string::npos) << out;
  EXPECT_NE(out.find(bad), std::string::npos) << "the message names the file: " << out;
  EXPECT_NE(out.find("exit status"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << "one line, then the exit note: " << out;
  EXPECT_FALSE(std::filesystem::exists(png));
  // The app refuses the scene the same way, before it opens a window.
  out = runCli(bad + " --frames 1");
  EXPECT_NE(out.find("view.flash.blockRows"), std::string::npos) << out;
  EXPECT_NE(out.find("exit status"), std::string::npos) << out;
  // A step past the schedule: 3 tokens in 8 x 8 tiles are one step.
  const std::string one = tempPath("flash-one.json");
  std::ofstream(one) << "{\"query_text\": \"a b c\", \"mode\": \"causal\"}\n";
  out = runCli("export --scene " + one + " --png " + png + " --flash-step 2");
  EXPECT_NE(out.find("--flash-step 2"), std::string::npos) << out;
  EXPECT_NE(out.find("exit status"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(png));
}

}  // namespace
