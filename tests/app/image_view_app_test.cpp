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

#include <cstdio>
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
    const std::string cmd = "/usr/bin/python3 " +
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
