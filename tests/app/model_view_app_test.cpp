// App tests of the model view: the grid and the heatmap against torch's weights, the row
// inspector's q/k norms, the neuron view, the residual and loss-by-token panels, ablations and
// edits, the byte-model presets and their exports, the research presets, and bad model scenes.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "attnviz/formats/npy.h"
#include "attnviz/formats/scene.h"
#include "app_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace attnviz::apptest;

namespace {

// ---- the model view --------------------------------------------------------------------------
// A random-init GPT-2 checkpoint of tests/model (make_gpt2_fixtures.py wrote it with torch, and
// torch's weights and logits beside it): the app's pixels against torch's numbers.

const std::string kModelFixture =
    std::string(ATTNVIZ_MODEL_FIXTURES) + "/f32_prefix_tied_gelu_new";
const char* kModelText =
    "The cat sat on the mat; the cat's hat is at 42 in the sitting room.\n\tthe end";

// "next-token <which>: id prob" lines, in order.
std::vector<std::pair<int, double>> nextTokens(const std::string& out, const std::string& which) {
  std::vector<std::pair<int, double>> r;
  const std::string key = "next-token " + which + ": ";
  for (auto at = out.find(key); at != std::string::npos; at = out.find(key, at + 1)) {
    int id = -1;
    double p = 0;
    if (std::sscanf(out.c_str() + at + key.size(), "%d %lf", &id, &p) == 2) r.emplace_back(id, p);
  }
  return r;
}

// The softmax of the last row of torch's logits [T, V], its five largest, most likely first.
std::vector<std::pair<int, double>> torchTop5(const std::string& npy) {
  const attnviz::NpyArray a = attnviz::readNpy(npy);
  const int T = int(a.shape[0]), V = int(a.shape[1]);
  const float* row = a.data.data() + std::size_t(T - 1) * V;
  double mx = row[0], sum = 0;
  for (int v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
  for (int v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
  std::vector<std::pair<int, double>> all;
  for (int v = 0; v < V; ++v) all.emplace_back(v, std::exp(row[v] - mx) / sum);
  std::partial_sort(all.begin(), all.begin() + 5, all.end(),
                    [](auto& x, auto& y) { return x.second > y.second; });
  all.resize(5);
  return all;
}

// The neuron view's line: "neuron-view: layer=L head=H row=I key=J score=S terms=T pairs=P plain=Q".
struct NeuronLine {
  int layer = -1, head = -1, row = -1, key = -1;
  double score = 0, terms = 0, pairs = 0, plain = 0;
};
bool parseNeuronLine(const std::string& out, NeuronLine& n) {
  const auto at = out.find("neuron-view:");
  return at != std::string::npos &&
         std::sscanf(out.c_str() + at,
                     "neuron-view: layer=%d head=%d row=%d key=%d score=%lf terms=%lf pairs=%lf "
                     "plain=%lf",
                     &n.layer, &n.head, &n.row, &n.key, &n.score, &n.terms, &n.pairs,
                     &n.plain) == 8;
}

// The residual-stream panel's line: "residual: token=T dim=D stream=K largest=X over_median=R
// marked=M".
struct ResidualLine {
  int token = -1, dim = -1, stream = -1, marked = -1;
  double largest = 0, overMedian = 0;
};
bool parseResidualLine(const std::string& out, ResidualLine& r) {
  const auto at = out.find("residual: token=");
  return at != std::string::npos &&
         std::sscanf(out.c_str() + at,
                     "residual: token=%d dim=%d stream=%d largest=%lf over_median=%lf marked=%d",
                     &r.token, &r.dim, &r.stream, &r.largest, &r.overMedian, &r.marked) == 6;
}

TEST(AppModel, TheGridAndTheHeatmapShowTorchsWeightsOfEveryLayerAndHead) {
  const attnviz::NpyArray w = attnviz::readNpy(kModelFixture + "/plain_weights.npy");
  const int L = int(w.shape[0]), H = int(w.shape[1]), T = int(w.shape[2]);
  auto weight = [&](int l, int h, int i, int j) {
    return w.data[((std::size_t(l) * H + h) * T + i) * T + j];
  };
  const Shot s = runApp("model", "--model " + kModelFixture + " --text " +
                                     shellQuote(kModelText) + " --layer 1 --head 1");
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, T);
  ASSERT_EQ(s.g.cols, T);
  // The heatmap: layer 1, head 1; above the diagonal the causal mask.
  int checked = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) {
      const RGBA8 c = s.cell(i, j);
      if (j > i) {
        EXPECT_TRUE(isMasked(c)) << i << "," << j;
        continue;
      }
      EXPECT_TRUE(viridisNear(c, weight(1, 1, i, j) * 255.0)) << "heatmap cell " << i << "," << j;
      ++checked;
    }
  EXPECT_EQ(checked, T * (T + 1) / 2);
  // The layers x heads grid: one texel per cell (T < the thumbnail's side), sampled at its centre.
  const ModelGrid g = modelGrid(s.out);
  ASSERT_TRUE(g.valid) << s.out;
  ASSERT_EQ(g.layers, L);
  ASSERT_EQ(g.heads, H);
  ASSERT_GE(g.thumb, float(T));
  int bad = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          const int x = int(g.x0 + h * g.pitch + (j + 0.5f) * g.thumb / T);
          const int y = int(g.y0 + l * g.pitch + (i + 0.5f) * g.thumb / T);
          const RGBA8 c = s.pixel(x, y);
          const bool ok = j > i ? c == attnviz::kMaskedColor
                                : viridisNear(c, weight(l, h, i, j) * 255.0);
          if (!ok && ++bad <= 5)
            ADD_FAILURE() << "grid layer " << l << " head " << h << " cell " << i << "," << j
                          << ": colour index " << tableIndex(attnviz::ColormapId::Viridis, c)
                          << ", weight x 255 = " << weight(l, h, i, j) * 255.0;
        }
  EXPECT_EQ(bad, 0);
  EXPECT_NE(s.out.find("model-layer: 1"), std::string::npos);
}

