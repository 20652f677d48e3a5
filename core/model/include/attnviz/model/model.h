// attnviz model: language models of every supported family as stacks of blocks, their forward
// pass, the activations the views need, and interventions inside the pass.
//
// One layer skeleton for every family. A family is data: ModelConfig describes the block (norm
// kind and placement, q/k norm, score scale, softcaps, causal or bidirectional, the window and
// RoPE base per layer, biases, fused tensors, scaled embeddings), and the family table
// (family_table.cpp and its families_*.cpp rows) maps config.json keys, GGUF metadata and tensor names onto it. The full
// pass, a decode step, the Q/K/V recompute and attribution all run that one skeleton
// (pass.cpp's Workspace::block):
//
//   x = embed[ids] * embedScale (+ learned positions)          x: [T, d]
//   for each layer l, for each attention site of the layer (decoders: one, self):
//      a = pre-norm(x) (or x when the norm comes after)
//      q = a W_q (+b), k = a W_k (+b), v = a W_v (+b)  (fused qkv: views of one matrix)
//      q, k normalised (per head, or over the whole width) when the family says so
//      q, k rotated by position (RoPE families, the layer's base) unless the layer's RoPE is off
//      o_h = attention(q_h * scale', k_{g(h)}, v_{g(h)}), g(h) = h / (H / H_kv), with the
//            family's own mask (causal or bidirectional, the layer's window, its softcap) AND
//            the layer's intervention mask and temperature; ablated o_h = 0
//      u = concat(o) W_o (+b)
//      placement: pre   x += u;  sandwich  x += norm'(u);  after  x += norm(u)
//   then the MLP (act(m W_fc + b) W_proj + b, or (act(m W_gate) * m W_up) W_down) the same way
//   logits = softcap(norm_f(x) W_lm^T)                          logits: [T, V]
//
// Weights are typed views, one slot per skeleton tensor; F32 tensors are used in place from the
// mapped file, F16/BF16 (and GGUF's quantized blocks) are converted to float32 at load while
// those copies fit the memory budget, else kept as stored and converted a layer at a time as a
// pass runs. A decode step reads every [out, in] matrix as stored (engine's matVec).
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "attnviz/engine/request_grammar.h"  // SiteId, ResidualEdit
#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/tokenizer.h"

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnviz {

enum class Activation {
  GeluTanh,  // "gelu_new", "gelu_fast", "gelu_pytorch_tanh": 0.5x(1 + tanh(sqrt(2/pi)(x +
             // 0.044715x^3)))
  GeluErf,   // "gelu": 0.5x(1 + erf(x / sqrt 2))
  Relu,      // "relu"
  Silu,      // "silu", "swish": x sigmoid(x)
};

enum class NormKind { LayerNorm, RMSNorm };
enum class MlpKind { Plain, Gated };  // act(x W_fc + b) W_proj + b, or (act(x W_g) * x W_u) W_d
// Learned: a table of rows; Rope: rotations of q and k; Sinusoidal: Vaswani et al.'s fixed
// sin/cos rows added to the embeddings (Marian: sines in the first half, cosines in the second).
// Relative: T5's learned bias per head and distance bucket, added to the self sites' scores.
enum class PositionKind { Learned, Rope, Sinusoidal, Relative };
// Which dimensions of a head rotate together: HF's rotate-half (dimension i with i + d/2; also
// llama.cpp's NEOX kind, Qwen2's GGUF tensors) or adjacent pairs (2i with 2i + 1: Meta's
// checkpoints and llama.cpp's `llama` GGUF tensors).
enum class RopeStyle { HalfSplit, Interleaved };

struct RopeScaling {
  enum class Kind { None, Linear, Llama3, LongRope } kind = Kind::None;
  float factor = 1.0f;
  float lowFreqFactor = 1.0f, highFreqFactor = 4.0f;  // llama3
  int originalMaxPositions = 8192;                    // llama3, longrope
  // LongRoPE (Phi-3 and Phi-4 long-context models): each rotated pair's frequency divided by its
  // short factor while the sequence is at most originalMaxPositions long, by its long factor
  // beyond; cos and sin times attentionFactor.
  std::vector<float> shortFactor, longFactor;
  float attentionFactor = 1.0f;
};

// Where a sub-block's norms sit around its function f (attention or MLP):
//   Pre:      x += f(norm(x))              GPT-2, LLaMA, Mistral, Qwen2/3, Phi-3
//   Sandwich: x += norm_post(f(norm(x)))   Gemma 2 and 3 (four norms a layer)
//   After:    x += norm(f(x))              OLMo 2
//   Post:     x = norm(x + f(x))           BERT, BART, Marian (post-norm)
enum class NormPlacement { Pre, Sandwich, After, Post };
// Normalisation of q and k before RoPE: none, RMSNorm over each head's d_h values (Qwen3,
// Gemma 3), or over the whole projection's width (OLMo 2).
enum class QkNorm { None, PerHead, Whole };

// The kinds of attention site a layer holds. Decoders have one, DecoderSelf; encoders
// EncoderSelf; an encoder-decoder's decoder layers DecoderSelf and Cross (keys from the encoder).
enum class SiteKind { DecoderSelf, EncoderSelf, Cross };
const char* siteKindName(SiteKind k);  // "self", "encoder self", "cross"

// SiteId, one attention site of a model: attnviz/engine/request_grammar.h (the request strings
// name sites).

struct ModelConfig {
  std::string family = "gpt2";  // the family table's row: "gpt2", "llama", "qwen3", ...
  // The row whose tensor names the checkpoint uses, when not the family's own (a gemma3
  // image-text checkpoint runs the gemma3_text family from its "gemma3" row's names); empty: the
  // family's.
  std::string layout;
  // What the model's info adds in a line (a part of the checkpoint that was not loaded); empty:
  // nothing.
  std::string note;
  int nLayer = 0;
  int nHead = 0;    // query heads
  int nKvHead = 0;  // key/value heads (GQA: fewer; MQA: 1)
  int nEmbd = 0;    // hidden size d
  int headSize = 0;
  int nInner = 0;      // MLP width
  int nPositions = 0;  // context length
  int vocabSize = 0;
  NormKind norm = NormKind::LayerNorm;
  float layerNormEps = 1e-5f;
  PositionKind positions = PositionKind::Learned;
  RopeStyle ropeStyle = RopeStyle::HalfSplit;
  float ropeTheta = 10000.0f;
  int ropeDim = 0;  // dimensions of each head that rotate (the first ropeDim); = headSize
  RopeScaling ropeScaling;
  // Per-frequency divisors (GGUF's rope_freqs.weight: how llama.cpp stores Llama 3.1's scaling);
  // empty = none.
  std::vector<float> ropeFreqFactors;
  bool qkvBias = false, outBias = false, mlpBias = false;
  bool normBias = false;  // LayerNorms with a bias where the family makes it optional (ModernBERT)
  bool headDenseBias = false;  // the masked-LM head's dense layer has a bias (ModernBERT's
                               // classifier_bias)
  int slidingWindow = 0;    // W >= 1: the model's own window (Mistral, Qwen2 when enabled)
  int windowFromLayer = 0;  // layers >= this use the window (Qwen2's max_window_layers)
  MlpKind mlp = MlpKind::Plain;
  Activation activation = Activation::GeluTanh;
  std::string activationName = "gelu_new";
  bool tiedHead = true;
  std::optional<int> bosId, eosId;  // from config.json / GGUF, when given
  // Every id that ends generation (config.json's eos_token_id list, generation_config.json's,
  // GGUF's eos and eot ids); eosId is the first.
  std::vector<int> eosIds;

  // ---- The block, as data (the skeleton reads these; families set them in their row)
  NormPlacement normPlacement = NormPlacement::Pre;
  float normWeightOffset = 0.0f;  // RMSNorm weight used as (offset + w): Gemma's 1 + w
  QkNorm qkNorm = QkNorm::None;
  float scoreScale = 0.0f;        // s = q.k * scoreScale; 0 = 1 / sqrt(headSize)
  float attnSoftcap = 0.0f;       // the scores' c * tanh(s / c) (Gemma 2); 0 = none
  float logitSoftcap = 0.0f;      // the final logits' cap (Gemma 2); 0 = none
  bool causal = true;             // false: bidirectional (encoders)
  float embedScale = 1.0f;        // the embedding rows times this (Gemma: sqrt(d))
  // Per layer: the model's own window (0 = global) and RoPE base; empty = the rules above
  // (slidingWindow from windowFromLayer on; ropeTheta everywhere).
  std::vector<int> layerWindows;
  std::vector<float> layerRopeTheta;
  // Encoders: the token type vocabulary (0: none) and the first position id (RoBERTa:
  // padding_idx + 1; nPositions is then what remains of max_position_embeddings).
  int typeVocabSize = 0;
  int positionOffset = 0;
  // The masked-LM head's activation between its dense layer and its LayerNorm (BERT and
  // DistilBERT: the model's; RoBERTa: always exact GELU).
  Activation headActivation = Activation::GeluErf;
  bool scaleLocalRope = true;     // false: rope scaling applies to global layers only (Gemma 3)
  // Encoder-decoders (BART): the encoder stack's layers (stack 1; 0 = none) and the id the
  // decoder starts from. The encoder's layers are bidirectional blocks of the same shape as the
  // decoder's, without the cross site; nLayer counts the decoder's.
  int nEncoderLayer = 0;
  std::optional<int> decoderStartId;
  std::optional<int> padId;  // config.json's pad_token_id (encoder-decoders never generate it)
  // T5's relative position buckets (PositionKind::Relative): their number and the distance the
  // last one starts at; each stack's table is shared by its layers.
  int relBuckets = 0, relMaxDistance = 128;
  // The final hidden states times this before the unembedding (T5 with a tied head: d^-1/2).
  float headInputScale = 1.0f;

  int headDim() const { return headSize; }
  int kvGroup() const { return nHead / nKvHead; }
  int kvHeadOf(int h) const { return h / kvGroup(); }
  // The model's own sliding window in `layer` (0 = none).
  int windowOf(int layer) const {
    if (!layerWindows.empty()) {
      return layer >= 0 && layer < int(layerWindows.size()) ? layerWindows[layer] : 0;
    }
    return slidingWindow > 0 && layer >= windowFromLayer ? slidingWindow : 0;
  }
  // The RoPE base of `layer` (-1: the model's).
  float ropeThetaOf(int layer) const {
    return layer >= 0 && layer < int(layerRopeTheta.size()) ? layerRopeTheta[layer] : ropeTheta;
  }
  // The score scale the skeleton applies (1 / sqrt(d_h) unless the family sets its own).
  float scoreScaleOf() const { return scoreScale > 0 ? scoreScale : 1.0f / std::sqrt(float(headSize)); }
  // The attention sites of a layer of stack `stack` (decoders and encoders: one, DecoderSelf or
  // EncoderSelf).
  std::vector<SiteKind> sitesOf(int layer, int stack = 0) const;
  // The stacks (1: a decoder or an encoder; 2: an encoder-decoder) and the layers of each.
  int stacks() const { return nEncoderLayer > 0 ? 2 : 1; }
  int layersOf(int stack) const { return stack == 0 ? nLayer : stack == 1 ? nEncoderLayer : 0; }
  bool encoderDecoder() const { return nEncoderLayer > 0; }
  // Every attention site in the order a pass runs them (an encoder's stack first, then layer by
  // layer, a layer's sites in order).
  std::vector<SiteId> sites() const;
  // Whether `s` names a site of this model.
  bool hasSite(const SiteId& s) const;
  // A site's short name: "L3" while every layer has one site in one stack (decoders, encoders:
  // the names they always had), else with its stack and kind ("enc L3", "L3 cross").
  std::string siteName(const SiteId& s) const;
  // Whether `id` ends generation (any of eosIds, or eosId).
  bool isEos(int id) const;
  // RoPE's inverse frequencies, one per rotated pair, after the scaling, for `layer`'s base
  // (-1: the model's).
  // seqLen: the length of the sequence the pass rotates (LongRoPE picks its factors by it; 0:
  // the short factors).
  std::vector<double> ropeInvFreq(int layer = -1, int seqLen = 0) const;
  // What RoPE multiplies cos and sin by in `layer` (LongRoPE's attention factor; else 1).
  float ropeAttentionFactor(int layer = -1) const;
  // "llama: 8 query heads, 2 KV heads (GQA), RMSNorm, RoPE θ=10000 (rotate-half), gated SiLU"
  std::string describe() const;
  // What the block does beyond a pre-norm LLaMA block ("norms before and after each sub-block,
  // scores soft-capped at 50"); empty for a plain one.
  std::string blockDescription() const;
  // One layer: "local, window 4096, RoPE θ = 10000" or "global, RoPE θ = 1e+06".
  std::string layerDescription(int layer) const;
};

// Reads and checks config.json (model_type gpt2, llama, mistral or qwen2). Throws InputError
// "<path>: <problem>" for a missing or malformed field, an unknown model_type, heads that do not
// divide, an unknown activation, an unknown rope_scaling or a variant the pass does not implement.
ModelConfig loadModelConfig(const std::string& path);
// The same from the file's text; `name` is what errors say.
ModelConfig parseModelConfig(const std::string& text, const std::string& name);

class GgufFile;

// The default memory budget for float32 copies of weights: 1 GiB, or a quarter of physical RAM
// when that is less.
std::int64_t defaultMemoryBudget();
// "1048576", "512K", "64M", "4G", "1T" (powers of 1024; "MB", "GiB" accepted) -> bytes. Throws
// InputError "'<text>' is not a size: ..." otherwise.
std::int64_t parseMemorySize(const std::string& text);
// 67108864 -> "64 MB".
std::string memorySizeText(std::int64_t bytes);
// A count in three significant digits and powers of 1000: 950 -> "950", 12345 -> "12.3 k",
// 124439808 -> "124 M", 1235814400 -> "1.24 B" (parameter counts).
std::string countText(long long n);
// The same from a GGUF file's metadata (general.architecture llama, qwen2, qwen3, gemma2, gemma3,
// phi3, olmo2 or gpt2; the <arch>.* keys; the vocabulary size from token_embd). llama.cpp's
// `llama` tensors keep Meta's adjacent RoPE pairs, the others' tensors rotate halves.
ModelConfig ggufModelConfig(const GgufFile& file);
// "Q4_K_M", "Q8_0", "F16", ... from general.file_type, else from the tensors' types.
std::string ggufFileTypeName(const GgufFile& file);

// The files of a model: a folder, or a .gguf file. `dir` may be the folder itself, a Hugging Face
// cache snapshot, or the cache's models--NAME folder (refs/main, or its only snapshot, is used;
// a snapshot of GGUF files alone gives its one .gguf file), or a name that resolveModelName
// (model_names.h) finds in the Hugging Face cache or Ollama's store.
struct ModelFiles {
  std::string dir, config;
  std::string weights;              // model.safetensors, the index, or the .gguf file
  std::vector<std::string> shards;  // the safetensors files (one unless sharded)
  std::string gguf;                 // set when the model is a GGUF file
};

// Finds the files. Throws InputError naming the missing file; a folder with pytorch_model.bin
// and no model.safetensors gets a message that says how to convert it; a shard named in the index
// but missing is named. `needWeights` = false for the tokenizer alone.
ModelFiles locateModelFiles(const std::string& dir, bool needWeights = true);
// The shard file names of model.safetensors.index.json's weight_map (sorted, each a plain file
// name). Throws InputError "<indexPath>: <problem>".
std::vector<std::string> parseShardIndex(const std::string& text, const std::string& indexPath);

// What `attnviz tokenize` needs: config.json and the tokenizer files (no weights), or a GGUF
// (vocab-only files included).
std::unique_ptr<Tokenizer> loadModelTokenizer(const std::string& path);

// ResidualEdit, one residual-stream value set inside the pass: attnviz/engine/request_grammar.h.

// What the pass changes in one layer ("interventions are data": the CLI, the GUI and the tests
// all say it this way).
struct LayerIntervention {
  std::vector<int> ablatedHeads;  // these query heads' outputs are zeroed before W_o
  // These heads' outputs are replaced, at every position, by their mean over the positions
  // (mean ablation; refused in a decode step, where one row is its own mean).
  std::vector<int> meanAblatedHeads;
  // The positions the mean is over: 0..meanUpTo (attribution at position P sets P, so that what
  // P reads never depends on later tokens); -1: every position.
  int meanUpTo = -1;
  // Activation patching: head h's output [T, d_h] is replaced by the given one (for example the
  // same head's output in another run of the same length).
  std::vector<std::pair<int, MatrixRM>> patchedHeads;
  MaskSpec mask;                  // ANDed with the model's own mask (causal, its window)
  float temperature = 1.0f;       // tau > 0
  bool ropeOff = false;           // q and k of this layer are not rotated
  // Applied in order to the stream this layer writes (after its block); refused in generation.
  std::vector<ResidualEdit> residualEdits;

  bool any() const {
    return !ablatedHeads.empty() || !meanAblatedHeads.empty() || !patchedHeads.empty() ||
           mask.any() || temperature != 1.0f || ropeOff || !residualEdits.empty();
  }
};

// What the pass changes, per attention site (empty = no intervention anywhere).
struct Interventions {
  // Per layer, the first site of stack 0's layers (a decoder's self attention, an encoder's).
  std::vector<LayerIntervention> layers;
  // Every other site's (an encoder-decoder's cross sites and its encoder's layers), by site.
  std::vector<std::pair<SiteId, LayerIntervention>> others;

  // The entry of `layer`; throws InputError when it is outside [0, nLayer). Grows the list to
  // nLayer entries first.
  LayerIntervention& layer(int layer, int nLayer);
  const LayerIntervention* find(int layer) const;
  // The entry of any site; throws InputError when the model has no such site.
  LayerIntervention& at(const SiteId& site, const ModelConfig& c);
  const LayerIntervention* find(const SiteId& site) const;
  // Every site's entry with its site, `layers` first (a site without one is not listed).
  std::vector<std::pair<SiteId, const LayerIntervention*>> entries() const;
  // Ablates query head H of layer L; throws InputError when out of range.
  void ablate(int layer, int head, const ModelConfig& c);
  // The same mask and temperature in every layer.
  void setAll(const MaskSpec& mask, float temperature, int nLayer);
};

// The attention parameters of `layer` for T tokens: the model's own mask (causal, the family's
// sliding window) AND the layer's intervention mask, and its temperature. The one place this
// combination is written.
AttentionParams layerAttentionParams(const ModelConfig& c, const Interventions& iv, int layer,
                                     int T);
// The same for T_q queries that are the last T_q of T_k positions (a decode step: T_q = 1).
// Throws InputError when the intervention holds a painted [T, T] mask of another shape.
AttentionParams layerAttentionParams(const ModelConfig& c, const Interventions& iv, int layer,
                                     int Tq, int Tk);
// T5's relative position bucket of key position j for a query at position i (Raffel et al.
// 2020: exact distances below buckets / 4 (bidirectional) or / 2, then logarithmic up to
// maxDistance; the bidirectional scheme gives keys after the query the upper half).
int relativeBucket(int j, int i, bool bidirectional, int buckets, int maxDistance);
// The same for any attention site (a cross site: the keys are the encoder's positions, with no
// causal mask and no window of the model's own).
AttentionParams siteAttentionParams(const ModelConfig& c, const Interventions& iv,
                                    const SiteId& site, int Tq, int Tk);

// Throws InputError when an intervention cannot apply to decode steps: mean ablation and patching
// (a step is one row), and masks that depend on the prompt's length (pad:N, doc:, a painted
// [T, T] mask). generate() checks this before the prompt runs.
void checkDecodeInterventions(const Interventions& iv);

// Decoding: per layer of stack 0, its self-attention site's rotated keys and values of every
// position so far, one row a position ([T, H_kv * d_h]); a step appends one row. (A cross
// site's keys are the encoder's, the same at every step: an encoder-decoder's cache holds them
// once per layer beside these.) decodeStep grows the matrices ahead (spare rows past
// `rows`, so a step never copies the cache); rows < 0: every row is filled (cacheFrom's cache).
struct KvCache {
  std::vector<MatrixRM> k, v;
  int rows = -1;
  // An encoder-decoder's cross sites: per decoder layer the encoder's keys and values
  // [T_src, H_kv * d_h], made once from the encoder's last hidden states (empty otherwise).
  std::vector<MatrixRM> crossK, crossV;
  // Added to the next row's slot for the position its token's learned embedding is read at
  // (StreamingCache: with learned positions each token keeps its own index in the text, as its K
  // and V were computed with it); 0 elsewhere.
  int positionOffset = 0;
  int length() const {
    return rows >= 0 ? rows : k.empty() ? 0 : static_cast<int>(k[0].rows());
  }
};

// One decode step: the new token's logits [V] and, per layer, its attention row over the cache
// [H, 1, T_k] (after the mask and temperature).
struct DecodeStep {
  std::vector<float> logits;
  std::vector<Tensor3> rows;
  std::vector<Tensor3> crossRows;  // encoder-decoders: per layer the row over the source [H, 1, T_src]
};

// Which layers a pass keeps something for: every layer, or the listed ones.
struct LayerSet {
  bool all = true;
  std::vector<int> only;  // when !all
  static LayerSet every() { return {}; }
  static LayerSet none() { return {false, {}}; }
  static LayerSet just(int layer) { return {false, {layer}}; }
  bool has(int layer) const;
};

// What a pass keeps ("a pass keeps what is asked, not everything"). Every layer's residual
// stream is always kept (re-runs start there; Model::layerQkv recomputes a layer's Q, K, V from
// it). The default keeps everything, as the pass always did; a view asks only for what it shows:
// the GUI's model view keeps thumbnails and the last logits row, `model --weights --layer L` one
// layer's weights.
struct Capture {
  LayerSet weights;   // [H, T, T] weights and the row stats
  LayerSet qkv;       // Q and the KV heads' K and V
  bool keepQ = true;  // false: qkv keeps K and V alone (the pass that fills a KV cache)
  LayerSet headOut;   // each head's output before W_o (attribution's patches and direct effects)
  int thumbnail = 0;  // > 0: every layer's weights max-pooled to at most this many cells a side
  bool allLogits = true;  // false: only the last position's logits ([1, V])

  // Thumbnails and the last logits row only (the GUI's model view, a baseline pass).
  static Capture view(int thumbnail);
  // Nothing but the residual stream and the last logits row (re-runs that read one position).
  static Capture none() { return view(0); }
  // The layers' K and V and the last logits row: what a KV cache needs (Model::cacheFrom).
  static Capture kvCache() {
    Capture c = view(0);
    c.qkv = LayerSet::every();
    c.keepQ = false;
    return c;
  }
  // What attribution reads: each head's output, the last logits row (any position's logits are
  // recomputed from the residual stream).
  static Capture attribution() {
    Capture c = view(0);
    c.headOut = LayerSet::every();
    return c;
  }
};

// Per attention site, what the views read. Shapes with T tokens (T_k keys: T for a self site, the
// encoder's tokens for a cross site), H query heads, H_kv KV heads, d_h the head size. What the
// Capture did not ask for is left empty.
struct SiteActivations {
  SiteKind kind = SiteKind::DecoderSelf;
  Tensor3 q;                   // [H, T, d_h] as the engine saw it (rotated)
  Tensor3 k, v;                // [H_kv, T, d_h] one per KV head (k rotated): query head h reads
                               // KV head config().kvHeadOf(h); repeatKvHeads gives [H, T, d_h]
  Tensor3 weights;             // [H, T, T_k] attention weights after the site's mask and
                               // temperature
  Tensor3 headOut;             // [H, T, d_h] each head's output before W_o, after the site's
                               // ablations and patches
  std::vector<RowStats> rows;  // [H * T] as in AttentionResult (with the weights)
  // [H, n, n_k] each head's weights max-pooled in blocks of s x s (s = ceil(max(T, T_k) /
  // thumbnail)); 0 where every cell of the block is masked. With Capture::thumbnail.
  Tensor3 thumb;
  // Bytes the activations hold.
  std::size_t bytes() const;
};

// Progress and cancellation of the passes one thread runs (the GUI's workers). While a
// PassProgress::Scope lives on a thread, every layer a pass computes there (forward, rerunFrom,
// forwardSeq2Seq, an encoder's layers included) adds one to layersDone and then calls onLayer;
// a set `cancel` stops the pass before its next layer with PassCancelled, and what the pass was
// writing is left as it was (rerunFrom commits nothing). Passes without a Scope are unchanged.
struct PassProgress {
  std::atomic<int> layersDone{0};
  // Layers the caller's passes will compute (0: not known): ModelSource::runText adds its own.
  std::atomic<int> layersPlanned{0};
  std::atomic<bool> cancel{false};
  // Called on the pass's thread after each layer, with the layer's index (tests cancel with it).
  std::function<void(int layer)> onLayer;
  // Called on the pass's thread with stack 0's self-attention weights [H, T, T] of each layer as
  // the pass computes them, whether or not its Capture keeps them: a reader that folds each
  // layer into running sums (the head finder) never holds every layer's weights at once.
  std::function<void(int layer, const Tensor3& weights)> onWeights;

  // The fraction done, in [0, 1] (0 while nothing is planned).
  double fraction() const;
  // The thread's current PassProgress (null outside a Scope).
  static PassProgress* current();
  class Scope {
   public:
    explicit Scope(PassProgress* p);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PassProgress* previous_;
  };
};
// What a cancelled pass throws (PassProgress::cancel).
class PassCancelled : public std::runtime_error {
 public:
  PassCancelled() : std::runtime_error("the pass was cancelled") {}
};

// Per layer: the residual stream entering it and each attention site's activations.
struct LayerActivations {
  MatrixRM residualIn;  // [T, d] the residual stream entering the layer (re-runs start here)
  std::vector<SiteActivations> sites;  // one per site of the layer (ModelConfig::sitesOf)

  // Site s of the layer; an empty site when the pass kept none (a layer not yet run).
  const SiteActivations& site(int s = 0) const;
  SiteActivations& site(int s = 0);
  // Bytes the activations hold.
  std::size_t bytes() const;
};

// The layers of a pass, shared between passes: a copy of a ForwardResult shares every layer, and
// a re-run from layer l replaces layers >= l, so the layers below stay shared (no deep copy).
// Read access is plain; a non-const [] copies the layer first when another pass shares it.
class LayerList {
 public:
  std::size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  const LayerActivations& operator[](std::size_t l) const { return *layers_[l]; }
  LayerActivations& operator[](std::size_t l);  // copy-on-write
  const LayerActivations& back() const { return *layers_.back(); }
  void resize(std::size_t n);  // new layers are empty
  // Layer l becomes `a` (a re-run's fresh layer).
  void set(std::size_t l, std::shared_ptr<LayerActivations> a) { layers_[l] = std::move(a); }
  // Whether this list and `o` hold layer l as one object (not a copy).
  bool shares(const LayerList& o, std::size_t l) const {
    return l < size() && l < o.size() && layers_[l] == o.layers_[l];
  }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = LayerActivations;
    using difference_type = std::ptrdiff_t;
    using pointer = const LayerActivations*;
    using reference = const LayerActivations&;
    explicit const_iterator(std::vector<std::shared_ptr<LayerActivations>>::const_iterator it)
        : it_(it) {}
    reference operator*() const { return **it_; }
    pointer operator->() const { return it_->get(); }
    const_iterator& operator++() { return ++it_, *this; }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }
    bool operator!=(const const_iterator& o) const { return it_ != o.it_; }

   private:
    std::vector<std::shared_ptr<LayerActivations>>::const_iterator it_;
  };
  const_iterator begin() const { return const_iterator(layers_.begin()); }
  const_iterator end() const { return const_iterator(layers_.end()); }

 private:
  std::vector<std::shared_ptr<LayerActivations>> layers_;
};

