// attnviz GUI: the window's layout: menu bar, controls | stage bar, title and heatmap | heads,
// row inspector and mask matrix, the status bar, and the popups. Side widths are draggable.
#include "gui/app.h"
#include "panels/panels.h"

#include "attnviz/engine/mask.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace attnviz::gui {

PanelVertices g_panelVertices;

namespace {

// The vertices `draw` adds to the current window's draw list.
template <class Draw>
int vertices(Draw draw) {
  const int before = ImGui::GetWindowDrawList()->VtxBuffer.Size;
  draw();
  return ImGui::GetWindowDrawList()->VtxBuffer.Size - before;
}

}  // namespace

void drawLayout(App& app) {
  g_panelVertices = PanelVertices{};
  AppState& s = app.s;
  const float sc = s.ui.uiScale;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(6 * sc, 4 * sc));
  const ImGuiWindowFlags rootFlags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                     ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_MenuBar |
                                     ImGuiWindowFlags_NoBringToFrontOnFocus |
                                     ImGuiWindowFlags_NoBackground;
  ImGui::Begin("attnviz", nullptr, rootFlags);
  ImGui::PopStyleVar();
  drawMenuBar(s);
  if (s.sceneData().title != app.shownTitle) {
    app.shownTitle = s.sceneData().title;
    glfwSetWindowTitle(app.window, ("attnviz \xe2\x80\x94 " + app.shownTitle).c_str());
  }

  const float statusH = ImGui::GetFrameHeight() + 4 * sc;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float bodyH = avail.y - statusH - ImGui::GetStyle().ItemSpacing.y;
  const float autoLeft = std::clamp(avail.x * 0.2f, 250 * sc, 330 * sc);
  const float autoRight = std::clamp(avail.x * 0.22f, 260 * sc, 380 * sc);
  const float leftW = std::round(
      std::clamp(s.ui.leftWidth > 0 ? s.ui.leftWidth * sc : autoLeft, 180 * sc, avail.x * 0.4f));
  const float rightW = std::round(
      std::clamp(s.ui.rightWidth > 0 ? s.ui.rightWidth * sc : autoRight, 180 * sc, avail.x * 0.4f));
  if (s.image.active) {  // an image model: its view in place of the heatmap layout
    ImGui::BeginChild("image-body", ImVec2(avail.x, bodyH), false, ImGuiWindowFlags_NoScrollbar);
    drawImageViewPanel(s);
    ImGui::EndChild();
    ImGui::BeginChild("status", ImVec2(0, statusH), false, ImGuiWindowFlags_NoScrollbar);
    ImGui::SetCursorPosY(ImGui::GetCursorPosY() + 2 * sc);
    drawStatusBar(s);
    ImGui::EndChild();
    drawExportPopup(s);
    drawFileDialogs(s);
    drawOpenModelPopup(s);
    drawErrorPopup(s);
    ImGui::End();
    return;
  }
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  const float centreW = avail.x - leftW - rightW - 2 * gap;
  // A draggable gap between two panels; `width` grows by `sign` times the drag.
  auto splitter = [&](const char* id, float& width, float current, float sign) {
    ImGui::SameLine(0, 0);
    ImGui::InvisibleButton(id, ImVec2(gap, bodyH));
    if (ImGui::IsItemHovered() || ImGui::IsItemActive())
      ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeEW);
    if (ImGui::IsItemActive()) width = (current + sign * ImGui::GetIO().MouseDelta.x) / sc;
    if (ImGui::IsItemHovered() && ImGui::IsMouseDoubleClicked(0)) width = 0;  // back to automatic
    ImGui::SameLine(0, 0);
  };

  // Left: the controls.
  ImGui::BeginChild("controls", ImVec2(leftW, bodyH), true);
  if (s.model.open()) {
    if (ImGui::CollapsingHeader("Model", ImGuiTreeNodeFlags_DefaultOpen)) drawModelPanel(s);
    // An encoder predicts masked tokens, not the next one: no continuation to generate.
    if (s.model.source->model().config().causal) {
      if (ImGui::CollapsingHeader("Generate", ImGuiTreeNodeFlags_DefaultOpen))
        drawGeneratePanel(s);
    } else if (s.model.gen.scripted > 0 || s.model.gen.autoStart) {
      // A scene's "generate" or --generate asked it of an encoder: said once, not left waiting.
      s.model.gen.scripted = 0;
      s.model.gen.autoStart = false;
      reportError(s, "an encoder predicts masked tokens and does not generate; use the Fill panel");
    }
    if (s.model.cacheLoss.scripted) ImGui::SetNextItemOpen(true, ImGuiCond_Always);
    if (ImGui::CollapsingHeader("Loss by token: sinks and windows")) drawCacheLossPanel(s);
    if (s.model.retrieval.scripted) ImGui::SetNextItemOpen(true, ImGuiCond_Always);
    if (ImGui::CollapsingHeader("Retrieval heads: needle in a haystack")) drawRetrievalPanel(s);
  } else if (s.dump.open()) {
    if (s.dump.seq2seq) {
      if (ImGui::CollapsingHeader("Encoder-decoder", ImGuiTreeNodeFlags_DefaultOpen))
        drawSeq2SeqPanel(s);
      if (hasCrossSite(s)) {
        if (s.dump.align.scripted) ImGui::SetNextItemOpen(true, ImGuiCond_Once);
        if (ImGui::CollapsingHeader("Alignment", ImGuiTreeNodeFlags_DefaultOpen))
          drawAlignmentPanel(s);
      }
      if (hasPositionBias(s)) {
        const bool set = s.dump.positionBiasSet;
        if (set) ImGui::SetNextItemOpen(s.dump.positionBiasOpen, ImGuiCond_Always);
        s.dump.positionBiasSet = false;
        s.dump.positionBiasOpen = ImGui::CollapsingHeader("Position bias (T5)");
        if (set && s.dump.positionBiasOpen) ImGui::SetScrollHereY(0.0f);  // a scene opened it
        if (s.dump.positionBiasOpen)
          g_panelVertices.positionBias = vertices([&] { drawPositionBiasPanel(s); });
      }
    } else if (ImGui::CollapsingHeader("Dump", ImGuiTreeNodeFlags_DefaultOpen)) {
      drawDumpPanel(s);
    }
  } else if (ImGui::CollapsingHeader("Scene", ImGuiTreeNodeFlags_DefaultOpen)) {
    drawScenePanel(s);
  }
  if (ImGui::CollapsingHeader("Temperature", ImGuiTreeNodeFlags_DefaultOpen))
    drawTemperaturePanel(s);
  if (ImGui::CollapsingHeader("Mask", ImGuiTreeNodeFlags_DefaultOpen)) drawMaskPanel(s);
  if (ImGui::CollapsingHeader("View", ImGuiTreeNodeFlags_DefaultOpen)) drawViewPanel(s);
  ImGui::Spacing();
  if (ImGui::Button("Export figure\xe2\x80\xa6  (Ctrl+S)", ImVec2(-1, 0)))
    s.exporter.requestOpen = true;
  ImGui::EndChild();

  // Centre: stage bar, title line and the heatmap.
  splitter("##split-left", s.ui.leftWidth, leftW, 1.0f);
  ImGui::BeginChild("centre", ImVec2(centreW, bodyH), true,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  drawStageBar(s);
  {
    const int h = s.view.head;
    const Archetype a = headArchetype(s.sceneData(), h);
    std::string who = s.view.headAverage && s.view.stage == ViewStage::Weights
                          ? "average of " + std::to_string(s.heads()) + " heads"
                          : "head " + std::to_string(h) + " (" + archetypeName(a) + ")";
    if (s.sceneData().qPath.size()) who = "head " + std::to_string(h) + " (from files)";
    if (s.dump.open())
      who = "layer " + std::to_string(s.dump.layer) + " (" +
            s.dump.source->dump().layers[s.dump.layer].name + "), " +
            (s.view.headAverage && s.view.stage == ViewStage::Weights
                 ? "average of " + std::to_string(s.heads()) + " heads"
                 : "head " + std::to_string(h));
    if (s.model.open())
      who = "layer " + std::to_string(s.model.layer) + ", " +
            (s.view.headAverage && s.view.stage == ViewStage::Weights
                 ? "average of " + std::to_string(s.heads()) + " heads"
                 : "head " + std::to_string(h) +
                       (s.model.source->ablated(s.model.layer, h) ? " (ablated)" : ""));
    ImGui::Text("%s  \xc2\xb7  \xcf\x84 = %.3g  \xc2\xb7  mask: %s", who.c_str(),
                s.session.params().temperature, describeMask(s.session.params().mask).c_str());
  }
  drawLessonPanel(s);
  ImGui::Spacing();
  if (s.flash.active)
    drawFlashPanel(s);
  else if (!drawOpenPreviewPanel(s))  // a model's first pass, its layers as they finish
    drawHeatmapPanel(s);
  ImGui::EndChild();

  // Right: heads, the selected row, the mask.
  splitter("##split-right", s.ui.rightWidth, rightW, -1.0f);
  ImGui::BeginChild("side", ImVec2(rightW, bodyH), true);
  if (s.model.open()) {
    if (!s.model.source->model().config().causal) {
      if (ImGui::CollapsingHeader("[MASK] fill", ImGuiTreeNodeFlags_DefaultOpen)) drawFillPanel(s);
    } else if (ImGui::CollapsingHeader("Next token", ImGuiTreeNodeFlags_DefaultOpen)) {
      drawNextTokenPanel(s);
    }
    if (ImGui::CollapsingHeader("Attribution: which heads matter?", ImGuiTreeNodeFlags_DefaultOpen))
      drawAttributionPanel(s);
  }
  if ((s.model.open() || s.dump.open()) &&
      ImGui::CollapsingHeader("Model view: layers \xc3\x97 heads", ImGuiTreeNodeFlags_DefaultOpen))
    drawModelGridPanel(s);
  if (s.model.open() && s.model.source &&
      s.model.source->model().config().positions == PositionKind::Rope &&
      ImGui::CollapsingHeader("RoPE: positions in the shown head", ImGuiTreeNodeFlags_DefaultOpen))
    drawRopePanel(s);
  if (s.model.showResidual) ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (s.model.open() && s.model.source &&
      ImGui::CollapsingHeader("Residual stream: massive activations"))
    g_panelVertices.residual = vertices([&] { drawResidualPanel(s); });
  if (s.model.open() && s.model.source &&
      ImGui::CollapsingHeader("Neuron view: q \xc2\xb7 k by dimension",
                              ImGuiTreeNodeFlags_DefaultOpen))
    drawNeuronPanel(s);
  if (s.model.showWhyHere) ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (s.model.open() && s.model.source &&
      ImGui::CollapsingHeader("Why here? The score by what wrote q and k"))
    drawWhyHerePanel(s);
  if (ImGui::CollapsingHeader(s.model.open() || s.dump.open() ? "Heads of this layer" : "Heads",
                              ImGuiTreeNodeFlags_DefaultOpen))
    drawHeadGridPanel(s);
  if (ImGui::CollapsingHeader("Row inspector", ImGuiTreeNodeFlags_DefaultOpen))
    drawRowInspectorPanel(s);
  if (ImGui::CollapsingHeader("Mask matrix", ImGuiTreeNodeFlags_DefaultOpen))
    drawMaskMatrixPanel(s);
  ImGui::EndChild();

  ImGui::BeginChild("status", ImVec2(0, statusH), false, ImGuiWindowFlags_NoScrollbar);
  ImGui::SetCursorPosY(ImGui::GetCursorPosY() + 2 * sc);
  drawStatusBar(s);
  ImGui::EndChild();

  drawHeadFinderPanel(s);  // its own window, over the layout
  drawExportPopup(s);
  drawFileDialogs(s);
  drawOpenModelPopup(s);
  drawErrorPopup(s);
  ImGui::End();
}

}  // namespace attnviz::gui
