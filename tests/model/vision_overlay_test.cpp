// The overlay figure (`attnviz export --model IMAGE_MODEL --image FILE --layer L --head H
// [--token cls|N] [--rollout] --overlay`) through the real binary on random-init folders made at
// test time (vision_overlay_reference.py, with vision_reference.py's checkpoint writer): the
// image region of the PNG, decoded with stb_image, against numpy's own upsampling, colormap and
// blend of the row `attnviz model --weights` gives (those weights are held to the torch
// reference by VisionModels.*); the rollout against a numpy rollout at every layer; SVG and PDF
// parse, carry the title as text and draw the same image; bad usage exits 2, bad input 1.
#include "model_test_util.h"
#include "reference_script.h"
#include "vector_util.h"

#include "attnviz/formats/image.h"
#include "attnviz/formats/npy.h"
#include "attnviz/render/colormap.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

using namespace attnviz;
using namespace attnviz::testing;

namespace {

const ReferenceScript& generated() {
  static ReferenceScript g("vision_overlay_reference.py");
  return g;
}

// "the image at (X, Y), K px per image pixel" from the PNG's line.
struct Placement {
  int x = -1, y = -1, scale = 0;
};
Placement placementOf(const std::string& out) {
  Placement p;
  const std::size_t at = out.find("the image at (");
  if (at != std::string::npos)
    std::sscanf(out.c_str() + at, "the image at (%d, %d), %d px", &p.x, &p.y, &p.scale);
  return p;
}

class VisionOverlay : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(generated().ok) << "vision_overlay_reference.py failed";
    image = generated().path("image.png");
  }
  fs::path folder(const std::string& name) const { return generated().path(name); }

  // The model's pixels and weights for the image (once per folder and test).
  void modelOutputs(const std::string& name, const TempDir& dir,
                    const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"model", "--model", folder(name).string(), "--image",
                                     image.string(), "--pixels-out", (dir.path / (name + "_px.npy")).string(),
                                     "--weights", (dir.path / (name + "_w.npy")).string()};
    args.insert(args.end(), more.begin(), more.end());
    const CliRun run = runBinary(args, dir.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
  }

  // Exports the overlay and compares its image region with the reference's, ±2 per channel.
  // What a case adds: export options, `attnviz model` options (the same interventions, the
  // probe's output), and the reference's options.
  struct Extra {
    std::vector<std::string> exportArgs, modelArgs;
    std::string refArgs;
  };
  void checkOverlay(const std::string& name, int layer, int head, const std::string& token,
                    bool rollout, double opacity = 0.6, const std::string& colormap = "viridis",
                    const Extra& extra = {}) {
    SCOPED_TRACE(name + " layer " + std::to_string(layer) + " head " + std::to_string(head) +
                 " token " + token + (rollout ? " rollout" : "") + extra.refArgs);
    TempDir dir;
    std::vector<std::string> more = extra.modelArgs;
    std::string refArgs = extra.refArgs;
    if (token == "probe") {
      more.insert(more.end(), {"--probe-weights", (dir.path / "probe.npy").string()});
      refArgs += " --probe " + shellQuote((dir.path / "probe.npy").string());
    }
    modelOutputs(name, dir, more);
    // The colormap table the figure uses, for the reference to index.
    const ColormapTable& table = colormapTable(*colormapFromName(colormap));
    std::vector<float> rgb;
    for (const RGBA8& c : table) rgb.insert(rgb.end(), {float(c.r), float(c.g), float(c.b)});
    saveNpy((dir.path / "cmap.npy").string(), {kColormapSize, 3}, rgb.data());

    std::vector<std::string> args = {"export",  "--model", folder(name).string(), "--image",
                                     image.string(), "--layer", std::to_string(layer), "--head",
                                     std::to_string(head), "--overlay", "--png",
                                     (dir.path / "o.png").string()};
    if (token != "mean") args.insert(args.end(), {"--token", token});
    if (token == "probe") args.erase(args.begin() + 5, args.begin() + 7);  // no --layer
    if (rollout) args.push_back("--rollout");
    args.insert(args.end(), extra.exportArgs.begin(), extra.exportArgs.end());
    char op[32];
    std::snprintf(op, sizeof op, "%g", opacity);
    if (opacity != 0.6) args.insert(args.end(), {"--opacity", op});
    if (colormap != "viridis") args.insert(args.end(), {"--colormap", colormap});
    const CliRun run = runBinary(args, dir.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const Placement at = placementOf(run.out);
    ASSERT_GT(at.scale, 0) << run.out;

    const std::string script = (modelDir() / "vision_overlay_reference.py").string();
    std::string cmd = ATTNVIZ_PYTHON " " + shellQuote(script) + " expect --folder " +
                      shellQuote(folder(name).string()) + " --image " + shellQuote(image.string()) +
                      " --pixels " + shellQuote((dir.path / (name + "_px.npy")).string()) +
                      " --weights " + shellQuote((dir.path / (name + "_w.npy")).string()) +
                      " --colormap " + shellQuote((dir.path / "cmap.npy").string()) + " --layer " +
                      std::to_string(layer) + " --head " + std::to_string(head) + " --token " +
                      token + " --opacity " + op + " --out " +
                      shellQuote((dir.path / "want.npy").string()) + (rollout ? " --rollout" : "") +
                      refArgs;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const NpyArray want = readNpy((dir.path / "want.npy").string());
    ASSERT_EQ(want.shape.size(), 3u);
    const int H = int(want.shape[0]), W = int(want.shape[1]);

    const RgbImage png = readImageFile((dir.path / "o.png").string());
    ASSERT_GE(png.width, at.x + W * at.scale);
    ASSERT_GE(png.height, at.y + H * at.scale);
    int worst = 0, off = 0;
    long bad = 0;
    for (int y = 0; y < H * at.scale; ++y)
      for (int x = 0; x < W * at.scale; ++x)
        for (int ch = 0; ch < 3; ++ch) {
          const int got = png.rgb[(std::size_t(at.y + y) * png.width + (at.x + x)) * 3 + ch];
          const int w = int(want.data[(std::size_t(y / at.scale) * W + x / at.scale) * 3 + ch]);
          const int d = std::abs(got - w);
          if (d > 2) ++bad;
          worst = std::max(worst, d);
          if (d > 0) ++off;
        }
    EXPECT_EQ(bad, 0) << "worst channel difference " << worst;
    // Most channels agree exactly: the reference and the figure differ in rounding only (the
    // figure blends with a whole alpha, round(opacity * 255) / 255).
    const double share = double(off) / (double(H) * W * at.scale * at.scale * 3);
    EXPECT_LT(share, 0.2);
    std::printf("  %s: worst %d, %.2f%% of the channels off by one or two\n", name.c_str(), worst,
                share * 100);
    // The frame around the image: the region found is the image's, not a shifted one.
    const auto px = [&](int x, int y) {
      return png.rgb[(std::size_t(y) * png.width + x) * 3];
    };
    EXPECT_EQ(px(at.x - 1, at.y - 1), 40);
    EXPECT_EQ(px(at.x + W * at.scale, at.y + H * at.scale), 40);
  }

  fs::path image;
};

}  // namespace

