// The installed layout, as a user gets it: the .deb that CPack builds is unpacked into a
// temporary root, and the unpacked binary runs from / (far from the source tree). It must find
// its presets under its own prefix, draw them (export and GUI), and ship a desktop entry and
// AppStream metadata that the freedesktop validators accept. Expected pixels come from the scene
// file and the colormap table, never from a previous run.
#include "attnviz/render/colormap.h"
#include "attnviz/render/font.h"
#include "run_shell.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stb_image.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using attnviz::RGBA8;

using Shell = attnviz::testing::ShellRun;

// Runs a shell command from / and captures its output (stdout and stderr).
Shell sh(const std::string& cmd) { return attnviz::testing::runShell("cd / && " + cmd); }

std::string q(const std::string& s) { return "'" + s + "'"; }

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
  RGBA8 at(int x, int y) const {
    const unsigned char* p = &rgba[(std::size_t(y) * width + x) * 4];
    return {p[0], p[1], p[2], p[3]};
  }
  int distinctColours() const {
    std::set<std::uint32_t> c;
    for (std::size_t k = 0; k + 3 < rgba.size(); k += 4)
      c.insert(rgba[k] | rgba[k + 1] << 8 | rgba[k + 2] << 16);
    return int(c.size());
  }
};

Image load(const std::string& path) {
  Image im;
  int n = 0;
  unsigned char* d = stbi_load(path.c_str(), &im.width, &im.height, &n, 4);
  if (d) {
    im.rgba.assign(d, d + std::size_t(im.width) * im.height * 4);
    stbi_image_free(d);
  }
  return im;
}

int wordCount(const std::string& s) {
  std::istringstream in(s);
  int n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

struct Geometry {
  float x0 = 0, y0 = 0, w = 0, h = 0, cell = 0, panX = 0, panY = 0;
  int rows = 0, cols = 0;
};

// The heatmap's placement, from the "geometry:" line a scripted GUI run prints.
bool parseGeometry(const std::string& out, Geometry& g) {
  const auto at = out.find("geometry:");
  return at != std::string::npos &&
         std::sscanf(out.c_str() + at,
                     "geometry: x0=%f y0=%f w=%f h=%f cell=%f rows=%d cols=%d panX=%f panY=%f",
                     &g.x0, &g.y0, &g.w, &g.h, &g.cell, &g.rows, &g.cols, &g.panX, &g.panY) == 9;
}

class InstalledDeb : public ::testing::Test {
 protected:
  static inline fs::path tmp, root;
  static inline std::string setupError;

  static void SetUpTestSuite() {
    std::string t = (fs::temp_directory_path() / "attnviz_install_XXXXXX").string();
    if (!mkdtemp(t.data())) {
      setupError = "mkdtemp failed";
      return;
    }
    tmp = t;
    root = tmp / "root";
    const Shell pack = sh(q(ATTNVIZ_CPACK) + " -G DEB --config " + q(ATTNVIZ_CPACK_CONFIG) +
                          " -B " + q((tmp / "pkg").string()));
    fs::path deb;
    for (const auto& e : fs::directory_iterator(tmp / "pkg"))
      if (e.path().extension() == ".deb") deb = e.path();
    if (pack.rc != 0 || deb.empty()) {
      setupError = "cpack failed:\n" + pack.out;
      return;
    }
    const Shell x = sh("dpkg-deb -x " + q(deb.string()) + " " + q(root.string()));
    if (x.rc != 0) setupError = "dpkg-deb -x failed:\n" + x.out;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!tmp.empty()) fs::remove_all(tmp, ec);
  }
  void SetUp() override { ASSERT_TRUE(setupError.empty()) << setupError; }

  static std::string bin() { return (root / "usr/bin/attnviz").string(); }
  static fs::path share() { return root / "usr/share"; }
  static std::string preset() {
    return (share() / "attnviz/scenes/03-causal-triangle.json").string();
  }
  // The installed GUI under Xvfb, from /, for a few frames; `env` prefixes the command.
  static Shell gui(const std::string& scene, const std::string& png, const std::string& env = "") {
    Shell r;
    for (int attempt = 0; attempt < 3; ++attempt) {  // xvfb-run -a can race another server
      r = sh(env + " " + std::string(ATTNVIZ_XVFB_RUN) + " -a -s '-screen 0 1024x768x24' " +
             q(bin()) + " --scene " + q(scene) + " --size 960x640 --frames 5 --screenshot " +
             q(png));
      if (r.out.find("xvfb-run: error") == std::string::npos) break;
    }
    return r;
  }
};

