// attnviz core (model): QK attribution and composition scores (qk_split.h). The components are
// what the pass computed (each layer re-run from its kept input stream by the pass's own
// sub-blocks, with the kept head outputs); the frozen norms, projections and rotations are
// applied in float64 to the float32 weights.
#include "attnviz/model/qk_split.h"

#include "attnviz/engine/parallel.h"
#include "model_internal.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace attnviz {

namespace {

using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowD = Eigen::RowVectorXd;

const char* const kFamilies[] = {"gpt2",        "llama", "mistral", "qwen2", "qwen3", "gemma2",
                                 "gemma3_text", "phi3",  "olmo2"};

std::string familyList() {
  std::string s;
  for (const char* f : kFamilies) s += std::string(s.empty() ? "" : ", ") + f;
  return s;
}

bool normBefore(NormPlacement p) { return p == NormPlacement::Pre || p == NormPlacement::Sandwich; }

// Weight (input i, output o) of a linear view, either layout.
double wAt(const LinearView& v, int i, int o) {
  return v.inMajor ? double(v.w[long(i) * v.ld + o]) : double(v.w[long(o) * v.ld + i]);
}

// Outputs first .. first + n - 1 of a linear view as a float64 [in, n] matrix (x W, row vectors).
MatD columns(const LinearView& v, int first, int n) {
  MatD out(v.in, n);
  for (int i = 0; i < v.in; ++i)
    for (int o = 0; o < n; ++o) out(i, o) = wAt(v, i, first + o);
  return out;
}

// Inputs first .. first + n - 1 of a linear view as a float64 [n, out] matrix (a head's rows of
// W_o).
MatD rows(const LinearView& v, int first, int n) {
  MatD out(n, v.out);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < v.out; ++o) out(i, o) = wAt(v, first + i, o);
  return out;
}

RowD rowOf(const MatrixRM& x, int r) { return x.row(r).cast<double>(); }

// The effective gain of a norm weight vector of n values (offset + w), or ones when absent.
RowD gainOf(const float* w, int n, float offset) {
  if (!w) return RowD::Ones(n);
  RowD g(n);
  for (int i = 0; i < n; ++i) g(i) = double(offset) + double(w[i]);
  return g;
}

// RMSNorm's frozen per-token factor gain / sqrt(mean(u^2) + eps) for the row u.
RowD rmsFactor(const RowD& u, const RowD& gain, double eps) {
  return gain / std::sqrt(u.squaredNorm() / double(u.size()) + eps);
}

// The thin triangular factor R of A = U R (U with orthonormal columns): |X A^T|_F = |X R^T|_F.
MatD thinR(const MatD& a) {
  Eigen::HouseholderQR<MatD> qr(a);
  const int k = static_cast<int>(std::min(a.rows(), a.cols()));
  MatD r = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
  return r;
}

}  // namespace

std::string qkSplitRefusal(const ModelConfig& c) {
  const std::string list = " (the split is exact for the pre-norm decoders " + familyList() + ")";
  if (c.encoderDecoder()) {
    return c.family +
           " is an encoder-decoder: its decoder's stream also carries cross-attention over the "
           "source, so no split of one stream's components gives the score" + list;
  }
  if (c.normPlacement == NormPlacement::Post) {
    return c.family +
           " is post-norm: each layer renormalises the whole stream after adding to it, so the "
           "stream is not the sum of what the layers wrote" + list;
  }
  if (!c.causal) {
    return c.family + " is an encoder, whose stream starts with a norm over the embeddings" +
           list;
  }
  for (const char* f : kFamilies)
    if (c.family == f) return "";
  return c.family + " is not one of the families the split covers" + list;
}

Capture qkSplitCapture(int layer) {
  Capture cap = Capture::none();
  cap.headOut = LayerSet::none();
  for (int l = 0; l < layer; ++l) cap.headOut.only.push_back(l);
  cap.qkv = LayerSet::just(layer);
  return cap;
}

// The pieces of the model the split reads (Model's weights and its pass's sub-blocks).
struct QkSplitAccess {
  static QkSplit split(const Model& m, const ForwardResult& r, int layer, int head, int query,
                       int key);
  static std::vector<float> compose(const Model& m, CompositionKind kind);
};