struct ForwardResult {
  std::vector<int> ids;         // [T]
  LayerList layers;             // [L] stack 0's layers
  MatrixRM residualOut;         // [T, d] the stream after the last layer, before norm_f
  MatrixRM logits;              // [T, V]; [1, V] (the last position) when !capture.allLogits
  Interventions interventions;  // what the pass ran with
  Capture capture;              // what it keeps (re-runs keep the same)

  // Bytes the activations, the residual stream and the logits hold, counting a layer shared
  // with another pass once per pass.
  std::size_t bytes() const;
  // The activations of an attention site; throws InputError for a site the pass does not hold.
  const SiteActivations& site(const SiteId& s) const;
  // An encoder-decoder's encoder pass (stack 1): the source ids, its layers, and in residualOut
  // the encoder's last hidden states, which every cross site reads. Null for other models.
  std::shared_ptr<const ForwardResult> encoder;
  // The layers of stack s (0: these; 1: the encoder's).
  const LayerList& stackLayers(int s) const;
};

// A next-token candidate.
struct TokenProb {
  int id = 0;
  float prob = 0.0f;
};

// A weight matrix as the pass reads it: float32, row-major, either [in, out] (GPT-2's Conv1D,
// possibly a column slice of a fused matrix with row stride `ld`) or [out, in] (nn.Linear).
struct LinearView {
  const float* w = nullptr;
  const float* b = nullptr;  // [out] or null
  int in = 0, out = 0;
  long ld = 0;               // row stride in floats (in-major: >= out; out-major: >= in)
  bool inMajor = false;      // true: [in, out] rows; false: [out, in] rows
};
// out[T, n] = x[T, k] W (+ b): the one linear layer of every family, split over the CPU threads.
void linear(const MatrixRM& x, const LinearView& W, MatrixRM& out);

