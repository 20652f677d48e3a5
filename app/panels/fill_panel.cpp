// attnviz panel: an encoder's [MASK] fill. For each mask token of the text (the model view's,
// or one typed here) the k most likely tokens with their probabilities, softmax over the whole
// vocabulary; with interventions on (an ablated head), the plain pass's lists beside them, and
// both follow every re-run as the Next token panel does for a decoder.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <string>

namespace attnviz::gui {

namespace {

void fillList(const char* title, const MaskFill& f, const Tokenizer& tok, float width,
              ImU32 colour) {
  ImGui::BeginGroup();
  ImGui::TextUnformatted(title);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float rowH = ImGui::GetTextLineHeightWithSpacing();
  for (const auto& [id, p] : f.top) {
    const ImVec2 at = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(at, ImVec2(at.x + width * float(std::clamp(p, 0.0, 1.0)), at.y + rowH - 2),
                      colour);
    ImGui::Text("%-12s %5.1f%%", ("'" + tok.label(id) + "'").c_str(), 100.0 * p);
  }
  ImGui::EndGroup();
}

}  // namespace

bool drawFillPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source) return false;
  FillState& f = m.fill;
  const Tokenizer& tok = m.source->model().tokenizer();
  const std::optional<int> mask = tok.mask();
  const std::string maskText = mask ? tok.pieceBytes(*mask) : std::string("[MASK]");
  ImGui::TextDisabled("Text with %s (empty: the model's text)", maskText.c_str());
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputTextWithHint("##filltext", ("The cat sat on the " + maskText + ".").c_str(),
                               f.text, sizeof f.text))
    f.editedAt = nowSeconds();  // its own pass at the frame boundary, once typing pauses
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  if (ImGui::SliderInt("top k", &f.topK, 1, 20)) f.textFor = ~std::uint64_t{0};
  if (!f.error.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("%s", f.error.c_str());
    ImGui::PopTextWrapPos();
    return false;
  }
  bool intervened = false;
  for (const auto& li : m.source->interventions().layers) intervened |= li.any();
  const float avail = ImGui::GetContentRegionAvail().x;
  for (std::size_t k = 0; k < f.after.size(); ++k) {
    const MaskFill& a = f.after[k];
    const std::string head = "position " + std::to_string(a.position);
    if (!intervened || k >= f.before.size()) {
      fillList(head.c_str(), a, tok, avail, IM_COL32(70, 110, 170, 200));
    } else {
      const float w = (avail - ImGui::GetStyle().ItemSpacing.x) * 0.5f;
      fillList((head + ": before").c_str(), f.before[k], tok, w, IM_COL32(70, 110, 170, 200));
      ImGui::SameLine();
      fillList("after (interventions)", a, tok, w, IM_COL32(190, 90, 50, 200));
    }
    ImGui::Spacing();
  }
  return false;
}

}  // namespace attnviz::gui
