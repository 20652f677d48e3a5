// App tests of model views saved as scenes: they keep their model, export as the app shows them
// and reopen to the same JSON.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "app_run.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

using namespace attnviz::apptest;

namespace {

// ---- a model view saved as a scene keeps its model ----------------------------------------------
// A model view with an ablation, a mask and a temperature in layer 1, RoPE-free layer 0 aside (the
// GPT-2 model has learned positions): the scene file a user saves after "Mask and τ → this layer".
std::string interventionScene(bool withInterventions = true) {
  const std::string path =
      tempPath(withInterventions ? "model-iv-scene.json" : "model-iv-plain-scene.json");
  std::ofstream f(path);
  f << R"({"title": "masked model view", "model": {"path": "kjv-byte-2l",
      "text": "In the beginning God created the heaven and the earth", "layer": 1, "head": 2,
      "ablate": ["0:1"])";
  if (withInterventions)
    f << R"(, "interventions": [{"layer": 1, "temperature": 0.5, "mask": {"window": 6, "sink": 1}},
        {"layer": 0, "mask": {"expr": "q - k <= 3"}}])";
  f << "}}\n";
  return path;
}

// The model's own figures from the Export dialog: the value-weighted and rollout stages while
// the view shows them, and the layers x heads grid (--export-grid, the dialog's checkbox), are
// `export --scene` (with --grid for the grid) of the saved scene byte for byte, as PNG and SVG.
TEST(AppModelScenes, StagesAndTheLayersByHeadsGridExportAsTheCommandLineDoes) {
  const std::string model = std::string(ATTNVIZ_SCENES) + "/../models/kjv-byte-2l";
  const std::string base = "--model " + model + " --text 'In the beginning God' --layer 1 --head 2";
  struct Case {
    std::string id, args, ext, cliExtra, titleWord;
  };
  const std::vector<Case> cases = {
      {"vw", base + " --stage value_weighted", "png", "", ""},
      {"ro", base + " --stage rollout", "svg", "", "Attention rollout"},
      {"grid", base + " --ablate 1:2 --export-grid", "svg", " --grid", "every layer"},
      {"gridpng", base + " --export-grid", "png", " --grid", ""},
  };
  for (const Case& c : cases) {
    const std::string tag = "model-figure-" + c.id;
    const std::string gui = tempPath(tag + "-gui." + c.ext), cli = tempPath(tag + "-cli." + c.ext);
    const std::string saved = tempPath(tag + ".json");
    for (const auto& f : {gui, cli, saved}) std::remove(f.c_str());
    const Shot s = runApp(tag, c.args + " --export " + gui + " --save-scene " + saved, 6);
    ASSERT_RAN(s);
    const std::string out = runCli("export --scene " + saved + c.cliExtra + " --" + c.ext + " " + cli);
    ASSERT_EQ(out.find("exit status"), std::string::npos) << c.id << ": " << out;
    const std::vector<unsigned char> a = fileBytes(gui), b = fileBytes(cli);
    ASSERT_GT(a.size(), 100u) << c.id << ": the app wrote nothing\n" << s.out;
    EXPECT_TRUE(a == b) << c.id << ": the files differ";
    if (!c.titleWord.empty()) {
      EXPECT_NE(std::string(a.begin(), a.end()).find(c.titleWord), std::string::npos) << c.id;
    }
  }
  // The stages are themselves, not the weights: the three PNGs differ.
  const std::string w = tempPath("model-figure-w.png");
  runCli("export --model " + model + " --text 'In the beginning God' --layer 1 --head 2 --png " + w);
  EXPECT_FALSE(fileBytes(w) == fileBytes(tempPath("model-figure-vw-gui.png")));
}

// Open a model view, --save-scene it: `export --scene` of the saved file draws the app's own export
// of that view byte for byte, and reopening the saved scene and saving it again gives the same JSON.
// One test per view (three processes each), so that ctest spreads them over the cores.
struct SavedView {
  std::string id, args;
};
void PrintTo(const SavedView& v, std::ostream* os) { *os << v.id; }
std::string modelFolder() { return std::string(ATTNVIZ_SCENES) + "/../models/kjv-byte-2l"; }

class AppModelSavedView : public ::testing::TestWithParam<SavedView> {};