// One head's row of CLS (the default), of a patch, of a register and of SigLIP's patches (the
// mean of the patch queries without a CLS token), in other colormaps and opacities.
TEST_F(VisionOverlay, PixelsMatchTheReference) {
  checkOverlay("vit", 0, 1, "cls", false);
  checkOverlay("vit", 2, 3, "9", false);
  checkOverlay("vit", 1, 0, "cls", false, 0.35, "magma");
  checkOverlay("dinov2_reg", 1, 2, "cls", false);
  checkOverlay("dinov2_reg", 0, 1, "2", false, 0.8, "gray");  // REG1
  checkOverlay("dinov2_reg", 1, 0, "20", false);
  checkOverlay("siglip", 1, 2, "mean", false);
  checkOverlay("siglip", 0, 3, "5", false);
}

// The rollout to every layer against numpy's, from CLS, a patch and SigLIP's patch mean.
TEST_F(VisionOverlay, RolloutMatchesNumpyAtEveryLayer) {
  for (int l = 0; l < 3; ++l) checkOverlay("vit", l, 0, "cls", true);
  checkOverlay("vit", 2, 0, "14", true);
  for (int l = 0; l < 2; ++l) checkOverlay("dinov2_reg", l, 0, "cls", true);
  for (int l = 0; l < 2; ++l) checkOverlay("siglip", l, 0, "mean", true);
}

