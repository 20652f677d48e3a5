// App tests for encoder-decoders: random-init T5 and BART folders written at test time
// by tests/model/seq2seq_reference.py; the app runs under Xvfb on one of them, and the decoded
// screenshot's heatmap cells are compared with the weights `attnviz model --cross-weights` /
// `--weights` writes for the same texts (tests/model/seq2seq_test.cpp checks those files against
// the script's float64 reference), and the next-token lines with `attnviz model --top-k 5`.
// The Alignment panel on the shipped kjv-t5-align: its printed links, AER and AER map against
// alignment_reference.py (numpy on the command line's cross weights, the model card's reading).
#include "attnviz/formats/npy.h"
#include "attnviz/render/colormap.h"
#include "run_shell.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using attnviz::RGBA8;

const char* kSource = "the cat sat on the mat.";
const char* kTarget = "a dog ran";

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "attnviz_s2sapp_" + name;
}

// The fixture folders, written once per test binary.
const std::string& fixtures() {
  static const attnviz::testing::ProcessTempDir owned("attnviz_s2sapp_fixtures");
  static const std::string dir = [] {
    const std::string d = owned.path;
    if (d.empty()) return std::string();
    const std::string cmd = ATTNVIZ_PYTHON " " + std::string(ATTNVIZ_SOURCE_DIR) +
                            "/tests/model/seq2seq_reference.py " + d + " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0 ? d : std::string();
  }();
  return dir;
}

struct Shot {
  int rc = -1;
  std::string out;
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
  float x0 = 0, y0 = 0, cell = 0;
  int rows = 0, cols = 0;
  bool valid = false;
  RGBA8 cellColour(int i, int j) const {
    const int x = int(std::floor(x0 + (j + 0.5f) * cell));
    const int y = int(std::floor(y0 + (i + 0.5f) * cell));
    const unsigned char* p = &rgba[(std::size_t(y) * width + x) * 4];
    return RGBA8{p[0], p[1], p[2], p[3]};
  }
};

Shot runApp(const std::string& name, const std::string& args) {
  Shot s;
  const std::string png = tempPath(name + ".png");
  std::remove(png.c_str());
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x800x24\" " +
                          ATTNVIZ_BIN + " --size 1280x800 --frames 6 --screenshot " + png + " " +
                          args;
  for (int attempt = 0; attempt < 3; ++attempt) {  // xvfb-run -a races are the harness's
    const attnviz::testing::ShellRun r = attnviz::testing::runShell(cmd);
    s.rc = r.rc;
    s.out = r.out;
    if (r.rc < 0) return s;
    if (s.out.find("xvfb-run: error") == std::string::npos &&
        s.out.find("LeakSanitizer has encountered a fatal error") == std::string::npos)
      break;
  }
  int n = 0;
  if (unsigned char* data = stbi_load(png.c_str(), &s.width, &s.height, &n, 4)) {
    s.rgba.assign(data, data + std::size_t(s.width) * s.height * 4);
    stbi_image_free(data);
  }
  float w = 0, h = 0;
  const auto at = s.out.find("geometry:");
  if (at != std::string::npos)
    s.valid = std::sscanf(s.out.c_str() + at, "geometry: x0=%f y0=%f w=%f h=%f cell=%f rows=%d cols=%d",
                          &s.x0, &s.y0, &w, &h, &s.cell, &s.rows, &s.cols) == 7;
  return s;
}

std::string runCli(const std::string& args, int* rc = nullptr) {
  const attnviz::testing::ShellRun r =
      attnviz::testing::runShell(std::string(ATTNVIZ_BIN) + " " + args);
  if (rc) *rc = r.rc;
  return r.out;
}

// Whether `c` is viridis of a value within one table step of x (in [0, 255]).
bool viridisNear(RGBA8 c, double x) {
  const auto& t = attnviz::colormapTable(attnviz::ColormapId::Viridis);
  for (int k = std::max(0, int(std::floor(x)) - 1); k <= std::min(255, int(std::ceil(x)) + 1); ++k)
    if (t[k].r == c.r && t[k].g == c.g && t[k].b == c.b) return true;
  return false;
}

std::string texts() {
  return std::string(" --text '") + kSource + "' --target '" + kTarget + "'";
}

// The app's heatmap for `site` (layer `layer` of the CLI's [L, H, T_q, T_k] file), head `head`,
// against that file: the shape, then every cell's colour.
// appTexts/cliTexts: the texts as each is given them (the same pass).
void expectSiteMatchesCli(const std::string& model, const std::string& site, const char* cliFlag,
                          int layer, int head, const std::string& appTexts = texts(),
                          const std::string& cliTexts = texts()) {
  ASSERT_FALSE(fixtures().empty()) << "seq2seq_reference.py failed";
  const std::string dir = fixtures() + "/" + model;
  const std::string npy = tempPath(model + "_" + std::to_string(layer) + cliFlag + ".npy");
  int rc = -1;
  const std::string cliOut = runCli("model --model " + dir + cliTexts + " " + cliFlag + " " + npy, &rc);
  ASSERT_EQ(rc, 0) << cliOut;
  const attnviz::NpyArray a = attnviz::readNpy(npy);
  ASSERT_EQ(a.shape.size(), 4u);
  const int H = int(a.shape[1]), Tq = int(a.shape[2]), Tk = int(a.shape[3]);
  const Shot s = runApp(model + "_" + site, "--model " + dir + appTexts + " --site " + site +
                                                " --head " + std::to_string(head));
  ASSERT_EQ(s.rc, 0) << s.out;
  ASSERT_TRUE(s.valid && s.width > 0) << s.out;
  EXPECT_NE(s.out.find("seq2seq-view: site=" + site + " head=" + std::to_string(head)),
            std::string::npos) << s.out;
  ASSERT_EQ(s.rows, Tq);
  ASSERT_EQ(s.cols, Tk);
  const bool causal = site.find(":self") != std::string::npos;
  const float* w = a.data.data() + (std::size_t(layer) * H + head) * std::size_t(Tq) * Tk;
  int bad = 0;
  for (int i = 0; i < Tq; ++i)
    for (int j = 0; j < Tk; ++j)
      if (causal && j > i) {
        // The decoder's self site is causal: a future key has weight 0 in the file and is drawn
        // as masked (a recorded weight of exactly 0 counts as masked, dump.h).
        const RGBA8 c = s.cellColour(i, j);
        EXPECT_EQ(w[i * Tk + j], 0.0f) << i << "," << j;
        EXPECT_TRUE(c == attnviz::kMaskedColor || c == attnviz::kMaskedHatchColor)
            << model << " " << site << " cell " << i << "," << j << " is not masked";
      } else if (!viridisNear(s.cellColour(i, j), w[i * Tk + j] * 255.0)) {
        ++bad;
        ADD_FAILURE() << model << " " << site << " cell " << i << "," << j << " weight "
                      << w[i * Tk + j];
        if (bad > 5) return;
      }
}

