// attnviz panel: how the matrix is coloured, and the "softmax over the wrong axis" lesson.
#include "panels/panels.h"

#include <imgui.h>

namespace attnviz::gui {

namespace {

bool colormapCombo(const char* label, ColormapId& id) {
  bool changed = false;
  if (ImGui::BeginCombo(label, colormapName(id))) {
    for (int k = 0; k < 4; ++k) {
      const ColormapId c = ColormapId(k);
      ImGui::PushID(k);
      // A small swatch of the table beside each name.
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const float h = ImGui::GetTextLineHeight();
      if (ImGui::Selectable("##cm", c == id, 0, ImVec2(0, h))) {
        id = c;
        changed = true;
      }
      ImDrawList* dl = ImGui::GetWindowDrawList();
      const float w = h * 4;
      for (int x = 0; x < int(w); ++x)
        dl->AddRectFilled(ImVec2(p.x + x, p.y + 2), ImVec2(p.x + x + 1, p.y + h - 2),
                          colormapU32(c, x / (w - 1)));
      dl->AddText(ImVec2(p.x + w + 8, p.y), ImGui::GetColorU32(ImGuiCol_Text), colormapName(c));
      ImGui::PopID();
    }
    ImGui::EndCombo();
  }
  return changed;
}

}  // namespace

bool drawViewPanel(AppState& s) {
  bool changed = false;
  ViewState& v = s.view;
  const float w = -ImGui::GetFontSize() * 6;
  ImGui::SetNextItemWidth(w);
  changed |= colormapCombo("Weights", v.weightColormap);
  ImGui::SetNextItemWidth(w);
  changed |= colormapCombo("Scores", v.scoreColormap);
  int scale = int(v.scale);
  const char* scales[] = {"linear", "log", "gamma"};
  ImGui::SetNextItemWidth(w);
  if (ImGui::Combo("Scale", &scale, scales, 3)) {
    v.scale = ColorScale(scale);
    changed = true;
  }
  helpMarker(
      "How weights map to colour. Log and gamma lift the small weights of long rows; the "
      "score stages always use a linear scale centred on 0.");
  if (v.scale == ColorScale::Gamma) {
    ImGui::SetNextItemWidth(w);
    changed |= ImGui::SliderFloat("Gamma", &v.gamma, 0.1f, 2.0f, "%.2f");
  }
  if (v.scale == ColorScale::Log) {
    ImGui::SetNextItemWidth(w);
    changed |=
        ImGui::SliderFloat("Floor", &v.logFloor, 1e-6f, 0.1f, "%.0e", ImGuiSliderFlags_Logarithmic);
  }
  changed |= ImGui::Checkbox("Auto range", &v.autoRange);
  helpMarker("Weights: map [0, largest weight] instead of [0, 1].");
  ImGui::SameLine();
  changed |= ImGui::Checkbox("Grid", &v.showGrid);
  changed |= ImGui::Checkbox("Average of heads", &v.headAverage);
  if (ImGui::Button("Reset view")) {
    resetView(s);
    changed = true;
  }
  ImGui::SameLine();
  ImGui::TextDisabled("zoom %.1f\xc3\x97", v.zoom);

  ImGui::Separator();
  if (ImGui::Checkbox("Softmax over the wrong axis", &v.wrongAxis)) {
    if (v.wrongAxis) v.stage = ViewStage::Weights;
    changed = true;
  }
  if (v.wrongAxis) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.62f, 0.45f, 1.0f));
    ImGui::TextWrapped(
        "This normalises each COLUMN (over the queries), so columns sum to 1 and rows do not. "
        "That answers \"how is key j shared among the queries\", which is not what attention "
        "needs: "
        "query i mixes the value rows with its own weights, so its weights must form a "
        "distribution "
        "over the keys. With columns normalised, a query's output is no longer an average of "
        "values: "
        "it can be scaled far up or down, and in a causal mask the early keys (seen by many "
        "queries) "
        "get diluted while late keys get full weight from the one query that sees them. "
        "Check the row-sum strip on the right.");
    ImGui::PopStyleColor();
  } else {
    ImGui::TextDisabled("Each row is one query's distribution over keys.");
  }
  return changed;
}

}  // namespace attnviz::gui
