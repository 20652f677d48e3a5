// `attnviz qk` and `attnviz compose` (docs/why-here.md) through the real binary, against
// qk_reference.py's float64 torch split and composition scores on random-init checkpoints of
// gpt2, llama, qwen2, gemma2, gemma3_text, qwen3, phi3 and olmo2 (made at test time); the
// families it refuses; bad indices; and the shipped LLaMA's split adding up to its score.
#include "model_test_util.h"
#include "reference_script.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>
#include <set>
#include <sstream>

namespace attnviz::testing {
namespace {

constexpr double kEntryRel = 1e-4;   // each C entry, relative to max |C|
constexpr double kScoreRel = 1e-5;   // sum C and the score, relative to max(|score|, 1)
constexpr double kPrinted = 5e-7;    // six decimals
constexpr double kComposeAbs = 1e-5;

const ReferenceScript& reference() {
  static const ReferenceScript r("qk_reference.py");
  return r;
}

std::string joinIds(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> f;
  std::string part;
  std::istringstream in(line);
  while (std::getline(in, part, '\t')) f.push_back(part);
  return f;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// What `attnviz qk` printed.
struct Printed {
  double score = NAN, sum = NAN;
  std::vector<std::vector<std::string>> pairs, q, k;
};

Printed parse(const std::string& out) {
  Printed p;
  for (const std::string& line : lines(out)) {
    const std::vector<std::string> f = splitTabs(line);
    if (f.empty()) continue;
    if (f[0] == "score" && f.size() == 4 && f[2] == "sum") {
      p.score = std::stod(f[1]);
      p.sum = std::stod(f[3]);
    } else if (f[0] == "pair") {
      p.pairs.push_back(f);
    } else if (f[0] == "q") {
      p.q.push_back(f);
    } else if (f[0] == "k") {
      p.k.push_back(f);
    } else {
      ADD_FAILURE() << "unexpected line: " << line;
    }
  }
  return p;
}

// The indices of the n largest |values| (ties: lower index).
std::vector<int> largest(const std::vector<double>& v, int n) {
  std::vector<int> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  order.resize(std::min<std::size_t>(order.size(), std::size_t(n)));
  return order;
}

// `attnviz qk` on case c's model file or folder `model`, with the case's interventions.
std::vector<std::string> qkArgs(const nlohmann::json& c, const std::string& model) {
  std::vector<std::string> args = {
      "qk", "--model", model, "--ids", joinIds(c["ids"].get<std::vector<int>>()), "--layer",
      std::to_string(c["layer"].get<int>()), "--head", std::to_string(c["head"].get<int>()),
      "--query", std::to_string(c["query"].get<int>()), "--key",
      std::to_string(c["key"].get<int>())};
  for (const auto& a : c["ablate"]) args.insert(args.end(), {"--ablate", a.get<std::string>()});
  if (c["temperature"].get<double>() != 1.0)
    args.insert(args.end(), {"--temperature", std::to_string(c["temperature"].get<double>())});
  if (!c["mask"].is_null()) args.insert(args.end(), {"--mask", c["mask"].get<std::string>()});
  return args;
}

// The largest |entry| of an array.
double maxAbs(const NpyArray& a) {
  double m = 0.0;
  for (float v : a.data) m = std::max(m, double(std::fabs(v)));
  return m;
}

double maxAbsDiff(const NpyArray& a, const NpyArray& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.data.size() && i < b.data.size(); ++i)
    worst = std::max(worst, std::fabs(double(a.data[i]) - double(b.data[i])));
  return worst;
}

class QkReference : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(reference().ok) << "qk_reference.py failed"; }
  static fs::path root() { return reference().tmp.path; }
  static const nlohmann::json& cases() { return reference().cases["cases"]; }
};

