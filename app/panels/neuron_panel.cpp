// attnviz panel: the neuron view of one cell of the shown head (a model's pass). For the
// selected query i and a key j (by default the row's largest weight): q_i, k_j and their
// product q_d k_d / sqrt(d_h) one bar a dimension; for RoPE models the score split by frequency
// pair, as run and with the rotation taken out of q and k; each split's sum next to the cell's
// score (neuron_view.h computes them).
#include "panels/panels.h"

#include "attnviz/model/neuron_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

namespace attnviz::gui {

namespace {

float absMax(const std::vector<float>& a, const std::vector<float>& b = {}) {
  float m = 1e-6f;
  for (float x : a) m = std::max(m, std::fabs(x));
  for (float x : b) m = std::max(m, std::fabs(x));
  return m;
}

// Signed bars on a symmetric scale, with a title over them.
void bars(const char* id, const std::vector<float>& v, const char* title, float scale, float w,
          float h) {
  ImGui::PlotHistogram(id, v.data(), int(v.size()), 0, title, -scale, scale, ImVec2(w, h));
}

}  // namespace

// The last drawn cell, for scripted runs (printed by script.cpp).
NeuronShown g_neuronShown;

bool drawNeuronPanel(AppState& s) {
  g_neuronShown = NeuronShown{};
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  const ModelConfig& c = m.source->model().config();
  const int l = std::clamp(m.layer, 0, m.source->layers() - 1);
  const ModelSource::Qkv& a = m.source->layerQkv(l);
  const int T = a.q.rows, dh = a.q.cols, h = std::clamp(s.view.head, 0, a.q.heads - 1);
  // The selected row of the heatmap, as an index of the whole input (an encoder's block shows
  // some rows).
  const int i = s.display().fullRow(s.view.selectedRow);
  if (i < 0 || i >= T) {
    ImGui::TextDisabled("Click a row of the heatmap: the view splits one of its cells.");
    return false;
  }
  // The key: the one asked for, else the row's largest weight (the session shows this layer).
  int j = m.neuronKey;
  if (j < 0 || j >= T || (c.causal && j > i)) {
    j = 0;
    if (s.session.hasResult() && m.source->shownLayer() == l) {
      const Tensor3& w = s.session.result().weights;
      if (w.heads > h && w.rows == T && w.cols == T)
        for (int jj = 0; jj < T; ++jj)
          if (w.at(h, i, jj) > w.at(h, i, j)) j = jj;
    }
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  int key = j;
  if (ImGui::SliderInt("key j", &key, 0, c.causal ? i : T - 1)) m.neuronKey = key;
  ImGui::SameLine();
  if (ImGui::SmallButton("largest weight")) m.neuronKey = -1;
  j = std::clamp(key, 0, T - 1);
  const bool ropeOn = c.positions == PositionKind::Rope && !m.source->ropeOff(l);
  const NeuronView v = neuronView(c, l, a.q.head(h) + std::size_t(i) * dh,
                                  a.k.head(c.kvHeadOf(h)) + std::size_t(j) * dh, dh, i, j, ropeOn,
                                  T);
  const double termSum = std::accumulate(v.terms.begin(), v.terms.end(), 0.0);
  const auto tok = [&](int t) {
    return t < int(m.source->tokens().size()) ? m.source->tokens()[t].c_str() : "";
  };
  ImGui::TextWrapped("Layer %d, head %d (KV head %d): query %d '%s' \xc2\xb7 key %d '%s'", l, h,
                     c.kvHeadOf(h), i, tok(i), j, tok(j));
  ImGui::Text(
      "score q\xc2\xb7k/\xe2\x88\x9a"
      "d = %.4f   \xce\xa3 bars = %.4f",
      v.score, termSum);
  const float W = std::max(80.0f, ImGui::GetContentRegionAvail().x);
  const float H = 44 * s.ui.uiScale;
  const float qk = absMax(v.q, v.k);
  bars("##nq", v.q, "q_i by dimension", qk, W, H);
  bars("##nk", v.k, "k_j by dimension", qk, W, H);
  bars("##nqk", v.terms,
       "q_d k_d / \xe2\x88\x9a"
       "d  (sums to the score)",
       absMax(v.terms), W, H);
  g_neuronShown = {l, h, i, j, v.score, float(termSum), 0.0f, 0.0f, false};
  if (!v.pairTerms.empty()) {
    const double pairSum = std::accumulate(v.pairTerms.begin(), v.pairTerms.end(), 0.0);
    const float ps = absMax(v.pairTerms, v.plainTerms);
    ImGui::Text("by RoPE pair: \xce\xa3 = %.4f as run, %.4f rotation removed", pairSum,
                v.plainScore);
    bars("##npair", v.pairTerms, ropeOn ? "as run (rotated)" : "as run (RoPE off here)", ps, W, H);
    bars("##nplain", v.plainTerms, "rotation removed (content only)", ps, W, H);
    int top = 0;
    for (int p = 0; p + 1 < int(v.pairTerms.size()); ++p)
      if (std::fabs(v.pairTerms[p]) > std::fabs(v.pairTerms[top])) top = p;
    ImGui::PushTextWrapPos(0.0f);
    if (!v.wavelength.empty())
      ImGui::TextDisabled(
          "pairs fast \xe2\x86\x92 slow (a turn every %.1f \xe2\x80\xa6 %.0f tokens)%s; "
          "the largest, pair %d (%.1f tokens), carries %.3f",
          v.wavelength.front(), v.wavelength.back(),
          v.pairTerms.back() != 0.0f ? ", last bar: the dimensions that do not rotate" : "", top,
          v.wavelength[top], v.pairTerms[top]);
    ImGui::PopTextWrapPos();
    g_neuronShown.pairSum = float(pairSum);
    g_neuronShown.plainScore = v.plainScore;
    g_neuronShown.rope = true;
  }
  return false;
}

}  // namespace attnviz::gui
