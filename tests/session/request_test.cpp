// The request grammar (attnviz/session/request.h): every form the command line, scenes and the
// app accept, each mistake's one error text, and the range checks against a model's sizes,
// compared with values and messages written out here by hand.
#include "attnviz/session/request.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace attnviz {
namespace {

// The message `f` throws as UsageError ("" when it throws nothing, "other" for another type).
std::string usageMessage(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (...) {
    return "other";
  }
  return "";
}

ModelConfig decoder() {  // 2 layers of 4 heads, width 8, learned positions
  ModelConfig c;
  c.family = "gpt2";
  c.nLayer = 2;
  c.nHead = 4;
  c.nEmbd = 8;
  c.positions = PositionKind::Learned;
  return c;
}

ModelConfig encoderDecoder() {  // 3 encoder and 2 decoder layers of 4 heads
  ModelConfig c = decoder();
  c.family = "t5";
  c.nEncoderLayer = 3;
  c.positions = PositionKind::Relative;
  return c;
}

SiteHead sh(int stack, int layer, int site, int head) { return {SiteId{stack, layer, site}, head}; }

TEST(Request, SiteAblationsOfEveryForm) {
  EXPECT_EQ(parseSiteAblation("3:7"), sh(0, 3, 0, 7));
  EXPECT_EQ(parseSiteAblation("enc:1:2"), sh(1, 1, 0, 2));
  EXPECT_EQ(parseSiteAblation("cross:0:5"), sh(0, 0, 1, 5));
  EXPECT_EQ(parseSiteAblation("0:0"), sh(0, 0, 0, 0));
  for (const char* text : {"3:7", "enc:1:2", "cross:0:5"})
    EXPECT_EQ(siteAblationText(parseSiteAblation(text)), text);
}

TEST(Request, MalformedSiteAblationsNameTheOptionAndTheForms) {
  for (const std::string bad : {"", "3", "3:", ":7", "3:7:1", "-1:2", "1:-2", "a:b", "3:7x", "1-2",
                                "enc:1", "enc:cross:1:2", "cross:enc:1:2", "dec:1:2", "enc:",
                                "3,7", "3:7,1:2"})
    EXPECT_EQ(usageMessage([&] { parseSiteAblation(bad); }),
              "--ablate " + bad + ": expected LAYER:HEAD, enc:LAYER:HEAD or cross:LAYER:HEAD, "
              "e.g. 3:7")
        << bad;
  EXPECT_EQ(usageMessage([] { parseSiteAblation("x", "model.ablate"); }),
            "model.ablate x: expected LAYER:HEAD, enc:LAYER:HEAD or cross:LAYER:HEAD, e.g. 3:7");
}

TEST(Request, LayerHeadPairsAndLists) {
  EXPECT_EQ(parseLayerHead("0:1"), std::make_pair(0, 1));
  EXPECT_EQ(parseLayerHead("12:11"), std::make_pair(12, 11));
  for (const std::string bad : {"enc:0:1", "cross:0:1", "0", "0:1:2", "0:x", "0:1,1:3"})
    EXPECT_EQ(usageMessage([&] { parseLayerHead(bad); }),
              "--ablate " + bad + ": expected LAYER:HEAD, e.g. 3:7")
        << bad;
  // Lists: comma-separated items, repeated entries kept once, in the order given.
  const std::vector<std::pair<int, int>> want{{0, 1}, {1, 3}, {2, 0}};
  EXPECT_EQ(parseLayerHeadList({"0:1,1:3", "2:0", "1:3"}), want);
  EXPECT_EQ(layerHeadListText(want), "0:1,1:3,2:0");
  EXPECT_EQ(usageMessage([] { parseLayerHeadList({"0:1", "0:1,x"}); }),
            "--ablate 0:1,x: expected LAYER:HEAD, e.g. 3:7");
  EXPECT_EQ(usageMessage([] { parseLayerHeadList({"0:1,"}); }),
            "--ablate 0:1,: expected LAYER:HEAD, e.g. 3:7");
}

TEST(Request, SiteNames) {
  EXPECT_EQ(parseSiteName("enc:2"), (SiteId{1, 2, 0}));
  EXPECT_EQ(parseSiteName("dec:1"), (SiteId{0, 1, 0}));
  EXPECT_EQ(parseSiteName("dec:1:self"), (SiteId{0, 1, 0}));
  EXPECT_EQ(parseSiteName("dec:0:cross"), (SiteId{0, 0, 1}));
  for (const std::string bad : {"", "enc", "enc:", "enc:1:self", "enc:1:cross", "dec:1:both",
                                "dec:x", "self:1", "cross:1", "1", "dec:-1", "dec:1:cross:2"})
    EXPECT_EQ(usageMessage([&] { parseSiteName(bad); }),
              "--site " + bad + ": expected enc:L, dec:L:self or dec:L:cross")
        << bad;
}

TEST(Request, IdPositionAndPatchLists) {
  EXPECT_EQ(parseIdList("464,3290,318"), (std::vector<int>{464, 3290, 318}));
  EXPECT_EQ(parseIdList("1, 2"), (std::vector<int>{1, 2}));  // spaces around an item
  EXPECT_EQ(usageMessage([] { parseIdList("1,x,3"); }),
            "--ids: expected token ids separated by commas, got 'x'");
  EXPECT_EQ(usageMessage([] { parseIdList("1,-2"); }),
            "--ids: expected token ids separated by commas, got '-2'");
  EXPECT_EQ(usageMessage([] { parseIdList("5", "--target-ids"); }), "");
  EXPECT_EQ(usageMessage([] { parseIdList("5,", "--target-ids"); }),
            "--target-ids: expected token ids separated by commas, got ''");

  EXPECT_EQ(parsePositionList("5,2,5"), (std::vector<int>{5, 2, 5}));  // as given
  EXPECT_EQ(usageMessage([] { parsePositionList("2,x"); }),
            "--mask-source: expected source positions separated by commas, got 'x'");

  EXPECT_EQ(parsePatchList("3,7,3"), (std::vector<int>{3, 7}));  // unique, in order
  for (const std::string bad : {"", "3,", "x", "3;7", "-1"})
    EXPECT_EQ(usageMessage([&] { parsePatchList(bad); }),
              "--mask-patches " + bad + ": expected patch indices, e.g. 3,7")
        << bad;
}

TEST(Request, LayerIndicesAndResidualEdits) {
  EXPECT_EQ(parseLayerArg("3", "--rope-off"), 3);
  for (const std::string bad : {"", "x", "-1", "1:2", "1.5"})
    EXPECT_EQ(usageMessage([&] { parseLayerArg(bad, "--rope-off"); }),
              "--rope-off " + bad + ": expected a layer index (0, 1, ...)")
        << bad;

  const ResidualEditRequest a = parseResidualEdit("1:0:447:mean");
  EXPECT_EQ(a.layer, 1);
  EXPECT_EQ(a.edit, (ResidualEdit{0, 447, true}));
  const ResidualEditRequest b = parseResidualEdit("0:all:3:zero");
  EXPECT_EQ(b.layer, 0);
  EXPECT_EQ(b.edit, (ResidualEdit{-1, 3, false}));
  for (const std::string bad : {"1:0:447", "1:0:447:half", "1:0:447:mean:2", "", "1:0:447:Mean"})
    EXPECT_EQ(usageMessage([&] { parseResidualEdit(bad); }),
              "--residual-edit " + bad + ": expected LAYER:POSITION:DIM:zero|mean, e.g. "
              "1:0:447:mean")
        << bad;
  for (const std::string bad : {"x:0:1:zero", "1:some:1:zero", "1:0:-1:mean", "1::3:zero"})
    EXPECT_EQ(usageMessage([&] { parseResidualEdit(bad); }),
              "--residual-edit " + bad + ": layer, position and dimension are indices")
        << bad;
}

TEST(Request, RangeChecksOfADecoder) {
  const ModelConfig c = decoder();
  EXPECT_EQ(usageMessage([&] { checkLayerInRange(1, c); }), "");
  EXPECT_EQ(usageMessage([&] { checkLayerInRange(2, c); }),
            "--layer 2: out of range, the model has 2 layers (0..1)");
  EXPECT_EQ(usageMessage([&] { checkLayerInRange(7, c, "model.layer"); }),
            "model.layer 7: out of range, the model has 2 layers (0..1)");
  EXPECT_EQ(usageMessage([&] { checkHeadInRange(3, c); }), "");
  EXPECT_EQ(usageMessage([&] { checkHeadInRange(4, c); }),
            "--head 4: out of range, the model has 4 heads (0..3)");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 1, 0, 3), c); }), "");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 2, 0, 0), c); }),
            "--ablate 2:0: out of range, the model has 2 layers and 4 heads");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 0, 0, 4), c); }),
            "--ablate 0:4: out of range, the model has 2 layers and 4 heads");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(1, 0, 0, 0), c); }),
            "--ablate enc:0:0: gpt2 has one attention site per layer (use L:H)");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 0, 1, 0), c); }),
            "--ablate cross:0:0: gpt2 has one attention site per layer (use L:H)");
  EXPECT_EQ(usageMessage([&] { checkSiteInRange(SiteId{1, 0, 0}, c); }),
            "--site enc:0: gpt2 is not an encoder-decoder (no sites to choose)");
  EXPECT_EQ(usageMessage([&] { checkHasCrossSites(c); }),
            "--mask-source: gpt2 is not an encoder-decoder (no cross sites)");
  EXPECT_EQ(usageMessage([&] { checkRopeOffLayer(0, c); }),
            "--rope-off 0: the model has no RoPE (its positions are learned)");
  EXPECT_EQ(usageMessage([&] { checkRopeOffLayer(2, c); }),
            "--rope-off 2: out of range, the model has 2 layers");
  ModelConfig rope = c;
  rope.positions = PositionKind::Rope;
  EXPECT_EQ(usageMessage([&] { checkRopeOffLayer(1, rope); }), "");
  EXPECT_EQ(usageMessage([&] { checkResidualEdit({1, {0, 7, false}}, c); }), "");
  EXPECT_EQ(usageMessage([&] { checkResidualEdit({1, {-1, 8, true}}, c); }),
            "--residual-edit 1:all:8:mean: out of range, the model has 2 layers of width 8");
  EXPECT_EQ(usageMessage([&] { checkResidualEdit({2, {3, 0, false}}, c); }),
            "--residual-edit 2:3:0:zero: out of range, the model has 2 layers of width 8");
}

