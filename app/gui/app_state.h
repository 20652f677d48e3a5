// attnviz GUI: the state every panel reads and edits. Plain structs, no function statics.
//
// Who owns what:
//   Session      (attnviz_session, no GUI) the scene, its inputs, the engine, the parameters
//                and the displayed matrix, each stage with its generation counter
//   SceneState   where the scene came from
//   BackendState which engine runs and why
//   ViewState    how the matrix is looked at (head, stage, colormap, pan/zoom, selection); its
//                head, average, stage and wrong-axis fields go to the session every frame
#pragma once

#include "attnviz/render/colormap.h"
#include "attnviz/engine/engine.h"
#include "attnviz/formats/scene.h"
#include "attnviz/session/alignment.h"
#include "attnviz/session/dump_source.h"
#include "attnviz/engine/flash_walkthrough.h"
#include "attnviz/session/model_source.h"
#include "attnviz/session/seq2seq_source.h"
#include "attnviz/model/generate.h"
#include "attnviz/model/head_finder.h"
#include "attnviz/model/model_names.h"
#include "attnviz/model/qk_split.h"
#include "attnviz/model/retrieval.h"
#include "attnviz/session/session.h"
#include "cli/attribution_report.h"
#include "cli/overlay_view.h"
#include "gui/mask_editor.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <filesystem>
#include <future>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace attnviz::gui {

class HeatmapRenderer;

// The session (attnviz/session.h) owns the scene, the engine, the parameters and the displayed
// matrix; the GUI keeps only how it is looked at and its own widgets' state.
struct SceneState {
  std::string path;  // the file it was loaded from; empty for the built-in scene
};

struct ViewState {
  int head = 0;
  bool headAverage = false;
  ViewStage stage = ViewStage::Weights;
  ColormapId weightColormap = ColormapId::Viridis;
  ColormapId scoreColormap = ColormapId::Diverging;
  ColorScale scale = ColorScale::Linear;
  float gamma = 0.5f;
  float logFloor = 1e-3f;
  bool autoRange = false;  // weights: map [0, max] instead of [0, 1]
  bool wrongAxis = false;  // teaching toggle: softmax over queries (columns sum to 1)
  bool showGrid = true;
  int selectedRow = -1;
  int hoverRow = -1, hoverCol = -1;  // this frame; -1 when the mouse is elsewhere
  // Pan and zoom: zoom 1 fits the whole matrix; pan is the top-left visible cell.
  float zoom = 1.0f;
  float panX = 0.0f, panY = 0.0f;
  bool paintMode = false;  // left-drag paints blocked cells; with Shift it clears them
  bool showMaskMatrix = true;
  bool pooledMean = false;  // pooled mode: mean-pooled instead of max-pooled
  // Where the heatmap was drawn last frame (screen pixels), for scripted input and tests.
  struct Geometry {
    bool valid = false;
    float x0 = 0, y0 = 0, w = 0, h = 0, cellPx = 1;
  } geometry;
};

// Heatmap axis labels, shortened and measured once per token list and font size rather than
// every frame: one entry per row ([rows]) or column ([cols]) of the display matrix.
struct AxisLabels {
  std::vector<std::string> text;
  std::vector<float> width;  // pixels at the cached font size
  float maxWidth = 0;
};
struct LabelCache {
  std::uint64_t inputsVersion = ~std::uint64_t{0};  // ComputeState::inputsVersion it was built for
  float fontSize = 0;
  bool columnsAreKeys = true;
  int rows = -1, cols = -1;
  std::vector<int> rowIndex, colIndex;  // the display's block (DisplayMatrix::rowIndex)
  AxisLabels rowLabels, colLabels;
};

// Pooled mode (Session::pooledMode): the pyramid tile on screen, as a matrix of texels for the
// heatmap renderer (one texel = pool x pool cells; -inf where every cell is masked).
struct PooledViewState {
  std::shared_ptr<const PooledTile> tile;  // shown this frame (null: the coarse level is pending)
  bool exact = false;                      // false: a coarser stand-in while a tile refines
  DisplayMatrix texels;
  std::uint64_t texelsFor = 0;  // the tile id the texels hold
  bool texelsMean = false;
};

// What the row inspector showed last frame (scripted runs print it; tests compare it).
struct RowInspectorShown {
  int row = -1, head = -1, topKey = -1, allowed = 0;
  float topWeight = 0, sum = 0, entropy = 0;
  bool fullyMasked = false, pooled = false;
};

struct BackendState {
  std::string backend;      // the engine's name()
  std::string backendNote;  // why the GPU is not used, when it is not
  std::string glRenderer;   // GL_RENDERER of the window's context
};

struct Timing {
  double uploadMs = 0, renderMs = 0;  // the engine's and the view matrix's: session.timing()
  double computeMs = 0;               // frame boundary: updateCompute
  double uiMs = 0;                    // building the ImGui frame (panels)
  double frameMs = 0;     // exponential average of whole frames' work (not the wait for events)
  double lastFrameMs = 0;
  double intervalMs = 0;  // exponential average from one frame's start to the next (the FPS)
};

