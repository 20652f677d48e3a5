// Round trips from PyTorch into `attnviz export --dump`: dump_roundtrip.py captures an
// nn.TransformerEncoder and an nn.Transformer (random init, cross-attention) with
// tools/python/attnviz_dump.py and writes reference weights computed apart from the capture. Every
// bare PNG pixel must be the colormap of the reference weight (a weight of exactly 0 is masked).
#include "attnviz/formats/npy.h"
#include "export_util.h"

#include <gtest/gtest.h>

namespace attnviz::exporttest {
namespace {

class DumpRoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new TempDir();
    const std::string cmd =
        ATTNVIZ_PYTHON " " +
        testing::shellQuote(std::string(ATTNVIZ_TEST_DATA_DIR) + "/cli/dump_roundtrip.py") +
        " " + testing::shellQuote(dir->path.string());
    ok = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(ok) << "dump_roundtrip.py failed (torch capture)"; }

  // Exports each head of `layer` bare at one pixel a cell and compares every pixel with the
  // reference; extra arguments go to the export.
  static void expectPixelsMatch(const std::string& model, int layer, const std::string& layerArg,
                                int expectRows, int expectCols) {
    const NpyArray ref = readNpy((*dir) / (model + "." + std::to_string(layer) + ".npy"));
    ASSERT_EQ(ref.shape.size(), 3u);
    const int H = int(ref.shape[0]), Tq = int(ref.shape[1]), Tk = int(ref.shape[2]);
    EXPECT_EQ(Tq, expectRows);
    EXPECT_EQ(Tk, expectCols);
    for (int h = 0; h < H; ++h) {
      SCOPED_TRACE(model + " layer " + layerArg + " head " + std::to_string(h));
      const std::string png =
          (*dir) / (model + "_" + std::to_string(layer) + "_" + std::to_string(h) + ".png");
      const CliRun r =
          runExport({"--dump", (*dir) / (model + ".safetensors"), "--layer", layerArg, "--head",
                     std::to_string(h), "--bare", "--cell", "1", "--png", png},
                    *dir);
      ASSERT_EQ(r.exitCode, 0) << r.err;
      const Image img = decodePng(png);
      ASSERT_EQ(img.width, Tk);
      ASSERT_EQ(img.height, Tq);
      int bad = 0;
      for (int i = 0; i < Tq; ++i) {
        for (int j = 0; j < Tk && bad < 5; ++j) {
          const float w = ref.data[(std::size_t(h) * Tq + i) * Tk + j];
          const std::size_t p = (std::size_t(i) * Tk + j) * 4;
          const RGBA8 got{img.rgba[p], img.rgba[p + 1], img.rgba[p + 2], img.rgba[p + 3]};
          const std::vector<RGBA8> want =
              w == 0.0f ? std::vector<RGBA8>{kMaskedColor} : colorsFor(ColormapId::Viridis, w);
          if (!oneOf(got, want)) {
            ++bad;
            ADD_FAILURE() << "cell (" << i << ", " << j << ") weight " << w << " has colour "
                          << int(got.r) << "," << int(got.g) << "," << int(got.b);
          }
        }
      }
    }
  }
  static inline TempDir* dir = nullptr;
  static inline bool ok = false;
};

TEST_F(DumpRoundTrip, CapturedTransformerEncoderExportsThePerHeadWeights) {
  expectPixelsMatch("encoder", 0, "0", 9, 9);
  expectPixelsMatch("encoder", 1, "1", 9, 9);
}

TEST_F(DumpRoundTrip, CapturedTransformerExportsEncoderCausalDecoderAndCrossLayers) {
  // Call order: encoder.0, encoder.1, decoder.0, decoder.0.cross, decoder.1, decoder.1.cross.
  expectPixelsMatch("transformer", 1, "encoder.1", 7, 7);
  expectPixelsMatch("transformer", 2, "decoder.0", 5, 5);
  expectPixelsMatch("transformer", 3, "decoder.0.cross", 5, 7);
  expectPixelsMatch("transformer", 5, "5", 5, 7);
}

