// The image view (`attnviz --model IMAGE_MODEL --image FILE`) on random-init folders and a
// procedural PNG made at test time by tests/model/vision_overlay_reference.py: the app's export
// is byte for byte `attnviz export --overlay` with the same settings (CLS, a patch's row, the
// rollout, and after a scene is saved and reopened); the weight the view shows under a hovered
// patch is `attnviz model --weights`'s W[L, H, token, patch]; bad usage exits 2 and a missing
// image 1, each with one line.
#include "run_shell.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/formats/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <tuple>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using attnviz::testing::runShell;
using attnviz::testing::runUnderXvfb;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;
namespace fs = std::filesystem;

namespace {

std::string asset(const std::string& rel) { return std::string(ATTNVIZ_SOURCE_DIR) + "/" + rel; }

// The folders (vit: 3 layers, 4 heads, 6 x 6 patches; dinov2_reg: CLS, 3 registers, 5 x 7
// patches) and image.png, made once per test binary.
struct Generated {
  fs::path dir;
  bool ok = false;
  Generated() {
    dir = fs::path(::testing::TempDir()) / ("attnviz_image_view_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string cmd = ATTNVIZ_PYTHON " " +
                            shellQuote(asset("tests/model/vision_overlay_reference.py")) + " " +
                            shellQuote(dir.string()) + " >/dev/null 2>&1";
    ok = std::system(cmd.c_str()) == 0 && fs::exists(dir / "vit" / "config.json") &&
         fs::exists(dir / "image.png");
  }
  ~Generated() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};
const Generated& generated() {
  static Generated g;
  return g;
}

ShellRun app(const std::string& args, const std::string& shot = "attnviz_image_view.png") {
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x800x24\" " +
                          ATTNVIZ_BIN + " --size 1280x800 --frames 6 --screenshot " +
                          shellQuote(::testing::TempDir() + shot) + " " + args;
  const ShellRun r = runUnderXvfb(cmd);
  return r;
}

ShellRun cli(const std::string& args) { return runShell(std::string(ATTNVIZ_BIN) + " " + args); }

// The non-empty lines of an output.
std::vector<std::string> lines(const std::string& out) {
  std::vector<std::string> v;
  std::size_t at = 0;
  while (at < out.size()) {
    std::size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    if (end > at) v.push_back(out.substr(at, end - at));
    at = end + 1;
  }
  return v;
}

class ImageViewApp : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(generated().ok) << "vision_overlay_reference.py failed";
    dir = fs::path(::testing::TempDir()) /
          ("attnviz_image_view_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string folder(const std::string& name) const {
    return shellQuote((generated().dir / name).string());
  }
  std::string image() const { return shellQuote((generated().dir / "image.png").string()); }
  std::string out(const std::string& name) const { return shellQuote((dir / name).string()); }
  std::string bytes(const std::string& name) const {
    return attnviz::readFile((dir / name).string());
  }

  // The app's export and the CLI's overlay export with the same settings, byte for byte.
  void sameExport(const std::string& model, const std::string& settings) {
    SCOPED_TRACE(model + " " + settings);
    const ShellRun c = cli("export --model " + folder(model) + " --image " + image() + " " +
                           settings + " --overlay --png " + out("cli.png"));
    ASSERT_EQ(c.rc, 0) << c.out;
    const ShellRun a =
        app("--model " + folder(model) + " --image " + image() + " " + settings + " --export " +
            out("app.png"));
    ASSERT_EQ(a.rc, 0) << a.out;
    ASSERT_NE(a.out.find("exported: "), std::string::npos) << a.out;
    const std::string x = bytes("cli.png"), y = bytes("app.png");
    ASSERT_GT(x.size(), 1000u);
    EXPECT_TRUE(x == y) << "the app's PNG (" << y.size() << " bytes) differs from the CLI's ("
                        << x.size() << " bytes)";
  }
  fs::path dir;
};

}  // namespace

TEST_F(ImageViewApp, ExportOfTheClsRowIsTheClisBytes) {
  sameExport("vit", "--layer 2 --head 1 --token cls");
}

TEST_F(ImageViewApp, ExportOfAPatchRowIsTheClisBytes) {
  // Token 10: the patch at (1, 3) of the 6 x 6 grid (CLS first).
  sameExport("vit", "--layer 1 --head 3 --token 10");
}