// A q/k-norm family (Qwen3, a random checkpoint made at test time by
// decoder_families_reference.py): the row inspector shows the selected query's ‖q_i‖ and ‖k_i‖
// before and after the norm, the float64 torch reference's numbers (qk_norms_reference.py, on
// the ids `attnviz tokenize` gives for the app's text).
TEST(AppModel, TheRowInspectorShowsQAndKNormsBeforeAndAfterTheNorm) {
  const std::string dir = tempPath("qk-norm-families");
  std::filesystem::remove_all(dir);
  const std::string py = std::string(ATTNVIZ_PYTHON " ") + ATTNVIZ_SOURCE_DIR + "/tests/model/";
  const attnviz::testing::ShellRun gen =
      attnviz::testing::runShell(py + "decoder_families_reference.py " + dir);
  ASSERT_EQ(gen.rc, 0) << gen.out;
  const std::string model = dir + "/qwen3_gqa", text = "the cat sat on the mat";
  const attnviz::testing::ShellRun tok = attnviz::testing::runShell(
      std::string(ATTNVIZ_BIN) + " tokenize --model " + model + " --text '" + text + "'");
  ASSERT_EQ(tok.rc, 0) << tok.out;
  std::string ids;
  {
    std::istringstream in(tok.out);
    std::string t;
    while (in >> t) ids += (ids.empty() ? "" : ",") + t;
  }
  const int layer = 1, head = 3, row = 5;
  const attnviz::testing::ShellRun want = attnviz::testing::runShell(
      py + "qk_norms_reference.py " + model + " 1 3 5 " + ids);
  ASSERT_EQ(want.rc, 0) << want.out;
  double rqb = 0, rqa = 0, rkb = 0, rka = 0;
  int rg = -1;
  ASSERT_EQ(std::sscanf(want.out.c_str(), "q %lf %lf k %lf %lf kv %d", &rqb, &rqa, &rkb, &rka, &rg),
            5)
      << want.out;
  const Shot s = runApp("qk-norms", "--model " + model + " --text '" + text + "' --layer " +
                                        std::to_string(layer) + " --head " + std::to_string(head) +
                                        " --select-row " + std::to_string(row));
  ASSERT_RAN(s);
  const auto line = s.out.find("row-inspector-qk-norms:");
  ASSERT_NE(line, std::string::npos) << s.out;
  int gotRow = -1, gotKv = -1;
  double qb = 0, qa = 0, kb = 0, ka = 0;
  ASSERT_EQ(std::sscanf(s.out.c_str() + line,
                        "row-inspector-qk-norms: row=%d kv_head=%d q=%lf,%lf k=%lf,%lf", &gotRow,
                        &gotKv, &qb, &qa, &kb, &ka),
            6);
  EXPECT_EQ(gotRow, row);
  EXPECT_EQ(gotKv, rg);
  EXPECT_NEAR(qb, rqb, 1e-4 * std::max(1.0, rqb));
  EXPECT_NEAR(qa, rqa, 1e-4 * std::max(1.0, rqa));
  EXPECT_NEAR(kb, rkb, 1e-4 * std::max(1.0, rkb));
  EXPECT_NEAR(ka, rka, 1e-4 * std::max(1.0, rka));
  EXPECT_GT(std::fabs(rqb - rqa), 1e-3) << "the norm changed nothing: a weak test";
}

