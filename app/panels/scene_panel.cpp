// attnviz panel: the scene. Text, mode, heads, d_k, seed and archetypes change the inputs, so
// they re-run setInputs (the GEMMs); the decode step grows the KV cache one token at a time.
#include "panels/panels.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <filesystem>

namespace attnviz::gui {

namespace {

const char* kModeHelp =
    "self: every token attends to every token.\n"
    "causal: a token sees only itself and earlier tokens (the lower triangle).\n"
    "cross: queries come from one text, keys and values from another (e.g. a translation).\n"
    "decode: one new query row against the KV cache; the step slider grows the cache.";

}  // namespace

bool drawScenePanel(AppState& s) {
  bool inputs = false;
  Scene& sc = s.session.editScene();

  // Presets: one per teaching point.
  const auto& presets = cachedPresetFiles(s);
  if (!presets.empty()) {
    const std::string current = std::filesystem::path(s.scene.path).filename().string();
    ImGui::SetNextItemWidth(-1);
    if (ImGui::BeginCombo("##preset", current.empty() ? "Presets\xe2\x80\xa6" : current.c_str())) {
      for (const auto& p : presets) {
        const std::string name = std::filesystem::path(p).stem().string();
        if (ImGui::Selectable(name.c_str(), p == s.scene.path)) {
          s.ui.dropped.push_back(p);  // loaded at the frame boundary
        }
      }
      ImGui::EndCombo();
    }
  }

  int mode = int(sc.mode);
  const char* modes[] = {"self", "causal", "cross", "decode"};
  ImGui::SetNextItemWidth(-ImGui::GetFontSize() * 4.5f);
  if (ImGui::Combo("Mode", &mode, modes, 4)) {
    sc.mode = Mode(mode);
    inputs = true;
  }
  helpMarker(kModeHelp);

  ImGui::TextUnformatted(sc.mode == Mode::Cross ? "Query text (target)" : "Text");
  if (ImGui::InputTextMultiline("##qtext", &sc.queryText,
                                ImVec2(-1, ImGui::GetTextLineHeight() * 3.4f)))
    inputs = true;
  if (sc.mode == Mode::Cross) {
    ImGui::TextUnformatted("Key / value text (source)");
    if (ImGui::InputTextMultiline("##ktext", &sc.keyText,
                                  ImVec2(-1, ImGui::GetTextLineHeight() * 3.4f)))
      inputs = true;
  }

  const float w = -ImGui::GetFontSize() * 5;
  ImGui::SetNextItemWidth(w);
  if (ImGui::SliderInt("Heads", &sc.heads, 1, 16)) inputs = true;
  ImGui::SetNextItemWidth(w);
  if (ImGui::SliderInt("d_k", &sc.dHead, 4, 256)) inputs = true;
  helpMarker(
      "Width of each head's queries and keys (and values). Scores are divided by \xe2\x88\x9a"
      "d_k.");
  ImGui::SetNextItemWidth(w);
  int seed = int(sc.seed);
  if (ImGui::InputInt("Seed", &seed)) {
    sc.seed = std::uint32_t(std::max(0, seed));
    inputs = true;
  }
  ImGui::SetNextItemWidth(w);
  if (ImGui::SliderFloat("Sharpness", &sc.sharpness, 0.1f, 4.0f, "%.2f",
                         ImGuiSliderFlags_Logarithmic))
    inputs = true;
  helpMarker("Scales how strongly each archetype's pattern shows in Q\xc2\xb7K\xe1\xb5\x80.");

  if (sc.mode == Mode::Decode) {
    const int total = int(tokenize(sc.queryText).size());
    int step = sc.decodeStep < 0 ? total : sc.decodeStep;
    ImGui::SetNextItemWidth(w);
    if (ImGui::SliderInt("Decode step", &step, 1, std::max(1, total), "KV cache %d")) {
      sc.decodeStep = step >= total ? -1 : step;
      inputs = true;
    }
    helpMarker(
        "Decoding one token at a time: the newest token is the single query row, and the keys "
        "are every token so far (the KV cache). Drag to grow the cache.");
  }

  if (ImGui::TreeNode("Head archetypes")) {
    const auto all = allArchetypes();
    for (int h = 0; h < sc.heads; ++h) {
      ImGui::PushID(h);
      const Archetype a = headArchetype(sc, h);
      ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
      if (ImGui::BeginCombo(("head " + std::to_string(h)).c_str(), archetypeName(a))) {
        for (Archetype c : all)
          if (ImGui::Selectable(archetypeName(c), c == a)) {
            while (int(sc.archetypes.size()) < sc.heads)
              sc.archetypes.push_back(headArchetype(sc, int(sc.archetypes.size())));
            sc.archetypes[h] = c;
            inputs = true;
          }
        ImGui::EndCombo();
      }
      ImGui::PopID();
    }
    ImGui::TreePop();
  }

  // Shape readout: the convention in one line.
  const Dims d = s.dims();
  ImGui::Spacing();
  ImGui::TextDisabled("Q (%d\xc3\x97%d) \xc2\xb7 K\xe1\xb5\x80 (%d\xc3\x97%d) = S (%d\xc3\x97%d)",
                      d.Tq, d.dk, d.dk, d.Tk, d.Tq, d.Tk);
  ImGui::TextDisabled(
      "A (%d\xc3\x97%d) \xc2\xb7 V (%d\xc3\x97%d) = O (%d\xc3\x97%d)   \xc3\x97 %d heads", d.Tq,
      d.Tk, d.Tk, d.dv, d.Tq, d.dv, d.H);
  if (inputs) s.session.touchInputs();
  return inputs;
}

}  // namespace attnviz::gui
