// The synthetic inputs of a scene (attnviz/session/scene_inputs.h): tokens, token vectors and
// the per-head Q, K, V and W_o that need no file.
//
//
// Each token vector is x = [ e(token) | pos(position) | 1 ]: a deterministic unit embedding
// hashed from the token text and the seed, sinusoidal positions, and a constant feature. Every
// head archetype is a choice of W_q and W_k acting on those parts, so its pattern comes out of
// the real product Q K^T:
//   previous-token  q_i = c pos(i),  k_j = c R pos(j) = c pos(j+1)   -> peak at j = i - 1
//   first-token     q_i = c pos(0) (from the constant),  k_j = c pos(j)  -> peak at j = 0
//   same-token      q_i = c e(t_i),  k_j = c e(t_j)                   -> peaks where t_j = t_i
//   local-window    q_i = c pos(i),  k_j = c pos(j), smaller c        -> decays with |i - j|
//   broad           tiny random projections                            -> near uniform
//   random          random projections
// R is the rotation taking each (sin wj, cos wj) pair to (sin w(j+1), cos w(j+1)).
#include "attnviz/session/scene_inputs.h"

#include "attnviz/engine/engine.h"
#include "attnviz/formats/npy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

namespace {

// splitmix64: a small, well-mixed, platform-independent generator.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double gauss() {
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

std::uint64_t fnv1a(const std::string& s, std::uint64_t seed) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ (seed * 0x100000001b3ULL);
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

struct Layout {
  int dTok, dPos, bias;  // column ranges in x: [0, dTok), [dTok, dTok + dPos), bias
};

Layout layoutFor(int dModel) {
  int dPos = std::min(32, dModel / 2);
  dPos -= dPos % 2;
  return Layout{dModel - dPos - 1, dPos, dModel - 1};
}

double frequency(int m, int dPos) { return std::pow(10000.0, -2.0 * m / dPos); }

// X [T, dModel] for tokens at positions 0, step, 2 step, ...
MatrixRM tokenVectors(const std::vector<std::string>& tokens, const Layout& L, int dModel,
                      std::uint32_t seed, double step = 1.0) {
  MatrixRM X = MatrixRM::Zero(static_cast<int>(tokens.size()), dModel);
  for (int t = 0; t < X.rows(); ++t) {
    Rng rng{fnv1a(tokens[t], seed)};
    double norm = 0.0;
    for (int c = 0; c < L.dTok; ++c) {
      X(t, c) = static_cast<float>(rng.gauss());
      norm += double(X(t, c)) * X(t, c);
    }
    X.row(t).head(L.dTok) /= static_cast<float>(std::sqrt(std::max(norm, 1e-12)));
    for (int m = 0; m < L.dPos / 2; ++m) {
      const double a = t * step * frequency(m, L.dPos);
      X(t, L.dTok + 2 * m) = static_cast<float>(std::sin(a));
      X(t, L.dTok + 2 * m + 1) = static_cast<float>(std::cos(a));
    }
    X(t, L.bias) = 1.0f;
  }
  return X;
}

MatrixRM randomMatrix(int rows, int cols, double scale, Rng& rng) {
  MatrixRM m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = static_cast<float>(rng.gauss() * scale);
  return m;
}

// W_q and W_k ([dModel, dk]) for one archetype.
void archetypeWeights(Archetype a, const Layout& L, int dModel, int dk, float sharpness, Rng& rng,
                      MatrixRM& Wq, MatrixRM& Wk) {
  // Small content noise everywhere, so no head is a perfectly clean picture.
  const double noise = 0.35 / std::sqrt(double(dModel));
  Wq = randomMatrix(dModel, dk, noise, rng);
  Wk = randomMatrix(dModel, dk, noise, rng);
  const double rootD = std::sqrt(double(dk));
  const int pairs = std::min(L.dPos, dk) / 2;  // highest frequencies first
  auto setPositional = [&](double c2, bool shiftKeys, bool constantQuery) {
    const double c = std::sqrt(c2 * rootD * sharpness);
    for (int m = 0; m < pairs; ++m) {
      const int xs = L.dTok + 2 * m, xc = xs + 1, qs = 2 * m, qc = qs + 1;
      if (constantQuery) {
        Wq(L.bias, qc) += static_cast<float>(c);  // pos(0) = (0, 1) in every pair
      } else {
        Wq(xs, qs) += static_cast<float>(c);
        Wq(xc, qc) += static_cast<float>(c);
      }
      if (shiftKeys) {
        const double w = frequency(m, L.dPos), cw = std::cos(w), sw = std::sin(w);
        // (sin, cos) -> (sin cw + cos sw, cos cw - sin sw)
        Wk(xs, qs) += static_cast<float>(c * cw);
        Wk(xc, qs) += static_cast<float>(c * sw);
        Wk(xs, qc) += static_cast<float>(-c * sw);
        Wk(xc, qc) += static_cast<float>(c * cw);
      } else {
        Wk(xs, qs) += static_cast<float>(c);
        Wk(xc, qc) += static_cast<float>(c);
      }
    }
  };
  switch (a) {
    case Archetype::PreviousToken:
      setPositional(4.0, true, false);
      break;
    case Archetype::FirstToken:
      setPositional(3.0, false, true);
      break;
    case Archetype::LocalWindow:
      setPositional(1.2, false, false);
      break;
    case Archetype::SameToken: {
      const double c = std::sqrt(7.0 * rootD * sharpness);
      for (int t = 0; t < std::min(L.dTok, dk); ++t) {
        Wq(t, t) += static_cast<float>(c);
        Wk(t, t) += static_cast<float>(c);
      }
      break;
    }
    case Archetype::Broad:
      Wq *= 0.15f;
      Wk *= 0.15f;
      break;
    case Archetype::Random: {
      const double s = std::sqrt(2.0 * rootD * sharpness) / std::sqrt(double(dModel)) * 1.5;
      Wq = randomMatrix(dModel, dk, s, rng);
      Wk = randomMatrix(dModel, dk, s, rng);
      break;
    }
  }
}

}  // namespace