TEST_P(AppModelSavedView, ExportsAsTheAppShowsItAndReopensToTheSameJson) {
  const std::string id = GetParam().id;
  const std::string args = GetParam().args == "iv" ? "--scene " + interventionScene()
                                                   : GetParam().args;
  const std::string tag = "model-save-" + id;
  const std::string gui = tempPath(tag + "-gui.png"), cli = tempPath(tag + "-cli.png");
  const std::string saved = tempPath(tag + ".json"), again = tempPath(tag + "-again.json");
  for (const auto& f : {gui, cli, saved, again}) std::remove(f.c_str());
  const Shot s = runApp(tag, args + " --export " + gui + " --save-scene " + saved, 6);
  ASSERT_RAN(s);
  const std::vector<unsigned char> json = fileBytes(saved);
  ASSERT_FALSE(json.empty()) << id << ": no scene saved\n" << s.out;
  ASSERT_NE(std::string(json.begin(), json.end()).find("\"model\""), std::string::npos)
      << id << ": the saved scene has no model\n" << std::string(json.begin(), json.end());
  const std::string out = runCli("export --scene " + saved + " --png " + cli);
  ASSERT_EQ(out.find("exit status"), std::string::npos) << id << ": " << out;
  ASSERT_FALSE(fileBytes(gui).empty()) << id << ": the app wrote no PNG\n" << s.out;
  EXPECT_TRUE(fileBytes(gui) == fileBytes(cli)) << id << ": the PNG files differ";
  const Shot r = runApp(tag + "-reopen", "--scene " + saved + " --save-scene " + again, 6);
  ASSERT_RAN(r);
  const std::vector<unsigned char> json2 = fileBytes(again);
  EXPECT_EQ(std::string(json.begin(), json.end()), std::string(json2.begin(), json2.end()))
      << id << ": reopen and save again changed the scene";
  if (id != "iv") return;
  // The interventions ran: the plain view (same ablation, no mask or τ) draws other pixels,
  // and the saved scene lists them.
  const std::string with = tempPath("model-iv-with.png"), plain = tempPath("model-iv-plain.png");
  runCli("export --scene " + interventionScene(true) + " --png " + with);
  runCli("export --scene " + interventionScene(false) + " --png " + plain);
  ASSERT_FALSE(fileBytes(with).empty());
  EXPECT_FALSE(fileBytes(with) == fileBytes(plain)) << "the scene's interventions were ignored";
  const std::string text(json.begin(), json.end());
  EXPECT_NE(text.find("\"interventions\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"temperature\": 0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("q - k <= 3"), std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(
    Views, AppModelSavedView,
    ::testing::Values(
        SavedView{"13", "--scene " + scene("13-model-previous-token-head.json")},
        SavedView{"15", "--scene " + scene("15-model-induction-heads.json")},
        SavedView{"16", "--scene " + scene("16-model-ablate-induction-head.json")},
        SavedView{"17", "--scene " + scene("17-grouped-query-attention.json")},
        SavedView{"18", "--scene " + scene("18-rope.json")},
        SavedView{"19", "--scene " + scene("19-induction-on-english.json")},
        SavedView{"20", "--scene " + scene("20-watch-it-write.json")},
        SavedView{"21", "--scene " + scene("21-ablate-and-watch-it-forget.json")},
        SavedView{"24", "--scene " + scene("24-local-and-global-layers.json")},
        // a model view on a score stage (the capped scores): the CLI takes the stage from the view
        SavedView{"25", "--scene " + scene("25-soft-capping.json")},
        SavedView{"26", "--scene " + scene("26-what-rope-frequencies-carry.json")},
        // an encoder (kjv-wp-bert): no causal mask
        SavedView{"30", "--scene " + scene("30-bidirectional-every-row-sees-every-key.json")},
        SavedView{"31", "--scene " + scene("31-sep-as-a-no-op.json")},
        SavedView{"ab", "--model " + modelFolder() +
                            " --text 'In the beginning God' --layer 1 --head 1 --ablate 1:2"},
        // the intervention scene, written by the test (interventionScene())
        SavedView{"iv", "iv"}),
    [](const ::testing::TestParamInfo<SavedView>& info) { return "View" + info.param.id; });

// A saved scene whose model folder is gone names the path it looked for.
TEST(AppModelScenes, ASavedSceneWhoseModelIsGoneNamesThePath) {
  const std::string gone = tempPath("model-save-gone.json");
  std::ofstream(gone) << "{\"model\": {\"path\": \"no-such-model-24\", \"text\": \"the cat\"}}";
  const std::string out = runCli("export --scene " + gone + " --png " + tempPath("never24.png"));
  EXPECT_NE(out.find("no-such-model-24"), std::string::npos) << out;
  EXPECT_NE(out.find("exit status not 0"), std::string::npos) << out;
}

}  // namespace