QkSplit QkSplitAccess::split(const Model& m, const ForwardResult& r, int layer, int head,
                             int query, int key) {
  const ModelConfig& c = m.config();
  if (const std::string why = qkSplitRefusal(c); !why.empty()) throw InputError(why);
  const int T = static_cast<int>(r.ids.size());
  if (layer < 0 || layer >= c.nLayer || int(r.layers.size()) != c.nLayer)
    throw InputError("layer " + std::to_string(layer) + " is outside the model");
  if (head < 0 || head >= c.nHead)
    throw InputError("head " + std::to_string(head) + " is outside the model");
  for (int p : {query, key}) {
    if (p < 0 || p >= T)
      throw InputError("position " + std::to_string(p) + " is outside the " + std::to_string(T) +
                       " tokens");
  }
  for (const auto& [site, li] : r.interventions.entries()) {
    if (!li->residualEdits.empty() && site.layer < layer)
      throw InputError("the split needs the stream as the layers wrote it; layer " +
                       std::to_string(site.layer) + " has residual edits");
  }
  const Model::Weights& w = *m.w_;
  const int H = c.nHead, d = c.nEmbd, dh = c.headSize;
  const double eps = c.layerNormEps;
  const bool post = c.normPlacement == NormPlacement::Sandwich ||
                    c.normPlacement == NormPlacement::After;

  QkSplit out;
  out.layer = layer, out.head = head, out.query = query, out.key = key;
  out.names.push_back("embed");
  for (int l = 0; l < layer; ++l) {
    for (int h = 0; h < H; ++h) out.names.push_back("L" + std::to_string(l) + "H" + std::to_string(h));
    out.names.push_back("L" + std::to_string(l) + "mlp");
  }
  out.names.push_back("bias");
  const int nc = static_cast<int>(out.names.size());  // the components (const comes after)
  out.names.push_back("const");
  const int n = nc + 1;

  // The components at the query's position (side 0) and the key's (side 1).
  const int pos[2] = {query, key};
  MatD comp[2] = {MatD::Zero(nc, d), MatD::Zero(nc, d)};
  for (int s = 0; s < 2; ++s) comp[s].row(0) = rowOf(r.layers[0].residualIn, pos[s]);
  Model::Workspace ws;
  for (int l = 0; l < layer; ++l) {
    const LayerActivations& a = r.layers[l];
    const Tensor3& o = a.site(0).headOut;
    if (o.heads != H || o.rows != T || o.cols != dh)
      throw InputError("the pass kept no head outputs of layer " + std::to_string(l) +
                       " (run it with qkSplitCapture)");
    const Model::Weights::Layer& W = ws.weights(w, l, c);
    // The layer as the pass ran it, from its input stream and the heads' kept outputs: u (W_o's
    // output, bias included) in ws.proj, then the MLP's output (bias included) in ws.out.
    MatrixRM x = a.residualIn;
    ws.attnResidual(c, W, nullptr, o, x, nullptr, false);
    const MatrixRM u = ws.proj;
    ws.mlpResidual(c, W, x);
    const MatrixRM& f = ws.out;
    const MatD wo = rows(W.o, 0, H * dh);  // [H d_h, d]
    RowD bo = RowD::Zero(d), bd = RowD::Zero(d);
    if (W.o.b) bo = Eigen::Map<const Eigen::RowVectorXf>(W.o.b, d).cast<double>();
    if (W.down.b) bd = Eigen::Map<const Eigen::RowVectorXf>(W.down.b, d).cast<double>();
    const int first = 1 + l * (H + 1);
    for (int s = 0; s < 2; ++s) {
      const int p = pos[s];
      RowD ga = RowD::Ones(d), gm = RowD::Ones(d);
      if (post) {
        ga = rmsFactor(rowOf(u, p), gainOf(W[Slot::PostAttnNorm], d, c.normWeightOffset), eps);
        gm = rmsFactor(rowOf(f, p), gainOf(W[Slot::PostMlpNorm], d, c.normWeightOffset), eps);
      }
      for (int h = 0; h < H; ++h) {
        RowD oh(dh);
        for (int i = 0; i < dh; ++i) oh(i) = o.at(h, p, i);
        comp[s].row(first + h) = (oh * wo.middleRows(h * dh, dh)).cwiseProduct(ga);
      }
      comp[s].row(first + H) = (rowOf(f, p) - bd).cwiseProduct(gm);
      comp[s].row(nc - 1) += bo.cwiseProduct(ga) + bd.cwiseProduct(gm);
    }
  }

  // Layer L's path, frozen at each position: the input norm, W_Q or W_K, the q/k norm, RoPE.
  const Model::Weights::Layer& W = ws.weights(w, layer, c);
  const LayerIntervention* li = r.interventions.find(layer);
  const bool rope = c.positions == PositionKind::Rope && !(li && li->ropeOff);
  MatD side[2];
  for (int s = 0; s < 2; ++s) {
    const int p = pos[s];
    const RowD x = rowOf(r.layers[layer].residualIn, p);
    MatD nrm = MatD::Zero(n, d);  // rows: the components through the input norm, then const
    if (normBefore(c.normPlacement) && W[Slot::AttnNorm]) {
      const RowD g = gainOf(W[Slot::AttnNorm], d, c.normWeightOffset);
      if (c.norm == NormKind::RMSNorm) {
        const RowD k = rmsFactor(x, g, eps);
        for (int a = 0; a < nc; ++a) nrm.row(a) = comp[s].row(a).cwiseProduct(k);
      } else {
        const double mean = x.mean();
        const double var = (x.array() - mean).square().mean();
        const RowD k = g / std::sqrt(var + eps);
        for (int a = 0; a < nc; ++a)
          nrm.row(a) = (comp[s].row(a).array() - comp[s].row(a).mean()).matrix().cwiseProduct(k);
        if (const float* b = W[Slot::AttnNormB])
          nrm.row(nc) = Eigen::Map<const Eigen::RowVectorXf>(b, d).cast<double>();
      }
    } else {
      nrm.topRows(nc) = comp[s];
    }
    const LinearView& proj = s == 0 ? W.q : W.k;
    const int unit = s == 0 ? head : c.kvHeadOf(head);
    MatD v = nrm * columns(proj, unit * dh, dh);  // [n, d_h]
    if (proj.b)
      for (int j = 0; j < dh; ++j) v(nc, j) += double(proj.b[unit * dh + j]);
    if (c.qkNorm != QkNorm::None) {
      const float* g = W[s == 0 ? Slot::QNorm : Slot::KNorm];
      RowD factor;
      if (c.qkNorm == QkNorm::PerHead) {
        factor = rmsFactor(v.colwise().sum(), gainOf(g, dh, c.normWeightOffset), eps);
      } else {  // over the whole projection's width: every head's rows at this position
        RowD full = nrm.colwise().sum() * columns(proj, 0, proj.out);
        if (proj.b) full += Eigen::Map<const Eigen::RowVectorXf>(proj.b, proj.out).cast<double>();
        const RowD all = rmsFactor(full, gainOf(g, proj.out, c.normWeightOffset), eps);
        factor = all.segment(unit * dh, dh);
      }
      for (int a = 0; a < n; ++a) v.row(a) = v.row(a).cwiseProduct(factor);
    }
    if (rope) {
      // The pass's own rotation at position p, as a matrix: applyRope on each row of the
      // identity (each entry one cos or sin value exactly). Row by row: applyRope puts row t
      // at position pos0 + t.
      MatD basis(dh, dh);
      for (int i = 0; i < dh; ++i) {
        MatrixRM e = MatrixRM::Zero(1, dh);
        e(0, i) = 1.0f;
        applyRope(c, e, p, false, layer, T);
        basis.row(i) = e.row(0).cast<double>();
      }
      v = v * basis;
    }
    side[s] = std::move(v);
  }
  const double scale = c.scoreScale > 0.0f ? double(c.scoreScale) : 1.0 / std::sqrt(double(dh));
  const MatD cm = scale * (side[0] * side[1].transpose());
  out.c.assign(cm.data(), cm.data() + cm.size());
  out.sum = cm.sum();

  // The pass's own score: its q (scale folded in when the family has its own) and k.
  Tensor3 q, k, vv;
  m.layerQkv(r, layer, q, k, vv);
  double dot = 0.0;
  const int g = c.kvHeadOf(head);
  for (int i = 0; i < dh; ++i) dot += double(q.at(head, query, i)) * double(k.at(g, key, i));
  out.score = dot / std::sqrt(double(dh));
  return out;
}

