// App tests of the presets on the shipped kjv-sp-llama, kjv-sp-gemma2 and kjv-wp-bert models,
// each against the command line's numbers and the figures their notes quote.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "attnviz/formats/npy.h"
#include "attnviz/formats/scene.h"
#include "app_run.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace attnviz::apptest;

namespace {

// ---- the kjv-sp-llama presets (17-21) ----------------------------------------------------------

const std::string kSpLlama = shippedModel("kjv-sp-llama");

attnviz::Scene presetScene(const char* file) {
  std::ifstream in(scene(file));
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  return attnviz::sceneFromJson(text, file);
}

std::vector<int> idsOf(const std::string& line) {
  std::vector<int> ids;
  std::istringstream in(line);
  for (int id; in >> id;) ids.push_back(id);
  return ids;
}

// Grouped-query attention: the kjv-sp-llama grid, 3 layers of 8 query heads, on the layer and
// head the scene names.
TEST(AppLlamaPresets, GroupedQueryAttentionShowsTheWholeGrid) {
  const attnviz::Scene sc = presetScene("17-grouped-query-attention.json");
  const Shot s = runApp("preset17", "--scene " + scene("17-grouped-query-attention.json"));
  ASSERT_RAN(s);
  const ModelGrid g = modelGrid(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  EXPECT_EQ(g.layers, 3);
  EXPECT_EQ(g.heads, 8);
  EXPECT_NE(s.out.find("model-layer: " + std::to_string(sc.model.layer)), std::string::npos)
      << s.out;
}

// RoPE: layer 1 head 3, the previous-token head: most rows bright one cell left of the diagonal.
TEST(AppLlamaPresets, TheRopePresetShowsThePreviousTokenLine) {
  const Shot s = runApp("preset18", "--scene " + scene("18-rope.json"));
  ASSERT_RAN(s);
  ASSERT_GT(s.g.rows, 10);
  EXPECT_NE(s.out.find("model-layer: 1"), std::string::npos) << s.out;
  int bright = 0;
  for (int i = 1; i < s.g.rows; ++i)
    if (tableIndex(attnviz::ColormapId::Viridis, s.cell(i, i - 1)) >= 192 &&
        tableIndex(attnviz::ColormapId::Viridis, s.cell(i, i)) < 64)
      ++bright;
  EXPECT_GE(bright, (s.g.rows - 1) * 9 / 10) << bright << " of " << s.g.rows - 1 << " rows";
}

// Induction on English: BOS + S + S (the ids from `attnviz tokenize`, not from the app); in the
// second copy layer 2 head 1 is bright at key t - L + 1, the token after the query's match.
TEST(AppLlamaPresets, InductionOnEnglishShowsTheStripeAfterTheMatch) {
  const attnviz::Scene sc = presetScene("19-induction-on-english.json");
  const std::string text = sc.model.text;
  ASSERT_EQ(text.substr(0, text.size() / 2), text.substr(text.size() / 2 + 1))
      << "the preset's text is one sentence said twice with a space between";
  const std::vector<int> all =
      idsOf(runCli("tokenize --model " + kSpLlama + " --text " + shellQuote(text)));
  const std::vector<int> once =
      idsOf(runCli("tokenize --model " + kSpLlama + " --text " + shellQuote(text.substr(0, text.size() / 2))));
  const int L = int(once.size()) - 1;
  ASSERT_EQ(int(all.size()), 2 * L + 1) << "the second copy tokenizes as the first";
  const Shot s = runApp("preset19", "--scene " + scene("19-induction-on-english.json"));
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, 2 * L + 1);
  EXPECT_NE(s.out.find("model-layer: 2"), std::string::npos) << s.out;
  int bright = 0;
  for (int t = L + 1; t <= 2 * L; ++t)
    if (tableIndex(attnviz::ColormapId::Viridis, s.cell(t, t - L + 1)) >= 128) ++bright;
  EXPECT_GE(bright, L * 7 / 10) << bright << " of " << L << " rows";
}

// Watch it write: the scene's "generate" object starts the Generate panel when the scene opens;
// its continuation is `attnviz generate`'s on the scene's text, greedy, as many tokens.
TEST(AppLlamaPresets, WatchItWriteGeneratesOnOpenAsTheCommandLineDoes) {
  const attnviz::Scene sc = presetScene("20-watch-it-write.json");
  ASSERT_TRUE(sc.model.generate.any());
  ASSERT_TRUE(sc.model.generate.greedy);
  const Shot s = runApp("preset20", "--scene " + scene("20-watch-it-write.json"));
  ASSERT_RAN(s);
  const std::string ids = outLine(s.out, "generated-ids: ");
  ASSERT_FALSE(ids.empty()) << "nothing generated on open\n" << s.out;
  const std::string want = runCli("generate --model " + kSpLlama + " --text " +
                                  shellQuote(sc.model.text) + " -n " +
                                  std::to_string(sc.model.generate.tokens) + " --print-ids");
  EXPECT_EQ(ids + "\n", want);
  EXPECT_EQ(s.out.find("generated-plain-ids:"), std::string::npos) << "no interventions, no compare";
}

// Ablate and watch it forget: with the scene's ablations the app's continuation is `attnviz
// generate --ablate`'s, the compare view's is the plain model's, and the two differ.
TEST(AppLlamaPresets, AblateAndWatchItForgetComparesBothContinuations) {
  const attnviz::Scene sc = presetScene("21-ablate-and-watch-it-forget.json");
  ASSERT_TRUE(sc.model.generate.any());
  ASSERT_FALSE(sc.model.ablate.empty());
  const Shot s = runApp("preset21", "--scene " + scene("21-ablate-and-watch-it-forget.json"));
  ASSERT_RAN(s);
  const std::string ablated = outLine(s.out, "generated-ids: ");
  const std::string plain = outLine(s.out, "generated-plain-ids: ");
  ASSERT_FALSE(ablated.empty()) << s.out;
  ASSERT_FALSE(plain.empty()) << "no compare run\n" << s.out;
  std::string args = "generate --model " + kSpLlama + " --text " + shellQuote(sc.model.text) +
                     " -n " + std::to_string(sc.model.generate.tokens) + " --print-ids";
  const std::string wantPlain = runCli(args);
  for (auto [l, h] : sc.model.ablate) args += " --ablate " + std::to_string(l) + ":" + std::to_string(h);
  const std::string wantAblated = runCli(args);
  EXPECT_EQ(ablated + "\n", wantAblated);
  EXPECT_EQ(plain + "\n", wantPlain);
  EXPECT_NE(wantAblated, wantPlain);
}

// ---- the kjv-sp-gemma2 presets (24, 25) ---------------------------------------------------------

const std::string kSpGemma2 = std::string(ATTNVIZ_SCENES) + "/../models/kjv-sp-gemma2";

// Local and global layers: a verse said twice, the copy further back than the 16-token window.
// The scene's head (a global layer's) is bright at key t - L + 1 in the second copy; every key
// it finds there is more than the window back, out of reach of the local layers 0 and 2.
TEST(AppGemmaPresets, LocalAndGlobalLayersShowsAGlobalHeadReachingPastTheWindow) {
  const attnviz::Scene sc = presetScene("24-local-and-global-layers.json");
  ASSERT_EQ(sc.model.layer % 2, 1) << "a global layer (Gemma 2: the odd ones)";
  const std::string text = sc.model.text;
  ASSERT_EQ(text.substr(0, text.size() / 2), text.substr(text.size() / 2 + 1));
  const std::vector<int> once = idsOf(runCli(
      "tokenize --model " + kSpGemma2 + " --text " + shellQuote(text.substr(0, text.size() / 2))));
  const int L = int(once.size()) - 1;
  ASSERT_GT(L - 1, 16) << "the copy is further back than the window";
  const Shot s = runApp("preset24", "--scene " + scene("24-local-and-global-layers.json"));
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, 2 * L + 1);
  const ModelGrid g = modelGrid(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  EXPECT_EQ(g.layers, 4);
  EXPECT_EQ(g.heads, 8);
  EXPECT_NE(s.out.find("model-layer: " + std::to_string(sc.model.layer)), std::string::npos)
      << s.out;
  int bright = 0;
  for (int t = L + 1; t <= 2 * L; ++t)
    if (tableIndex(attnviz::ColormapId::Viridis, s.cell(t, t - L + 1)) >= 128) ++bright;
  EXPECT_GE(bright, L * 7 / 10) << bright << " of " << L << " rows";
}

// Soft-capping: the scene opens on the capped scores of the previous-token head (layer 1 head 7),
// on a range of +-c: the cell before each query is red (about +6.8 of 8), the keys further
// back are blue (most sit against -8). On the scores before the cap (range +-76) the same cells
// would be pale, so the red line says the view opened on the capped stage.
TEST(AppGemmaPresets, SoftCappingOpensOnTheCappedScoresOfThePreviousTokenHead) {
  const attnviz::Scene sc = presetScene("25-soft-capping.json");
  const attnviz::SceneView v = attnviz::parseSceneView(sc.extraJson, "25-soft-capping.json");
  EXPECT_EQ(v.stage, "capped");
  EXPECT_EQ(v.head, sc.model.head);
  const Shot s = runApp("preset25", "--scene " + scene("25-soft-capping.json"));
  ASSERT_RAN(s);
  ASSERT_GT(s.g.rows, 10);
  EXPECT_NE(s.out.find("model-view: layer=" + std::to_string(sc.model.layer) +
                       " head=" + std::to_string(sc.model.head)),
            std::string::npos)
      << s.out;
  int red = 0, blue = 0, below = 0;
  for (int i = 1; i < s.g.rows; ++i) {
    if (tableIndex(attnviz::ColormapId::Diverging, s.cell(i, i - 1)) >= 192) ++red;
    for (int j = 0; j + 2 < i; ++j, ++below)
      if (const int k = tableIndex(attnviz::ColormapId::Diverging, s.cell(i, j)); k >= 0 && k < 64)
        ++blue;
  }
  EXPECT_GE(red, (s.g.rows - 1) * 8 / 10) << red << " of " << s.g.rows - 1 << " rows";
  EXPECT_GE(blue, below * 6 / 10) << blue << " of " << below << " cells";
}

// ---- the kjv-wp-bert presets (30, 31) ----------------------------------------------------------

// Bidirectional: the scene's head (the card's largest share on keys after the row, layer 1 head
// 13) gives 21 of the verse's 23 rows their largest weight (0.23-0.52; the float64 torch model
// of tools/train/bert_lm.py on the shipped weights) on a key one to three places to their right,
// and 30 cells right of the diagonal hold 0.25 or more: at least 20 of them are at a quarter of
// the range or more, which no causal model can show.
TEST(AppBertPresets, BidirectionalShowsRowsUsingKeysToTheirRight) {
  const attnviz::Scene sc = presetScene("30-bidirectional-every-row-sees-every-key.json");
  const Shot s = runApp("preset30", "--scene " + scene("30-bidirectional-every-row-sees-every-key.json"));
  ASSERT_RAN(s);
  ASSERT_GT(s.g.rows, 10);
  const ModelGrid g = modelGrid(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  EXPECT_EQ(g.layers, 4);
  EXPECT_EQ(g.heads, 16);
  EXPECT_NE(s.out.find("model-view: layer=" + std::to_string(sc.model.layer) +
                       " head=" + std::to_string(sc.model.head)),
            std::string::npos)
      << s.out;
  int right = 0;
  for (int i = 0; i < s.g.rows; ++i)
    for (int j = i + 1; j < s.g.rows; ++j)
      if (tableIndex(attnviz::ColormapId::Viridis, s.cell(i, j)) >= 64) ++right;
  EXPECT_GE(right, 20);
}

// [SEP] as a no-op: the scene's head (the card's largest [SEP] share, layer 0 head 2) puts
// 0.17-0.87 of 23 rows' weight (12-34) on [SEP], the last column of this 35-token verse, where no
// word's column has a row at 0.125 or more (the float64 torch model of tools/train/bert_lm.py on
// the shipped weights): at least 20 rows of the [SEP] column are at an eighth of the range or
// more, and every word's column has fewer than half as many.
TEST(AppBertPresets, SepAsANoOpShowsTheSepColumnBright) {
  const attnviz::Scene sc = presetScene("31-sep-as-a-no-op.json");
  const Shot s = runApp("preset31", "--scene " + scene("31-sep-as-a-no-op.json"));
  ASSERT_RAN(s);
  ASSERT_GT(s.g.rows, 10);
  EXPECT_NE(s.out.find("model-view: layer=" + std::to_string(sc.model.layer) +
                       " head=" + std::to_string(sc.model.head)),
            std::string::npos)
      << s.out;
  const int last = s.g.rows - 1;
  auto bright = [&](int j) {
    int n = 0;
    for (int i = 0; i < s.g.rows; ++i)
      if (tableIndex(attnviz::ColormapId::Viridis, s.cell(i, j)) >= 32) ++n;
    return n;
  };
  const int sep = bright(last);
  EXPECT_GE(sep, 20) << sep << " of " << s.g.rows << " rows";
  for (int j = 1; j < last; ++j) EXPECT_LT(2 * bright(j), sep) << "column " << j;
}

// Sentence pairs: the scene opens the B→A slice of layer 0 head 8, and its note's figures come
// from the command line's weights: B's words put 0.738 on A's words, A's at most 0.352 on B's
// (the float64 torch model of tools/train/bert_lm.py gives 0.7384 and 0.3520).
TEST(AppBertPresets, SentencePairsOpensTheBToASliceWithTheNotesShares) {
  const attnviz::Scene sc = presetScene("32-sentence-pairs.json");
  const Shot s = runApp("preset32", "--scene " + scene("32-sentence-pairs.json"));
  ASSERT_RAN(s);
  EXPECT_NE(s.out.find("slice=b-a"), std::string::npos) << s.out;
  EXPECT_EQ(s.g.rows, 13);  // B's 12 words and its [SEP]
  const std::string npy = tempPath("pairs-w.npy");
  const std::string out = runCli("model --model " + std::string(ATTNVIZ_SCENES) +
                                 "/../models/kjv-wp-bert --text " + shellQuote(sc.model.text) +
                                 " --text-pair " + shellQuote(sc.model.textPair) + " --weights " + npy);
  ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
  const attnviz::NpyArray w = attnviz::readNpy(npy);  // [L, H, T, T]
  const int H = int(w.shape[1]), T = int(w.shape[2]);
  ASSERT_EQ(T, 36);
  auto share = [&](int l, int h, int r0, int r1, int k0, int k1) {
    double sum = 0;
    for (int i = r0; i < r1; ++i)
      for (int j = k0; j < k1; ++j) sum += w.data[((std::size_t(l) * H + h) * T + i) * T + j];
    return sum / (r1 - r0);
  };
  EXPECT_NEAR(share(0, 8, 23, 35, 1, 22), 0.738, 5e-4);  // B's words on A's words
  double best = 0;
  int under = 0;
  for (int l = 0; l < int(w.shape[0]); ++l)
    for (int h = 0; h < H; ++h) {
      const double ab = share(l, h, 1, 22, 23, 35);
      best = std::max(best, ab);
      under += ab < 0.1 ? 1 : 0;
    }
  EXPECT_NEAR(best, 0.352, 5e-4);
  EXPECT_EQ(under, 47);
}

// Fill in the blank, then ablate a head: the fill panel's lists are `attnviz fill`'s without and
// with --ablate 3:8, and the note's numbers (the float64 torch model of tools/train/bert_lm.py,
// the head's output zeroed before the output projection, gives ' word' 0.2311, then 0.1570 with
// ' day' 0.0765 second).
TEST(AppBertPresets, FillThenAblateShowsTheCommandLinesFillsBeforeAndAfter) {
  const attnviz::Scene sc = presetScene("33-fill-then-ablate.json");
  const Shot s = runApp("preset33", "--scene " + scene("33-fill-then-ablate.json") + " --print-fill");
  ASSERT_RAN(s);
  const std::string m = "fill --model " + std::string(ATTNVIZ_SCENES) +
                        "/../models/kjv-wp-bert --text " + shellQuote(sc.model.text);
  const std::string before = runCli(m), after = runCli(m + " --ablate 3:8");
  ASSERT_EQ(before.find("exit status"), std::string::npos) << before;
  EXPECT_EQ(before.rfind("3\t343\t0.2311", 0), 0u) << before;  // ' word' first
  EXPECT_EQ(after.rfind("3\t343\t0.1569", 0), 0u) << after;    // ' word' still first
  EXPECT_NE(after.find("3\t214\t0.0765"), std::string::npos) << after;  // ' day' second
  // The panel's lines are the command line's, up to the last printed digit.
  auto firstLine = [](const std::string& text, const std::string& tag) {
    const auto at = text.find(tag + "\t");
    return at == std::string::npos ? std::string() : text.substr(at + tag.size() + 1, 8);
  };
  EXPECT_EQ(firstLine(s.out, "fill-before"), before.substr(0, 8)) << s.out;
  EXPECT_EQ(firstLine(s.out, "fill-after"), after.substr(0, 8)) << s.out;
}

}  // namespace
