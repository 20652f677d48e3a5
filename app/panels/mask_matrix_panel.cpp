// attnviz panel: the mask on its own, as a small matrix: light = may attend, dark = masked.
#include "gui/heatmap_renderer.h"
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnviz::gui {

bool drawMaskMatrixPanel(AppState& s) {
  // The session's biased scores of the shown head: -inf exactly where the mask blocks.
  const std::vector<float>& biased = s.session.biasedScores();
  const int Tq = s.tq(), Tk = s.tk();
  if (Tq == 0 || Tk == 0 || biased.size() != std::size_t(Tq) * Tk) {
    ImGui::TextDisabled("No mask yet.");
    return false;
  }
  const float sc = s.ui.uiScale;
  const float side = std::min(ImGui::GetContentRegionAvail().x, 200 * sc);
  const int maxSide = std::max(8, int(side));
  const int step = std::max(1, int(std::ceil(std::max(Tq, Tk) / double(maxSide))));
  const int w = (Tk + step - 1) / step, h = (Tq + step - 1) / step;
  RgbaImage& img = s.renderer->image("mask-matrix");
  const std::uint64_t ver = s.session.biasedVersion();
  if (img.version != ver) {
    std::vector<std::uint8_t> px(std::size_t(w) * h * 4, 255);
    for (int by = 0; by < h; ++by)
      for (int bx = 0; bx < w; ++bx) {
        bool anyAllowed = false;
        for (int i = by * step; i < std::min(Tq, (by + 1) * step); ++i)
          for (int j = bx * step; j < std::min(Tk, (bx + 1) * step); ++j) {
            const std::size_t k = std::size_t(i) * Tk + j;
            anyAllowed |= !(std::isinf(biased[k]) && biased[k] < 0);
          }
        std::uint8_t* p = &px[(std::size_t(by) * w + bx) * 4];
        const RGBA8 col = anyAllowed ? RGBA8{226, 228, 234, 255} : kMaskedColor;
        p[0] = col.r, p[1] = col.g, p[2] = col.b;
      }
    img.set(px, w, h);
    img.version = ver;
  }
  const float cell = std::max(1.0f, std::floor(side / std::max(w, h)));
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Image(img.imguiId(), ImVec2(cell * w, cell * h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRect(ImVec2(p.x - 1, p.y - 1), ImVec2(p.x + cell * w + 1, p.y + cell * h + 1),
              IM_COL32(90, 92, 100, 255));
  if (ImGui::IsItemHovered()) {
    const int j = int((ImGui::GetIO().MousePos.x - p.x) / cell) * step;
    const int i = int((ImGui::GetIO().MousePos.y - p.y) / cell) * step;
    if (i < Tq && j < Tk) {
      const float b = biased[std::size_t(i) * Tk + j];
      ImGui::SetTooltip("query %d, key %d: %s", i, j,
                        std::isinf(b) ? "masked (logit = -inf)" : "may attend");
    }
  }
  ImGui::SameLine();
  ImGui::BeginGroup();
  ImGui::TextDisabled("%d \xc3\x97 %d", Tq, Tk);
  ImGui::TextDisabled("head %d", s.session.biasedHead());
  ImGui::TextColored(ImVec4(0.89f, 0.89f, 0.92f, 1), "\xe2\x96\xa0 allowed");
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(rgbaU32(kMaskedColor)), "\xe2\x96\xa0 masked");
  ImGui::EndGroup();
  const int fully = s.display().fullyMaskedRows;
  if (fully && s.display().columnsAreKeys)
    ImGui::TextColored(ImVec4(1, 0.45f, 0.38f, 1), "%d fully masked row%s", fully,
                       fully == 1 ? "" : "s");
  return false;
}

}  // namespace attnviz::gui