TEST_F(ImageViewApp, ExportOfTheRolloutIsTheClisBytes) {
  sameExport("dinov2_reg", "--layer 1 --head 0 --rollout");
}

// The weight under a hovered patch is the model's own: W[L, H, token, P + row * gridW + col]
// of `attnviz model --weights`, on DINOv2 with registers (CLS, REG0..REG2, then 5 x 7 patches).
TEST_F(ImageViewApp, TheHoveredPatchShowsTheModelsWeight) {
  const ShellRun m = cli("model --model " + folder("dinov2_reg") + " --image " + image() +
                         " --weights " + out("w.npy"));
  ASSERT_EQ(m.rc, 0) << m.out;
  const attnviz::NpyArray w = attnviz::readNpy((dir / "w.npy").string());
  ASSERT_EQ(w.shape.size(), 4u);
  const long long L = w.shape[0], H = w.shape[1], T = w.shape[2];
  ASSERT_EQ(T, 4 + 5 * 7);
  const int layer = 1, head = 2, row = 3, col = 5;
  for (const int token : {0, 2, 4 + 7 + 2}) {  // CLS, REG1, the patch (1, 2)
    SCOPED_TRACE("token " + std::to_string(token));
    const ShellRun a = app("--model " + folder("dinov2_reg") + " --image " + image() +
                           " --layer " + std::to_string(layer) + " --head " +
                           std::to_string(head) + " --token " + std::to_string(token) +
                           " --hover-patch " + std::to_string(row) + "," + std::to_string(col));
    ASSERT_EQ(a.rc, 0) << a.out;
    const std::size_t at = a.out.find("image-view: ");
    ASSERT_NE(at, std::string::npos) << a.out;
    int l = -1, h = -1, t = -9, r = -1, c = -1;
    double shown = -1;
    const std::size_t hv = a.out.find(" hover=", at);
    ASSERT_NE(hv, std::string::npos) << a.out;
    ASSERT_EQ(std::sscanf(a.out.c_str() + at, "image-view: layer=%d head=%d average=%*d token=%d",
                          &l, &h, &t),
              3)
        << a.out;
    ASSERT_EQ(std::sscanf(a.out.c_str() + hv, " hover=%d,%d weight=%lf", &r, &c, &shown), 3);
    EXPECT_EQ(l, layer);
    EXPECT_EQ(h, head);
    EXPECT_EQ(t, token);
    EXPECT_EQ(r, row);
    EXPECT_EQ(c, col);
    const long long key = 4 + row * 7 + col;
    const float want = w.data[std::size_t(((layer * H + head) * T + token) * T + key)];
    EXPECT_EQ(float(shown), want);
    (void)L;
  }
}

TEST_F(ImageViewApp, BadUsageAndAMissingImageAreOneLine) {
  // An image for a text model, text for an image model: bad usage, before any window.
  ShellRun r = cli("--model " + shellQuote(asset("assets/models/kjv-sp-llama")) + " --image " +
                   image() + " --frames 2");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(lines(r.out).size(), 1u) << r.out;
  EXPECT_NE(r.out.find("not an image model"), std::string::npos) << r.out;
  r = cli("--model " + folder("vit") + " --text hello --frames 2");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(lines(r.out).size(), 1u) << r.out;
  EXPECT_NE(r.out.find("is an image model"), std::string::npos) << r.out;
  // A missing image: bad input, naming the file.
  const std::string missing = (dir / "no-such-image.png").string();
  r = cli("--model " + folder("vit") + " --image " + shellQuote(missing) + " --frames 2");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(lines(r.out).size(), 1u) << r.out;
  EXPECT_NE(r.out.find(missing), std::string::npos) << r.out;
}

// A saved scene keeps the model, the image and the view: reopened, the app exports the same
// bytes, and `attnviz export --scene` of it too.
TEST_F(ImageViewApp, ASavedSceneReopensTheSameView) {
  const ShellRun a = app("--model " + folder("vit") + " --image " + image() +
                         " --layer 2 --head 3 --token 20 --opacity 0.8 --save-scene " +
                         out("scene.json") + " --export " + out("first.png"));
  ASSERT_EQ(a.rc, 0) << a.out;
  const ShellRun b = app("--scene " + out("scene.json") + " --export " + out("again.png"));
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_NE(b.out.find("image-view: layer=2 head=3 average=0 token=20"), std::string::npos)
      << b.out;
  EXPECT_TRUE(bytes("first.png") == bytes("again.png"));
  const ShellRun c = cli("export --scene " + out("scene.json") + " --png " + out("cli.png"));
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_TRUE(bytes("first.png") == bytes("cli.png"));
}