struct ExportState {
  bool requestOpen = false;
  bool allHeads = false;
  int stage = 0;  // 0 weights, 1 scores (logits), 2 value-weighted, 3 rollout (a model's)
  bool grid = false;  // a model's layers x heads figure instead of the shown head(s)
  int cell = 0;   // 0 = automatic
  ColormapId colormap = ColormapId::Viridis;
  bool labels = true;
  int format = 0;  // 0 PNG, 1 SVG, 2 PDF (the path's extension decides what is written)
  char path[1024] = "";
  bool pathEdited = false;
  int lastHeatX = 0, lastHeatY = 0, lastCellPx = 0;  // the last export's heatmap (Image::heatX...)
};

struct UiState {
  std::string error;  // shown in a modal popup, then cleared
  bool errorPending = false;
  std::string notice;      // short confirmation in the status bar
  double noticeUntil = 0;  // glfwGetTime() until which it shows
  bool requestOpenDialog = false;
  bool requestSaveDialog = false;
  std::string browseDir;  // open/save dialog folder
  std::vector<std::string>
      presets;  // assets/scenes/*.json, scanned once and while the menu is open
  bool presetsScanned = false;
  char fileName[1024] = "";
  std::vector<std::string> dropped;  // files dropped on the window, handled next frame
  std::string npyPending;            // a dropped .npy waiting for "use as Q/K/V/mask"
  char npyRole = 0;                  // chosen role for npyRolePath, applied at the frame boundary
  std::string npyRolePath;
  float uiScale = 1.0f;
  float tauSlider[4] = {0, 0, 0, 0};    // screen rect of the temperature slider (scripted drags)
  float leftWidth = 0, rightWidth = 0;  // side panels in unscaled pixels; 0 = automatic
  bool showHelp = false;
  bool printHover = false;  // --hover-cell: print the tooltip of the hovered cell
  std::string lastHoverPrinted;
  bool quit = false;
};

struct AppState;

// A model being opened on a worker thread: what Model::open reports, read by the frame, then
// the progress of its first pass. Setting pass.cancel (the status bar's Cancel) stops either.
// The opening pass's layers as they finish, so that the window draws each one before the whole
// pass is done (a 1B model's pass takes seconds; its first layer a fraction of one). The worker
// publishes each layer (PassProgress::onWeights, model_io.cpp) under `m`; the frame reads it
// (open_preview_panel.cpp) and asks for the layer and head it shows (`wantLayer`, `wantHead`).
// Thumbnails are the pass's own (Capture::view's max-pool), so the finished grid is the same.
struct OpenPreview {
  std::mutex m;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now();  // openModel
  double openedMs = -1;                    // Model::open returned (the pass begins)
  int layers = 0, heads = 0, kvGroup = 1, tokens = 0;
  std::vector<Tensor3> thumbs;      // per layer: [H, n, n] max-pooled weights; empty: pending
  std::vector<double> layerDoneMs;  // per layer: when it was published (-1: pending)
  int layersDone = 0;
  int wantLayer = 0, wantHead = 0;  // the frame's shown layer and head
  // The shown head of the shown layer as it came from the pass: [1, n, n], max-pooled to at
  // most kPreviewSide a side (the exact weights up to that length).
  static constexpr int kPreviewSide = 2048;
  Tensor3 shown;
  int shownLayer = -1, shownHead = -1;
  std::uint64_t version = 0, shownVersion = 0;  // bumped by every publish; by a new `shown`
  // The first pass round's layers from `finalFrom` on are the baseline's (the request's
  // ablations re-run them): they wait for the second round.
  int finalFrom = 1 << 30, round = 0, lastLayer = -1;
  // The frame's own: what the panel drew (for --report-timing).
  double firstHeatmapMs = -1, wholeGridMs = -1;
  int heatmapLayer = -1, heatmapHead = -1, layersAtFirstHeatmap = -1;
  Tensor3 firstHeatmap;  // the matrix the first drawn heatmap showed
};

struct ModelLoadProgress {
  std::mutex m;
  double fraction = 0;
  std::string what;
  PassProgress pass;
  OpenPreview preview;
};

// What the opening worker hands the frame: the model's source with the request checked and the
// first pass run (a 1B model's pass takes seconds: the window keeps drawing meanwhile); an
// encoder-decoder's in `seq2seq`, with the site the request names.
struct OpenedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<ModelSource> source;
  std::unique_ptr<Seq2SeqSource> seq2seq;
  int site = 0;
  std::string text, textPair;  // what the first pass ran on
  // The model's chat format ("llama3", "chatml", ...), or why the checkbox is off (no template,
  // one not recognised): read once, on the worker.
  std::string chatFormat, chatWhyNot;
};

// The Generate panel: one continuation generated on a worker thread (generate.h).
// The worker appends to `pending` under the mutex; the frame moves them into `tokens`.
struct GenerateRun {
  std::mutex m;                         // guards pending, done, error, seconds, stop
  std::vector<GeneratedToken> pending;  // from the worker, not yet taken by the frame
  bool done = false;
  std::string error, stop;
  double seconds = 0;  // decode steps so far (the prompt's pass excluded)
  std::atomic<bool> cancel{false};
  // The frame's side (UI thread only).
  std::vector<GeneratedToken> tokens;
  std::vector<std::string> pieces;  // each token's text
  bool finished = false;            // done, and every token taken
};
// Stops a panel's worker: its pass cancelled at the next layer, the job joined and dropped.
template <class R>
void cancelAndJoin(std::future<R>& job, std::shared_ptr<PassProgress>& progress) {
  if (job.valid()) {
    if (progress) progress->cancel = true;
    job.wait();
  }
  job = {};
  progress.reset();
}

