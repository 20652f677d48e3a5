// What the files of core/model share and nobody else sees: the skeleton's weight slots, the
// weights as the pass reads them, the family table's row, and the pass's operations.
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/engine/ggml_kernels.h"
#include "attnviz/engine/isa.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/formats/safetensors.h"
#include "attnviz/model/model.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

// ---------------------------------------------------------------------------------------------
// The skeleton's tensors. Every family fills a subset of these slots; the pass reads only slots.

enum class Slot : int {
  AttnNorm, AttnNormB,   // the attention sub-block's (pre-)norm
  Q, QB, K, KB, V, VB,   // projections (and biases)
  Qkv, QkvB,             // a fused [3 parts] projection (GPT-2's c_attn, Phi-3's qkv_proj)
  O, OB,                 // output projection
  QNorm, KNorm,          // q/k norms (per head: [d_h]; whole width: [H d_h], [H_kv d_h])
  PostAttnNorm, PostAttnNormB,  // after attention (Sandwich, After, Post placements)
  MlpNorm, MlpNormB,     // the MLP's (pre-)norm
  Up, UpB, Gate, GateB, GateUp, GateUpB, Down, DownB,  // MLP (GateUp: Phi-3's fused [2I, d],
                                                       // gate first; GateUpB its [2I] bias)
  PostMlpNorm, PostMlpNormB,  // after the MLP
  // An encoder-decoder's cross site (decoder layers): its norm (before it, or after it for the
  // post-norm families, as the placement says), projections and biases.
  XNorm, XNormB, XQ, XQB, XK, XKB, XV, XVB, XO, XOB,
  Count
};
constexpr int kSlots = int(Slot::Count);
// The model-wide tensors.
// Encoders add: token type embeddings, the embedding LayerNorm (applied after the sum when
// present), and the masked-LM head's transform (dense + activation + LayerNorm) and output bias,
// applied before and after the unembedding when present.
enum class Global : int {
  Embed, Positions, NormF, NormFB, Head,
  TokenTypes, EmbedNorm, EmbedNormB,
  HeadDense, HeadDenseB, HeadNorm, HeadNormB, HeadBias,
  // An encoder-decoder's encoder stack: its positions, embedding norm and final norm (the token
  // embedding is shared).
  EncPositions, EncEmbedNorm, EncEmbedNormB, EncNormF, EncNormFB,
  // T5's relative position bias tables [buckets, H]: the decoder's and the encoder's.
  RelBias, EncRelBias,
  Count
};
constexpr int kGlobals = int(Global::Count);

// A matrix as the file stores it: `rows` rows of `cols` values of `type`, `rowBytes` apart (a
// GGUF tensor of any readable type, or a safetensors F32/F16/BF16 tensor in nn.Linear's [out, in]
// layout). Decode's matrix-vector products read these (engine's matVec); a layer kept as stored
// is converted from these into the pass's scratch.
struct StoredMatrix {
  GgmlType type = GgmlType::F32;
  const unsigned char* data = nullptr;
  std::size_t rowBytes = 0;
  int rows = 0, cols = 0;
  explicit operator bool() const { return data != nullptr; }
  // Rows r0 .. r0 + n - 1 (a slice of a fused matrix).
  StoredMatrix rowSlice(int r0, int n) const {
    StoredMatrix s = *this;
    s.data = data + std::size_t(r0) * rowBytes;
    s.rows = n;
    return s;
  }
};

struct Model::Weights {
  std::vector<SafetensorsFile> files;
  std::unique_ptr<GgufFile> gguf;
  std::vector<FloatBuffer> owned;  // converted tensors
  std::array<const float*, kGlobals> g{};  // float32 views of the model-wide tensors
  LinearView head;  // [V, d] out-major; w is null when the head is kept as stored
  StoredMatrix embedStored, headStored;
  struct Layer {
    std::array<const float*, kSlots> p{};    // float32 views, one per slot (null: absent)
    std::array<StoredMatrix, kSlots> s{};    // the [out, in] matrices as stored (decode)
    // The linear views the pass reads, built from the slots (fused tensors as views).
    LinearView q, k, v, o, up, gate, down;
    StoredMatrix qS, kS, vS, oS, upS, gateS, downS;
    LinearView xq, xk, xv, xo;  // the cross site's (encoder-decoders)
    StoredMatrix xqS, xkS, xvS, xoS;
    // Kept as stored (over the memory budget): each matrix's slot and its place in the pass's
    // scratch; the views above are rebuilt on a copy once the scratch holds the layer.
    struct Lazy {
      StoredMatrix src;
      std::size_t offset = 0;  // floats into the scratch
      Slot slot = Slot::Q;
    };
    std::vector<Lazy> lazy;
    std::size_t lazyFloats = 0;
    bool fusedQkv = false, fusedGateUp = false;  // the row's tensors: q/k/v, gate/up as views
    const float* operator[](Slot x) const { return p[int(x)]; }
  };
  // Stack 0's layers, then an encoder-decoder's encoder layers (stack 1's layer l at nLayer + l).
  std::vector<Layer> layers;
  std::size_t convertedBytes = 0;  // float32 bytes held in `owned`
  std::size_t scratchFloats = 0;   // the largest layer kept as stored
  bool kept = false;               // matrices kept as stored (over the budget)
  bool conv1dInMajor = false;      // GPT-2 folder: Conv1D [in, out] matrices
  // An encoder's masked-LM head: empty when present (or not an encoder), else the tensor that
  // is missing (a BertModel-only folder).
  std::string headMissing;
  const float* global(Global x) const { return g[int(x)]; }
};

