// `attnviz compute` through the real binary: results against the reference, exit codes (2 bad
// usage, 1 bad input), one-line messages naming the file, and no half-written outputs.
#include "attnviz/formats/npy.h"
#include "check.h"
#include "cli.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

namespace attnviz {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::lineCount;
using testing::runAttnviz;

class ComputeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("attnviz_cli_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    q = ref::randomTensor(3, 6, 8, 1);
    k = ref::randomTensor(3, 9, 8, 2);
    v = ref::randomTensor(3, 9, 5, 3);
    saveNpy(path("q.npy"), q);
    saveNpy(path("k.npy"), k);
    saveNpy(path("v.npy"), v);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::vector<std::string> base() const {
    return {"compute", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy")};
  }
  std::vector<std::string> with(std::vector<std::string> extra) const {
    std::vector<std::string> a = base();
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Exit code `code`, exactly one line on stderr, and it mentions `mention`.
  void expectFailure(const CliRun& r, int code, const std::string& mention) {
    EXPECT_EQ(r.exitCode, code) << "stderr: " << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << "stderr: " << r.err;
    if (!mention.empty()) {
      EXPECT_NE(r.err.find(mention), std::string::npos) << "stderr: " << r.err;
    }
  }
  fs::path dir;
  Tensor3 q, k, v;
};

TEST_F(ComputeCli, WritesWeightsOutputAndScoresMatchingTheReference) {
  const CliRun r = runAttnviz(
      with({"--mask", "causal", "--mask", "window:4", "--alibi", "--temperature", "0.7",
            "--weights", path("a.npy"), "--out", path("o.npy"), "--scores", path("s.npy")}),
      dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 4;
  p.mask.alibi = true;
  p.temperature = 0.7f;
  const ref::Result want = ref::attention(q, k, v, p);
  const Tensor3 a = loadMaskNpy(path("a.npy")).values;  // float file; no NaN/Inf check needed
  const Tensor3 o = loadTensorNpy(path("o.npy"));
  const NpyArray s = readNpy(path("s.npy"));
  ASSERT_TRUE(a.sameShape(Tensor3(3, 6, 9)));
  ASSERT_TRUE(o.sameShape(Tensor3(3, 6, 5)));
  ASSERT_EQ(s.shape, (std::vector<long long>{3, 6, 9}));
  for (std::size_t x = 0; x < a.size(); ++x) {
    EXPECT_TRUE(ref::close(a.data[x], want.weights[x])) << x;
    EXPECT_TRUE(ref::close(s.data[x], want.logits[x]))
        << x << ": " << s.data[x] << " vs " << want.logits[x];
  }
  for (std::size_t x = 0; x < o.size(); ++x)
    EXPECT_TRUE(ref::close(o.data[x], want.output[x])) << x;
}

TEST_F(ComputeCli, BoolMaskFileMeansMayAttend) {
  Tensor3 m(1, 6, 9, 0.0f);
  for (int i = 0; i < 6; ++i) m.at(0, i, (2 * i) % 9) = 1.0f;  // exactly one key per query
  // A uint8 .npy written by hand: the mask file kind is decided by the dtype.
  std::string raw(54, '\0');
  for (int x = 0; x < 54; ++x) raw[x] = char(m.data[x] != 0.0f);
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (6, 9), }";
  dict.append(128 - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::ofstream(path("m.npy"), std::ios::binary)
      << std::string("\x93NUMPY\x01\x00", 8) << char(dict.size()) << char(0) << dict << raw;
  const CliRun r =
      runAttnviz(with({"--mask-file", path("m.npy"), "--weights", path("a.npy")}), dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Tensor3 a = loadMaskNpy(path("a.npy")).values;
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 9; ++j) EXPECT_EQ(a.at(h, i, j), j == (2 * i) % 9 ? 1.0f : 0.0f);
}

TEST_F(ComputeCli, SucceedsWithNoOutputsRequested) {
  const CliRun r = runAttnviz(base(), dir);
  EXPECT_EQ(r.exitCode, 0) << r.err;
}

TEST_F(ComputeCli, UnknownOptionIsBadUsage) {
  expectFailure(runAttnviz(with({"--frobnicate"}), dir), 2, "");
}

TEST_F(ComputeCli, BadMaskValueIsBadUsage) {
  expectFailure(runAttnviz(with({"--mask", "diagonal"}), dir), 2, "diagonal");
}

TEST_F(ComputeCli, MalformedWindowValueIsBadUsage) {
  expectFailure(runAttnviz(with({"--mask", "window:abc"}), dir), 2, "");
}

TEST_F(ComputeCli, MissingQIsBadUsage) {
  expectFailure(runAttnviz({"compute", "--k", path("k.npy"), "--v", path("v.npy")}, dir), 2, "");
}

TEST_F(ComputeCli, UnknownBackendIsBadUsage) {
  expectFailure(runAttnviz(with({"--backend", "tpu"}), dir), 2, "");
}

TEST_F(ComputeCli, MissingInputFileIsBadInputNamingIt) {
  expectFailure(
      runAttnviz({"compute", "--q", path("absent.npy"), "--k", path("k.npy"), "--v", path("v.npy")},
                 dir),
      1, "absent.npy");
}

TEST_F(ComputeCli, MismatchedShapesAreBadInput) {
  saveNpy(path("k7.npy"), ref::randomTensor(3, 9, 7, 4));
  expectFailure(
      runAttnviz({"compute", "--q", path("q.npy"), "--k", path("k7.npy"), "--v", path("v.npy")},
                 dir),
      1, "");
}

TEST_F(ComputeCli, NaNInAnInputIsBadInputNamingTheFile) {
  Tensor3 bad = v;
  bad.at(1, 2, 3) = std::numeric_limits<float>::quiet_NaN();
  saveNpy(path("vnan.npy"), bad);
  expectFailure(
      runAttnviz({"compute", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("vnan.npy")},
                 dir),
      1, "vnan.npy");
}

TEST_F(ComputeCli, CorruptInputFileIsBadInputNamingTheFile) {
  std::ofstream(path("junk.npy"), std::ios::binary) << "this is not a numpy file";
  expectFailure(
      runAttnviz({"compute", "--q", path("junk.npy"), "--k", path("k.npy"), "--v", path("v.npy")},
                 dir),
      1, "junk.npy");
}

TEST_F(ComputeCli, MaskFileOfWrongShapeIsBadInputNamingTheFile) {
  saveNpy(path("m.npy"), Tensor3(1, 5, 9, 0.0f));
  expectFailure(runAttnviz(with({"--mask-file", path("m.npy")}), dir), 1, "m.npy");
}

// docs/design/conventions.md: tau > 0. Every invalid option value is bad usage (exit 2), named in
// the message, like --window 0.
TEST_F(ComputeCli, ZeroTemperatureIsBadUsage) {
  expectFailure(runAttnviz(with({"--temperature", "0"}), dir), 2, "--temperature");
}

TEST_F(ComputeCli, NegativeTemperatureIsBadUsage) {
  expectFailure(runAttnviz(with({"--temperature", "-1"}), dir), 2, "--temperature");
  expectFailure(runAttnviz(with({"--temperature", "-0.5"}), dir), 2, "--temperature");
}

TEST_F(ComputeCli, NanAndInfiniteTemperaturesAreBadUsage) {
  expectFailure(runAttnviz(with({"--temperature", "nan"}), dir), 2, "--temperature");
  expectFailure(runAttnviz(with({"--temperature", "inf"}), dir), 2, "--temperature");
  expectFailure(runAttnviz(with({"--temperature", "1e60"}), dir), 2, "--temperature");
}

TEST_F(ComputeCli, NonNumericTemperatureIsBadUsage) {
  expectFailure(runAttnviz(with({"--temperature", "warm"}), dir), 2, "");
}

TEST_F(ComputeCli, ExistingOutputIsUntouchedAfterAFailure) {
  const std::string old = "previous results";
  std::ofstream(path("o.npy"), std::ios::binary) << old;
  std::ofstream(path("a.npy"), std::ios::binary) << old;
  saveNpy(path("k7.npy"), ref::randomTensor(3, 9, 7, 4));
  const CliRun r = runAttnviz({"compute", "--q", path("q.npy"), "--k", path("k7.npy"), "--v",
                               path("v.npy"), "--weights", path("a.npy"), "--out", path("o.npy")},
                              dir);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(testing::slurp(path("o.npy")), old);
  EXPECT_EQ(testing::slurp(path("a.npy")), old);
}

TEST_F(ComputeCli, FailedWriteLeavesNoTemporaryFileBehind) {
  fs::create_directories(dir / "ro");
  std::ofstream((dir / "ro" / "o.npy").string()) << "old";
  // An output path that is a directory cannot be replaced by rename.
  fs::create_directories(dir / "ro" / "a.npy");
  const CliRun r = runAttnviz(with({"--weights", (dir / "ro" / "a.npy").string()}), dir);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir / "ro")) (void)e, ++entries;
  EXPECT_EQ(entries, 2) << "a temporary file was left in " << (dir / "ro");
}

TEST_F(ComputeCli, TwoDimensionalInputsGiveOneHeadResults) {
  Tensor3 q2 = ref::randomTensor(1, 4, 6, 5), k2 = ref::randomTensor(1, 7, 6, 6),
          v2 = ref::randomTensor(1, 7, 3, 7);
  saveNpy(path("q2.npy"), q2, true);
  saveNpy(path("k2.npy"), k2, true);
  saveNpy(path("v2.npy"), v2, true);
  const CliRun r = runAttnviz({"compute", "--q", path("q2.npy"), "--k", path("k2.npy"), "--v",
                               path("v2.npy"), "--out", path("o.npy")},
                              dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const NpyArray o = readNpy(path("o.npy"));
  const ref::Result want = ref::attention(q2, k2, v2, AttentionParams{});
  ASSERT_EQ(o.data.size(), want.output.size());
  EXPECT_EQ(o.shape.back(), 3);
  EXPECT_EQ(o.shape[o.shape.size() - 2], 4);
  for (std::size_t x = 0; x < o.data.size(); ++x)
    EXPECT_TRUE(ref::close(o.data[x], want.output[x]));
}

TEST_F(ComputeCli, GpuBackendEitherWorksOrSaysWhyInOneLine) {
  const CliRun r = runAttnviz(with({"--backend", "gpu", "--weights", path("a.npy")}), dir);
  if (r.exitCode == 0) {
    const Tensor3 a = loadMaskNpy(path("a.npy")).values;
    const ref::Result want = ref::attention(q, k, v, AttentionParams{});
    for (std::size_t x = 0; x < a.size(); ++x)
      EXPECT_TRUE(ref::close(a.data[x], want.weights[x])) << x;
  } else {
    expectFailure(r, 1, "");
  }
}

}  // namespace
}  // namespace attnviz
