// App tests for encoders: a sentence pair's slice and colours, the special tokens
// hidden with each row renormalised, the [MASK] fill panel before and after an ablation, and a
// saved encoder scene exported by the command line. The model is tests/model/encoder_reference.py's
// random-init BERT folder (made at test time); the expected numbers come from the weights
// `attnviz model --weights` writes, the float64 torch reference's fills and `attnviz fill`, and the
// colours from the colormap table, never from the app's own output.
#include <unistd.h>

#include "attnviz/formats/npy.h"
#include "attnviz/render/colormap.h"
#include "run_shell.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using attnviz::RGBA8;

std::string quote(const std::string& text) { return attnviz::testing::shellQuote(text); }

// The reference script's folders and cases, made once for the binary.
struct Reference {
  attnviz::testing::ProcessTempDir owned{"attnviz_encoder_app_ref"};
  fs::path dir;
  nlohmann::json pair;  // the "bert_pair" case: text, text_pair, ids, types, fill
  bool ok = false;
  Reference() {
    if (owned.path.empty()) return;
    dir = owned.path;
    const std::string cmd = ATTNVIZ_PYTHON " " +
                            quote(std::string(ATTNVIZ_SOURCE_DIR) +
                                  "/tests/model/encoder_reference.py") +
                            " " + quote(dir.string()) + " > /dev/null";
    if (attnviz::testing::runShell(cmd).rc != 0) return;
    std::ifstream f(dir / "cases.json");
    const nlohmann::json cases = nlohmann::json::parse(f);
    const nlohmann::json& list = cases.is_array() ? cases : cases["cases"];
    for (const auto& c : list)
      if (c["name"] == "bert_pair") pair = c;
    ok = !pair.is_null();
  }
  std::string model() const { return (dir / "bert_mlm").string(); }
  std::string a() const { return pair["text"].get<std::string>(); }
  std::string b() const { return pair["text_pair"].get<std::string>(); }
};

const Reference& ref() {
  static Reference r;
  return r;
}

std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "attnviz_encapp_" + name;
}

attnviz::testing::ShellRun cli(const std::string& args) {
  return attnviz::testing::runShell(std::string(ATTNVIZ_BIN) + " " + args);
}

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
  RGBA8 at(int x, int y) const {
    const unsigned char* p = &rgba[(std::size_t(y) * width + x) * 4];
    return RGBA8{p[0], p[1], p[2], p[3]};
  }
};

Image decode(const std::string& path) {
  Image d;
  int n = 0;
  if (unsigned char* data = stbi_load(path.c_str(), &d.width, &d.height, &n, 4)) {
    d.rgba.assign(data, data + std::size_t(d.width) * d.height * 4);
    stbi_image_free(data);
  }
  return d;
}

std::vector<unsigned char> bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

struct App {
  int rc = -1;
  std::string out;
  Image shot;
  float x0 = 0, y0 = 0, cell = 0;
  int rows = 0, cols = 0;
  bool geometry = false;
};

// The app under Xvfb on the pair, `args` added; a screenshot of the last frame.
App runApp(const std::string& name, const std::string& args, int frames = 8) {
  App a;
  const std::string png = tmp(name + ".png");
  std::remove(png.c_str());
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1600x1000x24\" " +
                          ATTNVIZ_BIN + " --size 1600x1000 --frames " + std::to_string(frames) +
                          " --screenshot " + png + " " + args;
  for (int attempt = 0; attempt < 3; ++attempt) {  // xvfb-run -a can race another server
    const attnviz::testing::ShellRun r = attnviz::testing::runShell(cmd);
    a.rc = r.rc;
    a.out = r.out;
    if (a.out.find("xvfb-run: error") == std::string::npos &&
        a.out.find("LeakSanitizer has encountered a fatal error") == std::string::npos)
      break;
  }
  a.shot = decode(png);
  if (const auto at = a.out.find("geometry:"); at != std::string::npos) {
    float w = 0, h = 0;
    a.geometry = std::sscanf(a.out.c_str() + at, "geometry: x0=%f y0=%f w=%f h=%f cell=%f rows=%d cols=%d",
                             &a.x0, &a.y0, &w, &h, &a.cell, &a.rows, &a.cols) == 7;
  }
  return a;
}

