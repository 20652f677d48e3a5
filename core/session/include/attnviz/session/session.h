// attnviz session: the one state model behind the GUI, `attnviz export` and `attnviz compute`.
// No window, no GL: it links attnviz_core only, so every rule below is tested without a display.
//
// A session owns the pipeline
//
//     source (a scene, or Q/K/V tensors) -> inputs -> engine (S = QKᵀ/√d, cached)
//                                        -> parameters (mask, bias, τ) -> weights -> view matrix
//
// with one generation counter per stage:
//   inputs      text, mode, sizes, seed, archetypes, decode step, tensors: setInputs (the GEMMs)
//   parameters  temperature, masks, ALiBi, painted cells: the softmax only, from the cached S
//   view        head, head average, stage, wrong-axis mode: the displayed matrix only
// A change bumps its stage's counter (and the counters after it); update() brings every stale
// stage current, doing only the work its stage needs. Only an input change recomputes S.
//
// A model source with layers plugs in as another kind of source next to setScene/setTensors:
// its inputs stage runs the forward pass and yields per-layer Q, K, V (interventions such as
// ablations are parameters, so they bump the parameters stage), and View gains a layer that
// picks which layer's matrix is displayed. The stages, their counters and the export path stay
// as they are.
#pragma once

#include "attnviz/render/colormap.h"
#include "attnviz/engine/engine.h"
#include "attnviz/session/encoder_view.h"
#include "attnviz/session/pooled_view.h"
#include "attnviz/render/raster.h"
#include "attnviz/formats/scene.h"
#include "attnviz/session/scene_inputs.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

// What the view shows for one head. Score stages are signed (a diverging colormap fits).
// Capped is the softcap c tanh(s / c) (the GUI's stage bar shows it while a cap is set); with no
// softcap it equals Scaled.
enum class ViewStage {
  RawScores, Scaled, Capped, Biased, Logits, Weights, Output,
  // A model's own stages (the source supplies them, Session::setSourceStages): the weights times
  // the norm of what each key's value moves through the head, and attention rollout.
  ValueWeighted, Rollout
};
constexpr int kStageCount = 9;
const char* stageLabel(ViewStage s);             // e.g. "QKᵀ"
const char* stageKey(ViewStage s);               // stable name for files: "qk", "scaled", ...
const char* stageFormula(ViewStage s);           // one line: what the value of cell (i, j) is
bool stageIsScore(ViewStage s);                  // the signed stages: scores and the output
bool stageFromSource(ViewStage s);               // value-weighted and rollout (a model's)
ViewStage stageFromKey(const std::string& key);  // throws UsageError

// The view stage's inputs: which matrix is displayed.
struct View {
  int head = 0;
  bool headAverage = false;  // weights stage: the mean over heads
  ViewStage stage = ViewStage::Weights;
  bool wrongAxis = false;  // weights stage: softmax over queries (columns sum to 1), for teaching
  bool pooledMean = false;  // pooled mode: the mean over each pixel's cells instead of the max
  bool operator==(const View&) const = default;
};

// The one matrix the view shows.
struct DisplayMatrix {
  int rows = 0, cols = 0;
  std::vector<float> values;                 // [rows, cols] row-major; -inf = masked cell
  std::vector<float> rowSums;                // [rows] sums of the finite shown values
  std::vector<float> colSums;                // [cols]
  std::vector<std::uint8_t> rowFullyMasked;  // [rows]: the mask allows none of the row's keys
  int fullyMaskedRows = 0;
  int firstFullyMaskedRow = -1;  // -1 when none
  float minFinite = 0.0f, maxFinite = 0.0f;
  bool columnsAreKeys = true;  // false for the output stage (columns are value dimensions)
  bool isWeights = false;      // rows (or, wrong-axis, columns) are distributions
  // Pooled mode (Session::pooledMode): `values` is empty, the cells are in the session's pooled
  // pyramid; rowSums and rowFullyMasked come from its row statistics (1, or 0 for a fully
  // masked row), maxFinite from its coarse level.
  bool pooled = false;
  // A block view (Session::setBlock): the index in the whole matrix of each shown row and
  // column ([rows], [cols]); empty: row i is row i, column j is column j.
  std::vector<int> rowIndex, colIndex;
  int fullRow(int i) const { return rowIndex.empty() ? i : (i >= 0 && i < int(rowIndex.size()) ? rowIndex[i] : -1); }
  int fullCol(int j) const { return colIndex.empty() || !columnsAreKeys ? j : (j >= 0 && j < int(colIndex.size()) ? colIndex[j] : -1); }
  std::uint64_t version = 0;   // bumped on every rebuild
};

// Everything the tooltip says about cell (i, j) of the shown head.
struct CellInfo {
  int i = -1, j = -1;
  std::string queryToken, keyToken;
  float scaled = 0, logit = 0, weight = 0, rowSum = 0, shown = 0;
  bool masked = false;
};