// ---- The rollout's options, SigLIP's probe, interventions and the side panel ----

namespace {

// A field "key=VALUE" of the first line starting with `prefix` (empty when absent).
std::string field(const std::string& out, const std::string& prefix, const std::string& key) {
  for (const std::string& l : lines(out)) {
    if (l.rfind(prefix, 0) != 0) continue;
    const std::size_t at = l.find(" " + key + "=");
    if (at == std::string::npos) return "";
    const std::size_t from = at + key.size() + 2;
    return l.substr(from, l.find(' ', from) - from);
  }
  return "";
}

// numpy's answer to `expr` (an expression over the arrays named in `arrays`), printed with repr.
std::string numpy(const std::vector<std::pair<std::string, fs::path>>& arrays,
                  const std::string& expr) {
  std::string py = "import numpy as np\n";
  for (const auto& [name, path] : arrays)
    py += name + " = np.load(" + shellQuote(path.string()) + ").astype(np.float64)\n";
  py += "print(" + expr + ")\n";
  const ShellRun r = runShell(ATTNVIZ_PYTHON " -c " + shellQuote(py));
  return r.rc == 0 ? r.out.substr(0, r.out.find_last_not_of("\n") + 1) : "error: " + r.out;
}

double num(const std::string& s) { return s.empty() ? -12345 : std::strtod(s.c_str(), nullptr); }
// A weight as float32, what the model stores (the lines print 9 significant digits, enough for
// a float32 to round-trip).
float f32(const std::string& s) { return float(num(s)); }

}  // namespace

TEST_F(ImageViewApp, ExportOfTheRolloutOptionsIsTheClisBytes) {
  sameExport("vit", "--layer 2 --head 0 --rollout --rollout-heads max --rollout-discard 0.5");
  sameExport("dinov2_reg", "--layer 1 --head 0 --rollout --rollout-discard 0.9");
}

TEST_F(ImageViewApp, ExportOfSiglipsProbeIsTheClisBytes) {
  sameExport("siglip", "--head 2 --token probe");
}

TEST_F(ImageViewApp, ExportWithAblatedHeadsAndHiddenPatchesIsTheClisBytes) {
  sameExport("vit", "--layer 1 --head 2 --token cls --ablate 0:1 --ablate 0:3 --mask-patches 3,7,20");
  sameExport("dinov2_reg", "--layer 1 --head 0 --rollout --mask-patches 0,14 --ablate 1:1");
}

TEST_F(ImageViewApp, ExportWithATemperatureIsTheClisBytes) {
  sameExport("vit", "--layer 1 --head 2 --token cls --temperature 0.5");
  sameExport("siglip", "--head 2 --token probe --temperature 2.5 --ablate 0:1");
}

// The tokens x tokens matrix beside the image: the hovered cell's weight is W[L, H, q, k] of
// `attnviz model --weights`, its colour scale the matrix's largest weight; a click on a row
// makes that query the overlay's token.
TEST_F(ImageViewApp, TheTokensMatrixShowsTheModelsWeights) {
  const ShellRun m = cli("model --model " + folder("dinov2_reg") + " --image " + image() +
                         " --weights " + out("w.npy"));
  ASSERT_EQ(m.rc, 0) << m.out;
  const fs::path w = dir / "w.npy";
  for (const auto& [q, k] : std::vector<std::pair<int, int>>{{0, 0}, {2, 17}, {30, 5}}) {
    SCOPED_TRACE(std::to_string(q) + "," + std::to_string(k));
    const ShellRun a = app("--model " + folder("dinov2_reg") + " --image " + image() +
                           " --layer 1 --head 2 --image-side tokens --hover-side " +
                           std::to_string(q) + "," + std::to_string(k));
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_EQ(field(a.out, "image-side:", "hover"), std::to_string(q) + "," + std::to_string(k))
        << a.out;
    const double want = num(numpy({{"w", w}}, "repr(float(np.float32(w[1, 2, " +
                                                   std::to_string(q) + ", " + std::to_string(k) +
                                                   "])))"));
    EXPECT_EQ(f32(field(a.out, "image-side:", "value")), float(want)) << a.out;
    EXPECT_EQ(f32(field(a.out, "image-side:", "max")),
              f32(numpy({{"w", w}}, "repr(float(w[1, 2].max()))")));
  }
  // Clicking row 21 makes token 21 (the patch (2, 3)) the overlay's row.
  const ShellRun c = app("--model " + folder("dinov2_reg") + " --image " + image() +
                         " --layer 1 --head 2 --click-side 21,4");
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_EQ(field(c.out, "image-view:", "token"), "21") << c.out;
  EXPECT_EQ(field(c.out, "image-view:", "label"), "p(2,3)") << c.out;
}