std::string pairArgs() {
  return "--model " + quote(ref().model()) + " --text " + quote(ref().a()) + " --text-pair " +
         quote(ref().b());
}

// Layer L, head h of `attnviz model --weights` on the pair: [T, T].
std::vector<float> cliWeights(int layer, int head, int& T) {
  // Two tests read it, perhaps at once: each process its own file.
  const std::string w = tmp("pair_weights_" + std::to_string(::getpid()) + ".npy");
  const attnviz::testing::ShellRun r =
      cli("model --model " + quote(ref().model()) + " --text " + quote(ref().a()) +
          " --text-pair " + quote(ref().b()) + " --weights " + w);
  EXPECT_EQ(r.rc, 0) << r.out;
  const attnviz::NpyArray a = attnviz::readNpy(w);
  T = int(a.shape[2]);
  const std::size_t n = std::size_t(T) * T;
  const float* p = a.data.data() + (std::size_t(layer) * a.shape[1] + head) * n;
  return std::vector<float>(p, p + n);
}

// Whether `c` is the viridis colour of a weight within one table step of w.
bool viridisNear(RGBA8 c, double w) {
  const double x = std::clamp(w, 0.0, 1.0) * 255.0;
  const auto& t = attnviz::colormapTable(attnviz::ColormapId::Viridis);
  for (int k = std::max(0, int(std::floor(x)) - 1); k <= std::min(255, int(std::ceil(x)) + 1); ++k)
    if (t[k].r == c.r && t[k].g == c.g && t[k].b == c.b) return true;
  return false;
}

// Pixels of a colour within `tol` in the rectangle [x0, x1) x [y0, y1).
int countColour(const Image& img, RGBA8 c, int x0, int y0, int x1, int y1, int tol = 12) {
  int n = 0;
  for (int y = std::max(0, y0); y < std::min(img.height, y1); ++y)
    for (int x = std::max(0, x0); x < std::min(img.width, x1); ++x) {
      const RGBA8 p = img.at(x, y);
      n += std::abs(p.r - c.r) <= tol && std::abs(p.g - c.g) <= tol && std::abs(p.b - c.b) <= tol;
    }
  return n;
}

// The positions of text 0 (A, with [CLS] and its [SEP]) or 1 (B and its [SEP]).
std::vector<int> segment(int which) {
  std::vector<int> out;
  const std::vector<int> types = ref().pair["types"].get<std::vector<int>>();
  for (std::size_t t = 0; t < types.size(); ++t)
    if (types[t] == which) out.push_back(int(t));
  return out;
}

// "heatmap-row: ... values=v0,v1,..." as numbers.
std::vector<double> heatmapRow(const std::string& out) {
  std::vector<double> v;
  const auto at = out.find("heatmap-row:");
  if (at == std::string::npos) return v;
  const auto vals = out.find("values=", at);
  std::stringstream ss(out.substr(vals + 7, out.find('\n', vals) - vals - 7));
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stod(item));
  return v;
}

struct FillLine {
  int position = -1, id = -1;
  double prob = 0;
};
// Lines "TAG\tposition\tid\tprob\tpiece" (the app's, TAG "fill-after"/"fill-before") or, with an
// empty tag, `attnviz fill`'s own "position\tid\tprob\tpiece".
std::vector<FillLine> fillLines(const std::string& out, const std::string& tag) {
  std::vector<FillLine> r;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    const char* p = line.c_str();
    if (!tag.empty()) {
      if (line.rfind(tag + "\t", 0) != 0) continue;
      p += tag.size() + 1;
    } else if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0]))) {
      continue;
    }
    FillLine f;
    if (std::sscanf(p, "%d\t%d\t%lf", &f.position, &f.id, &f.prob) == 3) r.push_back(f);
  }
  return r;
}

