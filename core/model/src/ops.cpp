// The pass's operations, one function each: linear layers, norms, activations, RoPE, head
// splitting and merging, embedding and unembedding.
#include "attnviz/engine/isa.h"
#include "attnviz/engine/parallel.h"
#include "model_internal.h"

#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnviz {

void matmulInOut(const MatrixRM& x, const float* W, const float* bias, int k, int n, MatrixRM& out) {
  LinearView v;
  v.w = W, v.b = bias, v.in = k, v.out = n, v.ld = n, v.inMajor = true;
  linear(x, v, out);
}

void matmulOutIn(const MatrixRM& x, const float* E, int V, int d, MatrixRM& out) {
  LinearView v;
  v.w = E, v.in = d, v.out = V, v.ld = d, v.inMajor = false;
  linear(x, v, out);
}

void linear(const MatrixRM& x, const LinearView& W, MatrixRM& out) {
  const int n = W.out, k = W.in, m = int(x.rows());
  resizeFresh(out, m, n);
  if (W.inMajor) {
    linearAB(m, n, k, x.data(), long(x.cols()), W.w, long(W.ld), out.data(), long(n));
  } else {
    GemmRows rows;
    rows.f32 = W.w, rows.ld = W.ld;
    linearABt(m, n, k, x.data(), long(x.cols()), rows, out.data(), long(n));
  }
  if (W.b) out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(W.b, n);
}

void normForward(NormKind kind, const MatrixRM& x, const float* w, const float* b, float eps,
                 MatrixRM& out, float offset) {
  const int d = static_cast<int>(x.cols());
  out.resize(x.rows(), d);
  const Eigen::ArrayXf W = Eigen::Map<const Eigen::ArrayXf>(w, d) + offset;
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const Eigen::ArrayXf row = x.row(t).transpose().array();
    if (kind == NormKind::RMSNorm) {
      const float ms = row.square().mean();
      out.row(t) = (row * (1.0f / std::sqrt(ms + eps)) * W).matrix().transpose();
    } else {
      const float mean = row.mean();
      const Eigen::ArrayXf centred = row - mean;
      const float var = centred.square().mean();
      Eigen::ArrayXf y = (centred / std::sqrt(var + eps)) * W;
      if (b) y += Eigen::Map<const Eigen::ArrayXf>(b, d);
      out.row(t) = y.matrix().transpose();
    }
  }
}

namespace {

void activationOn(float* p, Eigen::Index n, Activation act) {
  Eigen::Map<Eigen::ArrayXf> a(p, n);
  switch (act) {
    case Activation::GeluTanh: {
      const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
      a = 0.5f * a * (1.0f + (k * (a + 0.044715f * a.cube())).tanh());
      break;
    }
    case Activation::GeluErf:
      a = 0.5f * a * (1.0f + (a * static_cast<float>(M_SQRT1_2)).erf());
      break;
    case Activation::Relu:
      a = a.max(0.0f);
      break;
    case Activation::Silu:
      a = a / (1.0f + (-a).exp());
      break;
  }
}

}  // namespace

void activationForward(MatrixRM& h, Activation act) {
  // Over the threads in chunks of 16384 values (a prompt's MLP holds millions): each chunk starts
  // on a multiple of 16 values, so every value takes the same vector or scalar path whatever the
  // threads, and the result is the same bits as one loop over the whole.
  constexpr Eigen::Index kChunk = 16384;
  const Eigen::Index n = h.size();
  if (n <= kChunk) {
    activationOn(h.data(), n, act);
    return;
  }
  detail::parallelFor(int((n + kChunk - 1) / kChunk), [&](int c) {
    const Eigen::Index i0 = Eigen::Index(c) * kChunk;
    activationOn(h.data() + i0, std::min(kChunk, n - i0), act);
  });
}

void splitHeads(const MatrixRM& x, int n, int dh, Tensor3& out) {
  const int T = static_cast<int>(x.rows());
  // Every element is copied in below; a buffer of this shape (the workspace's, layer after
  // layer) is written over where it is.
  if (out.heads != n || out.rows != T || out.cols != dh || out.size() != std::size_t(n) * T * dh)
    out = Tensor3::uninit(n, T, dh);
  if (std::int64_t(T) * x.cols() < 65536) {
    for (int h = 0; h < n; ++h) out.mat(h) = x.block(0, h * dh, T, dh);
    return;
  }
  detail::parallelFor(n, [&](int h) { out.mat(h) = x.block(0, h * dh, T, dh); });
}

