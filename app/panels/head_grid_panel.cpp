// attnviz panel: every head as a thumbnail (hover for a larger preview, click to select) and
// the average over heads. Thumbnails max-pool like the heatmap, so strong keys stay visible.
#include "gui/heatmap_renderer.h"
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace attnviz::gui {

namespace {

// Max-pools the weights of `heads` (averaged when several) into at most maxSide pixels a side.
void thumbnailPixels(const AppState& s, const std::vector<int>& heads, int maxSide,
                     std::vector<std::uint8_t>& rgba, int& w, int& h) {
  const AttentionResult& r = s.session.result();
  const int Tq = s.tq(), Tk = s.tk();
  const int step = std::max(1, int(std::ceil(std::max(Tq, Tk) / double(maxSide))));
  w = (Tk + step - 1) / step;
  h = (Tq + step - 1) / step;
  rgba.assign(std::size_t(w) * h * 4, 255);
  const ColormapId cm = s.view.weightColormap;
  const float inv = 1.0f / float(heads.size());
  for (int by = 0; by < h; ++by)
    for (int bx = 0; bx < w; ++bx) {
      float m = 0.0f;
      const int i1 = std::min(Tq, (by + 1) * step), j1 = std::min(Tk, (bx + 1) * step);
      for (int i = by * step; i < i1; ++i)
        for (int j = bx * step; j < j1; ++j) {
          float sum = 0.0f;
          for (int hh : heads) sum += r.weights.at(hh, i, j);
          m = std::max(m, sum * inv);
        }
      RGBA8 c;
      const int ci = std::min(Tq - 1, by * step + step / 2),
                cj = std::min(Tk - 1, bx * step + step / 2);
      if (m == 0.0f && !maskAllowed(s.session.params().mask, heads[0], ci, cj, Tq, Tk))
        c = kMaskedColor;
      else
        c = colormapLookup(cm, m);
      std::uint8_t* px = &rgba[(std::size_t(by) * w + bx) * 4];
      px[0] = c.r, px[1] = c.g, px[2] = c.b, px[3] = 255;
    }
}

// The matrix on screen (-inf: masked), max-pooled as above.
void displayThumbnailPixels(const AppState& s, int maxSide, std::vector<std::uint8_t>& rgba,
                            int& w, int& h) {
  const DisplayMatrix& d = s.display();
  const int Tq = d.rows, Tk = d.cols;
  const int step = std::max(1, int(std::ceil(std::max(Tq, Tk) / double(maxSide))));
  w = (Tk + step - 1) / step;
  h = (Tq + step - 1) / step;
  rgba.assign(std::size_t(w) * h * 4, 255);
  for (int by = 0; by < h; ++by)
    for (int bx = 0; bx < w; ++bx) {
      float m = 0.0f;
      bool allowed = false;
      for (int i = by * step; i < std::min(Tq, (by + 1) * step); ++i)
        for (int j = bx * step; j < std::min(Tk, (bx + 1) * step); ++j) {
          const float v = d.values[std::size_t(i) * Tk + j];
          if (v == -std::numeric_limits<float>::infinity()) continue;
          allowed = true;
          m = std::max(m, v);
        }
      const RGBA8 c = allowed ? colormapLookup(s.view.weightColormap, m) : kMaskedColor;
      std::uint8_t* px = &rgba[(std::size_t(by) * w + bx) * 4];
      px[0] = c.r, px[1] = c.g, px[2] = c.b, px[3] = 255;
    }
}

// Many heads over the memory budget (Session::headsStreamed): head h's weights come max-pooled
// from the session at thumbnailPool() cells a pixel; the thumbnail pools them further, at a
// multiple of that pool, so every pixel is the max over its cells as above.
void streamedThumbnailPixels(const AppState& s, int head, int maxSide,
                             std::vector<std::uint8_t>& rgba, int& w, int& h) {
  const std::shared_ptr<const PooledWeights> t = s.session.headThumbnail(head);
  const int Tq = s.tq(), Tk = s.tk(), pool = s.session.thumbnailPool();
  const int want = std::max(1, int(std::ceil(std::max(Tq, Tk) / double(maxSide))));
  const int f = std::max(1, (want + pool - 1) / pool);  // thumbnail pixels per pooled pixel
  const int step = f * pool;
  w = (Tk + step - 1) / step;
  h = (Tq + step - 1) / step;
  rgba.assign(std::size_t(w) * h * 4, 255);
  const ColormapId cm = s.view.weightColormap;
  for (int by = 0; by < h; ++by)
    for (int bx = 0; bx < w; ++bx) {
      float m = 0.0f;
      if (t)
        for (int y = by * f; y < std::min(t->height, (by + 1) * f); ++y)
          for (int x = bx * f; x < std::min(t->width, (bx + 1) * f); ++x)
            m = std::max(m, t->max[t->at(y, x)]);
      RGBA8 c;
      const int ci = std::min(Tq - 1, by * step + step / 2),
                cj = std::min(Tk - 1, bx * step + step / 2);
      if (m == 0.0f && !maskAllowed(s.session.params().mask, head, ci, cj, Tq, Tk))
        c = kMaskedColor;
      else
        c = colormapLookup(cm, m);
      std::uint8_t* px = &rgba[(std::size_t(by) * w + bx) * 4];
      px[0] = c.r, px[1] = c.g, px[2] = c.b, px[3] = 255;
    }
}

}  // namespace

bool drawHeadGridPanel(AppState& s) {
  bool changed = false;
  const int H = s.heads();
  if (s.session.pooledMode()) {
    ImGui::TextWrapped(
        "No thumbnails at this length (each head would be streamed in full). Head %d of %d is "
        "shown: \xe2\x86\x90 \xe2\x86\x92 over the heatmap picks another.",
        s.view.head, H);
    return false;
  }
  if (H <= 0 || s.tq() == 0 || s.tk() == 0 || !s.session.hasResult()) return false;
  const float sc = s.ui.uiScale;
  const float availW = ImGui::GetContentRegionAvail().x;
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  const int perRow = std::clamp(int((availW + spacing) / (72 * sc + spacing)), 1, 8);
  const float side = std::floor((availW - spacing * (perRow - 1)) / perRow);
  const int maxSide = std::max(16, int(side));
  const float aspect = float(s.tq()) / float(s.tk());
  const float tileH = std::max(8.0f, std::min(side, side * aspect));
  const std::uint64_t cmKey = std::uint64_t(s.view.weightColormap) + (s.view.autoRange ? 8 : 0);

  const bool streamed = s.session.headsStreamed();
  bool allFresh = true;
  for (int h = 0; h <= H; ++h) {
    const bool average = h == H;
    if (average && !allFresh) break;
    // Streamed heads: the average is computed only when shown (every head runs once for it).
    const bool averageShown = s.session.view().headAverage && s.display().isWeights &&
                              !s.display().pooled && !s.display().values.empty();
    ImGui::PushID(h);
    if (h % perRow != 0) ImGui::SameLine();
    ImGui::BeginGroup();
    RgbaImage& img = s.renderer->image(average ? "thumb-avg" : "thumb-" + std::to_string(h));
    const bool fresh = average ? (!streamed || averageShown) : s.session.headFresh(h);
    allFresh &= fresh;
    std::uint64_t ver = 0;
    if (average && streamed)
      ver = s.display().version;
    else if (average)
      for (int k = 0; k < H; ++k) ver = ver * 31 + s.session.headVersion(k);
    else
      ver = s.session.headVersion(h);
    ver = ver * 16 + cmKey;
    // While a slider is moving (a softmax ran this frame) thumbnails wait for a quiet frame.
    if (fresh && img.version != ver && (!s.computedThisFrame || !img.tex.id())) {
      std::vector<std::uint8_t> px;
      int w = 0, hh = 0;
      std::vector<int> heads;
      if (average)
        for (int k = 0; k < H; ++k) heads.push_back(k);
      else
        heads.push_back(h);
      if (streamed && !average)
        streamedThumbnailPixels(s, h, maxSide, px, w, hh);
      else if (streamed)  // the head average on screen: pool the shown matrix
        displayThumbnailPixels(s, maxSide, px, w, hh);
      else
        thumbnailPixels(s, heads, maxSide, px, w, hh);
      img.set(px, w, hh);
      img.version = ver;
    }
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const ImVec2 size(side, tileH);
    if (img.tex.id())
      ImGui::GetWindowDrawList()->AddImage(img.imguiId(), p, ImVec2(p.x + side, p.y + tileH));
    if (!fresh)
      ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + side, p.y + tileH),
                                                IM_COL32(20, 20, 24, 150));
    ImGui::InvisibleButton("##thumb", size);
    const bool selected = average ? s.view.headAverage : (!s.view.headAverage && s.view.head == h);
    const ImU32 border = selected ? IM_COL32(255, 170, 30, 255)
                                  : (ImGui::IsItemHovered() ? IM_COL32(220, 220, 230, 255)
                                                            : IM_COL32(70, 72, 80, 255));
    ImGui::GetWindowDrawList()->AddRect(ImVec2(p.x - 1, p.y - 1),
                                        ImVec2(p.x + side + 1, p.y + tileH + 1), border, 0, 0,
                                        selected ? 2.0f : 1.0f);
    if (ImGui::IsItemClicked()) {
      if (average) {
        s.view.headAverage = true;
      } else {
        s.view.headAverage = false;
        s.view.head = h;
      }
      changed = true;
    }
    const Archetype a = average ? Archetype::Random : headArchetype(s.sceneData(), h);
    const bool fromFiles = !s.sceneData().qPath.empty() || s.model.open() || s.dump.open();
    const std::string name = average     ? "average"
                             : fromFiles ? (s.model.open() || s.dump.open() ? "" : "(file)")
                                         : std::string(archetypeName(a));
    if (ImGui::IsItemHovered() && average && streamed && !img.tex.id()) {
      ImGui::SetTooltip("Average of all %d heads: click to compute it (each head runs once)", H);
    } else if (ImGui::IsItemHovered() && img.tex.id()) {
      ImGui::BeginTooltip();
      if (average)
        ImGui::Text("Average of all %d heads", H);
      else
        ImGui::Text("Head %d: %s%s", h, name.c_str(), fresh ? "" : " (updating)");
      const float big = 240 * sc;
      ImGui::Image(img.imguiId(), ImVec2(big, std::max(8.0f, big * std::min(1.0f, aspect))));
      ImGui::TextDisabled(average && streamed && !fresh
                              ? "click to compute it (each head runs once) and show it"
                              : "click to show it in the heatmap");
      ImGui::EndTooltip();
    }
    std::string label = average ? "avg" : std::to_string(h) + " " + name;
    while (label.size() > 3 && ImGui::CalcTextSize(label.c_str()).x > side) label.pop_back();
    ImGui::TextDisabled("%s", label.c_str());
    ImGui::EndGroup();
    ImGui::PopID();
  }
  return changed;
}

}  // namespace attnviz::gui
