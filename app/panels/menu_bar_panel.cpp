// attnviz panel: the main menu bar (File, View, Presets, Help).
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <filesystem>

namespace attnviz::gui {

bool drawMenuBar(AppState& s) {
  bool changed = false;
  if (!ImGui::BeginMenuBar()) return false;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open\xe2\x80\xa6", "Ctrl+O")) s.ui.requestOpenDialog = true;
    if (ImGui::MenuItem("Open model\xe2\x80\xa6 (folder)")) s.model.requestOpenDialog = true;
    if (ImGui::MenuItem("Save scene\xe2\x80\xa6")) s.ui.requestSaveDialog = true;
    if (ImGui::MenuItem("Export figure\xe2\x80\xa6", "Ctrl+S")) s.exporter.requestOpen = true;
    if (ImGui::MenuItem("Default scene")) {
      closeSources(s);
      s.session.setScene(defaultScene());
      s.scene.path.clear();
      resetView(s);
      changed = true;
    }
    ImGui::Separator();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) s.ui.quit = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Presets")) {
    const auto& files = cachedPresetFiles(s, true);  // picks up files added meanwhile
    if (files.empty()) ImGui::TextDisabled("No preset scenes found (share/attnviz/scenes)");
    for (const auto& f : files)
      if (ImGui::MenuItem(std::filesystem::path(f).stem().string().c_str())) {
        s.ui.dropped.push_back(f);  // loaded at the frame boundary
        changed = true;
      }
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    if (ImGui::MenuItem("Reset zoom and pan", "middle double-click")) resetView(s);
    ImGui::MenuItem("Grid lines", nullptr, &s.view.showGrid);
    ImGui::MenuItem("Softmax over the wrong axis", nullptr, &s.view.wrongAxis);
    ImGui::MenuItem("Head finder", nullptr, &s.model.heads.open);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    ImGui::TextUnformatted("Rows are queries, columns are keys: row i is query i's");
    ImGui::TextUnformatted("probability distribution over the keys, so it sums to 1.");
    ImGui::TextUnformatted(
        "A mask adds \xe2\x88\x92\xe2\x88\x9e before the softmax (hatched cells).");
    ImGui::Separator();
    ImGui::TextDisabled("Click a row: inspect it.   Wheel: zoom.   Drag: pan.");
    ImGui::TextDisabled("Up/Down: selected row.   Left/Right: head.   Home: reset view.");
    ImGui::TextDisabled("Ctrl+O open, Ctrl+S export PNG, Ctrl+Q quit.");
    ImGui::TextDisabled("Paint mode: drag blocks cells, Shift+drag unblocks.");
    ImGui::TextDisabled("Drop .json scenes, .npy tensors or a model folder on the window.");
    ImGui::EndMenu();
  }
  if (!s.sceneData().title.empty()) {
    const float w = ImGui::CalcTextSize(s.sceneData().title.c_str()).x;
    ImGui::SameLine(std::max(ImGui::GetCursorPosX() + 20, ImGui::GetWindowWidth() - w - 20));
    ImGui::TextDisabled("%s", s.sceneData().title.c_str());
  }
  ImGui::EndMenuBar();
  return changed;
}

}  // namespace attnviz::gui
