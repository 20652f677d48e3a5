// The second shipped model (assets/models/kjv-sp-llama, tools/train/train_llama.py): a LLaMA
// layout (RMSNorm, RoPE, gated SiLU, 8 query heads over 2 KV heads) with a SentencePiece
// vocabulary, opened as an ordinary Hugging Face folder. It has the heads it is shipped to show,
// measured here through the pass: a previous-token head on text it was not trained on, an
// induction head in a later layer on random ids repeated twice, whose ablation lowers the copied
// token's probability; and its tokenizer.json and tokenizer.model agree.
#include "model_test_util.h"

#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/sentencepiece.h"

#include <random>

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
  for (const auto& layer : r.layers)
    for (int h = 0; h < layer.weights.heads; ++h) {
      double s = 0;
      for (int i = 1; i < T; ++i) s += layer.weights.at(h, i, i - 1);
      best = std::max(best, s / (T - 1));
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
      for (int t = n + 1; t < 2 * n + 1; ++t) s += r.layers[l].weights.at(h, t, t - n + 1);
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

}  // namespace
}  // namespace attnviz::testing