TEST_F(InstalledDeb, ShipsEveryPresetIconManPageAndDoc) {
  for (const auto& e : fs::directory_iterator(fs::path(ATTNVIZ_SOURCE_DIR) / "assets/scenes"))
    EXPECT_TRUE(fs::exists(share() / "attnviz/scenes" / e.path().filename())) << e.path();
  for (int size : {16, 24, 32, 48, 64, 128, 256}) {
    const std::string s = std::to_string(size);
    const Image icon = load((share() / ("icons/hicolor/" + s + "x" + s + "/apps/attnviz.png")));
    EXPECT_EQ(icon.width, size);
    EXPECT_EQ(icon.height, size);
    EXPECT_GT(icon.distinctColours(), 3) << size;  // the 8 x 8 heatmap, not a flat square
  }
  EXPECT_TRUE(fs::exists(share() / "man/man1/attnviz.1.gz"));
  EXPECT_TRUE(fs::exists(share() / "doc/attnviz/copyright"));
  EXPECT_TRUE(fs::exists(share() / "doc/attnviz/changelog.gz"));
}

// The Head finder presets name their corpus under the data folder (assets/corpora in the source
// tree): each is installed there, whole.
TEST_F(InstalledDeb, ShipsTheCorpusEveryHeadFinderPresetRunsOn) {
  int named = 0;
  for (const auto& e : fs::directory_iterator(fs::path(ATTNVIZ_SOURCE_DIR) / "assets/scenes")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    const auto scene = nlohmann::json::parse(f, nullptr, false);
    if (scene.is_discarded()) continue;
    const nlohmann::json* hf = nullptr;
    if (auto v = scene.find("view"); v != scene.end() && v->is_object())
      if (auto p = v->find("panels"); p != v->end() && p->is_object())
        if (auto h = p->find("headFinder"); h != p->end() && h->is_object()) hf = &*h;
    if (!hf || !hf->contains("corpus")) continue;
    const std::string corpus = (*hf)["corpus"].get<std::string>();
    const fs::path installed = share() / "attnviz" / corpus;
    ASSERT_TRUE(fs::exists(installed)) << e.path() << " names " << corpus;
    EXPECT_EQ(fs::file_size(installed), fs::file_size(fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / corpus))
        << corpus;
    ++named;
  }
  EXPECT_GE(named, 1) << "no preset runs the Head finder on a corpus";
}

TEST_F(InstalledDeb, DesktopEntryAndMetainfoValidate) {
  const Shell d =
      sh("desktop-file-validate " + q((share() / "applications/org.attnviz.attnviz.desktop")));
  EXPECT_EQ(d.rc, 0) << d.out;
  EXPECT_EQ(d.out.find("error"), std::string::npos) << d.out;
  const Shell a = sh("appstreamcli validate --no-net " +
                     q((share() / "metainfo/org.attnviz.attnviz.metainfo.xml")));
  EXPECT_EQ(a.rc, 0) << a.out;
}

