// Decoding: the KV cache a prompt's pass leaves, and one token's step over it through the same
// layer skeleton as the full pass (matrix-vector products on the stored weights, attention over
// the cached rows).
#include "attnviz/engine/engine_detail.h"
#include "attnviz/engine/parallel.h"
#include "model_internal.h"

#include <algorithm>
#include <cmath>

namespace attnviz {

KvCache Model::cacheFrom(const ForwardResult& r) const {
  KvCache cache;
  const int dh = config_.headSize, KV = config_.nKvHead;
  for (int l = 0; l < config_.nLayer; ++l) {
    Tensor3 q, ak, av;  // one per KV head: kept by the pass, or recomputed from its stream
    if (const SiteActivations& self = r.layers[l].site(0); !self.k.empty())
      ak = self.k, av = self.v;  // Capture::kvCache keeps K and V without Q
    else
      layerQkv(r, l, q, ak, av);
    const int T = ak.rows;
    MatrixRM k(T, KV * dh), v(T, KV * dh);
    for (int g = 0; g < KV; ++g) {
      k.block(0, g * dh, T, dh) = ak.mat(g);
      v.block(0, g * dh, T, dh) = av.mat(g);
    }
    cache.k.push_back(std::move(k));
    cache.v.push_back(std::move(v));
  }
  if (r.encoder) {
    // The cross sites' keys and values: the encoder's last hidden states through each decoder
    // layer's W_k, W_v, once for every step.
    Workspace ws;
    for (int l = 0; l < config_.nLayer; ++l) {
      const Weights::Layer& W = ws.weights(*w_, l, config_);
      MatrixRM k, v;
      ws.lin(r.encoder->residualOut, W.xk, W.xkS, k);
      ws.lin(r.encoder->residualOut, W.xv, W.xvS, v);
      cache.crossK.push_back(std::move(k));
      cache.crossV.push_back(std::move(v));
    }
  }
  return cache;
}

namespace {

// One query over the cache: for query head h (KV head g = h / group), s_j = (q_h . k_j) / sqrt(d_h)
// read in place from the cache's rows j < Tk, then the engine's own row logits and softmax
// (engine_detail.h: the mask, ALiBi, softcap, temperature as a full pass applies them), then
// o_h = sum_j a_j v_j. No [H, T_k, d_h] copy of the cache per step. weights [H, 1, Tk], out
// [H, 1, dh].
void decodeAttention(const MatrixRM& q, const MatrixRM& K, const MatrixRM& V, int Tk, int group,
                     int dh, const AttentionParams& p, Tensor3& weights, Tensor3& out) {
  using Strided = Eigen::Map<const MatrixRM, 0, Eigen::OuterStride<>>;
  const int H = weights.heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  const std::vector<float> slopes = alibiSlopes(H);
  detail::parallelFor(H, [&](int h) {
    const int g = h / group;
    const Strided Kg(K.data() + g * dh, Tk, dh, Eigen::OuterStride<>(K.cols()));
    const Strided Vg(V.data() + g * dh, Tk, dh, Eigen::OuterStride<>(V.cols()));
    thread_local std::vector<float, Eigen::aligned_allocator<float>> z, scratch;
    z.resize(std::size_t(Tk));
    scratch.resize(std::size_t(Tk));
    Eigen::Map<Eigen::VectorXf> s(z.data(), Tk);
    s.noalias() = scale * (Kg * q.block(0, h * dh, 1, dh).transpose());
    if (!std::isfinite((s.array() * 0.0f).sum())) detail::throwScoresOverflow(h);
    detail::rowLogits(z.data(), z.data(), p, slopes[h], h, 0, 1, Tk, 0, Tk);
    detail::rowSoftmax(z.data(), scratch.data(), weights.head(h), Tk, p.temperature);
    const Eigen::Map<const Eigen::RowVectorXf> a(weights.head(h), Tk);
    Eigen::Map<Eigen::RowVectorXf>(out.head(h), dh).noalias() = a * Vg;
  });
}

}  // namespace

DecodeStep Model::decodeStep(KvCache& cache, int id, const Interventions& iv,
                             const LayerSet& keepRows) const {
  const ModelConfig& c = config_;
  const int pos = cache.length(), d = c.nEmbd, H = c.nHead, KV = c.nKvHead, dh = c.headSize;
  const int at = pos + cache.positionOffset;  // where a learned position is read
  if (pos >= c.nPositions || at >= c.nPositions) {
    throw InputError("the context is full (" + std::to_string(c.nPositions) + " positions)");
  }
  if (id < 0 || id >= c.vocabSize) {
    throw InputError("token id " + std::to_string(id) + " is outside the vocab (0.." +
                     std::to_string(c.vocabSize - 1) + ")");
  }
  checkDecodeInterventions(iv);
  if (cache.k.empty()) cache.k.resize(c.nLayer), cache.v.resize(c.nLayer);
  if (cache.rows < 0) cache.rows = pos;  // from here on the matrices may hold spare rows
  const int Tk = pos + 1, group = c.kvGroup();
  MatrixRM x(1, d);
  embedRow(*w_, c, id, x.row(0).data());
  addPositions(*w_, c, 0, at, x);
  addEncoderEmbeddings(*w_, c, {}, x);
  DecodeStep step;
  step.rows.resize(c.nLayer);
  const bool cross = c.encoderDecoder();
  if (cross && int(cache.crossK.size()) != c.nLayer) {
    throw InputError("an encoder-decoder's decode step needs the encoder's cross keys "
                     "(Model::cacheFrom of a forwardSeq2Seq pass)");
  }
  if (cross) step.crossRows.resize(c.nLayer);
  Workspace ws;
  ws.decode = true;
  Tensor3 row = Tensor3::uninit(H, 1, Tk), o = Tensor3::uninit(H, 1, dh);
  const Tensor3 bias = attnviz::positionBias(*w_, c, 0, 1, Tk);  // T5's self sites (else empty)
  for (int l = 0; l < c.nLayer; ++l) {
    // Every matrix read as stored, unless one of a layer kept as stored has no [out, in] rows (a
    // GPT-2 folder's Conv1D): then the layer is converted as a full pass converts it.
    const Weights::Layer& S = w_->layers[l];
    const bool inPlace = S.qS && S.kS && S.vS && S.oS && S.upS && S.downS &&
                         (c.mlp != MlpKind::Gated || S.gateS) && (!cross || (S.xqS && S.xoS));
    const Weights::Layer& W = inPlace ? S : ws.weights(*w_, l, c);
    MatrixRM& K = cache.k[l];
    MatrixRM& V = cache.v[l];
    auto attend = [&]() -> const Tensor3& {
      if (K.rows() < Tk) {  // room for more rows than this one: no copy of the cache every step
        const int rows = std::min(c.nPositions, std::max(Tk, std::max(64, 2 * int(K.rows()))));
        K.conservativeResize(rows, KV * dh);
        V.conservativeResize(rows, KV * dh);
      }
      K.row(pos) = ws.km.row(0);
      V.row(pos) = ws.vm.row(0);
      AttentionParams p = layerAttentionParams(c, iv, l, 1, Tk);
      addScoreBias(p, bias);
      validateParams(p, H, 1, Tk);
      decodeAttention(ws.qm, K, V, Tk, group, dh, p, row, o);
      if (keepRows.has(l)) step.rows[l] = row;
      return o;
    };
    if (!cross) {
      ws.block(c, W, l, x, pos, iv.find(l), attend, nullptr);
      continue;
    }
    // The cross site: the new row's query over the encoder's cached keys and values.
    auto attendCross = [&]() -> const Tensor3& {
      ws.projectCross(c, W, x, nullptr);
      const MatrixRM& K = cache.crossK[l];
      const int Ts = static_cast<int>(K.rows());
      const AttentionParams p = siteAttentionParams(c, iv, SiteId{0, l, 1}, 1, Ts);
      validateParams(p, H, 1, Ts);
      Tensor3 xrow = Tensor3::uninit(H, 1, Ts);
      decodeAttention(ws.qm, K, cache.crossV[l], Ts, group, dh, p, xrow, o);
      if (keepRows.has(l)) step.crossRows[l] = std::move(xrow);
      return o;
    };
    ws.blockWithCross(c, W, l, x, pos, iv.find(l), attend, nullptr, iv.find(SiteId{0, l, 1}),
                      attendCross, nullptr);
  }
  cache.rows = Tk;
  MatrixRM f;
  finalNorm(*w_, c, x, f);
  step.logits.resize(std::size_t(c.vocabSize));
  if (const StoredMatrix& h = w_->headStored) {
    if (c.headInputScale != 1.0f) f *= c.headInputScale;  // T5's tied head
    matVec(h.type, h.data, h.rows, h.cols, f.data(), step.logits.data());
    if (const float* b = w_->global(Global::HeadBias))  // BART's final_logits_bias
      for (std::size_t v = 0; v < step.logits.size(); ++v) step.logits[v] += b[v];
    softcapLogits(c, step.logits.data(), step.logits.size());
  } else {
    MatrixRM logits;
    unembed(*w_, c, f, logits);
    std::copy_n(logits.data(), logits.size(), step.logits.data());
  }
  return step;
}

}  // namespace attnviz