Tensor3 poolThumb(const Tensor3& w, int side) {
  const int T = std::max(w.rows, w.cols), s = std::max(1, (T + side - 1) / side);
  const int nr = (w.rows + s - 1) / s, nc = (w.cols + s - 1) / s;
  Tensor3 out(w.heads, nr, nc);
  detail::parallelFor(w.heads, [&](int h) {
    for (int i = 0; i < w.rows; ++i) {
      const float* row = w.head(h) + std::size_t(i) * w.cols;
      float* dst = out.head(h) + std::size_t(i / s) * nc;
      for (int b = 0; b < nc; ++b) {
        const int j0 = b * s, n = std::min(w.cols, j0 + s) - j0;
        dst[b] = std::max(dst[b], Eigen::Map<const Eigen::ArrayXf>(row + j0, n).maxCoeff());
      }
    }
  });
  return out;
}

void mergeHeads(const Tensor3& o, const LayerIntervention* li, MatrixRM& out, Tensor3* kept) {
  const int H = o.heads, T = o.rows, dh = o.cols;
  out.resize(T, H * dh);
  auto has = [](const std::vector<int>& v, int h) {
    return std::find(v.begin(), v.end(), h) != v.end();
  };
  for (int h = 0; h < H; ++h) {
    auto dst = out.block(0, h * dh, T, dh);
    const MatrixRM* patch = nullptr;
    if (li) {
      for (const auto& [ph, m] : li->patchedHeads)
        if (ph == h) patch = &m;
    }
    if (li && has(li->ablatedHeads, h)) {
      dst.setZero();
    } else if (patch) {
      if (patch->rows() != T || patch->cols() != dh) {
        throw InputError("a patch for head " + std::to_string(h) + " is " +
                         std::to_string(patch->rows()) + " x " + std::to_string(patch->cols()) +
                         "; the head's output is " + std::to_string(T) + " x " +
                         std::to_string(dh));
      }
      dst = *patch;
    } else if (li && has(li->meanAblatedHeads, h)) {
      const int n = li->meanUpTo < 0 ? T : std::min(T, li->meanUpTo + 1);
      const Eigen::RowVectorXf mean = o.mat(h).topRows(n).colwise().mean();
      dst = mean.replicate(T, 1);
    } else {
      dst = o.mat(h);
    }
  }
  if (kept) {
    *kept = Tensor3::uninit(H, T, dh);
    for (int h = 0; h < H; ++h) kept->mat(h) = out.block(0, h * dh, T, dh);
  }
}

void applyRope(const ModelConfig& c, MatrixRM& x, int pos0, bool inverse, int layer, int seqLen) {
  if (c.positions != PositionKind::Rope) return;
  // The sequence's length (LongRoPE's short or long factors): a pass rotates its T rows from 0,
  // a decode step its row at pos0 of pos0 + 1; one row of a pass gives its pass's length.
  const std::vector<double> inv =
      c.ropeInvFreq(layer, seqLen > 0 ? seqLen : pos0 + int(x.rows()));
  const int pairs = static_cast<int>(inv.size()), half = c.ropeDim / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  // LongRoPE scales cos and sin (the rotated dimensions only); the inverse divides.
  const float af = c.ropeAttentionFactor(layer);
  const float scale = inverse ? 1.0f / af : af;
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    float* row = x.row(t).data();
    const float pos = float(pos0 + t);
    for (int i = 0; i < pairs; ++i) {
      // As HF computes the angle: float32 position times float32 frequency.
      const float angle = pos * float(inv[i]);
      float cs = std::cos(angle), sn = sign * std::sin(angle);
      if (scale != 1.0f) cs *= scale, sn *= scale;
      float& a = c.ropeStyle == RopeStyle::HalfSplit ? row[i] : row[2 * i];
      float& b = c.ropeStyle == RopeStyle::HalfSplit ? row[i + half] : row[2 * i + 1];
      const float a0 = a, b0 = b;
      a = a0 * cs - b0 * sn;
      b = b0 * cs + a0 * sn;
    }
  }
}

namespace {

// GemmRows::fill for a stored matrix: row `row`'s values [k0, k0 + kc), k0 a multiple of the
// packed products' blocks of k (256), so a whole number of every type's blocks.
void fillFromStored(const void* ctx, int row, int k0, int kc, float* out) {
  const StoredMatrix& s = *static_cast<const StoredMatrix*>(ctx);
  dequantizeRow(s.type, s.data + std::size_t(row) * s.rowBytes + ggmlRowBytes(s.type, k0), out,
                kc);
}

// GemmRows::prefetch: the bytes fillFromStored will read.
void prefetchStored(const void* ctx, int row, int k0, int kc) {
  const StoredMatrix& s = *static_cast<const StoredMatrix*>(ctx);
  const unsigned char* p = s.data + std::size_t(row) * s.rowBytes + ggmlRowBytes(s.type, k0);
  const std::size_t n = ggmlRowBytes(s.type, kc);
  for (std::size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o);
}

}  // namespace

