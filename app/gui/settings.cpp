// attnviz GUI: settings under $XDG_CONFIG_HOME/attnviz (fallback ~/.config/attnviz), next to
// imgui.ini. Preferences only; the scene itself is saved as a scene file.
#include "app_state.h"

#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace attnviz::gui {

using nlohmann::json;

std::string configDirectory() {
  namespace fs = std::filesystem;
  fs::path dir;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    dir = fs::path(xdg) / "attnviz";
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = fs::path(home) / ".config" / "attnviz";
  else
    return "";
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ec ? "" : dir.string();
}

void loadSettings(AppState& s) {
  if (s.configDir.empty()) return;
  std::ifstream in(s.configDir + "/settings.json");
  if (!in) return;
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    const json j = json::parse(buf.str());
    if (j.contains("weightColormap"))
      if (auto c = colormapFromName(j["weightColormap"].get<std::string>()))
        s.view.weightColormap = *c;
    if (j.contains("scoreColormap"))
      if (auto c = colormapFromName(j["scoreColormap"].get<std::string>()))
        s.view.scoreColormap = *c;
    if (j.contains("showGrid")) s.view.showGrid = j["showGrid"].get<bool>();
    if (j.contains("browseDir")) s.ui.browseDir = j["browseDir"].get<std::string>();
    if (j.contains("leftWidth")) s.ui.leftWidth = j["leftWidth"].get<float>();
    if (j.contains("rightWidth")) s.ui.rightWidth = j["rightWidth"].get<float>();
  } catch (const json::exception&) {
    // A damaged settings file is ignored and rewritten on exit.
  }
}

void saveSettings(const AppState& s) {
  if (s.configDir.empty()) return;
  const json j = {
      {"weightColormap", colormapName(s.view.weightColormap)},
      {"scoreColormap", colormapName(s.view.scoreColormap)},
      {"showGrid", s.view.showGrid},
      {"browseDir", s.ui.browseDir},
      {"leftWidth", s.ui.leftWidth},
      {"rightWidth", s.ui.rightWidth},
  };
  try {
    writeFileAtomic(s.configDir + "/settings.json", j.dump(2) + "\n");
  } catch (const std::exception&) {
    // Settings are a convenience: failing to save them must not stop the app from closing.
  }
}

}  // namespace attnviz::gui