// Every case: C within 1e-4 of max |C| entry by entry, the names in order, the printed score
// and sum equal to the reference's score, and the same largest pairs, rows and columns.
TEST_F(QkReference, SplitMatchesTheTorchReference) {
  ASSERT_GE(cases().size(), 14u);
  std::set<std::string> families;
  for (const auto& c : cases()) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    families.insert(c["family"].get<std::string>());
    const std::string cOut = (root() / "c.npy").string(), namesOut = (root() / "names.txt").string();
    const int top = 6;
    std::vector<std::string> args = qkArgs(c, (root() / c["dir"].get<std::string>()).string());
    args.insert(args.end(), {"--top", std::to_string(top), "--out", cOut, "--names", namesOut});
    const CliRun run = runBinary(args, root());
    ASSERT_EQ(run.exitCode, 0) << run.err;

    const std::vector<std::string> names = c["names"].get<std::vector<std::string>>();
    EXPECT_EQ(lines(slurp(namesOut)), names);
    const NpyArray got = readNpy(cOut);
    const NpyArray want = readNpy((root() / c["c"].get<std::string>()).string());
    const long long n = static_cast<long long>(names.size());
    ASSERT_EQ(got.shape, (std::vector<long long>{n, n}));
    ASSERT_EQ(want.shape, got.shape);
    const double maxC = maxAbs(want), worst = maxAbsDiff(got, want);
    EXPECT_LE(worst, kEntryRel * maxC) << "max |C| " << maxC;

    const double score = c["score"].get<double>();
    const Printed p = parse(run.out);
    const double tol = kScoreRel * std::max(std::fabs(score), 1.0) + kPrinted;
    EXPECT_NEAR(p.score, score, tol);
    EXPECT_NEAR(p.sum, score, tol);
    std::cout << "[ errors   ] " << name << ": max |C - ref| " << worst << " (max |C| " << maxC
              << "), score " << p.score << " vs " << score << ", sum " << p.sum << "\n";

    // The largest pairs, row sums and column sums, as the reference's C orders them.
    std::vector<double> ref(want.data.begin(), want.data.end()), rows(n, 0.0), cols(n, 0.0);
    for (long long a = 0; a < n; ++a)
      for (long long b = 0; b < n; ++b) rows[a] += ref[a * n + b], cols[b] += ref[a * n + b];
    const std::vector<int> pairs = largest(ref, top);
    ASSERT_EQ(p.pairs.size(), pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      ASSERT_EQ(p.pairs[i].size(), 4u);
      EXPECT_EQ(p.pairs[i][1], names[pairs[i] / n]) << "pair " << i;
      EXPECT_EQ(p.pairs[i][2], names[pairs[i] % n]) << "pair " << i;
      EXPECT_NEAR(std::stod(p.pairs[i][3]), ref[pairs[i]], kEntryRel * maxC + kPrinted);
    }
    for (const auto& [side, sums] : {std::pair{&p.q, &rows}, std::pair{&p.k, &cols}}) {
      const std::vector<int> order = largest(*sums, top);
      ASSERT_EQ(side->size(), order.size());
      for (std::size_t i = 0; i < order.size(); ++i) {
        ASSERT_EQ((*side)[i].size(), 3u);
        EXPECT_EQ((*side)[i][1], names[order[i]]);
        EXPECT_NEAR(std::stod((*side)[i][2]), (*sums)[order[i]], 1e-4 * maxC + kPrinted);
      }
    }
  }
  EXPECT_EQ(families, (std::set<std::string>{"gpt2", "llama", "qwen2", "gemma2", "gemma3_text",
                                             "qwen3", "phi3", "olmo2"}));
}