class Model {
 public:
  // fraction in [0, 1] and what is being done ("validating model.safetensors", ...).
  using Progress = std::function<void(double fraction, const std::string& what)>;

  // Locates, validates and maps a model folder or GGUF file; nothing is used before everything is
  // checked. Throws InputError "<file>: <problem>" (never a half-loaded model).
  // maxMemory (--max-memory; < 0: defaultMemoryBudget()) is the budget for float32 copies of the
  // weights the file does not hold as F32: when they all fit, F16/BF16/quantized matrices are
  // converted at load (the prompt's GEMMs read float32); past it they stay as stored and each
  // pass converts one layer at a time into one reused scratch (and the head in slices).
  static std::unique_ptr<Model> open(const std::string& path, const Progress& progress = {},
                                     std::int64_t maxMemory = -1);

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelFiles& files() const { return files_; }
  // "F32 (mapped)", "F16 (converted to F32)", "Q4_K_M (mixed: Q4_K, Q6_K) (converted to F32)",
  // "Q4_K_M (mixed: Q4_K, Q6_K), kept as stored (over the 64 MB budget)"...
  const std::string& weightsDescription() const { return weightsDescription_; }
  // Parameters stored (every weight tensor's element count).
  long long parameterCount() const { return parameterCount_; }
  // Bytes of float32 copies of weights held for the model's lifetime (0 when every tensor is
  // mapped; past the memory budget only norms, biases and positions); a pass's scratch excluded.
  std::size_t convertedBytes() const;
  // Whether the matrices were kept as stored (over the memory budget).
  bool keptAsStored() const;
  // A GGUF with quantized matrices: its type as ggufFileTypeName() says it ("Q4_K_M", "Q8_0");
  // empty otherwise (folders, F32/F16/BF16 files).
  const std::string& quantization() const { return quantization_; }

