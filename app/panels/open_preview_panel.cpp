// attnviz panel: a model's first pass as it runs. While a model opens, each layer is drawn as
// the pass finishes it (OpenPreview, filled by the opening worker): the shown layer's head as a
// heatmap, and the layers x heads grid with the layers still to come drawn as pending. A click
// on a finished layer's thumbnail shows that layer and head (in full once the pass is done).
// The full view (the heatmap panel, the Model view) takes over when the pass is adopted.
#include "gui/heatmap_renderer.h"
#include "panels/panels.h"

#include "attnviz/session/model_grid.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>

namespace attnviz::gui {

namespace {

double msSince(OpenPreview::Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(OpenPreview::Clock::now() - t0).count();
}

}  // namespace

bool drawOpenPreviewPanel(AppState& s) {
  ModelState& m = s.model;
  // A cancelled open, or one dropped for something opened since, shows nothing of its pass.
  if (!m.loading.valid() || !m.progress || m.loadingDropped || m.progress->pass.cancel.load())
    return false;
  OpenPreview& p = m.progress->preview;
  std::lock_guard<std::mutex> lock(p.m);
  if (p.layersDone == 0 || p.layers == 0) return false;
  const float sc = s.ui.uiScale;
  const int L = p.layers, H = p.heads;
  const ColormapId cm = s.view.weightColormap;
  ImGui::Text("Opening %s: %d of %d layers done",
              std::filesystem::path(m.loadingDir).filename().string().c_str(), p.layersDone, L);
  ImGui::TextDisabled(
      "Each layer is drawn as the pass finishes it; the full view opens when the pass is done.");
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // The grid below the heatmap: thumbnails as wide as the panel allows, at most 32 pixels.
  const float labelW = ImGui::CalcTextSize("L00").x + 4 * sc;
  const float gap = std::max(1.0f, sc);
  const float thumb =
      std::clamp(std::floor((avail.x - labelW - gap * (H - 1)) / std::max(1, H)), 3.0f, 32 * sc);
  const float pitch = thumb + gap;
  const float gridH = L * pitch + ImGui::GetTextLineHeightWithSpacing() * 2;
  const float side = std::floor(std::max(64 * sc, std::min(avail.x - labelW, avail.y - gridH)));
  ImDrawList* dl = ImGui::GetWindowDrawList();

  // The heatmap: the shown head of the shown layer, in full as the pass computed it; a finished
  // layer asked for later, its thumbnail (max-pooled); a layer still to come, pending.
  const int wl = p.wantLayer, wh = p.wantHead;
  const bool exact = p.shownLayer == wl && p.shownHead == wh && !p.shown.empty();
  const bool pooled = !exact && !p.thumbs[std::size_t(wl)].empty();
  std::string caption = "Layer " + std::to_string(wl) + ", head " + std::to_string(wh);
  if (exact)
    caption += " (" + std::to_string(p.shown.rows) + " \xc3\x97 " + std::to_string(p.shown.cols) +
               (p.shown.rows < p.tokens ? ", max-pooled" : "") + ")";
  else if (pooled)
    caption += ": max-pooled; in full when the pass is done";
  else
    caption += ": pending";
  ImGui::TextUnformatted(caption.c_str());
  const ImVec2 h0 = ImGui::GetCursorScreenPos();
  const ImVec2 h1(h0.x + side, h0.y + side);
  if (exact || pooled) {
    RgbaImage& img = s.renderer->image("open-preview");
    const std::uint64_t ver =
        (exact ? p.shownVersion * 2 : p.version * 2 + 1) * 64 + std::uint64_t(wh % 4) * 16 +
        std::uint64_t(cm);
    if (img.version != ver) {
      std::vector<std::uint8_t> px;
      int iw = 0, ih = 0;
      if (exact)
        maxPoolThumbnail(p.shown, 0, std::max(p.shown.rows, p.shown.cols), cm, px, iw, ih);
      else
        maxPoolThumbnail(p.thumbs[std::size_t(wl)], wh, kModelGridThumbnail, cm, px, iw, ih);
      img.set(px, iw, ih);
      img.version = ver;
    }
    dl->AddImage(img.imguiId(), h0, h1);
    if (exact && p.firstHeatmapMs < 0) {  // for --report-timing
      p.firstHeatmapMs = msSince(p.start);
      p.heatmapLayer = wl, p.heatmapHead = wh;
      p.layersAtFirstHeatmap = p.layersDone;
      p.firstHeatmap = p.shown;
    }
  } else {
    dl->AddRectFilled(h0, h1, IM_COL32(40, 40, 46, 255));
    dl->AddText(ImVec2(h0.x + 8 * sc, h0.y + 8 * sc), IM_COL32(170, 170, 180, 255),
                "computing this layer...");
  }
  ImGui::Dummy(ImVec2(side, side + 4 * sc));

  // The layers x heads grid: a row per layer, pending rows grey.
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float x0 = origin.x + labelW, y0 = origin.y;
  for (int l = 0; l < L; ++l) {
    const float ry = y0 + l * pitch;
    const bool done = !p.thumbs[std::size_t(l)].empty();
    dl->AddText(ImVec2(origin.x, ry + (thumb - ImGui::GetFontSize()) * 0.5f),
                l == wl ? IM_COL32(255, 170, 30, 255) : IM_COL32(150, 150, 160, 255),
                ("L" + std::to_string(l)).c_str());
    for (int h = 0; h < H; ++h) {
      const ImVec2 a(x0 + h * pitch, ry), b(a.x + thumb, a.y + thumb);
      if (!done) {
        dl->AddRectFilled(a, b, IM_COL32(52, 52, 58, 255));
        continue;
      }
      RgbaImage& img = s.renderer->image("open-preview-" + std::to_string(l) + "-" + std::to_string(h));
      const std::uint64_t ver =
          (std::uint64_t(p.layerDoneMs[std::size_t(l)] * 1e3) * 64 + std::uint64_t(thumb) % 64) * 16 +
          std::uint64_t(cm);
      if (img.version != ver) {
        std::vector<std::uint8_t> px;
        int iw = 0, ih = 0;
        maxPoolThumbnail(p.thumbs[std::size_t(l)], h, std::max(8, int(thumb)), cm, px, iw, ih);
        img.set(px, iw, ih);
        img.version = ver;
      }
      dl->AddImage(img.imguiId(), a, b);
      ImGui::SetCursorScreenPos(a);
      ImGui::PushID(l * 4096 + h);
      ImGui::InvisibleButton("##previewthumb", ImVec2(thumb, thumb));
      if (ImGui::IsItemClicked()) p.wantLayer = l, p.wantHead = h;
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("Layer %d, head %d: click to show it", l, h);
      ImGui::PopID();
      if (l == wl && h == wh)
        dl->AddRect(ImVec2(a.x - 1.5f, a.y - 1.5f), ImVec2(b.x + 1.5f, b.y + 1.5f),
                    IM_COL32(255, 170, 30, 255), 0, 0, 1.0f);
    }
  }
  if (p.layersDone == L && p.wholeGridMs < 0) p.wholeGridMs = msSince(p.start);
  ImGui::SetCursorScreenPos(ImVec2(origin.x, y0 + L * pitch));
  ImGui::Dummy(ImVec2(labelW + H * pitch, 0));
  ImGui::TextDisabled("rows: layers, columns: heads; grey: still to come");
  return true;
}

}  // namespace attnviz::gui
