// attnviz panel: errors caught at the frame boundary, shown instead of crashing.
#include "panels/panels.h"

#include <imgui.h>

namespace attnviz::gui {

bool drawErrorPopup(AppState& s) {
  if (s.ui.errorPending) {
    ImGui::OpenPopup("Error");
    s.ui.errorPending = false;
  }
  const ImVec2 centre = ImGui::GetMainViewport()->GetCenter();
  ImGui::SetNextWindowPos(centre, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  bool closed = false;
  if (ImGui::BeginPopupModal("Error", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 36.0f);
    ImGui::TextUnformatted(s.ui.error.c_str());
    ImGui::PopTextWrapPos();
    ImGui::Spacing();
    if (ImGui::Button("OK", ImVec2(120 * s.ui.uiScale, 0)) ||
        ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter)) ||
        ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
      ImGui::CloseCurrentPopup();
      closed = true;
    }
    ImGui::EndPopup();
  }
  return closed;
}

}  // namespace attnviz::gui
