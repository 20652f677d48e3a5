// attnviz tests: a naive double-precision reference of the attention convention of
// docs/design/conventions.md.
//
// Written from the specification alone (docs/design/conventions.md), never from the engine's
// code, so that a test comparing the two can fail. Everything is plain loops in double:
//   L_ij = (q_i . k_j / sqrt(d_k) + b_ij) / tau,  -inf exactly where not allowed
//   A_i  = softmax over keys of L_i; a row with no allowed key is all zeros (and flagged)
//   O_i  = sum_j A_ij v_j
//   p_i  = i + (T_k - T_q)   (bottom-right alignment of the queries)
//   allowed(i,j) = [ (causal AND window) OR prefix OR sink ] AND NOT pad AND custom
//                  AND chunk AND doc AND expr
//   chunk: floor(j / C) == floor(p_i / C); doc: doc(p_i) == doc(j) (a position outside the keys
//   has no document); expr: the test supplies the predicate the expression text stands for.
//   softcap c: the scaled score s becomes c tanh(s / c) before bias, mask and tau.
// ALiBi slopes follow the recipe published with the ALiBi paper (Press et al., get_slopes):
// a geometric sequence starting at 2^(-8/n) for n a power of two; otherwise the slopes of the
// closest lower power of two followed by every other slope of twice that power.
//
// Only the plain data types of the public headers are used (Tensor3, MaskSpec, AttentionParams);
// no engine function is called.
#pragma once

#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <random>
#include <vector>

namespace attnviz::ref {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// --- ALiBi slopes, the paper's recipe ---------------------------------------------------------

inline std::vector<double> slopesPowerOfTwo(int n) {
  // start = 2^(-2^-(log2(n) - 3)) = 2^(-8/n); slope_h = start^(h+1)
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(n)) - 3.0)));
  std::vector<double> s;
  for (int h = 0; h < n; ++h) s.push_back(start * std::pow(start, h));
  return s;
}

inline std::vector<double> alibiSlopes(int n) {
  const double l = std::log2(double(n));
  if (l == std::floor(l)) return slopesPowerOfTwo(n);
  const int closest = 1 << int(std::floor(l));
  std::vector<double> s = slopesPowerOfTwo(closest);
  const std::vector<double> twice = alibiSlopes(2 * closest);
  for (std::size_t i = 0; i < twice.size() && int(s.size()) < n; i += 2) s.push_back(twice[i]);
  return s;
}

// --- the mask rule --------------------------------------------------------------------------

// What a mask expression means, written in C++ by the test: (h, i, j, T_q, T_k) -> may attend.
using ExprRef = std::function<bool(int h, int i, int j, int Tq, int Tk)>;

inline bool allowed(const MaskSpec& m, int h, int i, int j, int Tq, int Tk,
                    const ExprRef& expr = {}) {
  const long long p = (long long)i + (Tk - Tq);
  const bool causal = m.causal ? (j <= p) : true;
  const bool window = m.window > 0 ? (p - m.window < j && j <= p) : true;
  const bool prefix = m.prefix > 0 ? (j < m.prefix) : false;
  const bool sink = m.sink > 0 ? (j < m.sink) : false;
  const bool pad = m.pad > 0 ? (j >= Tk - m.pad) : false;
  bool custom = true;
  if (m.customKind == MaskSpec::Custom::Allow) {
    const int ch = m.custom.heads == 1 ? 0 : h;
    custom = m.custom.at(ch, i, j) != 0.0f;
  }
  const bool chunk =
      m.chunk > 0 ? std::floor(double(j) / m.chunk) == std::floor(double(p) / m.chunk) : true;
  bool doc = true;
  if (!m.docs.empty())
    doc = p >= 0 && p < Tk && m.docs.at(std::size_t(p)) == m.docs.at(std::size_t(j));
  bool ex = true;
  if (!m.expr.empty()) {
    if (!expr) throw std::logic_error("reference: the mask has an expression but no ExprRef");
    ex = expr(h, i, j, Tq, Tk);
  }
  return ((causal && window) || prefix || sink) && !pad && custom && chunk && doc && ex;
}

inline double bias(const MaskSpec& m, const std::vector<double>& slopes, int h, int i, int j,
                   int Tq, int Tk) {
  double b = 0.0;
  if (m.alibi) {
    const double p = double(i) + double(Tk - Tq);
    b -= slopes[h] * std::fabs(p - double(j));
  }
  if (m.customKind == MaskSpec::Custom::Bias) {
    const int ch = m.custom.heads == 1 ? 0 : h;
    b += double(m.custom.at(ch, i, j));
  }
  return b;
}