SceneInputs buildSceneInputs(const Scene& s) {
  SceneInputs in;
  if (s.heads < 1 || s.heads > 64) throw InputError("scene: heads must be in [1, 64]");
  if (s.dModel < 24 || s.dModel > 1024) throw InputError("scene: d_model must be in [24, 1024]");
  if (s.dHead < 4 || s.dHead > 256) throw InputError("scene: d_head must be in [4, 256]");

  if (!s.qPath.empty() || !s.kPath.empty() || !s.vPath.empty()) {
    if (s.qPath.empty() || s.kPath.empty() || s.vPath.empty()) {
      throw InputError("scene: tensors need all of q, k and v");
    }
    in.q = loadTensorNpy(s.qPath);
    in.k = loadTensorNpy(s.kPath);
    in.v = loadTensorNpy(s.vPath);
    validateInputs(in.q, in.k, in.v);
    auto labels = [](const std::string& text, int n) {
      std::vector<std::string> t = tokenize(text);
      if (static_cast<int>(t.size()) != n) {
        t.clear();
        for (int i = 0; i < n; ++i) t.push_back(std::to_string(i));
      }
      return t;
    };
    in.queryTokens = labels(s.queryText, in.q.rows);
    in.keyTokens = labels(s.mode == Mode::Cross ? s.keyText : s.queryText, in.k.rows);
    return in;
  }

  std::vector<std::string> tokens = tokenize(s.queryText);
  if (tokens.empty()) throw InputError("scene: the query text has no tokens");
  std::vector<std::string> keys = s.mode == Mode::Cross ? tokenize(s.keyText) : tokens;
  if (keys.empty()) throw InputError("scene: the key text has no tokens");
  if (static_cast<int>(tokens.size()) > kMaxSceneTokens ||
      static_cast<int>(keys.size()) > kMaxSceneTokens) {
    throw InputError("scene: more than " + std::to_string(kMaxSceneTokens) + " tokens");
  }
  const Layout L = layoutFor(s.dModel);
  MatrixRM Xq, Xk;
  if (s.mode == Mode::Decode) {
    const int n = static_cast<int>(tokens.size());
    const int step = s.decodeStep < 1 ? n : std::min(s.decodeStep, n);
    keys.assign(tokens.begin(), tokens.begin() + step);
    Xk = tokenVectors(keys, L, s.dModel, s.seed);
    Xq = Xk.bottomRows(1);
    in.queryTokens = {keys.back()};
  } else {
    // Cross-attention: the query sequence is spread evenly over the key sequence's positions,
    // so positional heads (local-window, previous-token) show a monotone alignment band, as
    // between a sentence and its translation.
    const double step = s.mode == Mode::Cross && tokens.size() > 1
                            ? double(keys.size() - 1) / double(tokens.size() - 1)
                            : 1.0;
    Xq = tokenVectors(tokens, L, s.dModel, s.seed, step);
    Xk = s.mode == Mode::Cross ? tokenVectors(keys, L, s.dModel, s.seed) : Xq;
    in.queryTokens = tokens;
  }
  in.keyTokens = keys;
  const int H = s.heads, dk = s.dHead, Tq = static_cast<int>(Xq.rows()),
            Tk = static_cast<int>(Xk.rows());
  in.xq = Tensor3(1, Tq, s.dModel);
  in.xq.mat(0) = Xq;
  in.xk = Tensor3(1, Tk, s.dModel);
  in.xk.mat(0) = Xk;
  in.q = Tensor3(H, Tq, dk);
  in.k = Tensor3(H, Tk, dk);
  in.v = Tensor3(H, Tk, dk);
  const std::vector<Archetype> all = allArchetypes();
  for (int h = 0; h < H; ++h) {
    const Archetype a =
        h < static_cast<int>(s.archetypes.size()) ? s.archetypes[h] : all[h % all.size()];
    Rng rng{(std::uint64_t(s.seed) << 20) ^ (std::uint64_t(h) * 0x9e3779b9ULL) ^ 0xa77e11ULL};
    MatrixRM Wq, Wk;
    archetypeWeights(a, L, s.dModel, dk, s.sharpness, rng, Wq, Wk);
    const MatrixRM Wv = randomMatrix(s.dModel, dk, 1.0 / std::sqrt(double(s.dModel)), rng);
    in.q.mat(h) = Xq * Wq;
    in.k.mat(h) = Xk * Wk;
    in.v.mat(h) = Xk * Wv;
  }
  Rng rng{std::uint64_t(s.seed) * 0x51ed27ULL + 7};
  in.wo = Tensor3(1, H * dk, s.dModel);
  in.wo.mat(0) = randomMatrix(H * dk, s.dModel, 1.0 / std::sqrt(double(H * dk)), rng);
  return in;
}

Tensor3 blockOutput(const Tensor3& o, const Tensor3& wo) {
  if (wo.rows != o.heads * o.cols) {
    throw InputError("W_o has shape " + wo.shapeString() + ", expected [1, " +
                     std::to_string(o.heads * o.cols) + ", d_model]");
  }
  MatrixRM concat(o.rows, o.heads * o.cols);
  for (int h = 0; h < o.heads; ++h) concat.middleCols(h * o.cols, o.cols) = o.mat(h);
  Tensor3 out(1, o.rows, wo.cols);
  out.mat(0).noalias() = concat * wo.mat(0);
  return out;
}

}  // namespace attnviz