  // Text -> ids (with the tokenizer's special tokens); throws InputError when the text is empty
  // or longer than the context.
  std::vector<int> encode(const std::string& text) const;
  // Throws InputError when an id is outside the vocab, ids are empty or more than the context.
  void checkIds(const std::vector<int>& ids) const;

  // forward() and rerunFrom() are const: each pass has its own workspace and engine, so a worker
  // thread may run one while the UI reads another ForwardResult.
  // The whole pass, keeping what `capture` asks for. Throws InputError for bad ids or
  // interventions.
  // `typeIds` (an encoder's token types, one per id; empty: all 0) select the token type
  // embedding rows.
  ForwardResult forward(const std::vector<int>& ids, const Interventions& iv = {},
                        const Capture& capture = {},
                        const std::vector<int>& typeIds = {}) const;

  // An encoder-decoder's pass: the source ids through the encoder (stack 1, once), then the
  // decoder's ids `target` (its first is the decoder's start id, as HF's shifted labels) through
  // the decoder's layers, each with its self site (causal) and its cross site over the encoder's
  // last hidden states. Interventions address any site (SiteId). Throws InputError for bad ids,
  // interventions, or a model that is not an encoder-decoder.
  ForwardResult forwardSeq2Seq(const std::vector<int>& source, const std::vector<int>& target,
                               const Interventions& iv = {}, const Capture& capture = {}) const;

