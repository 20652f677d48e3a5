// attnviz panel: the model view (BertViz's "model view"): every layer x head of the pass as a
// thumbnail, rows are layers. A click shows that layer and head in the heatmap.
#include "gui/heatmap_renderer.h"
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace attnviz::gui {

namespace {

// Max-pools head h of a pass layer's weights [H, T, T] into at most maxSide pixels a side;
// keys after the query (the causal mask) get the masked colour.
void passThumbnail(const Tensor3& w, int h, int maxSide, ColormapId cm,
                   std::vector<std::uint8_t>& rgba, int& side) {
  const int T = w.rows;
  const int step = std::max(1, int(std::ceil(T / double(maxSide))));
  side = (T + step - 1) / step;
  rgba.assign(std::size_t(side) * side * 4, 255);
  for (int by = 0; by < side; ++by)
    for (int bx = 0; bx < side; ++bx) {
      const int i0 = by * step, j0 = bx * step;
      const int i1 = std::min(T, i0 + step), j1 = std::min(T, j0 + step);
      RGBA8 c;
      if (j0 > i1 - 1) {
        c = kMaskedColor;  // every cell of the block lies above the diagonal
      } else {
        float m = 0.0f;
        for (int i = i0; i < i1; ++i)
          for (int j = j0; j < j1; ++j) m = std::max(m, w.at(h, i, j));
        c = colormapLookup(cm, m);
      }
      std::uint8_t* px = &rgba[(std::size_t(by) * side + bx) * 4];
      px[0] = c.r, px[1] = c.g, px[2] = c.b, px[3] = 255;
    }
}

}  // namespace

bool drawModelGridPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  const ForwardResult& pass = m.source->pass();
  const int L = m.source->layers(), H = m.source->heads();
  const float sc = s.ui.uiScale;
  const float labelW = ImGui::CalcTextSize("L00").x + 4 * sc;
  const float availW = ImGui::GetContentRegionAvail().x - labelW;
  const float gap = 2 * sc;
  const float thumb = std::clamp(std::floor((availW - gap * (H - 1)) / H), 6.0f, 64 * sc);
  const float pitch = thumb + gap;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float x0 = origin.x + labelW, y0 = origin.y;
  m.grid = {true, x0, y0, thumb, pitch};
  const std::uint64_t ver = m.passVersion * 16 + std::uint64_t(s.view.weightColormap);
  bool changed = false;
  for (int l = 0; l < L; ++l) {
    const std::string ln = "L" + std::to_string(l);
    dl->AddText(ImVec2(origin.x, y0 + l * pitch + (thumb - ImGui::GetFontSize()) * 0.5f),
                l == m.layer ? IM_COL32(255, 170, 30, 255) : IM_COL32(150, 150, 160, 255),
                ln.c_str());
    for (int h = 0; h < H; ++h) {
      RgbaImage& img = s.renderer->image("mthumb-" + std::to_string(l) + "-" + std::to_string(h));
      if (img.version != ver) {
        std::vector<std::uint8_t> px;
        int side = 0;
        passThumbnail(pass.layers[l].weights, h, std::max(8, int(thumb)), s.view.weightColormap,
                      px, side);
        img.set(px, side, side);
        img.version = ver;
      }
      const ImVec2 p(x0 + h * pitch, y0 + l * pitch);
      const ImVec2 q(p.x + thumb, p.y + thumb);
      dl->AddImage(img.imguiId(), p, q);
      const bool ablated = m.source->ablated(l, h);
      if (ablated) {
        dl->AddRectFilled(p, q, IM_COL32(20, 20, 24, 170));
        dl->AddLine(p, q, IM_COL32(230, 60, 60, 255), 2 * sc);
      }
      const bool selected = l == m.layer && !s.view.headAverage && s.view.head == h;
      ImGui::SetCursorScreenPos(p);
      ImGui::PushID(l * 4096 + h);
      ImGui::InvisibleButton("##mthumb", ImVec2(thumb, thumb));
      const bool hovered = ImGui::IsItemHovered();
      if (ImGui::IsItemClicked()) {
        if (m.layer != l) m.layerDirty = true;
        m.layer = l;
        s.view.head = h;
        s.view.headAverage = false;
        changed = true;
      }
      if (hovered) {
        ImGui::BeginTooltip();
        ImGui::Text("Layer %d, head %d%s", l, h, ablated ? " (ablated)" : "");
        ImGui::Image(img.imguiId(), ImVec2(200 * sc, 200 * sc));
        ImGui::TextDisabled("click to show it in the heatmap");
        ImGui::EndTooltip();
      }
      ImGui::PopID();
      if (selected || hovered)
        dl->AddRect(ImVec2(p.x - 1.5f, p.y - 1.5f), ImVec2(q.x + 1.5f, q.y + 1.5f),
                    selected ? IM_COL32(255, 170, 30, 255) : IM_COL32(220, 220, 230, 255), 0, 0,
                    1.0f);  // outside the thumbnail: its pixels stay the weights'
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, y0 + L * pitch));
  ImGui::Dummy(ImVec2(labelW + H * pitch, 0));
  ImGui::TextDisabled("rows: layers, columns: heads (the pass's own weights)");
  return changed;
}

}  // namespace attnviz::gui
