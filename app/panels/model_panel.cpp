// attnviz panel: the model's controls: the text (editing it re-runs the pass after a short
// pause), the layer, and interventions inside the pass (ablate the shown head, the session's
// mask and τ in this layer or in every layer). Also File > Open model's folder prompt.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace attnviz::gui {

bool drawModelPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source) return false;
  bool changed = false;
  const Gpt2Config& c = m.source->model().config();
  ImGui::TextUnformatted(std::filesystem::path(m.dir).filename().c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", m.dir.c_str());
  ImGui::TextDisabled("%d layers \xc3\x97 %d heads, d = %d, %zu tokens", c.nLayer, c.nHead,
                      c.nEmbd, m.source->tokens().size());
  ImGui::TextUnformatted("Text");
  if (ImGui::InputTextMultiline("##modeltext", m.text, sizeof m.text,
                                ImVec2(-1, ImGui::GetTextLineHeight() * 4))) {
    m.textEditedAt = nowSeconds();
    changed = true;
  }
  if (m.textBusy()) ImGui::TextDisabled("running\xe2\x80\xa6");
  int layer = m.layer;
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderInt("##layer", &layer, 0, c.nLayer - 1, "layer %d")) {
    m.layer = std::clamp(layer, 0, c.nLayer - 1);
    m.layerDirty = true;
    changed = true;
  }
  ImGui::Checkbox("Average of this layer's heads", &s.view.headAverage);

  ImGui::Separator();
  ImGui::TextUnformatted("Interventions (inside the pass)");
  const int l = m.layer, h = s.view.head;
  const bool abl = m.source->ablated(l, h);
  const std::string ablLabel = (abl ? "Restore" : "Ablate") + std::string(" head ") +
                               std::to_string(l) + ":" + std::to_string(h);
  if (ImGui::Button(ablLabel.c_str(), ImVec2(-1, 0)) && !s.view.headAverage) {
    m.actions.push_back([l, h, abl](AppState& st) { st.model.source->setAblated(l, h, !abl); });
    changed = true;
  }
  if (ImGui::Button("Mask and \xcf\x84 \xe2\x86\x92 this layer")) {
    m.actions.push_back([l](AppState& st) {
      st.model.source->applyParams(st.session.scene().params, l);
    });
    changed = true;
  }
  ImGui::SameLine();
  if (ImGui::Button("\xe2\x86\x92 all layers")) {
    m.actions.push_back(
        [](AppState& st) { st.model.source->applyParams(st.session.scene().params, -1); });
    changed = true;
  }
  if (ImGui::Button("Clear interventions", ImVec2(-1, 0))) {
    m.actions.push_back([](AppState& st) { st.model.source->clearInterventions(); });
    changed = true;
  }
  if (m.source->lastRerunFrom() >= 0)
    ImGui::TextDisabled("last re-run: layers %d..%d", m.source->lastRerunFrom(), c.nLayer - 1);
  return changed;
}

bool drawOpenModelPopup(AppState& s) {
  ModelState& m = s.model;
  if (m.requestOpenDialog) {
    m.requestOpenDialog = false;
    ImGui::OpenPopup("Open model");
  }
  bool changed = false;
  if (ImGui::BeginPopupModal("Open model", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextUnformatted(
        "A GPT-2 model folder (config.json, model.safetensors, vocab.json, merges.txt):");
    ImGui::SetNextItemWidth(520 * s.ui.uiScale);
    const bool enter = ImGui::InputText("##modeldir", m.openPath, sizeof m.openPath,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
    if (ImGui::Button("Open") || enter) {
      s.ui.dropped.push_back(m.openPath);  // opened at the frame boundary (folders are models)
      ImGui::CloseCurrentPopup();
      changed = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  return changed;
}

}  // namespace attnviz::gui