#define REQUIRE_REFERENCE() ASSERT_TRUE(ref().ok) << "encoder_reference.py failed"

TEST(EncoderApp, TheABSliceShowsTheSubBlockOfTheWeightsWithEachTextInItsColour) {
  REQUIRE_REFERENCE();
  const int layer = 1, head = 2;
  int T = 0;
  const std::vector<float> w = cliWeights(layer, head, T);
  const std::vector<int> rowsA = segment(0), colsB = segment(1);
  ASSERT_EQ(int(rowsA.size() + colsB.size()), T);
  const std::string saved = tmp("ab.json"), appPng = tmp("ab-app.png");
  const App a = runApp("ab", pairArgs() + " --slice a-b --layer 1 --head 2 --save-scene " +
                                 saved + " --export " + appPng);
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_TRUE(a.geometry) << a.out;
  // Rows: A's tokens ([CLS] A [SEP]); columns: B's (B [SEP]).
  ASSERT_EQ(a.rows, int(rowsA.size()));
  ASSERT_EQ(a.cols, int(colsB.size()));
  int bad = 0;
  for (int r = 0; r < a.rows; ++r)
    for (int c = 0; c < a.cols; ++c) {
      const int x = int(std::floor(a.x0 + (c + 0.5f) * a.cell));
      const int y = int(std::floor(a.y0 + (r + 0.5f) * a.cell));
      const double want = w[std::size_t(rowsA[r]) * T + colsB[c]];
      if (!viridisNear(a.shot.at(x, y), want)) ++bad;
    }
  EXPECT_EQ(bad, 0) << "cells of the A->B block that are not the weights' colour";
  // The row labels (left of the cells) are A's colour, the column labels (above) B's.
  const RGBA8 blueA{110, 170, 255, 255}, orangeB{255, 160, 80, 255};
  const int left = int(a.x0) - 260, top = int(a.y0) - 120;
  const int rowLabelA = countColour(a.shot, blueA, left, int(a.y0), int(a.x0) - 2,
                                    int(a.y0 + a.rows * a.cell));
  const int rowLabelB = countColour(a.shot, orangeB, left, int(a.y0), int(a.x0) - 2,
                                    int(a.y0 + a.rows * a.cell));
  const int colLabelA = countColour(a.shot, blueA, int(a.x0), top, int(a.x0 + a.cols * a.cell),
                                    int(a.y0) - 2);
  const int colLabelB = countColour(a.shot, orangeB, int(a.x0), top,
                                    int(a.x0 + a.cols * a.cell), int(a.y0) - 2);
  EXPECT_GT(rowLabelA, 20);
  EXPECT_EQ(rowLabelB, 0);
  EXPECT_GT(colLabelB, 20);
  EXPECT_EQ(colLabelA, 0);

  // The saved scene keeps the pair and the slice; `export --scene` draws the app's export byte
  // for byte, and its bare cells are the same block of the command line's weights.
  std::ifstream f(saved);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["model"]["text_pair"], ref().b());
  EXPECT_EQ(j["model"]["slice"], "a-b");
  const std::string cliPng = tmp("ab-cli.png"), bare = tmp("ab-bare.png");
  attnviz::testing::ShellRun r = cli("export --scene " + saved + " --png " + cliPng);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::vector<unsigned char> appBytes = bytes(appPng);
  ASSERT_FALSE(appBytes.empty());
  EXPECT_TRUE(appBytes == bytes(cliPng)) << "the app's export and export --scene differ";
  r = cli("export --scene " + saved + " --bare --cell 4 --png " + bare);
  ASSERT_EQ(r.rc, 0) << r.out;
  const Image img = decode(bare);
  ASSERT_EQ(img.width, 4 * int(colsB.size()));
  ASSERT_EQ(img.height, 4 * int(rowsA.size()));
  bad = 0;
  for (std::size_t r2 = 0; r2 < rowsA.size(); ++r2)
    for (std::size_t c = 0; c < colsB.size(); ++c)
      if (!viridisNear(img.at(int(c) * 4 + 2, int(r2) * 4 + 2),
                       w[std::size_t(rowsA[r2]) * T + colsB[c]]))
        ++bad;
  EXPECT_EQ(bad, 0) << "cells of export --scene's bare block";

  // The saved scene reopens to the same view: saved again, the same JSON.
  const std::string again = tmp("ab-again.json");
  const App b = runApp("ab-again", "--scene " + saved + " --save-scene " + again, 6);
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_EQ(b.cols, a.cols);
  const std::vector<unsigned char> s1 = bytes(saved), s2 = bytes(again);
  EXPECT_TRUE(s1 == s2) << std::string(s2.begin(), s2.end());
}

