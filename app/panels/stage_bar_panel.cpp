// attnviz panel: which stage of the computation the heatmap shows, QKᵀ through A·V.
#include "panels/panels.h"

#include <imgui.h>

#include <string>

namespace attnviz::gui {

bool drawStageBar(AppState& s) {
  bool changed = false;
  const bool pooled = s.session.pooledMode();
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Stage");
  for (int k = 0; k < kStageCount; ++k) {
    const ViewStage st = ViewStage(k);
    // The softcap is a stage of its own while one is set (Gemma 2).
    if (st == ViewStage::Capped && !(s.sceneData().params.mask.softcap > 0.0f)) continue;
    if (stageFromSource(st)) continue;  // a model's own stages: after the pipeline, below
    ImGui::SameLine();
    if (k > 0) {
      ImGui::TextDisabled("\xe2\x86\x92");
      ImGui::SameLine();
    }
    const bool on = s.view.stage == st && !s.flash.active;
    // Pooled mode has only the weights: the other stages would need the whole matrix.
    const bool off = pooled && st != ViewStage::Weights;
    if (on) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
    if (off) ImGui::BeginDisabled();
    if (ImGui::Button(stageLabel(st))) {
      s.view.stage = st;
      s.flash.active = false;
      changed = true;
    }
    if (off) ImGui::EndDisabled();
    if (on) ImGui::PopStyleColor();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("%s%s", stageFormula(st),
                        off ? "\n(not at this length: only the pooled weights are streamed)" : "");
  }
  if (pooled) {
    ImGui::SameLine();
    ImGui::TextDisabled("|");
    ImGui::SameLine();
    changed |= ImGui::Checkbox("mean-pooled", &s.view.pooledMean);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "Each pixel covers a block of cells. Max-pooled (the default) shows the block's largest "
          "weight, so a single strong key is never averaged away; mean-pooled shows the block's "
          "average (masked cells count 0), on a range up to the largest mean.");
    // One line, as the formula it replaces, so the heatmap keeps its place.
    ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1.0f),
                       "Pooled view (%d \xc3\x97 %d a head): weights streamed and %s-pooled, "
                       "other stages off",
                       s.tq(), s.tk(), s.view.pooledMean ? "mean" : "max");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "The %d \xc3\x97 %d weights of a head are never held whole (above 4096 \xc3\x97 4096 "
          "cells,\nor --pooled on). They are streamed tile by tile and pooled to the screen; "
          "zooming in\nrefines the view, down to one token a cell. Scores, output, the head "
          "average and\nthe wrong axis would need the whole matrix, so they are off.",
          s.tq(), s.tk());
    return changed;
  }
  // A model's own views of the shown head and layer (attribution.h): how much each key moves,
  // and how attention composes through the layers below.
  if (s.model.source && s.model.source->ready()) {
    ImGui::SameLine();
    ImGui::TextDisabled("|");
    static const std::string kRolloutLimitNote =
        "\n(rollout is computed for texts up to " +
        std::to_string(ModelSource::kRolloutMaxTokens) + " tokens)";
    for (const ViewStage st : {ViewStage::ValueWeighted, ViewStage::Rollout}) {
      ImGui::SameLine();
      const bool on = s.view.stage == st && !s.flash.active;
      const bool tooLong =
          st == ViewStage::Rollout && s.tq() > ModelSource::kRolloutMaxTokens;
      const bool off = tooLong || s.session.pooledMode();  // otherwise computed once shown
      if (on)
        ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
      if (off) ImGui::BeginDisabled();
      if (ImGui::Button(stageLabel(st))) {
        s.view.stage = st;
        s.view.wrongAxis = s.view.headAverage = false;
        s.flash.active = false;
        changed = true;
      }
      if (off) ImGui::EndDisabled();
      if (on) ImGui::PopStyleColor();
      if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip(
            "%s%s", stageFormula(st),
            tooLong ? kRolloutLimitNote.c_str()
            : st == ViewStage::ValueWeighted
                ? "\nA head can look hard at a token and move almost nothing: this shows "
                  "what it moves."
                : "\nHow much each token's information reaches row i through every layer "
                  "up to this one, residual included.");
    }
  }
  // The same softmax computed tile by tile (flash_panel.cpp), after the stages it replays.
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
  const bool flashOn = s.flash.active;
  if (flashOn)
    ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
  if (ImGui::Button("FlashAttention")) {
    s.flash.active = true;
    s.view.stage = ViewStage::Weights;
    changed = true;
  }
  if (flashOn) ImGui::PopStyleColor();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "the weights computed tile by tile with the online softmax, never the whole "
        "matrix at once");
  if (s.flash.active)
    ImGui::TextDisabled(
        "O_i = \xce\xa3_j exp(L_ij - m_i) v_j / l_i, m_i and l_i kept running over "
        "the key blocks");
  else if (s.view.wrongAxis && s.view.stage == ViewStage::Weights)
    ImGui::TextColored(
        ImVec4(1.0f, 0.62f, 0.45f, 1.0f),
        "WRONG AXIS (teaching): column j = softmax over the queries i, so rows no longer sum to 1");
  else
    ImGui::TextDisabled("%s", stageFormula(s.view.stage));
  return changed;
}

}  // namespace attnviz::gui