TEST(AppSeq2Seq, T5CrossAttentionIsTheCommandLinesCrossWeights) {
  expectSiteMatchesCli("t5_v10", "dec:1:cross", "--cross-weights", 1, 1);
}

TEST(AppSeq2Seq, BartCrossAttentionIsTheCommandLinesCrossWeights) {
  expectSiteMatchesCli("bart_a", "dec:0:cross", "--cross-weights", 0, 2);
}

TEST(AppSeq2Seq, T5EncoderSelfAttentionIsTheCommandLinesEncoderWeights) {
  expectSiteMatchesCli("t5_v10", "enc:1", "--weights", 1, 0);
}

TEST(AppSeq2Seq, BartDecoderSelfAttentionIsTheCommandLinesDecoderWeights) {
  expectSiteMatchesCli("bart_a", "dec:1:self", "--decoder-weights", 1, 1);
}

// No texts: the source is the app's default sentence and the decoder reads its start id alone
// (T5's decoder_start_token_id is 0), one row over the source.
TEST(AppSeq2Seq, WithoutTextsTheCrossSiteIsTheStartTokensRowOverTheDefaultSentence) {
  expectSiteMatchesCli("t5_v11", "dec:0:cross", "--cross-weights", 0, 2, "",
                       " --text 'The cat sat on the mat.' --target-ids 0");
}

// Texts typed into the Source and Target boxes after the first pass run the pass again: the
// cross site is the command line's on the new texts.
TEST(AppSeq2Seq, EditedSourceAndTargetBoxesRunThePassAgain) {
  expectSiteMatchesCli("bart_a", "dec:1:cross", "--cross-weights", 1, 3,
                       texts() + " --edit-text 'a dog sat.' --edit-target 'the cat ran on'",
                       " --text 'a dog sat.' --target 'the cat ran on'");
}

// "id prob" lines: the app's "next-token WHICH: id prob", the CLI's "id\tprob\tpiece".
std::vector<std::pair<int, double>> appTokens(const std::string& out, const std::string& which) {
  std::vector<std::pair<int, double>> r;
  const std::string key = "next-token " + which + ": ";
  for (auto at = out.find(key); at != std::string::npos; at = out.find(key, at + 1)) {
    int id = -1;
    double p = 0;
    if (std::sscanf(out.c_str() + at + key.size(), "%d %lf", &id, &p) == 2) r.emplace_back(id, p);
  }
  return r;
}

std::vector<std::pair<int, double>> cliTokens(const std::string& out) {
  std::vector<std::pair<int, double>> r;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    int id = -1;
    double p = 0;
    if (std::sscanf(line.c_str(), "%d\t%lf", &id, &p) == 2) r.emplace_back(id, p);
  }
  return r;
}

void expectSameTokens(const std::vector<std::pair<int, double>>& got,
                      const std::vector<std::pair<int, double>>& want, const std::string& what) {
  ASSERT_EQ(got.size(), 5u) << what;
  ASSERT_EQ(want.size(), 5u) << what;
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(got[k].first, want[k].first) << what << " rank " << k;
    EXPECT_NEAR(got[k].second, want[k].second, 1e-5) << what << " rank " << k;
  }
}

TEST(AppSeq2Seq, AblatingACrossHeadChangesTheNextTokenAsTheCommandLineDoes) {
  ASSERT_FALSE(fixtures().empty()) << "seq2seq_reference.py failed";
  for (const std::string model : {"t5_v10", "bart_a"}) {
    const std::string dir = fixtures() + "/" + model;
    const std::string abl = " --ablate cross:1:0 --ablate cross:1:3";
    const auto plain = cliTokens(runCli("model --model " + dir + texts() + " --top-k 5"));
    const auto ablated = cliTokens(runCli("model --model " + dir + texts() + abl + " --top-k 5"));
    ASSERT_NE(plain, ablated) << model << ": the ablation changes nothing on the command line";
    const Shot s = runApp(model + "_ablate", "--model " + dir + texts() + abl +
                                                 " --site dec:1:cross");
    ASSERT_EQ(s.rc, 0) << s.out;
    EXPECT_NE(s.out.find("ablated=2"), std::string::npos) << s.out;
    expectSameTokens(appTokens(s.out, "before"), plain, model + " before");
    expectSameTokens(appTokens(s.out, "after"), ablated, model + " after");
  }
}

TEST(AppSeq2Seq, BadSitesAreUsageErrorsNamingTheOption) {
  ASSERT_FALSE(fixtures().empty()) << "seq2seq_reference.py failed";
  const std::string dir = fixtures() + "/t5_v10";
  for (const std::string bad : {"dec:7:cross", "enc:1:cross", "cross", "dec:1:both"}) {
    const Shot s = runApp("t5_badsite", "--model " + dir + " --site " + bad);
    EXPECT_EQ(s.rc, 2) << bad << "\n" << s.out;
    EXPECT_NE(s.out.find("--site " + bad), std::string::npos) << s.out;
  }
}