// --- the whole attention ----------------------------------------------------------------------

struct Row {
  double sum = 0, max = 0, entropy = 0;
  int argmax = -1;  // first index of the largest weight; -1 when fully masked
  bool fullyMasked = false;
};

struct Result {
  int H = 0, Tq = 0, Tk = 0, dv = 0;
  std::vector<double> scaled;   // [H, Tq, Tk]
  std::vector<double> logits;   // [H, Tq, Tk]
  std::vector<double> weights;  // [H, Tq, Tk]
  std::vector<double> output;   // [H, Tq, dv]
  std::vector<Row> rows;        // [H * Tq]
  double w(int h, int i, int j) const { return weights[(std::size_t(h) * Tq + i) * Tk + j]; }
  double l(int h, int i, int j) const { return logits[(std::size_t(h) * Tq + i) * Tk + j]; }
  double o(int h, int i, int c) const { return output[(std::size_t(h) * Tq + i) * dv + c]; }
  const Row& row(int h, int i) const { return rows[std::size_t(h) * Tq + i]; }
};

// kvGroup > 1: grouped-query attention, K and V hold q.heads / kvGroup heads and query head h
// reads K/V head h / kvGroup (the GQA papers' grouping: consecutive query heads share one).
inline Result attention(const Tensor3& q, const Tensor3& k, const Tensor3& v,
                        const AttentionParams& p, const ExprRef& expr = {}, int kvGroup = 1) {
  Result r;
  r.H = q.heads;
  r.Tq = q.rows;
  r.Tk = k.rows;
  r.dv = v.cols;
  const int H = r.H, Tq = r.Tq, Tk = r.Tk, dk = q.cols, dv = r.dv;
  const std::vector<double> slopes = p.mask.alibi ? alibiSlopes(H) : std::vector<double>{};
  const double tau = p.temperature;
  r.scaled.assign(std::size_t(H) * Tq * Tk, 0.0);
  r.logits.assign(r.scaled.size(), 0.0);
  r.weights.assign(r.scaled.size(), 0.0);
  r.output.assign(std::size_t(H) * Tq * dv, 0.0);
  r.rows.assign(std::size_t(H) * Tq, Row{});
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < Tq; ++i) {
      const std::size_t base = (std::size_t(h) * Tq + i) * Tk;
      double mx = -kInf;
      for (int j = 0; j < Tk; ++j) {
        double dot = 0.0;
        for (int c = 0; c < dk; ++c)
          dot += double(q.at(h, i, c)) * double(k.at(h / kvGroup, j, c));
        const double s = dot / std::sqrt(double(dk));
        r.scaled[base + j] = s;
        const double c = p.mask.softcap;
        const double capped = c > 0 ? c * std::tanh(s / c) : s;
        double l = -kInf;
        if (allowed(p.mask, h, i, j, Tq, Tk, expr))
          l = (capped + bias(p.mask, slopes, h, i, j, Tq, Tk)) / tau;
        r.logits[base + j] = l;
        if (l > mx) mx = l;
      }
      Row& row = r.rows[std::size_t(h) * Tq + i];
      if (mx == -kInf) {
        row.fullyMasked = true;
        continue;  // weights and output stay zero
      }
      double z = 0.0;
      for (int j = 0; j < Tk; ++j) z += std::exp(r.logits[base + j] - mx);
      for (int j = 0; j < Tk; ++j) {
        const double a = std::exp(r.logits[base + j] - mx) / z;
        r.weights[base + j] = a;
        row.sum += a;
        if (row.argmax < 0 || a > row.max) {
          row.argmax = j;
          row.max = a;
        }
        if (a > 0) row.entropy -= a * std::log(a);
      }
      for (int c = 0; c < dv; ++c) {
        double acc = 0.0;
        for (int j = 0; j < Tk; ++j)
          acc += r.weights[base + j] * double(v.at(h / kvGroup, j, c));
        r.output[(std::size_t(h) * Tq + i) * dv + c] = acc;
      }
    }
  }
  return r;
}

// --- inputs -----------------------------------------------------------------------------------

// Seeded normal values (std::mt19937 + normal_distribution), scaled by `scale`.
inline Tensor3 randomTensor(int H, int rows, int cols, std::uint32_t seed, float scale = 1.0f) {
  Tensor3 t(H, rows, cols);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& x : t.data) x = scale * dist(gen);
  return t;
}

// |a - b| <= abs + rel * |b|, with equal infinities counting as equal.
inline bool close(double a, double b, double absTol = 1e-5, double relTol = 1e-4) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= absTol + relTol * std::fabs(b);
}

}  // namespace attnviz::ref