TEST(EncoderApp, HiddenSpecialTokensLeaveTheMatrixAndEachRowIsRenormalisedOverTheKeysLeft) {
  REQUIRE_REFERENCE();
  const int layer = 0, head = 1;
  int T = 0;
  const std::vector<float> w = cliWeights(layer, head, T);
  // The reference's special tokens: [CLS] (2) and [SEP] (3) of its vocabulary.
  const std::vector<int> ids = ref().pair["ids"].get<std::vector<int>>();
  std::vector<int> kept;
  for (int t = 0; t < T; ++t)
    if (ids[std::size_t(t)] != 2 && ids[std::size_t(t)] != 3) kept.push_back(t);
  ASSERT_EQ(int(kept.size()), T - 3);
  const int row = 4;  // a display row
  const std::string saved = tmp("hide.json");
  const App a = runApp("hide", pairArgs() + " --special hide --layer 0 --head 1 --select-row " +
                                   std::to_string(row) + " --save-scene " + saved);
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_EQ(a.rows, int(kept.size()));
  ASSERT_EQ(a.cols, int(kept.size()));
  const std::vector<double> shown = heatmapRow(a.out);
  ASSERT_EQ(shown.size(), kept.size()) << a.out;
  double visible = 0, sum = 0;
  for (int j : kept) visible += w[std::size_t(kept[row]) * T + j];
  for (std::size_t c = 0; c < kept.size(); ++c) {
    EXPECT_NEAR(shown[c], w[std::size_t(kept[row]) * T + kept[c]] / visible, 2e-6) << c;
    sum += shown[c];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_LT(visible, 0.999) << "the hidden keys held some weight, so renormalising shows";
  // The same renormalised block from `export --scene`, cell by cell.
  const std::string bare = tmp("hide-bare.png");
  const attnviz::testing::ShellRun r = cli("export --scene " + saved + " --bare --cell 4 --png " + bare);
  ASSERT_EQ(r.rc, 0) << r.out;
  const Image img = decode(bare);
  ASSERT_EQ(img.width, 4 * int(kept.size()));
  int bad = 0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    double z = 0;
    for (int j : kept) z += w[std::size_t(kept[i]) * T + j];
    for (std::size_t c = 0; c < kept.size(); ++c)
      if (!viridisNear(img.at(int(c) * 4 + 2, int(i) * 4 + 2),
                       w[std::size_t(kept[i]) * T + kept[c]] / z))
        ++bad;
  }
  EXPECT_EQ(bad, 0);
}