// compose --kind q|k|v equals the reference's full d x d circuits within 1e-5, NaN exactly where
// l1 >= l2.
TEST_F(QkReference, ComposeMatchesTheTorchReference) {
  std::set<std::string> dirs;
  for (const auto& c : cases()) {
    const std::string dir = c["dir"].get<std::string>();
    if (!dirs.insert(dir).second) continue;
    for (const char* kind : {"q", "k", "v"}) {
      SCOPED_TRACE(dir + " " + kind);
      const std::string out = (root() / "s.npy").string();
      const CliRun run = runBinary(
          {"compose", "--model", (root() / dir).string(), "--kind", kind, "--out", out}, root());
      ASSERT_EQ(run.exitCode, 0) << run.err;
      // One line: what random weights of these shapes score, against the reference's own
      // Monte Carlo estimate from full d x d products (64 draws here, 2000 there: within four
      // standard errors of the difference).
      const std::vector<std::string> printed = lines(run.out);
      ASSERT_EQ(printed.size(), 1u) << run.out;
      const std::vector<std::string> f = splitTabs(printed[0]);
      ASSERT_EQ(f.size(), 3u) << run.out;
      EXPECT_EQ(f[0], "random");
      const double mean = std::stod(f[1]), sd = std::stod(f[2]);
      const double refMean = c["random_mean"].get<double>(), refSd = c["random_sd"].get<double>();
      const double se = std::sqrt(refSd * refSd / 64.0 + refSd * refSd /
                                                              c["random_draws"].get<double>());
      EXPECT_NEAR(mean, refMean, 4.0 * se) << "reference sd " << refSd;
      EXPECT_NEAR(sd, refSd, 0.35 * refSd);
      std::cout << "[ random   ] " << dir << ": " << mean << " +- " << sd << ", reference "
                << refMean << " +- " << refSd << "\n";
      const NpyArray got = readNpy(out);
      const NpyArray want =
          readNpy((root() / c[std::string("compose_") + kind].get<std::string>()).string());
      ASSERT_EQ(got.shape, want.shape);
      ASSERT_EQ(got.shape.size(), 4u);
      const long long L = got.shape[0], H = got.shape[1];
      double worst = 0.0;
      int values = 0;
      for (long long l2 = 0; l2 < L; ++l2)
        for (long long h2 = 0; h2 < H; ++h2)
          for (long long l1 = 0; l1 < L; ++l1)
            for (long long h1 = 0; h1 < H; ++h1) {
              const std::size_t i = std::size_t(((l2 * H + h2) * L + l1) * H + h1);
              if (l1 >= l2) {
                EXPECT_TRUE(std::isnan(got.data[i])) << i;
                continue;
              }
              ASSERT_TRUE(std::isfinite(got.data[i])) << i;
              EXPECT_GT(got.data[i], 0.0f);
              EXPECT_LT(got.data[i], 1.0f);
              worst = std::max(worst, std::fabs(double(got.data[i]) - double(want.data[i])));
              ++values;
            }
      EXPECT_GT(values, 0);
      EXPECT_LE(worst, kComposeAbs);
      std::cout << "[ errors   ] compose " << dir << " " << kind << ": " << worst << "\n";
    }
  }
}

// The GGUF twins: F32 splits as its folder does (C within 1e-4 of max |C|, the score within
// 1e-5); Q8_0 kept as stored (--max-memory 1K: each layer converted as the split reads it) adds
// up to its own score.
TEST_F(QkReference, GgufTwinsSplitAsTheirFolders) {
  std::set<std::string> twins;
  for (const auto& c : cases()) {
    if (c["gguf"].is_null()) continue;
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    twins.insert(c["dir"].get<std::string>());
    const std::string cOut = (root() / "c.npy").string();
    std::vector<std::string> args = qkArgs(c, (root() / c["gguf"].get<std::string>()).string());
    args.insert(args.end(), {"--out", cOut});
    const CliRun run = runBinary(args, root());
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const NpyArray got = readNpy(cOut);
    const NpyArray want = readNpy((root() / c["c"].get<std::string>()).string());
    ASSERT_EQ(got.shape, want.shape);
    EXPECT_LE(maxAbsDiff(got, want), kEntryRel * maxAbs(want));
    const double score = c["score"].get<double>();
    const Printed p = parse(run.out);
    EXPECT_NEAR(p.score, score, kScoreRel * std::max(std::fabs(score), 1.0) + kPrinted);
    EXPECT_NEAR(p.sum, score, kScoreRel * std::max(std::fabs(score), 1.0) + kPrinted);

    std::vector<std::string> q8 = qkArgs(c, (root() / c["gguf_q8"].get<std::string>()).string());
    q8.insert(q8.end(), {"--max-memory", "1K"});
    const CliRun stored = runBinary(q8, root());
    ASSERT_EQ(stored.exitCode, 0) << stored.err;
    const Printed s = parse(stored.out);
    EXPECT_NEAR(s.sum, s.score, kScoreRel * std::max(std::fabs(s.score), 1.0) + 2 * kPrinted);
    EXPECT_NE(s.score, p.score);  // the Q8_0 weights are not the F32 ones
  }
  EXPECT_EQ(twins.size(), 6u);
}

fs::path shipped(const std::string& name) {
  return fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / name;
}