// The layers x heads grid: each thumbnail is the token's row over the patches in that layer and
// head (the hovered thumbnail's largest weight is max_j W[l, h, token, P + j]); a click selects
// that layer and head; the panel's vertices do not grow with the layers and heads (one texture,
// at most 16 labels a side).
TEST_F(ImageViewApp, TheLayersByHeadsGridShowsEachHeadsRow) {
  const ShellRun m = cli("model --model " + folder("vit") + " --image " + image() +
                         " --weights " + out("w.npy"));
  ASSERT_EQ(m.rc, 0) << m.out;
  const fs::path w = dir / "w.npy";
  for (const auto& [l, h, token] : std::vector<std::tuple<int, int, int>>{{0, 0, 0}, {2, 3, 0}, {1, 2, 14}}) {
    SCOPED_TRACE(std::to_string(l) + "," + std::to_string(h) + " token " + std::to_string(token));
    const ShellRun a = app("--model " + folder("vit") + " --image " + image() + " --token " +
                           std::to_string(token) + " --image-side grid --hover-side " +
                           std::to_string(l) + "," + std::to_string(h));
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_EQ(field(a.out, "image-side:", "hover"), std::to_string(l) + "," + std::to_string(h));
    EXPECT_EQ(f32(field(a.out, "image-side:", "value")),
              f32(numpy({{"w", w}}, "repr(float(w[" + std::to_string(l) + ", " + std::to_string(h) +
                                        ", " + std::to_string(token) + ", 1:].max()))")))
        << a.out;
    const int vertices = std::atoi(field(a.out, "image-side:", "vertices").c_str());
    EXPECT_GT(vertices, 0);
    EXPECT_LT(vertices, 1500) << "the grid draws one texture and at most 32 labels";
    std::printf("  grid vertices: %d\n", vertices);
  }
  const ShellRun c = app("--model " + folder("vit") + " --image " + image() +
                         " --image-side grid --click-side 2,3");
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_EQ(field(c.out, "image-view:", "layer"), "2") << c.out;
  EXPECT_EQ(field(c.out, "image-view:", "head"), "3") << c.out;
}

// Token norms: |x_t| of the residual stream after the layer (`attnviz model --residual`, row
// L + 1), the median over all tokens, the tokens above threshold x median marked, CLS's and
// the registers' norms listed; a hovered patch's norm.
TEST_F(ImageViewApp, TokenNormsAreTheResidualStreamsNorms) {
  const ShellRun m = cli("model --model " + folder("dinov2_reg") + " --image " + image() +
                         " --residual " + out("r.npy"));
  ASSERT_EQ(m.rc, 0) << m.out;
  const fs::path r = dir / "r.npy";
  for (const auto& [layer, threshold] : std::vector<std::pair<int, std::string>>{{0, "1.5"}, {1, "1.25"}}) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const ShellRun a = app("--model " + folder("dinov2_reg") + " --image " + image() +
                           " --layer " + std::to_string(layer) + " --image-side norms" +
                           " --norm-threshold " + threshold + " --hover-side 2,4");
    ASSERT_EQ(a.rc, 0) << a.out;
    const std::string n = "np.linalg.norm(r[" + std::to_string(layer + 1) + "], axis=1)";
    const auto close = [&](double got, const std::string& expr) {
      const double want = num(numpy({{"r", r}}, "repr(float(" + expr + "))"));
      EXPECT_NEAR(got, want, 1e-6 * std::max(1.0, std::abs(want))) << expr << "\n" << a.out;
    };
    close(num(field(a.out, "image-norms:", "median")), "np.median(" + n + ")");
    close(num(field(a.out, "image-norms:", "CLS")), n + "[0]");
    for (int g = 0; g < 3; ++g)
      close(num(field(a.out, "image-norms:", "REG" + std::to_string(g))), n + "[" + std::to_string(1 + g) + "]");
    close(num(field(a.out, "image-side:", "value")), n + "[4 + 2 * 7 + 4]");
    std::string marked = numpy({{"r", r}}, "','.join(str(i) for i in np.nonzero(" + n + " > " +
                                               threshold + " * np.median(" + n + "))[0]) or '-'");
    EXPECT_EQ(field(a.out, "image-norms:", "marked"), marked) << a.out;
    std::printf("  layer %d: marked %s\n", layer, marked.c_str());
  }
}

