// A model's own figures through the real `attnviz export`: the value-weighted and rollout stages
// of a layer and the layers x heads grid (--grid), against the float64 torch references of
// tests/model (make_attribution_fixtures.py's value_weighted.npy and rollout.npy, the fixture's
// plain_weights.npy) as decoded PNG pixels, as SVG read back by an XML parser and as PDF
// rendered by poppler at the PNG's size.
#include "export_util.h"
#include "vector_util.h"

#include "attnviz/formats/npy.h"

#include <nlohmann/json.hpp>

namespace attnviz::exporttest {
namespace {

const fs::path kFixture = fs::path(ATTNVIZ_MODEL_FIXTURES) / "f32_prefix_tied_gelu_new";
const fs::path kCase = fs::path(ATTNVIZ_MODEL_FIXTURES) / "attribution/f32_prefix_tied_gelu_new";

std::string idList(const nlohmann::json& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Colour-table entries within a hair of t * 255 (float32 against the float64 reference).
std::vector<RGBA8> near(double t) {
  std::vector<RGBA8> out;
  for (double d : {-0.02, 0.0, 0.02})
    for (const RGBA8& c : colorsFor(ColormapId::Viridis, t + d / 255.0)) out.push_back(c);
  return out;
}

// Every 1-pixel cell of a bare export of `stage` is viridis(ref / max ref), or the masked colour
// where `masked` says so.
void expectBareStage(const std::string& stage, int layer, const std::vector<float>& ref, int T,
                     bool causalMask) {
  TempDir dir;
  const auto c = nlohmann::json::parse(slurp((kCase / "case.json").string()));
  const CliRun run = runExport({"--model", kFixture.string(), "--ids", idList(c["ids"]),
                                "--layer", std::to_string(layer), "--head",
                                stage == "rollout" ? "0" : std::to_string(int(c["value_weighted"]["head"])),
                                "--stage", stage, "--bare", "--cell", "1", "--png", dir / "s.png"},
                               dir);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const Image img = decodePng(dir / "s.png");
  ASSERT_EQ(img.width, T);
  ASSERT_EQ(img.height, T);
  double m = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= (causalMask ? i : T - 1); ++j) m = std::max(m, double(ref[i * T + j]));
  ASSERT_GT(m, 0);
  int bad = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) {
      const RGBA8 got = img.pixel(j, i);
      const bool ok = causalMask && j > i ? got == kMaskedColor : oneOf(got, near(ref[i * T + j] / m));
      if (!ok && bad++ < 5)
        ADD_FAILURE() << stage << " cell " << i << "," << j << ": reference " << ref[i * T + j] / m;
    }
  EXPECT_EQ(bad, 0) << stage;
}

TEST(ModelFigures, ValueWeightedBareCellsAreTheTorchReference) {
  const auto c = nlohmann::json::parse(slurp((kCase / "case.json").string()));
  const NpyArray ref = readNpy((kCase / std::string(c["value_weighted"]["file"])).string());
  ASSERT_EQ(ref.shape.size(), 2u);
  const int T = int(ref.shape[0]);
  expectBareStage("value_weighted", c["value_weighted"]["layer"],
                  std::vector<float>(ref.data.begin(), ref.data.end()), T, true);
}

TEST(ModelFigures, RolloutBareCellsAreTheTorchReference) {
  const NpyArray ref = readNpy((kCase / "rollout.npy").string());  // [L, T, T]
  ASSERT_EQ(ref.shape.size(), 3u);
  const int L = int(ref.shape[0]), T = int(ref.shape[1]);
  const std::size_t n = std::size_t(T) * T;
  // The last layer's rollout: every layer below it folded in. No mask: above the diagonal the
  // rollout is 0 (the colour table's first entry), not the masked colour.
  expectBareStage("rollout", L - 1,
                  std::vector<float>(ref.data.begin() + (L - 1) * n, ref.data.begin() + L * n), T,
                  false);
}

// The model's stages as labelled figures in all three formats: the SVG has the colour bar's
// title and the token labels as text, the PDF renders like the PNG.
TEST(ModelFigures, StagesAsSvgAndPdfRenderLikeTheirPngs) {
  TempDir dir;
  for (const std::string stage : {"value_weighted", "rollout"}) {
    const CliRun run =
        runExport({"--model", kFixture.string(), "--text", "the cat sat on the mat", "--layer",
                   "1", "--head", "0", "--stage", stage, "--png", dir / "f.png", "--svg",
                   dir / "f.svg", "--pdf", dir / "f.pdf"},
                  dir);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const SvgSummary s = parseSvg(dir / "f.svg", dir);
    ASSERT_TRUE(s.parsed) << s.error;
    EXPECT_TRUE(hasText(s, stage == "rollout" ? "rollout" : "A |v W_O|")) << stage;
    EXPECT_TRUE(anyTextContains(s, stage == "rollout" ? "Attention rollout" : "Value-weighted"));
    EXPECT_TRUE(anyTextContains(s, "mat")) << "no token label";
    const Image page = popplerPage(dir / "f.pdf", dir), png = decodePng(dir / "f.png");
    ASSERT_EQ(page.width, png.width);
    ASSERT_EQ(page.height, png.height);
    const double mean = meanChannelDifference(page, png);
    std::printf("%s: PDF vs PNG mean |difference| %.3f of 255\n", stage.c_str(), mean);
    EXPECT_LT(mean, 2.0);
  }
}

// The panels of a grid figure: the top-left corners of the non-white squares at least `side`
// pixels a side, top to bottom then left to right.
struct Panel {
  int x, y, w, h;
};
std::vector<Panel> findPanels(const Image& im, int side) {
  auto ink = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < im.width && y < im.height && !isWhite(im.pixel(x, y));
  };
  std::vector<Panel> out;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) {
      if (!ink(x, y) || ink(x - 1, y) || ink(x, y - 1)) continue;
      int w = 0, h = 0;
      while (ink(x + w, y)) ++w;
      while (ink(x, y + h)) ++h;
      if (w >= side && h >= side && std::abs(w - h) <= 1) out.push_back({x, y, w, h});
    }
  return out;
}

