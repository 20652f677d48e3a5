// attnviz panel: the RoPE view of the shown head (RoPE families). For the selected query i it
// plots the scaled score q_i . k_j / sqrt(d) against every key over the distance i - j, as the
// pass computed it (rotated) and with the rotation removed from q and k (each rotated back by its
// own position), and the rotation frequencies, one band per pair of dimensions.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace attnviz::gui {

bool drawRopePanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  const ModelConfig& c = m.source->model().config();
  if (c.positions != PositionKind::Rope) {
    ImGui::TextDisabled("This model has learned positions, not RoPE.");
    return false;
  }
  const int l = std::clamp(m.layer, 0, m.source->layers() - 1);
  const ModelSource::Qkv& a = m.source->layerQkv(l);  // K, V: one per KV head
  const int h = std::clamp(s.view.head, 0, a.q.heads - 1), T = a.q.rows, d = a.q.cols;
  const int i = s.view.selectedRow >= 0 && s.view.selectedRow < T ? s.view.selectedRow : T - 1;
  const bool off = m.source->ropeOff(l);
  ImGui::TextWrapped("Layer %d, head %d (KV head %d), query %d: the score against each key over "
                     "the distance i \xe2\x88\x92 j",
                     l, h, c.kvHeadOf(h), i);
  // Distances 0..i: key j = i - distance.
  std::vector<float> rotated(i + 1), plain(i + 1);
  MatrixRM q = a.q.mat(h).row(i);
  MatrixRM qPlain = q;
  if (!off) applyRope(c, qPlain, i, true, l);
  const float scale = 1.0f / std::sqrt(float(d));
  for (int j = 0; j <= i; ++j) {
    MatrixRM k = a.k.mat(c.kvHeadOf(h)).row(j);
    rotated[i - j] = (q.row(0).dot(k.row(0))) * scale;
    if (!off) applyRope(c, k, j, true, l);
    plain[i - j] = (qPlain.row(0).dot(k.row(0))) * scale;
  }
  float lo = 0, hi = 0;
  for (std::size_t n = 0; n < rotated.size(); ++n) {
    lo = std::min({lo, rotated[n], plain[n]});
    hi = std::max({hi, rotated[n], plain[n]});
  }
  const float w = ImGui::GetContentRegionAvail().x, ht = 70 * s.ui.uiScale;
  ImGui::PlotLines("##rope-rot", rotated.data(), int(rotated.size()), 0,
                   off ? "as run (RoPE off in this layer)" : "with the rotation (as run)", lo, hi,
                   ImVec2(w, ht));
  ImGui::PlotLines("##rope-plain", plain.data(), int(plain.size()), 0,
                   "rotation removed (content only)", lo, hi, ImVec2(w, ht));
  ImGui::TextDisabled("x: distance i \xe2\x88\x92 j, 0 (itself) at the left, %d at the right", i);
  // One band per rotated pair: its wavelength in tokens, log10.
  const std::vector<double> inv = c.ropeInvFreq(l);
  std::vector<float> waves(inv.size());
  for (std::size_t p = 0; p < inv.size(); ++p) waves[p] = float(std::log10(2.0 * M_PI / inv[p]));
  const float wmax = *std::max_element(waves.begin(), waves.end());
  ImGui::PlotHistogram("##rope-freq", waves.data(), int(waves.size()), 0,
                       "log10 wavelength (tokens) per dimension pair", 0.0f, wmax * 1.05f,
                       ImVec2(w, ht));
  ImGui::TextDisabled("pairs 0..%d: fast bands turn every few tokens, slow ones over %.0f", 
                      int(waves.size()) - 1, std::pow(10.0, wmax));
  return false;
}

}  // namespace attnviz::gui