// The neuron view of the shipped LLaMA's previous-token head 1:3: for the selected query it picks
// the row's largest weight (the key just before), and its per-dimension and per-RoPE-pair terms
// sum to the cell's score as the engine computed it (the row inspector's scaled stage); with the
// rotation removed the score falls (RoPE carries "one back").
TEST(AppModel, TheNeuronViewsTermsSumToTheEnginesScore) {
  const std::string model = std::string(ATTNVIZ_SCENES) + "/../models/kjv-sp-llama";
  const Shot s = runApp("neuron", "--model " + model +
                                      " --text 'In the beginning God created the heaven and the "
                                      "earth.' --layer 1 --head 3 --select-row 8 --stage scaled");
  ASSERT_RAN(s);
  NeuronLine n;
  ASSERT_TRUE(parseNeuronLine(s.out, n)) << s.out;
  const int l = n.layer, h = n.head, i = n.row, j = n.key;
  const double score = n.score, terms = n.terms, pairs = n.pairs, plain = n.plain;
  EXPECT_EQ(l, 1);
  EXPECT_EQ(h, 3);
  EXPECT_EQ(i, 8);
  EXPECT_EQ(j, 7) << "the previous-token head's largest weight is the key just before";
  EXPECT_NEAR(terms, score, 1e-5 * std::max(1.0, std::fabs(score)));
  EXPECT_NEAR(pairs, score, 1e-5 * std::max(1.0, std::fabs(score)));
  // The engine's scaled score of the same cell (the row inspector's row on the scaled stage).
  const auto row = s.out.find("row-inspector-values: row=8 what=scaled");
  ASSERT_NE(row, std::string::npos) << s.out;
  const auto vals = s.out.find("values=", row) + 7;
  std::vector<double> v;
  std::istringstream in(s.out.substr(vals, s.out.find('\n', vals) - vals));
  for (std::string t; std::getline(in, t, ',');) v.push_back(std::stod(t));
  ASSERT_GT(int(v.size()), j);
  EXPECT_NEAR(score, v[j], 1e-4 * std::max(1.0, std::fabs(v[j])));
  EXPECT_LT(plain, score - 10) << "with the rotation removed the previous key's score should fall";
}

// The "Loss by token" panel scores the model view's text with three KV caches; its means are
// `attnviz score`'s (whose NLLs the model tests hold to the float64 reference) for the same text
// and policies, and a plain window of the same size loses more than sinks + window.
// The scripted run's "cache-loss:" line: sinks, window and the three means.
struct CacheLossLine {
  int sinks = -1, window = -1;
  double dense = 0, sinksWindow = 0, windowOnly = 0;
  bool found = false;
};
CacheLossLine cacheLossLine(const std::string& out) {
  CacheLossLine c;
  const auto at = out.find("cache-loss:");
  if (at == std::string::npos) return c;
  c.found = std::sscanf(out.c_str() + at,
                        "cache-loss: sinks=%d window=%d dense=%lf sinks_window=%lf window_only=%lf",
                        &c.sinks, &c.window, &c.dense, &c.sinksWindow, &c.windowOnly) == 5;
  return c;
}

double cliMeanNll(const std::string& args) {
  const std::string out = runCli("score " + args);
  const auto at = out.find("mean NLL ");
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? 0.0 : std::strtod(out.c_str() + at + 9, nullptr);
}

TEST(AppModel, TheLossByTokenPanelScoresAsTheCommandLineDoes) {
  const std::string model = std::string(ATTNVIZ_SCENES) + "/../models/kjv-sp-llama";
  const std::string text =
      "'In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep.'";
  const Shot s = runApp("cache-loss", "--model " + model + " --text " + text + " --cache-loss 4,8");
  ASSERT_RAN(s);
  const CacheLossLine cl = cacheLossLine(s.out);
  ASSERT_TRUE(cl.found) << s.out;
  EXPECT_EQ(cl.sinks, 4);
  EXPECT_EQ(cl.window, 8);
  const std::string m = "--model " + model + " --text " + text;
  EXPECT_NEAR(cl.dense, cliMeanNll(m), 1e-5);
  EXPECT_NEAR(cl.sinksWindow, cliMeanNll(m + " --kv-sinks 4 --kv-window 8"), 1e-5);
  EXPECT_NEAR(cl.windowOnly, cliMeanNll(m + " --kv-sinks 0 --kv-window 12"), 1e-5);
  EXPECT_GT(cl.windowOnly, cl.sinksWindow);
}

// The preset "What RoPE's frequencies carry" opens the neuron view on the previous-token cell its
// notes quote: score 41.57 as run, 7.05 with the rotation removed.
TEST(AppModel, TheRopeFrequenciesPresetShowsTheNumbersItsNotesQuote) {
  const Shot s = runApp("preset26", "--scene " + scene("26-what-rope-frequencies-carry.json"));
  ASSERT_RAN(s);
  NeuronLine n;
  ASSERT_TRUE(parseNeuronLine(s.out, n)) << s.out;
  const int i = n.row, j = n.key;
  const double score = n.score, plain = n.plain;
  EXPECT_EQ(i, 8);
  EXPECT_EQ(j, 7);
  EXPECT_NEAR(score, 41.57, 0.01);
  EXPECT_NEAR(plain, 7.05, 0.01);
  std::ifstream f(scene("26-what-rope-frequencies-carry.json"));
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(text.find("41.57"), std::string::npos);
  EXPECT_NE(text.find("7.05"), std::string::npos);
}