TEST(Request, RangeChecksOfAnEncoderDecoder) {
  const ModelConfig c = encoderDecoder();
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(1, 2, 0, 3), c); }), "");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 1, 1, 0), c); }), "");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 1, 0, 0), c); }), "");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(1, 3, 0, 0), c); }),
            "--ablate enc:3:0: out of range, the encoder has 3 layers and 4 heads");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 2, 1, 0), c, "model.ablate"); }),
            "model.ablate cross:2:0: out of range, the decoder has 2 layers and 4 heads");
  EXPECT_EQ(usageMessage([&] { checkSiteAblation(sh(0, 0, 0, 4), c); }),
            "--ablate 0:4: out of range, the decoder has 2 layers and 4 heads");
  EXPECT_EQ(usageMessage([&] { checkSiteInRange(SiteId{1, 2, 0}, c); }), "");
  EXPECT_EQ(usageMessage([&] { checkSiteInRange(SiteId{0, 1, 1}, c); }), "");
  EXPECT_EQ(usageMessage([&] { checkSiteInRange(SiteId{0, 5, 1}, c, "model.site"); }),
            "model.site dec:5:cross: out of range, the encoder has 3 layers and the decoder 2");
  EXPECT_EQ(usageMessage([&] { checkSiteInRange(SiteId{1, 3, 0}, c); }),
            "--site enc:3: out of range, the encoder has 3 layers and the decoder 2");
  EXPECT_EQ(usageMessage([&] { checkHasCrossSites(c); }), "");
}

TEST(Request, InSceneMakesUsageErrorsInputErrorsNamingTheFile) {
  try {
    inScene("a/scene.json", [] { return parseSiteAblation("1-2", "model.ablate"); });
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "a/scene.json: model.ablate 1-2: expected LAYER:HEAD, enc:LAYER:HEAD or "
                 "cross:LAYER:HEAD, e.g. 3:7");
  }
  EXPECT_EQ(inScene("s.json", [] { return parseSiteAblation("enc:0:1"); }), sh(1, 0, 0, 1));
}

}  // namespace
}  // namespace attnviz