// SigLIP's probe as the overlay's row: the map's largest value is the largest of head H's probe
// weights over the patches (`attnviz model --probe-weights`, [H, 1, T]; SigLIP has no prefix).
TEST_F(ImageViewApp, SiglipsProbeIsTheOverlaysRow) {
  const ShellRun m = cli("model --model " + folder("siglip") + " --image " + image() +
                         " --probe-weights " + out("p.npy"));
  ASSERT_EQ(m.rc, 0) << m.out;
  for (const int head : {0, 3}) {
    const ShellRun a = app("--model " + folder("siglip") + " --image " + image() +
                           " --token probe --head " + std::to_string(head) + " --hover-patch 1,2");
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_EQ(field(a.out, "image-view:", "label"), "probe") << a.out;
    EXPECT_EQ(f32(field(a.out, "image-view:", "max")),
              f32(numpy({{"p", dir / "p.npy"}}, "repr(float(p[" + std::to_string(head) + ", 0].max()))")));
    EXPECT_EQ(float(num(field(a.out, "image-view:", "weight"))),
              float(num(numpy({{"p", dir / "p.npy"}}, "repr(float(p[" + std::to_string(head) + ", 0, 6]))"))));
  }
  // A model without a probe: bad usage.
  const ShellRun bad = cli("--model " + folder("vit") + " --image " + image() +
                           " --token probe --frames 2");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("probe"), std::string::npos) << bad.out;
}

// --ablate and --mask-patches run the view's pass as `attnviz model` runs it: the hovered weight
// is the intervened pass's, a hidden patch's weight exactly 0.
TEST_F(ImageViewApp, InterventionsChangeTheViewsPass) {
  const ShellRun m = cli("model --model " + folder("vit") + " --image " + image() +
                         " --ablate 0:1 --mask-patches 3,7 --weights " + out("w.npy"));
  ASSERT_EQ(m.rc, 0) << m.out;
  const ShellRun plain = cli("model --model " + folder("vit") + " --image " + image() +
                             " --weights " + out("w0.npy"));
  ASSERT_EQ(plain.rc, 0) << plain.out;
  for (const auto& [row, col] : std::vector<std::pair<int, int>>{{0, 3}, {4, 4}}) {
    const ShellRun a = app("--model " + folder("vit") + " --image " + image() +
                           " --layer 2 --head 0 --ablate 0:1 --mask-patches 3,7 --hover-patch " +
                           std::to_string(row) + "," + std::to_string(col));
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_EQ(field(a.out, "image-view:", "ablate"), "0:1") << a.out;
    EXPECT_EQ(field(a.out, "image-view:", "mask"), "3,7") << a.out;
    const std::string at = "[2, 0, 0, " + std::to_string(1 + row * 6 + col) + "]";
    const double want = num(numpy({{"w", dir / "w.npy"}}, "repr(float(w" + at + "))"));
    EXPECT_EQ(float(num(field(a.out, "image-view:", "weight"))), float(want)) << a.out;
    if (col == 3) EXPECT_EQ(want, 0.0);
    else
      EXPECT_NE(want, num(numpy({{"w", dir / "w0.npy"}}, "repr(float(w" + at + "))")));
  }
}