std::vector<float> QkSplitAccess::compose(const Model& m, CompositionKind kind) {
  const ModelConfig& c = m.config();
  if (const std::string why = qkSplitRefusal(c); !why.empty()) throw InputError(why);
  const Model::Weights& w = *m.w_;
  const int L = c.nLayer, H = c.nHead, d = c.nEmbd, dh = c.headSize;
  // Per layer, its heads' factors stacked: the OV circuit's left factor R_V O [k, d] of each
  // head (W_OV = U R_V O, U with orthonormal columns) as rows h k .. h k + k - 1 of left[l], and
  // the right factor of the circuit layer l is read through as the later layer [d, k] (Q:
  // W_Q R_K^T; K: W_K R_Q^T; V: W_V R_O^T) as columns of right[l], so that
  // |W_OV1 X2|_F = |left1 right2|_F for each pair of heads: one product per pair of layers.
  const int kd = std::min(d, dh);
  std::vector<MatD> left(L), right(L);
  std::vector<std::vector<double>> leftNorm(L), rightNorm(L);
  Model::Workspace ws;
  for (int l = 0; l < L; ++l) {
    const Model::Weights::Layer& W = ws.weights(w, l, c);
    const RowD g = normBefore(c.normPlacement) && W[Slot::AttnNorm]
                       ? gainOf(W[Slot::AttnNorm], d, c.normWeightOffset)
                       : RowD::Ones(d);
    const auto folded = [&](const LinearView& v, int first) {
      return MatD(g.transpose().asDiagonal() * columns(v, first, dh));
    };
    left[l].resize(H * kd, d);
    right[l].resize(d, H * kd);
    for (int h = 0; h < H; ++h) {
      const int kv = c.kvHeadOf(h);
      const MatD wq = folded(W.q, h * dh), wk = folded(W.k, kv * dh), wv = folded(W.v, kv * dh);
      const MatD wo = rows(W.o, h * dh, dh);  // [d_h, d]
      left[l].middleRows(h * kd, kd) = thinR(wv) * wo;
      right[l].middleCols(h * kd, kd) =
          kind == CompositionKind::Q   ? MatD(wq * thinR(wk).transpose())
          : kind == CompositionKind::K ? MatD(wk * thinR(wq).transpose())
                                       : MatD(wv * thinR(wo.transpose()).transpose());
      leftNorm[l].push_back(left[l].middleRows(h * kd, kd).norm());
      rightNorm[l].push_back(right[l].middleCols(h * kd, kd).norm());
    }
  }
  const std::size_t HH = std::size_t(H);
  std::vector<float> out(std::size_t(L) * HH * std::size_t(L) * HH,
                         std::numeric_limits<float>::quiet_NaN());
  std::vector<std::pair<int, int>> pairs;  // (l1, l2), l1 < l2
  for (int l2 = 0; l2 < L; ++l2)
    for (int l1 = 0; l1 < l2; ++l1) pairs.emplace_back(l1, l2);
  detail::parallelFor(int(pairs.size()), [&](int i) {
    const auto [l1, l2] = pairs[std::size_t(i)];
    const MatD p = left[l1] * right[l2];  // [H k, H k]
    for (int h2 = 0; h2 < H; ++h2) {
      for (int h1 = 0; h1 < H; ++h1) {
        const double num = p.block(h1 * kd, h2 * kd, kd, kd).norm();
        const double den = leftNorm[l1][h1] * rightNorm[l2][h2];
        out[((std::size_t(l2) * HH + h2) * L + l1) * HH + h1] = float(num / den);
      }
    }
  });
  return out;
}