// export --bare of the installed causal preset, run from /: T_k*4 x T_q*4 pixels, cell (0,0)
// holds weight 1 (row 0 sees only key 0) and every cell above the diagonal is masked.
TEST_F(InstalledDeb, ExportsAnInstalledPresetFromRoot) {
  std::ifstream f(preset());
  const auto scene = nlohmann::json::parse(f);
  const int T = wordCount(scene.at("query_text").get<std::string>());
  ASSERT_GT(T, 2);
  const std::string png = (tmp / "export.png").string();
  const Shell r =
      sh(q(bin()) + " export --scene " + q(preset()) + " --bare --cell 4 --png " + q(png));
  ASSERT_EQ(r.rc, 0) << r.out;
  const Image im = load(png);
  ASSERT_EQ(im.width, 4 * T);
  ASSERT_EQ(im.height, 4 * T);
  const auto& viridis = attnviz::colormapTable(attnviz::ColormapId::Viridis);
  const RGBA8 one = viridis[attnviz::kColormapSize - 1];
  EXPECT_EQ(im.at(1, 1).r, one.r);
  EXPECT_EQ(im.at(1, 1).g, one.g);
  EXPECT_EQ(im.at(1, 1).b, one.b);
  const RGBA8 corner = im.at(4 * T - 2, 1);
  EXPECT_TRUE(corner == attnviz::kMaskedColor || corner == attnviz::kMaskedHatchColor);

  // A labelled figure needs a font: text adds colours beyond the cells and the masked pair.
  const std::string labelled = (tmp / "labelled.png").string();
  const Shell l = sh(q(bin()) + " export --scene " + q(preset()) + " --png " + q(labelled));
  ASSERT_EQ(l.rc, 0) << l.out;
  EXPECT_GT(load(labelled).distinctColours(), 40);
}

// The shipped model opens from the installed prefix, run from /: a model preset names it by a
// relative path ("kjv-byte-2l", resolved against the data folder's models/), and copying the
// key in the ablation preset's text is what the model predicts without the ablation.
TEST_F(InstalledDeb, TheShippedModelAndItsPresetsWorkFromTheInstalledPrefix) {
  const fs::path model = share() / "attnviz/models/kjv-byte-2l";
  ASSERT_TRUE(fs::exists(model / "model.safetensors")) << model;
  const fs::path preset = share() / "attnviz/scenes/16-model-ablate-induction-head.json";
  std::ifstream f(preset);
  const auto scene = nlohmann::json::parse(f);
  const std::string text = scene.at("model").at("text").get<std::string>();
  const Shell top = sh(q(bin()) + " model --model " + q(model.string()) + " --text " + q(text) +
                       " --top-k 1");
  ASSERT_EQ(top.rc, 0) << top.out;
  EXPECT_EQ(top.out.substr(0, 4), "108\t") << top.out;  // 'l', the byte the copy predicts
  const std::string png = (tmp / "model_preset.png").string();
  const Shell r = sh(q(bin()) + " export --scene " + q(preset.string()) + " --png " + q(png));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GT(load(png).distinctColours(), 40);
}

// The GUI under Xvfb, from /: it reports the data folder of its own prefix and a system font,
// and its screenshot is the window's size with the preset's causal triangle in the heatmap.
TEST_F(InstalledDeb, GuiScreenshotFromRootFindsItsData) {
  const std::string png = (tmp / "gui.png").string();
  const Shell r = gui(preset(), png);
  ASSERT_EQ(r.rc, 0) << r.out;
  // The data folder it reports is its own prefix's (the same folder, whatever symlinks /tmp has).
  const auto data = r.out.find("data: ");
  ASSERT_NE(data, std::string::npos) << r.out;
  const std::string dataDir = r.out.substr(data + 6, r.out.find('\n', data) - data - 6);
  std::error_code ec;
  EXPECT_TRUE(fs::equivalent(dataDir, share() / "attnviz", ec)) << r.out;
  EXPECT_NE(r.out.find("font: /"), std::string::npos) << r.out;
  const Image im = load(png);
  ASSERT_EQ(im.width, 960);
  ASSERT_EQ(im.height, 640);
  EXPECT_GT(im.distinctColours(), 100);
  Geometry g;
  ASSERT_TRUE(parseGeometry(r.out, g)) << r.out;
  const float x0 = g.x0, y0 = g.y0, cell = g.cell, panX = g.panX, panY = g.panY;
  const int cols = g.cols;
  auto cellAt = [&](int i, int j) {
    return im.at(int(x0 + (j + 0.5f - panX) * cell), int(y0 + (i + 0.5f - panY) * cell));
  };
  const RGBA8 masked = cellAt(0, cols - 1);
  EXPECT_TRUE(masked == attnviz::kMaskedColor || masked == attnviz::kMaskedHatchColor);
  const RGBA8 diag = cellAt(0, 0);
  EXPECT_FALSE(diag == attnviz::kMaskedColor || diag == attnviz::kMaskedHatchColor);
}

