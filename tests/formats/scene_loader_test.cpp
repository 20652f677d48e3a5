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
#include <vector>

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


// A model scene's per-layer interventions (mask, τ, RoPE off) load, save and load again to the
// same values; bad entries are refused naming the field.
TEST(SceneLoaderModel, InterventionsRoundTripAndBadOnesAreRefusedNamingTheField) {
  const Scene s = sceneFromJson(
      R"({"model": {"path": "m", "text": "a b c", "ablate": ["1:2"],
          "interventions": [
            {"layer": 1, "temperature": 0.5, "mask": {"window": 2, "sink": 1}},
            {"layer": 0, "rope_off": true, "mask": {"causal": true, "docs": [0, 0, 1],
             "custom": {"kind": "bias", "shape": [1, 3, 3],
                        "data": [0, null, null, 0, 0, null, -1, 0, 0]}}}]}})",
      "m.json");
  ASSERT_EQ(s.model.interventions.size(), 2u);
  const SceneLayerIntervention& a = s.model.interventions[0];
  const SceneLayerIntervention& b = s.model.interventions[1];
  EXPECT_EQ(a.layer, 1);
  EXPECT_FLOAT_EQ(a.temperature, 0.5f);
  EXPECT_EQ(a.mask.window, 2);
  EXPECT_EQ(a.mask.sink, 1);
  EXPECT_FALSE(a.ropeOff);
  EXPECT_EQ(b.layer, 0);
  EXPECT_TRUE(b.ropeOff);
  EXPECT_FALSE(b.mask.causal);  // the pass keeps its own causal mask: never an intervention
  EXPECT_EQ(b.mask.docs, (std::vector<int>{0, 0, 1}));
  ASSERT_EQ(b.mask.custom.size(), 9u);
  EXPECT_EQ(b.mask.custom.data[1], -std::numeric_limits<float>::infinity());
  EXPECT_FLOAT_EQ(b.mask.custom.data[6], -1.0f);
  const std::string saved = sceneToJson(s);
  const Scene t = sceneFromJson(saved, "saved.json");
  ASSERT_EQ(t.model.interventions.size(), 2u);
  EXPECT_EQ(t.model.interventions[0].mask.window, 2);
  EXPECT_FLOAT_EQ(t.model.interventions[0].temperature, 0.5f);
  EXPECT_TRUE(t.model.interventions[1].ropeOff);
  EXPECT_EQ(t.model.interventions[1].mask.custom.data, b.mask.custom.data);
  EXPECT_EQ(sceneToJson(t), saved);

  auto model = [](const std::string& iv) {
    return R"({"model": {"path": "m", "text": "a b", "interventions": )" + iv + "}}";
  };
  EXPECT_NE(refusal(model("{}")).find("model.interventions"), std::string::npos);
  EXPECT_NE(refusal(model(R"([{"temperature": 2}])")).find("interventions[0].layer"),
            std::string::npos);
  EXPECT_NE(refusal(model(R"([{"layer": 0, "temperature": 0}])")).find("temperature"),
            std::string::npos);
  EXPECT_NE(refusal(model(R"([{"layer": 0}, {"layer": 0}])")).find("two entries"),
            std::string::npos);
  EXPECT_NE(refusal(model(R"([{"layer": 0, "mask": {"custom": {"shape": [1, 2], "data": []}}}])"))
                .find("model.interventions[0].mask.custom.shape"),
            std::string::npos);
  EXPECT_NE(refusal(model(R"([{"layer": 0, "rope_off": 1}])")).find("rope_off"),
            std::string::npos);
  // Indices too large for an int are refused, not wrapped (the "L:H" parser).
  EXPECT_NE(refusal(R"({"model": {"path": "m", "text": "a", "ablate": ["99999999999:1"]}})")
                .find("model.ablate"),
            std::string::npos);
}

// A model scene's ablations and site read as the command line's --ablate and --site (one
// grammar): a malformed one is refused with the file, the field and the forms it takes.
TEST(SceneLoaderModel, MalformedAblationsAndSitesAreRefusedInTheCommandLinesWords) {
  auto scene = [](const std::string& field) {
    return R"({"model": {"path": "m", "text": "a b", )" + field + "}}";
  };
  for (const std::string bad : {"", "3", "1-2", "3:7:1", "-1:2", "3:7x", "enc:1", "dec:1:2",
                                "enc:cross:1:2", "3:7,1:2"})
    EXPECT_EQ(refusal(scene(R"("ablate": [")" + bad + R"("])")),
              "s.json: model.ablate " + bad +
                  ": expected LAYER:HEAD, enc:LAYER:HEAD or cross:LAYER:HEAD, e.g. 3:7")
        << bad;
  // An entry that is not a string is named as JSON writes it.
  EXPECT_EQ(refusal(scene(R"("ablate": ["1:2", 3])")),
            "s.json: model.ablate 3: expected LAYER:HEAD, enc:LAYER:HEAD or cross:LAYER:HEAD, "
            "e.g. 3:7");
  for (const std::string bad : {"dec:1:both", "enc:1:self", "enc", "dec:", "x:1", "dec:-1",
                                "1", "dec:1:cross:0"})
    EXPECT_EQ(refusal(scene(R"("site": ")" + bad + R"(")")),
              "s.json: model.site " + bad + ": expected enc:L, dec:L:self or dec:L:cross")
        << bad;
}

TEST(SceneLoaderModel, AblationsOfEverySiteAndSitesOfEveryFormAreRead) {
  const Scene s = sceneFromJson(
      R"({"model": {"path": "m", "text": "a b", "site": "dec:2:cross",
                    "ablate": ["3:7", "enc:01:2", "0:0", "cross:0:5"]}})",
      "s.json");
  EXPECT_EQ(s.model.ablate, (std::vector<std::pair<int, int>>{{3, 7}, {0, 0}}));
  EXPECT_EQ(s.model.siteAblate, (std::vector<std::string>{"enc:1:2", "cross:0:5"}));
  EXPECT_EQ(s.model.site, "dec:2:cross");
  for (const char* site : {"enc:0", "dec:3", "dec:1:self", "dec:1:cross"})
    EXPECT_EQ(sceneFromJson(R"({"model": {"path": "m", "text": "a", "site": ")" +
                                std::string(site) + R"("}})",
                            "s.json")
                  .model.site,
              site);
}

}  // namespace
}  // namespace attnviz
