// attnviz GUI: the state every panel reads and edits. Plain structs, no function statics.
//
// Who owns what:
//   SceneState   the scene being edited and the inputs built from it (tokens, Q, K, V)
//   ComputeState the engine and what it holds (which heads are current)
//   ViewState    how the matrix is looked at (head, stage, colormap, pan/zoom, selection)
//   DisplayMatrix the one matrix the heatmap shows, as the value texture will hold it
#pragma once

#include "attnviz/colormap.h"
#include "attnviz/engine.h"
#include "attnviz/scene.h"
#include "gui/mask_editor.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnviz::gui {

class HeatmapRenderer;

// What the heatmap shows for the current head. Score stages use a diverging colormap.
// Capped is the softcap (c tanh(s / c)); the stage bar shows it while a softcap is set.
enum class ViewStage { RawScores, Scaled, Capped, Biased, Logits, Weights, Output };
constexpr int kStageCount = 7;
const char* stageLabel(ViewStage s);             // e.g. "QKᵀ"
const char* stageKey(ViewStage s);               // stable name for files: "qk", "scaled", ...
const char* stageFormula(ViewStage s);           // one line: what the value of cell (i, j) is
bool stageIsScore(ViewStage s);                  // signed values: diverging colormap, centred on 0
ViewStage stageFromKey(const std::string& key);  // throws UsageError

// One matrix ready for the heatmap.
struct DisplayMatrix {
  int rows = 0, cols = 0;
  std::vector<float> values;                 // [rows, cols] row-major; -inf = masked cell
  std::vector<float> rowSums;                // [rows] sums of the shown weights (weights stages)
  std::vector<float> colSums;                // [cols]
  std::vector<std::uint8_t> rowFullyMasked;  // [rows]
  int fullyMaskedRows = 0;                   // how many entries of rowFullyMasked are set
  int firstFullyMaskedRow = -1;              // the first of them; -1 when none
  float minFinite = 0.0f, maxFinite = 0.0f;
  bool columnsAreKeys = true;  // false for the output stage (columns are value dims)
  bool isWeights = false;      // rows are distributions (sum strip makes sense)
  std::uint64_t version = 0;   // bumped on every change; the renderer re-uploads
  // What it was built from. updateCompute rebuilds it whenever the current view or the shown
  // weights differ from this, so a panel that changes the view needs no flag of its own.
  struct Source {
    std::uint64_t weights =
        ~std::uint64_t{0};  // headVersion of the head, or weightsVersion (average)
    int head = -1;
    int stage = -1;
    bool headAverage = false, wrongAxis = false;
    bool operator==(const Source&) const = default;
  } source;
};

struct SceneState {
  Scene scene;
  SceneInputs inputs;
  std::string path;  // the file it was loaded from; empty for the built-in scene
  // Text, seed, heads, d, archetype or decode step changed: setInputs again (GEMMs).
  bool inputsDirty = true;
  // Temperature, a mask or ALiBi changed: softmax only, from the cached scores.
  bool paramsDirty = true;
  bool maskDirty = true;  // with paramsDirty: the mask changed too, not only the temperature
  // Cells painted on the heatmap: [rows * cols], 1 = may attend. Empty when nothing is painted.
  std::vector<std::uint8_t> painted;
  int paintedRows = 0, paintedCols = 0;
  bool paintEnabled = true;  // apply the painted cells as a custom mask
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
  AxisLabels rowLabels, colLabels;
};