// The Generate panel's loss by token: the model view's text scored three ways
// (attnviz/model/score.h) on a worker: the whole context, S sinks + the last W tokens, and a
// plain window of S + W (the same number of keys).
struct CacheLossState {
  int sinks = 4, window = 8;
  struct Result {
    int sinks = 0, window = 0;
    std::vector<float> dense, sinksWindow, windowOnly;
    std::string error;
  };
  std::future<Result> job;
  std::shared_ptr<PassProgress> progress;  // the job's: closeSources cancels it
  Result result;
  bool scripted = false;  // --cache-loss: scored once the text has run, waited for
  bool scriptedWait = true;  // false with --drop-while-busy: the scripted job runs on
  void stop() {  // another model opens: the job stopped, the result dropped
    cancelAndJoin(job, progress);
    result = Result{};
  }
};

// The retrieval-heads panel: needle cases built from the model view's text as the
// filler, every head's retrieval score and the top-k against random-k masking
// (attnviz/model/retrieval.h), on a worker.
struct RetrievalState {
  char needle[512] = "And the name of the servant was Jehoiada.";
  char question[256] = "And the name of the servant was";
  char answer[128] = "Jehoiada.";
  int depths = 5, k = 2, draws = 5;
  struct Result {
    std::string filler;              // the text the cases were built from
    std::vector<NeedleCase> cases;   // at depths 0, 1/(n-1), ..., 1
    RetrievalScores scores;
    MaskComparison masks;
    std::string error;
  };
  std::future<Result> job;
  std::shared_ptr<PassProgress> progress;  // the job's: closeSources cancels it
  Result result;
  bool scripted = false;  // --retrieval: run once the text has run, waited for
  bool scriptedWait = true;  // false with --drop-while-busy: the scripted job runs on
  void stop() {  // another model opens: the job stopped, the result dropped
    cancelAndJoin(job, progress);
    result = Result{};
  }
};

// The "Why here?" panel: the selected cell's score split over what wrote q and k
// (attnviz/model/qk_split.h), from a pass run on a worker with what the split needs.
struct WhyHereState {
  struct Cell {
    std::uint64_t pass = ~std::uint64_t{0};  // ModelState::passVersion
    int layer = -1, head = 0, query = 0, key = 0;
    bool operator==(const Cell&) const = default;
  };
  Cell want, have;  // the cell shown; the one `result` (or `error`) is for
  // The key picked for a row (its largest weight) stays while the ids, row, layer and head do,
  // so that an ablation that moves the row's weight elsewhere changes this cell's split in place.
  struct Picked {
    int layer = -1, head = -1, row = -1, key = -1;
    std::vector<int> ids;
  } picked;
  std::future<QkSplit> job;
  std::shared_ptr<PassProgress> progress;  // the job's: closeSources cancels it
  QkSplit result;
  std::string error;
  bool valid = false;  // `result` holds `have`'s split
  // The composition map of the shown head against every earlier head (compositionScores), per
  // kind (q, k, v), computed on a worker once per model.
  int compRunning = -1;  // the kind compJob computes
  struct Composition {
    std::vector<float> scores;
    CompositionBaseline random;  // the same score for random weights of these shapes
  };
  std::future<Composition> compJob;
  Composition comp[3];
  std::string compError[3];
  void stop() {  // another model opens: the jobs stopped, the results dropped
    cancelAndJoin(job, progress);
    if (compJob.valid()) compJob.wait();
    compJob = {};
    *this = WhyHereState{};
  }
};

struct GenerateState {
  int n = 32, topK = 40, seed = 0;
  bool sample = false;
  float temperature = 1.0f;
  std::shared_ptr<GenerateRun> run, plain;  // with the interventions; without them (Compare)
  std::vector<std::thread> workers;
  std::vector<int> prompt;
  int step = 0;  // the step shown, from 1; follows the newest token while `follow`
  bool follow = true;
  int scripted = 0;  // --generate N: started (greedy) once the model's text has run
  // A model scene's "generate" object: started with these settings once the text has run.
  bool autoStart = false;
  bool busy() const {
    return scripted > 0 || autoStart || (run && !run->finished) || (plain && !plain->finished);
  }
  // Whether a saved scene carries these settings: a continuation was generated or is to be.
  bool used() const { return autoStart || scripted > 0 || run != nullptr; }
  void stopAll() {
    for (GenerateRun* r : {run.get(), plain.get()})
      if (r) r->cancel = true;
    for (std::thread& t : workers)
      if (t.joinable()) t.join();
    workers.clear();
  }
  ~GenerateState() { stopAll(); }
};