// The residual-stream panel's largest |x| at a token, and the streams it marks, are those of
// `attnviz model --residual` (held to the torch reference's hidden states in the model tests).
TEST(AppModel, TheResidualPanelFindsTheLargestDimensionOfTheCommandLinesStream) {
  const std::string model = std::string(ATTNVIZ_SCENES) + "/../models/kjv-sp-llama";
  const std::string text = "'In the beginning God created the heaven and the earth.'";
  const Shot s = runApp("residual", "--model " + model + " --text " + text +
                                        " --select-row 0 --show-residual");
  ASSERT_RAN(s);
  ResidualLine r0;
  ASSERT_TRUE(parseResidualLine(s.out, r0)) << s.out;
  const int t = r0.token, D = r0.dim, k = r0.stream;
  const double largest = r0.largest, ratio = r0.overMedian;
  const std::string npy = tempPath("residual-cli.npy");
  const std::string out = runCli("model --model " + model + " --text " + text + " --residual " + npy);
  ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
  const attnviz::NpyArray r = attnviz::readNpy(npy);  // [L + 1, T, d]
  const int S = int(r.shape[0]), T = int(r.shape[1]), d = int(r.shape[2]);
  int wantD = 0, wantK = 0;
  double top = 0;
  for (int kk = 0; kk < S; ++kk)
    for (int j = 0; j < d; ++j) {
      const double a = std::fabs(r.data[(std::size_t(kk) * T + 0) * d + j]);
      if (a > top) top = a, wantD = j, wantK = kk;
    }
  EXPECT_EQ(t, 0);
  EXPECT_EQ(D, wantD);
  EXPECT_EQ(k, wantK);
  EXPECT_NEAR(largest, top, 1e-5 * std::max(1.0, top));
  EXPECT_GT(ratio, 1.0);
}

// The research presets open their panels from the scene, and the figures their notes
// quote come out of the command line and the app alike.
std::string sceneText(const std::string& file) {
  return attnviz::loadScene(std::string(ATTNVIZ_SCENES) + "/" + file).model.text;
}