struct ComputeState {
  std::unique_ptr<AttentionEngine> engine;
  std::string backend;                  // engine->name()
  std::string backendNote;              // why the GPU is not used, when it is not
  std::string glRenderer;               // GL_RENDERER of the window's context
  AttentionParams params;               // effective parameters of the last softmax
  std::vector<float> slopes;            // ALiBi slopes for H heads
  std::vector<std::uint8_t> headFresh;  // softmax + output current for head h
  bool haveInputs = false;
  std::uint64_t inputsVersion = 0;  // bumped on every setInputs (new tokens, Q, K, V)
  // Cached b_ij (or -inf when masked) for one head: [T_q * T_k]. Independent of tau, so a
  // temperature change never recomputes it.
  std::vector<float> biasMask;
  int biasMaskHead = -1;
  std::uint64_t biasMaskVersion = 0;  // bumped whenever biasMask is rebuilt
  bool biasMaskValid = false;
  bool anyBias = false;                    // ALiBi or a float custom mask: b_ij is not all zero
  std::uint64_t weightsVersion = 0;        // bumped when any head's weights change
  std::vector<std::uint64_t> headVersion;  // per head, for thumbnails
  // Host copy of the engine's stages, refreshed after every compute (one GPU readback).
  const AttentionResult* result = nullptr;
  bool scaledFetched = false;  // S is read back once per setInputs, never per softmax
};

struct Timing {
  double setInputsMs = 0, softmaxMs = 0, displayMs = 0, uploadMs = 0, renderMs = 0;
  double computeMs = 0;  // frame boundary: updateCompute
  double uiMs = 0;       // building the ImGui frame (panels)
  double frameMs = 0;    // exponential average of whole frames
  double lastFrameMs = 0;
};

struct ExportState {
  bool requestOpen = false;
  bool allHeads = false;
  int stage = 0;  // 0 weights, 1 scores (logits)
  int cell = 0;   // 0 = automatic
  ColormapId colormap = ColormapId::Viridis;
  bool labels = true;
  char path[1024] = "";
  bool pathEdited = false;
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

struct AppState {
  SceneState scene;
  ComputeState compute;
  ViewState view;
  DisplayMatrix display;
  LabelCache labels;
  ExportState exporter;
  UiState ui;
  MaskEditorState maskEditor;
  Timing timing;
  HeatmapRenderer* renderer = nullptr;
  std::string configDir;
  bool computedThisFrame = false;  // a softmax ran this frame: defer cosmetic work

  const Dims dims() const;
  int heads() const { return scene.inputs.q.heads; }
  int tq() const { return int(scene.inputs.queryTokens.size()); }
  int tk() const { return int(scene.inputs.keyTokens.size()); }
  ColormapId activeColormap() const {
    return stageIsScore(view.stage) ? view.scoreColormap : view.weightColormap;
  }
  int shownHead() const { return view.head; }
};

// compute.cpp: runs the engine as the caching rule says, and builds `display`.
void markInputsDirty(AppState& s);
void markParamsDirty(AppState& s);
// Only the temperature changed: the softmax re-runs with the mask it already has.
void markTemperatureDirty(AppState& s);
// Once per frame, before the panels. Throws what the core throws (InputError etc.).
void updateCompute(AppState& s);
// A few heads whose weights are stale (thumbnails); call when the frame has time left.
void refreshStaleHeads(AppState& s, double budgetMs);
// The value of cell (i, j) for the tooltip.
struct CellInfo {
  int i = -1, j = -1;
  std::string queryToken, keyToken;
  float scaled = 0, logit = 0, weight = 0, rowSum = 0, shown = 0;
  bool masked = false;
};
CellInfo cellInfo(const AppState& s, int i, int j);
// Whether every head's softmax and output are current (no thumbnail waiting).
bool allHeadsFresh(const AppState& s);
// Head h's archetype: the scene's entry, or the default cycle through allArchetypes() for
// heads it does not list.
Archetype headArchetype(const Scene& scene, int h);
// Applies effectiveParams plus the painted mask.
AttentionParams currentParams(const AppState& s);
void clearPaint(AppState& s);
void paintCell(AppState& s, int i, int j, bool allow);

// scene_io.cpp
void loadSceneInto(AppState& s, const std::string& path);  // throws InputError
void saveSceneFrom(AppState& s, const std::string& path);  // throws InputError
void openDroppedFile(AppState& s, const std::string& path);
void useNpyAs(AppState& s, const std::string& path, char role);  // 'q','k','v','m'
void resetView(AppState& s);

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
