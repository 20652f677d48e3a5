// attnviz panel: the model's five most likely next tokens after the text, with probability
// bars; with interventions on, the plain pass's list beside the intervened one.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <string>

namespace attnviz::gui {

namespace {

void tokenList(const char* title, const std::vector<TokenProb>& top,
               const std::vector<std::string>& labels, float width, ImU32 colour) {
  ImGui::BeginGroup();
  ImGui::TextUnformatted(title);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float rowH = ImGui::GetTextLineHeightWithSpacing();
  for (std::size_t k = 0; k < top.size(); ++k) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(p, ImVec2(p.x + width * std::clamp(top[k].prob, 0.0f, 1.0f), p.y + rowH - 2),
                      colour);
    ImGui::Text("%-12s %5.1f%%", ("'" + labels[k] + "'").c_str(), 100.0 * top[k].prob);
  }
  ImGui::EndGroup();
}

}  // namespace

bool drawNextTokenPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source || m.after.empty()) return false;
  bool intervened = false;
  for (const auto& li : m.source->interventions().layers) intervened |= li.any();
  const float avail = ImGui::GetContentRegionAvail().x;
  if (!intervened) {
    // The header already says "Next token": the line says which position it follows.
    const auto& tokens = m.source->tokens();
    const std::string after =
        tokens.empty() ? std::string("after the text")
                       : "after '" + tokens.back() + "' (position " +
                             std::to_string(tokens.size() - 1) + ")";
    tokenList(after.c_str(), m.after, m.afterLabels, avail, IM_COL32(70, 110, 170, 200));
  } else {
    const float w = (avail - ImGui::GetStyle().ItemSpacing.x) * 0.5f;
    tokenList("Before", m.before, m.beforeLabels, w, IM_COL32(70, 110, 170, 200));
    ImGui::SameLine();
    tokenList("After", m.after, m.afterLabels, w, IM_COL32(190, 90, 50, 200));
  }
  return false;
}

}  // namespace attnviz::gui