// A CJK token's label in the GUI comes from a fallback face merged into the ImGui atlas. Without
// one, ImGui draws '?' for each character, so the label of "語語" would look exactly like the
// label of the token "??". It must not; and with fontconfig limited to the UI face's folder
// (no CJK anywhere) it must, which shows the comparison can fail.
TEST_F(InstalledDeb, GuiDrawsCjkLabelsFromAFallbackFont) {
  const attnviz::FontFile ui = attnviz::matchFont("sans-serif");
  if (ui.empty() || attnviz::fontForCodepoint(0x8A9E).empty()) {  // 語
    if (std::getenv("ATTNVIZ_REQUIRE_CJK_FONT")) FAIL() << "no CJK font (fonts-droid-fallback)";
    GTEST_SKIP() << "no CJK font here (fonts-droid-fallback)";
  }
  std::ifstream f(preset());
  const auto base = nlohmann::json::parse(f);
  auto sceneWith = [&](const std::string& firstToken, const std::string& name) {
    auto scene = base;
    scene["query_text"] = firstToken + " a b c d";
    scene["heads"] = 1;
    scene["archetypes"] = {"previous-token"};
    const std::string path = (tmp / name).string();
    std::ofstream(path) << scene.dump();
    return path;
  };
  const std::string cjk = sceneWith("\xE8\xAA\x9E\xE8\xAA\x9E", "cjk.json");
  const std::string marks = sceneWith("??", "marks.json");
  const std::string conf = (tmp / "fonts.conf").string();
  std::ofstream(conf) << "<?xml version=\"1.0\"?>\n<fontconfig><dir>"
                      << fs::path(ui.path).parent_path().string() << "</dir><cachedir>"
                      << (tmp / "fc-cache").string() << "</cachedir></fontconfig>\n";

  // Row 0's label: 50 x 20 pixels left of the heatmap, centred on row 0, as luminance. The UI
  // face is pinned, so only the label's glyphs can differ between runs.
  const std::string pin = "ATTNVIZ_FONT=" + q(ui.path);
  auto label = [&](const std::string& scene, const std::string& env, const std::string& name) {
    const std::string png = (tmp / name).string();
    const Shell r = gui(scene, png, pin + " " + env);
    EXPECT_EQ(r.rc, 0) << r.out;
    std::vector<int> lum;
    Geometry g;
    const Image im = load(png);
    if (!parseGeometry(r.out, g) || im.width == 0) return lum;
    const int mid = int(g.y0 + g.cell / 2);
    for (int y = mid - 10; y < mid + 10; ++y)
      for (int x = int(g.x0) - 50; x < int(g.x0); ++x) {
        const RGBA8 c = im.at(x, y);
        lum.push_back((c.r + c.g + c.b) / 3);
      }
    return lum;
  };
  auto differing = [](const std::vector<int>& a, const std::vector<int>& b) {
    if (a.size() != b.size() || a.empty()) return -1;
    int n = 0;
    for (std::size_t k = 0; k < a.size(); ++k) n += std::abs(a[k] - b[k]) > 40;
    return n;
  };
  const auto questionMarks = label(marks, "", "marks.png");
  const auto withFallback = label(cjk, "", "cjk_all.png");
  const auto uiFaceOnly = label(cjk, "FONTCONFIG_FILE=" + q(conf), "cjk_ui_only.png");
  EXPECT_GT(differing(withFallback, questionMarks), 30);
  EXPECT_EQ(differing(uiFaceOnly, questionMarks), 0);
}

}  // namespace