TEST(EncoderApp, TheFillPanelsTopKIsTheCommandLinesAndTheReferencesBeforeAndAfterAnAblation) {
  REQUIRE_REFERENCE();
  const std::string textArgs =
      "--model " + quote(ref().model()) + " --text " + quote(ref().a()) + " --text-pair " +
      quote(ref().b());
  const App a = runApp("fill", pairArgs() + " --ablate 1:2 --print-fill", 4);
  ASSERT_EQ(a.rc, 0) << a.out;
  const std::vector<FillLine> after = fillLines(a.out, "fill-after");
  const std::vector<FillLine> before = fillLines(a.out, "fill-before");
  attnviz::testing::ShellRun r = cli("fill " + textArgs);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::vector<FillLine> plain = fillLines(r.out, "");
  r = cli("fill " + textArgs + " --ablate 1:2");
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::vector<FillLine> ablated = fillLines(r.out, "");
  ASSERT_EQ(before.size(), plain.size()) << a.out;
  ASSERT_EQ(after.size(), ablated.size()) << a.out;
  ASSERT_FALSE(plain.empty());
  auto same = [](const std::vector<FillLine>& x, const std::vector<FillLine>& y) {
    for (std::size_t k = 0; k < x.size(); ++k) {
      EXPECT_EQ(x[k].position, y[k].position) << k;
      EXPECT_EQ(x[k].id, y[k].id) << k;
      EXPECT_NEAR(x[k].prob, y[k].prob, 2e-6) << k;
    }
  };
  same(before, plain);
  same(after, ablated);
  // The ablation changes the fill (so the panel follows it), and the plain pass is torch's.
  bool differs = false;
  for (std::size_t k = 0; k < after.size(); ++k)
    differs |= after[k].id != before[k].id || std::fabs(after[k].prob - before[k].prob) > 1e-3;
  EXPECT_TRUE(differs);
  const nlohmann::json& fill = ref().pair["fill"];
  ASSERT_EQ(fill.size(), 1u);
  const std::vector<int> ids = fill[0]["ids"].get<std::vector<int>>();
  const std::vector<double> probs = fill[0]["probs"].get<std::vector<double>>();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    EXPECT_EQ(before[k].position, fill[0]["position"].get<int>());
    EXPECT_EQ(before[k].id, ids[k]) << k;
    EXPECT_NEAR(before[k].prob, probs[k], 1e-5) << k;
  }
}

// "key=value" from the app's "encoder:" line.
std::string encoderField(const std::string& out, const std::string& key) {
  const auto at = out.find("encoder:");
  if (at == std::string::npos) return "(no encoder line)";
  const std::string line = out.substr(at, out.find('\n', at) - at);
  const auto k = line.find(" " + key + "=");
  if (k == std::string::npos) return "(no " + key + ")";
  const auto v = k + key.size() + 2;
  return line.substr(v, line.find(' ', v) - v);
}

TEST(EncoderApp, TheModelPanelStatesWindowsVocabularyAndPoolingAsTheFolderSays) {
  REQUIRE_REFERENCE();
  // ModernBERT: the windows from its config.json as written (every n-th layer global, from 0).
  std::ifstream f(ref().dir / "modernbert_mlm" / "config.json");
  const nlohmann::json c = nlohmann::json::parse(f);
  const int layers = c["num_hidden_layers"], every = c["global_attn_every_n_layers"];
  std::string local, global;
  for (int l = 0; l < layers; ++l) {
    std::string& list = l % every == 0 ? global : local;
    list += (list.empty() ? "" : ",") + std::to_string(l);
  }
  App a = runApp("facts-modernbert", "--model " + quote((ref().dir / "modernbert_mlm").string()) +
                                         " --text " + quote("The cat sat on the [MASK]."), 3);
  ASSERT_EQ(a.rc, 0) << a.out;
  EXPECT_EQ(encoderField(a.out, "attention"), "bidirectional");
  EXPECT_EQ(encoderField(a.out, "local"), local);
  EXPECT_EQ(encoderField(a.out, "global"), global);
  EXPECT_EQ(encoderField(a.out, "window"), std::to_string(c["local_attention"].get<int>()));
  EXPECT_EQ(encoderField(a.out, "vocabulary"), "WordPiece");  // its vocab.txt
  EXPECT_EQ(encoderField(a.out, "pooling"), "-");
  // A sentence-transformers copy of the BERT folder: modules.json names the pooling module.
  const fs::path st = fs::path(tmp("st"));
  fs::remove_all(st);
  fs::copy(ref().dir / "bert_mlm", st, fs::copy_options::recursive);
  fs::create_directories(st / "1_Pooling");
  std::ofstream(st / "modules.json")
      << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";
  for (const auto& [mode, key] : {std::pair<std::string, std::string>{"mean", "pooling_mode_mean_tokens"},
                                  {"cls", "pooling_mode_cls_token"}}) {
    std::ofstream(st / "1_Pooling" / "config.json")
        << "{\"word_embedding_dimension\": 32, \"" << key << "\": true}";
    a = runApp("facts-st-" + mode, "--model " + quote(st.string()) + " --text " + quote("The cat sat."), 3);
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_EQ(encoderField(a.out, "pooling"), mode);
    EXPECT_EQ(encoderField(a.out, "local"), "-");
  }
}