// A layer's linear views (and decode's stored views) from its slots: at load, and again on the
// copy a pass makes of a layer kept as stored (a null pointer: not converted yet).
void layerViews(Model::Weights::Layer& L, const ModelConfig& c, bool conv1dInMajor);

// ---------------------------------------------------------------------------------------------
// The family table (family_table.cpp): one row per family.

// A shape in the skeleton's terms, resolved against the config.
enum class Dim : int { One, D, V, I, I2, Dq, Dkv, Dqkv, Dh, Positions, TypeVocab, Buckets, H };

struct TensorRow {
  int slot;                 // a Slot (per layer) or a Global
  const char* hf;           // the HF name (a layer's: after its prefix); null: not in folders;
                            // "a|b": stored under either name
  const char* gguf;         // llama.cpp's name (a layer's: after "blk.N."); null: not in GGUF
  std::array<Dim, 2> shape; // [out, in] as nn.Linear stores it (or [n] with Dim::One second)
  bool (*when)(const ModelConfig&) = nullptr;  // null: always
  bool optional = false;    // a model-wide tensor a folder may lack (an encoder's MLM head)
  int fromLayer = 0;        // a layer's tensor the layers below this lack (ModernBERT's first
                            // layer has no attention norm: the skeleton skips a missing one)
};

struct FamilyRow {
  const char* name;       // config.json's model_type
  const char* ggufArch;   // GGUF general.architecture (null: folders only)
  // The family's config.json keys onto the skeleton (the common keys are read before).
  void (*fromJson)(const nlohmann::json& j, const std::string& path, ModelConfig& c);
  // The same from GGUF metadata ("<arch>." keys; the common ones are read before).
  void (*fromGguf)(const GgufFile& f, ModelConfig& c);
  // Where a folder's names live: the canonical prefix of model-wide and layer names ("model.",
  // ""), the other prefix a checkpoint may use ("", "transformer."), and a layer's prefix with
  // {} for its index.
  const char* prefix;
  const char* altPrefix;
  const char* layerPrefix;
  std::vector<TensorRow> globals;
  std::vector<TensorRow> layer;
  // Folders store the layers' matrices as Conv1D [in, out] (GPT-2), not nn.Linear [out, in].
  bool conv1dFolders = false;
  // config.json's key for the context length (error messages name it).
  const char* contextKey = "max_position_embeddings";
  // An encoder-decoder's encoder layers: their prefix ({} for the index) and tensors.
  const char* encoderLayerPrefix = nullptr;
  std::vector<TensorRow> encoderLayer = {};
  // llama.cpp's prefix of the (decoder's) layers, before their index; an encoder-decoder's
  // encoder layers are "enc.blk.".
  const char* ggufLayerPrefix = "blk.";
};

// The row of a config.json model_type or a GGUF architecture; null when none.
const FamilyRow* familyByName(const std::string& modelType);
const FamilyRow* familyByGgufArch(const std::string& arch);
// "gpt2, llama, mistral, ..." for error messages.
std::string familyNames(bool gguf);
std::vector<std::int64_t> resolveShape(const std::array<Dim, 2>& shape, const ModelConfig& c);

// config.json helpers shared by the family rows (config.cpp).
namespace json_keys {
const nlohmann::json* lookup(const nlohmann::json& j, std::initializer_list<const char*> keys);
int requireInt(const nlohmann::json& j, const std::string& path,
               std::initializer_list<const char*> keys);
int optionalInt(const nlohmann::json& j, const std::string& path, const char* key, int fallback);
double optionalNumber(const nlohmann::json& j, const std::string& path, const char* key,
                      double fallback, double lo, double hi);
bool flag(const nlohmann::json& j, const char* key, bool fallback);
std::string optionalString(const nlohmann::json& j, const std::string& path, const char* key,
                           const std::string& fallback);
}  // namespace json_keys
void parseActivation(ModelConfig& c, const std::string& path);
// generation_config.json's eos_token_id (a number or a list) added to c.eosIds.
void addGenerationConfig(ModelConfig& c, const std::string& text);
// config.json's rope_scaling, or transformers 5's rope_parameters (then also the base).
void parseRopeScaling(const nlohmann::json& j, ModelConfig& c, const std::string& path);
// rope_parameters.sliding_attention's base (transformers 5's Gemma 3), when the config has one;
// throws for a scaling there (local layers rotate unscaled).
std::optional<float> localRopeTheta(const nlohmann::json& j, const std::string& path);
// GGUF metadata helpers (gguf_config.cpp).
int ggufInt(const GgufFile& f, const std::string& key, std::optional<int> fallback = {});

