// The PyTorch golden fixtures (tests/fixtures, made by make_fixtures.py) through the library and
// through `attnviz compute`. The fixtures already hold attnviz's conventions where PyTorch's
// differ (zeros for a fully masked row instead of NaN; bottom-right causal alignment instead of
// is_causal's top-left; bool masks meaning "may attend" instead of MultiheadAttention's
// "blocked"): see tests/fixtures/README.md.
#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "attnviz/formats/npy.h"
#include "check.h"
#include "cli.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace attnviz {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kCases = {"self",         "self_2d",      "causal",       "cross",
                                         "cross_causal", "decode",       "window",       "padding",
                                         "prefix",       "sink_window",  "alibi8",       "alibi6",
                                         "temperature",  "fully_masked", "bias_per_head"};

fs::path caseDir(const std::string& name) {
  return fs::path(ATTNVIZ_TEST_DATA_DIR) / "fixtures" / name;
}

std::vector<std::string> caseArgs(const std::string& name) {
  std::ifstream f(caseDir(name) / "args.txt");
  std::vector<std::string> args;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) args.push_back(line);
  return args;
}

// The library-side meaning of a case's command-line options (independent of the CLI's parser).
AttentionParams paramsFromArgs(const std::string& name) {
  AttentionParams p;
  const std::vector<std::string> a = caseArgs(name);
  for (std::size_t x = 0; x < a.size(); ++x) {
    if (a[x] == "--mask") {
      parseMaskOption(a[++x], p.mask);
    } else if (a[x] == "--alibi") {
      p.mask.alibi = true;
    } else if (a[x] == "--temperature") {
      p.temperature = std::stof(a[++x]);
    } else if (a[x] == "--mask-file") {
      MaskFile m = loadMaskNpy((caseDir(name) / a[++x]).string());
      p.mask.customKind = m.isBool ? MaskSpec::Custom::Allow : MaskSpec::Custom::Bias;
      p.mask.custom = std::move(m.values);
    } else {
      ADD_FAILURE() << "fixture " << name << ": unknown option " << a[x];
    }
  }
  return p;
}

// Element-wise against a float64 fixture, whatever the head axis (2-D outputs count as one head).
void expectCloseToFixture(const FloatBuffer& got, const std::vector<long long>& gotShape,
                          const std::string& file, bool maskedMustBeZero = false) {
  const NpyArray want = readNpy(file);
  std::vector<long long> a = gotShape, b = want.shape;
  if (a.size() == 2) a.insert(a.begin(), 1);
  if (b.size() == 2) b.insert(b.begin(), 1);
  ASSERT_EQ(a, b) << file;
  ASSERT_EQ(got.size(), want.data.size()) << file;
  int bad = 0;
  for (std::size_t x = 0; x < got.size() && bad < 10; ++x) {
    const double w = want.data[x];
    const bool ok = std::isinf(w) ? got[x] == w : ref::close(got[x], w);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << file << " index " << x << ": " << got[x] << ", expected " << w;
    }
    if (maskedMustBeZero && w == 0.0 && got[x] != 0.0f) {
      // a zero expected weight is a masked one here (inputs are random normals)
      ++bad;
      ADD_FAILURE() << file << " index " << x << ": " << got[x] << " must be exactly 0";
    }
  }
}

std::vector<long long> shapeOf(const Tensor3& t) { return {t.heads, t.rows, t.cols}; }

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, LibraryMatchesPyTorch) {
  const std::string name = GetParam();
  const fs::path d = caseDir(name);
  const Tensor3 q = loadTensorNpy((d / "q.npy").string()),
                k = loadTensorNpy((d / "k.npy").string()),
                v = loadTensorNpy((d / "v.npy").string());
  const AttentionParams p = paramsFromArgs(name);
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& r = engine->result();
  expectCloseToFixture(r.weights.data, shapeOf(r.weights), (d / "weights.npy").string(), true);
  expectCloseToFixture(r.output.data, shapeOf(r.output), (d / "out.npy").string());
  const Tensor3 logits = computeLogits(r.scaled, p);
  expectCloseToFixture(logits.data, shapeOf(logits), (d / "scores.npy").string());
}

TEST_P(Fixture, CommandLineMatchesPyTorch) {
  const std::string name = GetParam();
  const fs::path d = caseDir(name);
  const fs::path tmp = fs::temp_directory_path() / ("attnviz_fixture_cli_" + name);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::vector<std::string> args = {"compute",
                                   "--q",
                                   (d / "q.npy").string(),
                                   "--k",
                                   (d / "k.npy").string(),
                                   "--v",
                                   (d / "v.npy").string(),
                                   "--scores",
                                   (tmp / "s.npy").string(),
                                   "--weights",
                                   (tmp / "a.npy").string(),
                                   "--out",
                                   (tmp / "o.npy").string()};
  for (std::string a : caseArgs(name)) {
    if (a == "mask.npy") a = (d / "mask.npy").string();
    args.push_back(a);
  }
  const testing::CliRun run = testing::runAttnviz(args, tmp);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  for (const auto& [mine, theirs] :
       {std::pair{"a.npy", "weights.npy"}, std::pair{"o.npy", "out.npy"},
        std::pair{"s.npy", "scores.npy"}}) {
    const NpyArray got = readNpy((tmp / mine).string());
    expectCloseToFixture(got.data, got.shape, (d / theirs).string());
  }
  fs::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(PyTorchGolden, Fixture, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(PyTorchGolden, FullyMaskedFixtureRowIsFlagged) {
  const fs::path d = caseDir("fully_masked");
  const Tensor3 q = loadTensorNpy((d / "q.npy").string()),
                k = loadTensorNpy((d / "k.npy").string()),
                v = loadTensorNpy((d / "v.npy").string());
  auto engine = makeCpuEngine();
  engine->run(q, k, v, paramsFromArgs("fully_masked"));
  const AttentionResult& r = engine->result();
  for (int h = 0; h < r.dims.H; ++h) {
    EXPECT_TRUE(r.row(h, 2).fullyMasked);  // PyTorch gives NaN for this row
    EXPECT_FALSE(r.row(h, 0).fullyMasked);
  }
}

TEST(PyTorchGolden, EveryFixtureFolderIsTested) {
  int folders = 0;
  for (const auto& e : fs::directory_iterator(fs::path(ATTNVIZ_TEST_DATA_DIR) / "fixtures"))
    if (e.is_directory()) {
      ++folders;
      EXPECT_NE(std::find(kCases.begin(), kCases.end(), e.path().filename().string()), kCases.end())
          << e.path();
    }
  EXPECT_EQ(folders, int(kCases.size()));
}

}  // namespace
}  // namespace attnviz
