// The fourth shipped model (assets/models/kjv-t5-align, tools/train/train_t5.py): a T5 v1.1
// encoder-decoder trained on KJV clauses enciphered letter by letter with their words reversed,
// so target word i aligns with source word n-1-i by construction. Through the real binary:
// `attnviz model --cross-weights` equals an independent float64 torch reference
// (shipped_t5_reference.py, run here), `generate --print-ids` equals the reference's
// step-by-step argmax, and the card's headline figures (card.json: exact match of greedy
// decoding, AER of the best cross head in the shifted reading) reproduce.
#include "model_test_util.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace attnviz::testing {
namespace {

fs::path shippedT5() { return fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "kjv-t5-align"; }

nlohmann::json readJson(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::vector<int> parseIds(const std::string& s) {
  std::istringstream in(s);
  std::vector<int> ids;
  for (int v; in >> v;) ids.push_back(v);
  return ids;
}

void runReference(const fs::path& out) {
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "shipped_t5_reference.py").string()) + " " +
                          shellQuote(out.string()) + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

NpyArray crossWeights(const std::string& source, const std::string& target, const fs::path& dir) {
  const std::string x = (dir / "X.npy").string();
  const CliRun run = runBinary({"model", "--model", shippedT5().string(), "--text", source,
                                "--target", target, "--cross-weights", x},
                               dir);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  return run.exitCode == 0 ? readNpy(x) : NpyArray{};
}

std::vector<int> greedy(const std::string& source, const fs::path& dir) {
  const CliRun run = runBinary(
      {"generate", "--model", shippedT5().string(), "--text", source, "-n", "24", "--print-ids"},
      dir);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  return parseIds(run.out);
}

// The cross weights of the first clauses within 1e-5 of the float64 reference, and greedy
// decoding equal to the reference's argmax at every step.
TEST(ShippedT5Cli, CrossWeightsAndGreedyMatchTheFloat64Reference) {
  TempDir tmp;
  runReference(tmp.path);
  const nlohmann::json cases = readJson(tmp.path / "cases.json");
  ASSERT_GE(cases.size(), 3u);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const std::string src = cases[c]["source"], tgt = cases[c]["target"];
    const NpyArray got = crossWeights(src, tgt, tmp.path);
    const NpyArray want = readNpy((tmp.path / ("cross_" + std::to_string(c) + ".npy")).string());
    ASSERT_EQ(got.shape, want.shape) << src;
    expectClose(got.data, want, 1e-5, 0, "cross weights of '" + src + "'");
    EXPECT_EQ(greedy(src, tmp.path), cases[c]["greedy"].get<std::vector<int>>()) << src;
  }
}

// card.json's exact-match rate (greedy ids equal to the translation's ids, EOS last) and the
// best head's AER in the shifted reading (target piece k read on decoder row k, pieces summed
// into words, each target word linked to its argmax source word), over every clause the card
// lists, within 0.005; the word grouping comes from the reference script's sentencepiece.
TEST(ShippedT5Cli, TheCardsExactMatchAndBestHeadAerHold) {
  TempDir tmp;
  runReference(tmp.path);
  const nlohmann::json card = readJson(shippedT5() / "card.json");
  const nlohmann::json words = readJson(tmp.path / "words.json");
  const int bl = card["best_shifted"]["layer"], bh = card["best_shifted"]["head"];
  int exact = 0, hits = 0, links = 0;
  for (const nlohmann::json& w : words) {
    const std::vector<int> sw = w["source_words"].get<std::vector<int>>();
    const std::vector<int> tw = w["target_words"].get<std::vector<int>>();
    exact += greedy(w["source"], tmp.path) == w["target_ids"].get<std::vector<int>>();
    const NpyArray x = crossWeights(w["source"], w["target"], tmp.path);
    ASSERT_EQ(x.shape.size(), 4u);
    const std::size_t H = x.shape[1], T = x.shape[2], S = x.shape[3];
    ASSERT_EQ(T, tw.size() + 1);
    ASSERT_EQ(S, sw.size());
    const int n = sw[S - 2] + 1, m = tw.back() + 1;
    std::vector<double> agg(std::size_t(m) * n, 0.0);
    for (std::size_t k = 0; k < tw.size(); ++k)
      for (std::size_t j = 0; j < S; ++j)
        if (sw[j] >= 0)
          agg[std::size_t(tw[k]) * n + sw[j]] +=
              x.data[((std::size_t(bl) * H + bh) * T + k) * S + j];
    for (int i = 0; i < m; ++i) {
      int arg = 0;
      for (int j = 1; j < n; ++j)
        if (agg[std::size_t(i) * n + j] > agg[std::size_t(i) * n + arg]) arg = j;
      hits += arg == n - 1 - i;
    }
    links += m;
  }
  const double em = double(exact) / words.size(), aer = 1.0 - double(hits) / links;
  EXPECT_NEAR(em, card["exact_match"].get<double>(), 0.005);
  EXPECT_NEAR(aer, card["best_shifted"]["aer"].get<double>(), 0.005);
  std::printf("exact match %.3f, layer %d head %d AER %.4f over %d links\n", em, bl, bh, aer,
              links);
}

}  // namespace
}  // namespace attnviz::testing