  // An encoder's masked-LM head: empty when the model has one (or is a decoder), else the tensor
  // the folder lacks (a BertModel-only folder: its logits are not computed).
  const std::string& headMissing() const;

  // T5's relative position bias (PositionKind::Relative), added to the scores of every self site
  // of stack `stack` (0: the decoder's, causal buckets; 1: an encoder-decoder's encoder,
  // bidirectional buckets; cross sites have none): [H, Tq, Tk] for queries at the last Tq of Tk
  // positions, cell (h, i, j) the table's value for head h and the bucket of j - p_i. Empty for
  // a model without one.
  Tensor3 positionBias(int stack, int Tq, int Tk) const;
  // The bucket that key position j falls in seen from query position i (-1: no relative bias),
  // and the table's value of bucket b for head h.
  int positionBucket(int stack, int i, int j) const;
  float bucketBias(int stack, int bucket, int head) const;

  // Re-runs layers >= `fromLayer` (and the logits) from the cached residual stream with new
  // interventions, keeping what r.capture asks for; layers below keep their activations, shared
  // with any copy of r (not copied). Interventions in those lower layers must be unchanged for
  // the result to equal a full forward(). 0 <= fromLayer <= nLayer. Layers >= fromLayer become
  // new objects: references into the old ones (r.layers[l] for l >= fromLayer) dangle after.
  void rerunFrom(ForwardResult& r, int fromLayer, const Interventions& iv) const;