// The Alignment panel on the shipped kjv-t5-align: a held-out clause of its card
// (card.json), the gold its task fixes (target word i <-> source word n-1-i). On this clause the
// shown head (1:0) misses one word of seven while 1:1 misses none: the best head is not the
// shown one.
const char* kAlignSource = "they shall not enter into my rest";
const char* kAlignTarget = "ktlz dn ofzg tfztk fgz liqss zitn";

std::string shippedT5() { return std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-t5-align"; }

// The value of `key=` in the first line starting with `prefix`, up to the next space.
std::string field(const std::string& out, const std::string& prefix, const std::string& key) {
  const auto line = out.find(prefix);
  if (line == std::string::npos) return "";
  const std::string l = out.substr(line, out.find('\n', line) - line);
  const auto at = l.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 2;
  return l.substr(from, l.find(' ', from) - from);
}

// "alignment-map: 0:0=0.1234 0:1=..." -> [layers][heads].
std::vector<std::vector<double>> appMap(const std::string& out) {
  std::vector<std::vector<double>> m;
  const auto at = out.find("alignment-map:");
  if (at == std::string::npos) return m;
  std::istringstream in(out.substr(at + 14, out.find('\n', at) - at - 14));
  for (std::string cell; in >> cell;) {
    int l = -1, h = -1;
    double v = 0;
    if (std::sscanf(cell.c_str(), "%d:%d=%lf", &l, &h, &v) != 3) return {};
    if (l >= int(m.size())) m.resize(l + 1);
    m[l].push_back(v);
  }
  return m;
}

nlohmann::json alignmentReference(const std::string& source, const std::string& target) {
  const attnviz::testing::ShellRun r = attnviz::testing::runShell(
      ATTNVIZ_PYTHON " " + std::string(ATTNVIZ_SOURCE_DIR) + "/tests/app/alignment_reference.py " +
      ATTNVIZ_BIN + " " + shippedT5() + " '" + source + "' '" + target + "'");
  EXPECT_EQ(r.rc, 0) << r.out;
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "alignment_reference.py: " << e.what() << "\n" << r.out;
    return {};
  }
}

std::string alignApp(const std::string& name, const std::string& gold, const std::string& extra) {
  const Shot s = runApp(name, "--model " + shippedT5() + " --text '" + kAlignSource +
                                  "' --target '" + kAlignTarget + "' --site dec:1:cross --head 0" +
                                  " --gold '" + gold + "'" + extra);
  EXPECT_EQ(s.rc, 0) << s.out;
  return s.out;
}

// The app's AER of the shown head, its links, every cell of its AER map and its best head equal
// the independent reading of the command line's cross weights, with the shift and without; and
// the shift matters as the card says: the best head reads the clause almost perfectly on the row
// that produces each word, and badly one row late.
TEST(AppSeq2SeqAlignment, AerAndBestHeadAreThoseOfTheCommandLinesCrossWeights) {
  const nlohmann::json ref = alignmentReference(kAlignSource, kAlignTarget);
  ASSERT_TRUE(ref.contains("aer_shifted")) << ref.dump();
  const std::string gold = ref["gold"];
  double aer[2] = {0, 0};
  for (const bool shift : {true, false}) {
    const std::string key = shift ? "shifted" : "unshifted";
    const std::string out = alignApp("align_" + key, gold, shift ? "" : " --no-shift");
    EXPECT_EQ(out.find("alignment-error:"), std::string::npos) << out;
    EXPECT_EQ(field(out, "alignment:", "site"), "dec:1:cross") << out;
    EXPECT_EQ(field(out, "alignment:", "head"), "0") << out;
    EXPECT_EQ(field(out, "alignment:", "shift"), shift ? "1" : "0") << out;
    EXPECT_EQ(field(out, "alignment:", "units"), "words") << out;
    EXPECT_EQ(field(out, "alignment:", "source"), std::to_string(ref["source_words"].get<int>()));
    EXPECT_EQ(field(out, "alignment:", "target"), std::to_string(ref["target_words"].get<int>()));
    EXPECT_EQ(field(out, "alignment:", "links"), ref["links_" + key][1][0].get<std::string>())
        << out;
    aer[shift ? 0 : 1] = std::atof(field(out, "alignment:", "aer").c_str());
    EXPECT_NEAR(aer[shift ? 0 : 1], ref["aer_" + key][1][0].get<double>(), 6e-5) << out;
    const auto best = ref["best_" + key];
    EXPECT_EQ(field(out, "alignment:", "best"),
              std::to_string(best[0].get<int>()) + ":" + std::to_string(best[1].get<int>()))
        << out;
    const auto m = appMap(out);
    ASSERT_EQ(m.size(), ref["aer_" + key].size()) << out;
    for (std::size_t l = 0; l < m.size(); ++l) {
      ASSERT_EQ(m[l].size(), ref["aer_" + key][l].size()) << out;
      for (std::size_t h = 0; h < m[l].size(); ++h)
        EXPECT_NEAR(m[l][h], ref["aer_" + key][l][h].get<double>(), 6e-5) << l << ":" << h;
    }
  }
  EXPECT_LE(aer[0], 0.15) << "layer 1 head 0 read on the producing row";
  EXPECT_GE(aer[1], 0.6) << "layer 1 head 0 read one row late";
}