// What a figure shows: ExportOptions (stage, head or every head, cell size, colormap, labels,
// title) for the session's current inputs and parameters.
using ExportRequest = ExportOptions;

class Session {
 public:
  struct Generations {
    std::uint64_t inputs = 0, params = 0, view = 0;
  };
  struct Timing {
    double setInputsMs = 0, softmaxMs = 0, displayMs = 0;
  };

  explicit Session(std::unique_ptr<AttentionEngine> engine);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Replaces the engine (the GUI sets it once its GL context exists): every stage is stale.
  // Until a session has an engine, update() does nothing.
  void setEngine(std::unique_ptr<AttentionEngine> engine);
  bool hasEngine() const { return engine_ != nullptr; }
  // Hands the engine back (the session then has none), e.g. to keep the GUI's backend while a
  // dump's WeightsEngine (dump_source.h) takes its place.
  std::unique_ptr<AttentionEngine> releaseEngine();
  AttentionEngine& engine() { return *engine_; }
  const AttentionEngine& engine() const { return *engine_; }

  // ---- source and inputs ------------------------------------------------------------------
  // A whole scene: every stage is stale.
  void setScene(Scene scene);
  // Q, K, V given directly (compute, export from .npy); token labels optional (indices).
  // The parameters then come from the scene's params (its mode is ignored).
  // `mayPool` = false when the engine already holds the weights (a dump's WeightsEngine): such a
  // source never switches to pooled mode.
  void setTensors(Tensor3 q, Tensor3 k, Tensor3 v, std::vector<std::string> queryTokens = {},
                  std::vector<std::string> keyTokens = {}, bool mayPool = true);
  // A model's own stages for the shown layer, which a source computes from what the session does
  // not hold (setScene and setTensors drop them):
  //   valueNorms [H * T_k]: ‖v_j W_O^h‖ for head h and key j; the value-weighted stage shows
  //              A_ij · valueNorms[h, j] of the shown head, so τ and the masks act on it live;
  //   rollout    [T_q * T_k]: attention rollout up to the layer (head-independent).
  // An empty vector leaves that stage unavailable; a view on an unavailable stage shows the
  // weights. Wrong sizes throw UsageError.
  void setSourceStages(std::vector<float> valueNorms, std::vector<float> rollout);
  bool stageAvailable(ViewStage s) const;
  // What the figure title names before the mask, e.g. "gpt2 Â· layer 3" for a model layer;
  // setScene and setTensors clear it.
  void setSourceLabel(std::string label) { sourceLabel_ = std::move(label); }
  // The axis titles of the figure and the view ("" = Queries and Keys): an encoder-decoder's
  // cross site says its rows are the target and its columns the source. setScene and
  // setTensors clear them.
  void setAxisTitles(std::string queries, std::string keys) {
    queryAxis_ = std::move(queries), keyAxis_ = std::move(keys);
  }
  const std::string& queryAxisTitle() const { return queryAxis_; }
  const std::string& keyAxisTitle() const { return keyAxis_; }
  const Scene& scene() const { return scene_; }
  // The scene to edit in place; say what changed with one of the touch calls below.
  Scene& editScene() { return scene_; }
  // The text, mode, sizes, seed, archetypes, decode step or tensor paths changed.
  void touchInputs();
  // The masks (scene().params.mask), ALiBi or the mode's causal term changed.
  void touchMask();
  // Only scene().params.temperature changed: the mask already built is reused.
  void touchTemperature();
  void setTemperature(float tau);
  // Painted cells are mask data: they edit scene().params.mask.custom (an "allow" matrix
  // [1, T_q, T_k] is created when the scene has none; every head of a per-head matrix is
  // painted). allow = false blocks the cell. No-op outside the matrix or when unchanged.
  void paintCell(int i, int j, bool allow);
  void clearCustomMask();

  // ---- view -------------------------------------------------------------------------------
  // Sets the view; bumps the view generation only when it differs. Head is clamped on update.
  void setView(const View& v);
  const View& view() const { return view_; }
  // Shows only a block of the matrix (encoder_view.h: a pair's slice, the special tokens
  // hidden): the display matrix holds the block's rows and columns (DisplayMatrix::rowIndex
  // says which), a weights stage renormalised over the kept keys when the block says so, and
  // exportImage draws the same block. The output stage keeps its value dimensions; the pooled
  // mode and the model's own stages (value-weighted, rollout) ignore the block. Indices outside
  // the matrix are dropped on update. An inactive block shows everything.
  void setBlock(BlockView b);
  const BlockView& block() const { return block_; }

