// App tests of scene files: a saved scene reopens with its view and painted mask, and a scene's
// tensors from .npy files (written here by hand) drive the heatmap.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "app_run.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace attnviz::apptest;

namespace {

TEST(AppScenes, ASavedSceneReopensWithItsViewAndPaintedMask) {
  const std::string saved = tempPath("roundtrip.json");
  std::remove(saved.c_str());
  const Shot first = runApp("save",
                            "--scene " + scene("03-causal-triangle.json") +
                                " --select-row 4 --paint --click-cell 6,2 --save-scene " + saved,
                            8);
  ASSERT_RAN(first);
  ASSERT_TRUE(isMasked(first.cell(6, 2)));
  const Shot again = runApp("reopen", "--scene " + saved);
  ASSERT_RAN(again);
  EXPECT_TRUE(isMasked(again.cell(6, 2))) << "the painted cell did not survive save and load";
  EXPECT_FALSE(isMasked(again.cell(6, 1)));
  // Row 4 is still selected: its top edge is outlined.
  const int rowTop = int(std::floor(again.g.y0 + 4 * again.g.cell));
  bool found = false;
  for (int y = rowTop - 3; y <= rowTop + 1 && !found; ++y)
    found = near(again.pixel(int(again.g.x0 + again.g.w * 0.5f), y), RGBA8{255, 170, 30, 255}, 24);
  EXPECT_TRUE(found) << "the selected row did not survive save and load";
}

// A float32 .npy of shape [rows, cols] (C order), written by hand: no helper from the project.
void writeNpy(const std::string& path, int rows, int cols, const std::vector<float>& data) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const unsigned short len = static_cast<unsigned short>(header.size());
  out.put(char(len & 0xff));
  out.put(char(len >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()),
            std::streamsize(data.size() * sizeof(float)));
}

TEST(AppScenes, TensorsFromNpyFilesDriveTheHeatmap) {
  // Q = K = 10 I (T = 4, d = 4): s_ii = 100 / sqrt(4) = 50 and s_ij = 0, so each row's weight
  // is e^50 / (e^50 + 3) on the diagonal (1 to float precision) and about 6e-22 elsewhere.
  const int T = 4;
  std::vector<float> eye(T * T, 0.0f), v(T * T, 0.0f);
  for (int i = 0; i < T; ++i) eye[i * T + i] = 10.0f, v[i * T + i] = 1.0f;
  writeNpy(tempPath("q.npy"), T, T, eye);
  writeNpy(tempPath("k.npy"), T, T, eye);
  writeNpy(tempPath("v.npy"), T, T, v);
  const std::string sc = tempPath("files.json");
  std::ofstream(sc) << "{\"title\": \"from files\", \"query_text\": \"w x y z\", \"mode\": "
                       "\"self\", \"heads\": 1,"
                       " \"tensors\": {\"q\": \"attnviz_app_q.npy\", \"k\": \"attnviz_app_k.npy\","
                       " \"v\": \"attnviz_app_v.npy\"}}";
  const Shot s = runApp("files", "--scene " + sc);
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, T);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j)
      EXPECT_EQ(tableIndex(attnviz::ColormapId::Viridis, s.cell(i, j)), i == j ? 255 : 0)
          << i << "," << j;
}

}  // namespace