TEST_F(DumpRoundTrip, HuggingFaceStyleTupleSavesTheChosenBatchInFloat32AndFloat16) {
  expectPixelsMatch("hf", 2, "2", 6, 6);
  expectPixelsMatch("hf16", 0, "0", 6, 6);
}

TEST_F(DumpRoundTrip, ListOfNumpyArraysSavesWithNamesAndOneHeadLayers) {
  expectPixelsMatch("np", 0, "first", 4, 4);
  expectPixelsMatch("np", 1, "second", 4, 4);
}

TEST_F(DumpRoundTrip, CrossLayerLabelsBothTokenListsInALabelledExport) {
  const std::string png = (*dir) / "cross_labelled.png";
  const CliRun r = runExport(
      {"--dump", (*dir) / "transformer.safetensors", "--layer", "decoder.1.cross", "--png", png},
      *dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(png);
  EXPECT_GT(img.width, 7 * 8);
  EXPECT_GT(img.height, 5 * 8);
  EXPECT_GT(img.width, img.height);  // a 5 x 7 rectangle, wider than tall
}

// Temperature and a mask on a dump, against the rule written out here in double: row i keeps the
// keys j <= i, raises each weight to 1/tau and re-normalises.
TEST_F(DumpRoundTrip, TemperatureAndCausalMaskReNormaliseTheCapturedWeights) {
  const NpyArray ref = readNpy((*dir) / "encoder.1.npy");
  const int T = int(ref.shape[1]), h = 2;
  const double tau = 0.5;
  const std::string png = (*dir) / "tau.png";
  const CliRun r = runExport({"--dump", (*dir) / "encoder.safetensors", "--layer", "1", "--head",
                              std::to_string(h), "--temperature", "0.5", "--mask", "causal",
                              "--bare", "--cell", "1", "--png", png},
                             *dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Image img = decodePng(png);
  ASSERT_EQ(img.width, T);
  ASSERT_EQ(img.height, T);
  for (int i = 0; i < T; ++i) {
    double sum = 0.0;
    for (int j = 0; j <= i; ++j) sum += std::pow(ref.data[(std::size_t(h) * T + i) * T + j], 1.0 / tau);
    for (int j = 0; j < T; ++j) {
      const std::size_t p = (std::size_t(i) * T + j) * 4;
      const RGBA8 got{img.rgba[p], img.rgba[p + 1], img.rgba[p + 2], img.rgba[p + 3]};
      const double a = std::pow(ref.data[(std::size_t(h) * T + i) * T + j], 1.0 / tau) / sum;
      const std::vector<RGBA8> want =
          j > i ? std::vector<RGBA8>{kMaskedColor} : colorsFor(ColormapId::Viridis, a);
      EXPECT_TRUE(oneOf(got, want)) << "cell (" << i << ", " << j << ") weight " << a;
    }
  }
}

TEST_F(DumpRoundTrip, UsageAndInputErrorsExitTwoAndOneWithoutWritingAFile) {
  const std::string dump = (*dir) / "transformer.safetensors", png = (*dir) / "never.png";
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--png", png});
    return runExport(args, *dir);
  };
  CliRun r = run({"--dump", dump});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("--layer"), std::string::npos) << r.err;
  r = run({"--dump", dump, "--layer", "6"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("decoder.1.cross"), std::string::npos) << "lists the layers: " << r.err;
  r = run({"--dump", dump, "--layer", "nope"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  r = run({"--layer", "0", "--q", dump, "--k", dump, "--v", dump});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  r = run({"--dump", dump, "--layer", "0", "--head", "3"});  // 3 heads: 0..2
  EXPECT_EQ(r.exitCode, 2) << r.err;
  r = run({"--dump", dump, "--layer", "0", "--stage", "scores"});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("q/k/v"), std::string::npos) << r.err;
  {
    std::ofstream((*dir) / "garbage.npz", std::ios::binary) << "PK\x03\x04 not really a zip";
  }
  r = run({"--dump", (*dir) / "garbage.npz", "--layer", "0"});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(r.err.rfind("attnviz export: " + (*dir) / "garbage.npz" + ": ", 0), 0u) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_FALSE(fs::exists(png));
}

}  // namespace
}  // namespace attnviz::exporttest
