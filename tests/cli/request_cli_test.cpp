// The request grammar's callers through the real binary: `attnviz model`, the window's command
// line (`attnviz --model ... --frames 1`, refused before a window opens), `export --scene` and
// an image model's `model`, `export --overlay` and window say the same words for the same bad string:
// the option's name (or the scene's file and field), then one text per kind of mistake, with the
// sizes read here from the model's config.json.
#include "run_binary.h"
#include "temp_dir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace attnviz::testing {
namespace {

const std::string kModels = std::string(ATTNVIZ_SCENES_DIR) + "/../models/";
const std::string kDecoder = kModels + "kjv-byte-2l";
const std::string kSeq2Seq = kModels + "kjv-t5-align";
const std::string kImage = kModels + "shapes-vit";

nlohmann::json config(const std::string& dir) {
  return nlohmann::json::parse(slurp(dir + "/config.json"));
}

// The one line of stderr a refusal prints, less the program's "attnviz: " or "attnviz model: ".
std::string refusal(const CliRun& r) {
  std::string line = r.err;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  EXPECT_EQ(line.find('\n'), std::string::npos) << r.err;
  return line;
}

// Runs a scene holding `model` (its "model" object) through `export --scene`.
CliRun exportScene(const TempDir& dir, const nlohmann::json& model) {
  const std::string scene = dir / "scene.json";
  std::ofstream(scene) << nlohmann::json{{"model", model}}.dump();
  return runBinary({"export", "--scene", scene, "--png", dir / "never.png"}, dir.path);
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(RequestCli, AMalformedAblationReadsTheSameInTheModelCommandAndTheWindow) {
  TempDir dir;
  const std::string says =
      "--ablate 1-2: expected LAYER:HEAD, enc:LAYER:HEAD or cross:LAYER:HEAD, e.g. 3:7";
  const CliRun model =
      runBinary({"model", "--model", kDecoder, "--text", "In the", "--ablate", "1-2"}, dir.path);
  EXPECT_EQ(model.exitCode, 2) << model.err;
  EXPECT_TRUE(endsWith(refusal(model), says)) << model.err;
  const CliRun window = runBinary(
      {"--model", kDecoder, "--text", "In the", "--ablate", "1-2", "--frames", "1"}, dir.path);
  EXPECT_EQ(window.exitCode, 2) << window.err;
  EXPECT_TRUE(endsWith(refusal(window), says)) << window.err;
}

TEST(RequestCli, AnAblationOutOfRangeReadsTheSameInEveryCaller) {
  TempDir dir;
  const nlohmann::json c = config(kDecoder);
  const int L = c["n_layer"], H = c["n_head"];
  const std::string bad = std::to_string(L) + ":0";
  const std::string sizes = ": out of range, the model has " + std::to_string(L) +
                            " layers and " + std::to_string(H) + " heads";
  const CliRun model =
      runBinary({"model", "--model", kDecoder, "--text", "In the", "--ablate", bad}, dir.path);
  EXPECT_EQ(model.exitCode, 2) << model.err;
  EXPECT_TRUE(endsWith(refusal(model), "--ablate " + bad + sizes)) << model.err;
  const CliRun window = runBinary(
      {"--model", kDecoder, "--text", "In the", "--ablate", bad, "--frames", "1"}, dir.path);
  EXPECT_EQ(window.exitCode, 2) << window.err;
  EXPECT_TRUE(endsWith(refusal(window), "--ablate " + bad + sizes)) << window.err;
  // A scene's field: a bad file (exit 1) named first.
  const CliRun scene =
      exportScene(dir, {{"path", kDecoder}, {"text", "In the"}, {"ablate", {bad}}});
  EXPECT_EQ(scene.exitCode, 1) << scene.err;
  EXPECT_TRUE(endsWith(refusal(scene), dir / "scene.json" + ": model.ablate " + bad + sizes))
      << scene.err;
}

TEST(RequestCli, AnEncoderDecodersSiteAblationOutOfRangeReadsTheSameInEveryCaller) {
  TempDir dir;
  const nlohmann::json c = config(kSeq2Seq);
  const int D = c["num_decoder_layers"], H = c["num_heads"];
  const std::string bad = "cross:" + std::to_string(D) + ":0";
  const std::string says = bad + ": out of range, the decoder has " + std::to_string(D) +
                           " layers and " + std::to_string(H) + " heads";
  const CliRun model = runBinary({"model", "--model", kSeq2Seq, "--text", "i will", "--target",
                                  "x", "--ablate", bad},
                                 dir.path);
  EXPECT_EQ(model.exitCode, 2) << model.err;
  EXPECT_TRUE(endsWith(refusal(model), "--ablate " + says)) << model.err;
  const CliRun window = runBinary(
      {"--model", kSeq2Seq, "--text", "i will", "--ablate", bad, "--frames", "1"}, dir.path);
  EXPECT_EQ(window.exitCode, 2) << window.err;
  EXPECT_TRUE(endsWith(refusal(window), "--ablate " + says)) << window.err;
  const CliRun scene =
      exportScene(dir, {{"path", kSeq2Seq}, {"text", "i will"}, {"ablate", {bad}}});
  EXPECT_EQ(scene.exitCode, 1) << scene.err;
  EXPECT_TRUE(endsWith(refusal(scene), dir / "scene.json" + ": model.ablate " + says))
      << scene.err;
  // On a model with one site per layer, the same ablation is refused by name.
  const std::string one = "--ablate cross:0:0: gpt2 has one attention site per layer (use L:H)";
  const CliRun decoder = runBinary(
      {"model", "--model", kDecoder, "--text", "In the", "--ablate", "cross:0:0"}, dir.path);
  EXPECT_EQ(decoder.exitCode, 2) << decoder.err;
  EXPECT_TRUE(endsWith(refusal(decoder), one)) << decoder.err;
  const CliRun decoderWindow = runBinary(
      {"--model", kDecoder, "--text", "In the", "--ablate", "cross:0:0", "--frames", "1"},
      dir.path);
  EXPECT_EQ(decoderWindow.exitCode, 2) << decoderWindow.err;
  EXPECT_TRUE(endsWith(refusal(decoderWindow), one)) << decoderWindow.err;
  // A decoder's scene with it: the same words, as the app's scene loading says them.
  const CliRun decoderScene =
      exportScene(dir, {{"path", kDecoder}, {"text", "In the"}, {"ablate", {"cross:0:0"}}});
  EXPECT_EQ(decoderScene.exitCode, 1) << decoderScene.err;
  EXPECT_TRUE(endsWith(refusal(decoderScene), dir / "scene.json" + ": model." + one.substr(2)))
      << decoderScene.err;
}

TEST(RequestCli, AMalformedMaskSourceReadsTheSameInTheModelCommandAndTheWindow) {
  TempDir dir;
  const std::string says = "--mask-source: expected source positions separated by commas, got 'x'";
  const CliRun model = runBinary({"model", "--model", kSeq2Seq, "--text", "i will", "--target",
                                  "x", "--mask-source", "1,x"},
                                 dir.path);
  EXPECT_EQ(model.exitCode, 2) << model.err;
  EXPECT_TRUE(endsWith(refusal(model), says)) << model.err;
  const CliRun window = runBinary(
      {"--model", kSeq2Seq, "--text", "i will", "--mask-source", "1,x", "--frames", "1"}, dir.path);
  EXPECT_EQ(window.exitCode, 2) << window.err;
  EXPECT_TRUE(endsWith(refusal(window), says)) << window.err;
}

TEST(RequestCli, AnImageModelsMalformedAblationReadsTheSameInModelExportOverlayAndTheWindow) {
  TempDir dir;
  const std::string image = kImage + "/examples/circle.png";
  const std::string says = "--ablate 0:1,x: expected LAYER:HEAD, e.g. 3:7";
  const CliRun model = runBinary(
      {"model", "--model", kImage, "--image", image, "--ablate", "0:1,x"}, dir.path);
  EXPECT_EQ(model.exitCode, 2) << model.err;
  EXPECT_TRUE(endsWith(refusal(model), says)) << model.err;
  const CliRun overlay =
      runBinary({"export", "--model", kImage, "--image", image, "--overlay", "--layer", "0",
                 "--ablate", "0:1,x", "--png", dir / "never.png"},
                dir.path);
  EXPECT_EQ(overlay.exitCode, 2) << overlay.err;
  EXPECT_TRUE(endsWith(refusal(overlay), says)) << overlay.err;
  const CliRun window = runBinary(
      {"--model", kImage, "--image", image, "--ablate", "0:1,x", "--frames", "1"}, dir.path);
  EXPECT_EQ(window.exitCode, 2) << window.err;
  EXPECT_TRUE(endsWith(refusal(window), says)) << window.err;
}

// The description --help prints for `option`: from CLI11's column 30, on the option's line or,
// when its names and flags run past the column, the next. "" when the option is not listed.
std::string helpOf(const std::string& help, const std::string& option) {
  constexpr std::size_t kColumn = 30;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  " + option + " ", 0) != 0) continue;
    if (line.size() > kColumn && line[kColumn - 1] == ' ') return line.substr(kColumn);
    std::getline(in, line);
    return line.size() > kColumn ? line.substr(kColumn) : "";
  }
  return "";
}

// The window registers the model options through `attnviz model`'s functions: one text each.
TEST(RequestCli, TheWindowsModelOptionsAreDescribedAsTheModelCommandsAre) {
  TempDir dir;
  const CliRun window = runBinary({"--help"}, dir.path);
  const CliRun model = runBinary({"model", "--help"}, dir.path);
  ASSERT_EQ(window.exitCode, 0) << window.err;
  ASSERT_EQ(model.exitCode, 0) << model.err;
  for (const char* option : {"--model", "--text", "--text-pair", "--chat", "--system", "--target",
                             "--mask-source", "--ablate", "--max-memory"}) {
    const std::string w = helpOf(window.out, option), m = helpOf(model.out, option);
    EXPECT_FALSE(m.empty()) << option << " is not in attnviz model --help";
    EXPECT_EQ(w, m) << option;
  }
}

}  // namespace
}  // namespace attnviz::testing