// The Attribution panel: an ablation sweep or activation patching
// (attnviz/model/attribution.h) on a worker thread, on a copy of the model view's pass. The worker
// copies each finished layer's row into `values` under the mutex, so the map fills in row by row.
struct AttributionRun {
  std::mutex m;  // guards all but cancel
  int rows = 0, cols = 0;
  std::vector<float> values;  // [rows, cols]; NaN until its row arrives
  int rowsDone = 0;
  double fraction = 0;
  std::atomic<bool> done{false};  // set last, under the mutex; read without it
  std::string error;
  bool haveReport = false;  // once done: the figure's report, and the logit lens at P
  app::AttributionReport report;
  LogitLens lens;
  double startedAt = 0, firstRowAt = -1, finishedAt = -1;  // nowSeconds()
  std::atomic<bool> cancel{false};
};
struct AttributionState {
  int method = 0;  // 0 zero-ablation sweep, 1 mean-ablation sweep, 2 activation patching
  int position = -1, target = -1, foil = -1;  // -1: the defaults (attribution.h)
  char clean[4096] = "";                      // patching: the clean text (the model's is corrupted)
  char targetPiece[256] = "", foilPiece[256] = "";  // typed tokens
  std::shared_ptr<AttributionRun> run;
  std::thread worker;
  std::uint64_t runPass = 0;  // ModelState::passVersion the run started on
  std::vector<int> runIds;    // the ids it ran on (the corrupted run's for a patch)
  bool wantRun = false;       // run at the next frame (a scene's "run": true)
  bool used = false;          // a scene gave settings or the panel ran: a saved scene keeps them
  double firstShownAt = -1;   // the first frame that drew a filled row
  char exportPath[1024] = "attribution.png";
  // The selected head's direct effect, for (pass, layer, head, position).
  struct Effect {
    std::uint64_t pass = ~std::uint64_t{0};
    int layer = -1, head = -1, position = -2;
    DirectEffect e;
    std::string error;
  } effect;
  // Where the map was drawn last frame (screen pixels), for scripted clicks and tests.
  struct Grid {
    bool valid = false;
    float x0 = 0, y0 = 0, cell = 0;
    int rows = 0, cols = 0;
  } grid;
  // Scripted (--attribution-click L,H, --attribution-export PATH).
  int clickLayer = -1, clickHead = -1, clickPhase = 0;
  std::string scriptExport;
  bool busy() const { return wantRun || (run && !run->done); }
  void stop() {
    if (run) run->cancel = true;
    if (worker.joinable()) worker.join();
  }
  ~AttributionState() { stop(); }
};

// The [MASK] fill panel: an encoder's masked-LM predictions at each mask token, with
// the interventions (after) and without them (before), refreshed after every pass as the next-
// token lists are. Its own text, when typed, runs its own pass; empty: the model view's text.
struct FillState {
  char text[4096] = "";
  int topK = 5;
  std::uint64_t textFor = ~std::uint64_t{0};  // ModelState::passVersion its own pass ran for
  std::string ranText;                        // the text that pass ran on
  double editedAt = -1;  // nowSeconds() of the last edit not yet run (its text runs a pass)
  std::vector<MaskFill> after, before;
  std::vector<std::string> tokens;  // the tokens the fills are for
  std::string error;                // why there is nothing to fill (no head, no mask token)
  bool print = false;               // --print-fill: print the lists once they are current
  std::uint64_t printedFor = ~std::uint64_t{0};
};