// The temperature: the hovered weight is `attnviz model --temperature`'s (checked against the
// float64 reference by VisionModels.VitTemperature), not the weight at tau = 1.
TEST_F(ImageViewApp, TheTemperatureChangesTheViewsPass) {
  const ShellRun m = cli("model --model " + folder("vit") + " --image " + image() +
                         " --temperature 0.4 --weights " + out("w.npy"));
  ASSERT_EQ(m.rc, 0) << m.out;
  const ShellRun plain = cli("model --model " + folder("vit") + " --image " + image() +
                             " --weights " + out("w0.npy"));
  ASSERT_EQ(plain.rc, 0) << plain.out;
  const ShellRun a = app("--model " + folder("vit") + " --image " + image() +
                         " --layer 1 --head 3 --temperature 0.4 --hover-patch 2,5");
  ASSERT_EQ(a.rc, 0) << a.out;
  EXPECT_EQ(field(a.out, "image-view:", "temperature"), "0.4") << a.out;
  const std::string at = "[1, 3, 0, " + std::to_string(1 + 2 * 6 + 5) + "]";
  const double want = num(numpy({{"w", dir / "w.npy"}}, "repr(float(w" + at + "))"));
  EXPECT_EQ(float(num(field(a.out, "image-view:", "weight"))), float(want)) << a.out;
  EXPECT_GT(std::abs(want - num(numpy({{"w", dir / "w0.npy"}}, "repr(float(w" + at + "))"))),
            1e-4);
  // The same row's largest weight: at tau = 0.4 the row is sharper than at 1.
  const double maxT = num(numpy({{"w", dir / "w.npy"}}, "repr(float(w[1, 3, 0, 1:].max()))"));
  EXPECT_NEAR(num(field(a.out, "image-view:", "max")), maxT, 1e-6 * maxT) << a.out;
  // Bad values are one line, exit 2.
  const ShellRun bad = app("--model " + folder("vit") + " --image " + image() +
                           " --temperature 0");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("--temperature"), std::string::npos) << bad.out;
}

// A scene keeps the new settings: the rollout's options, the side panel and its threshold, the
// interventions; reopened it prints the same lines and exports the same bytes, and
// `attnviz export --scene` draws them too.
TEST_F(ImageViewApp, ASavedSceneKeepsTheNewSettings) {
  const std::string settings =
      "--layer 1 --head 1 --rollout --rollout-heads max --rollout-discard 0.3 --ablate 0:2 "
      "--mask-patches 5,6 --temperature 0.7 --image-side norms --norm-threshold 1.3";
  const ShellRun a = app("--model " + folder("dinov2_reg") + " --image " + image() + " " +
                         settings + " --save-scene " + out("scene.json") + " --export " +
                         out("first.png"));
  ASSERT_EQ(a.rc, 0) << a.out;
  const ShellRun b = app("--scene " + out("scene.json") + " --export " + out("again.png"));
  ASSERT_EQ(b.rc, 0) << b.out;
  for (const char* prefix : {"image-view:", "image-norms:"}) {
    std::string x, y;
    for (const std::string& l : lines(a.out)) if (l.rfind(prefix, 0) == 0) x = l;
    for (const std::string& l : lines(b.out)) if (l.rfind(prefix, 0) == 0) y = l;
    EXPECT_FALSE(x.empty()) << a.out;
    EXPECT_EQ(x, y);
  }
  EXPECT_EQ(field(b.out, "image-side:", "side"), "norms");
  EXPECT_TRUE(bytes("first.png") == bytes("again.png"));
  const ShellRun c = cli("export --scene " + out("scene.json") + " --png " + out("cli.png"));
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_TRUE(bytes("first.png") == bytes("cli.png"));
  const ShellRun d = cli("export --model " + folder("dinov2_reg") + " --image " + image() +
                         " --layer 1 --head 1 --rollout --rollout-heads max --rollout-discard 0.3"
                         " --ablate 0:2 --mask-patches 5,6 --temperature 0.7 --overlay --png " +
                         out("cli2.png"));
  ASSERT_EQ(d.rc, 0) << d.out;
  EXPECT_TRUE(bytes("first.png") == bytes("cli2.png"));
}

// ---- Presets 49 and 50: the image view on the shipped random-init folders ----

namespace {

std::string preset(const std::string& name) { return shellQuote(asset("assets/scenes/" + name)); }
std::string shipped(const std::string& rel) { return shellQuote(asset("assets/models/" + rel)); }

}  // namespace

