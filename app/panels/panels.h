// attnviz GUI panels: one file each, each a free function that draws into the current ImGui
// window (or opens its own) and returns whether it changed anything in the state.
#pragma once

#include "gui/app_state.h"

struct ImDrawList;

namespace attnviz::gui {

bool drawMenuBar(AppState& s);     // menu_bar_panel.cpp
bool drawScenePanel(AppState& s);  // scene_panel.cpp: text, mode, heads, d_k, seed, archetypes
bool drawTemperaturePanel(AppState& s);  // temperature_panel.cpp: log slider 0.05..20
bool drawMaskPanel(AppState& s);  // mask_panel.cpp: causal, window, prefix, sink, pad, ALiBi, paint
// mask_kinds_panel.cpp: documents, expression, softcap and block sparsity (inside the Mask panel);
// the heatmap's block and document overlays; a click on its key axis toggling a document
// boundary (returns whether the mask changed); the block counts of the shown head (nullptr when
// the blocks view is off).
bool drawMaskKindsPanel(AppState& s);
void drawMaskOverlays(AppState& s, ImDrawList* dl);
bool handleKeyAxisClick(AppState& s);
const BlockSparsity* currentBlocks(AppState& s);
// Puts `text` in the expression field as if typed; returns whether the mask changed.
bool typeMaskExpression(AppState& s, const std::string& text);
bool drawViewPanel(AppState& s);      // view_panel.cpp: colormaps, scale, wrong-axis toggle
bool drawStageBar(AppState& s);       // stage_bar_panel.cpp: QKᵀ ... A·V, then FlashAttention
// flash_panel.cpp: the FlashAttention stage in place of the heatmap (block sizes, stepping, the
// tile picture, the current block's running statistics); syncFlash (re)builds the walkthrough
// when the inputs, parameters, head or block sizes changed and seeks it to s.flash.step;
// flashImage draws the current step as the export does (throws when there is no walkthrough).
bool drawFlashPanel(AppState& s);
void syncFlash(AppState& s);
Image flashImage(AppState& s, ExportRequest r);
// open_preview_panel.cpp: while a model opens, each layer of its first pass as it finishes (the
// shown head's heatmap, the layers x heads grid); false (nothing drawn) before the first layer.
bool drawOpenPreviewPanel(AppState& s);
bool drawLessonPanel(AppState& s);    // lesson_panel.cpp: the scene's notes
bool drawHeatmapPanel(AppState& s);   // heatmap_panel.cpp (+ heatmap_axes, heatmap_tooltips)
bool drawHeadGridPanel(AppState& s);  // head_grid_panel.cpp: thumbnails + average
bool drawRowInspectorPanel(AppState& s);  // row_inspector_panel.cpp: the selected query's row
bool drawMaskMatrixPanel(AppState& s);    // mask_matrix_panel.cpp: allowed(i, j) as a small matrix
bool drawModelPanel(AppState& s);      // model_panel.cpp: text, layer, interventions
bool drawRopePanel(AppState& s);       // rope_panel.cpp: RoPE scores and frequencies
struct NeuronShown {  // the neuron view's last cell (layer -1: none), for scripted runs
  int layer = -1, head = 0, row = 0, key = 0;
  float score = 0, termSum = 0, pairSum = 0, plainScore = 0;
  bool rope = false;
};
extern NeuronShown g_neuronShown;
bool drawNeuronPanel(AppState& s);     // neuron_panel.cpp: q, k and q.k of one cell by dimension
struct WhyHereShown {  // the "Why here?" panel's last split (layer -1: none), for scripted runs
  int layer = -1, head = 0, query = 0, key = 0;
  double score = 0, sum = 0;
  std::string topQ, topK;  // the largest |part|'s two sides, and its value
  double top = 0;
};
extern WhyHereShown g_whyHereShown;
bool drawWhyHerePanel(AppState& s);    // why_here_panel.cpp: a cell's score split by what wrote q, k
struct ResidualShown {  // the residual panel's last token (token -1: none), for scripted runs
  int token = -1, dim = 0, stream = 0;
  float largest = 0, overMedian = 0;
  int marked = 0;
};
extern ResidualShown g_residualShown;
// The vertices the largest panels added to their window's draw list in the last frame (-1: not
// drawn), for scripted runs: their cells are capped, whatever the number of tokens.
struct PanelVertices {
  int positionBias = -1, residual = -1;
};
extern PanelVertices g_panelVertices;
bool drawResidualPanel(AppState& s);  // residual_panel.cpp: |x| by layer and dimension
bool drawModelGridPanel(AppState& s);  // model_grid_panel.cpp: layers x heads thumbnails
bool drawNextTokenPanel(AppState& s);  // next_token_panel.cpp: top-5, before/after interventions
bool drawFillPanel(AppState& s);  // fill_panel.cpp: an encoder's [MASK] fills, before/after
// model_panel.cpp: an encoder pair's token colours (A, B, special tokens greyed), for the
// heatmap's axis labels and tooltips; `full` is the token's index in the whole input.
// Returns 0 when the token needs no colour of its own (one text, specials shown).
unsigned int encoderTokenColour(const AppState& s, int full);
const char* encoderTokenRole(const AppState& s, int full);  // "A", "B", "special", or ""
bool drawGeneratePanel(AppState& s);   // generate_panel.cpp: continue the text (KV cache)
bool drawCacheLossPanel(AppState& s);  // cache_loss_panel.cpp: NLL by token, 3 KV caches
// retrieval_panel.cpp: needle cases from the view's text, every head's retrieval score, top-k
// against random-k masking. What it showed last, for scripted runs:
struct RetrievalShown {
  int layer = -1, head = -1;  // the best head
  float score = 0;
  double none = 0, top = 0, random = 0;  // the answer's mean log p under each mask
  int copied = 0;
};
extern RetrievalShown g_retrievalShown;
bool drawRetrievalPanel(AppState& s);
// attribution_panel.cpp: which heads matter for one prediction (ablation sweeps, activation
// patching) on a worker thread, the layers x heads map filling in row by row; a click shows that
// head. The export writes what `attnviz attribute --png` writes for the same arguments and
// returns the path.
bool drawAttributionPanel(AppState& s);
std::string exportAttribution(AppState& s, const std::string& path);
bool drawOpenModelPopup(AppState& s);
// seq2seq_panel.cpp: an encoder-decoder's Source and Target, its site, ablation, next token
bool drawSeq2SeqPanel(AppState& s);
// alignment_panel.cpp: an encoder-decoder's cross site as an alignment between the source and
// target strips, the shift by one, a gold alignment's AER and the layers x heads AER map (a
// click shows that head). updateAlignment recomputes s.dump.align when its inputs changed;
// hasCrossSite says whether the panel has anything to show.
bool hasCrossSite(const AppState& s);
void updateAlignment(AppState& s);
bool drawAlignmentPanel(AppState& s);
void printAlignment(AppState& s);  // a scripted run's "alignment:" lines
// position_bias_panel.cpp: T5's relative position bias of the shown site's stack (a cross site:
// the encoder's) for the shown head: the bias against the distance with the bucket edges, and
// the matrix it adds to the current tokens' scores. hasPositionBias: whether the open
// encoder-decoder has one.
bool hasPositionBias(const AppState& s);
bool drawPositionBiasPanel(AppState& s);
void printPositionBias(const AppState& s);  // a scripted run's "position-bias:" line
// head_finder_panel.cpp: the Head finder window (a tree of `attnviz heads` or HeadVis's, or a
// run over a corpus on a worker): the scatter, the sortable table, the selected head's
// dashboard. openHeadTree throws InputError (one line naming the file); openHeadFinderSequence
// runs the selected head's kept sequence (by its sequence_id) through the open model in the main
// view, on that head (false, with the panel's error set, when it cannot). printHeadFinder: a
// scripted run's "head-finder" lines.
bool drawHeadFinderPanel(AppState& s);
void openHeadTree(AppState& s, const std::string& dir);
bool openHeadFinderSequence(AppState& s, int sequenceId);
void printHeadFinder(const AppState& s);
// image_view_panel.cpp: an image model's view in place of the heatmap layout: the image as the
// model sees it with a token's row (or the rollout's) over its patches, a colour bar, the
// layer, head, token, rollout and opacity controls, a tooltip per patch. openImageModel closes
// the open sources and opens `model` (an image model's folder or name), then runs `image` when
// given; openImageFile runs another image through the open one (on a worker). syncImageView
// adopts a finished run (at the frame); waitImageView waits for it and throws what it threw,
// with a layer, head or token out of range as UsageError (scripted runs). imageViewFigure is
// the overlay figure of the view, as `attnviz export --overlay` draws it. printImageView: a
// scripted run's "image-view:" line.
bool isImageFilePath(const std::string& path);
void openImageModel(AppState& s, const std::string& model, const std::string& image);
void openImageFile(AppState& s, const std::string& image);
void syncImageView(AppState& s);
void waitImageView(AppState& s);
bool drawImageViewPanel(AppState& s);
Image imageViewFigure(const AppState& s, bool vector);
void printImageView(const AppState& s);
// Image-view scenes: {"model": {"path", "image"}, "view": {layer, head, head_average, token,
// rollout, opacity, colormap}}. isImageScene peeks at a scene file; the others throw
// InputError naming the file.
bool isImageScene(const std::string& path);
void loadImageScene(AppState& s, const std::string& path);
void saveImageScene(const AppState& s, const std::string& path);
bool drawDumpPanel(AppState& s);       // dump_panel.cpp: the dump's file, model, layer, Q/K/V  // model_panel.cpp: File > Open model (a folder path)
bool drawStatusBar(AppState& s);          // status_bar_panel.cpp: backend, renderer, timings
bool drawExportPopup(AppState& s);        // export_panel.cpp: PNG/SVG/PDF export (Ctrl+S)
// The export itself (export_panel.cpp): writes `path` with s.exporter's options through
// Session::exportImage, as PNG, or SVG or PDF when the path ends in .svg or .pdf, and returns
// the absolute path. Throws what it and the writers throw.
ExportRequest exportRequest(const AppState& s);
std::string exportPng(AppState& s, const std::string& path);
// Starts s.exporter from the view: its weights colormap, and weights or scores by its stage.
void exportOptionsFromView(AppState& s);
bool drawFileDialogs(AppState& s);  // file_dialog_panel.cpp: open (Ctrl+O) / save scene
bool drawErrorPopup(AppState& s);   // error_popup_panel.cpp: errors caught at the frame

// Shared drawing helpers (gui/ui_util.cpp).
void helpMarker(const char* text);
// Draws text rotated 90 degrees counter-clockwise (reading bottom to top), its bottom-left
// corner at `pos` going up.
void addVerticalText(ImDrawList* dl, float x, float yBottom, unsigned int colour, const char* text);
// An RGBA8 colour (colormap.h) as ImGui's packed u32.
unsigned int rgbaU32(RGBA8 c);
// A colour from the colormap table as ImGui's packed u32.
unsigned int colormapU32(ColormapId id, float t);
// Head h of weights [H, T_q, T_k] max-pooled to at most maxSide pixels a side and coloured, as
// RGBA8 rows (width x height); a block whose weights are all exactly 0 (masked keys) gets the
// masked colour. The Model view's grid and the layers drawn while a model opens.
void maxPoolThumbnail(const Tensor3& w, int h, int maxSide, ColormapId cm,
                      std::vector<std::uint8_t>& rgba, int& width, int& height);
// The preset scenes folder (dataDir()/scenes: installed share/attnviz/scenes, or the source
// tree's assets/scenes from a build), or "" when not found.
std::string presetDirectory();
std::vector<std::string> presetFiles();
// presetFiles() kept in s.ui: scanned on first use and again when `rescan` is set, so the
// panels do not walk the file system every frame.
const std::vector<std::string>& cachedPresetFiles(AppState& s, bool rescan = false);

}  // namespace attnviz::gui