  // Layer `layer`'s Q [H, T, d_h] and the KV heads' K, V [H_kv, T, d_h] as the pass computed them
  // (rotated, unless the pass's interventions turned RoPE off there): the kept ones, else
  // recomputed from the layer's residual stream (three projections, no attention). Throws
  // InputError for a layer outside the model.
  void layerQkv(const ForwardResult& r, int layer, Tensor3& q, Tensor3& k, Tensor3& v) const;

  // The norms ‖q_i^h‖ and ‖k_i^g‖ of `layer`'s rows before and after the family's q/k norm
  // (Qwen3 and Gemma 3: per head; OLMo 2: over the whole width), recomputed from the layer's
  // residual stream. RoPE turns q and k without changing their norms; a family's own score scale
  // is not in them. Throws InputError for a layer outside the model.
  struct QkNorms {
    int heads = 0, kvHeads = 0, tokens = 0;  // heads 0: the family has no q/k norm
    std::vector<float> qBefore, qAfter;      // [heads, tokens]
    std::vector<float> kBefore, kAfter;      // [kvHeads, tokens]
  };
  QkNorms layerQkNorms(const ForwardResult& r, int layer) const;

  // The cache a full pass leaves: every layer's rotated K and V (one per KV head).
  KvCache cacheFrom(const ForwardResult& r) const;
  // One token's pass at position cache.length(): matrix-vector products and attention over the
  // cache, which grows by one row. Interventions apply as in forward(). Throws InputError when
  // the context is full or the id is outside the vocab.
  // `rows`: the layers whose attention row the step keeps (the others' stay empty).
  DecodeStep decodeStep(KvCache& cache, int id, const Interventions& iv = {},
                        const LayerSet& rows = LayerSet::every()) const;

