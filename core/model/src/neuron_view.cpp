// attnviz core (model): the neuron view of one attention cell (neuron_view.h).
#include "attnviz/model/neuron_view.h"

#include "attnviz/engine/tensor.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attnviz {

NeuronView neuronView(const ModelConfig& c, int layer, const float* q, const float* k, int dh,
                      int i, int j, bool ropeOn, int seqLen) {
  if (dh != c.headSize)
    throw InputError("neuron view: rows of " + std::to_string(dh) + " values for heads of " +
                     std::to_string(c.headSize));
  NeuronView v;
  v.q.assign(q, q + dh);
  v.k.assign(k, k + dh);
  v.terms.resize(dh);
  const double scale = 1.0 / std::sqrt(double(dh));
  double sum = 0;
  for (int d = 0; d < dh; ++d) {
    v.terms[d] = float(double(q[d]) * k[d] * scale);
    sum += double(q[d]) * k[d];
  }
  v.score = float(sum * scale);
  if (c.positions != PositionKind::Rope) return v;

  // The pairs in the family's layout: (p, p + half) for rotate-half, (2p, 2p + 1) for adjacent.
  if (seqLen <= 0) seqLen = std::max(i, j) + 1;
  const std::vector<double> inv = c.ropeInvFreq(layer, seqLen);
  const int pairs = int(inv.size()), half = c.ropeDim / 2;
  auto dims = [&](int p) {
    return c.ropeStyle == RopeStyle::HalfSplit ? std::pair<int, int>{p, p + half}
                                               : std::pair<int, int>{2 * p, 2 * p + 1};
  };
  MatrixRM qp = Eigen::Map<const MatrixRM>(q, 1, dh), kp = Eigen::Map<const MatrixRM>(k, 1, dh);
  if (ropeOn) {
    applyRope(c, qp, i, true, layer, seqLen);
    applyRope(c, kp, j, true, layer, seqLen);
  }
  std::vector<char> rotated(dh, 0);
  v.pairTerms.assign(pairs + 1, 0.0f);
  v.plainTerms.assign(pairs + 1, 0.0f);
  v.wavelength.resize(pairs);
  double plain = 0;
  for (int p = 0; p < pairs; ++p) {
    const auto [a, b] = dims(p);
    rotated[a] = rotated[b] = 1;
    v.pairTerms[p] = float((double(q[a]) * k[a] + double(q[b]) * k[b]) * scale);
    const double t = double(qp(0, a)) * kp(0, a) + double(qp(0, b)) * kp(0, b);
    v.plainTerms[p] = float(t * scale);
    plain += t;
    v.wavelength[p] = 2.0 * M_PI / inv[p];
  }
  double rest = 0;
  for (int d = 0; d < dh; ++d)
    if (!rotated[d]) rest += double(q[d]) * k[d];
  v.pairTerms[pairs] = v.plainTerms[pairs] = float(rest * scale);
  v.plainScore = float((plain + rest) * scale);
  return v;
}

}  // namespace attnviz