// The Head finder panel (head_finder_panel.cpp): a tree of `attnviz heads` (or HeadVis's) read
// back (attnviz/model/head_finder.h), or a run over a corpus for the open model on a worker. The
// tree is the panel's own and outlives the model; the run is the model's (closeSources stops it).
struct HeadFinderRun {
  std::mutex m;  // guards done, total
  long long done = 0, total = 0;
  double startedAt = 0;
  bool temp = false;  // the tree goes under the temp dir (HeadFinderState::tempTree)
};
struct HeadFinderState {
  bool open = false;                      // the window shows
  std::shared_ptr<const HeadTree> tree;   // null: none open
  std::string error;                      // the last open's or run's one line
  char treePath[1024] = "";
  char corpusPath[1024] = "";
  char outPath[1024] = "";  // where a run writes its tree ("" : a folder under the temp dir)
  // The tree a run wrote under the temp dir (no output folder given): removed when another tree
  // replaces it in the panel and when the app closes, so runs leave nothing behind.
  std::string tempTree;
  void removeTempTree() {
    if (tempTree.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(tempTree, ec);
    tempTree.clear();
  }
  int seqLen = 256, sequences = 0;  // a run's --seq-len and --sequences (0: all)
  int xMetric = 1, yMetric = 5;     // the scatter's axes (tree metric indices)
  int sortColumn = -1;              // the table's sort: column (0 layer, 1 head, 2+ a metric)
  bool sortDescending = true;
  int requestSort = -1;             // a scene's or script's sort, applied to the table's specs
  std::string requestSortName;      // the same by metric name, before the tree is open
  std::string xName, yName;         // a scene's axes by metric name, applied when the tree opens
  std::vector<std::size_t> order;   // the table's rows in their sorted order
  int selected = -1;                // the selected head (tree row); -1 none
  std::shared_ptr<const HeadDashboardData> dash;  // the selected head's file
  int dashRow = -1;                 // the row `dash` (or dashError) is for
  std::string dashError;
  // A run over a corpus: the worker returns the tree's folder; cancel through `progress`.
  std::future<std::string> job;
  std::shared_ptr<PassProgress> progress;
  std::shared_ptr<HeadFinderRun> run;
  bool wantRun = false;  // run once the model is open (a scene's "corpus")
  // Scripted and scene requests: select this head once the tree is open; open its n-th kept
  // sequence in the main view once the model is open; print the panel's state.
  int wantLayer = -1, wantHead = -1, wantSequence = -1;
  bool print = false;
  // The sequence opened last (for the scripted print): its head and ids.
  int openedLayer = -1, openedHead = -1, openedSequence = -1;
  std::vector<int> openedIds;
  bool busy() const { return job.valid() || wantRun; }
  void stopRun() {  // the model goes: the run stopped at its next layer, nothing written
    cancelAndJoin(job, progress);
    run.reset();
  }
  ~HeadFinderState() {
    stopRun();
    removeTempTree();
  }
};

// The model view: a GPT-2 model as the session's source (attnviz/model_source.h).
struct ModelState {
  std::unique_ptr<ModelSource> source;  // null: no model open
  std::string dir;
  std::int64_t maxMemory = -1;  // --max-memory in bytes (-1: defaultMemoryBudget())
  // Opening: the folder, the worker's result and its progress.
  std::string loadingDir;
  std::future<OpenedModel> loading;
  // Something else was opened (a scene, File > Default scene) while it loaded: it is dropped
  // when it arrives instead of replacing what the user chose since.
  bool loadingDropped = false;
  std::shared_ptr<ModelLoadProgress> progress;
  // What the opening model should show once it is open: a model scene's or the command line's
  // layer, head and ablations, range-checked then; `origin` names them in errors.
  struct Request {
    int layer = 0, head = 0;
    std::vector<std::pair<int, int>> ablate;
    SceneGenerate generate;  // a model scene's continuation, started once the text has run
    std::string origin;  // the scene file, for errors
    bool cli = false;    // from --layer/--head/--ablate: out of range is a usage error
    SceneAttribution attribution;  // the Attribution panel's settings (a model scene's)
    std::vector<SceneLayerIntervention> interventions;  // a model scene's masks, τ, RoPE off
    std::string textPair, slice, special;               // an encoder scene's pair and block
    bool hasPair = false;                               // textPair given (a scene's or --text-pair)
    // Encoder-decoders: the target text, the site shown ("dec:0:cross", "" = the first) and
    // ablations of any site ("cross:L:H", "enc:L:H", "L:H" the decoder's self site).
    std::string target, site;
    std::vector<std::string> siteAblate;
    std::vector<int> maskSource;  // source positions hidden from every cross site
    // The chat format (a scene's "chat"/"system", --chat/--system); none: the text panel's.
    std::optional<ChatSetting> chat;
  } request;
  std::string sceneTitle, sceneNotes;  // a model scene's, shown once the model is open
  char text[4096] = "";
  // Encoders: sentence B of a pair ("" = one text), the block of the matrix shown
  // (PairSlice) and the special tokens (SpecialTokens); the block goes to the session each frame.
  char textPair[4096] = "";
  // The text panel's chat format: the text as a user turn in the model's chat template (after
  // the system turn when `system` is not empty), ending with the assistant's opening.
  bool chat = false;
  char system[2048] = "";
  std::string chatFormat, chatWhyNot;  // the open model's (OpenedModel)
  ChatSetting chatSetting() const {
    ChatSetting c;
    c.on = chat;
    if (chat && system[0]) c.system = std::string(system);
    return c;
  }
  int slice = 0, special = 0;
  bool openSliceMenu = false;  // --popup slice: the slice menu opens (README screenshots)
  // The Model panel's encoder facts (they read files: once per model, not every frame).
  std::shared_ptr<const EncoderFacts> facts;
  int pairs = -1;  // whether the open model's tokenizer has a pair template (-1: not asked yet)
  FillState fill;
  double textEditedAt = -1;  // nowSeconds() of the last edit not yet run; -1 when none
  // An edited text's pass, running on a worker thread (ModelSource::runText) while the window
  // keeps drawing; adopted at the frame boundary once done.
  std::future<ModelSource::TextPass> textPass;
  // Its progress (the status bar's bar and Cancel), and whether the user cancelled it (a pass
  // made stale by a newer edit is cancelled without a word).
  std::shared_ptr<PassProgress> textProgress;
  bool textCancelledByUser = false;
  // The panels' interventions re-run on a worker too (the source defers them: its pass is
  // stale meanwhile, ModelSource::stale), with their progress and Cancel (back to the
  // interventions the pass ran with).
  std::future<ModelSource::Rerun> rerun;
  std::shared_ptr<PassProgress> rerunProgress;
  bool rerunCancelledByUser = false;
  // A pass is pending: an edited text's, or the interventions' re-run.
  bool textBusy() const {
    return textEditedAt >= 0 || textPass.valid() || rerun.valid() || (source && source->stale());
  }
  int layer = 0;
  int neuronKey = -1;       // the neuron view's key; -1: the selected row's largest weight
  bool showResidual = false;  // --show-residual: the residual-stream panel starts open
  bool showWhyHere = false;   // --why-here, a scene's panels.whyHere: the "Why here?" panel open
  // The panel's tab (0 the score split, 1 the composition map) and composition kind (0 q, 1 k,
  // 2 v); a scene's panels.whyHere object sets both, and `whyHereTabAsked` selects the tab once.
  int whyHereTab = 0, whyHereKind = 1;
  bool whyHereTabAsked = false;
  // --why-here-ablate L:H: press that head's ablate button in the panel once it is shown.
  std::pair<int, int> whyHereAblate{-1, -1};
  bool layerDirty = false;  // the session shows another layer than `layer`
  std::uint64_t passVersion = 0;  // bumped by every pass (text or interventions)
  // Interventions asked for by the panels, run at the frame boundary (they may throw).
  std::vector<std::function<void(AppState&)>> actions;
  // Next-token candidates, refreshed after each pass: with the interventions and without.
  std::vector<TokenProb> after, before;
  std::vector<std::string> afterLabels, beforeLabels;
  bool requestOpenDialog = false;
  char openPath[1024] = "";
  std::vector<StoredModel> storedModels;  // listed when File > Open model appears
  // Where the layers x heads grid was drawn last frame (screen pixels), for tests.
  struct GridGeometry {
    bool valid = false;
    float x0 = 0, y0 = 0, thumb = 0, pitch = 0;
  } grid;
  bool open() const { return source != nullptr; }
  AttributionState attr;
  CacheLossState cacheLoss;
  RetrievalState retrieval;
  WhyHereState whyHere;
  HeadFinderState heads;  // the Head finder panel
  GenerateState gen;  // last: its workers are joined before the rest goes
};

// The dump view: recorded attention as the session's source (attnviz/dump_source.h).
// The Alignment panel: an encoder-decoder's cross site read as an alignment between
// the source and target strips (attnviz/session/alignment.h), and its AER against a typed gold
// alignment. Recomputed (updateAlignment) only when the pass, the site, the head or an option
// changes, not every frame.
struct AlignmentState {
  bool words = true;       // strips of words (pieces grouped); off: one unit per token
  bool meanHeads = false;  // the site's mean over its heads instead of the shown head
  AlignOptions options;    // argmax or threshold, the shift by one (on by default)
  char gold[2048] = "";    // the gold box: Pharaoh pairs "S-T ..." (source unit - target unit)
  std::string goldApplied;  // the box's text as last applied (left, Enter, a button, --gold)
  bool scripted = false;   // --gold or --no-shift: a scripted run prints the alignment lines
  struct Key {
    std::uint64_t version = ~std::uint64_t{0};  // DumpState::version: a new pass
    int site = -1, head = -1;
    bool meanHeads = false, words = false;
    AlignOptions options;
    std::string gold;
    bool operator==(const Key&) const = default;
  } built;
  // What was computed for `built`.
  int site = -1;  // the dump layer read (a cross site), -1: none
  int head = 0;
  AlignmentStrips strips;
  Eigen::MatrixXd unitWeights;  // [target units x source units]
  Alignment links, goldLinks;
  std::string error;  // the gold text's (or the computation's) one-line error
  double aer = 0;     // of `links` against `goldLinks`, when there are gold links
  AerMap map;         // every cross head against the gold (empty without gold)
};

struct DumpState {
  std::unique_ptr<DumpSource> source;  // null: no dump open
  std::string path;
  int layer = 0;
  bool layerDirty = false;
  // The GUI's own engine (CPU or GPU) while the dump's WeightsEngine stands in for it.
  std::unique_ptr<AttentionEngine> savedEngine;
  std::uint64_t version = 0;  // bumped when a dump opens (the grid's thumbnails)
  bool open() const { return source != nullptr; }
  // An encoder-decoder model shown as the dump of its pass's sites (seq2seq_source.h): null for
  // a dump file. Its Source and Target boxes; `rerun` asks syncModel to run the pass again
  // (edited texts, an ablation) and rebuild the dump, keeping the site and head.
  std::unique_ptr<Seq2SeqSource> seq2seq;
  char sourceText[4096] = "", targetText[4096] = "";
  char maskSource[256] = "";  // the panel's hidden source positions, "2,5"
  bool rerun = false;
  // The pass (opening aside) and each watched-translation token run on a worker thread
  // (Seq2SeqSource::runJob) while the window keeps drawing, adopted at the frame boundary; the
  // source defers its interventions meanwhile (stale until their pass is adopted). Its progress
  // is the status bar's bar and Cancel; jobVersion the interventions it ran with.
  std::future<Seq2SeqSource::Job> job;
  std::shared_ptr<PassProgress> jobProgress;
  bool jobStep = false;  // the job is a translation step
  bool jobCancelledByUser = false;
  std::uint64_t jobVersion = 0;
  // A pass or a translation is pending.
  bool busy() const {
    return seq2seq && (rerun || job.valid() || seq2seq->stale() || translate.left > 0 ||
                       translate.requested > 0);
  }
  std::vector<TokenProb> before, after;  // the decoder's next token without / with ablations
  AlignmentState align;
  // T5's Position bias panel open (saved in scenes); positionBiasSet: a scene set it, applied to
  // the panel's header on the next frame.
  bool positionBiasOpen = false, positionBiasSet = false;
  // Watched translation (the panel's Translate button, --translate N, a scene's "generate"): the
  // decoder's greedy token appended to the target, one a frame, the pass run again each time.
  struct Translate {
    int requested = 0;  // tokens asked for, started once an encoder-decoder is open
    int tokens = 24;    // the panel's count
    int left = 0;       // > 0: running
    std::string from;   // the target text it started from (what a scene saves)
    std::vector<int> ids;  // the tokens appended so far
    std::string stop;      // why it stopped: "eos", "length", "context" or an error
    double stepSeconds = 0;  // the decode steps of the tokens so far (the worker's)
    bool used() const { return !ids.empty() || left > 0 || !stop.empty(); }
  } translate;
};

// The FlashAttention stage: the shown head computed tile by tile with the online
// softmax (attnviz/flash_walkthrough.h), stepped through by the user. The walkthrough is rebuilt
// only when the session's inputs or parameters, the head or the block sizes change.
struct FlashState {
  bool active = false;               // the stage is shown in place of the heatmap
  int blockRows = 8, blockKeys = 8;  // B_r x B_c as asked (the walkthrough clamps them to T)
  int step = 0;  // the step shown, counted from 1 as the panel says it; 0: before the first
  bool playing = false;
  float speed = 2.0f;      // steps per second while playing
  double lastAdvance = 0;  // nowSeconds() of the last step played
  std::unique_ptr<FlashWalkthrough> walk;
  struct Built {  // what `walk` was built from
    std::uint64_t inputs = ~std::uint64_t{0}, params = ~std::uint64_t{0};
    int head = -1, blockRows = 0, blockKeys = 0;
    bool operator==(const Built&) const = default;
  } built;
  std::string error;  // why there is no walkthrough (shown in the panel)
  // The figure on screen (attnviz/flash_figure.h), redrawn when its key changes.
  struct Figure {
    std::uint64_t walkVersion = 0;  // bumped with every rebuild or step
    int width = 0, height = 0;      // the room it has
    ColormapId colormap = ColormapId::Viridis;
    bool operator==(const Figure&) const = default;
  } figureFor, figureWant;
  int heatX = 0, heatY = 0, cellPx = 0, imageW = 0, imageH = 0;
  std::uint64_t walkVersion = 1;
};

// The image view (image_view_panel.cpp): an image model (vit, deit, dinov2*, clip*, siglip*)
// run on one image on a worker, every layer's weights kept, and one token's attention row (or
// the rollout's) over the image, blended as the overlay figure blends it.
struct ImageViewState {
  bool active = false;     // an image model is open (with or without an image)
  std::string model;       // as given (a folder, ORG/NAME)
  std::string modelDir;    // its folder
  std::string imagePath;   // the image run or running; "" before one is opened
  int layer = 0, head = 0;
  bool headAverage = false;
  int token = -1;          // kDefaultOverlayToken (CLS, or the patch queries' mean) or an index
  bool rollout = false;
  RolloutOptions rolloutOptions;  // the heads' mean or maximum, the discarded fraction
  float opacity = 0.6f;
  bool showGrid = false;
  // The pass's interventions (heads ablated, patches hidden) and their text boxes.
  app::VisionInterventions interventions;
  char ablateText[256] = "", maskText[1024] = "";
  std::string interventionError;
  // The side panel beside the image: 0 tokens x tokens (the layer's head or heads' mean), 1 the
  // layers x heads thumbnails of the token's row, 2 the token norms after the layer.
  int side = 0;
  float normThreshold = 2.0f;  // a token is marked when its norm > threshold x the median
  struct SideKey {
    const void* pass = nullptr;
    int side = -1, layer = -1, head = -1, token = -2;
    bool headAverage = false;
    float threshold = 0;
    ColormapId colormap = ColormapId::Viridis;
    bool operator==(const SideKey&) const = default;
  } sideDrawnFor;
  std::vector<double> sideValues;  // what the side texture shows (norms: one per token)
  double sideMax = 1, normMedian = 0;
  std::vector<int> highNorm;       // tokens above the threshold
  struct SideGeometry {            // where the side panel's matrix, grid or map was drawn
    bool valid = false;
    float x0 = 0, y0 = 0, cellW = 1, cellH = 1;  // one cell (a T x T cell, a thumbnail, a patch)
  } sideGeometry;
  int sideHoverRow = -1, sideHoverCol = -1;
  double sideHoverValue = 0;
  int sideVertices = -1;  // vertices the side panel added last frame
  int scriptSideHoverRow = -1, scriptSideHoverCol = -1;  // --hover-side R,C
  int scriptSideClickRow = -1, scriptSideClickCol = -1;  // --click-side R,C
  int sideClickPhase = 0;
  std::string notes;  // an image-view scene's (a preset's) notes
  struct Job {  // the worker's step ("loading", "preprocessing", "running")
    std::mutex m;
    std::string step;
    double startedAt = 0;
  };
  std::shared_ptr<Job> jobInfo;
  std::future<std::shared_ptr<const app::VisionPass>> job;
  std::shared_ptr<const app::VisionPass> pass;  // the last pass adopted
  double passSeconds = 0;
  std::string error;  // why there is no pass
  // The texture and what it was drawn for.
  struct Key {
    const void* pass = nullptr;
    int layer = -1, head = -1, token = -2;
    bool headAverage = false, rollout = false;
    bool rolloutMax = false;
    double rolloutDiscard = -1;
    float opacity = -1;
    ColormapId colormap = ColormapId::Viridis;
    bool operator==(const Key&) const = default;
  } drawnFor;
  std::vector<double> map;  // the drawn map over the patches [gridH, gridW]
  std::string mapToken;     // what its row is ("CLS", "p(1,2)", ...)
  double mapMax = 1;
  // Where the image was drawn last frame (screen pixels; `scale` screen pixels an image
  // pixel), and the patch under the mouse (-1: none), for tooltips, scripted runs and tests.
  struct Geometry {
    bool valid = false;
    float x0 = 0, y0 = 0, scale = 1;
  } geometry;
  int hoverRow = -1, hoverCol = -1;
  double hoverWeight = 0;
  int scriptHoverRow = -1, scriptHoverCol = -1;  // --hover-patch R,C
};

struct AppState {
  Session session{nullptr};  // the engine is set once the window's GL context exists
  SceneState scene;
  BackendState backend;
  ViewState view;
  ModelState model;
  DumpState dump;
  LabelCache labels;
  ExportState exporter;
  UiState ui;
  MaskEditorState maskEditor;
  FlashState flash;
  ImageViewState image;
  Timing timing;
  HeatmapRenderer* renderer = nullptr;
  HeatmapRenderer* pooledRenderer = nullptr;  // the pooled tiles' textures (pooled mode)
  PooledViewState pooledView;
  RowInspectorShown rowShown;
  std::string configDir;
  bool computedThisFrame = false;  // a softmax ran this frame: defer cosmetic work

