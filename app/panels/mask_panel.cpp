// attnviz panel: the masks, combined as docs/design/conventions.md says:
//   allowed = [(causal AND window) OR prefix OR sink] AND NOT pad AND custom AND chunk AND doc
//             AND expr
// (documents, the expression, softcap and block sparsity: mask_kinds_panel.cpp).
// Every change re-runs only the softmax.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>

namespace attnviz::gui {

namespace {

// A checkbox that enables a count, with its slider beside it; 0 means off.
bool countControl(const char* label, int& value, int maxValue, int defaultOn, const char* help) {
  bool changed = false;
  bool on = value > 0;
  ImGui::PushID(label);
  if (ImGui::Checkbox(label, &on)) {
    value = on ? std::clamp(defaultOn, 1, std::max(1, maxValue)) : 0;
    changed = true;
  }
  helpMarker(help);
  if (on) {
    ImGui::SameLine(ImGui::GetFontSize() * 8.5f);
    ImGui::SetNextItemWidth(-1);
    if (ImGui::SliderInt("##n", &value, 1, std::max(1, maxValue))) changed = true;
  }
  ImGui::PopID();
  return changed;
}

}  // namespace

bool drawMaskPanel(AppState& s) {
  bool changed = false;
  MaskSpec& m = s.session.editScene().params.mask;
  const int Tk = std::max(1, s.tk());

  // An encoder's view has no causal mask, whatever the synthetic scene's mode says.
  const bool encoderView =
      s.model.open() && s.model.source && !s.model.source->model().config().causal;
  if (encoderView) {
    bool none = false;
    ImGui::BeginDisabled();
    ImGui::Checkbox("causal (an encoder has none)", &none);
    ImGui::EndDisabled();
  } else if (s.sceneData().mode == Mode::Causal || s.sceneData().mode == Mode::Decode) {
    bool implied = true;
    ImGui::BeginDisabled();
    ImGui::Checkbox("causal (the mode implies it)", &implied);
    ImGui::EndDisabled();
  } else if (ImGui::Checkbox("causal", &m.causal)) {
    changed = true;
  }
  helpMarker(
      "Query i may attend to key j only when j \xe2\x89\xa4 p\xe1\xb5\xa2 = i + (T_k \xe2\x88\x92 "
      "T_q): "
      "itself and the past.");
  changed |= countControl(
      "window W", m.window, Tk, 4,
      "Sliding window (Mistral): only the last W keys up to p\xe1\xb5\xa2, itself included.");
  changed |= countControl(
      "prefix P", m.prefix, Tk, 2,
      "Prefix-LM: the first P keys are visible to every query (added to the causal/window set).");
  changed |= countControl("sink S", m.sink, Tk, 1,
                          "Attention sink (StreamingLLM): the first S keys are always visible.");
  changed |= countControl(
      "pad N", m.pad, Tk, 1,
      "Key padding: the last N keys are padding and never attended. Rows may become fully masked.");
  changed |= countControl(
      "chunk C", m.chunk, Tk, 8,
      "Chunked local attention (Llama 4): a query sees only keys in its own chunk of C "
      "positions, âj/Câ = âpáµ¢/Câ. With causal "
      "it is Llama 4's chunked causal attention.");
  if (ImGui::Checkbox("ALiBi", &m.alibi)) changed = true;
  helpMarker(
      "Adds b = \xe2\x88\x92m\xe2\x82\x95\xc2\xb7|p\xe1\xb5\xa2 \xe2\x88\x92 j| with a different "
      "slope m\xe2\x82\x95 per head: "
      "far keys get a penalty, so heads differ in how local they are.");
  ImGui::Separator();
  changed |= drawMaskKindsPanel(s);

  ImGui::Separator();
  ImGui::Checkbox("Paint mask cells", &s.view.paintMode);
  helpMarker(
      "Click-drag on the heatmap to block cells (a custom mask). Hold Shift to un-block. "
      "Right or middle drag still pans.");
  if (m.customKind != MaskSpec::Custom::None) {
    ImGui::Indent();
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("custom %s mask %s; painted cells are part of it and saved with it",
                       m.customKind == MaskSpec::Custom::Allow ? "allow" : "bias",
                       m.custom.shapeString().c_str());
    ImGui::PopStyleColor();
    if (ImGui::SmallButton("clear custom mask")) s.session.clearCustomMask();
    ImGui::Unindent();
  }
  const AttentionParams& p = s.session.params();
  ImGui::TextWrapped("Mask: %s", describeMask(p.mask).c_str());
  const int fully = s.display().fullyMaskedRows, first = s.display().firstFullyMaskedRow;
  if (fully > 0 && s.display().columnsAreKeys) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.38f, 1.0f));
    ImGui::TextWrapped(
        "%d fully masked row%s (first: row %d). Such a row has no key to attend to: "
        "its weights are all 0 and its output is 0 (PyTorch gives NaN).",
        fully, fully == 1 ? "" : "s", first);
    ImGui::PopStyleColor();
  }
  if (changed) s.session.touchMask();
  return changed;
}

}  // namespace attnviz::gui