  // The k most likely next tokens after position `pos` (-1 = the last), most likely first.
  static std::vector<TokenProb> topK(const ForwardResult& r, int k, int pos = -1);

  struct Weights;  // views into the mapped files or converted buffers (model.cpp)
  // QK attribution (qk_split.h) reads the weights and runs the pass's sub-blocks.
  friend struct QkSplitAccess;

 private:
  Model();
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelFiles files_;
  std::string weightsDescription_;
  std::string quantization_;
  long long parameterCount_ = 0;
  std::unique_ptr<Weights> w_;

  // W_o of the last layer headToResidual converted (a model kept as stored), for the next head.
  struct OCache;
  std::unique_ptr<OCache> oCache_;

  struct Workspace;
  // Throws InputError when fromLayer or an intervention's head is outside the model.
  void checkRerun(const ForwardResult& r, int fromLayer, const Interventions& iv) const;
  // Layers >= fromLayer into fresh (unshared) activations in `fresh`, from layer fromLayer's
  // residual stream, the stream leaving the last one in `out`; r itself is not changed (a caller
  // commits both once nothing can throw).
  void runLayers(const ForwardResult& r, int fromLayer, const Interventions& iv,
                 std::vector<std::shared_ptr<LayerActivations>>& fresh, MatrixRM& out,
                 int stack = 0, const ForwardResult* encoder = nullptr) const;
  // An encoder-decoder's encoder pass over `source` with the interventions' stack-1 sites.
  std::shared_ptr<const ForwardResult> runEncoder(const std::vector<int>& source,
                                                  const Interventions& iv,
                                                  const Capture& capture) const;
  // The embedded rows of stack `stack` (token rows times the scale, positions, token types,
  // the embedding norm) into x [T, d].
  void embed(int stack, const std::vector<int>& ids, const std::vector<int>& typeIds,
             MatrixRM& x) const;
  // Commits runLayers' result into r.
  void commit(ForwardResult& r, int fromLayer, const Interventions& iv,
              std::vector<std::shared_ptr<LayerActivations>>& fresh, MatrixRM& out) const;
  // One layer from act.residualIn: keeps in `act` what `cap` asks for; `next` receives the
  // stream leaving the layer.
  void runLayer(LayerActivations& act, int layer, const Interventions& iv, const Capture& cap,
                Workspace& ws, MatrixRM& next, int stack = 0,
                const MatrixRM* encoderOut = nullptr) const;
  void finish(ForwardResult& r) const;

