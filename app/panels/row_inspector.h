// attnviz panel internals: what the row inspector's two files share (row_inspector_panel.cpp:
// which row, its numbers and the text around them; row_inspector_plots.cpp: the bars per key,
// the distribution plot and the vector strips), and what it showed last frame, key by key, for
// scripted runs: gui/drivers/script.cpp prints that next to the heatmap's row, so that tests can hold
// the two against each other.
#pragma once

#include "panels/panels.h"

#include <functional>
#include <string>
#include <vector>

namespace attnviz::gui {

struct RowInspectorValues {
  int row = -1;
  std::string what;           // what the row is: "weights", "weights-wrong-axis", a stage key...
  int first = 0;              // values[k] is column first + k
  std::vector<float> values;  // the row as the inspector shows it; -inf where masked
  // A q/k-norm family's model (Qwen3, Gemma 3, OLMo 2): ‖q_i‖ of the shown head and ‖k_i‖ of its
  // KV head before and after the norm; kvHead -1 when not shown.
  int kvHead = -1;
  float qBefore = 0, qAfter = 0, kBefore = 0, kAfter = 0;
};

// Cleared at the start of every drawRowInspectorPanel; row = -1 when no row was shown.
const RowInspectorValues& rowInspectorValues();

namespace row_inspector {

// What the row's numbers are: the heatmap's row of the shown stage and mode.
enum class RowKind {
  Weights,    // the softmax over keys of one head (also behind the output stage)
  WrongAxis,  // the weights stage normalised over queries: columns sum to 1, rows do not
  Average,    // the weights stage averaged over the heads
  Scores,     // a scores stage (QKᵀ, ÷√d, softcap, + bias & mask, ÷τ): signed, -inf = masked
};

// One query row of the shown head, from the display matrix, the materialised result, or
// Session::pooledRow.
struct RowView {
  int i = 0, h = 0, Tk = 0, dv = 0;
  RowKind kind = RowKind::Weights;
  ViewStage stage = ViewStage::Weights;
  const float* w = nullptr;  // [Tk] the row as the heatmap shows it
  RowStats st;               // sum, largest value and its key, entropy (NaN: no distribution)
  int allowed = 0;           // keys the mask allows
  std::function<bool(int)> masked;  // whether key j's cell is drawn masked
  const float* V = nullptr;         // [Tk, dv] the head's value rows, or null
  const float* O = nullptr;         // [dv] the output, or null
  float scoreRange = 1.0f;          // scores: the heatmap maps [-m, m] onto the colormap
  int heads = 0;                    // the average: how many heads
  int maxBars = 24;                 // labelled bars when the keys are too many to list
  bool pooled = false;
};

inline bool isScores(const RowView& r) { return r.kind == RowKind::Scores; }

// row_inspector_plots.cpp
// One vector (a value row or the output) as a strip of diverging colours.
void vectorStrip(const float* v, int n, float scale, float width, float height);
// Every key at once: one bar a pixel column (the max of the keys it covers), with a tooltip.
void distributionPlot(const AppState& s, const RowView& r, const std::vector<std::string>& keys);
// One labelled bar per key: every key when `all`, else the first nBars keys of `order`.
void keyBars(const AppState& s, const RowView& r, const std::vector<int>& order, int nBars,
             bool all);

}  // namespace row_inspector

}  // namespace attnviz::gui