GemmRows storedRows(const StoredMatrix& s) {
  GemmRows rows;
  rows.fill = &fillFromStored, rows.prefetch = &prefetchStored, rows.ctx = &s;
  return rows;
}

void convertRows(const StoredMatrix& s, int r0, int n, float* out) {
  const int chunk = 64;
  detail::parallelFor((n + chunk - 1) / chunk, [&](int t) {
    const int a = t * chunk, b = std::min(n, a + chunk);
    for (int r = a; r < b; ++r) {
      dequantizeRow(s.type, s.data + std::size_t(r0 + r) * s.rowBytes,
                    out + std::size_t(r) * s.cols, s.cols);
    }
  });
}

void embedRow(const Model::Weights& w, const ModelConfig& c, int id, float* out) {
  const int d = c.nEmbd;
  if (const float* e = w.global(Global::Embed)) {
    std::copy_n(e + std::size_t(id) * d, d, out);
  } else {
    dequantizeRow(w.embedStored.type, w.embedStored.data + std::size_t(id) * w.embedStored.rowBytes,
                  out, d);
  }
  if (c.embedScale != 1.0f) {
    // As HF does: the scale rounded to the weights' float type, then one product per value.
    for (int i = 0; i < d; ++i) out[i] *= c.embedScale;
  }
}

void addEncoderEmbeddings(const Model::Weights& w, const ModelConfig& c,
                          const std::vector<int>& typeIds, MatrixRM& x) {
  if (const float* tt = w.global(Global::TokenTypes)) {
    const ConstMapRM types(tt, std::max(1, c.typeVocabSize), c.nEmbd);
    for (Eigen::Index t = 0; t < x.rows(); ++t)
      x.row(t) += types.row(typeIds.empty() ? 0 : typeIds[std::size_t(t)]);
  }
  if (const float* n = w.global(Global::EmbedNorm)) {
    MatrixRM out;
    normForward(NormKind::LayerNorm, x, n, w.global(Global::EmbedNormB), c.layerNormEps, out);
    x = std::move(out);
  }
}

void finalNorm(const Model::Weights& w, const ModelConfig& c, const MatrixRM& x, MatrixRM& f) {
  if (!w.global(Global::NormF)) {  // post-norm: the stream leaves the last layer normalised
    f = x;
    return;
  }
  normForward(c.norm, x, w.global(Global::NormF), w.global(Global::NormFB), c.layerNormEps, f,
              c.normWeightOffset);
}

void softcapLogits(const ModelConfig& c, float* z, std::size_t n) {
  if (c.logitSoftcap <= 0.0f) return;
  const float cap = c.logitSoftcap;
  Eigen::Map<Eigen::ArrayXf> a(z, Eigen::Index(n));
  a = cap * (a / cap).tanh();
}

void unembed(const Model::Weights& w, const ModelConfig& c, const MatrixRM& f0, MatrixRM& logits,
             bool linearOnly) {
  // An encoder's MLM head transform: dense, the activation, LayerNorm, before the unembedding.
  MatrixRM transformed;
  const float* dense = linearOnly ? nullptr : w.global(Global::HeadDense);
  if (dense) {
    LinearView v;
    v.w = dense, v.b = w.global(Global::HeadDenseB), v.in = c.nEmbd, v.out = c.nEmbd;
    v.ld = c.nEmbd, v.inMajor = false;
    MatrixRM h;
    linear(f0, v, h);
    activationForward(h, c.headActivation);
    normForward(NormKind::LayerNorm, h, w.global(Global::HeadNorm), w.global(Global::HeadNormB),
                c.layerNormEps, transformed);
  }
  const MatrixRM& unscaled = dense ? transformed : f0;
  // T5's tied head reads the final states times d^-1/2.
  MatrixRM scaled;
  if (c.headInputScale != 1.0f) scaled = unscaled * c.headInputScale;
  const MatrixRM& f = c.headInputScale != 1.0f ? scaled : unscaled;
  if (w.head.w) {
    linear(f, w.head, logits);
  } else {
    // A head kept as stored: converted as the product packs it (or a block of rows at a time
    // for a few rows), so the logits are bit for bit those of the converted head.
    const StoredMatrix& s = w.headStored;
    populatePages(s.data, std::size_t(s.rows) * s.rowBytes);
    resizeFresh(logits, f.rows(), s.rows);
    // The fast path (fastActivations): x rounded to 8 bits as in the layers' products; the last
    // row alone (a pass's logits) as decode reads it.
    const bool fast = fastActivations() && fastActivationKernel(s.type);
    if (fast && f.rows() == 1) {
      matVec(s.type, s.data, s.rows, s.cols, f.data(), logits.data());
    } else if (!fast || !matMulFast(s.type, s.data, s.rows, s.cols, f.data(), long(f.cols()),
                                    f.rows(), logits.data(), long(s.rows)))
      linearABt(int(f.rows()), s.rows, s.cols, f.data(), long(f.cols()), storedRows(s),
                logits.data(), long(s.rows));
  }
  if (linearOnly) return;
  if (const float* b = w.global(Global::HeadBias))
    logits.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(b, logits.cols());
  softcapLogits(c, logits.data(), std::size_t(logits.size()));
}

