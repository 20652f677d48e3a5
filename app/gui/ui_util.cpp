// attnviz GUI: small drawing helpers shared by the panels.
#include "panels/panels.h"

#include "attnviz/formats/data_dir.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace attnviz::gui {

void maxPoolThumbnail(const Tensor3& w, int h, int maxSide, ColormapId cm,
                      std::vector<std::uint8_t>& rgba, int& width, int& height) {
  const int Tq = w.rows, Tk = w.cols;
  const int step = std::max(1, int(std::ceil(std::max(Tq, Tk) / double(maxSide))));
  width = (Tk + step - 1) / step;
  height = (Tq + step - 1) / step;
  rgba.assign(std::size_t(width) * height * 4, 255);
  for (int by = 0; by < height; ++by)
    for (int bx = 0; bx < width; ++bx) {
      const int i0 = by * step, j0 = bx * step;
      const int i1 = std::min(Tq, i0 + step), j1 = std::min(Tk, j0 + step);
      float m = 0.0f;
      for (int i = i0; i < i1; ++i)
        for (int j = j0; j < j1; ++j) m = std::max(m, w.at(h, i, j));
      const RGBA8 c = m == 0.0f ? kMaskedColor : colormapLookup(cm, m);
      std::uint8_t* px = &rgba[(std::size_t(by) * width + bx) * 4];
      px[0] = c.r, px[1] = c.g, px[2] = c.b, px[3] = 255;
    }
}

void helpMarker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void addVerticalText(ImDrawList* dl, float x, float yBottom, unsigned int colour,
                     const char* text) {
  // Lay the text out horizontally at the origin, then rotate its vertices by -90 degrees.
  // Lay out under a huge clip rect: glyphs at the origin must not be culled before rotation.
  // (The rotated glyphs are placed in margins the caller reserved for them.)
  dl->PushClipRect(ImVec2(-1e5f, -1e5f), ImVec2(1e5f, 1e5f), false);
  const int start = dl->VtxBuffer.Size;
  dl->AddText(ImVec2(0, 0), colour, text);
  for (int k = start; k < dl->VtxBuffer.Size; ++k) {
    ImDrawVert& v = dl->VtxBuffer[k];
    const float px = v.pos.x, py = v.pos.y;
    // (px, py) -> (x + py, yBottom - px): the text's baseline runs upwards.
    v.pos = ImVec2(x + py, yBottom - px);
  }
  dl->PopClipRect();
}

unsigned int rgbaU32(RGBA8 c) { return IM_COL32(c.r, c.g, c.b, c.a); }

unsigned int colormapU32(ColormapId id, float t) {
  return rgbaU32(colormapTable(id)[colormapIndex(t)]);
}

std::string presetDirectory() { return dataSubdir("scenes"); }

std::vector<std::string> presetFiles() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  const std::string dir = presetDirectory();
  if (dir.empty()) return out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<std::string>& cachedPresetFiles(AppState& s, bool rescan) {
  if (rescan || !s.ui.presetsScanned) {
    s.ui.presets = presetFiles();
    s.ui.presetsScanned = true;
  }
  return s.ui.presets;
}

}  // namespace attnviz::gui