// A gold text that is not Pharaoh pairs, or names a word past a strip: one line saying which
// pair, the run goes on (no crash), the panel still shows the links.
TEST(AppSeq2SeqAlignment, BadGoldTextIsAOneLineError) {
  for (const auto& [gold, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"0-6 x-2", "gold alignment: bad pair 'x-2'"},
           {"0-6 1-9", "gold alignment: pair '1-9': target index 9 is past the 7 target"}}) {
    const std::string out = alignApp("align_bad", gold, "");
    const auto at = out.find("alignment-error: ");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string line = out.substr(at, out.find('\n', at) - at);
    EXPECT_NE(line.find(says), std::string::npos) << line;
    EXPECT_NE(field(out, "alignment:", "links"), "-") << out;
    EXPECT_EQ(field(out, "alignment:", "aer"), "-") << out;
  }
  const Shot s = runApp("align_nomodel", "--gold '0-0'");
  EXPECT_EQ(s.rc, 2) << s.out;
  EXPECT_NE(s.out.find("--gold and --no-shift go with --model"), std::string::npos) << s.out;
}

// ---- encoder-decoder scenes and the presets 34-37 ----------------------------------------------

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A view saved with an encoder-decoder open names its folder, both texts, the site, the head,
// the ablations of any site and the Alignment panel's reading; reopened and saved again it is the
// same file, and the app's export of it is the command line's `export --scene`, byte for byte,
// the axis titles naming the target and the source.
TEST(AppSeq2SeqScenes, ASavedViewReopensToTheSameJsonAndExportsAsTheCommandLine) {
  const std::string a = tempPath("scene_a.json"), b = tempPath("scene_b.json");
  const std::string gui = tempPath("scene_gui.png"), cli = tempPath("scene_cli.png");
  for (const std::string& f : {a, b, gui, cli}) std::remove(f.c_str());
  const std::string gold = "6-0 5-1 4-2 3-3 2-4 1-5 0-6";
  const Shot first = runApp("scene_first", "--model " + shippedT5() + " --text '" + kAlignSource +
                                               "' --target '" + kAlignTarget +
                                               "' --site dec:1:cross --head 2 --ablate cross:0:1"
                                               " --ablate enc:1:3 --ablate 0:2 --mask-source 3,1"
                                               " --gold '" + gold +
                                               "' --no-shift --save-scene " + a);
  ASSERT_EQ(first.rc, 0) << first.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(a));
  EXPECT_EQ(j["model"]["path"], "kjv-t5-align");
  EXPECT_EQ(j["model"]["text"], kAlignSource);
  EXPECT_EQ(j["model"]["target"], kAlignTarget);
  EXPECT_EQ(j["model"]["site"], "dec:1:cross");
  EXPECT_EQ(j["model"]["head"], 2);
  std::vector<std::string> abl = j["model"]["ablate"].get<std::vector<std::string>>();
  std::sort(abl.begin(), abl.end());
  EXPECT_EQ(abl, (std::vector<std::string>{"0:2", "cross:0:1", "enc:1:3"}));
  EXPECT_EQ(j["model"]["mask_source"], nlohmann::json::array({1, 3}));
  EXPECT_EQ(j["view"]["panels"]["alignment"]["gold"], gold);
  EXPECT_EQ(j["view"]["panels"]["alignment"]["shift"], false);

  const Shot again = runApp("scene_again", "--scene " + a + " --save-scene " + b + " --export " + gui);
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_EQ(slurp(a), slurp(b)) << "the reopened view saves a different scene";
  EXPECT_NE(again.out.find("seq2seq-view: site=dec:1:cross head=2"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("ablated=3 masked-source=1,3"), std::string::npos) << again.out;
  EXPECT_EQ(field(again.out, "alignment:", "shift"), "0") << again.out;
  int rc = -1;
  const std::string out = runCli("export --scene " + a + " --png " + cli, &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string g = slurp(gui), c = slurp(cli);
  ASSERT_FALSE(g.empty());
  EXPECT_TRUE(g == c) << "the app's export and export --scene differ";
  const std::string svg = tempPath("scene_cli.svg");
  ASSERT_EQ((runCli("export --scene " + a + " --svg " + svg, &rc), rc), 0);
  const std::string text = slurp(svg);
  EXPECT_NE(text.find("Queries: the target"), std::string::npos);
  EXPECT_NE(text.find("Keys: the source"), std::string::npos);
  EXPECT_NE(text.find("layer dec 1 cross"), std::string::npos);
}

// A scene naming a site the model lacks, or encoder-decoder fields on a decoder, is refused by
// export --scene with exit 1 and one line naming the scene; a malformed site by the loader.
TEST(AppSeq2SeqScenes, BadSitesAndTargetsOnADecoderAreInputErrorsNamingTheScene) {
  const std::string models = std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": {"path": ")" + models + R"(kjv-t5-align", "text": "i will", "site": "dec:5:cross"}})",
       "model.site dec:5:cross: out of range"},
      {R"({"model": {"path": ")" + models + R"(kjv-t5-align", "text": "i will", "site": "dec:1:both"}})",
       "model.site dec:1:both: expected enc:L, dec:L:self or dec:L:cross"},
      {R"({"model": {"path": ")" + models + R"(kjv-t5-align", "text": "i will", "ablate": ["cross:4:0"]}})",
       "model.ablate cross:4:0: out of range"},
      {R"({"model": {"path": ")" + models + R"(kjv-byte-2l", "text": "In the", "target": "x"}})",
       "model.target is for encoder-decoders"},
      // On a decoder, a masked source, a site and an encoder-decoder's ablation read as the app's
      // refusals of them.
      {R"({"model": {"path": ")" + models + R"(kjv-byte-2l", "text": "In the", "mask_source": [0]}})",
       "model.mask_source: gpt2 is not an encoder-decoder (no cross sites)"},
      {R"({"model": {"path": ")" + models + R"(kjv-byte-2l", "text": "In the", "site": "dec:0:cross"}})",
       "model.site dec:0:cross: gpt2 is not an encoder-decoder (no sites to choose)"},
      {R"({"model": {"path": ")" + models + R"(kjv-byte-2l", "text": "In the", "ablate": ["enc:0:1"]}})",
       "model.ablate enc:0:1: gpt2 has one attention site per layer (use L:H)"},
      {R"({"model": {"path": ")" + models + R"(kjv-t5-align", "text": "i will", "mask_source": [40]}})",
       "mask-source 40: past the source's"},
      {R"({"model": {"path": ")" + models + R"(kjv-t5-align", "text": "i will", "mask_source": 2}})",
       "field 'model.mask_source' must be a list"}};
  int k = 0;
  for (const auto& [json, says] : cases) {
    const std::string path = tempPath("bad_scene_" + std::to_string(k++) + ".json");
    std::ofstream(path) << json;
    const std::string png = tempPath("bad_scene.png");
    int rc = -1;
    const std::string out = runCli("export --scene " + path + " --png " + png, &rc);
    EXPECT_EQ(rc, 1) << json << "\n" << out;
    EXPECT_NE(out.find(path), std::string::npos) << out;
    EXPECT_NE(out.find(says), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

std::string preset(const std::string& name) {
  return std::string(ATTNVIZ_SOURCE_DIR) + "/assets/scenes/" + name;
}

// The presets' clause (card.json's held-out clause 7), its target, and the three target words of
// preset 37.
const char* kPresetSource = "i will put my trust in him";
const char* kPresetTarget = "iod of zkxlz dn hxz voss o";

// A scene saved from a watched translation keeps the translation: its starting target and its
// length ("generate"), so that `export --scene` of the saved scene draws the translated rows the
// app showed (it drew the start token's row alone when the scene kept no target).
TEST(AppSeq2SeqScenes, ASceneSavedFromAWatchedTranslationExportsItsRows) {
  const std::string a = tempPath("translate_saved.json");
  const std::string gui = tempPath("translate_gui.png"), cli = tempPath("translate_cli.png");
  for (const std::string& f : {a, gui, cli}) std::remove(f.c_str());
  const Shot s = runApp("translate_saved", "--scene " + preset("38-watch-it-translate.json") +
                                               " --save-scene " + a + " --export " + gui);
  ASSERT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("seq2seq-view: site=dec:1:cross head=0 rows=8 cols=10"), std::string::npos)
      << s.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(a));
  ASSERT_TRUE(j["model"].contains("generate")) << j.dump();
  int rc = -1;
  const std::string out = runCli("export --scene " + a + " --png " + cli, &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string g = slurp(gui), c = slurp(cli);
  ASSERT_FALSE(g.empty());
  EXPECT_TRUE(g == c) << "the app's export and export --scene of the saved scene differ";
}

// 34: the cross site of decoder layer 1, head 0, target rows over source columns; every row puts
// more than 0.9999 of its weight on one source piece, along the anti-diagonal (the command line's
// cross weights, as the note says).
TEST(AppSeq2SeqPresets, CrossAttentionShowsTargetRowsOverSourceColumns) {
  const Shot s = runApp("preset34", "--scene " + preset("34-cross-attention-target-rows-source-columns.json"));
  ASSERT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("seq2seq-view: site=dec:1:cross head=0 rows=8 cols=10"), std::string::npos)
      << s.out;
  const std::string npy = tempPath("preset34.npy");
  int rc = -1;
  runCli("model --model " + shippedT5() + " --text '" + kPresetSource + "' --target '" +
             kPresetTarget + "' --cross-weights " + npy, &rc);
  ASSERT_EQ(rc, 0);
  const attnviz::NpyArray a = attnviz::readNpy(npy);
  ASSERT_EQ(a.shape, (std::vector<long long>{2, 4, 8, 10}));
  const float* w = a.data.data() + std::size_t(1 * 4 + 0) * 80;
  int prevColumn = 10;
  for (int i = 0; i < 7; ++i) {  // the rows that produce the seven words
    const int j = int(std::max_element(w + i * 10, w + i * 10 + 10) - (w + i * 10));
    EXPECT_GT(w[i * 10 + j], 0.9999f) << "row " << i;
    EXPECT_LT(j, prevColumn) << "row " << i << ": the bright cells run right to left";
    prevColumn = j;
  }
  ASSERT_TRUE(s.valid) << s.out;
  EXPECT_EQ(s.rows, 8);
  EXPECT_EQ(s.cols, 10);
}

