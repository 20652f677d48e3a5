// App tests of the dump view: an attention dump's layers in the heatmap and the grid.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include <unistd.h>

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/dump.h"
#include "app_run.h"

#include <gtest/gtest.h>

#include <string>

using namespace attnviz::apptest;

namespace {

// ---- the dump view -----------------------------------------------------------------------------
// A dump written by the core's saveDump with weights made here: a 4 x 4 self layer and a 3 x 5
// cross layer, no Q/K/V. The pixels against those weights and their naive renormalisation.

attnviz::Tensor3 rowsOfOne(int H, int Tq, int Tk, int seed) {
  attnviz::Tensor3 w(H, Tq, Tk);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < Tq; ++i) {
      double sum = 0;
      for (int j = 0; j < Tk; ++j) sum += (w.at(h, i, j) = float(1 + (i * 7 + j * 3 + h * 5 + seed) % 11));
      for (int j = 0; j < Tk; ++j) w.at(h, i, j) = float(w.at(h, i, j) / sum);
    }
  return w;
}

std::string writeTestDump() {
  attnviz::Dump d;
  d.model = "test";
  d.tokens = {"a", "b", "c"};
  d.keyTokens = {"v", "w", "x", "y", "z"};
  attnviz::DumpLayer self, cross;
  self.name = "enc";
  self.axes = attnviz::DumpAxes::KeySelf;
  self.weights = rowsOfOne(2, 5, 5, 0);
  cross.name = "dec.cross";
  cross.axes = attnviz::DumpAxes::Cross;
  cross.weights = rowsOfOne(2, 3, 5, 1);
  d.layers = {self, cross};
  // Two tests write it, perhaps at once: each process its own file.
  const std::string path = tempPath("dump-" + std::to_string(::getpid()) + ".safetensors");
  attnviz::saveDump(path, d);
  return path;
}

TEST(AppDump, ACrossLayerShowsAsTqByTkInTheHeatmapAndTheGrid) {
  const std::string path = writeTestDump();
  const attnviz::Dump d = attnviz::loadDump(path);
  const Shot s = runApp("dump_cross", path + " --layer 1 --head 1");
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, 3);
  ASSERT_EQ(s.g.cols, 5);
  const attnviz::Tensor3& w = d.layers[1].weights;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      EXPECT_TRUE(viridisNear(s.cell(i, j), w.at(1, i, j) * 255.0)) << i << "," << j;
  EXPECT_NE(s.out.find("dump-layer: 1 qkv=0"), std::string::npos) << s.out;
  const ModelGrid g = modelGrid(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  ASSERT_EQ(g.layers, 2);
  // Every thumbnail, the cross layer a rectangle 3/5 as tall as it is wide.
  for (int l = 0; l < 2; ++l) {
    const attnviz::Tensor3& lw = d.layers[l].weights;
    const float tw = g.thumb, th = g.thumb * lw.rows / float(lw.cols);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < lw.rows; ++i)
        for (int j = 0; j < lw.cols; ++j) {
          const int x = int(g.x0 + h * g.pitch + (j + 0.5f) * tw / lw.cols);
          const int y = int(g.y0 + l * g.pitch + (i + 0.5f) * th / lw.rows);
          EXPECT_TRUE(viridisNear(s.pixel(x, y), lw.at(h, i, j) * 255.0))
              << "grid layer " << l << " head " << h << " cell " << i << "," << j;
        }
  }
  // Below the cross layer's rectangle: the panel's background, not a thumbnail.
  const RGBA8 below = s.pixel(int(g.x0 + g.thumb * 0.5f), int(g.y0 + g.pitch + g.thumb * 0.9f));
  EXPECT_EQ(tableIndex(attnviz::ColormapId::Viridis, below), -1);
}

TEST(AppDump, TheTemperatureRenormalisesTheRecordedWeights) {
  const std::string path = writeTestDump();
  const attnviz::Dump d = attnviz::loadDump(path);
  const Shot s = runApp("dump_tau", path + " --layer 0 --head 0 --temperature 0.5");
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, 5);
  const attnviz::Tensor3& w = d.layers[0].weights;
  for (int i = 0; i < 5; ++i) {
    double sum = 0;
    for (int j = 0; j < 5; ++j) sum += double(w.at(0, i, j)) * w.at(0, i, j);
    for (int j = 0; j < 5; ++j) {
      const double want = double(w.at(0, i, j)) * w.at(0, i, j) / sum;  // A^(1/tau), renormalised
      EXPECT_TRUE(viridisNear(s.cell(i, j), want * 255.0)) << i << "," << j << " want " << want;
    }
  }
  const Shot bad = runApp("dump_bad_layer", path + " --layer 2");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("--layer 2 is out of range"), std::string::npos) << bad.out;
}

}  // namespace
