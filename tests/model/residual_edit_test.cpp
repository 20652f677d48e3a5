// `attnviz model --residual-edit L:P:D:zero|mean`: residual-stream values set inside the pass
// (massive activations, Sun et al. 2024), against llama_reference.py's float64 forward with the
// same edits, on the shipped LLaMA-layout model; the refusals.
#include "model_test_util.h"

#include <cstdlib>

namespace attnviz::testing {
namespace {

fs::path shippedLlama() { return fs::path(ATTNVIZ_SOURCE_DIR) / "assets/models/kjv-sp-llama"; }
const char* kText = "In the beginning God created the heaven and the earth.";

TEST(ResidualEdit, LogitsMatchTheReferenceWithTheSameEdits) {
  TempDir dir;
  const std::string m = shippedLlama().string();
  // The largest |value| the first layer writes, at the first token: the dimension to edit.
  const CliRun plain = runBinary({"model", "--model", m, "--text", kText, "--residual",
                                  (dir.path / "r.npy").string(), "--logits",
                                  (dir.path / "z0.npy").string()},
                                 dir.path);
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  const NpyArray r = readNpy((dir.path / "r.npy").string());  // [L + 1, T, d]
  const int T = int(r.shape[1]), d = int(r.shape[2]);
  int D = 0;
  for (int k = 1; k < d; ++k)
    if (std::fabs(r.data[std::size_t(1) * T * d + k]) > std::fabs(r.data[std::size_t(1) * T * d + D]))
      D = k;
  const std::vector<std::vector<std::string>> edits = {
      {"1:0:" + std::to_string(D) + ":zero"},
      {"0:all:" + std::to_string(D) + ":mean", "2:3:5:zero"},
      {"1:6:" + std::to_string(D) + ":mean"},
  };
  std::string ids;
  {
    const CliRun t = runBinary({"tokenize", "--model", m, "--text", kText}, dir.path);
    std::istringstream in(t.out);
    for (std::string x; in >> x;) ids += (ids.empty() ? "" : ",") + x;
  }
  for (const auto& e : edits) {
    SCOPED_TRACE(e[0]);
    std::vector<std::string> args{"model", "--model", m, "--text", kText, "--logits",
                                  (dir.path / "z.npy").string()};
    std::string refArgs;
    for (const std::string& x : e) {
      args.insert(args.end(), {"--residual-edit", x});
      refArgs += " " + x;
    }
    const CliRun run = runBinary(args, dir.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const std::string cmd = ATTNVIZ_PYTHON " " +
                            shellQuote((modelDir() / "residual_edit_reference.py").string()) + " " +
                            shellQuote(m) + " " + shellQuote((dir.path / "want.npy").string()) +
                            " " + ids + refArgs + " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const NpyArray got = readNpy((dir.path / "z.npy").string());
    const NpyArray want = readNpy((dir.path / "want.npy").string());
    const NpyArray before = readNpy((dir.path / "z0.npy").string());
    expectClose(got.data, want, 0, 1e-4, e[0]);
    // The edit changed something: a test of an edit that does nothing would pass anyway.
    double moved = 0;
    for (std::size_t k = 0; k < got.data.size(); ++k)
      moved = std::max(moved, double(std::fabs(got.data[k] - before.data[k])));
    EXPECT_GT(moved, 1e-2);
  }
}

// A mean edit is a prefix mean, as head mean ablation's: position t takes the mean over positions
// 0..t, so the logits of a prefix of the text are the same rows of the whole text's logits (the
// mean over every position made each row read the tokens after it).
TEST(ResidualEdit, AMeanNeverReadsTheTokensAfterAPosition) {
  TempDir dir;
  const std::string m = shippedLlama().string();
  std::vector<std::string> ids;
  {
    const CliRun t = runBinary({"tokenize", "--model", m, "--text", kText}, dir.path);
    std::istringstream in(t.out);
    for (std::string x; in >> x;) ids.push_back(x);
  }
  const int P = 7;
  ASSERT_GT(int(ids.size()), P + 3);
  auto logits = [&](const std::vector<std::string>& part, const char* file) {
    std::string list;
    for (const std::string& x : part) list += (list.empty() ? "" : ",") + x;
    const CliRun r = runBinary({"model", "--model", m, "--ids", list, "--residual-edit",
                                "1:all:37:mean", "--residual-edit", "0:3:37:mean", "--logits",
                                (dir.path / file).string()},
                               dir.path);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return readNpy((dir.path / file).string());
  };
  const NpyArray whole = logits(ids, "whole.npy");
  const NpyArray prefix = logits({ids.begin(), ids.begin() + P + 1}, "prefix.npy");
  ASSERT_EQ(prefix.shape[0], std::size_t(P + 1));
  const std::size_t V = prefix.shape[1];
  double worst = 0;
  for (std::size_t k = 0; k < prefix.data.size(); ++k)
    worst = std::max(worst, double(std::fabs(prefix.data[k] - whole.data[k])));
  EXPECT_LT(worst, 1e-4) << "the first " << P + 1 << " rows of " << V
                         << " logits read tokens after them";
}

TEST(ResidualEdit, BadEditsAreUsageErrors) {
  TempDir dir;
  const std::string m = shippedLlama().string();
  for (const char* bad : {"1:0:5", "1:0:5:half", "9:0:5:zero", "1:0:99999:zero", "1:500:5:zero",
                          "x:0:5:zero"}) {
    const CliRun r = runBinary({"model", "--model", m, "--text", kText, "--residual-edit", bad},
                               dir.path);
    EXPECT_EQ(r.exitCode, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--residual-edit"), std::string::npos) << r.err;
  }
  // Generation refuses an edit (a mean is over a pass's positions): not a crash.
}

}  // namespace
}  // namespace attnviz::testing