// The rollout's options against numpy's vit-explain rollout: the heads' maximum, and the lowest
// fraction of each fused layer dropped (CLS to CLS kept), with the mean and the maximum.
TEST_F(VisionOverlay, RolloutOptionsMatchNumpy) {
  using V = std::vector<std::string>;
  for (int l = 0; l < 3; ++l)
    checkOverlay("vit", l, 0, "cls", true, 0.6, "viridis",
                 {V{"--rollout-heads", "max"}, {}, " --rollout-heads max"});
  checkOverlay("vit", 2, 0, "cls", true, 0.6, "viridis",
               {V{"--rollout-discard", "0.9"}, {}, " --rollout-discard 0.9"});
  checkOverlay("vit", 1, 0, "14", true, 0.6, "viridis",
               {V{"--rollout-heads", "max", "--rollout-discard", "0.5"}, {},
                " --rollout-heads max --rollout-discard 0.5"});
  checkOverlay("dinov2_reg", 1, 0, "cls", true, 0.6, "viridis",
               {V{"--rollout-discard", "0.3"}, {}, " --rollout-discard 0.3"});
  checkOverlay("siglip", 1, 0, "mean", true, 0.6, "viridis",
               {V{"--rollout-heads", "max", "--rollout-discard", "0.7"}, {},
                " --rollout-heads max --rollout-discard 0.7"});
}

// SigLIP's pooling probe as the overlay's row (--token probe): each head's row of the probe
// attention `attnviz model --probe-weights` writes, with --layer left out.
TEST_F(VisionOverlay, SiglipProbeRowIsTheOverlay) {
  checkOverlay("siglip", 0, 0, "probe", false);
  checkOverlay("siglip", 0, 3, "probe", false, 0.8, "magma");
}

// --ablate and --mask-patches change the pass the overlay draws as they change `attnviz model`'s
// (whose weights VisionModels hold to the torch reference doing the same).
TEST_F(VisionOverlay, AblateAndMaskPatchesChangeThePass) {
  using V = std::vector<std::string>;
  checkOverlay("vit", 2, 1, "cls", false, 0.6, "viridis",
               {V{"--ablate", "0:1", "--ablate", "1:2", "--mask-patches", "3,7,20"},
                V{"--ablate", "0:1", "--ablate", "1:2", "--mask-patches", "3,7,20"}, ""});
  checkOverlay("dinov2_reg", 1, 0, "cls", true, 0.6, "viridis",
               {V{"--mask-patches", "0,14", "--ablate", "0:2"},
                V{"--mask-patches", "0,14", "--ablate", "0:2"}, ""});
  checkOverlay("siglip", 0, 2, "probe", false, 0.6, "viridis",
               {V{"--ablate", "1:0", "--mask-patches", "5"},
                V{"--ablate", "1:0", "--mask-patches", "5"}, ""});
}