// 35 and 36: the Alignment panel opens on the scene's gold, unshifted (35: head 1:0 scores 1.00)
// and shifted (36: 0.00, every layer-1 head 0.00, layer 0 as the note says), as the independent
// reading of the command line's weights gives.
TEST(AppSeq2SeqPresets, ShiftedByOneAndWhichHeadAlignsScoreAsTheirNotesSay) {
  const nlohmann::json ref = alignmentReference(kPresetSource, kPresetTarget);
  ASSERT_TRUE(ref.contains("aer_shifted")) << ref.dump();
  const Shot un = runApp("preset35", "--scene " + preset("35-shifted-by-one.json"));
  ASSERT_EQ(un.rc, 0) << un.out;
  EXPECT_EQ(field(un.out, "alignment:", "shift"), "0") << un.out;
  EXPECT_NEAR(std::atof(field(un.out, "alignment:", "aer").c_str()),
              ref["aer_unshifted"][1][0].get<double>(), 6e-5);
  EXPECT_NEAR(std::atof(field(un.out, "alignment:", "aer").c_str()), 1.0, 6e-5);
  const Shot sh = runApp("preset36", "--scene " + preset("36-which-head-aligns.json"));
  ASSERT_EQ(sh.rc, 0) << sh.out;
  EXPECT_EQ(field(sh.out, "alignment:", "shift"), "1") << sh.out;
  const auto m = appMap(sh.out);
  ASSERT_EQ(m.size(), 2u) << sh.out;
  const double layer0[4] = {3.0 / 7, 5.0 / 7, 5.0 / 7, 4.0 / 7};  // the note's 0.43 0.71 0.71 0.57
  for (int h = 0; h < 4; ++h) {
    EXPECT_NEAR(m[1][h], ref["aer_shifted"][1][h].get<double>(), 6e-5);
    EXPECT_NEAR(m[1][h], 0.0, 6e-5) << "1:" << h;
    EXPECT_NEAR(m[0][h], ref["aer_shifted"][0][h].get<double>(), 6e-5);
    EXPECT_NEAR(m[0][h], layer0[h], 6e-5) << "0:" << h;
  }
}