  const Dims dims() const { return session.dims(); }
  int heads() const { return session.heads(); }
  int tq() const { return session.tq(); }
  int tk() const { return session.tk(); }
  const Scene& sceneData() const { return session.scene(); }
  const DisplayMatrix& display() const { return session.display(); }
  ColormapId activeColormap() const {
    return stageIsScore(view.stage) ? view.scoreColormap : view.weightColormap;
  }
  int shownHead() const { return view.head; }
};

// session_sync.cpp: the GUI's side of the session.
// The view's head, average, stage and wrong-axis mode, as the session takes them.
View sessionView(const ViewState& v);
// Hands the view to the session and brings it current; the view's head follows the session's
// (clamped to the heads there are). Throws what the core throws.
void syncSession(AppState& s);
// Head h's archetype: the scene's entry, or the default cycle through allArchetypes() for
// heads it does not list.
Archetype headArchetype(const Scene& scene, int h);

// scene_io.cpp
void loadSceneInto(AppState& s, const std::string& path);  // throws InputError
void saveSceneFrom(AppState& s, const std::string& path);  // throws InputError
void openDroppedFile(AppState& s, const std::string& path);
void useNpyAs(AppState& s, const std::string& path, char role);  // 'q','k','v','m'
void resetView(AppState& s);

// model_io.cpp: the model view's side of the frame.
// Starts opening a model folder on a worker thread (`wait`: finish before returning).
void openModel(AppState& s, const std::string& dir, bool wait = false);
// A scene's "model" object: the text, layer, head and ablations, then openModel.
void openModelScene(AppState& s, const Scene& scene, const std::string& path, bool wait);
// At the frame boundary: adopts a model that finished loading, runs a text edited long enough
// ago, runs the panels' intervention requests and hands the selected layer to the session.
void syncModel(AppState& s);
// The status bar's Cancel: stops the opening model (Model::open or its first pass; the open
// model stays) or the edited text's pass (the view keeps the last pass), at its next layer. The
// frame boundary says so once the worker has stopped. False when neither runs.
bool cancelPass(AppState& s);
// frame.cpp: a worker that finished (or reached a layer) wakes a frame loop that waits for
// events, so the result shows at once while the loop draws only a few frames a second meanwhile.
// Safe from any thread; a no-op when no window is open.
void wakeFrameLoop();
// Opens an attention dump (.safetensors, .npz) in place of the scene or model.
void openDump(AppState& s, const std::string& path);
// Closes an open model or dump (the GUI's engine comes back), before another source opens.
void closeSources(AppState& s);
// The next-token lists after a pass.
void refreshNextTokens(AppState& s);
// The [MASK] fill panel's lists for the current pass (or the panel's own text).
void refreshFill(AppState& s);
// The Attribution panel's settings from a model scene's "attribution" object (run: at the next
// frame), and back (attribution_panel.cpp).
void applySceneAttribution(AppState& s, const SceneAttribution& a);
SceneAttribution sceneAttribution(const AppState& s);
// Starts a run with the panel's settings on the current pass (stopping one that runs).
void startAttribution(AppState& s);

// settings.cpp
std::string configDirectory();  // $XDG_CONFIG_HOME/attnviz or ~/.config/attnviz, created
void loadSettings(AppState& s);
void saveSettings(const AppState& s);

// Seconds on a steady clock (for notices).
double nowSeconds();
// Short notice in the status bar.
void notify(AppState& s, const std::string& text, double seconds = 6.0);
// An error for the modal popup (drawErrorPopup), also printed as one line on stderr.
void reportError(AppState& s, const std::string& what);

}  // namespace attnviz::gui
