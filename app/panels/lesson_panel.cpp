// attnviz panel: what the current scene teaches, from the scene's "notes", above the heatmap.
#include "panels/panels.h"

#include <imgui.h>

namespace attnviz::gui {

bool drawLessonPanel(AppState& s) {
  const std::string& notes = s.sceneData().notes;
  if (notes.empty()) return false;
  if (ImGui::TreeNodeEx("About this scene", ImGuiTreeNodeFlags_DefaultOpen)) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", notes.c_str());
    ImGui::PopStyleColor();
    ImGui::TreePop();
  }
  return false;
}

}  // namespace attnviz::gui
