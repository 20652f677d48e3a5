// attnviz panel: the model view (BertViz's "model view"): every layer x head of a model's pass
// or of a dump as a thumbnail, rows are layers (cross-attention layers as T_q x T_k
// rectangles). A click shows that layer and head in the heatmap.
#include "gui/heatmap_renderer.h"
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace attnviz::gui {

bool drawModelGridPanel(AppState& s) {
  ModelState& m = s.model;
  DumpState& d = s.dump;
  // A row per attention site of the model's pass (stack, layer, site: a decoder's, one per
  // layer), or per recorded layer of a dump; rowLayer is the row's layer.
  std::vector<const Tensor3*> layers;
  std::vector<std::string> names;
  std::vector<int> rowLayer;
  if (m.source && m.source->ready()) {
    const ModelConfig& c = m.source->model().config();
    // The pass keeps each site's pooled thumbnail (Capture::view), or its full weights.
    for (const SiteId& id : c.sites()) {
      const SiteActivations& sa = m.source->pass().site(id);
      layers.push_back(sa.weights.empty() ? &sa.thumb : &sa.weights);
      // A local (windowed) layer of a family that mixes local and global layers is marked "w".
      const bool local = !c.layerWindows.empty() && c.windowOf(id.layer) > 0;
      names.push_back(c.siteName(id) + (local ? "w" : ""));
      rowLayer.push_back(id.layer);
    }
  } else if (d.source) {
    for (const auto& la : d.source->dump().layers) {
      layers.push_back(&la.weights);
      // An encoder-decoder's rows are its sites ("enc 0", "dec 0 self", "dec 0 cross").
      names.push_back(d.seq2seq ? la.name : "L" + std::to_string(rowLayer.size()));
      rowLayer.push_back(static_cast<int>(rowLayer.size()));
    }
  } else {
    return false;
  }
  const bool isModel = m.source != nullptr;
  int& shownLayer = isModel ? m.layer : d.layer;
  bool& layerDirty = isModel ? m.layerDirty : d.layerDirty;
  const int L = int(layers.size());
  int H = 0;
  for (const Tensor3* t : layers) H = std::max(H, t->heads);
  const float sc = s.ui.uiScale;
  float labelW = ImGui::CalcTextSize("L00").x;
  for (const std::string& n : names) labelW = std::max(labelW, ImGui::CalcTextSize(n.c_str()).x);
  labelW += 4 * sc;
  const float availW = ImGui::GetContentRegionAvail().x - labelW;
  const float gap = 2 * sc;
  const float thumb = std::clamp(std::floor((availW - gap * (H - 1)) / H), 6.0f, 64 * sc);
  const float pitch = thumb + gap;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  // Grouped-query attention: the query heads that share one K and V head are outlined together
  // and labelled "kv g" above the grid.
  const int group = isModel ? m.source->model().config().kvGroup() : 1;
  const float header = group > 1 ? ImGui::GetFontSize() + 2 * sc : 0.0f;
  ImVec2 origin = ImGui::GetCursorScreenPos();
  if (group > 1) {
    for (int g = 0; g * group < H; ++g) {
      const std::string kv = "kv " + std::to_string(g);
      const float gx = origin.x + labelW + g * group * pitch;
      const float gw = group * pitch - gap;
      const float tw = ImGui::CalcTextSize(kv.c_str()).x;
      dl->AddText(ImVec2(gx + std::max(0.0f, (gw - tw) * 0.5f), origin.y), IM_COL32(120, 200, 255, 255),
                  kv.c_str());
    }
    origin.y += header;
  }
  const float x0 = origin.x + labelW, y0 = origin.y;
  m.grid = {true, x0, y0, thumb, pitch};
  const std::uint64_t ver = (isModel ? m.passVersion * 2 : d.version * 2 + 1) * 16 +
                            std::uint64_t(s.view.weightColormap);
  bool changed = false;
  for (int row = 0; row < L; ++row) {
    const int l = rowLayer[std::size_t(row)];
    const float ry = y0 + row * pitch;
    dl->AddText(ImVec2(origin.x, ry + (thumb - ImGui::GetFontSize()) * 0.5f),
                l == shownLayer ? IM_COL32(255, 170, 30, 255) : IM_COL32(150, 150, 160, 255),
                names[std::size_t(row)].c_str());
    const Tensor3& w = *layers[std::size_t(row)];
    // A cross-attention layer is a T_q x T_k rectangle inside the square.
    const float tw = w.cols >= w.rows ? thumb : std::max(2.0f, thumb * w.cols / float(w.rows));
    const float th = w.rows >= w.cols ? thumb : std::max(2.0f, thumb * w.rows / float(w.cols));
    for (int h = 0; h < w.heads; ++h) {
      RgbaImage& img = s.renderer->image("mthumb-" + std::to_string(row) + "-" + std::to_string(h));
      if (img.version != ver) {
        std::vector<std::uint8_t> px;
        int iw = 0, ih = 0;
        maxPoolThumbnail(w, h, std::max(8, int(thumb)), s.view.weightColormap, px, iw, ih);
        img.set(px, iw, ih);
        img.version = ver;
      }
      const ImVec2 p(x0 + h * pitch, ry);
      const ImVec2 q(p.x + tw, p.y + th);
      dl->AddImage(img.imguiId(), p, q);
      const bool ablated = isModel && m.source->ablated(l, h);
      if (ablated) {
        dl->AddRectFilled(p, q, IM_COL32(20, 20, 24, 170));
        dl->AddLine(p, q, IM_COL32(230, 60, 60, 255), 2 * sc);
      }
      const bool selected = l == shownLayer && !s.view.headAverage && s.view.head == h;
      ImGui::SetCursorScreenPos(p);
      ImGui::PushID(row * 4096 + h);
      ImGui::InvisibleButton("##mthumb", ImVec2(thumb, thumb));
      const bool hovered = ImGui::IsItemHovered();
      if (ImGui::IsItemClicked()) {
        if (shownLayer != l) layerDirty = true;
        shownLayer = l;
        s.view.head = h;
        s.view.headAverage = false;
        changed = true;
      }
      if (hovered) {
        ImGui::BeginTooltip();
        if (isModel && group > 1)
          ImGui::Text("Layer %d, query head %d (KV head %d)%s", l, h, h / group,
                      ablated ? " (ablated)" : "");
        else if (isModel)
          ImGui::Text("Layer %d, head %d%s", l, h, ablated ? " (ablated)" : "");
        if (isModel && !m.source->model().config().layerWindows.empty())
          ImGui::TextDisabled("%s", m.source->model().config().layerDescription(l).c_str());
        else
          ImGui::Text("Layer %d (%s, %s), head %d: %d \xc3\x97 %d", l,
                      d.source->dump().layers[l].name.c_str(),
                      dumpAxesName(d.source->dump().layers[l].axes), h, w.rows, w.cols);
        ImGui::Image(img.imguiId(), ImVec2(200 * sc * tw / thumb, 200 * sc * th / thumb));
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
  if (group > 1) {
    for (int g = 0; g * group < H; ++g) {
      const float gx = x0 + g * group * pitch;
      dl->AddRect(ImVec2(gx - 2.5f * sc, y0 - 2.5f * sc),
                  ImVec2(gx + group * pitch - gap + 2.5f * sc, y0 + L * pitch - gap + 2.5f * sc),
                  IM_COL32(120, 200, 255, 255), 3 * sc, 0, 1.5f * sc);
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, y0 + L * pitch));
  ImGui::Dummy(ImVec2(labelW + H * pitch, 0));
  ImGui::TextDisabled(isModel ? "rows: layers, columns: heads (the pass's own weights)"
                              : "rows: layers, columns: heads (the recorded weights)");
  if (group > 1)
    ImGui::TextDisabled("outlined: %d query heads that share one K and V head", group);
  return changed;
}

}  // namespace attnviz::gui