TEST(AppResearchPresets, AttentionSinksScoresTheThreeCachesAsTheNoteAndTheCommandLineSay) {
  const Shot s = runApp("preset_sinks", "--scene " + scene("27-attention-sinks.json"));
  ASSERT_RAN(s);
  const CacheLossLine cl = cacheLossLine(s.out);
  ASSERT_TRUE(cl.found) << "the scene did not score its text: " << s.out;
  EXPECT_EQ(cl.sinks, 4);
  EXPECT_EQ(cl.window, 8);
  const double dense = cl.dense, sw = cl.sinksWindow, wo = cl.windowOnly;
  const std::string m = "--model " + std::string(ATTNVIZ_SCENES) + "/../models/kjv-sp-llama --text " +
                        shellQuote(sceneText("27-attention-sinks.json"));
  EXPECT_NEAR(dense, cliMeanNll(m), 1e-5);
  EXPECT_NEAR(sw, cliMeanNll(m + " --kv-sinks 4 --kv-window 8"), 1e-5);
  EXPECT_NEAR(wo, cliMeanNll(m + " --kv-sinks 0 --kv-window 12"), 1e-5);
  // The note's figures.
  EXPECT_NEAR(dense, 3.520, 5e-4);
  EXPECT_NEAR(sw, 3.691, 5e-4);
  EXPECT_NEAR(wo, 4.756, 5e-4);
  EXPECT_NEAR(cliMeanNll(m + " --kv-sinks 1 --kv-window 11"), 3.635, 5e-4);
  // The sink head: 0.997 of rows 4.. on key 0.
  const std::string npy = tempPath("sinks-w.npy");
  ASSERT_EQ(runCli("model " + m + " --layer 2 --weights " + npy).find("exit status"),
            std::string::npos);
  const attnviz::NpyArray w = attnviz::readNpy(npy);  // [H, T, T]
  const int T = int(w.shape[1]);
  double share = 0;
  for (int i = 4; i < T; ++i) share += w.data[(std::size_t(2) * T + i) * T + 0];
  EXPECT_NEAR(share / (T - 4), 0.997, 5e-4);

  // Saved from the app, the scene keeps the panel's cache, and reopened scores the same.
  const std::string saved = tempPath("sinks-saved.json");
  const Shot save = runApp("preset_sinks_save", "--scene " + scene("27-attention-sinks.json") +
                                                     " --save-scene " + saved);
  ASSERT_RAN(save);
  std::ifstream f(saved);
  const std::string json((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(json.find("\"cacheLoss\""), std::string::npos) << json;
  const Shot again = runApp("preset_sinks_again", "--scene " + saved);
  ASSERT_RAN(again);
  const CacheLossLine cl2 = cacheLossLine(again.out);
  ASSERT_TRUE(cl2.found) << again.out;
  EXPECT_EQ(cl2.sinks, 4);
  EXPECT_EQ(cl2.window, 8);
  EXPECT_EQ(cl2.sinksWindow, sw);
}

TEST(AppResearchPresets, MassiveActivationsOpensTheResidualPanelOnTheFirstToken) {
  const Shot s = runApp("preset_massive", "--scene " + scene("28-massive-activations.json"));
  ASSERT_RAN(s);
  ResidualLine r0;
  ASSERT_TRUE(parseResidualLine(s.out, r0))
      << "the scene did not open the residual panel: " << s.out;
  const int t = r0.token, D = r0.dim, k = r0.stream, marked = r0.marked;
  const double largest = r0.largest;
  // The note: dimension 37 at <s> after the last layer, 2224, under 100x the median (nothing
  // marked). The panel's ratio is over the token's own row; the note's is over the stream.
  EXPECT_EQ(t, 0);
  EXPECT_EQ(D, 37);
  EXPECT_EQ(k, 3);
  EXPECT_NEAR(largest, 2224.3, 0.5);
  EXPECT_EQ(marked, 0);
  const std::string m = "--model " + std::string(ATTNVIZ_SCENES) + "/../models/kjv-sp-llama --text " +
                        shellQuote(sceneText("28-massive-activations.json"));
  const std::string npy = tempPath("massive-r.npy");
  ASSERT_EQ(runCli("model " + m + " --residual " + npy).find("exit status"), std::string::npos);
  const attnviz::NpyArray r = attnviz::readNpy(npy);  // [L + 1, T, d]
  const std::size_t per = std::size_t(r.shape[1]) * std::size_t(r.shape[2]);
  std::vector<float> last(r.data.end() - std::ptrdiff_t(per), r.data.end());
  for (float& v : last) v = std::fabs(v);
  std::nth_element(last.begin(), last.begin() + std::ptrdiff_t(per / 2), last.end());
  EXPECT_NEAR(2224.3 / last[per / 2], 70.0, 0.5);
  EXPECT_NEAR(cliMeanNll(m), 3.520, 5e-4);
  EXPECT_NEAR(cliMeanNll(m + " --residual-edit 1:0:37:zero"), 3.606, 5e-4);
  // A mean is a prefix mean: at the first token it is the value itself.
  EXPECT_NEAR(cliMeanNll(m + " --residual-edit 1:0:37:mean"), 3.520, 5e-4);
  EXPECT_NEAR(cliMeanNll(m + " --residual-edit 1:all:37:zero"), 3.678, 5e-4);
  EXPECT_NEAR(cliMeanNll(m + " --residual-edit 1:all:37:mean"), 3.529, 5e-4);
}

TEST(AppResearchPresets, RetrievalHeadsFiguresComeFromTheCommandLine) {
  const Shot s = runApp("preset_retrieval", "--scene " + scene("29-retrieval-heads.json"));
  ASSERT_RAN(s);
  const std::string model = std::string(ATTNVIZ_SCENES) + "/../models/kjv-sp-llama";
  // The note's filler: Hebrews 1:1-3, one verse a line; the scene's text is its middle case.
  const std::string text = sceneText("29-retrieval-heads.json");
  const std::string needle = "And the name of the servant was Jehoiada. ";
  const std::size_t at = text.find(needle);
  ASSERT_NE(at, std::string::npos);
  const std::string question = "And the name of the servant was";
  std::string filler = text.substr(0, at) + text.substr(at + needle.size());
  filler = filler.substr(0, filler.size() - question.size());
  const std::string fillerFile = tempPath("hebrews-1-1-3.txt");
  {
    std::ofstream f(fillerFile, std::ios::binary);
    f << filler;
  }
  const std::string out = runCli(
      "retrieval --model " + model + " --filler-file " + fillerFile +
      " --needle 'And the name of the servant was Jehoiada.' --question " + shellQuote(question) +
      " --answer 'Jehoiada.' --depths 0,0.25,0.5,0.75,1 --mask-k 2 --random 5 --print-ids");
  ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
  // The scene's text is the middle case's.
  std::string escaped;
  for (char c : text) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  EXPECT_NE(out.find("text " + escaped + "\n"), std::string::npos) << out;
  for (const char* line : {"head 2:1\t1.0000", "head 2:0\t0.9600", "head 2:3\t0.7200",
                           "head 2:5\t0.4400", "head 2:2\t0.3600", "head 0:4\t0.1200",
                           "6 of 24 heads above 0", "no mask\t-1.856", "top-2 masked (2:0 2:1)\t-11.129",
                           "\t0/5\n", "mean of 5 draws\t-8.02", "14/25"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  // The scene opens the Retrieval heads panel, which ran the same cases from the view's text
  // (the needle and question taken back out) and shows the same numbers.
  const auto at2 = s.out.find("retrieval: best=");
  ASSERT_NE(at2, std::string::npos) << "the scene did not score the heads: " << s.out;
  int bl = -1, bh = -1, copied = -1;
  double score = 0, none = 0, top = 0, random = 0;
  ASSERT_EQ(std::sscanf(s.out.c_str() + at2,
                        "retrieval: best=%d:%d score=%lf none=%lf top=%lf random=%lf copied=%d",
                        &bl, &bh, &score, &none, &top, &random, &copied),
            7);
  EXPECT_EQ(bl, 2);
  EXPECT_EQ(bh, 1);
  EXPECT_NEAR(score, 1.0, 1e-6);
  // Both sides print 6 decimals of a float32 log-probability (about 2e-7 apart when the app's
  // worker and the command line sum in another order): up to one unit of the last digit plus
  // that apart.
  constexpr double kPrinted = 1.5e-6;
  EXPECT_NEAR(none, std::strtod(out.c_str() + out.find("no mask\t") + 8, nullptr), kPrinted);
  EXPECT_NEAR(top, std::strtod(out.c_str() + out.find("(2:0 2:1)\t") + 10, nullptr), kPrinted);
  EXPECT_NEAR(random, std::strtod(out.c_str() + out.find("draws\t") + 6, nullptr), kPrinted);
  EXPECT_EQ(copied, 5);
}

TEST(AppModel, AblatingHeadsChangesTheNextTokenPanelAsTorchSays) {
  const std::string args = "--model " + kModelFixture + " --text " + shellQuote(kModelText);
  const Shot plain = runApp("model_plain", args);
  ASSERT_RAN(plain);
  const Shot ablated = runApp("model_ablate", args + " --ablate 0:1 --ablate 1:0");
  ASSERT_RAN(ablated);
  const auto wantPlain = torchTop5(kModelFixture + "/plain_logits.npy");
  const auto wantAblate = torchTop5(kModelFixture + "/ablate_logits.npy");
  auto expectSame = [](const std::vector<std::pair<int, double>>& got,
                       const std::vector<std::pair<int, double>>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].first, want[k].first) << what << " rank " << k;
      EXPECT_NEAR(got[k].second, want[k].second, 1e-4) << what << " rank " << k;
    }
  };
  expectSame(nextTokens(plain.out, "after"), wantPlain, "no intervention");
  expectSame(nextTokens(ablated.out, "before"), wantPlain, "before the ablation");
  expectSame(nextTokens(ablated.out, "after"), wantAblate, "after the ablation");
  // The two torch lists differ, so the panel's change is real.
  EXPECT_NE(wantPlain, wantAblate);
  // A bad ablation is a usage error.
  const Shot bad = runApp("model_bad", args + " --ablate 5:0");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("--ablate 5:0"), std::string::npos) << bad.out;
}

