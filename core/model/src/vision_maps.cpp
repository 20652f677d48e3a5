// The overlay figure's maps from an image model's pass: a token's attention row over the
// patches, or the attention rollout's (vision_maps.h).
#include "attnviz/model/vision_maps.h"

#include "attnviz/engine/tensor.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace attnviz {

namespace {

std::string range(int n, const char* what) {
  return std::to_string(n) + (n == 1 ? std::string(" ") + what + " (0)"
                                     : std::string(" ") + what + "s (0.." + std::to_string(n - 1) + ")");
}

void checkWeights(const VisionResult& r, const VisionConfig& c) {
  const std::size_t T = std::size_t(r.tokens);
  if (r.weights.size() != std::size_t(c.layers) * std::size_t(c.heads) * T * T)
    throw InputError("the image model's pass kept no attention weights");
}

}  // namespace

std::vector<double> visionRollout(const VisionResult& r, const VisionConfig& c, int layer,
                                  const RolloutOptions& o) {
  checkWeights(r, c);
  if (layer < 0 || layer >= c.layers)
    throw UsageError("--layer " + std::to_string(layer) + ": out of range, the model has " +
                     range(c.layers, "layer"));
  if (!(o.discard >= 0 && o.discard <= 0.9))
    throw UsageError("--rollout-discard: expected a fraction in 0..0.9");
  const int T = r.tokens, H = c.heads;
  const std::size_t TT = std::size_t(T) * T;
  const std::size_t drop = std::size_t(std::floor(o.discard * double(TT)));
  std::vector<std::size_t> order;
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Mat R;
  for (int l = 0; l <= layer; ++l) {
    Mat A = Mat::Zero(T, T);
    for (int h = 0; h < H; ++h) {
      const float* w = r.weights.data() + (std::size_t(l) * H + h) * std::size_t(T) * T;
      const auto W =
          Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
              w, T, T)
              .cast<double>();
      if (!o.maxHeads)
        A += W;
      else
        A = h == 0 ? Mat(W) : Mat(A.cwiseMax(W));
    }
    if (!o.maxHeads) A /= double(H);
    if (drop > 0) {  // the lowest `drop` entries (by value, then flat index), CLS-to-CLS kept
      order.resize(TT);
      std::iota(order.begin(), order.end(), std::size_t{0});
      double* a = A.data();
      std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(drop - 1), order.end(),
                       [&](std::size_t x, std::size_t y) {
                         return a[x] < a[y] || (a[x] == a[y] && x < y);
                       });
      for (std::size_t k = 0; k < drop; ++k)
        if (order[k] != 0) a[order[k]] = 0;
    }
    A = 0.5 * A + 0.5 * Mat::Identity(T, T);
    for (int i = 0; i < T; ++i) {
      const double s = A.row(i).sum();
      if (s > 0) A.row(i) /= s;
    }
    R = l == 0 ? A : Mat(A * R);
  }
  return std::vector<double>(R.data(), R.data() + R.size());
}

PatchMap overlayPatchMap(const VisionResult& r, const VisionConfig& c, int layer, int head,
                         int token, bool rollout, const RolloutOptions& ro) {
  checkWeights(r, c);
  const int T = r.tokens, P = c.prefixTokens(), N = r.gridH * r.gridW;
  if (layer < 0 || layer >= c.layers)
    throw UsageError("--layer " + std::to_string(layer) + ": out of range, the model has " +
                     range(c.layers, "layer"));
  if (head < 0 || head >= c.heads)
    throw UsageError("--head " + std::to_string(head) + ": out of range, the model has " +
                     range(c.heads, "head"));
  if (token != kDefaultOverlayToken && (token < 0 || token >= T))
    throw UsageError("--token " + std::to_string(token) + ": out of range, the image gives " +
                     range(T, "token"));
  if (P + N != T) throw InputError("the pass's tokens do not match its patch grid");

  std::vector<double> rolled;
  if (rollout) rolled = visionRollout(r, c, layer, ro);
  const float* w = r.weights.data() + (std::size_t(layer) * c.heads + head) * std::size_t(T) * T;
  const auto at = [&](int i, int j) {
    return rollout ? rolled[std::size_t(i) * T + j] : double(w[std::size_t(i) * T + j]);
  };

  PatchMap m;
  m.gridH = r.gridH, m.gridW = r.gridW;
  m.values.assign(std::size_t(N), 0.0);
  if (token == kDefaultOverlayToken && !c.hasCls) {
    // No CLS (SigLIP): the mean of the patch queries' rows.
    for (int i = P; i < T; ++i)
      for (int j = 0; j < N; ++j) m.values[std::size_t(j)] += at(i, P + j);
    for (double& v : m.values) v /= double(N);
    m.token = "mean of the patch queries";
    return m;
  }
  const int q = token == kDefaultOverlayToken ? 0 : token;
  for (int j = 0; j < N; ++j) m.values[std::size_t(j)] = at(q, P + j);
  m.token = q < int(r.labels.size()) ? r.labels[std::size_t(q)] : std::to_string(q);
  return m;
}

}  // namespace attnviz