// ---------------------------------------------------------------------------------------------
// The pass's operations (ops.cpp)

// out[T, d] = (x - mean) / sqrt(var + eps) * w + b per row (biased variance, as torch); or
// RMSNorm: x / sqrt(mean(x^2) + eps) * (offset + w).
void normForward(NormKind kind, const MatrixRM& x, const float* w, const float* b, float eps,
                 MatrixRM& out, float offset = 0.0f);
// In place, element-wise.
void activationForward(MatrixRM& h, Activation act);
// x [T, n*dh] -> [n, T, dh] (head h is columns h*dh..).
void splitHeads(const MatrixRM& x, int n, int dh, Tensor3& out);
// Each head's weights [H, T, T] max-pooled in blocks of s x s, s = ceil(T / side).
Tensor3 poolThumb(const Tensor3& w, int side);
// O [H, T, d_h] -> [T, d], with the layer's ablations and patches applied; `kept` (when not
// null) receives the heads' outputs as they enter W_o. Mean ablation replaces every position by
// the head's mean over positions 0..meanUpTo (the attribution sweep at position P sets P, so no
// token after P enters what P reads); meanUpTo -1: over every position.
void mergeHeads(const Tensor3& o, const LayerIntervention* li, MatrixRM& out, Tensor3* kept);
// Rows [r0, r0 + n) of a stored matrix as float32 into out, split over the CPU threads.
void convertRows(const StoredMatrix& s, int r0, int n, float* out);
// The token's embedding row (mapped, converted, or dequantized from the stored rows), scaled.
void embedRow(const Model::Weights& w, const ModelConfig& c, int id, float* out);
// logits [T, V] = f [T, d] times the head (a head kept as stored is converted a task's rows at a
// time), with an encoder's MLM transform before and its bias after, then the family's final
// softcap. linearOnly: the product alone (no transform, bias or cap: direct effects are linear).
void unembed(const Model::Weights& w, const ModelConfig& c, const MatrixRM& f, MatrixRM& logits,
             bool linearOnly = false);
// The family's final softcap c tanh(z / c) on n logits, in place (none when the family has none).
void softcapLogits(const ModelConfig& c, float* z, std::size_t n);
// An encoder's token type rows (typeIds empty: type 0) and its embedding LayerNorm, each when
// the model has it, added to / applied on the embedded rows x [T, d].
void addEncoderEmbeddings(const Model::Weights& w, const ModelConfig& c,
                          const std::vector<int>& typeIds, MatrixRM& x);
// Adds the positions of rows x [T, d] at positions pos0.. for stack `stack` (learned rows at
// positionOffset + p, or the sinusoids); nothing for RoPE.
void addPositions(const Model::Weights& w, const ModelConfig& c, int stack, int pos0,
                  MatrixRM& x);
// T5's position bias of stack `stack` for T_q queries that are the last T_q of T_k positions:
// [H, T_q, T_k], table[bucket(j - p_i), h] (the encoder's buckets bidirectional, the decoder's
// causal). Empty when the family has none.
Tensor3 positionBias(const Model::Weights& w, const ModelConfig& c, int stack, int Tq, int Tk);
// p's mask gains the additive bias [H, T_q, T_k] (a custom matrix of the intervention's
// combined: allowed cells keep the bias, disallowed ones become -inf; a custom bias adds).
void addScoreBias(AttentionParams& p, const Tensor3& bias);
// The rows of a stored matrix for the products of isa.h (linearABt), converted as they are
// packed. The matrix must outlive the GemmRows (it holds a pointer to it).
GemmRows storedRows(const StoredMatrix& s);
// Fills the page tables of the whole pages of [p, p + bytes) in a read-only file mapping (their
// bytes read now instead of at the first touch); ignored where the kernel cannot.
void populatePages(const void* p, std::size_t bytes);

// The final norm of rows x (none for post-norm families: a copy).
void finalNorm(const Model::Weights& w, const ModelConfig& c, const MatrixRM& x, MatrixRM& f);

// ---------------------------------------------------------------------------------------------
// The one layer skeleton (pass.cpp), and the buffers one pass reuses from layer to layer.

