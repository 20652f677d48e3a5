// attnviz core: GPT-2-family language models (Hugging Face GPT2LMHeadModel checkpoints) and their
// forward pass, with the activations the views need and interventions inside the pass.
//
// A model folder, as it is downloaded: config.json, model.safetensors (F32, F16 or BF16; keys with
// or without "transformer."; lm_head.weight or tied to wte), vocab.json, merges.txt. The Hugging
// Face cache layout (models--NAME/snapshots/<hash>/ with symlinks into blobs/) opens as it is.
//
// The pass, per the GPT-2 paper and Hugging Face's GPT2Model (pre-LayerNorm blocks):
//   x = wte[ids] + wpe[0..T)                               x: [T, d]
//   for each layer l:  a = ln_1(x); q,k,v = split(a W_attn + b_attn) into H heads of d/H
//                      o_h = attention(q_h, k_h, v_h) (the engine: causal mask always on,
//                            plus the layer's mask, temperature and ALiBi); ablated heads o_h = 0
//                      x += concat(o) W_proj + b_proj
//                      x += act(ln_2(x) W_fc + b_fc) W_mlp + b_mlp
//   logits = ln_f(x) W_lm^T                                 logits: [T, V]
// Weights are used in place from the mapped file when they are F32 and aligned; F16 and BF16
// tensors are converted to float32 once, at load.
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/gpt2_bpe.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

enum class Gpt2Activation {
  GeluTanh,  // "gelu_new", "gelu_fast", "gelu_pytorch_tanh": 0.5x(1 + tanh(sqrt(2/pi)(x +
             // 0.044715x^3)))
  GeluErf,   // "gelu": 0.5x(1 + erf(x / sqrt 2))
  Relu,      // "relu"
};

struct Gpt2Config {
  int nLayer = 0, nHead = 0, nEmbd = 0;
  int nInner = 0;      // n_inner, or 4 n_embd when null
  int nPositions = 0;  // n_positions (n_ctx in old files)
  int vocabSize = 0;
  float layerNormEps = 1e-5f;
  Gpt2Activation activation = Gpt2Activation::GeluTanh;
  std::string activationName = "gelu_new";

  int headDim() const { return nEmbd / nHead; }
};

// Reads and checks config.json. Throws InputError "<path>: <problem>" for a missing or malformed
// field, n_embd not divisible by n_head, an unknown activation or a GPT-2 variant the pass does
// not implement (scale_attn_by_inverse_layer_idx, unscaled attention, another model_type).
Gpt2Config loadGpt2Config(const std::string& path);
// The same from the file's text; `name` is what errors say.
Gpt2Config parseGpt2Config(const std::string& text, const std::string& name);

// The files of a model folder. `dir` may be the folder itself, a Hugging Face cache snapshot, or
// the cache's models--NAME folder (refs/main, or its only snapshot, is used).
struct ModelFiles {
  std::string dir, config, weights, vocab, merges;
};

// Finds the files. Throws InputError naming the missing file; a folder with pytorch_model.bin
// and no model.safetensors gets a message that says how to convert it. `needWeights` = false
// for the tokenizer alone.
ModelFiles locateModelFiles(const std::string& dir, bool needWeights = true);

// config.json + vocab.json + merges.txt: what `attnviz tokenize` needs.
Gpt2Tokenizer loadModelTokenizer(const std::string& dir);

// What the pass changes in one layer ("interventions are data": the CLI, the GUI and the tests
// all say it this way).
struct LayerIntervention {
  std::vector<int> ablatedHeads;  // these heads' outputs are zeroed before W_proj
  MaskSpec mask;                  // combined with the causal mask, which always stays on
  float temperature = 1.0f;       // tau > 0

  bool any() const { return !ablatedHeads.empty() || mask.any() || temperature != 1.0f; }
};

// One entry per layer (empty = no intervention anywhere).
struct Interventions {
  std::vector<LayerIntervention> layers;