// Encoders, encoder-decoders and image models: exit 1 with one line saying why the split is not
// exact.
TEST_F(QkReference, RefusesFamiliesTheSplitIsNotExactFor) {
  struct Case {
    const char* model;
    const char* why;
  };
  for (const Case& c : {Case{"kjv-wp-bert", "post-norm"}, Case{"kjv-t5-align", "encoder-decoder"}}) {
    SCOPED_TRACE(c.model);
    const std::string model = shipped(c.model).string();
    const CliRun qk = runBinary({"qk", "--model", model, "--ids", "2,5,7,9", "--layer", "0",
                                 "--head", "0", "--query", "2", "--key", "1"},
                                root());
    EXPECT_EQ(qk.exitCode, 1) << qk.err;
    EXPECT_EQ(lineCount(qk.err), 1) << qk.err;
    EXPECT_NE(qk.err.find(c.why), std::string::npos) << qk.err;
    EXPECT_NE(qk.err.find(model), std::string::npos) << qk.err;
    EXPECT_EQ(qk.out, "");
    const std::string out = (root() / "refused.npy").string();
    const CliRun compose =
        runBinary({"compose", "--model", model, "--kind", "q", "--out", out}, root());
    EXPECT_EQ(compose.exitCode, 1) << compose.err;
    EXPECT_EQ(lineCount(compose.err), 1) << compose.err;
    EXPECT_NE(compose.err.find(c.why), std::string::npos) << compose.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // An image model's folder (refused before its weights are read).
  const fs::path vit = root() / "vit";
  fs::create_directories(vit);
  std::ofstream(vit / "config.json") << R"({"model_type": "vit", "hidden_size": 32})";
  const CliRun image = runBinary({"qk", "--model", vit.string(), "--ids", "1,2", "--layer", "0",
                                  "--head", "0", "--query", "1", "--key", "0"},
                                 root());
  EXPECT_EQ(image.exitCode, 1) << image.err;
  EXPECT_EQ(lineCount(image.err), 1) << image.err;
  EXPECT_NE(image.err.find("image model"), std::string::npos) << image.err;
}

// Indices outside the model or the text, and bad option values: exit 2, one line, no output.
TEST_F(QkReference, BadIndicesAreUsageErrors) {
  const auto& c = cases()[0];  // gpt2: 3 layers, 4 heads, 14 tokens
  const std::string model = (root() / c["dir"].get<std::string>()).string();
  const std::string ids = joinIds(c["ids"].get<std::vector<int>>());
  const std::string out = (root() / "bad.npy").string();
  auto qk = [&](const std::string& layer, const std::string& head, const std::string& query,
                const std::string& key) {
    return runBinary({"qk", "--model", model, "--ids", ids, "--layer", layer, "--head", head,
                      "--query", query, "--key", key, "--out", out},
                     root());
  };
  for (const auto& [args, what] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"3", "0", "1", "0"}, "--layer 3"},
           {{"0", "4", "1", "0"}, "--head 4"},
           {{"0", "0", "14", "0"}, "--query 14"},
           {{"0", "0", "1", "20"}, "--key 20"},
           {{"x", "0", "1", "0"}, "--layer"},
           {{"0", "0", "-1", "0"}, "--query"}}) {
    SCOPED_TRACE(what);
    const CliRun r = qk(args[0], args[1], args[2], args[3]);
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  const CliRun kind = runBinary({"compose", "--model", model, "--kind", "o", "--out", out}, root());
  EXPECT_EQ(kind.exitCode, 2) << kind.err;
  EXPECT_EQ(lineCount(kind.err), 1) << kind.err;
  const CliRun missing = runBinary({"qk", "--model", model, "--ids", ids, "--layer", "1"}, root());
  EXPECT_EQ(missing.exitCode, 2) << missing.err;
}

// The shipped LLaMA (trained): the split of a cell adds up to the pass's score, over the
// components the contract lists.
TEST(QkShipped, LlamaSplitAddsUpToTheScore) {
  TempDir tmp;
  const std::string names = (tmp.path / "names.txt").string();
  const CliRun r = runBinary({"qk", "--model", shipped("kjv-sp-llama").string(), "--text",
                              "In the beginning God created the heaven and the earth.", "--layer",
                              "1", "--head", "0", "--query", "8", "--key", "3", "--names", names},
                             tmp.path);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const Printed p = parse(r.out);
  EXPECT_NEAR(p.sum, p.score, kScoreRel * std::max(std::fabs(p.score), 1.0) + 2 * kPrinted);
  EXPECT_EQ(p.pairs.size(), 10u);
  EXPECT_EQ(p.q.size(), 10u);
  EXPECT_EQ(p.k.size(), 10u);
  const std::vector<std::string> n = lines(slurp(names));
  ASSERT_GE(n.size(), 4u);
  EXPECT_EQ(n.front(), "embed");
  EXPECT_EQ(n[1], "L0H0");
  EXPECT_EQ(n[n.size() - 2], "bias");
  EXPECT_EQ(n.back(), "const");
}

}  // namespace
}  // namespace attnviz::testing
