// The model the project trains and ships (assets/models/kjv-byte-2l, tools/train/train.py),
// through the real binary: its tokenizer gives UTF-8 bytes, its forward pass matches torch
// (tools/train/make_model_fixture.py), and it has the heads it is shipped to show: an induction
// head in layer >= 1, a previous-token head, and an induction head whose ablation breaks copying.
// The scores are computed here, by loops over the weights attnviz wrote.
#include "model_test_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace attnviz::testing {
namespace {

fs::path shippedModel() { return fs::path(ATTNVIZ_SHIPPED_MODEL_DIR); }
fs::path shippedFixture() { return modelDir() / "fixtures" / "kjv_byte_2l"; }

constexpr int kRepeatLen = 100;  // L: a random sequence of L bytes, seen twice

// James 1:2-4, from the held-out split (Hebrews to Revelation) that training never saw.
const char* kHeldOutText =
    "My brethren, count it all joy when ye fall into divers temptations;\n"
    "Knowing this, that the trying of your faith worketh patience.\n"
    "But let patience have her perfect work, that ye may be perfect and entire, wanting "
    "nothing.\n";

std::vector<int> repeatedRandomBytes(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids(2 * kRepeatLen);
  for (int i = 0; i < kRepeatLen; ++i) ids[i] = ids[i + kRepeatLen] = int(rng() & 0xFF);
  return ids;
}

std::string joinIds(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// attnviz model on the shipped model; returns the weights [L, H, T, T] (and the logits [T, V]).
struct Forward {
  NpyArray weights, logits;
  long long layers() const { return weights.shape[0]; }
  long long heads() const { return weights.shape[1]; }
  long long T() const { return weights.shape[2]; }
  double a(long long l, long long h, long long i, long long j) const {
    return weights.data[((l * heads() + h) * T() + i) * T() + j];
  }
};

Forward runModel(const std::vector<std::string>& input, const std::vector<std::string>& extra) {
  TempDir tmp;
  const std::string w = (tmp.path / "w.npy").string(), z = (tmp.path / "z.npy").string();
  std::vector<std::string> args = {"model", "--model", shippedModel().string()};
  args.insert(args.end(), input.begin(), input.end());
  args.insert(args.end(), extra.begin(), extra.end());
  for (const std::string& s : {std::string("--weights"), w, std::string("--logits"), z})
    args.push_back(s);
  const CliRun run = runBinary(args, tmp.path);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  Forward f;
  if (run.exitCode != 0) return f;
  f.weights = readNpy(w);
  f.logits = readNpy(z);
  EXPECT_EQ(f.weights.shape.size(), 4u);
  return f;
}

// Mean over the second copy (t = L .. 2L-1) of A[t, t-L+1]: the key after the current
// byte's first occurrence.
double inductionScore(const Forward& f, int l, int h) {
  double s = 0.0;
  for (int t = kRepeatLen; t < 2 * kRepeatLen; ++t) s += f.a(l, h, t, t - kRepeatLen + 1);
  return s / kRepeatLen;
}

// Mean over t = L .. 2L-2 of softmax(logits[t])[ids[t+1]], in double.
double copyProbability(const Forward& f, const std::vector<int>& ids) {
  const long long V = f.logits.shape[1];
  double total = 0.0;
  for (int t = kRepeatLen; t < 2 * kRepeatLen - 1; ++t) {
    const float* z = f.logits.data.data() + t * V;
    const double mx = *std::max_element(z, z + V);
    double sum = 0.0;
    for (long long v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
    total += std::exp(double(z[ids[t + 1]]) - mx) / sum;
  }
  return total / (kRepeatLen - 1);
}

struct Head {
  int layer = -1, head = -1;
  double score = -1.0;
};

// The best induction head in layer >= 1 on one repeated random sequence.
Head bestInductionHead(const Forward& f) {
  Head best;
  for (int l = 1; l < f.layers(); ++l)
    for (int h = 0; h < f.heads(); ++h)
      if (double s = inductionScore(f, l, h); s > best.score) best = {l, h, s};
  return best;
}

TEST(ShippedModel, TokenizesAnyTextToItsUtf8Bytes) {
  const std::string text = "Caf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve, tab\there.\n 'tis";
  TempDir tmp;
  const CliRun run =
      runBinary({"tokenize", "--model", shippedModel().string(), "--text", text}, tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::string want;
  for (unsigned char c : text) want += (want.empty() ? "" : " ") + std::to_string(int(c));
  EXPECT_EQ(run.out.substr(0, run.out.find_last_not_of("\n") + 1), want);
}

TEST(ShippedModel, ForwardPassMatchesTorch) {
  const nlohmann::json c =
      nlohmann::json::parse(slurp((shippedFixture() / "cases.json").string()));
  const std::vector<int> ids = c["ids"].get<std::vector<int>>();
  const Forward plain = runModel({"--text", c["text"].get<std::string>()}, {});
  expectClose(plain.weights.data, readNpy((shippedFixture() / "weights.npy").string()), 1e-5, 0,
              "weights");
  expectClose(plain.logits.data, readNpy((shippedFixture() / "logits.npy").string()), 0, 1e-4,
              "logits");
  const Forward ablated =
      runModel({"--ids", joinIds(ids)}, {"--ablate", c["ablate"].get<std::string>()});
  expectClose(ablated.logits.data, readNpy((shippedFixture() / "logits_ablate.npy").string()), 0,
              1e-4, "logits with " + c["ablate"].get<std::string>() + " ablated");
}

TEST(ShippedModel, SomeHeadInLayerOneOrLaterIsAnInductionHead) {
  for (std::uint32_t seed : {11u, 12u, 13u}) {
    const Forward f = runModel({"--ids", joinIds(repeatedRandomBytes(seed))}, {});
    ASSERT_EQ(f.T(), 2 * kRepeatLen);
    const Head best = bestInductionHead(f);
    std::cout << "seed " << seed << ": best induction head " << best.layer << ":" << best.head
              << " score " << best.score << "\n";
    EXPECT_GE(best.score, 0.5) << "seed " << seed;
  }
}

TEST(ShippedModel, SomeHeadIsAPreviousTokenHeadOnHeldOutText) {
  const Forward f = runModel({"--text", kHeldOutText}, {});
  ASSERT_EQ(f.T(), (long long)std::string(kHeldOutText).size());
  Head best;
  for (int l = 0; l < f.layers(); ++l)
    for (int h = 0; h < f.heads(); ++h) {
      double s = 0.0;
      for (long long t = 1; t < f.T(); ++t) s += f.a(l, h, t, t - 1);
      s /= double(f.T() - 1);
      if (s > best.score) best = {l, h, s};
    }
  std::cout << "best previous-token head " << best.layer << ":" << best.head << " score "
            << best.score << "\n";
  EXPECT_GE(best.score, 0.8);
}

TEST(ShippedModel, AblatingTheInductionHeadBreaksCopying) {
  const std::vector<int> ids = repeatedRandomBytes(21);
  const Forward plain = runModel({"--ids", joinIds(ids)}, {});
  const Head best = bestInductionHead(plain);
  ASSERT_GE(best.layer, 1);
  const std::string spec = std::to_string(best.layer) + ":" + std::to_string(best.head);
  const Forward ablated = runModel({"--ids", joinIds(ids)}, {"--ablate", spec});
  const double before = copyProbability(plain, ids), after = copyProbability(ablated, ids);
  std::cout << "copy probability on the second copy: " << before << "; with " << spec
            << " ablated: " << after << "\n";
  EXPECT_GE(before, 0.5);  // the model copies: chance is 1/256
  // Measured 0.987 -> 0.474: a second, weaker induction head (1:3) keeps part of the copying.
  EXPECT_LE(after, 0.6 * before);
}

}  // namespace
}  // namespace attnviz::testing