QkSplit splitQk(const Model& m, const ForwardResult& r, int layer, int head, int query, int key) {
  return QkSplitAccess::split(m, r, layer, head, query, key);
}

std::vector<float> compositionScores(const Model& m, CompositionKind kind) {
  return QkSplitAccess::compose(m, kind);
}

CompositionBaseline compositionBaseline(int d, int dh, int draws, unsigned long long seed) {
  if (d < 1 || dh < 1 || draws < 1) throw InputError("composition baseline: empty shapes");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto gaussian = [&](int r, int c) {
    MatD x(r, c);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
    return x;
  };
  // |A B^T|_F^2 = tr((A^T A)(B^T B)) for A, B [d, k]: every norm through [d_h, d_h] Gram
  // matrices, never a d x d product.
  std::vector<double> v(static_cast<std::size_t>(draws));
  for (int t = 0; t < draws; ++t) {
    const MatD v1 = gaussian(d, dh), o1 = gaussian(dh, d);  // W_OV1 = V1 O1
    const MatD a2 = gaussian(d, dh), b2 = gaussian(d, dh);  // the later head's A2 B2^T
    const MatD gv = v1.transpose() * v1, go = o1 * o1.transpose();
    const MatD ga = a2.transpose() * a2, gb = b2.transpose() * b2;
    const MatD m = o1 * a2;  // [d_h, d_h]: V1 (O1 A2) B2^T
    const double num = (m.transpose() * gv * m * gb).trace();
    const double den = (gv * go).trace() * (ga * gb).trace();
    v[std::size_t(t)] = std::sqrt(num / den);
  }
  CompositionBaseline b;
  b.draws = draws;
  for (double x : v) b.mean += x;
  b.mean /= draws;
  for (double x : v) b.sd += (x - b.mean) * (x - b.mean);
  b.sd = draws > 1 ? std::sqrt(b.sd / (draws - 1)) : 0.0;
  return b;
}

}  // namespace attnviz