TEST(AppModel, ThePreviousTokenPresetShowsTheLineLeftOfTheDiagonal) {
  // The shipped model's layer 0 head 3 scores 0.89 on A[t, t-1] in its model card: most rows of
  // the heatmap must be bright one cell left of the diagonal and dark on it.
  const Shot s = runApp("model_preset", "--scene " + scene("13-model-previous-token-head.json"));
  ASSERT_RAN(s);
  ASSERT_GT(s.g.rows, 20);
  int bright = 0;
  for (int i = 1; i < s.g.rows; ++i)
    if (tableIndex(attnviz::ColormapId::Viridis, s.cell(i, i - 1)) >= 128 &&
        tableIndex(attnviz::ColormapId::Viridis, s.cell(i, i)) < 64)
      ++bright;
  EXPECT_GE(bright, (s.g.rows - 1) * 8 / 10) << bright << " of " << s.g.rows - 1 << " rows";
  EXPECT_TRUE(isMasked(s.cell(0, 1)));
  EXPECT_NE(s.out.find("model-layer: 0"), std::string::npos) << s.out;
}

// Editing the text runs the pass on a worker thread; once it is adopted the next-token panel is
// the new text's, as torch computes it (the fixture's text), not the text the model opened on.
TEST(AppModel, AnEditedTextRunsOffTheFrameThreadAndUpdatesTheNextTokens) {
  const Shot s = runApp("model_edit", "--model " + kModelFixture + " --text 'the dog' --edit-text " +
                                          shellQuote(kModelText));
  ASSERT_RAN(s);
  const auto want = torchTop5(kModelFixture + "/plain_logits.npy");
  const auto got = nextTokens(s.out, "after");
  ASSERT_EQ(got.size(), want.size()) << s.out;
  for (std::size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].first, want[k].first) << "rank " << k;
    EXPECT_NEAR(got[k].second, want[k].second, 1e-4) << "rank " << k;
  }
  const Shot bad = runApp("model_edit_bad", "--edit-text 'no model'");
  EXPECT_EQ(bad.rc, 2) << bad.out;
}

// The induction preset repeats a made-up key; in the second copy layer 1 head 2 must attend to
// the key right after the earlier occurrence of the query's byte: a stripe one cell right of the
// diagonal shifted back by the distance between the copies. The stripe's cells are found from the
// text here, not from the model.
TEST(AppModel, TheInductionPresetShowsTheStripeToTheByteAfterTheEarlierOccurrence) {
  const std::string text = "The key is 8g3kx-vq2m-pl7w. Again, the key is 8g3kx-vq2m-pl7w.";
  const std::string key = "8g3kx-vq2m-pl7w.";
  const int first = int(text.find(key)), second = int(text.rfind(key));
  ASSERT_LT(first, second);
  const int gap = second - first;
  const Shot s = runApp("model_induction", "--scene " + scene("15-model-induction-heads.json"));
  ASSERT_RAN(s);
  ASSERT_EQ(s.g.rows, int(text.size()));
  EXPECT_NE(s.out.find("model-layer: 1"), std::string::npos) << s.out;
  // Queries on the second copy (but its first byte, whose predecessor differs from the first
  // copy's): the cell at key t - gap + 1 is bright, the diagonal dark.
  int rows = 0, bright = 0;
  for (int t = second + 1; t < second + int(key.size()); ++t) {
    ++rows;
    const int j = t - gap + 1;
    if (tableIndex(attnviz::ColormapId::Viridis, s.cell(t, j)) >= 128 &&
        tableIndex(attnviz::ColormapId::Viridis, s.cell(t, t)) < 64)
      ++bright;
  }
  EXPECT_GE(bright, rows * 8 / 10) << bright << " of " << rows << " rows";
}