// 37: the four layer-1 cross heads ablated: the next token after 'iod of zkxlz' is the command
// line's with and without the ablations; ' dn' (64) 0.990 intact, ' voss' (67) 0.187 ablated.
TEST(AppSeq2SeqPresets, AblatingTheAligningHeadsLosesTheNextWordAsTheCommandLineDoes) {
  const Shot s = runApp("preset37", "--scene " + preset("37-ablate-the-aligning-heads.json"));
  ASSERT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("ablated=4"), std::string::npos) << s.out;
  const std::string texts = " --text '" + std::string(kPresetSource) + "' --target 'iod of zkxlz'";
  const auto plain = cliTokens(runCli("model --model " + shippedT5() + texts + " --top-k 5"));
  const auto ablated = cliTokens(runCli("model --model " + shippedT5() + texts +
                                        " --ablate cross:1:0 --ablate cross:1:1 --ablate cross:1:2"
                                        " --ablate cross:1:3 --top-k 5"));
  expectSameTokens(appTokens(s.out, "before"), plain, "before");
  expectSameTokens(appTokens(s.out, "after"), ablated, "after");
  ASSERT_FALSE(plain.empty());
  ASSERT_FALSE(ablated.empty());
  EXPECT_EQ(plain[0].first, 64);
  EXPECT_NEAR(plain[0].second, 0.990, 0.001);
  EXPECT_EQ(ablated[0].first, 67);
  EXPECT_NEAR(ablated[0].second, 0.187, 0.001);
}

std::vector<int> idsOf(const std::string& text, const char* sep) {
  std::vector<int> r;
  std::string t = text;
  for (char& c : t)
    if (std::strchr(sep, c)) c = ' ';
  std::istringstream in(t);
  for (int id; in >> id;) r.push_back(id);
  return r;
}

// 38 and --generate on an encoder-decoder: the target written a greedy token a frame is the
// command line's `generate --print-ids` (the end token last), intact and with the four aligning
// heads ablated; the cross site has grown a row per token.
TEST(AppSeq2SeqPresets, WatchItTranslateWritesTheCommandLinesGreedyTokens) {
  const std::string four = " --ablate cross:1:0 --ablate cross:1:1 --ablate cross:1:2 --ablate cross:1:3";
  for (const bool ablated : {false, true}) {
    const Shot s = ablated ? runApp("translate_ablated", "--model " + shippedT5() + " --text '" +
                                                             kPresetSource + "' --site dec:1:cross" +
                                                             four + " --generate 24")
                           : runApp("preset38", "--scene " + preset("38-watch-it-translate.json"));
    ASSERT_EQ(s.rc, 0) << s.out;
    const std::string got = field(s.out, "translated:", "ids");
    int rc = -1;
    const std::string cli = runCli("generate --model " + shippedT5() + " --text '" + kPresetSource +
                                       "' -n 24 --print-ids" + (ablated ? four : ""), &rc);
    ASSERT_EQ(rc, 0) << cli;
    const std::vector<int> want = idsOf(cli.substr(cli.rfind('\n', cli.size() - 2) + 1), "");
    ASSERT_FALSE(want.empty()) << cli;
    EXPECT_EQ(idsOf(got, ","), want) << s.out;
    if (!ablated) {
      EXPECT_EQ(field(s.out, "translated:", "stop"), "eos") << s.out;
      EXPECT_EQ(want, (std::vector<int>{36, 8, 885, 64, 280, 67, 16, 1}));
      EXPECT_NE(s.out.find("translated: ids=36,8,885,64,280,67,16,1 stop=eos target=iod of zkxlz dn hxz voss o"),
                std::string::npos) << s.out;
      EXPECT_NE(s.out.find("seq2seq-view: site=dec:1:cross head=0 rows=8 cols=10"), std::string::npos)
          << s.out;
    } else {
      EXPECT_NE(want, (std::vector<int>{36, 8, 885, 64, 280, 67, 16, 1})) << "the ablation changed nothing";
    }
  }
}

// ---- T5's position bias (the Position bias panel) --------------------------------------------
// The panel's matrix is the reference's table at each cell's bucket (seq2seq_reference.py,
// [H, T, T] per stack): the shown head's sum and last row as the scripted run prints them, for an
// encoder site, a decoder self site, and a cross site (which has none: the encoder's is shown).
// BART has no relative bias: no panel, no line.
double npySum(const attnviz::NpyArray& a, int head) {
  const std::size_t n = std::size_t(a.shape[1] * a.shape[2]);
  double sum = 0;
  for (std::size_t k = 0; k < n; ++k) sum += a.data[std::size_t(head) * n + k];
  return sum;
}