// The temperature (L = s / tau in every layer, and in SigLIP's probe): the figure is the
// reference's drawn from the weights `attnviz model --temperature` gives (which tests/model's
// VisionModels.*Temperature* check against the float64 reference), and not the figure at tau = 1.
TEST_F(VisionOverlay, TemperatureChangesThePass) {
  using V = std::vector<std::string>;
  checkOverlay("vit", 2, 1, "cls", false, 0.6, "viridis",
               {V{"--temperature", "0.5"}, V{"--temperature", "0.5"}, ""});
  checkOverlay("dinov2_reg", 1, 0, "cls", true, 0.6, "viridis",
               {V{"--temperature", "3", "--ablate", "0:2"}, V{"--temperature", "3", "--ablate", "0:2"},
                ""});
  checkOverlay("siglip", 0, 2, "probe", false, 0.6, "viridis",
               {V{"--temperature", "2.5"}, V{"--temperature", "2.5"}, ""});
  TempDir dir;
  std::string figures[2];
  for (int k = 0; k < 2; ++k) {
    std::vector<std::string> args = {"export", "--model", folder("vit").string(), "--image",
                                     image.string(), "--layer", "2", "--head", "1", "--overlay",
                                     "--svg", (dir.path / "o.svg").string()};
    if (k == 1) args.insert(args.end(), {"--temperature", "0.5"});
    const CliRun run = runBinary(args, dir.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    figures[k] = slurp((dir.path / "o.svg").string());
  }
  EXPECT_NE(figures[0], figures[1]);
  // The caption names it.
  EXPECT_EQ(figures[0].find("\xCF\x84 = 0.5"), std::string::npos);
  EXPECT_NE(figures[1].find("\xCF\x84 = 0.5"), std::string::npos);
}

// SVG and PDF next to the PNG: the SVG parses as XML and has the title as text; the PDF has its
// header and trailer, its text (pdftotext) has the title, and poppler draws the image region as
// the PNG's pixels.
TEST_F(VisionOverlay, SvgAndPdfCarryTheSameFigure) {
  TempDir dir;
  const fs::path png = dir.path / "o.png", svg = dir.path / "o.svg", pdf = dir.path / "o.pdf";
  const CliRun run = runBinary({"export", "--model", folder("vit").string(), "--image",
                                image.string(), "--layer", "1", "--head", "2", "--overlay",
                                "--png", png.string(), "--svg", svg.string(), "--pdf",
                                pdf.string()},
                               dir.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const Placement at = placementOf(run.out);
  ASSERT_GT(at.scale, 0) << run.out;
  const std::string title = "vit \xC2\xB7 layer 1 \xC2\xB7 head 2 \xC2\xB7 token CLS";

  const exporttest::SvgSummary s = exporttest::parseSvg(svg.string(), dir);
  ASSERT_TRUE(s.parsed) << s.error;
  const Image p = exporttest::decodePng(png.string());
  EXPECT_EQ(s.width, p.width);
  EXPECT_EQ(s.height, p.height);
  EXPECT_TRUE(exporttest::hasText(s, title)) << slurp(svg.string()).substr(0, 2000);
  EXPECT_TRUE(exporttest::anyTextContains(s, "upsampled bilinearly"));
  const std::string svgText = slurp(svg.string());
  EXPECT_NE(svgText.find("<image "), std::string::npos);
  EXPECT_NE(svgText.find("data:image/png;base64,"), std::string::npos);

  const std::string pdfBytes = slurp(pdf.string());
  ASSERT_GT(pdfBytes.size(), 1000u);
  EXPECT_EQ(pdfBytes.rfind("%PDF-", 0), 0u);
  EXPECT_NE(pdfBytes.find("%%EOF", pdfBytes.size() - 16), std::string::npos);
  int rc = 0;
  const std::string text =
      exporttest::shell("pdftotext " + shellQuote(pdf.string()) + " - 2>&1", rc);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find(title), std::string::npos) << text;
  const Image page = exporttest::popplerPage(pdf.string(), dir);
  ASSERT_EQ(page.width, p.width);
  ASSERT_EQ(page.height, p.height);
  int worst = 0;
  for (int y = at.y; y < at.y + 48 * at.scale; ++y)
    for (int x = at.x; x < at.x + 48 * at.scale; ++x) {
      const RGBA8 a = p.pixel(x, y), b = page.pixel(x, y);
      worst = std::max({worst, std::abs(a.r - b.r), std::abs(a.g - b.g), std::abs(a.b - b.b)});
    }
  EXPECT_LE(worst, 1) << "the PDF's image region differs from the PNG's";
  EXPECT_LT(exporttest::meanChannelDifference(p, page), 2.0);
  // The same bytes on every run.
  const fs::path svg2 = dir.path / "o2.svg", pdf2 = dir.path / "o2.pdf";
  ASSERT_EQ(runBinary({"export", "--model", folder("vit").string(), "--image", image.string(),
                       "--layer", "1", "--head", "2", "--overlay", "--svg", svg2.string(),
                       "--pdf", pdf2.string()},
                      dir.path)
                .exitCode,
            0);
  EXPECT_EQ(slurp(svg2.string()), svgText);
  EXPECT_EQ(slurp(pdf2.string()), pdfBytes);
}

// Bad usage exits 2 and bad input 1, each with one line on stderr naming the option or file,
// and no figure is left behind.
TEST_F(VisionOverlay, ErrorsNameTheOptionOrFile) {
  TempDir dir;
  const std::string vit = folder("vit").string(), img = image.string();
  const std::string out = (dir.path / "o.png").string();
  const std::vector<std::string> base = {"export", "--model", vit, "--image", img, "--layer", "0",
                                         "--head", "0"};
  const auto with = [&](std::vector<std::string> b, const std::vector<std::string>& extra) {
    b.insert(b.end(), extra.begin(), extra.end());
    b.insert(b.end(), {"--png", out});
    return b;
  };
  std::vector<std::pair<std::vector<std::string>, std::pair<int, std::string>>> cases = {
      {with(base, {}), {2, "--overlay"}},                          // --image without --overlay
      {with({"export", "--model", vit, "--layer", "0", "--overlay"}, {}), {2, "--image"}},
      {with(base, {"--overlay", "--token", "53"}), {2, "--token 53"}},  // 37 tokens
      {with(base, {"--overlay", "--token", "x"}), {2, "--token"}},
      {with({"export", "--model", vit, "--image", img, "--layer", "3", "--overlay"}, {}),
       {2, "--layer 3"}},
      {with({"export", "--model", vit, "--image", img, "--layer", "0", "--head", "4",
             "--overlay"},
            {}),
       {2, "--head 4"}},
      {with({"export", "--model", folder("siglip").string(), "--image", img, "--layer", "0",
             "--overlay", "--token", "cls"},
            {}),
       {2, "--token cls"}},
      {with(base, {"--overlay", "--opacity", "1.5"}), {2, "--opacity"}},
      {with(base, {"--overlay", "--temperature", "0"}), {2, "--temperature"}},
      {with(base, {"--overlay", "--temperature", "-1"}), {2, "--temperature"}},
      {with(base, {"--overlay", "--mask", "causal"}), {2, "--mask"}},
      {with(base, {"--overlay", "--alibi"}), {2, "--alibi"}},
      {with({"export", "--model", vit, "--layer", "0", "--rollout"}, {}), {2, "--rollout"}},
      // An image model's heatmap export: it has only the overlay.
      {with({"export", "--model", vit, "--layer", "0"}, {}), {2, "--overlay"}},
      {with(base, {"--overlay", "--stage", "rollout"}), {2, "--overlay"}},
      {with({"export", "--model", vit, "--image", (dir.path / "missing.png").string(), "--layer", "0",
             "--overlay"},
            {}),
       {1, (dir.path / "missing.png").string()}},
      {with({"export", "--model", (dir.path / "nomodel").string(), "--image", img, "--layer", "0",
             "--overlay"},
            {}),
       {1, (dir.path / "nomodel").string()}},
  };
  // A file that is not an image.
  const fs::path notImage = dir.path / "not.png";
  { std::ofstream(notImage) << "not an image"; }
  cases.push_back({with({"export", "--model", vit, "--image", notImage.string(), "--layer", "0",
                         "--overlay"},
                        {}),
                   {1, notImage.string()}});
  // A broken config.json.
  const fs::path broken =
      editedCopy(folder("vit"), dir.path / "broken", [](nlohmann::json& j) { j["hidden_size"] = 48; });
  cases.push_back({with({"export", "--model", broken.string(), "--image", img, "--layer", "0",
                         "--overlay"},
                        {}),
                   {1, (broken / "model.safetensors").string()}});
  for (const auto& [args, want] : cases) {
    std::string shown;
    for (std::size_t i = 1; i < args.size(); ++i) shown += " " + args[i];
    SCOPED_TRACE(shown);
    const CliRun run = runBinary(args, dir.path);
    EXPECT_EQ(run.exitCode, want.first) << run.err;
    EXPECT_EQ(lineCount(run.err), 1) << run.err;
    EXPECT_NE(run.err.find(want.second), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(out));
  }
}