  // The entry of `layer`, growing the list to nLayer entries first.
  LayerIntervention& layer(int layer, int nLayer);
  const LayerIntervention* find(int layer) const;
  // Ablates head H of layer L; throws InputError when out of range.
  void ablate(int layer, int head, const Gpt2Config& c);
  // The same mask and temperature in every layer.
  void setAll(const MaskSpec& mask, float temperature, int nLayer);
};

// Per layer, what the views read. Shapes with T tokens, H heads, d_h = d / H.
struct LayerActivations {
  MatrixRM residualIn;         // [T, d] the residual stream entering the layer (re-runs start here)
  Tensor3 q, k, v;             // [H, T, d_h]
  Tensor3 weights;             // [H, T, T] attention weights after the layer's mask and temperature
  std::vector<RowStats> rows;  // [H * T] as in AttentionResult
};

struct ForwardResult {
  std::vector<int> ids;                  // [T]
  std::vector<LayerActivations> layers;  // [L]
  MatrixRM residualOut;                  // [T, d] the stream after the last layer, before ln_f
  MatrixRM logits;                       // [T, V]
  Interventions interventions;           // what the pass ran with
};

// A next-token candidate.
struct TokenProb {
  int id = 0;
  float prob = 0.0f;
};

class Gpt2Model {
 public:
  // fraction in [0, 1] and what is being done ("validating model.safetensors", ...).
  using Progress = std::function<void(double fraction, const std::string& what)>;

  // Locates, validates and maps a model folder; nothing is used before everything is checked.
  // Throws InputError "<file>: <problem>" (never a half-loaded model).
  static std::unique_ptr<Gpt2Model> open(const std::string& dir, const Progress& progress = {});

  ~Gpt2Model();
  Gpt2Model(const Gpt2Model&) = delete;
  Gpt2Model& operator=(const Gpt2Model&) = delete;

  const Gpt2Config& config() const { return config_; }
  const Gpt2Tokenizer& tokenizer() const { return tokenizer_; }
  const ModelFiles& files() const { return files_; }
  // "F32 (mapped)", "F16 (converted to F32)", ...
  const std::string& weightsDescription() const { return weightsDescription_; }

  // Text -> ids; throws InputError when the text is empty or longer than n_positions tokens.
  std::vector<int> encode(const std::string& text) const;
  // Throws InputError when an id is outside the vocab, ids are empty or more than n_positions.
  void checkIds(const std::vector<int>& ids) const;

  // forward() and rerunFrom() are const: each pass has its own workspace and engine, so a worker
  // thread may run one while the UI reads another ForwardResult.
  // The whole pass. Throws InputError for bad ids or interventions.
  ForwardResult forward(const std::vector<int>& ids, const Interventions& iv = {}) const;

  // Re-runs layers >= `fromLayer` (and the logits) from the cached residual stream with new
  // interventions; layers below keep their activations. Interventions in those lower layers must
  // be unchanged for the result to equal a full forward(). 0 <= fromLayer <= nLayer.
  void rerunFrom(ForwardResult& r, int fromLayer, const Interventions& iv) const;

  // The k most likely next tokens after position `pos` (-1 = the last), most likely first.
  static std::vector<TokenProb> topK(const ForwardResult& r, int k, int pos = -1);

  struct Weights;  // views into the mapped file or converted buffers (model.cpp)

 private:
  Gpt2Model();
  Gpt2Config config_;
  Gpt2Tokenizer tokenizer_;
  ModelFiles files_;
  std::string weightsDescription_;
  std::unique_ptr<Weights> w_;

  struct Workspace;
  void runLayer(ForwardResult& r, int layer, const Interventions& iv, Workspace& ws) const;
  void finish(ForwardResult& r) const;
};

// Pieces of the pass, exposed for the benchmark's GEMM floor and for tests.
// out[T, n] = x[T, k] * W[k, n] (+ bias[n]), W row-major, split over the CPU threads by columns.
void gpt2Matmul(const MatrixRM& x, const float* W, const float* bias, int k, int n, MatrixRM& out);
// out[T, V] = x[T, d] * E[V, d]^T, E row-major (the tied embedding), split by rows of E.
void gpt2MatmulTransposed(const MatrixRM& x, const float* E, int V, int d, MatrixRM& out);

}  // namespace attnviz
