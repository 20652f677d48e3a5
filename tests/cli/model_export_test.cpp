// export --model: one layer's heatmap from the forward pass, against the torch fixture's weights.
#include "export_util.h"

#include "attnviz/formats/npy.h"

#include <nlohmann/json.hpp>

namespace attnviz::exporttest {
namespace {

const fs::path kFixture = fs::path(ATTNVIZ_MODEL_FIXTURES) / "f32_prefix_tied_gelu_new";

// Each bare 1-pixel cell is colormap(weight) of the torch reference (or the masked colour), for
// the plain pass and for one with interventions in it.
void expectLayerCells(const std::vector<std::string>& extra, const std::string& refName) {
  TempDir dir;
  const auto cases = nlohmann::json::parse(slurp((kFixture / "cases.json").string()));
  std::string ids;
  for (int id : cases["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  std::vector<std::string> args{"--model", kFixture.string(), "--ids",      ids,      "--layer",
                                "1",       "--head",          "1",          "--bare", "--cell",
                                "1",       "--png",           dir / "m.png"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliRun run = runExport(args, dir);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const Image img = decodePng(dir / "m.png");
  const NpyArray ref = readNpy((kFixture / refName).string());  // [L, H, T, T]
  const int T = static_cast<int>(ref.shape[2]), H = static_cast<int>(ref.shape[1]);
  ASSERT_EQ(img.width, T);
  ASSERT_EQ(img.height, T);
  int bad = 0;
  for (int i = 0; i < T; ++i) {
    for (int j = 0; j < T; ++j) {
      const float w = ref.data[((std::size_t(1) * H + 1) * T + i) * T + j];
      const std::size_t px = (std::size_t(i) * T + j) * 4;
      const RGBA8 got{img.rgba[px], img.rgba[px + 1], img.rgba[px + 2], img.rgba[px + 3]};
      const std::vector<RGBA8> ok =
          j > i ? std::vector<RGBA8>{kMaskedColor} : colorsFor(ColormapId::Viridis, w);
      if (!oneOf(got, ok) && bad++ < 5) ADD_FAILURE() << "cell " << i << "," << j << " w " << w;
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(ModelExport, BareLayerCellsAreTheTorchWeights) { expectLayerCells({}, "plain_weights.npy"); }

TEST(ModelExport, InterventionsApplyInsideThePass) {
  expectLayerCells({"--ablate", "0:1", "--ablate", "1:0", "--temperature", "0.5"},
                   "combined_weights.npy");
}

TEST(ModelExport, NeedsALayer) {
  TempDir dir;
  const CliRun run =
      runExport({"--model", kFixture.string(), "--ids", "1,2", "--png", dir / "m.png"}, dir);
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_EQ(lineCount(run.err), 1);
  EXPECT_FALSE(fs::exists(dir / "m.png"));
}

}  // namespace
}  // namespace attnviz::exporttest