  // ---- running ----------------------------------------------------------------------------
  // Brings every stale stage current: setInputs on an input change, then the softmax of the
  // head on screen (every head for the head average), then the displayed matrix. Throws what
  // the core throws (InputError, UsageError); the stage that failed is not retried until it is
  // changed again, and the session keeps its last good results.
  void update();
  // Only the inputs stage (setInputs when stale), so that dims() is known before parameters
  // that depend on the shape are set. Throws as update() does.
  void updateInputs();
  // Softmax and output for stale heads (thumbnails) until budgetMs has passed; returns whether
  // any ran. budgetMs < 0: every stale head.
  bool refreshStaleHeads(double budgetMs);
  // Every head current (export, compute). A session's first inputs take the engine's fused
  // run (AttentionEngine::run) instead of setInputs + softmax.
  void computeAllHeads();

  // ---- long contexts: the pooled view (attnviz/pooled_view.h) -------------------------------
  // When to pool (default: above 4096 x 4096 cells of one head). A change re-runs the inputs.
  void setPooledPolicy(const PooledPolicy& p);
  const PooledPolicy& pooledPolicy() const { return policy_; }
  // True while the inputs are too large to materialise: the engine is not given them, result()
  // is absent, display() has the shape, row flags and range but no values, and the weights of
  // the shown head (max- or mean-pooled, View::pooledMean) come from pooled(), computed on its
  // worker thread. Only the weights stage exists then (other stages show the weights), and the
  // head average, the wrong axis and painted cells are off. Export streams
  // (renderStreamedExport).
  bool pooledMode() const { return pooledMode_; }
  PooledPyramid& pooled() { return pyramid_; }
  const PooledPyramid& pooled() const { return pyramid_; }

  // ---- many heads over the memory budget (PooledPolicy::oneHead) ----------------------------
  // True while only the shown head is materialised: the engine holds that head alone (its
  // slice of Q, K and V, with the parameters it has among all heads), result() has the full
  // shape but only the shown head's scores, weights and row statistics (the other heads' cells
  // are never written, so they take no memory), and every head's output. The other heads are
  // run one at a time (refreshStaleHeads) for their thumbnails (headThumbnail) and outputs.
  // The head average is computed head by head when shown.
  bool headsStreamed() const { return oneHead_; }
  // Head h's weights max-pooled (PooledWeights::max, `masked`) at thumbnailPool() cells a
  // pixel, once refreshStaleHeads has reached it for the current parameters (headFresh(h));
  // null before, and outside headsStreamed().
  std::shared_ptr<const PooledWeights> headThumbnail(int h) const;
  int thumbnailPool() const { return thumbPool_; }

  // Query row i of the shown head (the row inspector's): its logits over every key, weights, row
  // statistics and output (streamQueryRow, from Q, K and V; never the T_q x T_k matrix), with
  // the current parameters. Kept for the (inputs, parameters, head, row) it was computed for,
  // so asking every frame costs nothing. Null outside pooled mode, without inputs, for a row out
  // of range, or when the row cannot be computed (the pyramid reports why).
  std::shared_ptr<const QueryRow> pooledRow(int i);
  // Milliseconds the last pooledRow computation took.
  double lastPooledRowMs() const { return pooledRowMs_; }

  // ---- results ----------------------------------------------------------------------------
  bool ready() const { return haveInputs_; }
  Generations requested() const { return requested_; }
  Generations computed() const { return computed_; }
  const SceneInputs& inputs() const { return inputs_; }
  Dims dims() const {
    return haveInputs_ && engine_ ? (pooledMode_ || oneHead_ ? pooledDims_ : engine_->dims())
                                  : Dims{};
  }
  int heads() const { return dims().H; }
  int tq() const { return dims().Tq; }
  int tk() const { return dims().Tk; }
  // The parameters of the last softmax (the scene's, with its mode's causal term).
  const AttentionParams& params() const { return params_; }
  const std::vector<float>& slopes() const { return slopes_; }
  // The host copy of the engine's stages (S, weights of the fresh heads, output, row stats).
  const AttentionResult& result() const { return *result_; }
  bool hasResult() const { return result_ != nullptr; }
  bool headFresh(int h) const { return h >= 0 && h < int(headFresh_.size()) && headFresh_[h]; }
  bool allHeadsFresh() const;
  std::uint64_t headVersion(int h) const { return headVersion_[h]; }  // bumped per softmax
  std::uint64_t weightsVersion() const { return weightsVersion_; }    // any head's softmax
  std::uint64_t inputsVersion() const { return computed_.inputs; }
  // z = S + b of one head (-inf where masked), τ-independent, for the head last displayed.
  const std::vector<float>& biasedScores() const { return biased_; }
  int biasedHead() const { return biasedHead_; }
  std::uint64_t biasedVersion() const { return biasedVersion_; }
  const DisplayMatrix& display() const { return display_; }
  CellInfo cellInfo(int i, int j) const;
  // A change to the inputs dropped a custom mask of the old shape: says so once, then "".
  std::string takeNote();
  const Timing& timing() const { return timing_; }

