// attnviz panel: an open attention dump: its file and model, the layer shown (its name and
// axes), and whether it has Q, K and V (without them the score stages show log A).
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace attnviz::gui {

bool drawDumpPanel(AppState& s) {
  DumpState& d = s.dump;
  if (!d.source) return false;
  const Dump& dump = d.source->dump();
  bool changed = false;
  ImGui::TextUnformatted(std::filesystem::path(d.path).filename().c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", d.path.c_str());
  ImGui::TextDisabled("%s%s%d layers, %zu tokens%s", dump.model.c_str(),
                      dump.model.empty() ? "" : ": ", d.source->layers(), dump.tokens.size(),
                      dump.keyTokens.empty()
                          ? ""
                          : (", " + std::to_string(dump.keyTokens.size()) + " key tokens").c_str());
  int layer = d.layer;
  const DumpLayer& cur = dump.layers[std::clamp(d.layer, 0, d.source->layers() - 1)];
  const std::string fmt = "layer %d: " + cur.name + " (" + dumpAxesName(cur.axes) + ")";
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderInt("##dumplayer", &layer, 0, d.source->layers() - 1, fmt.c_str())) {
    d.layer = std::clamp(layer, 0, d.source->layers() - 1);
    d.layerDirty = true;
    changed = true;
  }
  ImGui::Checkbox("Average of this layer's heads", &s.view.headAverage);
  if (cur.hasQkv()) {
    ImGui::TextDisabled("Q, K and V recorded: the output stage is A\xc2\xb7V.");
  } else {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.75f, 0.4f, 1));
    ImGui::TextWrapped("This dump has no Q/K/V for this layer.");
    ImGui::PopStyleColor();
    ImGui::TextWrapped(
        "Weights only: temperature, masks and ALiBi re-normalise them exactly (A^(1/\xcf\x84) "
        "over the allowed keys); the score stages show log A, the output stage is empty.");
  }
  return changed;
}

}  // namespace attnviz::gui