TEST(AppSeq2SeqPositionBias, ThePanelsMatrixIsTheReferencesTableAtEachCellsBucket) {
  ASSERT_FALSE(fixtures().empty()) << "seq2seq_reference.py failed";
  const std::string dir = fixtures() + "/t5_v10";
  const std::string t5Texts =
      " --text 'the cat and the dog played in the park and the sun was bright' --target 'le chat "
      "et le chien'";
  struct Case {
    const char* site;
    int head;
    const char* stack;
    const char* file;
  };
  for (const Case& c : {Case{"enc:1", 2, "encoder", "t5_v10_enc_bias.npy"},
                        Case{"dec:0:self", 1, "decoder", "t5_v10_dec_bias.npy"},
                        Case{"dec:1:cross", 3, "encoder", "t5_v10_enc_bias.npy"}}) {
    const attnviz::NpyArray want = attnviz::readNpy(fixtures() + "/" + c.file);
    ASSERT_EQ(want.shape.size(), 3u);
    const int T = int(want.shape[1]);
    const Shot s = runApp(std::string("bias_") + c.stack + std::to_string(c.head),
                          "--model " + dir + t5Texts + " --site " + c.site + " --head " +
                              std::to_string(c.head));
    ASSERT_EQ(s.rc, 0) << s.out;
    const auto at = s.out.find("position-bias:");
    ASSERT_NE(at, std::string::npos) << s.out;
    char stack[16] = "";
    int head = -1, tokens = -1;
    double sum = 0;
    ASSERT_EQ(std::sscanf(s.out.c_str() + at, "position-bias: stack=%15s head=%d tokens=%d sum=%lf",
                          stack, &head, &tokens, &sum),
              4)
        << s.out;
    EXPECT_STREQ(stack, c.stack) << c.site;
    EXPECT_EQ(head, c.head);
    EXPECT_EQ(tokens, T) << c.site;
    EXPECT_NEAR(sum, npySum(want, c.head), 1e-3) << c.site;
    std::string row = s.out.substr(s.out.find("last-row=", at) + 9);
    row = row.substr(0, row.find('\n'));
    std::stringstream in(row);
    std::string v;
    for (int j = 0; j < T; ++j) {
      ASSERT_TRUE(std::getline(in, v, ',')) << c.site << " column " << j << ": " << row;
      const float ref = want.data[(std::size_t(c.head) * T + std::size_t(T - 1)) * T + std::size_t(j)];
      EXPECT_NEAR(std::stod(v), ref, 2e-6) << c.site << " column " << j;
    }
  }
  const Shot bart = runApp("bias_bart", "--model " + fixtures() + "/bart_a" + texts());
  ASSERT_EQ(bart.rc, 0) << bart.out;
  EXPECT_EQ(bart.out.find("position-bias:"), std::string::npos) << bart.out;
}

// Preset 39 opens the panel on the shipped T5's encoder head 2, whose bias for the next key its
// notes give (+2.756; -0.667 for its own token, -1.754 for the one before), as the command line's
// --position-bias file has them, and whose weights put every row's largest on the next key.
TEST(AppSeq2SeqPresets, PositionBiasShowsTheShippedT5sNextKeyHead) {
  const Shot s = runApp("preset39", "--scene " + preset("39-t5-position-bias.json"));
  ASSERT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("seq2seq-view: site=enc:0 head=2 rows=10 cols=10"), std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("position-bias: stack=encoder head=2 tokens=10"), std::string::npos) << s.out;
  const std::string b = tempPath("preset39_bias.npy"), w = tempPath("preset39_weights.npy");
  int rc = -1;
  const std::string cli = runCli("model --model " + shippedT5() + " --text '" + kPresetSource +
                                     "' --target 'iod of zkxlz dn hxz voss o' --position-bias " + b +
                                     " --weights " + w,
                                 &rc);
  ASSERT_EQ(rc, 0) << cli;
  const attnviz::NpyArray bias = attnviz::readNpy(b), weights = attnviz::readNpy(w);
  ASSERT_EQ(bias.shape, (std::vector<long long>{4, 10, 10}));
  auto at = [&](int h, int i, int j) { return bias.data[(std::size_t(h) * 10 + i) * 10 + j]; };
  EXPECT_NEAR(at(2, 5, 6), 2.756, 5e-4);
  EXPECT_NEAR(at(2, 5, 5), -0.667, 5e-4);
  EXPECT_NEAR(at(2, 5, 4), -1.754, 5e-4);
  EXPECT_NEAR(at(1, 5, 6), -1.281, 5e-4);
  for (int i = 0; i + 1 < 10; ++i) {
    const float* row = &weights.data[((std::size_t(0) * 4 + 2) * 10 + i) * 10];
    EXPECT_EQ(std::max_element(row, row + 10) - row, i + 1) << "row " << i;
  }
}

// The panel reads one bias per distance and draws at most 96 x 96 cells whatever the number of
// tokens: on a source of over 400 tokens its matrix adds no more vertices than 96 x 96 rectangles and
// their labels (with a cell per token pair it drew T x T rectangles a frame, 695,000 vertices
// here).
TEST(AppSeq2SeqPresets, PositionBiasPanelDrawsAtMost96x96CellsAtAnyLength) {
  std::string source;
  while (source.size() < 1300) source += "i will put my trust in him and he shall bring it to pass ";
  const std::string scene = tempPath("bias_long.json");
  std::ofstream(scene) << "{\"title\": \"long\", \"model\": {\"path\": \"" << shippedT5()
                       << "\", \"text\": \"" << source
                       << "\", \"target\": \"iod\", \"site\": \"enc:0\", \"head\": 2},"
                          " \"view\": {\"head\": 2, \"panels\": {\"positionBias\": "
                          "{\"open\": true}}}}";
  const Shot s = runApp("bias_long", "--scene " + scene);
  ASSERT_EQ(s.rc, 0) << s.out;
  const auto at = s.out.find("position-bias:");
  ASSERT_NE(at, std::string::npos) << s.out;
  int tokens = 0;
  ASSERT_EQ(std::sscanf(s.out.c_str() + s.out.find("tokens=", at), "tokens=%d", &tokens), 1);
  EXPECT_GE(tokens, 300) << s.out;
  const auto v = s.out.find("panel-vertices: position-bias=");
  ASSERT_NE(v, std::string::npos) << s.out;
  const int vertices = std::atoi(s.out.c_str() + v + 30);
  EXPECT_GT(vertices, 96 * 96 * 4);  // the matrix is drawn, capped
  EXPECT_LT(vertices, 96 * 96 * 4 + 30000) << "tokens " << tokens;
}

