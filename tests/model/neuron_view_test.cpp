// The neuron view (neuron_view.h): the per-dimension and per-pair terms of a cell's score sum to
// it; the "rotation removed" pairs equal a naive float64 rotation back by each position; and on
// the shipped LLaMA-layout model, the scores of a row softmax to the pass's own weights.
#include "model_test_util.h"

#include "attnviz/model/model.h"
#include "attnviz/model/neuron_view.h"

#include <cmath>
#include <numeric>
#include <random>

namespace attnviz::testing {
namespace {

ModelConfig ropeConfig(RopeStyle style, int dh, int ropeDim) {
  ModelConfig c;
  c.family = "llama";
  c.nLayer = 1, c.nHead = 1, c.nKvHead = 1, c.headSize = dh, c.nEmbd = dh;
  c.positions = PositionKind::Rope;
  c.ropeStyle = style;
  c.ropeTheta = 10000.0f;
  c.ropeDim = ropeDim;
  return c;
}

double sum(const std::vector<float>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// Pair p's dimensions, rotated back by `pos` in float64: the reference for "rotation removed".
void rotateBack(std::vector<double>& x, int a, int b, double angle) {
  const double x0 = x[a], x1 = x[b];
  x[a] = x0 * std::cos(angle) + x1 * std::sin(angle);
  x[b] = x1 * std::cos(angle) - x0 * std::sin(angle);
}

TEST(NeuronView, TermsSumToTheScoreAndRotationRemovedMatchesANaiveRotation) {
  std::mt19937 gen(7);
  std::normal_distribution<float> N(0.0f, 1.0f);
  for (RopeStyle style : {RopeStyle::HalfSplit, RopeStyle::Interleaved}) {
    for (int ropeDim : {16, 8}) {
      const int dh = 16, i = 37, j = 5;
      const ModelConfig c = ropeConfig(style, dh, ropeDim);
      std::vector<float> q(dh), k(dh);
      for (auto& x : q) x = N(gen);
      for (auto& x : k) x = N(gen);
      const NeuronView v = neuronView(c, 0, q.data(), k.data(), dh, i, j, true);
      double dot = 0;
      for (int d = 0; d < dh; ++d) dot += double(q[d]) * k[d];
      const double score = dot / std::sqrt(double(dh));
      EXPECT_NEAR(v.score, score, 1e-5);
      EXPECT_NEAR(sum(v.terms), score, 1e-5);
      ASSERT_EQ(int(v.pairTerms.size()), ropeDim / 2 + 1);
      EXPECT_NEAR(sum(v.pairTerms), score, 1e-5);
      EXPECT_NEAR(sum(v.plainTerms), v.plainScore, 1e-5);
      if (ropeDim == dh) {
        EXPECT_EQ(v.pairTerms.back(), 0.0f);
      }
      // Each pair turned back by its own position, in float64.
      std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end());
      double plain = 0;
      for (int p = 0; p < ropeDim / 2; ++p) {
        const int a = style == RopeStyle::HalfSplit ? p : 2 * p;
        const int b = style == RopeStyle::HalfSplit ? p + ropeDim / 2 : 2 * p + 1;
        const double theta = std::pow(10000.0, -2.0 * p / ropeDim);
        rotateBack(qd, a, b, i * theta);
        rotateBack(kd, a, b, j * theta);
        const double t = (qd[a] * kd[a] + qd[b] * kd[b]) / std::sqrt(double(dh));
        EXPECT_NEAR(v.plainTerms[p], t, 2e-5) << "pair " << p;
        EXPECT_NEAR(v.wavelength[p], 2 * M_PI / theta, 1e-6 * (2 * M_PI / theta));
        plain += t;
      }
      plain += v.plainTerms.back();
      EXPECT_NEAR(v.plainScore, plain, 1e-4);
    }
  }
}

// LongRoPE: rows of a pass longer than the original length were rotated with the long factors
// (and the attention factor). "Rotation removed" turns them back with the same factors, given the
// pass's length, whatever i and j are: the content-only score is the rows' plain dot product,
// checked in float64 with each pair turned by its long-factor angle.
TEST(NeuronView, LongRopeRowsAreTurnedBackWithTheFactorsOfThePassLength) {
  std::mt19937 gen(11);
  std::normal_distribution<float> N(0.0f, 1.0f);
  const int dh = 8, T = 12, i = 2, j = 1;
  ModelConfig c = ropeConfig(RopeStyle::HalfSplit, dh, dh);
  c.ropeScaling.kind = RopeScaling::Kind::LongRope;
  c.ropeScaling.originalMaxPositions = 4;  // T = 12 > 4: the long factors; i, j < 4
  c.ropeScaling.shortFactor = {1.0f, 1.5f, 2.0f, 3.0f};
  c.ropeScaling.longFactor = {2.0f, 5.0f, 9.0f, 30.0f};
  c.ropeScaling.attentionFactor = 1.2f;
  std::vector<double> q0(dh), k0(dh);
  for (auto& x : q0) x = N(gen);
  for (auto& x : k0) x = N(gen);
  // The pass's rows: each pair turned forward by pos / (long factor * base^(2p/d)), times 1.2.
  auto rotate = [&](std::vector<double> x, int pos) {
    std::vector<float> out(dh);
    for (int p = 0; p < dh / 2; ++p) {
      const double a = pos / (c.ropeScaling.longFactor[p] * std::pow(10000.0, 2.0 * p / dh));
      const double x0 = x[p], x1 = x[p + dh / 2];
      out[p] = float(1.2 * (x0 * std::cos(a) - x1 * std::sin(a)));
      out[p + dh / 2] = float(1.2 * (x1 * std::cos(a) + x0 * std::sin(a)));
    }
    return out;
  };
  const std::vector<float> q = rotate(q0, i), k = rotate(k0, j);
  double plain = 0;
  for (int d = 0; d < dh; ++d) plain += q0[d] * k0[d];
  plain /= std::sqrt(double(dh));
  const NeuronView v = neuronView(c, 0, q.data(), k.data(), dh, i, j, true, T);
  EXPECT_NEAR(v.plainScore, plain, 1e-5);
  // Without the pass's length the rows would be read as a 3-token sequence's (short factors).
  const NeuronView shortRead = neuronView(c, 0, q.data(), k.data(), dh, i, j, true);
  EXPECT_GT(std::abs(shortRead.plainScore - plain), 1e-3);
}

// On a real pass: the neuron view's scores of a row, softmaxed over the allowed keys, are the
// pass's weights, so its score is the one the heatmap's scaled stage shows.
TEST(NeuronView, ScoresOfARowSoftmaxToThePassWeightsOnTheShippedLlama) {
  const auto m = Model::open((fs::path(ATTNVIZ_SOURCE_DIR) / "assets/models/kjv-sp-llama").string());
  const std::vector<int> ids = m->encode("In the beginning God created the heaven and the earth.");
  const ForwardResult r = m->forward(ids);
  const int T = int(ids.size()), layer = 2, h = 1, i = T - 1;
  Tensor3 q, k, v;
  m->layerQkv(r, layer, q, k, v);
  const ModelConfig& c = m->config();
  std::vector<double> s(i + 1);
  double top = -1e30;
  for (int j = 0; j <= i; ++j) {
    const NeuronView nv = neuronView(c, layer, q.head(h) + std::size_t(i) * c.headSize,
                                     k.head(c.kvHeadOf(h)) + std::size_t(j) * c.headSize,
                                     c.headSize, i, j, true);
    EXPECT_NEAR(sum(nv.pairTerms), nv.score, 1e-5);
    s[j] = nv.score;
    top = std::max(top, s[j]);
  }
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - top));
  for (int j = 0; j <= i; ++j)
    EXPECT_NEAR(s[j] / z, r.layers[layer].site().weights.at(h, i, j), 1e-5) << "key " << j;
}

}  // namespace
}  // namespace attnviz::testing