// "High-norm tokens and registers": the norms after layer 3 of dinov2-registers-random as its
// note gives them (median 60.67, token 55 the one above 1.2 x, CLS 0.95 x, the registers 0.97,
// 0.87, 0.97, 1.05 x), each against numpy's norms of `attnviz model --residual`.
TEST_F(ImageViewApp, PresetHighNormTokensAndRegistersClaimsHold) {
  const std::string m = "dinov2-registers-random";
  const ShellRun c = cli("model --model " + shipped(m) + " --image " +
                         shipped(m + "/examples/shapes.png") + " --residual " + out("r.npy"));
  ASSERT_EQ(c.rc, 0) << c.out;
  const ShellRun a = app("--scene " + preset("49-high-norm-tokens-and-registers.json"));
  ASSERT_EQ(a.rc, 0) << a.out;
  EXPECT_EQ(field(a.out, "image-view:", "label"), "REG3") << a.out;
  EXPECT_EQ(field(a.out, "image-side:", "side"), "norms") << a.out;
  const fs::path r = dir / "r.npy";
  const std::string n = "np.linalg.norm(r[4], axis=1)";
  const double median = num(numpy({{"r", r}}, "repr(float(np.median(" + n + ")))"));
  EXPECT_NEAR(num(field(a.out, "image-norms:", "median")), median, 1e-6 * median);
  EXPECT_NEAR(median, 60.67, 0.005);
  EXPECT_EQ(field(a.out, "image-norms:", "marked"), "55") << a.out;
  EXPECT_EQ(numpy({{"r", r}}, "','.join(str(i) for i in np.nonzero(" + n + " > 1.2 * np.median(" +
                                  n + "))[0])"),
            "55");
  EXPECT_EQ(numpy({{"r", r}}, "int((" + n + " > 2 * np.median(" + n + ")).sum())"), "0");
  const char* names[] = {"CLS", "REG0", "REG1", "REG2", "REG3"};
  const double ratios[] = {0.95, 0.97, 0.87, 0.97, 1.05};
  for (int t = 0; t < 5; ++t) {
    const double got = num(field(a.out, "image-norms:", names[t]));
    EXPECT_NEAR(got, num(numpy({{"r", r}}, "repr(float(" + n + "[" + std::to_string(t) + "]))")),
                1e-6 * median)
        << names[t];
    EXPECT_NEAR(got / median, ratios[t], 0.005) << names[t];
  }
}

// "SigLIP's probe": head 0's probe row is the overlay, its largest weight 0.93 on the centre
// patch p(3,3) (token 24), as `attnviz model --probe-weights` writes it.
TEST_F(ImageViewApp, PresetSiglipsProbeClaimsHold) {
  const std::string m = "siglip-random";
  const ShellRun c = cli("model --model " + shipped(m) + " --image " +
                         shipped(m + "/examples/shapes.png") + " --probe-weights " + out("p.npy"));
  ASSERT_EQ(c.rc, 0) << c.out;
  const ShellRun a = app("--scene " + preset("50-siglips-probe.json"));
  ASSERT_EQ(a.rc, 0) << a.out;
  EXPECT_EQ(field(a.out, "image-view:", "label"), "probe") << a.out;
  EXPECT_EQ(field(a.out, "image-side:", "side"), "grid") << a.out;
  const fs::path p = dir / "p.npy";
  EXPECT_EQ(numpy({{"p", p}}, "int(p[0, 0].argmax())"), "24");
  const double top = num(numpy({{"p", p}}, "repr(float(p[0, 0].max()))"));
  EXPECT_NEAR(top, 0.93, 0.005);
  EXPECT_EQ(f32(field(a.out, "image-view:", "max")), float(top)) << a.out;
  EXPECT_EQ(numpy({{"p", p}}, "' '.join('%d:%.2f' % (int(p[h, 0].argmax()), p[h, 0].max()) for h in range(4))"),
            "24:0.93 23:0.82 31:0.45 38:0.42");
  // The preset's export is the CLI's overlay of the same settings.
  const ShellRun e = app("--scene " + preset("50-siglips-probe.json") + " --export " + out("app.png"));
  ASSERT_EQ(e.rc, 0) << e.out;
  const ShellRun x = cli("export --scene " + preset("50-siglips-probe.json") + " --png " + out("cli.png"));
  ASSERT_EQ(x.rc, 0) << x.out;
  EXPECT_TRUE(bytes("app.png") == bytes("cli.png"));
}
