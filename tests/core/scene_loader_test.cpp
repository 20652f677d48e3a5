// The scene loader on numbers that do not fit their fields: refused with one line naming the
// field, before any conversion (a 10-minute fuzz run once found 1.67e113 as a custom-mask
// dimension reaching an integer conversion, which is undefined behaviour). The regression
// inputs live in tests/fuzz/corpus/scene, so the fuzzer starts from them too.
#include "attnviz/formats/scene.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace attnviz {
namespace {

std::string refusal(const std::string& json) {
  try {
    sceneFromJson(json, "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string corpus(const char* name) {
  std::ifstream f(std::string(ATTNVIZ_TEST_DATA_DIR) + "/fuzz/corpus/scene/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(SceneLoaderNumbers, AHugeCustomMaskDimensionIsRefusedNamingTheField) {
  const std::string e = refusal(corpus("huge_custom_shape.json"));
  EXPECT_NE(e.find("s.json"), std::string::npos) << e;
  EXPECT_NE(e.find("mask.custom.shape"), std::string::npos) << e;
}

TEST(SceneLoaderNumbers, IntegersBeyondTheirRangeAreRefusedNamingTheField) {
  EXPECT_NE(refusal(R"({"heads": 18446744073709551615})").find("'heads'"), std::string::npos);
  EXPECT_NE(refusal(R"({"heads": -9223372036854775808})").find("'heads'"), std::string::npos);
  EXPECT_NE(refusal(R"({"heads": 4.5})").find("'heads'"), std::string::npos);
  EXPECT_NE(refusal(R"({"mask": {"window": 1e20}})").find("'window'"), std::string::npos);
  EXPECT_NE(refusal(R"({"decode_step": 1e300})").find("'decode_step'"), std::string::npos);
  EXPECT_NE(refusal(R"({"mask": {"custom": {"shape": [1, -2, 2], "data": []}}})")
                .find("mask.custom.shape"),
            std::string::npos);
}

TEST(SceneLoaderNumbers, FloatsBeyondAFloatAreRefusedNamingTheField) {
  EXPECT_NE(refusal(R"({"temperature": 1e300})").find("'temperature'"), std::string::npos);
  EXPECT_NE(refusal(R"({"sharpness": -1e39})").find("'sharpness'"), std::string::npos);
  EXPECT_NE(refusal(corpus("huge_numbers.json")).find("s.json"), std::string::npos);
  EXPECT_NE(refusal(R"({"query_text": "a b", "mask": {"custom": {"kind": "bias",
      "shape": [1, 2, 1], "data": [1e300, 0]}}})")
                .find("mask.custom.data"),
            std::string::npos);
}

TEST(SceneLoaderNumbers, TheSavedViewIsRangeCheckedToo) {
  EXPECT_NE(refusal(R"({"view": {"head": 1e30}})").find("view.head"), std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"zoom": 1e39}})").find("view.zoom"), std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"wrongAxis": 3}})").find("view.wrongAxis"), std::string::npos);
  EXPECT_NE(refusal(corpus("old_painted_view.json")).find("view."), std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"painted": {"rows": 2, "cols": 2, "blocked": [[1e20, 0]]}}})")
                .find("view.painted.blocked"),
            std::string::npos);
}

TEST(SceneLoaderFlash, TheFlashStageRoundTripsThroughSaveAndLoad) {
  const Scene s = sceneFromJson(
      R"({"query_text": "a b c", "view": {"flash": {"blockRows": 5, "blockKeys": 7,
          "step": 3}}})",
      "flash.json");
  const SceneView v =
      parseSceneView(sceneFromJson(sceneToJson(s), "again.json").extraJson, "again.json");
  EXPECT_TRUE(v.flashOn);
  EXPECT_EQ(v.flashBlockRows, 5);
  EXPECT_EQ(v.flashBlockKeys, 7);
  EXPECT_EQ(v.flashStep, 3);
  EXPECT_FALSE(parseSceneView(R"({"stage": "weights"})", "x.json").flashOn);
  EXPECT_FALSE(parseSceneView(R"({"flash": {"on": false}})", "x.json").flashOn);
}

TEST(SceneLoaderFlash, FlashFieldsOutOfRangeAreRefusedNamingTheField) {
  EXPECT_NE(refusal(R"({"view": {"flash": {"blockRows": 0}}})").find("view.flash.blockRows"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"flash": {"blockKeys": 70000}}})").find("view.flash.blockKeys"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"flash": {"step": -1}}})").find("view.flash.step"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"flash": {"step": 1e40}}})").find("view.flash.step"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"flash": {"on": 1}}})").find("view.flash.on"), std::string::npos);
  EXPECT_NE(refusal(R"({"view": {"flash": 8}})").find("view.flash"), std::string::npos);
  // The same rule for the block overlay: 0 is a number below the range, not a pass.
  EXPECT_NE(refusal(R"({"view": {"blocks": {"rows": 0}}})").find("view.blocks.rows"),
            std::string::npos);
}

TEST(SceneLoaderNumbers, GoodNumbersStillLoad) {
  const Scene s = sceneFromJson(
      R"({"query_text": "a b", "heads": 3, "temperature": 0.5, "mask": {"window": 2,
          "custom": {"kind": "bias", "shape": [1, 2, 2], "data": [0.5, null, 0, -1]}},
          "view": {"head": 2, "zoom": 2.5}})",
      "ok.json");
  EXPECT_EQ(s.heads, 3);
  EXPECT_FLOAT_EQ(s.params.temperature, 0.5f);
  EXPECT_EQ(s.params.mask.window, 2);
  ASSERT_EQ(s.params.mask.custom.size(), 4u);
  EXPECT_EQ(s.params.mask.custom.data[1], -std::numeric_limits<float>::infinity());
  const SceneView v = parseSceneView(s.extraJson, "ok.json");
  EXPECT_EQ(v.head, 2);
  EXPECT_FLOAT_EQ(v.zoom, 2.5f);
}

}  // namespace
}  // namespace attnviz
