// `attnviz score` through the real binary: each token's NLL, with the whole context and with
// StreamingLLM's cache (sinks + window, cache positions, RoPE at each key's slot), against the
// float64 torch reference of the same policy (score_reference.py) on the shipped LLaMA-layout
// model and a random GQA fixture; the StreamingLLM effect on the shipped model; the refusals.
#include "model_test_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace attnviz::testing {
namespace {

fs::path shippedLlama() { return fs::path(ATTNVIZ_SOURCE_DIR) / "assets/models/kjv-sp-llama"; }

const char* kText =
    "In the beginning God created the heaven and the earth. And the earth was without form, and "
    "void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face "
    "of the waters.";

std::string idsOf(const fs::path& model, const TempDir& dir) {
  const CliRun r = runBinary({"tokenize", "--model", model.string(), "--text", kText}, dir.path);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  std::istringstream in(r.out);
  std::string ids, t;
  while (in >> t) ids += (ids.empty() ? "" : ",") + t;
  return ids;
}

double mean(const NpyArray& a) {
  return std::accumulate(a.data.begin(), a.data.end(), 0.0) / double(a.data.size());
}

// attnviz score vs the reference for each policy ({} dense, {S, W} streaming); returns the means.
std::vector<double> expectPoliciesMatch(const fs::path& model, const std::string& ids,
                                        const std::vector<std::vector<int>>& policies) {
  TempDir dir;
  std::vector<double> means;
  for (const auto& pol : policies) {
    const std::string name = pol.empty() ? "dense" : std::to_string(pol[0]) + "+" + std::to_string(pol[1]);
    SCOPED_TRACE(model.filename().string() + " " + name);
    std::vector<std::string> args{"score", "--model", model.string(), "--ids", ids, "--out",
                                  (dir.path / "got.npy").string()};
    std::string extra;
    if (!pol.empty()) {
      args.insert(args.end(), {"--kv-sinks", std::to_string(pol[0]), "--kv-window",
                               std::to_string(pol[1])});
      extra = " " + std::to_string(pol[0]) + " " + std::to_string(pol[1]);
    }
    const CliRun run = runBinary(args, dir.path);
    EXPECT_EQ(run.exitCode, 0) << run.err;
    const std::string cmd = ATTNVIZ_PYTHON " " +
                            shellQuote((modelDir() / "score_reference.py").string()) + " " +
                            shellQuote(model.string()) + " " +
                            shellQuote((dir.path / "want.npy").string()) + " " + ids + extra +
                            " >/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const NpyArray got = readNpy((dir.path / "got.npy").string());
    const NpyArray want = readNpy((dir.path / "want.npy").string());
    EXPECT_EQ(got.shape, want.shape);
    expectClose(got.data, want, 1e-4, 0, name);
    // The printed mean is the file's.
    EXPECT_NE(run.out.find("mean NLL"), std::string::npos) << run.out;
    const double printed = std::strtod(run.out.c_str() + run.out.find("mean NLL") + 9, nullptr);
    EXPECT_NEAR(printed, mean(got), 1e-5);
    means.push_back(mean(want));
  }
  return means;
}

TEST(Score, DenseAndStreamingMatchTheReferenceOnTheShippedLlama) {
  TempDir dir;
  const std::string ids = idsOf(shippedLlama(), dir);
  const std::vector<double> m =
      expectPoliciesMatch(shippedLlama(), ids, {{}, {4, 8}, {0, 12}, {1, 20}, {4, 1000}});
  ASSERT_EQ(m.size(), 5u);
  // A cache as large as the text is the dense pass.
  EXPECT_NEAR(m[4], m[0], 1e-5);
  // StreamingLLM's finding on the shipped model: a window alone (12 keys) loses the first tokens
  // and the NLL jumps; 4 sinks + 8 recent (the same 12 keys) stay near the dense pass.
  std::printf("[ measured ] kjv-sp-llama mean NLL: dense %.4f, 4 sinks + 8 %.4f, window 12 %.4f\n",
              m[0], m[1], m[2]);
  EXPECT_GT(m[2] - m[1], 0.3);
}

TEST(Score, StreamingMatchesTheReferenceOnARandomGqaModel) {
  const fs::path model = fixture("llama/llama_gqa");
  const auto cases = nlohmann::json::parse(slurp((model / "cases.json").string()));
  std::string ids;
  for (int id : cases["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  expectPoliciesMatch(model, ids, {{}, {2, 3}, {0, 4}});
}

TEST(Score, ResidualEditsInsideThePassMatchTheReference) {
  TempDir dir;
  const std::string ids = idsOf(shippedLlama(), dir);
  for (const std::vector<std::string>& edits :
       std::vector<std::vector<std::string>>{{"1:0:37:zero"}, {"1:all:37:mean", "2:3:5:zero"}}) {
    SCOPED_TRACE(edits[0]);
    std::vector<std::string> args{"score", "--model", shippedLlama().string(), "--ids", ids,
                                  "--out", (dir.path / "got.npy").string()};
    std::string extra = " edit";
    for (const std::string& e : edits) {
      args.insert(args.end(), {"--residual-edit", e});
      extra += " " + e;
    }
    const CliRun run = runBinary(args, dir.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const std::string cmd = ATTNVIZ_PYTHON " " +
                            shellQuote((modelDir() / "score_reference.py").string()) + " " +
                            shellQuote(shippedLlama().string()) + " " +
                            shellQuote((dir.path / "want.npy").string()) + " " + ids + extra +
                            " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const NpyArray got = readNpy((dir.path / "got.npy").string());
    const NpyArray want = readNpy((dir.path / "want.npy").string());
    EXPECT_EQ(got.shape, want.shape);
    expectClose(got.data, want, 1e-4, 0, edits[0]);
  }
  // The edit moved the loss (it is not ignored).
  const CliRun plain = runBinary({"score", "--model", shippedLlama().string(), "--ids", ids}, dir.path);
  const CliRun edited = runBinary({"score", "--model", shippedLlama().string(), "--ids", ids,
                                   "--residual-edit", "1:0:37:zero"}, dir.path);
  EXPECT_NE(plain.out, edited.out);
}

// `generate --kv-sinks S --kv-window W`: the same cache, one token at a time, so the text runs
// past the model's 256 positions; each greedy token is the reference's argmax under that cache
// (up to the first near-tie, where float32 and float64 may part).
TEST(Score, GenerationUnderTheStreamingCacheIsTheReferencesGreedyPastTheContext) {
  TempDir dir;
  const std::string ids = idsOf(shippedLlama(), dir);
  const int prompt = int(std::count(ids.begin(), ids.end(), ',')) + 1;
  const CliRun plain = runBinary({"generate", "--model", shippedLlama().string(), "--ids", ids,
                                  "-n", "240", "--print-ids"}, dir.path);
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  const CliRun run = runBinary({"generate", "--model", shippedLlama().string(), "--ids", ids,
                                "-n", "240", "--print-ids", "--kv-sinks", "4", "--kv-window", "60"},
                               dir.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<std::string> gen;
  {
    std::istringstream in(run.out);
    std::string t;
    while (in >> t) gen.push_back(t);
  }
  std::istringstream pin(plain.out);
  int plainCount = 0;
  for (std::string t; pin >> t;) ++plainCount;
  // The dense cache stops at the context; the streaming one runs on.
  EXPECT_EQ(plainCount, 256 - prompt);
  ASSERT_EQ(int(gen.size()), 240);
  std::string all = ids;
  for (const std::string& t : gen) all += "," + t;
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "score_reference.py").string()) + " " +
                          shellQuote(shippedLlama().string()) + " " +
                          shellQuote((dir.path / "ref.npy").string()) + " " + all +
                          " 4 60 >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const NpyArray want = readNpy((dir.path / "ref_argmax.npy").string());  // [T - 1, 2]
  int checked = 0;
  for (int s = 0; s < int(gen.size()); ++s) {
    const int t = prompt - 1 + s;  // the step after token t chose gen[s]
    const double best = want.data[std::size_t(t) * 2], lead = want.data[std::size_t(t) * 2 + 1];
    if (lead < 1e-3) break;
    EXPECT_EQ(std::stoi(gen[std::size_t(s)]), int(best)) << "generated token " << s;
    ++checked;
  }
  EXPECT_GE(checked, 40);
  std::printf("[ measured ] %d of 240 streaming greedy tokens checked against the reference\n",
              checked);
}

// GPT-2's learned positions are added to the embedding before the K projection: under the cache
// each key keeps the position it was written at and the query takes its index in the text, as
// the float64 reference's dense pass with the sink-and-window mask computes it. A text past the
// learned positions is refused under the cache, and generation stops there.
TEST(Score, LearnedPositionsKeepTheirPlacesUnderTheCache) {
  const fs::path model = fixture("f32_prefix_tied_gelu_new");  // 64 positions
  const auto cases = nlohmann::json::parse(slurp((model / "cases.json").string()));
  std::string ids;
  int n = 0;
  for (int id : cases["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id), ++n;
  ASSERT_GT(n, 20);
  expectPoliciesMatch(model, ids, {{2, 5}, {0, 6}, {1, 12}});
  TempDir dir;
  const CliRun past = runBinary({"score", "--model", model.string(), "--ids", ids + "," + ids,
                                 "--kv-sinks", "2", "--kv-window", "5"}, dir.path);
  EXPECT_EQ(past.exitCode, 1) << past.err;
  EXPECT_NE(past.err.find("position"), std::string::npos) << past.err;
  const CliRun gen = runBinary({"generate", "--model", model.string(), "--ids", ids, "-n", "60",
                                "--print-ids", "--verbose", "--kv-sinks", "2", "--kv-window", "5"},
                               dir.path);
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  std::istringstream in(gen.out);
  int made = 0;
  for (std::string t; in >> t;) ++made;
  EXPECT_EQ(made, 64 - n) << gen.out;
  EXPECT_NE(gen.err.find("context is full"), std::string::npos) << gen.err;
}

// A text longer than the context is scored through the cache from --text as from its ids: the
// same NLLs, each the float64 reference's under the same cache; without the cache it is refused.
TEST(Score, TextPastTheContextIsScoredUnderTheCacheAsItsIds) {
  TempDir dir;
  const std::string m = shippedLlama().string();
  std::string text;
  for (int i = 0; i < 6; ++i) text += std::string(i ? " " : "") + kText;
  std::string ids;
  {
    const CliRun t = runBinary({"tokenize", "--model", m, "--text", text}, dir.path);
    ASSERT_EQ(t.exitCode, 0) << t.err;
    std::istringstream in(t.out);
    for (std::string x; in >> x;) ids += (ids.empty() ? "" : ",") + x;
  }
  ASSERT_GT(std::count(ids.begin(), ids.end(), ',') + 1, 256) << "the text must pass the context";
  const CliRun fromText = runBinary({"score", "--model", m, "--text", text, "--kv-sinks", "4",
                                     "--kv-window", "8", "--out", (dir.path / "text.npy").string()},
                                    dir.path);
  ASSERT_EQ(fromText.exitCode, 0) << fromText.err;
  const CliRun fromIds = runBinary({"score", "--model", m, "--ids", ids, "--kv-sinks", "4",
                                    "--kv-window", "8", "--out", (dir.path / "ids.npy").string()},
                                   dir.path);
  ASSERT_EQ(fromIds.exitCode, 0) << fromIds.err;
  EXPECT_EQ(fromText.out, fromIds.out);
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "score_reference.py").string()) + " " +
                          shellQuote(m) + " " + shellQuote((dir.path / "want.npy").string()) +
                          " " + ids + " 4 8 >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const NpyArray got = readNpy((dir.path / "text.npy").string());
  const NpyArray want = readNpy((dir.path / "want.npy").string());
  EXPECT_EQ(got.shape, want.shape);
  expectClose(got.data, want, 1e-4, 0, "text past the context, 4 sinks + 8");
  // The dense pass still needs the text to fit.
  const CliRun dense = runBinary({"score", "--model", m, "--text", text}, dir.path);
  EXPECT_EQ(dense.exitCode, 1);
  EXPECT_NE(dense.err.find("positions"), std::string::npos) << dense.err;
}

TEST(Score, RefusalsFollowTheContract) {
  TempDir dir;
  const std::string m = shippedLlama().string();
  auto rc = [&](const std::vector<std::string>& a) { return runBinary(a, dir.path); };
  EXPECT_EQ(rc({"score", "--model", m, "--text", "In the", "--kv-sinks", "4"}).exitCode, 2);
  EXPECT_EQ(rc({"score", "--model", m, "--text", "In the", "--kv-sinks", "4", "--kv-window", "0"})
                .exitCode,
            2);
  const CliRun one = rc({"score", "--model", m, "--ids", "1", "--out", (dir.path / "x.npy").string()});
  EXPECT_EQ(one.exitCode, 1) << one.err;
  EXPECT_FALSE(fs::exists(dir.path / "x.npy"));
  const CliRun gone = rc({"score", "--model", (dir.path / "nope").string(), "--text", "a b"});
  EXPECT_EQ(gone.exitCode, 1);
  EXPECT_NE(gone.err.find("nope"), std::string::npos) << gone.err;
}

}  // namespace
}  // namespace attnviz::testing
