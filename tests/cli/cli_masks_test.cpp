// `attnviz compute` with the extended mask kinds through the real binary: results against the
// double reference, block counts against a brute-force count, and bad usage (exit 2, one line
// naming the problem).
#include "attnviz/formats/npy.h"
#include "check.h"
#include "cli.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace attnviz {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::lineCount;
using testing::runAttnviz;

class MaskCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("attnviz_maskcli_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    q = ref::randomTensor(2, 10, 8, 21, 2.0f);
    k = ref::randomTensor(2, 12, 8, 22, 2.0f);
    v = ref::randomTensor(2, 12, 4, 23);
    saveNpy(path("q.npy"), q);
    saveNpy(path("k.npy"), k);
    saveNpy(path("v.npy"), v);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::vector<std::string> with(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"compute",     "--q", path("q.npy"), "--k",
                                  path("k.npy"), "--v", path("v.npy")};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  void expectUsageError(const std::vector<std::string>& extra, const std::string& mention) {
    const CliRun r = runAttnviz(with(extra), dir);
    EXPECT_EQ(r.exitCode, 2) << "stderr: " << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << "stderr: " << r.err;
    EXPECT_NE(r.err.find(mention), std::string::npos) << "stderr: " << r.err;
    EXPECT_FALSE(fs::exists(path("a.npy")));
  }
  fs::path dir;
  Tensor3 q, k, v;
};

TEST_F(MaskCli, EveryNewKindWritesWeightsAndScoresMatchingTheReference) {
  const CliRun r = runAttnviz(
      with({"--mask", "causal", "--mask", "chunk:4", "--mask", "doc:0,0,0,1,1,1,1,1,2,2,2,2",
            "--mask-expr", "(q - k) % 3 != 2", "--softcap", "1.5", "--temperature", "0.8",
            "--weights", path("a.npy"), "--scores", path("s.npy")}),
      dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  AttentionParams p;
  p.mask.causal = true;
  p.mask.chunk = 4;
  p.mask.docs = {0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2};
  p.mask.expr = "(q - k) % 3 != 2";
  p.mask.softcap = 1.5f;
  p.temperature = 0.8f;
  const ref::Result want = ref::attention(q, k, v, p, [](int, int i, int j, int Tq, int Tk) {
    return (((i + Tk - Tq) - j) % 3 + 3) % 3 != 2;
  });
  const Tensor3 a = loadMaskNpy(path("a.npy")).values;
  const NpyArray s = readNpy(path("s.npy"));
  ASSERT_EQ(a.size(), want.weights.size());
  int masked = 0;
  for (std::size_t x = 0; x < a.size(); ++x) {
    EXPECT_TRUE(ref::close(a.data[x], want.weights[x])) << x;
    EXPECT_TRUE(ref::close(s.data[x], want.logits[x])) << x;
    masked += std::isinf(want.logits[x]);
  }
  EXPECT_GT(masked, int(a.size()) / 2);  // the kinds really cut
}

TEST_F(MaskCli, BlocksPrintsTheCountsOfABruteForceCount) {
  const CliRun r =
      runAttnviz(with({"--mask", "causal", "--mask", "chunk:6", "--blocks", "4x3"}), dir);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // T_q 10, T_k 12 (positions 2..11): tiles of 4 queries x 3 keys, counted here cell by cell.
  MaskSpec m;
  m.causal = true;
  m.chunk = 6;
  long long empty = 0, partial = 0, full = 0;
  for (int r0 = 0; r0 < 10; r0 += 4)
    for (int c0 = 0; c0 < 12; c0 += 3) {
      int yes = 0, all = 0;
      for (int i = r0; i < std::min(10, r0 + 4); ++i)
        for (int j = c0; j < c0 + 3; ++j) ++all, yes += ref::allowed(m, 0, i, j, 10, 12);
      (yes == 0 ? empty : yes == all ? full : partial)++;
    }
  char want[160];
  std::snprintf(want, sizeof want, "blocks 4x3: 12 tiles, %lld empty, %lld partial, %lld full",
                empty, partial, full);
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out << "\nwanted: " << want;
  EXPECT_NE(r.out.find("every head"), std::string::npos) << r.out;
}

TEST_F(MaskCli, ExpressionThatDoesNotParseIsBadUsage) {
  expectUsageError({"--mask-expr", "q >= (k", "--weights", path("a.npy")}, "--mask-expr");
}

TEST_F(MaskCli, UnknownVariableIsBadUsageNamingIt) {
  expectUsageError({"--mask-expr", "key <= q", "--weights", path("a.npy")},
                   "unknown variable 'key'");
}

TEST_F(MaskCli, ChunkZeroIsBadUsage) {
  expectUsageError({"--mask", "chunk:0", "--weights", path("a.npy")}, "chunk:0");
}

TEST_F(MaskCli, DocumentListOfTheWrongLengthIsBadUsage) {
  expectUsageError({"--mask", "doc:0,0,1,1", "--weights", path("a.npy")},
                   "4 document ids given, but there are 12 key positions");
}

TEST_F(MaskCli, SoftcapZeroIsBadUsage) {
  expectUsageError({"--softcap", "0", "--weights", path("a.npy")}, "--softcap 0");
  expectUsageError({"--softcap", "-2", "--weights", path("a.npy")}, "--softcap");
  expectUsageError({"--softcap", "abc", "--weights", path("a.npy")}, "--softcap abc");
}

TEST_F(MaskCli, BadBlockSizeIsBadUsage) {
  expectUsageError({"--blocks", "0", "--weights", path("a.npy")}, "--blocks 0");
}

}  // namespace
}  // namespace attnviz
