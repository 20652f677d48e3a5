// Synthetic scenes (attnviz/session/scene_inputs.h): each head archetype's pattern must come
// out of the real Q K^T, through the engine, and the inputs must be deterministic in the scene;
// every preset's inputs build.
#include "attnviz/engine/engine.h"
#include "attnviz/formats/scene.h"
#include "attnviz/session/scene_inputs.h"
#include "reference.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

namespace attnviz {
namespace {

const char* kSentence =
    "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the door";

Scene sceneWith(Archetype a, Mode mode = Mode::Causal, const char* text = kSentence) {
  Scene s;
  s.queryText = text;
  s.mode = mode;
  s.heads = 1;
  s.archetypes = {a};
  s.seed = 3;
  return s;
}

struct Ran {
  SceneInputs in;
  AttentionParams p;
  AttentionResult r;
};

Ran runScene(const Scene& s) {
  Ran out;
  out.in = buildSceneInputs(s);
  out.p = effectiveParams(s);
  auto engine = makeCpuEngine();
  engine->run(out.in.q, out.in.k, out.in.v, out.p);
  out.r = engine->result();
  return out;
}

TEST(SceneArchetypes, PreviousTokenHeadPutsItsLargestWeightOnThePreviousKey) {
  const Ran x = runScene(sceneWith(Archetype::PreviousToken));
  const int T = x.r.dims.Tq;
  ASSERT_GE(T, 10);
  for (int i = 1; i < T; ++i) EXPECT_EQ(x.r.row(0, i).argmax, i - 1) << "query " << i;
}

TEST(SceneArchetypes, PreviousTokenHeadWorksForEverySeed) {
  for (std::uint32_t seed : {1u, 2u, 99u, 12345u}) {
    Scene s = sceneWith(Archetype::PreviousToken);
    s.seed = seed;
    const Ran x = runScene(s);
    for (int i = 1; i < x.r.dims.Tq; ++i)
      EXPECT_EQ(x.r.row(0, i).argmax, i - 1) << "seed " << seed << " query " << i;
  }
}

TEST(SceneArchetypes, FirstTokenHeadPutsItsMaximumOnKeyZero) {
  const Ran x = runScene(sceneWith(Archetype::FirstToken));
  for (int i = 0; i < x.r.dims.Tq; ++i) EXPECT_EQ(x.r.row(0, i).argmax, 0) << "query " << i;
}

TEST(SceneArchetypes, FirstTokenHeadSinksEvenWithoutCausal) {
  const Ran x = runScene(sceneWith(Archetype::FirstToken, Mode::Self));
  for (int i = 0; i < x.r.dims.Tq; ++i) EXPECT_EQ(x.r.row(0, i).argmax, 0) << "query " << i;
}

TEST(SceneArchetypes, SameTokenHeadLooksAtAnOccurrenceOfTheSameToken) {
  const Ran x = runScene(sceneWith(Archetype::SameToken));
  const auto& toks = x.in.queryTokens;
  std::map<std::string, int> count;
  int checked = 0;
  for (int i = 0; i < int(toks.size()); ++i) {
    if (++count[toks[i]] < 2) continue;  // only repeated tokens (a second or later occurrence)
    const int j = x.r.row(0, i).argmax;
    ASSERT_GE(j, 0);
    EXPECT_EQ(x.in.keyTokens[j], toks[i]) << "query " << i << " '" << toks[i] << "' -> key " << j;
    ++checked;
  }
  EXPECT_GE(checked, 4);  // "the" repeats five times in the sentence
}

TEST(SceneArchetypes, LocalWindowHeadWeightDecaysWithDistance) {
  const Ran x = runScene(sceneWith(Archetype::LocalWindow));
  const int T = x.r.dims.Tq;
  // Average weight at each distance d = i - j over the rows that have that distance: strictly
  // decreasing over the first four distances, and every farther distance below those.
  // (Sinusoidal positions leave a small ripple far out, e.g. ~0.4% at d = 5..6; not a decay.)
  std::vector<double> mean(T, 0.0);
  for (int d = 0; d < T; ++d) {
    int n = 0;
    for (int i = d; i < T; ++i, ++n) mean[d] += x.r.weights.at(0, i, i - d);
    mean[d] /= n;
  }
  for (int d = 0; d < 3; ++d)
    EXPECT_GT(mean[d], mean[d + 1]) << "distance " << d << " vs " << d + 1;
  for (int d = 4; d < T; ++d) EXPECT_LT(mean[d], mean[3]) << "distance " << d;
  EXPECT_GT(mean[0] + mean[1], 0.8);
  // Per row: the nearest keys outweigh the far ones.
  for (int i = 5; i < T; ++i) {
    const double nearW = x.r.weights.at(0, i, i) + x.r.weights.at(0, i, i - 1);
    const double farW = x.r.weights.at(0, i, i - 4) + x.r.weights.at(0, i, i - 5);
    EXPECT_GT(nearW, farW) << "query " << i;
  }
}

TEST(SceneArchetypes, BroadHeadHasEntropyNearTheLogOfAllowedKeys) {
  const Ran x = runScene(sceneWith(Archetype::Broad));
  for (int i = 1; i < x.r.dims.Tq; ++i) {
    const double n = i + 1;  // causal: keys 0..i
    EXPECT_GT(x.r.row(0, i).entropy, 0.9 * std::log(n)) << "query " << i;
    EXPECT_LE(x.r.row(0, i).entropy, std::log(n) + 1e-4) << "query " << i;
  }
}

TEST(SceneArchetypes, RandomHeadDiffersBySeed) {
  Scene a = sceneWith(Archetype::Random), b = a;
  b.seed = a.seed + 1;
  const SceneInputs ia = buildSceneInputs(a), ib = buildSceneInputs(b);
  ASSERT_TRUE(ia.q.sameShape(ib.q));
  EXPECT_NE(ia.q.data, ib.q.data);
  EXPECT_NE(ia.k.data, ib.k.data);
}

TEST(SceneArchetypes, SameSceneGivesIdenticalTensorsAndWeights) {
  Scene s = defaultScene();
  const SceneInputs a = buildSceneInputs(s), b = buildSceneInputs(s);
  EXPECT_EQ(a.q.data, b.q.data);
  EXPECT_EQ(a.k.data, b.k.data);
  EXPECT_EQ(a.v.data, b.v.data);
  EXPECT_EQ(a.wo.data, b.wo.data);
  const Ran ra = runScene(s), rb = runScene(s);
  EXPECT_EQ(ra.r.weights.data, rb.r.weights.data);
}

TEST(SceneArchetypes, DefaultSceneGivesEachHeadADifferentPattern) {
  const Ran x = runScene(defaultScene());
  const int H = x.r.dims.H;
  ASSERT_GE(H, 2);
  for (int a = 0; a < H; ++a)
    for (int b = a + 1; b < H; ++b) {
      double diff = 0;
      for (int i = 0; i < x.r.dims.Tq; ++i)
        for (int j = 0; j < x.r.dims.Tk; ++j)
          diff += std::fabs(x.r.weights.at(a, i, j) - x.r.weights.at(b, i, j));
      EXPECT_GT(diff, 0.5) << "heads " << a << " and " << b << " look alike";
    }
}

TEST(SceneArchetypes, ScenesShapeQKVFromTheirSettings) {
  Scene s = sceneWith(Archetype::Broad, Mode::Self, "a b c d e");
  s.heads = 3;
  s.dHead = 16;
  const SceneInputs in = buildSceneInputs(s);
  EXPECT_TRUE(in.q.sameShape(Tensor3(3, 5, 16)));
  EXPECT_TRUE(in.k.sameShape(Tensor3(3, 5, 16)));
  EXPECT_TRUE(in.v.sameShape(Tensor3(3, 5, 16)));
  EXPECT_EQ(in.queryTokens, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(in.xq.sameShape(Tensor3(1, 5, s.dModel)));
  EXPECT_TRUE(in.wo.sameShape(Tensor3(1, 3 * 16, s.dModel)));
}

TEST(SceneArchetypes, CrossModeUsesTheSecondTokenList) {
  Scene s = sceneWith(Archetype::Random, Mode::Cross, "le chat dort");
  s.keyText = "the cat is sleeping now";
  const SceneInputs in = buildSceneInputs(s);
  EXPECT_EQ(in.queryTokens.size(), 3u);
  EXPECT_EQ(in.keyTokens.size(), 5u);
  EXPECT_EQ(in.q.rows, 3);
  EXPECT_EQ(in.k.rows, 5);
  EXPECT_EQ(in.v.rows, 5);
}

TEST(SceneArchetypes, CrossModeLocalWindowHeadAlignsQueriesMonotonicallyOverTheKeys) {
  Scene s = sceneWith(Archetype::LocalWindow, Mode::Cross, "le chat noir etait assis");
  s.keyText = "the black cat was sitting on the mat near the door .";
  const Ran x = runScene(s);
  ASSERT_EQ(x.r.dims.Tq, 5);
  ASSERT_EQ(x.r.dims.Tk, 12);
  // The first query looks at the start of the key sequence, the last at its end, and the
  // strongest key never moves backwards in between.
  EXPECT_LE(x.r.row(0, 0).argmax, 1);
  EXPECT_GE(x.r.row(0, 4).argmax, 10);
  for (int i = 1; i < 5; ++i) EXPECT_GT(x.r.row(0, i).argmax, x.r.row(0, i - 1).argmax) << i;
}

TEST(SceneArchetypes, DecodeModeHasOneQueryOverTheCache) {
  Scene s = sceneWith(Archetype::Broad, Mode::Decode);
  const SceneInputs in = buildSceneInputs(s);
  EXPECT_EQ(in.q.rows, 1);
  EXPECT_EQ(in.k.rows, int(tokenize(kSentence).size()));
}

TEST(SceneArchetypes, BlockOutputIsConcatenatedHeadsTimesWo) {
  Scene s = sceneWith(Archetype::Broad, Mode::Causal, "one two three four");
  s.heads = 2;
  s.archetypes = {Archetype::Broad, Archetype::PreviousToken};
  const Ran x = runScene(s);
  const Tensor3 block = blockOutput(x.r.output, x.in.wo);
  const int T = 4, dv = x.r.dims.dv, D = s.dModel;
  ASSERT_TRUE(block.sameShape(Tensor3(1, T, D)));
  for (int i = 0; i < T; ++i)
    for (int c = 0; c < D; ++c) {
      double acc = 0;
      for (int h = 0; h < 2; ++h)
        for (int e = 0; e < dv; ++e)
          acc += double(x.r.output.at(h, i, e)) * x.in.wo.at(0, h * dv + e, c);
      EXPECT_TRUE(ref::close(block.at(0, i, c), acc)) << i << "," << c;
    }
}

TEST(SceneJson, EveryPresetLoadsAndSaysWhatItTeaches) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(ATTNVIZ_TEST_DATA_DIR) +
                                                           "/../assets/scenes")) {
    if (e.path().extension() != ".json") continue;
    // An image model's view ({"model": {"path", "image"}, "view"}: the app's image view reads
    // it, with its paths relative to the scene's folder): the folder and the picture are there.
    std::ifstream in(e.path());
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.contains("model") && j["model"].is_object() && j["model"].contains("image")) {
      EXPECT_FALSE(j.value("notes", std::string()).empty()) << e.path();
      const std::filesystem::path dir = e.path().parent_path();
      EXPECT_TRUE(std::filesystem::exists(
          dir / j["model"]["path"].get<std::string>() / "config.json")) << e.path();
      EXPECT_TRUE(std::filesystem::exists(dir / j["model"]["image"].get<std::string>()))
          << e.path();
      ++n;
      continue;
    }
    const Scene s = loadScene(e.path().string());
    EXPECT_FALSE(s.notes.empty()) << e.path();
    if (s.model.any())  // a model scene: the shipped model it names is there
      EXPECT_TRUE(std::filesystem::exists(s.model.path + "/config.json")) << e.path();
    else
      EXPECT_NO_THROW(buildSceneInputs(s)) << e.path();
    ++n;
  }
  EXPECT_GE(n, 8);
}

}  // namespace
}  // namespace attnviz
