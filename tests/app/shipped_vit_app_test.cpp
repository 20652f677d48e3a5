// The shipped ViT's presets (assets/scenes/46-48) in the app: each opens the image view on the
// shipped folder (assets/models/shapes-vit) and its example picture with the scene's layer, head,
// token and rollout (the scripted image-view: line says so), and the app's export of it is byte
// for byte `attnviz export --scene` of the preset. The figures the notes quote are checked through
// the binary in tests/model/shipped_vit_test.cpp (ShippedVitPresets).
#include "run_shell.h"

#include "attnviz/formats/fileio.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using attnviz::testing::runShell;
using attnviz::testing::runUnderXvfb;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;
namespace fs = std::filesystem;

namespace {

class ShippedVitPresetsApp : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) /
          ("attnviz_shipped_vit_" + std::to_string(::getpid()) + "_" + GetParam().substr(0, 2));
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path dir;
};

}  // namespace

TEST_P(ShippedVitPresetsApp, OpensTheImageViewTheSceneNamesAndExportsItsFigure) {
  const std::string scene = std::string(ATTNVIZ_SCENES) + "/" + GetParam();
  nlohmann::json j;
  {
    std::ifstream f(scene);
    j = nlohmann::json::parse(f);
  }
  const nlohmann::json& v = j["view"];
  const std::string app = (dir / "app.png").string(), cli = (dir / "cli.png").string();
  const ShellRun a = runUnderXvfb(
      std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x800x24\" " + ATTNVIZ_BIN +
      " --size 1280x800 --frames 6 --screenshot " + shellQuote((dir / "shot.png").string()) +
      " --scene " + shellQuote(scene) + " --export " + shellQuote(app));
  ASSERT_EQ(a.rc, 0) << a.out;
  // "cls" is the default token (-1, labelled CLS); a patch is its token index
  const std::string token =
      v["token"].is_string() ? "-1 label=CLS" : std::to_string(v["token"].get<int>());
  const std::string want = "image-view: layer=" + std::to_string(v["layer"].get<int>()) +
                           " head=" + std::to_string(v["head"].get<int>()) +
                           " average=0 token=" + token;
  EXPECT_NE(a.out.find(want), std::string::npos) << want << "\n" << a.out;
  EXPECT_NE(a.out.find(std::string(" rollout=") + (v["rollout"].get<bool>() ? "1" : "0")),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("exported: "), std::string::npos) << a.out;
  const ShellRun c = runShell(std::string(ATTNVIZ_BIN) + " export --scene " + shellQuote(scene) +
                              " --png " + shellQuote(cli));
  ASSERT_EQ(c.rc, 0) << c.out;
  const std::string x = attnviz::readFile(app), y = attnviz::readFile(cli);
  ASSERT_GT(y.size(), 10000u);
  EXPECT_TRUE(x == y) << "the app's export (" << x.size() << " bytes) differs from export --scene ("
                      << y.size() << " bytes)";
}

INSTANTIATE_TEST_SUITE_P(Presets46To48, ShippedVitPresetsApp,
                         ::testing::Values("46-where-the-classifier-looks.json",
                                           "47-one-patchs-row-over-the-image.json",
                                           "48-rollout-attention-through-the-layers.json"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return "preset" + info.param.substr(0, 2);
                         });