// The ablation preset stops inside the key's second copy, where only copying predicts the next
// byte ('l'). With the induction head ablated the next-token panel's "before" list must still
// have 'l' on top and the "after" list must not; the probabilities are the model's (the model
// tests check them against torch).
TEST(AppModel, TheAblationPresetShowsTheCopyPredictionFail) {
  const Shot s = runApp("model_ablate_preset",
                        "--scene " + scene("16-model-ablate-induction-head.json"));
  ASSERT_RAN(s);
  const auto before = nextTokens(s.out, "before"), after = nextTokens(s.out, "after");
  ASSERT_FALSE(before.empty()) << s.out;
  ASSERT_FALSE(after.empty()) << s.out;
  const int copied = int('l');
  EXPECT_EQ(before[0].first, copied);
  EXPECT_GE(before[0].second, 0.5);
  EXPECT_NE(after[0].first, copied);
  double pAfter = 0.0;  // 0 when 'l' left the top five
  for (const auto& [id, p] : after)
    if (id == copied) pAfter = p;
  EXPECT_LE(pAfter, 0.5 * before[0].second);
}

// A model preset exports from the command line (export --scene) exactly as the app exports it:
// the layer and head the scene names, on its text, with its ablations, and a title naming them.
TEST(AppModel, AModelPresetExportsTheSameFromTheAppAndTheCommandLine) {
  for (const char* file : {"13-model-previous-token-head.json", "15-model-induction-heads.json",
                           "16-model-ablate-induction-head.json"}) {
    const std::string tag = std::string("model-wysiwye-") + std::string(file).substr(0, 2);
    const std::string gui = tempPath(tag + "-gui.png"), cli = tempPath(tag + "-cli.png");
    for (const auto& f : {gui, cli}) std::remove(f.c_str());
    const Shot s = runApp(tag, "--scene " + scene(file) + " --export " + gui, 6);
    ASSERT_RAN(s);
    const std::string out = runCli("export --scene " + scene(file) + " --png " + cli);
    ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
    ASSERT_FALSE(fileBytes(gui).empty()) << file << ": the app wrote no PNG\n" << s.out;
    ASSERT_FALSE(fileBytes(cli).empty()) << file << ": the command line wrote no PNG\n" << out;
    EXPECT_TRUE(fileBytes(gui) == fileBytes(cli)) << file << ": the PNG files differ";
  }
  // Ablating layer 1 head 2 leaves that head's own weights as they were (its output is what is
  // zeroed), so the ablation preset's figure differs from the same scene without the ablation
  // only in its title, which names the ablated head.
  const std::string plainScene = tempPath("model-unablated.json");
  {
    std::ifstream in(scene("16-model-ablate-induction-head.json"));
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const auto at = text.find("\"ablate\"");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, text.find(']', at) + 1 - at, "\"ablate\": []");
    std::ofstream(plainScene) << text;
  }
  const std::string a = tempPath("model-ablated-title.png"), b = tempPath("model-plain-title.png");
  runCli("export --scene " + scene("16-model-ablate-induction-head.json") + " --png " + a);
  runCli("export --scene " + plainScene + " --png " + b);
  const Decoded da = decode(a), db = decode(b);
  ASSERT_GT(da.width, 0);
  ASSERT_EQ(da.width, db.width);
  ASSERT_EQ(da.height, db.height);
  int firstRow = -1, lastRow = -1;
  for (int y = 0; y < da.height; ++y)
    for (int x = 0; x < da.width; ++x) {
      const std::size_t k = (std::size_t(y) * da.width + x) * 4;
      if (!std::equal(&da.rgba[k], &da.rgba[k] + 4, &db.rgba[k])) {
        if (firstRow < 0) firstRow = y;
        lastRow = y;
      }
    }
  EXPECT_GE(firstRow, 0) << "the title does not name the ablation";
  EXPECT_LT(lastRow, da.height / 20) << "more than the title differs";
}