struct Model::Workspace {
  std::unique_ptr<AttentionEngine> engine = makeCpuEngine();
  MatrixRM a, qm, km, vm, merged, proj, m, hidden, gate, out, normed;
  Tensor3 q, kvK, kvV;
  // A decode step: one row, and every [out, in] matrix read as stored.
  bool decode = false;
  FloatBuffer scratch;
  Weights::Layer converted;
  // T5's position bias of the stack being run (made once, read by each of its self sites).
  Tensor3 bias;
  int biasStack = -1, biasRows = -1;

  // The layer's float32 views: the model's own, or the layer converted into the scratch.
  // `rows`: the rows the layer will run. A layer kept as stored is not converted when the
  // products can read its blocks as they pack them (rows >= kPackedMinRows at a level with the
  // packed kernels, isa.h): its matrices' views stay null and lin() reads the stored rows.
  const Weights::Layer& weights(const Weights& w, int l, const ModelConfig& c, int rows = 0);
  // out = x W (+ b): a matrix-vector product on the stored rows in a decode step, the packed
  // product on the stored blocks for a matrix not converted, else linear().
  void lin(const MatrixRM& x, const LinearView& f, const StoredMatrix& s, MatrixRM& out);
  struct Out {
    const LinearView* f;
    const StoredMatrix* s;
    MatrixRM* out;
  };
  // Several matrices of one input: one parallel loop in a decode step.
  void lins(const MatrixRM& x, std::initializer_list<Out> outs);

  // The attention site's inputs: qm, km, vm from the residual rows x [n, d] at positions pos0..
  // (the pre-norm, the projections, the q/k norm, RoPE when `rope`, and the score scale folded
  // into q when the family's differs from 1/sqrt(d_h)). The one place a site's Q/K/V are made.
  // `norms`: when given, each head's q and k row norms before and after the q/k norm go there.
  void project(const ModelConfig& c, const Weights::Layer& W, int layer, const MatrixRM& x,
               int pos0, bool rope, Model::QkNorms* norms = nullptr);
  // A cross site's inputs: qm from the decoder's rows x [n, d] (its norm first when the family's
  // norms come before, the score scale folded in), km and vm from the encoder's last hidden
  // states enc [T_src, d] (when enc is not null: a decode step reuses the cached ones).
  void projectCross(const ModelConfig& c, const Weights::Layer& W, const MatrixRM& x,
                    const MatrixRM* enc);
  // A site's result into the stream once `o` [H, n, d_h] holds the heads' outputs: the
  // interventions' ablations and patches, W_o (the cross site's when `cross`), the residual
  // with the family's placement of norms.
  void attnResidual(const ModelConfig& c, const Weights::Layer& W, const LayerIntervention* li,
                    const Tensor3& o, MatrixRM& x, Tensor3* keptHeadOut, bool cross);
  // The MLP sub-block with its residual.
  void mlpResidual(const ModelConfig& c, const Weights::Layer& W, MatrixRM& x);
  // The rest of the layer after the self site: attnResidual, then the MLP.
  void finishLayer(const ModelConfig& c, const Weights::Layer& W, const LayerIntervention* li,
                   const Tensor3& o, MatrixRM& x, Tensor3* keptHeadOut) {
    attnResidual(c, W, li, o, x, keptHeadOut, false);
    mlpResidual(c, W, x);
  }

  // The whole layer: x [n, d] becomes the stream leaving it; `attend(p)` runs the attention over
  // ws.qm/km/vm with the site's parameters and returns the heads' outputs [H, n, d_h] (a full
  // pass: the engine over the n rows; a decode step: the cache).
  template <class Attend>
  void block(const ModelConfig& c, const Weights::Layer& W, int layer, MatrixRM& x, int pos0,
             const LayerIntervention* li, Attend&& attend, Tensor3* keptHeadOut) {
    project(c, W, layer, x, pos0, !(li && li->ropeOff));
    const Tensor3& o = attend();
    finishLayer(c, W, li, o, x, keptHeadOut);
  }
  // A decoder layer of an encoder-decoder: the self site, then the cross site (`cross()` runs
  // its attention over ws.qm and the encoder's K/V and returns the heads' outputs), then the MLP.
  template <class Attend, class Cross>
  void blockWithCross(const ModelConfig& c, const Weights::Layer& W, int layer, MatrixRM& x,
                      int pos0, const LayerIntervention* li, Attend&& attend,
                      Tensor3* keptHeadOut, const LayerIntervention* lx, Cross&& cross,
                      Tensor3* keptCrossOut) {
    project(c, W, layer, x, pos0, !(li && li->ropeOff));
    attnResidual(c, W, li, attend(), x, keptHeadOut, false);
    const Tensor3& o = cross();
    attnResidual(c, W, lx, o, x, keptCrossOut, true);
    mlpResidual(c, W, x);
  }
};

}  // namespace attnviz