// --grid: one panel per layer and head, one rectangle per cell, each torch's weight in viridis
// (the causal triangle above the diagonal in the masked colour).
TEST(ModelFigures, GridPanelsAreTheTorchWeightsOfEveryLayerAndHead) {
  TempDir dir;
  const auto cases = nlohmann::json::parse(slurp((kFixture / "cases.json").string()));
  const NpyArray w = readNpy((kFixture / "plain_weights.npy").string());  // [L, H, T, T]
  const int L = int(w.shape[0]), H = int(w.shape[1]), T = int(w.shape[2]);
  const CliRun run = runExport({"--model", kFixture.string(), "--ids", idList(cases["ids"]),
                                "--grid", "--png", dir / "g.png", "--svg", dir / "g.svg",
                                "--pdf", dir / "g.pdf"},
                               dir);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const Image img = decodePng(dir / "g.png");
  const std::vector<Panel> panels = findPanels(img, 40);
  ASSERT_EQ(int(panels.size()), L * H) << "panels found";
  int bad = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const Panel& p = panels[l * H + h];
      ASSERT_EQ(p.w % T, 0) << "a panel of " << p.w << " pixels for " << T << " keys";
      const int cell = p.w / T;
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          const float wt = w.data[((std::size_t(l) * H + h) * T + i) * T + j];
          const RGBA8 got = img.pixel(p.x + j * cell + cell / 2, p.y + i * cell + cell / 2);
          const bool ok = j > i ? got == kMaskedColor : oneOf(got, near(wt));
          if (!ok && bad++ < 5)
            ADD_FAILURE() << "layer " << l << " head " << h << " cell " << i << "," << j
                          << ": weight " << wt;
        }
    }
  EXPECT_EQ(bad, 0);
  // The SVG: row and head labels and the title as text, a rectangle per cell.
  const SvgSummary s = parseSvg(dir / "g.svg", dir);
  ASSERT_TRUE(s.parsed) << s.error;
  for (int l = 0; l < L; ++l) EXPECT_TRUE(hasText(s, "L" + std::to_string(l)));
  for (int h = 0; h < H; ++h) EXPECT_TRUE(hasText(s, "h" + std::to_string(h)));
  EXPECT_TRUE(anyTextContains(s, "every layer"));
  EXPECT_GE(s.rects, long(L) * H * T * T);
  EXPECT_EQ(s.width, img.width);
  const Image page = popplerPage(dir / "g.pdf", dir);
  ASSERT_EQ(page.width, img.width);
  ASSERT_EQ(page.height, img.height);
  const double mean = meanChannelDifference(page, img);
  // Measured 1.83: more cell edges than a heatmap's, each antialiased by poppler.
  std::printf("grid: PDF vs PNG mean |difference| %.3f of 255\n", mean);
  EXPECT_LT(mean, 3.0);
}

// An ablated head's panel has a red frame, and the caption says what it means.
TEST(ModelFigures, GridFramesAnAblatedHead) {
  TempDir dir;
  const CliRun run = runExport({"--model", kFixture.string(), "--text", "the cat sat on the mat",
                                "--ablate", "1:0", "--grid", "--png", dir / "g.png", "--svg",
                                dir / "g.svg"},
                               dir);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const Image img = decodePng(dir / "g.png");
  const std::vector<Panel> panels = findPanels(img, 40);
  ASSERT_EQ(panels.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    const RGBA8 c = img.pixel(panels[k].x, panels[k].y);  // the frame's corner, if any
    const bool red = c.r > 150 && c.g < 90 && c.b < 90;
    EXPECT_EQ(red, k == 2) << "panel " << k;
  }
  const SvgSummary s = parseSvg(dir / "g.svg", dir);
  ASSERT_TRUE(s.parsed) << s.error;
  EXPECT_TRUE(anyTextContains(s, "ablated"));
}

TEST(ModelFigures, RefusalsFollowTheContract) {
  TempDir dir;
  const std::string m = kFixture.string();
  // Bad usage: exit 2, nothing written.
  const std::vector<std::vector<std::string>> usage = {
      {"--model", m, "--grid", "--layer", "0", "--png", dir / "x.png"},
      {"--model", m, "--grid", "--stage", "scores", "--png", dir / "x.png"},
      {"--model", m, "--grid", "--colormap", "nope", "--png", dir / "x.png"},
      {"--model", m, "--grid", "--bare", "--png", dir / "x.png"},
      {"--scene", std::string(ATTNVIZ_SCENES_DIR) + "/03-causal-triangle.json", "--grid", "--png",
       dir / "x.png"},
      {"--scene", std::string(ATTNVIZ_SCENES_DIR) + "/03-causal-triangle.json", "--stage",
       "rollout", "--png", dir / "x.png"},
  };
  for (const auto& a : usage) {
    const CliRun r = runExport(a, dir);
    EXPECT_EQ(r.exitCode, 2) << a[2] << " " << a[3] << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir / "x.png"));
  }
  // A model folder that is not one: exit 1 naming it.
  const CliRun r = runExport({"--model", dir / "nothing", "--text", "a", "--grid", "--png", dir / "x.png"}, dir);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("nothing"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.png"));
}

}  // namespace
}  // namespace attnviz::exporttest