// --mask-source in the app is the command line's: the next-token lines after the mask are
// `attnviz model --mask-source 2,5 --top-k 5`'s (and differ from the unmasked ones), the masked
// columns of a cross site are drawn as masked cells, and a position past the source is a usage
// error naming the option.
TEST(AppSeq2Seq, MaskedSourcePositionsAreTheCommandLinesAndDrawnMasked) {
  ASSERT_FALSE(fixtures().empty()) << "seq2seq_reference.py failed";
  for (const std::string model : {"t5_v11", "bart_a"}) {
    const std::string dir = fixtures() + "/" + model;
    const auto plain = cliTokens(runCli("model --model " + dir + texts() + " --top-k 5"));
    const auto masked =
        cliTokens(runCli("model --model " + dir + texts() + " --mask-source 2,5 --top-k 5"));
    ASSERT_NE(plain, masked) << model << ": the mask changes nothing on the command line";
    const Shot s = runApp(model + "_masksrc",
                          "--model " + dir + texts() + " --mask-source 5,2 --site dec:1:cross");
    ASSERT_EQ(s.rc, 0) << s.out;
    EXPECT_NE(s.out.find("masked-source=2,5"), std::string::npos) << s.out;
    expectSameTokens(appTokens(s.out, "before"), plain, model + " before");
    expectSameTokens(appTokens(s.out, "after"), masked, model + " after");
    ASSERT_TRUE(s.valid) << s.out;
    for (int i = 0; i < s.rows; ++i) {
      for (int j : {2, 5}) {
        const attnviz::RGBA8 c = s.cellColour(i, j);
        EXPECT_FALSE(viridisNear(c, 0.0)) << model << " row " << i << " column " << j
                                          << ": drawn as a weight, not masked";
      }
    }
  }
  const Shot bad = runApp("t5_masksrc_bad", "--model " + fixtures() + "/t5_v11" + texts() +
                                                " --mask-source 99");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("--mask-source 99: past the source's"), std::string::npos) << bad.out;
}

// Long passes of an encoder-decoder run on the worker: a random-weight T5 made here
// (tests/app/make_slow_t5.py, 6 + 6 layers of width 512, 150 MB), an edited source of about 340
// tokens. --report-timing draws frames while its pass runs and the status bar's layer count
// moves through both stacks; then 8 tokens of watched translation, each a decode step over the
// caches on the worker, are the tokens `attnviz generate --print-ids` prints for that source.
TEST(AppSeq2Seq, TheWindowKeepsDrawingWhileALongPassRunsAndTranslatesAsGenerate) {
  // A folder of this process's own (test runs of other build trees may run beside it), removed
  // at the end (150 MB).
  const attnviz::testing::ProcessTempDir owned("attnviz_s2sapp_slow_t5");
  ASSERT_FALSE(owned.path.empty());
  const std::string dir = owned.path + "/model";
  const std::string make = ATTNVIZ_PYTHON " " + std::string(ATTNVIZ_SOURCE_DIR) +
                           "/tests/app/make_slow_t5.py " + shippedT5() + " " + dir;
  ASSERT_EQ(attnviz::testing::runShell(make).rc, 0) << make;
  std::string text;
  for (int i = 0; i < 14; ++i) text += "In the beginning God created the heaven and the earth. ";
  text.pop_back();
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x800x24\" " +
                          ATTNVIZ_BIN + " --size 1280x800 --model " + dir +
                          " --text 'In the beginning' --edit-text '" + text +
                          "' --generate 8 --report-timing";
  attnviz::testing::ShellRun r;
  for (int attempt = 0; attempt < 3; ++attempt) {  // xvfb-run -a races are the harness's
    r = attnviz::testing::runShell(cmd);
    if (r.out.find("xvfb-run: error") == std::string::npos &&
        r.out.find("LeakSanitizer has encountered a fatal error") == std::string::npos)
      break;
  }
  ASSERT_EQ(r.rc, 0) << r.out;
  int source = 0, target = 0, frames = 0, counts = 0, planned = 0;
  double seconds = 0, median = 0, p90 = 0, worst = 0;
  const auto at = r.out.find("timing: seq2seq pass ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at,
                        "timing: seq2seq pass of %d source and %d target tokens on the worker in "
                        "%lf s: %d frames drawn meanwhile, median %lf ms, p90 %lf ms, max %lf ms; "
                        "the status bar showed %d layer counts of %d planned",
                        &source, &target, &seconds, &frames, &median, &p90, &worst, &counts,
                        &planned),
            9)
      << r.out;
  EXPECT_GT(source, 300);
  EXPECT_EQ(target, 1);
  EXPECT_EQ(planned, 12) << "one pass of 6 encoder and 6 decoder layers (no interventions)";
  // The window drew while the worker ran (a pass on the frame thread draws no frame until it
  // ends), and the status bar's count moved through the layers.
  ASSERT_GE(seconds, 0.3) << "the pass is too short to show the window drawing meanwhile";
  EXPECT_GE(frames, 3) << r.out;
  EXPECT_GE(counts, 3) << r.out;
  EXPECT_LE(worst, 0.5 * seconds * 1000.0) << r.out;
  // Watched translation: the command line's greedy tokens.
  const std::string got = field(r.out, "timing: seq2seq translated", "ids");
  int rc = -1;
  const std::string cli =
      runCli("generate --model " + dir + " --text '" + text + "' -n 8 --print-ids", &rc);
  ASSERT_EQ(rc, 0) << cli;
  const std::vector<int> want = idsOf(cli.substr(cli.rfind('\n', cli.size() - 2) + 1), "");
  ASSERT_FALSE(want.empty()) << cli;
  EXPECT_EQ(idsOf(got, ","), want) << r.out;
  const auto tr = r.out.find("timing: seq2seq translate ");
  ASSERT_NE(tr, std::string::npos) << r.out;
  std::printf("%s\n%s\n", r.out.substr(at, r.out.find('\n', at) - at).c_str(),
              r.out.substr(tr, r.out.find('\n', tr) - tr).c_str());
}

}  // namespace
