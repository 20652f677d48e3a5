// attnviz panel: open (Ctrl+O) and save-scene dialogs: a folder listing filtered to .json
// scenes and .npy tensors, with a path field. Dropped .npy files ask what they are.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace attnviz::gui {

namespace fs = std::filesystem;

namespace {

// Lists `dir`; a click on a folder enters it, on a file fills the name field. Returns true on
// double-click of a file.
bool folderList(AppState& s, bool saving) {
  std::error_code ec;
  std::vector<fs::directory_entry> dirs, files;
  for (const auto& e :
       fs::directory_iterator(s.ui.browseDir, fs::directory_options::skip_permission_denied, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (e.is_directory(ec))
      dirs.push_back(e);
    else if (e.path().extension() == ".json" || (!saving && e.path().extension() == ".npy"))
      files.push_back(e);
  }
  auto byName = [](const fs::directory_entry& a, const fs::directory_entry& b) {
    return a.path().filename() < b.path().filename();
  };
  std::sort(dirs.begin(), dirs.end(), byName);
  std::sort(files.begin(), files.end(), byName);
  bool chosen = false;
  ImGui::BeginChild("##list", ImVec2(ImGui::GetFontSize() * 34, ImGui::GetFontSize() * 16), true);
  if (ImGui::Selectable("..")) s.ui.browseDir = fs::path(s.ui.browseDir).parent_path().string();
  for (const auto& d : dirs)
    if (ImGui::Selectable((d.path().filename().string() + "/").c_str()))
      s.ui.browseDir = d.path().string();
  for (const auto& f : files) {
    const std::string name = f.path().filename().string();
    if (ImGui::Selectable(name.c_str(), name == s.ui.fileName,
                          ImGuiSelectableFlags_AllowDoubleClick)) {
      std::snprintf(s.ui.fileName, sizeof s.ui.fileName, "%s", name.c_str());
      if (ImGui::IsMouseDoubleClicked(0)) chosen = true;
    }
  }
  ImGui::EndChild();
  return chosen;
}

std::string chosenPath(const AppState& s) {
  const fs::path name(s.ui.fileName);
  return name.is_absolute() ? name.string() : (fs::path(s.ui.browseDir) / name).string();
}

}  // namespace

bool drawFileDialogs(AppState& s) {
  bool changed = false;
  std::error_code ec;
  if (s.ui.browseDir.empty()) s.ui.browseDir = fs::current_path(ec).string();
  if (s.ui.requestOpenDialog) {
    s.ui.requestOpenDialog = false;
    s.ui.fileName[0] = 0;
    ImGui::OpenPopup("Open");
  }
  if (s.ui.requestSaveDialog) {
    s.ui.requestSaveDialog = false;
    if (!s.scene.path.empty()) {
      s.ui.browseDir = fs::path(s.scene.path).parent_path().string();
      std::snprintf(s.ui.fileName, sizeof s.ui.fileName, "%s",
                    fs::path(s.scene.path).filename().string().c_str());
    } else {
      std::snprintf(s.ui.fileName, sizeof s.ui.fileName, "scene.json");
    }
    ImGui::OpenPopup("Save scene");
  }
  if (!s.ui.npyPending.empty()) ImGui::OpenPopup("Use .npy as");

  const ImVec2 centre = ImGui::GetMainViewport()->GetCenter();
  ImGui::SetNextWindowPos(centre, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal("Open", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextDisabled("%s", s.ui.browseDir.c_str());
    const bool dbl = folderList(s, false);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 34);
    const bool enter = ImGui::InputText("##name", s.ui.fileName, sizeof s.ui.fileName,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
    if (ImGui::Button("Open") || dbl || enter) {
      const std::string path = chosenPath(s);
      ImGui::CloseCurrentPopup();
      if (fs::is_directory(path, ec)) {
        s.ui.browseDir = path;
      } else {
        s.ui.dropped.push_back(path);  // opened at the frame boundary
        changed = true;
      }
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))
      ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  ImGui::SetNextWindowPos(centre, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal("Save scene", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextDisabled("%s", s.ui.browseDir.c_str());
    folderList(s, true);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 34);
    const bool enter = ImGui::InputText("##name", s.ui.fileName, sizeof s.ui.fileName,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
    if (ImGui::Button("Save") || enter) {
      std::string path = chosenPath(s);
      if (fs::path(path).extension() != ".json") path += ".json";
      ImGui::CloseCurrentPopup();
      try {
        saveSceneFrom(s, path);
        notify(s, "Saved scene to " + fs::absolute(path, ec).string());
      } catch (const std::exception& e) {
        reportError(s, e.what());
      }
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))
      ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  ImGui::SetNextWindowPos(centre, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal("Use .npy as", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::Text("%s", s.ui.npyPending.c_str());
    ImGui::TextDisabled(
        "2-D [T, d] is one head; 3-D [H, T, d]. A mask is [T_q, T_k] (bool: may attend; float: "
        "bias).");
    const struct {
      const char* label;
      char role;
    } roles[] = {{"Q", 'q'}, {"K", 'k'}, {"V", 'v'}, {"mask", 'm'}};
    for (const auto& r : roles) {
      if (ImGui::Button(r.label, ImVec2(80 * s.ui.uiScale, 0))) {
        const std::string path = s.ui.npyPending;
        s.ui.npyPending.clear();
        ImGui::CloseCurrentPopup();
        s.ui.npyRole = r.role;  // applied at the frame boundary
        s.ui.npyRolePath = path;
        changed = true;
      }
      ImGui::SameLine();
    }
    if (ImGui::Button("Cancel")) {
      s.ui.npyPending.clear();
      ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
  }
  return changed;
}

}  // namespace attnviz::gui
