// attnviz panel: the FlashAttention stage. The shown head is computed tile by tile as
// FlashAttention does it (attnviz/flash_walkthrough.h): block sizes, stepping, play, a seek
// slider, the tile picture (drawn by the export rasterizer, so what is exported is what is shown)
// and the running statistics of the current query block's rows.
#include "panels/panels.h"

#include "gui/heatmap_renderer.h"

#include "attnviz/render/flash_figure.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attnviz::gui {

namespace {

// What the stage teaches on: the head's whole [T_q, T_k] logits are kept, so sizes stay modest.
constexpr long long kMaxFlashCells = 2048LL * 2048LL;

const char* kFlashHelp =
    "FlashAttention never builds the whole T_q x T_k matrix. It cuts the queries into blocks of "
    "B_r rows and the keys into blocks of B_c, and streams the key blocks past each query block. "
    "Every row keeps a running max m and a running sum l of exp(L - m): when a new tile raises "
    "the max, the old sum and the partial output are multiplied by exp(m_old - m_new) before the "
    "tile's terms are added (the online softmax). After the last key block, output / l is exactly "
    "the softmax output.\n\n"
    "The picture: visited cells show exp(L - m) / l with the row's running max and sum so far, so "
    "the current block's cells are provisional (they shrink when a later tile raises the max or "
    "adds to the sum) and a finished block shows its final weights. Grey tiles are not visited "
    "yet; crossed tiles are skipped: every cell is masked (causal tiles above the diagonal), so a "
    "kernel does no work there. The current tile is outlined in crimson.\n\n"
    "The table lists the current block's rows; rows whose max changed at this step are "
    "highlighted.";

}  // namespace

void syncFlash(AppState& s) {
  FlashState& f = s.flash;
  const Session::Generations have = s.session.computed();
  const FlashState::Built want{have.inputs, have.params, s.view.head, f.blockRows, f.blockKeys};
  if (f.built == want && (f.walk || !f.error.empty())) {
    if (f.walk && f.walk->step() != f.step - 1) {
      f.walk->seek(f.step - 1);
      f.step = f.walk->step() + 1;
      ++f.walkVersion;
    }
    return;
  }
  f.built = want;
  f.walk.reset();
  f.error.clear();
  ++f.walkVersion;
  const SceneInputs& in = s.session.inputs();
  if (!s.session.ready() || in.q.empty() || in.k.empty() || in.v.empty()) {
    f.error = "FlashAttention needs Q, K and V; this source has none (a dump without q/k/v).";
    return;
  }
  if ((long long)in.q.rows * in.k.rows > kMaxFlashCells) {
    f.error = "The FlashAttention stage steps through up to 2048 x 2048 cells; this input is " +
              std::to_string(in.q.rows) + " x " + std::to_string(in.k.rows) + ".";
    return;
  }
  try {
    const int head = std::clamp(s.view.head, 0, in.q.heads - 1);
    f.walk = std::make_unique<FlashWalkthrough>(in.q, in.k, in.v, head, s.session.params(),
                                                f.blockRows, f.blockKeys);
    f.walk->seek(f.step - 1);
    f.step = f.walk->step() + 1;
  } catch (const std::exception& e) {
    f.walk.reset();
    f.error = e.what();
  }
}

Image flashImage(AppState& s, ExportRequest r) {
  syncFlash(s);
  if (!s.flash.walk) throw InputError("FlashAttention: " + s.flash.error);
  r.stage = ExportStage::Weights;
  const SceneInputs& in = s.session.inputs();
  return renderFlashStep(*s.flash.walk, in.queryTokens, in.keyTokens, s.session.describe(), r);
}

