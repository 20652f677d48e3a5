// attnviz core (model): why a head attends where it does (docs/why-here.md).
//
// QK attribution: the pre-softmax score of head H at query I and key J in layer L, split over
// what wrote the residual stream entering layer L. The stream at a position is exactly the sum
// of its components: `embed` (the scaled token embedding plus any learned position row), each
// earlier layer's heads `L{l}H{h}` (a head's output through its slice of W_o, after any
// post-attention norm), each earlier layer's `L{l}mlp` (after any post-MLP norm), and `bias`
// (the output-projection and MLP output biases). Each component is carried to q at I and to k at
// J by the layer's own path with every norm's per-token scale frozen at the value the pass
// computed there, then W_Q / W_K without bias, the q/k norm (scale frozen) and RoPE at the
// position; the path's constant terms (LayerNorm's beta, the q/k biases) are one more item on
// each side, `const`. C[a, b] = scale * (q_a . k_b), so sum(C) is the pass's score before
// temperature, softcap, masks and position biases.
//
// Composition scores (Elhage et al. 2021, as TransformerLens computes them) between every pair
// of heads in different layers, from the weights alone.
#pragma once

#include "attnviz/model/model.h"

#include <string>
#include <vector>

namespace attnviz {

// Empty when the split is exact for the model's family (the pre-norm decoders gpt2, llama,
// mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, olmo2), else one sentence saying why not.
std::string qkSplitRefusal(const ModelConfig& c);

// What a pass must keep for splitQk at `layer`: each earlier layer's head outputs, and the
// layer's own q and k.
Capture qkSplitCapture(int layer);

struct QkSplit {
  int layer = 0, head = 0, query = 0, key = 0;
  std::vector<std::string> names;  // n: the components in order, then "const"
  std::vector<double> c;           // [n, n] row-major: rows the q side, columns the k side
  double score = 0.0;              // the pass's own scaled q . k (before tau, softcap, masks)
  double sum = 0.0;                // sum of c
  int n() const { return static_cast<int>(names.size()); }
  double at(int a, int b) const { return c[std::size_t(a) * names.size() + std::size_t(b)]; }
};

// Splits the score of (layer, head, query, key) in the pass r (run with qkSplitCapture(layer)
// or more). Throws InputError for a family qkSplitRefusal refuses, a pass that lacks what it
// needs, or a layer, head or position outside the model or the text.
QkSplit splitQk(const Model& m, const ForwardResult& r, int layer, int head, int query, int key);

enum class CompositionKind { Q, K, V };

// Composition scores [L, H, L, H] indexed [l2, h2, l1, h1] (row-major), NaN where l1 >= l2:
// with the block input norm's gain folded into the rows of W_Q, W_K and W_V (no centering; RoPE
// and q/k norms left out), W_QK = W_Q W_K^T and W_OV = W_V W_O per query head (a GQA head uses
// its group's K and V), row-vector convention; Q = |W_OV1 W_QK2|_F, K = |W_OV1 W_QK2^T|_F,
// V = |W_OV1 W_OV2|_F, each over |W_OV1|_F |W_QK2|_F (V: |W_OV1|_F |W_OV2|_F). Throws
// InputError as splitQk does for a family it refuses.
std::vector<float> compositionScores(const Model& m, CompositionKind kind);

// What a composition score is by chance: the score of two heads whose W_Q, W_K, W_V [d, d_h] and
// W_O [d_h, d] are drawn with independent N(0, 1) entries, for a model's d and d_h. The three
// kinds have one distribution (each is |A1 B1 A2 B2^T|_F over |A1 B1|_F |A2 B2^T|_F with four
// independent Gaussian factors), close to 1 / sqrt(d) for d_h << d. Mean and standard deviation
// over `draws` pairs from a fixed seed, so the same shapes always give the same figure.
struct CompositionBaseline {
  double mean = 0.0, sd = 0.0;
  int draws = 0;
};
CompositionBaseline compositionBaseline(int d, int dh, int draws = 64, unsigned long long seed = 1);

}  // namespace attnviz