 public:
  // ---- For attribution (attribution.h): the pieces of the pass after the residual stream, and a
  // re-run that reads one position. They read the weights as the pass does (float32 views).

  // The last hidden states [n, d] of the stream leaving the last layer (r.residualOut): after
  // the final norm (pre-norm families), the rows themselves (post-norm encoders), as Hugging
  // Face's last_hidden_state.
  MatrixRM lastHidden(const MatrixRM& x) const;
  // The logits [n, V] of residual-stream rows x [n, d]: the final norm and the unembedding, as
  // the pass ends (the logit lens applies it to earlier layers' streams).
  MatrixRM unembedResidual(const MatrixRM& x) const;
  // Query head `head`'s output rows o [n, d_h] in layer `layer` through its slice of W_o (input
  // rows head*d_h .. (head+1)*d_h - 1), without W_o's bias: [n, d]. Throws InputError for a
  // layer or head outside the model or o of the wrong width.
  MatrixRM headToResidual(int layer, int head, const MatrixRM& o) const;
  // The direct logit contributions [n, V] of residual-space vectors u [n, d] at position `pos` of
  // r: the final norm linearised at r.residualOut's row pos (LayerNorm: u centred; both norms:
  // divided by that row's denominator sqrt(var + eps) or sqrt(mean square + eps), times the
  // norm's weight, no bias), then the unembedding without a bias. Throws InputError for a
  // position outside r.
  MatrixRM directLogits(const MatrixRM& u, const ForwardResult& r, int pos) const;
  // rerunFrom() for a caller that reads one position: layers >= fromLayer are re-run, then only
  // position pos's logits are computed and returned ([V]); r.logits is left as it was. Throws
  // as rerunFrom() does, and InputError for a position outside r.
  std::vector<float> rerunLogitsAt(ForwardResult& r, int fromLayer, const Interventions& iv,
                                   int pos) const;
};

// RoPE on one head's rows: rotates x [T, d_h] (row t at position pos0 + t) by the config's
// frequencies for `layer` (its base; -1: the model's), in its pair convention; inverse = true
// undoes it (the RoPE view shows scores with the rotation removed). `seqLen` is the length of
// the sequence the rows belong to (LongRoPE's short or long factors); 0: pos0 + T, as a pass
// (from 0) or a decode step (one row) has it.
void applyRope(const ModelConfig& c, MatrixRM& x, int pos0, bool inverse = false, int layer = -1,
               int seqLen = 0);

// Pieces of the pass, exposed for the benchmark's GEMM floor and for tests.
// out[T, n] = x[T, k] * W[k, n] (+ bias[n]), W row-major, split over the CPU threads by columns.
void matmulInOut(const MatrixRM& x, const float* W, const float* bias, int k, int n, MatrixRM& out);
// out[T, V] = x[T, d] * E[V, d]^T, E row-major (nn.Linear, the tied embedding), split by rows of E.
void matmulOutIn(const MatrixRM& x, const float* E, int V, int d, MatrixRM& out);

}  // namespace attnviz