void addPositions(const Model::Weights& w, const ModelConfig& c, int stack, int pos0,
                  MatrixRM& x) {
  const int T = static_cast<int>(x.rows()), d = c.nEmbd;
  if (c.positions == PositionKind::Learned) {
    const ConstMapRM pos(w.global(stack == 1 ? Global::EncPositions : Global::Positions),
                         c.nPositions + c.positionOffset, d);
    for (int t = 0; t < T; ++t) x.row(t) += pos.row(c.positionOffset + pos0 + t);
  } else if (c.positions == PositionKind::Sinusoidal) {
    // Row p: sin(p / 10000^(2j/d)) at j < d/2, cos of the same angle at d/2 + j.
    const int half = d / 2;
    for (int t = 0; t < T; ++t) {
      const double p = double(pos0 + t);
      for (int j = 0; j < half; ++j) {
        const double angle = p / std::pow(10000.0, 2.0 * j / double(d));
        x(t, j) += float(std::sin(angle));
        x(t, half + j) += float(std::cos(angle));
      }
    }
  }
}

int relativeBucket(int j, int i, bool bidirectional, int buckets, int maxDistance) {
  const int rel = j - i;
  int out = 0, n;
  if (bidirectional) {
    buckets /= 2;
    if (rel > 0) out += buckets;
    n = std::abs(rel);
  } else {
    n = std::max(-rel, 0);
  }
  const int maxExact = buckets / 2;
  if (n < maxExact) return out + n;
  // The loaders refuse a max distance at or below maxExact; should one get here, every distance
  // past the exact range takes the last bucket rather than an index outside the table.
  if (maxDistance <= maxExact || n >= maxDistance) return out + buckets - 1;
  // Computed in float32 as the reference implementation does, then truncated.
  const float large = float(maxExact) + std::log(float(n) / float(maxExact)) /
                                            float(std::log(double(maxDistance) / maxExact)) *
                                            float(buckets - maxExact);
  return out + std::min(int(large), buckets - 1);
}

Tensor3 positionBias(const Model::Weights& w, const ModelConfig& c, int stack, int Tq, int Tk) {
  const float* table = w.global(stack == 1 ? Global::EncRelBias : Global::RelBias);
  if (c.positions != PositionKind::Relative || !table) return {};
  const int H = c.nHead;
  Tensor3 out = Tensor3::uninit(H, Tq, Tk);
  for (int i = 0; i < Tq; ++i) {
    const int pi = Tk - Tq + i;
    for (int j = 0; j < Tk; ++j) {
      const int b = relativeBucket(j, pi, stack == 1 || !c.causal, c.relBuckets, c.relMaxDistance);
      for (int h = 0; h < H; ++h) out.at(h, i, j) = table[std::size_t(b) * H + h];
    }
  }
  return out;
}

void addScoreBias(AttentionParams& p, const Tensor3& bias) {
  if (bias.empty()) return;
  MaskSpec& m = p.mask;
  if (m.customKind == MaskSpec::Custom::None) {
    m.customKind = MaskSpec::Custom::Bias;
    m.custom = bias;
    return;
  }
  Tensor3 out = bias;
  const bool shared = m.custom.heads == 1;
  for (int h = 0; h < out.heads; ++h) {
    for (int i = 0; i < out.rows; ++i) {
      for (int j = 0; j < out.cols; ++j) {
        const float v = m.custom.at(shared ? 0 : h, i, j);
        if (m.customKind == MaskSpec::Custom::Allow) {
          if (v == 0.0f) out.at(h, i, j) = -std::numeric_limits<float>::infinity();
        } else {
          out.at(h, i, j) += v;
        }
      }
    }
  }
  m.customKind = MaskSpec::Custom::Bias;
  m.custom = std::move(out);
}

}  // namespace attnviz
