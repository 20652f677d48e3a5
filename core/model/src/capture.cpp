// What a pass keeps: layer sets, captures, the shared layer list, their sizes; top-k.
#include "model_internal.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace attnviz {

bool LayerSet::has(int layer) const {
  return all || std::find(only.begin(), only.end(), layer) != only.end();
}

Capture Capture::view(int thumbnail) {
  Capture c;
  c.weights = c.qkv = c.headOut = LayerSet::none();
  c.thumbnail = thumbnail;
  c.allLogits = false;
  return c;
}

LayerActivations& LayerList::operator[](std::size_t l) {
  std::shared_ptr<LayerActivations>& p = layers_[l];
  if (p.use_count() > 1) p = std::make_shared<LayerActivations>(*p);  // shared: copy first
  return *p;
}

void LayerList::resize(std::size_t n) {
  const std::size_t old = layers_.size();
  layers_.resize(n);
  for (std::size_t l = old; l < n; ++l) layers_[l] = std::make_shared<LayerActivations>();
}

std::size_t SiteActivations::bytes() const {
  const auto t = [](const Tensor3& x) { return x.size() * sizeof(float); };
  return t(q) + t(k) + t(v) + t(weights) + t(headOut) + t(thumb) + rows.size() * sizeof(RowStats);
}

const SiteActivations& LayerActivations::site(int s) const {
  static const SiteActivations none;
  return s >= 0 && s < static_cast<int>(sites.size()) ? sites[std::size_t(s)] : none;
}

SiteActivations& LayerActivations::site(int s) {
  if (s < 0) throw InputError("site " + std::to_string(s) + " is outside the layer");
  if (s >= static_cast<int>(sites.size())) sites.resize(std::size_t(s) + 1);
  return sites[std::size_t(s)];
}

std::size_t LayerActivations::bytes() const {
  std::size_t n = std::size_t(residualIn.size()) * sizeof(float);
  for (const SiteActivations& s : sites) n += s.bytes();
  return n;
}

std::size_t ForwardResult::bytes() const {
  std::size_t n = std::size_t(residualOut.size() + logits.size()) * sizeof(float);
  for (const LayerActivations& a : layers) n += a.bytes();
  if (encoder) n += encoder->bytes();
  return n;
}

const LayerList& ForwardResult::stackLayers(int s) const {
  static const LayerList none;
  if (s == 0) return layers;
  return s == 1 && encoder ? encoder->layers : none;
}

const SiteActivations& ForwardResult::site(const SiteId& s) const {
  const LayerList& L = stackLayers(s.stack);
  if (s.layer < 0 || s.layer >= static_cast<int>(L.size()) || s.site < 0 ||
      s.site >= static_cast<int>(L[std::size_t(s.layer)].sites.size())) {
    throw InputError("the pass holds no attention site " + std::to_string(s.stack) + ":" +
                     std::to_string(s.layer) + ":" + std::to_string(s.site));
  }
  return L[std::size_t(s.layer)].sites[std::size_t(s.site)];
}

std::vector<TokenProb> Model::topK(const ForwardResult& r, int k, int pos) {
  const int T = static_cast<int>(r.logits.rows()), V = static_cast<int>(r.logits.cols());
  if (T == 0) return {};
  if (pos < 0) pos = T - 1;
  const auto row = r.logits.row(std::min(pos, T - 1));
  const double mx = row.maxCoeff();
  double sum = 0.0;
  for (int v = 0; v < V; ++v) sum += std::exp(double(row(v)) - mx);
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  k = std::clamp(k, 0, V);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return row(a) > row(b) || (row(a) == row(b) && a < b); });
  std::vector<TokenProb> out;
  for (int i = 0; i < k; ++i) {
    out.push_back({order[i], static_cast<float>(std::exp(double(row(order[i])) - mx) / sum)});
  }
  return out;
}

}  // namespace attnviz