TEST(EncoderApp, TheFillPanelsOwnTextRunsItsOwnPassAsTheCommandLineAndTheReferenceDo) {
  REQUIRE_REFERENCE();
  // bert_single's text, typed into the panel while the model view runs the pair.
  std::ifstream f(ref().dir / "cases.json");
  const nlohmann::json cases = nlohmann::json::parse(f);
  nlohmann::json single;
  for (const auto& c : cases.is_array() ? cases : cases["cases"])
    if (c["name"] == "bert_single") single = c;
  ASSERT_FALSE(single.is_null());
  const std::string text = single["text"];
  const App a = runApp("fill-own", pairArgs() + " --fill-text " + quote(text) + " --print-fill", 4);
  ASSERT_EQ(a.rc, 0) << a.out;
  const std::vector<FillLine> before = fillLines(a.out, "fill-before");
  const attnviz::testing::ShellRun r = cli("fill --model " + quote(ref().model()) + " --text " + quote(text));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::vector<FillLine> want = fillLines(r.out, "");
  ASSERT_EQ(before.size(), want.size()) << a.out;
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(before[k].position, want[k].position);
    EXPECT_EQ(before[k].id, want[k].id);
    EXPECT_NEAR(before[k].prob, want[k].prob, 2e-6);
  }
  const nlohmann::json& fill = single["fill"][0];
  for (std::size_t k = 0; k < fill["ids"].size(); ++k) {
    EXPECT_EQ(before[k].position, fill["position"].get<int>());
    EXPECT_EQ(before[k].id, fill["ids"][k].get<int>());
    EXPECT_NEAR(before[k].prob, fill["probs"][k].get<double>(), 1e-5);
  }
}

// An encoder has no Generate panel; a generation asked of it anyway (--generate, a scene's
// "generate") is refused in one line instead of waiting for a panel that never draws (the soak
// waited 300 s on it).
TEST(EncoderApp, AGenerationAskedOfAnEncoderIsRefusedInOneLine) {
  const App a = runApp("encoder-generate", pairArgs() + " --generate 3");
  ASSERT_EQ(a.rc, 0) << a.out;
  EXPECT_NE(a.out.find("an encoder predicts masked tokens and does not generate"), std::string::npos)
      << a.out;
  EXPECT_EQ(a.out.find("generated-ids"), std::string::npos) << a.out;
}

TEST(EncoderApp, ASceneWithAnUnknownSliceOrAPairOnADecoderIsRefusedInOneLineNamingTheFile) {
  REQUIRE_REFERENCE();
  const std::string bad = tmp("bad-slice.json");
  std::ofstream(bad) << R"({"model": {"path": ")" << ref().model()
                     << R"(", "text": "a", "text_pair": "b", "slice": "a-c"}})";
  attnviz::testing::ShellRun r = cli("export --scene " + bad + " --png " + tmp("bad.png"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(bad), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.slice"), std::string::npos) << r.out;
  // A pair on a decoder (the shipped byte-level GPT-2 folder of the model fixtures).
  const std::string decoder = std::string(ATTNVIZ_MODEL_FIXTURES) + "/f32_prefix_tied_gelu_new";
  const std::string pairOnDecoder = tmp("pair-decoder.json");
  std::ofstream(pairOnDecoder) << R"({"model": {"path": ")" << decoder
                               << R"(", "text": "ab", "text_pair": "cd"}})";
  r = cli("export --scene " + pairOnDecoder + " --png " + tmp("bad2.png"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(pairOnDecoder), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

}  // namespace
