// `attnviz export --svg / --pdf` through the real binary. The SVG is read back by a real XML
// parser (python3's xml.etree) and its text and rectangles are checked against the scene's
// tokens and the mask; the PDF is rendered by poppler (pdftoppm) at the PNG's size and compared
// pixel by pixel with the PNG export of the same figure.
#include "export_util.h"
#include "vector_util.h"

#include "attnviz/formats/npy.h"
#include "attnviz/render/attribution_figure.h"
#include "attnviz/render/vector_figure.h"
#include "reference.h"

#include <map>

namespace attnviz::exporttest {
namespace {

std::string scenePath(const std::string& name) {
  return std::string(ATTNVIZ_SCENES_DIR) + "/" + name;
}

// The causal lesson scene: a word a token, a triangle of masked cells.
const char* kCausalScene = "03-causal-triangle.json";
const std::vector<std::string> kCausalWords = {"once",  "upon",  "a",     "time",  "there",
                                               "was",   "small", "robot", "who",   "loved",
                                               "to",    "paint"};

TEST(VectorExport, SvgParsesAsXmlWithTokenLabelsTitlesAndHatchedMaskedCellsAsElements) {
  TempDir dir;
  const CliRun r = runExport({"--scene", scenePath(kCausalScene), "--cell", "20", "--png",
                              dir / "a.png", "--svg", dir / "a.svg", "--pdf", dir / "a.pdf"},
                             dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const SvgSummary s = parseSvg(dir / "a.svg", dir);
  ASSERT_TRUE(s.parsed) << s.error;
  // Every token is a text element of its own, on both axes (query and key labels).
  for (const std::string& w : kCausalWords) {
    const auto n = std::count_if(s.texts.begin(), s.texts.end(), [&](const std::string& t) {
      return t == w || t == " " + w;
    });
    // "a" is two tokens of the text ("a time", "a small").
    EXPECT_EQ(n, w == "a" ? 4 : 2) << "token '" << w << "'";
  }
  EXPECT_TRUE(hasText(s, "Queries"));
  EXPECT_TRUE(hasText(s, "Keys"));
  EXPECT_TRUE(hasText(s, "weight"));   // the colour bar's title
  EXPECT_TRUE(hasText(s, "masked"));   // its legend
  EXPECT_TRUE(hasText(s, "0.0") || hasText(s, "0"));  // a tick
  EXPECT_TRUE(hasText(s, "1.0") || hasText(s, "1"));
  EXPECT_TRUE(anyTextContains(s, "Attention weights"));
  // The page is the PNG's; the 13 x 13 causal triangle has 78 masked cells, each a hatched
  // rectangle (plus the legend's swatch), and the other 91 cells are rectangles of their own.
  const Image png = decodePng(dir / "a.png");
  EXPECT_EQ(s.width, png.width);
  EXPECT_EQ(s.height, png.height);
  EXPECT_EQ(s.hatched, 78 + 1);
  EXPECT_GE(s.rects - s.hatched, 91);
}

// Pixels of the PDF as poppler draws it at 72 dpi (1 pt = 1 px), against the PNG: the cells,
// frames, bar and hatching are the same rectangles, so only the text's antialiasing (FreeType
// in poppler, stb_truetype in the PNG) differs. Measured on this scene: see docs/export.md.
TEST(VectorExport, PdfRendersAtThePngsSizeAndMatchesItsPixels) {
  TempDir dir;
  const CliRun r = runExport({"--scene", scenePath(kCausalScene), "--cell", "20", "--png",
                              dir / "a.png", "--pdf", dir / "a.pdf"},
                             dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  int rc = 0;
  const std::string out = shell("pdftoppm -r 72 -png -singlefile " +
                                    testing::shellQuote(dir / "a.pdf") + " " +
                                    testing::shellQuote(dir / "poppler") + " 2>&1",
                                rc);
  ASSERT_EQ(rc, 0) << "pdftoppm (poppler-utils) failed: " << out;
  const Image pdf = decodePng(dir / "poppler.png"), png = decodePng(dir / "a.png");
  ASSERT_GT(png.width, 0);
  ASSERT_EQ(pdf.width, png.width);
  ASSERT_EQ(pdf.height, png.height);
  long differing = 0, total = long(png.width) * png.height;
  double sum = 0;
  for (int y = 0; y < png.height; ++y)
    for (int x = 0; x < png.width; ++x) {
      const RGBA8 a = pdf.pixel(x, y), b = png.pixel(x, y);
      const int d = std::max({std::abs(a.r - b.r), std::abs(a.g - b.g), std::abs(a.b - b.b)});
      sum += d;
      differing += d > 32;
    }
  const double mean = sum / double(total), share = double(differing) / double(total);
  std::printf("PDF vs PNG: mean |difference| %.3f of 255, %.3f%% of pixels off by more than 32\n",
              mean, 100.0 * share);
  EXPECT_LT(mean, 2.0);
  EXPECT_LT(share, 0.015);
}

TEST(VectorExport, TheSameFigureGivesTheSameBytesEachRun) {
  TempDir dir;
  for (const char* n : {"1", "2"}) {
    const CliRun r = runExport({"--scene", scenePath(kCausalScene), "--svg",
                                dir / (std::string("a") + n + ".svg"), "--pdf",
                                dir / (std::string("a") + n + ".pdf")},
                               dir);
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  EXPECT_EQ(slurp(dir / "a1.svg"), slurp(dir / "a2.svg"));
  const std::string pdf = slurp(dir / "a1.pdf");
  EXPECT_EQ(pdf, slurp(dir / "a2.pdf"));
  EXPECT_EQ(pdf.rfind("%PDF-", 0), 0u);
}

// Over 250,000 cells the vector figure is max-pooled, and its title says so; the PNG of the same
// run keeps its own (unpooled) layout.
TEST(VectorExport, ALargeFigureIsPooledAndSaysSoInItsTitle) {
  TempDir dir;
  const int T = 520;  // 270,400 cells
  saveNpy(dir / "q.npy", ref::randomTensor(1, T, 8, 5));
  saveNpy(dir / "k.npy", ref::randomTensor(1, T, 8, 6));
  saveNpy(dir / "v.npy", ref::randomTensor(1, T, 8, 7));
  const CliRun r = runExport({"--q", dir / "q.npy", "--k", dir / "k.npy", "--v", dir / "v.npy",
                              "--mask", "causal", "--svg", dir / "a.svg"},
                             dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("max-pooled"), std::string::npos) << r.out;
  const SvgSummary s = parseSvg(dir / "a.svg", dir);
  ASSERT_TRUE(s.parsed) << s.error;
  EXPECT_TRUE(anyTextContains(s, "max-pooled: each cell the largest of 2 keys"));
  // 260 x 260 blocks, one rectangle each, plus the page, bar and frames.
  EXPECT_GE(s.rects, 260L * 260L);
  EXPECT_LT(s.rects, 250000L);
}

TEST(VectorExport, RefusalsFollowTheContract) {
  TempDir dir;
  // No output at all, or two outputs in one file: bad usage.
  CliRun r = runExport({"--scene", scenePath(kCausalScene)}, dir);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  r = runExport({"--scene", scenePath(kCausalScene), "--svg", dir / "x", "--pdf", dir / "x"}, dir);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  // A folder that does not exist: bad input, one line naming the file, nothing left behind.
  r = runExport({"--scene", scenePath(kCausalScene), "--pdf", dir / "no/such/a.pdf"}, dir);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("a.pdf"), std::string::npos) << r.err;
  // A bare vector figure of more cells than a vector figure holds.
  saveNpy(dir / "q.npy", ref::randomTensor(1, 600, 4, 1));
  saveNpy(dir / "k.npy", ref::randomTensor(1, 600, 4, 2));
  saveNpy(dir / "v.npy", ref::randomTensor(1, 600, 4, 3));
  r = runExport({"--q", dir / "q.npy", "--k", dir / "k.npy", "--v", dir / "v.npy", "--bare",
                 "--cell", "1", "--svg", dir / "b.svg"},
                dir);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir / "b.svg"));
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// The attribution figure (attribute --svg/--pdf, the attribution panel's export): the same
// layout through the same painters.
TEST(VectorExport, AttributionFigureAsSvgAndPdf) {
  TempDir dir;
  AttributionFigure f;
  f.rows = 3, f.cols = 4;
  for (int k = 0; k < 12; ++k) f.values.push_back(float(k - 6) * 0.25f);
  f.values[5] = std::nanf("");  // not computed
  f.title = "Attribution test";
  f.rowLabels = {"L0", "L1", "L2"};
  f.valueTitle = "delta";
  f.captions = {"a caption"};
  f.cell = 40;
  const Image plain = renderAttributionFigure(f);
  f.vector = true;
  const Image img = renderAttributionFigure(f);
  ASSERT_TRUE(img.vector);
  EXPECT_EQ(img.rgba, plain.rgba) << "recording the vector figure changed the PNG's pixels";
  writeSvg(dir / "a.svg", img);
  writePdf(dir / "a.pdf", img);
  writePng(dir / "a.png", img);
  const SvgSummary s = parseSvg(dir / "a.svg", dir);
  ASSERT_TRUE(s.parsed) << s.error;
  for (const char* t : {"Attribution test", "layer", "head", "L0", "L1", "L2", "0", "3", "delta",
                        "a caption", "-1.50", "1.25"})
    EXPECT_TRUE(hasText(s, t)) << t;
  EXPECT_GE(s.rects, 12);
  EXPECT_EQ(s.width, img.width);
  const Image page = popplerPage(dir / "a.pdf", dir), png = decodePng(dir / "a.png");
  ASSERT_EQ(page.width, png.width);
  ASSERT_EQ(page.height, png.height);
  double sum = 0;
  for (int y = 0; y < png.height; ++y)
    for (int x = 0; x < png.width; ++x) {
      const RGBA8 a = page.pixel(x, y), b = png.pixel(x, y);
      sum += std::max({std::abs(a.r - b.r), std::abs(a.g - b.g), std::abs(a.b - b.b)});
    }
  const double mean = sum / (double(png.width) * png.height);
  std::printf("attribution PDF vs PNG: mean |difference| %.3f of 255\n", mean);
  EXPECT_LT(mean, 2.0);
}

// Every heatmap variant goes through the painters: every head with the block overlay, the
// scores stage, and the FlashAttention step parse as SVG and render as PDF at the PNG's size.
TEST(VectorExport, GridBlocksScoresAndFlashFiguresRenderLikeTheirPngs) {
  TempDir dir;
  const std::vector<std::vector<std::string>> runs = {
      {"--scene", scenePath("12-how-sparse-is-my-mask.json"), "--head", "all", "--stage",
       "scores", "--blocks", "4"},
      {"--scene", scenePath("14-flashattention.json")}};
  for (const auto& args : runs) {
    std::vector<std::string> a = args;
    for (const char* o : {"--png", "--svg", "--pdf"})
      a.insert(a.end(), {o, dir / (std::string("f") + (o + 2) + "." + (o + 2))});
    const CliRun r = runExport(a, dir);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const SvgSummary s = parseSvg(dir / "fsvg.svg", dir);
    ASSERT_TRUE(s.parsed) << s.error;
    EXPECT_TRUE(hasText(s, "Keys"));
    const Image page = popplerPage(dir / "fpdf.pdf", dir), png = decodePng(dir / "fpng.png");
    ASSERT_EQ(page.width, png.width);
    ASSERT_EQ(page.height, png.height);
    EXPECT_EQ(s.width, png.width);
    double sum = 0;
    for (int y = 0; y < png.height; ++y)
      for (int x = 0; x < png.width; ++x) {
        const RGBA8 p = page.pixel(x, y), q = png.pixel(x, y);
        sum += std::max({std::abs(p.r - q.r), std::abs(p.g - q.g), std::abs(p.b - q.b)});
      }
    const double mean = sum / (double(png.width) * png.height);
    std::printf("%s: PDF vs PNG mean |difference| %.3f of 255\n", args[1].c_str(), mean);
    EXPECT_LT(mean, 2.0);
  }
}

}  // namespace
}  // namespace attnviz::exporttest