  // Logits L of every head [H, T_q, T_k] for the current parameters (core's formula).
  Tensor3 logits() const;
  // The figure title's description: "[<source label> · ]<mode> · mask: <masks> · τ = <tau>" (the
  // causal mode shows as its mask, so no mode prefix; tensor sources have none).
  std::string describe() const;
  // The one export path: computes what the figure needs and renders it (GUI dialog, Ctrl+S and
  // `attnviz export` all come here). The value-weighted and rollout stages draw themselves and
  // need setSourceStages' data (UsageError without it). Throws what renderExport throws.
  Image exportImage(const ExportRequest& request);

 private:
  Image exportModelStage(const ExportRequest& request);
  void runInputs(bool fusedRun);
  void runParams();
  void runView();
  void runPooled();
  void runPooledView();
  void computeHeads(const std::vector<int>& heads);
  // headsStreamed(): the engine holds head h (setInputs with its slice) and runs its softmax
  // and output; the shown head's stages are copied into result() (`shown`), another head gives
  // its thumbnail and output only.
  void runOneHead(int h, bool shown);
  void computeStreamedAverage();
  void fetchResult();
  void buildBiased(int h);
  void bumpInputs();
  void bumpParams();
  int shownHead() const;

  std::unique_ptr<AttentionEngine> engine_;
  Scene scene_;
  bool fromTensors_ = false;
  std::string sourceLabel_;
  std::string queryAxis_, keyAxis_;
  SceneInputs inputs_;  // tokens and Q, K, V of the last successful setInputs
  View view_;
  AttentionParams params_;
  std::vector<float> slopes_;
  bool maskStale_ = true;  // with a params change: rebuild the mask, not only τ
  Generations requested_{1, 1, 1}, computed_{0, 0, 0};
  bool haveInputs_ = false;
  const AttentionResult* result_ = nullptr;
  bool scaledFetched_ = false;
  std::vector<std::uint8_t> headFresh_;
  std::vector<std::uint64_t> headVersion_;
  std::uint64_t weightsVersion_ = 0;
  std::vector<float> biased_;
  int biasedHead_ = -1;
  std::uint64_t biasedFor_ = ~std::uint64_t{0};  // mask generation the biased scores are for
  std::uint64_t biasedVersion_ = 0;
  std::uint64_t maskGeneration_ = 0;
  struct DisplaySource {
    std::uint64_t view = ~std::uint64_t{0}, weights = ~std::uint64_t{0};
  } displayFor_;
  SceneInputs pending_;  // setTensors' inputs until the next update
  DisplayMatrix display_;
  std::vector<float> valueNorms_, rollout_;  // setSourceStages
  BlockView block_;                          // setBlock
  // The block with indices outside the current T_q x T_k dropped.
  BlockView fittedBlock() const;
  std::string note_;
  Timing timing_;
  // Pooled mode: Q and K shared with the pyramid's worker, and what its source was built from.
  PooledPolicy policy_;
  bool mayPool_ = true;  // false for a source whose engine holds its weights (setTensors)
  bool pooledMode_ = false;
  Dims pooledDims_;
  std::shared_ptr<const Tensor3> pooledQ_, pooledK_;
  struct PooledFor {
    std::uint64_t inputs = ~std::uint64_t{0}, params = ~std::uint64_t{0};
    int head = -1;
    bool mean = false;
    bool operator==(const PooledFor&) const = default;
  } pooledFor_;
  std::uint64_t pooledKey_ = 0, pooledDisplayFor_ = ~std::uint64_t{0};
  struct PooledRowFor {
    std::uint64_t inputs = ~std::uint64_t{0}, params = ~std::uint64_t{0};
    int head = -1, row = -1;
    bool operator==(const PooledRowFor&) const = default;
  } pooledRowFor_;
  std::shared_ptr<const QueryRow> pooledRow_;
  double pooledRowMs_ = 0;
  // headsStreamed(): the engine's head, the host copy result() points at, the thumbnails.
  bool oneHead_ = false;
  int engineHead_ = -1;
  bool engineHeadFresh_ = false;  // the engine's softmax is for the current parameters
  AttentionResult host_;
  int hostHead_ = -1;  // the head whose scores and weights host_ holds
  std::uint64_t hostScaledFor_ = ~std::uint64_t{0};
  int thumbPool_ = 1;
  std::vector<std::shared_ptr<const PooledWeights>> thumbs_;
  std::vector<float> average_;  // the head average's weights [T_q, T_k]
  std::uint64_t averageFor_ = ~std::uint64_t{0}, averageVersion_ = 0;
  PooledPyramid pyramid_;  // last, so destroyed first: its worker stops before the rest goes
};

}  // namespace attnviz