// A quantized GGUF's figure names its type in the title ("NAME · Q8_0 · layer L"), and the app's
// export of a model scene on it is still byte for byte `export --scene`'s. The file is the shipped
// kjv-sp-llama converted by tools/gguf/hf_to_gguf.py; beside it an F32 conversion, whose title
// names no type: the two figures' titles differ where the type is written.
TEST(AppModel, AQuantizedGgufsTitleNamesItsTypeTheSameInTheAppAndTheCommandLine) {
  const std::string dir = tempPath("gguf-title");
  std::filesystem::create_directories(dir);
  const std::string tool = std::string(ATTNVIZ_SOURCE_DIR) + "/tools/gguf/hf_to_gguf.py";
  const std::string model = std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-sp-llama";
  auto sceneFor = [&](const std::string& type) {
    // The same file name in both folders: the titles differ only by the type.
    std::filesystem::create_directories(dir + "/" + type);
    const std::string gguf = dir + "/" + type + "/kjv.gguf";
    const attnviz::testing::ShellRun conv = attnviz::testing::runShell(
        ATTNVIZ_PYTHON " " + tool + " " + model + " " + gguf + " --type " + type);
    EXPECT_EQ(conv.rc, 0) << conv.out;
    const std::string path = dir + "/scene-" + type + ".json";
    std::ofstream(path) << "{\"model\": {\"path\": \"" << gguf
                        << "\", \"text\": \"In the beginning God created the heaven and the "
                           "earth.\", \"layer\": 1, \"head\": 2}}";
    return path;
  };
  const std::string q8 = sceneFor("Q8_0"), f32 = sceneFor("F32");
  const std::string gui = tempPath("gguf-title-gui.png"), cli = tempPath("gguf-title-cli.png"),
                    plain = tempPath("gguf-title-f32.png");
  for (const auto& f : {gui, cli, plain}) std::remove(f.c_str());
  const Shot s = runApp("gguf-title", "--scene " + q8 + " --export " + gui, 6);
  ASSERT_RAN(s);
  const std::string out = runCli("export --scene " + q8 + " --png " + cli);
  ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
  ASSERT_FALSE(fileBytes(gui).empty()) << "the app wrote no PNG\n" << s.out;
  EXPECT_TRUE(fileBytes(gui) == fileBytes(cli)) << "the PNG files differ";
  runCli("export --scene " + f32 + " --png " + plain);
  const Decoded dq = decode(cli), df = decode(plain);
  ASSERT_GT(dq.width, 0);
  ASSERT_EQ(dq.width, df.width);
  // The title band: "kjv.gguf · Q8_0 · layer 1 ..." against "kjv.gguf · layer 1 ...": the Q8_0
  // title is the wider.
  auto inkColumns = [](const Decoded& d) {
    int last = -1;
    for (int y = 0; y < d.height / 20; ++y)
      for (int x = 0; x < d.width; ++x) {
        const std::size_t k = (std::size_t(y) * d.width + x) * 4;
        const std::size_t bg = (std::size_t(y) * d.width + d.width - 1) * 4;
        if (!std::equal(&d.rgba[k], &d.rgba[k] + 3, &d.rgba[bg])) last = std::max(last, x);
      }
    return last;
  };
  EXPECT_GT(inkColumns(dq), inkColumns(df) + 10)
      << "the Q8_0 figure's title is no wider than the F32 one's";
  std::filesystem::remove_all(dir);
}

// A model scene whose layer the model lacks: the command line refuses it naming the file, as the
// app does.
TEST(AppModel, ExportOfAModelSceneWithALayerTheModelLacksNamesTheFile) {
  const std::string sc = tempPath("bad_model_export.json");
  std::ofstream(sc) << "{\"model\": {\"path\": \"" << kModelFixture
                    << "\", \"text\": \"the cat\", \"layer\": 7}}";
  const std::string out = runCli("export --scene " + sc + " --png " + tempPath("never.png"));
  EXPECT_NE(out.find(sc + ": model.layer 7: out of range"), std::string::npos) << out;
  EXPECT_NE(out.find("exit status not 0"), std::string::npos) << out;
}

TEST(AppModel, AModelSceneWithALayerTheModelLacksIsRefusedNamingTheFile) {
  const std::string sc = tempPath("bad_model.json");
  std::ofstream(sc) << "{\"model\": {\"path\": \"" << kModelFixture
                    << "\", \"text\": \"the cat\", \"layer\": 7}}";
  const Shot s = runApp("model_bad_scene", "--scene " + sc);
  EXPECT_EQ(s.rc, 1) << s.out;
  EXPECT_NE(s.out.find(sc + ": model.layer 7: out of range"), std::string::npos) << s.out;
}

// A model scene whose request the model cannot meet, opened over an open model: the error names
// the scene and the field, and the open model stays open with its text.
TEST(AppModel, ABadModelSceneOpenedOverAModelLeavesTheModelOpenAndSaysWhy) {
  const std::string sc = tempPath("bad_model_drop.json");
  std::ofstream(sc) << "{\"model\": {\"path\": \"" << kModelFixture
                    << "\", \"text\": \"the dog ran\", \"layer\": 7}}";
  const std::string saved = tempPath("bad_model_drop_saved.json");
  std::remove(saved.c_str());
  const Shot s = runApp("model_drop_bad", "--model " + kModelFixture +
                                              " --text 'the cat' --layer 1 --drop " + sc +
                                              " --save-scene " + saved);
  EXPECT_NE(s.out.find(sc + ": model.layer 7: out of range"), std::string::npos) << s.out;
  const std::vector<unsigned char> bytes = fileBytes(saved);
  const std::string json(bytes.begin(), bytes.end());
  EXPECT_NE(json.find("\"model\""), std::string::npos) << "the open model was closed\n" << json;
  EXPECT_NE(json.find("\"the cat\""), std::string::npos) << "the open model's text changed\n"
                                                         << json;
  EXPECT_NE(json.find("\"layer\": 1"), std::string::npos) << json;
}

}  // namespace
