// attnviz panel: the softmax temperature, on a log scale. Only the softmax re-runs.
#include "panels/panels.h"

#include <imgui.h>

namespace attnviz::gui {

bool drawTemperaturePanel(AppState& s) {
  bool changed = false;
  float& tau = s.session.editScene().params.temperature;
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderFloat("##tau", &tau, 0.05f, 20.0f, "\xcf\x84 = %.3f",
                         ImGuiSliderFlags_Logarithmic)) {
    if (!(tau > 0.0f)) tau = 0.05f;
    changed = true;
  }
  const ImVec2 r0 = ImGui::GetItemRectMin(), r1 = ImGui::GetItemRectMax();
  s.ui.tauSlider[0] = r0.x, s.ui.tauSlider[1] = r0.y, s.ui.tauSlider[2] = r1.x,
  s.ui.tauSlider[3] = r1.y;
  const struct {
    const char* label;
    float value;
    const char* tip;
  } presets[] = {
      {"0.05", 0.05f, "Near argmax: each row puts almost all its weight on its best key."},
      {"1", 1.0f, "The usual softmax."},
      {"20", 20.0f, "Near uniform: each row spreads evenly over the keys it may see."},
  };
  for (const auto& p : presets) {
    if (ImGui::SmallButton(p.label)) {
      tau = p.value;
      changed = true;
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", p.tip);
    ImGui::SameLine();
  }
  ImGui::TextDisabled("L = (s + b) / \xcf\x84");
  helpMarker(
      "Dividing the logits by a temperature sharpens (\xcf\x84 < 1) or flattens (\xcf\x84 > 1) "
      "every row. Only the softmax is recomputed from the cached scores: no matrix product.");
  if (changed) s.session.touchTemperature();
  return changed;
}

}  // namespace attnviz::gui
