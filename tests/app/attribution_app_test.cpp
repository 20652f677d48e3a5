// App tests of the Attribution panel against `attnviz attribute`.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "attnviz/formats/npy.h"
#include "app_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace attnviz::apptest;

namespace {

// ---- the Attribution panel ---------------------------------------------------------------------
// The "Which heads copy?" preset runs a zero-ablation sweep as it opens. Against
// `attnviz attribute` on the same text: the panel's export is the command line's --png byte for
// byte, the values it shows are --out's, and each cell of the map on screen has the diverging
// colour of its --out value (0 in the middle, the largest |value| at the ends). --out also says
// the induction head 1:2 is the largest drop and layer 0's largest is the previous-token head 0:3.
// A scripted click on cell 0,3 shows that head.

const std::string kShippedModel = std::string(ATTNVIZ_SCENES) + "/../models/kjv-byte-2l";
const std::string kCopyText = "The key is 8g3kx-vq2m-pl7w. Again, the key is 8g3k";

std::vector<double> csvAfter(const std::string& out, const std::string& key) {
  std::vector<double> v;
  const auto at = out.find(key);
  if (at == std::string::npos) return v;
  std::istringstream in(out.substr(at + key.size(), out.find('\n', at) - at - key.size()));
  for (std::string x; std::getline(in, x, ',');) v.push_back(std::stod(x));
  return v;
}

struct AttrGrid {
  float x0 = 0, y0 = 0, cell = 0;
  int rows = 0, cols = 0;
  bool valid = false;
};

AttrGrid attrGrid(const std::string& out) {
  AttrGrid g;
  const auto at = out.find("attribution-grid:");
  if (at != std::string::npos)
    g.valid = std::sscanf(out.c_str() + at, "attribution-grid: x0=%f y0=%f cell=%f rows=%d cols=%d",
                          &g.x0, &g.y0, &g.cell, &g.rows, &g.cols) == 5;
  return g;
}

TEST(AppAttribution, TheWhichHeadsCopyPresetFindsTheInductionHeadAndDrawsTheCommandLinesFigure) {
  const std::string gui = tempPath("attr-gui.png"), cli = tempPath("attr-cli.png");
  const std::string npy = tempPath("attr-delta.npy");
  for (const auto& f : {gui, cli, npy}) std::remove(f.c_str());
  const Shot s = runApp("attr-preset", "--scene " + scene("22-model-which-heads-copy.json") +
                                           " --attribution-export " + gui +
                                           " --attribution-click 0,3");
  ASSERT_RAN(s);
  const std::string out = runCli("attribute --model " + kShippedModel + " --text " +
                                 shellQuote(kCopyText) + " --ablate-sweep zero --out " + npy +
                                 " --png " + cli);
  ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
  ASSERT_FALSE(fileBytes(gui).empty()) << "the panel exported nothing\n" << s.out;
  EXPECT_TRUE(fileBytes(gui) == fileBytes(cli)) << "the panel's PNG is not attribute --png's";

  const attnviz::NpyArray d = attnviz::readNpy(npy);
  ASSERT_EQ(d.shape.size(), 2u);
  const int L = int(d.shape[0]), H = int(d.shape[1]);
  // The sweep's findings, from the command line's numbers.
  const auto worst = std::min_element(d.data.begin(), d.data.end()) - d.data.begin();
  EXPECT_EQ(worst, 1 * H + 2) << "the largest drop is not the induction head 1:2";
  const auto worst0 = std::min_element(d.data.begin(), d.data.begin() + H) - d.data.begin();
  EXPECT_EQ(worst0, 3) << "layer 0's largest drop is not the previous-token head 0:3";
  // The values the panel holds are --out's, exactly.
  const std::vector<double> shown = csvAfter(s.out, "attribution-values: ");
  ASSERT_EQ(int(shown.size()), L * H) << s.out;
  for (int k = 0; k < L * H; ++k) EXPECT_EQ(float(shown[k]), d.data[k]) << "cell " << k;
  // The map's pixels: each cell's centre in the diverging colour of its --out value.
  const AttrGrid g = attrGrid(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  ASSERT_EQ(g.rows, L);
  ASSERT_EQ(g.cols, H);
  ASSERT_GE(g.cell, 6.0f);
  float range = 0;
  for (float v : d.data) range = std::max(range, std::fabs(v));
  ASSERT_GT(range, 0.0f);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const float v = d.data[std::size_t(l) * H + h];
      const RGBA8 want =
          attnviz::colormapLookup(attnviz::ColormapId::Diverging, (v + range) / (2 * range));
      const int x = int(g.x0 + (h + 0.5f) * g.cell), y = int(g.y0 + (l + 0.5f) * g.cell);
      ASSERT_LT(x, s.width);
      ASSERT_LT(y, s.height);
      EXPECT_TRUE(near(s.pixel(x, y), want, 1)) << "map cell " << l << "," << h << " value " << v;
    }
  // The click on cell 0,3 shows layer 0 head 3 in the heatmap.
  EXPECT_NE(s.out.find("model-view: layer=0 head=3"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("model-layer: 0"), std::string::npos) << s.out;
}

// The patching preset: the model's text is the corrupted run (the first copy of the key has 'z'
// where the clean one has 'x'); the panel's export is `attribute --patch-from`'s figure, and the
// induction head 1:2 restores the most of the logit difference.
TEST(AppAttribution, ThePatchingPresetExportsTheCommandLinesFigure) {
  const std::string gui = tempPath("attr-patch-gui.png"), cli = tempPath("attr-patch-cli.png");
  const std::string npy = tempPath("attr-patch.npy");
  for (const auto& f : {gui, cli, npy}) std::remove(f.c_str());
  const Shot s = runApp("attr-patch", "--scene " + scene("23-model-patching-the-copied-span.json") +
                                          " --attribution-export " + gui);
  ASSERT_RAN(s);
  std::string corrupt = kCopyText;
  corrupt[corrupt.find("8g3kx") + 4] = 'z';  // the first copy's "8g3kx" becomes "8g3kz"
  const std::string out =
      runCli("attribute --model " + kShippedModel + " --text " + shellQuote(corrupt) +
             " --patch-from " + shellQuote(kCopyText) + " --out " + npy + " --png " + cli);
  ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
  ASSERT_FALSE(fileBytes(gui).empty()) << "the panel exported nothing\n" << s.out;
  EXPECT_TRUE(fileBytes(gui) == fileBytes(cli)) << "the panel's PNG is not attribute --png's";
  const attnviz::NpyArray d = attnviz::readNpy(npy);
  const std::vector<double> shown = csvAfter(s.out, "attribution-values: ");
  ASSERT_EQ(shown.size(), d.data.size()) << s.out;
  for (std::size_t k = 0; k < shown.size(); ++k) EXPECT_EQ(float(shown[k]), d.data[k]) << k;
  const auto best = std::max_element(d.data.begin(), d.data.end()) - d.data.begin();
  EXPECT_EQ(best, 1 * int(d.shape[1]) + 2) << "the induction head does not restore the most";
}

// The scene keeps the panel's settings: the preset saved, reopened and saved again gives the same
// bytes, with the "attribution" object in its model; a bad method is refused naming the file.
TEST(AppAttribution, TheSettingsRoundTripThroughASavedScene) {
  const std::string a = tempPath("attr-save-a.json"), b = tempPath("attr-save-b.json");
  for (const auto& f : {a, b}) std::remove(f.c_str());
  const Shot s = runApp("attr-save", "--scene " + scene("23-model-patching-the-copied-span.json") +
                                         " --save-scene " + a);
  ASSERT_RAN(s);
  const std::vector<unsigned char> ja = fileBytes(a);
  const std::string text(ja.begin(), ja.end());
  ASSERT_NE(text.find("\"attribution\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"method\": \"patch\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"clean\": \"" + kCopyText + "\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"run\": true"), std::string::npos) << text;
  const Shot r = runApp("attr-save-again", "--scene " + a + " --save-scene " + b);
  ASSERT_RAN(r);
  const std::vector<unsigned char> jb = fileBytes(b);
  EXPECT_EQ(text, std::string(jb.begin(), jb.end()));
  // A model view that never used the panel saves no attribution object.
  const std::string c = tempPath("attr-save-none.json");
  std::remove(c.c_str());
  const Shot n = runApp("attr-save-none", "--scene " + scene("15-model-induction-heads.json") +
                                              " --save-scene " + c, 4);
  ASSERT_RAN(n);
  const std::vector<unsigned char> jc = fileBytes(c);
  EXPECT_EQ(std::string(jc.begin(), jc.end()).find("attribution"), std::string::npos);

  const std::string bad = tempPath("attr-bad.json");
  std::ofstream(bad) << "{\"model\": {\"path\": \"kjv-byte-2l\", \"text\": \"the cat\", "
                        "\"attribution\": {\"method\": \"halve\"}}}";
  const std::string out = runCli("export --scene " + bad + " --png " + tempPath("never21.png"));
  EXPECT_NE(out.find(bad + ": model.attribution.method must be zero, mean or patch"),
            std::string::npos)
      << out;
}

}  // namespace
