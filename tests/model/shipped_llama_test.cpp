// The second shipped model (assets/models/kjv-sp-llama, tools/train/train_llama.py): a LLaMA
// layout (RMSNorm, RoPE, gated SiLU, 8 query heads over 2 KV heads) with a SentencePiece
// vocabulary, opened as an ordinary Hugging Face folder. It has the heads it is shipped to show,
// measured here through the pass: a previous-token head on text it was not trained on, an
// induction head in a later layer on random ids repeated twice, whose ablation lowers the copied
// token's probability; and its tokenizer.json and tokenizer.model agree.
#include "model_test_util.h"

#include "attnviz/model/model.h"
#include "attnviz/model/qk_split.h"
#include "attnviz/model/tokenizers/sentencepiece.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

namespace attnviz::testing {
namespace {

fs::path shippedLlama() { return fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "kjv-sp-llama"; }

TEST(ShippedLlama, OpensAsAnHfFolderWithGqa) {
  const auto m = Model::open(shippedLlama().string());
  EXPECT_EQ(m->config().family, "llama");
  EXPECT_EQ(m->config().nHead, 8);
  EXPECT_EQ(m->config().nKvHead, 2);
  EXPECT_GE(m->config().nPositions, 256);
}

TEST(ShippedLlama, SomeHeadIsAPreviousTokenHeadOnHeldOutText) {
  const auto m = Model::open(shippedLlama().string());
  const std::vector<int> ids = m->encode(
      "The quick brown fox jumps over the lazy dog while the children play in the garden and "
      "their mother reads a newspaper on the bench.");
  const ForwardResult r = m->forward(ids);
  const int T = int(ids.size());
  double best = 0;
  for (const auto& la : r.layers) {
    const SiteActivations& layer = la.site();
    for (int h = 0; h < layer.weights.heads; ++h) {
      double s = 0;
      for (int i = 1; i < T; ++i) s += layer.weights.at(h, i, i - 1);
      best = std::max(best, s / (T - 1));
    }
  }
  EXPECT_GE(best, 0.8);
}

TEST(ShippedLlama, ALaterHeadCopiesRandomIdsAndAblatingItLowersTheCopy) {
  const auto m = Model::open(shippedLlama().string());
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick(3, m->config().vocabSize - 1);
  const int n = 40;
  std::vector<int> half(n);
  for (int& x : half) x = pick(rng);
  std::vector<int> ids{1};
  ids.insert(ids.end(), half.begin(), half.end());
  ids.insert(ids.end(), half.begin(), half.end());
  const ForwardResult r = m->forward(ids);
  // Induction: query t in the second copy attends to the token after its first occurrence.
  int bestL = -1, bestH = -1;
  double best = 0;
  for (int l = 1; l < m->config().nLayer; ++l)
    for (int h = 0; h < m->config().nHead; ++h) {
      double s = 0;
      for (int t = n + 1; t < 2 * n + 1; ++t) s += r.layers[l].site().weights.at(h, t, t - n + 1);
      if (s / n > best) best = s / n, bestL = l, bestH = h;
    }
  EXPECT_GE(best, 0.5) << "best induction head " << bestL << ":" << bestH;
  // The copied token's mean probability with and without that head.
  auto copyProb = [&](const ForwardResult& res) {
    double p = 0;
    for (int t = n + 1; t < 2 * n; ++t) {
      const auto row = res.logits.row(t);
      const double mx = row.maxCoeff();
      double z = 0;
      for (int v = 0; v < row.size(); ++v) z += std::exp(double(row(v)) - mx);
      p += std::exp(double(row(ids[t + 1])) - mx) / z;
    }
    return p / (n - 1);
  };
  Interventions iv;
  iv.ablate(bestL, bestH, m->config());
  const double plain = copyProb(r), ablated = copyProb(m->forward(ids, iv));
  EXPECT_LT(ablated, plain - 0.1) << "plain " << plain << " ablated " << ablated;
}

TEST(ShippedLlama, TokenizerJsonAgreesWithTokenizerModel) {
  TempDir tmp;
  const fs::path spOnly = tmp.path / "sp";
  fs::create_directories(spOnly);
  for (const char* f : {"config.json", "tokenizer.model", "tokenizer_config.json"})
    fs::copy(shippedLlama() / f, spOnly / f);
  const auto json = loadFolderTokenizer(shippedLlama().string(), 0);
  const auto sp = loadFolderTokenizer(spOnly.string(), 0);
  EXPECT_NE(json->kind(), sp->kind());
  for (const char* text : {"In the beginning God created the heaven and the earth.",
                           "And God said, Let there be light: and there was light.",
                           "Caf\xc3\xa9 \xe2\x80\x94 12345 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                           "  two  spaces\nand a newline"})
    EXPECT_EQ(json->encode(text), sp->encode(text)) << text;
}

// ---- through the command line: English induction and the GGUF twin ---------------------------

// A held-out verse (Hebrews 11:1; the model trained on Genesis to Philemon), the sentence of the
// "Induction on English" preset.
const char* kHeldOutVerse =
    "Now faith is the substance of things hoped for, the evidence of things not seen.";

std::vector<int> parseIds(const std::string& line) {
  std::vector<int> ids;
  std::istringstream in(line);
  for (int id; in >> id;) ids.push_back(id);
  return ids;
}

std::string joinIds(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// `attnviz tokenize` on the verse (BOS and its L pieces), then `attnviz model --weights` on BOS
// + S + S. The score of a head: the mean, over the second copy t = L+1 .. 2L, of its weight on
// key t - L + 1 (the token after the query's match in the first copy), from the dumped [L, H, T,
// T] weights. Layer 2 head 1 (the model card's best induction head) scores >= 0.5; the
// previous-token head (1:3), which attends to t - 1, does not.
TEST(ShippedLlamaCli, TheInductionHeadCopiesARepeatedHeldOutSentence) {
  TempDir tmp;
  const CliRun tok = runBinary({"tokenize", "--model", shippedLlama().string(), "--text",
                                kHeldOutVerse}, tmp.path);
  ASSERT_EQ(tok.exitCode, 0) << tok.err;
  const std::vector<int> once = parseIds(tok.out);
  ASSERT_GE(once.size(), 10u) << tok.out;
  ASSERT_EQ(once[0], 1) << "BOS first";
  const int L = int(once.size()) - 1;
  std::vector<int> ids = once;
  ids.insert(ids.end(), once.begin() + 1, once.end());
  const std::string w = (tmp.path / "A.npy").string();
  const CliRun run = runBinary(
      {"model", "--model", shippedLlama().string(), "--ids", joinIds(ids), "--weights", w},
      tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const NpyArray a = readNpy(w);
  const long long T = 2 * L + 1;
  ASSERT_EQ(a.shape, (std::vector<long long>{3, 8, T, T}));
  auto at = [&](int l, int h, long long i, long long j) {
    return double(a.data[((std::size_t(l) * 8 + h) * T + i) * T + j]);
  };
  auto inductionScore = [&](int l, int h) {
    double s = 0;
    for (int t = L + 1; t <= 2 * L; ++t) s += at(l, h, t, t - L + 1);
    return s / L;
  };
  auto previousTokenScore = [&](int l, int h) {
    double s = 0;
    for (int t = 1; t < T; ++t) s += at(l, h, t, t - 1);
    return s / double(T - 1);
  };
  const double induction = inductionScore(2, 1);
  EXPECT_GE(induction, 0.5) << "layer 2 head 1 on a repeated held-out verse";
  EXPECT_LT(inductionScore(1, 3), 0.2) << "the previous-token head is not an induction head";
  EXPECT_GE(previousTokenScore(1, 3), 0.8);
  std::printf("induction score of 2:1 on the repeated verse (L = %d): %.3f\n", L, induction);
}

// Runs tools/gguf/hf_to_gguf.py on the shipped folder.
fs::path toGguf(const fs::path& dir, const char* type) {
  const fs::path out = dir / (std::string("kjv-sp-llama-") + type + ".gguf");
  const std::string cmd =
      ATTNVIZ_PYTHON " " +
      shellQuote((fs::path(ATTNVIZ_SOURCE_DIR) / "tools" / "gguf" / "hf_to_gguf.py").string()) +
      " " + shellQuote(shippedLlama().string()) + " " + shellQuote(out.string()) + " --type " +
      type + " >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

// The largest |a - b| over two arrays of one shape.
double maxAbsDiff(const NpyArray& a, const NpyArray& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.data.size() != b.data.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i)
    worst = std::max(worst, std::fabs(double(a.data[i]) - double(b.data[i])));
  return worst;
}

// The GGUF twin, converted here at test time (no binary committed): the F32 file computes what
// the folder computes (attention and logits within 1e-5) and its tokenizer, read from the GGUF
// metadata, gives the folder's ids; the Q8_0 file stays within a stated tolerance of the folder
// and predicts the same next token nearly everywhere.
TEST(ShippedLlamaCli, TheGgufTwinComputesWhatTheFolderComputes) {
  TempDir tmp;
  const fs::path f32 = toGguf(tmp.path, "F32"), q8 = toGguf(tmp.path, "Q8_0");
  ASSERT_TRUE(fs::exists(f32) && fs::exists(q8));
  // Tokenizers: the same ids from the folder (tokenizer.json) and the GGUF (its metadata), with
  // and without the special tokens, on text, byte fallback, digits and odd whitespace.
  for (const char* text :
       {kHeldOutVerse, "In the beginning God created the heaven and the earth.",
        "And the LORD said unto Moses, Stretch out thine hand.",
        "Caf\xc3\xa9 \xe2\x80\x94 12345 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
        "  two  spaces\nand a newline\tand a tab"}) {
    for (bool special : {true, false}) {
      std::vector<std::string> args{"tokenize", "--model", "", "--text", text};
      if (!special) args.push_back("--no-special");
      args[2] = shippedLlama().string();
      const CliRun folder = runBinary(args, tmp.path);
      args[2] = f32.string();
      const CliRun twin = runBinary(args, tmp.path);
      args[2] = q8.string();
      const CliRun quant = runBinary(args, tmp.path);
      ASSERT_EQ(folder.exitCode, 0) << folder.err;
      EXPECT_FALSE(folder.out.empty());
      EXPECT_EQ(twin.out, folder.out) << text << (special ? "" : " (--no-special)") << twin.err;
      EXPECT_EQ(quant.out, folder.out) << text << (special ? "" : " (--no-special)") << quant.err;
    }
  }
  // The pass on BOS + verse + verse (the induction probe: every head has something to do).
  const CliRun tok = runBinary({"tokenize", "--model", shippedLlama().string(), "--text",
                                kHeldOutVerse}, tmp.path);
  std::vector<int> ids = parseIds(tok.out);
  const std::vector<int> once = ids;
  ids.insert(ids.end(), once.begin() + 1, once.end());
  auto pass = [&](const fs::path& model, const std::string& tag) {
    const std::string w = (tmp.path / (tag + "_w.npy")).string(),
                      z = (tmp.path / (tag + "_z.npy")).string();
    const CliRun r = runBinary({"model", "--model", model.string(), "--ids", joinIds(ids),
                                "--weights", w, "--logits", z},
                               tmp.path);
    EXPECT_EQ(r.exitCode, 0) << tag << ": " << r.err;
    return std::make_pair(readNpy(w), readNpy(z));
  };
  const auto [wf, zf] = pass(shippedLlama(), "folder");
  const auto [wt, zt] = pass(f32, "f32");
  const auto [wq, zq] = pass(q8, "q8");
  ASSERT_EQ(wf.shape, (std::vector<long long>{3, 8, (long long)ids.size(), (long long)ids.size()}));
  ASSERT_EQ(zf.shape, (std::vector<long long>{(long long)ids.size(), 2048}));
  // Logits within a fraction of their largest magnitude (the sums run in another order: the
  // F32 twin differs by 4.6e-5 on logits up to 16.9, 3e-6 of the scale).
  double scale = 0;
  for (float v : zf.data) scale = std::max(scale, double(std::fabs(v)));
  const double f32Weights = maxAbsDiff(wt, wf), f32Logits = maxAbsDiff(zt, zf);
  EXPECT_LE(f32Weights, 1e-5);
  EXPECT_LE(f32Logits, 1e-5 * scale);
  // Q8_0: 8-bit blocks of 32 with one scale each (measured: attention within 0.026, logits
  // within 0.48, same top-1 at 46 of 47 positions): bounds of 0.05 and 5% of the scale.
  const double q8Weights = maxAbsDiff(wq, wf), q8Logits = maxAbsDiff(zq, zf);
  EXPECT_LE(q8Weights, 0.05);
  EXPECT_LE(q8Logits, 0.05 * scale);
  int sameTop = 0;
  const std::size_t V = 2048;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    auto top = [&](const NpyArray& z) {
      return std::max_element(z.data.begin() + t * V, z.data.begin() + (t + 1) * V) -
             (z.data.begin() + t * V);
    };
    sameTop += top(zq) == top(zf);
  }
  EXPECT_GE(sameTop, int(ids.size()) * 9 / 10) << "the Q8_0 twin's next token differs at "
                                          << ids.size() - sameTop << " of " << ids.size();
  std::printf("GGUF twin (logits up to %.3g): F32 max |dA| %.3g, max |dlogit| %.3g; Q8_0 max |dA| %.3g, max |dlogit| "
              "%.3g, same top-1 at %d of %zu positions\n",
              scale, f32Weights, f32Logits, q8Weights, q8Logits, sameTop, ids.size());
}

}  // namespace
}  // namespace attnviz::testing

namespace attnviz::testing {
namespace {

// What the Why here? presets' notes say of the shipped model (assets/scenes/40-42), through the
// split itself (the split is held to a float64 torch reference in qk_test.cpp): the largest
// key-side part of the induction head 2:1 at its cells is the previous-token head L1H3 in 34 of
// 38, the token embedding's query-side share is tiny, and the sink head 2:2's key at <s> is
// written by layer 1's MLP.
struct Side {
  std::string topK, topQ;
  double score = 0, kShare = 0, embedQShare = 0;
};

Side sides(const QkSplit& s) {
  const int n = s.n();
  std::vector<double> rows(n, 0.0), cols(n, 0.0);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) rows[a] += s.at(a, b), cols[b] += s.at(a, b);
  const int kb = int(std::max_element(cols.begin(), cols.end()) - cols.begin());
  const int qb = int(std::max_element(rows.begin(), rows.end()) - rows.begin());
  Side out;
  out.topK = s.names[kb], out.topQ = s.names[qb], out.score = s.score;
  out.kShare = cols[kb] / s.score;
  out.embedQShare = rows[0] / s.score;  // "embed" is the first component
  EXPECT_EQ(s.names[0], "embed");
  return out;
}

TEST(ShippedLlama, WhyHerePresetsClaimsHold) {
  const auto m = Model::open(shippedLlama().string());
  // 40: each verse said twice; the query's key is the token after the same place in the first copy.
  int cells = 0, l1h3 = 0;
  double minShare = 1, maxShare = 0, maxEmbed = 0;
  for (const char* verse : {"And the fine linen is the righteousness of saints.",
                            "For the wages of sin is death; but the gift of God is eternal life."}) {
    const std::vector<int> once = m->encode(verse);  // <s> + the verse
    const std::vector<int> ids = m->encode(std::string(verse) + " " + verse);
    const int n = int(once.size()) - 1, T = int(ids.size());
    ASSERT_EQ(T, 1 + 2 * n) << verse;  // the second copy tokenizes as the first
    const ForwardResult r = m->forward(ids, {}, qkSplitCapture(2));
    for (int i = 1 + n; i < T; ++i) {
      const Side s = sides(splitQk(*m, r, 2, 1, i, i - n + 1));
      ++cells;
      if (s.topK == "L1H3") {
        ++l1h3;
        minShare = std::min(minShare, s.kShare), maxShare = std::max(maxShare, s.kShare);
      } else {
        EXPECT_EQ(s.topK, "L0mlp") << i;
      }
      maxEmbed = std::max(maxEmbed, std::abs(s.embedQShare));
    }
  }
  EXPECT_EQ(cells, 38);
  EXPECT_EQ(l1h3, 34);
  EXPECT_GT(minShare, 0.18);
  EXPECT_LT(maxShare, 0.31);
  EXPECT_LT(maxEmbed, 0.004);  // 0.02 to 0.35% of the score

  // 41: head 2:2 against <s> from query 4 on.
  const std::vector<int> ids = m->encode(
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
      "the face of the waters.");
  const ForwardResult r = m->forward(ids, {}, qkSplitCapture(2));
  int sinkCells = 0;
  for (int i = 4; i < int(ids.size()); ++i, ++sinkCells) {
    const Side s = sides(splitQk(*m, r, 2, 2, i, 0));
    EXPECT_EQ(s.topK, "L1mlp") << i;
    EXPECT_GT(s.kShare, 0.77) << i;
    EXPECT_LT(s.kShare, 0.81) << i;
  }
  EXPECT_EQ(sinkCells, 49);
}

}  // namespace
}  // namespace attnviz::testing