bool drawFlashPanel(AppState& s) {
  FlashState& f = s.flash;
  const float sc = s.ui.uiScale;
  bool changed = false;
  syncFlash(s);
  const int tq = std::max(1, s.tq()), tk = std::max(1, s.tk());

  // Block sizes.
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Blocks");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110 * sc);
  int br = std::min(f.blockRows, tq), bc = std::min(f.blockKeys, tk);
  if (ImGui::SliderInt("B_r (query rows)", &br, 1, tq)) f.blockRows = br, changed = true;
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110 * sc);
  if (ImGui::SliderInt("B_c (keys)", &bc, 1, tk)) f.blockKeys = bc, changed = true;
  ImGui::SameLine();
  helpMarker(kFlashHelp);
  if (changed) syncFlash(s);

  if (!f.walk) {
    ImGui::TextColored(ImVec4(1.0f, 0.62f, 0.45f, 1.0f), "%s", f.error.c_str());
    return changed;
  }
  FlashWalkthrough& w = *f.walk;
  const int n = w.steps();

  // Stepping: reset, back, play/pause, forward, speed; then the seek slider.
  int want = f.step;
  if (ImGui::Button("Reset")) want = 0, f.playing = false;
  ImGui::SameLine();
  if (ImGui::Button("< Back")) want = f.step - 1, f.playing = false;
  ImGui::SameLine();
  const auto togglePlay = [&] {
    f.playing = !f.playing;
    if (f.playing && f.step >= n) want = 0;  // play again from the start
    f.lastAdvance = nowSeconds();
  };
  if (ImGui::Button(f.playing ? "Pause" : "Play", ImVec2(60 * sc, 0))) togglePlay();
  ImGui::SameLine();
  if (ImGui::Button("Forward >")) want = f.step + 1, f.playing = false;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("also the right arrow key (left: back, space: play)");
  if (ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows) &&
      !ImGui::GetIO().WantTextInput) {
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow)))
      want = f.step + 1, f.playing = false;
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow)))
      want = f.step - 1, f.playing = false;
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space), false)) togglePlay();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120 * sc);
  ImGui::SliderFloat("steps/s", &f.speed, 0.5f, 20.0f, "%.1f", ImGuiSliderFlags_Logarithmic);
  if (f.playing && nowSeconds() - f.lastAdvance >= 1.0 / std::max(0.1f, f.speed)) {
    want = f.step + 1;
    f.lastAdvance = nowSeconds();
    if (want >= n) f.playing = false;
  }
  ImGui::SetNextItemWidth(-1);
  int seek = f.step;
  if (ImGui::SliderInt("##step", &seek, 0, n, seek == 0 ? "before the first step" : "step %d"))
    want = seek;
  want = std::clamp(want, 0, n);
  if (want != f.step) {
    f.step = want;
    syncFlash(s);
    changed = true;
  }

  // Where the schedule stands.
  const FlashWalkthrough::Tile t = w.current();
  if (w.step() < 0) {
    ImGui::Text("step 0 of %d: nothing computed yet  \xc2\xb7  %d x %d tiles, %d of them skipped",
                n, w.queryBlocks(), w.keyBlocks(), w.skippedSteps());
  } else {
    ImGui::Text(
        "step %d of %d  \xc2\xb7  query block %d (rows %d-%d)  \xc2\xb7  key block %d "
        "(keys %d-%d)  \xc2\xb7  skipped: %s",
        w.step() + 1, n, t.queryBlock, t.i0, t.i1 - 1, t.keyBlock, t.j0, t.j1 - 1,
        t.skipped ? "yes (every cell masked)" : "no");
  }
  if (w.done())
    ImGui::TextColored(ImVec4(0.55f, 0.9f, 0.55f, 1.0f),
                       "done: max |O_flash - O_materialised| = %.3g  \xc2\xb7  max |A_flash - A| = "
                       "%.3g",
                       double(w.maxOutputDifference()), double(w.maxWeightDifference()));

  // The picture: the export rasterizer's figure of this step, 1:1 on screen, redrawn only when
  // the step, the walkthrough, the width or the colormap changes.
  const int rowsShown = w.step() < 0 ? 0 : t.i1 - t.i0;
  // The table gets its rows, or at least 5 of them (it scrolls) when the picture needs the room.
  const float line = ImGui::GetTextLineHeight() + ImGui::GetStyle().CellPadding.y * 2 + 1;
  const float tableH =
      rowsShown == 0 ? 0.0f
                     : std::min(line * float(rowsShown + 1) + 4,
                                std::max(line * 6.5f, ImGui::GetContentRegionAvail().y * 0.3f));
  const float availW = std::max(200.0f, ImGui::GetContentRegionAvail().x);
  const float availH = std::max(
      120.0f, ImGui::GetContentRegionAvail().y - tableH - ImGui::GetStyle().ItemSpacing.y * 2);
  f.figureWant = {f.walkVersion, int(availW), int(availH), s.view.weightColormap};
  RgbaImage& tex = s.renderer->image("flash");
  if (!(f.figureWant == f.figureFor) || !tex.tex.id()) {
    try {
      ExportRequest r;
      r.colormap = s.view.weightColormap;
      r.targetWidth = int(availW);
      Image img = flashImage(s, r);
      if (img.height > availH) {  // too tall: narrower, so the table keeps its room
        r.targetWidth = std::max(200, int(availW * availH / float(img.height)));
        img = flashImage(s, r);
      }
      tex.set(img.rgba, img.width, img.height);
      f.heatX = img.heatX, f.heatY = img.heatY, f.cellPx = img.cellPx;
      f.imageW = img.width, f.imageH = img.height;
      f.figureFor = f.figureWant;
    } catch (const std::exception& e) {
      f.error = e.what();
      f.figureFor = f.figureWant;
    }
  }
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Image(tex.imguiId(), ImVec2(float(f.imageW), float(f.imageH)));
  auto& g = s.view.geometry;  // where the cells are, for scripted input and tests
  g.valid = f.cellPx > 0;
  g.x0 = origin.x + f.heatX, g.y0 = origin.y + f.heatY;
  g.w = float(f.cellPx * tk), g.h = float(f.cellPx * tq), g.cellPx = float(f.cellPx);
  s.view.panX = s.view.panY = 0;
  if (ImGui::IsItemHovered() && f.cellPx > 0) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int j = int(std::floor((m.x - g.x0) / f.cellPx)),
              i = int(std::floor((m.y - g.y0) / f.cellPx));
    if (i >= 0 && i < tq && j >= 0 && j < tk) {
      const float L = w.logits()(i, j);
      const bool seen = w.visited(i / w.blockRows(), j / w.blockKeys());
      const auto& toks = s.session.inputs();
      ImGui::BeginTooltip();
      ImGui::Text("query %d '%s'  \xc2\xb7  key %d '%s'", i,
                  i < int(toks.queryTokens.size()) ? toks.queryTokens[i].c_str() : "", j,
                  j < int(toks.keyTokens.size()) ? toks.keyTokens[j].c_str() : "");
      if (std::isinf(L) && L < 0)
        ImGui::TextUnformatted("masked: exp(-inf) = 0, never added");
      else if (!seen)
        ImGui::Text("logit %.4g  \xc2\xb7  not visited yet", double(L));
      else
        ImGui::Text("logit %.4g  \xc2\xb7  exp(L - m)/l so far %.4g  \xc2\xb7  final weight %.4g",
                    double(L), double(w.provisionalWeight(i, j)),
                    double(w.referenceWeights()(i, j)));
      ImGui::EndTooltip();
    }
  }

  // The current block's rows: running max, rescale, running sum and the partial output.
  if (rowsShown > 0) {
    const int dv = int(w.rows()[0].partial.size()), shownDims = std::min(dv, 3);
    const int cols = 7 + shownDims;
    const ImGuiTableFlags tf = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                               ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("flash-rows", cols, tf, ImVec2(0, std::max(tableH, 60.0f)))) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("row (query)");
      ImGui::TableSetupColumn("m_old");
      ImGui::TableSetupColumn("m_new");
      ImGui::TableSetupColumn("exp(m_old - m_new)");
      ImGui::TableSetupColumn("l_old");
      ImGui::TableSetupColumn("l_new");
      char name[32];
      for (int x = 0; x < shownDims; ++x) {
        std::snprintf(name, sizeof name, "o[%d]", x);
        ImGui::TableSetupColumn(name);
      }
      ImGui::TableSetupColumn(dv > shownDims ? "|o| (all dims)" : "|o|");
      ImGui::TableHeadersRow();
      const auto num = [](float v) {
        if (std::isinf(v))
          ImGui::TextUnformatted(v < 0 ? "-inf" : "inf");
        else
          ImGui::Text("%.4f", double(v));
      };
      for (int r = 0; r < rowsShown; ++r) {
        const FlashWalkthrough::Row& row = w.rows()[r];
        ImGui::TableNextRow();
        const bool moved = !t.skipped && row.m != row.mOld;
        if (moved)
          ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1,
                                 ImGui::GetColorU32(ImVec4(0.55f, 0.38f, 0.05f, 0.65f)));
        ImGui::TableNextColumn();
        const auto& qt = s.session.inputs().queryTokens;
        const int i = t.i0 + r;
        ImGui::Text("%d %s%s", i, i < int(qt.size()) ? qt[i].c_str() : "",
                    moved ? "  (max moved)" : "");
        ImGui::TableNextColumn();
        num(row.mOld);
        ImGui::TableNextColumn();
        num(row.m);
        ImGui::TableNextColumn();
        num(row.rescale);
        ImGui::TableNextColumn();
        num(row.lOld);
        ImGui::TableNextColumn();
        num(row.l);
        double norm = 0;
        for (float v : row.partial) norm += double(v) * v;
        for (int x = 0; x < shownDims; ++x) {
          ImGui::TableNextColumn();
          num(row.partial[std::size_t(x)]);
        }
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", std::sqrt(norm));
      }
      ImGui::EndTable();
    }
  }
  return changed;
}

}  // namespace attnviz::gui
