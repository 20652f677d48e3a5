// attnviz panel: the model's controls: the text (editing it re-runs the pass after a short
// pause), the layer, and interventions inside the pass (ablate the shown head, the session's
// mask and τ in this layer or in every layer). Also File > Open model's folder prompt.
#include "panels/panels.h"

#include <imgui.h>
#include <imgui_internal.h>  // OpenPopupEx: --popup slice opens the combo

#include <algorithm>
#include <filesystem>
#include <string>

namespace attnviz::gui {

namespace {

constexpr ImU32 kColourA = IM_COL32(110, 170, 255, 255);
constexpr ImU32 kColourB = IM_COL32(255, 160, 80, 255);
constexpr ImU32 kColourSpecial = IM_COL32(120, 120, 120, 255);

// What an encoder adds to the facts: bidirectional attention, the window of each layer
// (ModernBERT: local and global), the vocabulary's kind, a sentence-transformers pooling.
bool encoderFacts(AppState& s) {
  const Model& model = s.model.source->model();
  ImGui::TextDisabled("encoder \xc2\xb7 bidirectional: every token attends to every other "
                      "(no causal mask)");
  if (!s.model.facts) s.model.facts = std::make_shared<const EncoderFacts>(encoderFacts(model));
  const EncoderFacts& f = *s.model.facts;
  auto list = [](const std::vector<int>& v) {
    std::string out;
    for (int l : v) out += (out.empty() ? "" : ",") + std::to_string(l);
    return out.empty() ? std::string("none") : out;
  };
  if (!f.localLayers.empty())
    ImGui::TextDisabled("attention window: local %d (\xc2\xb1%d) in layers %s \xc2\xb7 global in %s",
                        f.window, f.window / 2, list(f.localLayers).c_str(),
                        list(f.globalLayers).c_str());
  else
    ImGui::TextDisabled("attention window: global in every layer");
  ImGui::TextDisabled("vocabulary: %s (%d tokens)", f.vocabulary.c_str(), model.tokenizer().size());
  if (!f.pooling.empty()) ImGui::TextDisabled("sentence-transformers pooling: %s", f.pooling.c_str());
  if (!model.headMissing().empty())
    ImGui::TextDisabled("no masked-LM head (missing '%s'): nothing to fill",
                        model.headMissing().c_str());
  return false;
}

// The chat format: the text as the user's turn in the model's own chat template, as an instruct
// model sees a prompt. Disabled (with the reason) when the model has no template attnviz renders.
bool chatControls(AppState& s) {
  ModelState& m = s.model;
  bool changed = false;
  const bool can = !m.chatFormat.empty();
  if (!can) ImGui::BeginDisabled();
  if (ImGui::Checkbox("Chat format", &m.chat)) {
    m.textEditedAt = nowSeconds();
    changed = true;
  }
  if (!can) ImGui::EndDisabled();
  ImGui::SameLine();
  if (can)
    helpMarker(("The text as a user turn in the model's chat template (" + m.chatFormat +
                "), ending with the assistant's opening: the prompt an instruct model really "
                "sees, its special tokens included. A system turn is added when the field "
                "below is not empty.").c_str());
  else
    helpMarker(("No chat format: " + m.chatWhyNot).c_str());
  if (m.chat) {
    ImGui::SetNextItemWidth(-1);
    if (ImGui::InputTextWithHint("##modelsystem", "system turn (empty: none)", m.system,
                                 sizeof m.system)) {
      m.textEditedAt = nowSeconds();
      changed = true;
    }
  }
  return changed;
}

// Sentence B, the block shown and the special tokens.
bool pairControls(AppState& s) {
  ModelState& m = s.model;
  bool changed = false;
  ImGui::TextColored(ImColor(kColourB), "Sentence B");
  ImGui::SameLine();
  helpMarker("A second text: the tokenizer's pair template ([CLS] A [SEP] B [SEP] with token "
             "types 0 and 1; RoBERTa's <s> A </s></s> B </s>). Empty: one text. The axes colour "
             "A's tokens blue and B's orange.");
  if (ImGui::InputTextMultiline("##modeltextpair", m.textPair, sizeof m.textPair,
                                ImVec2(-1, ImGui::GetTextLineHeight() * 3))) {
    m.textEditedAt = nowSeconds();
    changed = true;
  }
  const bool pair = m.source->segments().pair;
  if (!pair) ImGui::BeginDisabled();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  if (m.openSliceMenu && pair) {  // the id Dear ImGui (1.85 on) gives a combo's popup
    ImGui::OpenPopupEx(ImHashStr("##ComboPopup", 0, ImGui::GetID("Slice")));
    m.openSliceMenu = false;
  }
  if (ImGui::BeginCombo("Slice", pairSliceLabel(PairSlice(m.slice)))) {
    for (int i = 0; i < kPairSliceCount; ++i)
      if (ImGui::Selectable(pairSliceLabel(PairSlice(i)), m.slice == i)) {
        m.slice = i;
        changed = true;
      }
    ImGui::EndCombo();
  }
  if (!pair) ImGui::EndDisabled();
  ImGui::SameLine();
  helpMarker("Restricts the heatmap to one block of the pair: rows (queries) from the first "
             "text, keys from the second, e.g. A\xe2\x86\x92" "B is A's tokens attending to B's. "
             "The cells are the layer's weights as they are (a row of a block sums to what the "
             "query gives that text).");
  static const char* kSpecial[] = {"shown", "greyed out", "hidden (rows renormalised)"};
  ImGui::SetNextItemWidth(-1);
  if (ImGui::BeginCombo("##special", (std::string("Special tokens: ") + kSpecial[m.special]).c_str())) {
    for (int i = 0; i < 3; ++i)
      if (ImGui::Selectable(kSpecial[i], m.special == i)) {
        m.special = i;
        changed = true;
      }
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("The tokenizer's special tokens ([CLS], [SEP], [PAD], <s>, </s>).\n"
                      "Greyed out: drawn, their labels and cells dimmed.\n"
                      "Hidden: their rows and columns leave the heatmap and each row is "
                      "renormalised over the keys left, so it sums to 1 again.");
  return changed;
}

}  // namespace

unsigned int encoderTokenColour(const AppState& s, int full) {
  const ModelState& m = s.model;
  if (!m.source || m.source->model().config().causal) return 0;
  const TokenSegments& seg = m.source->segments();
  if (full < 0 || full >= seg.size()) return 0;
  if (seg.special[std::size_t(full)] && m.special == int(SpecialTokens::Grey)) return kColourSpecial;
  if (!seg.pair) return 0;
  return seg.segment[std::size_t(full)] ? kColourB : kColourA;
}

const char* encoderTokenRole(const AppState& s, int full) {
  const ModelState& m = s.model;
  if (!m.source || m.source->model().config().causal) return "";
  const TokenSegments& seg = m.source->segments();
  if (full < 0 || full >= seg.size()) return "";
  const bool special = seg.special[std::size_t(full)];
  if (!seg.pair) return special ? "special" : "";
  return seg.segment[std::size_t(full)] ? (special ? "B, special" : "B")
                                        : (special ? "A, special" : "A");
}

bool drawModelPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source) return false;
  bool changed = false;
  const ModelConfig& c = m.source->model().config();
  ImGui::TextUnformatted(std::filesystem::path(m.dir).filename().c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", m.dir.c_str());
  const Model& model = m.source->model();
  ImGui::PushTextWrapPos(0.0f);  // the facts wrap in a narrow side panel
  ImGui::TextDisabled("%s \xc2\xb7 %d layers \xc2\xb7 d = %d \xc2\xb7 %s parameters",
                      c.family.c_str(), c.nLayer, c.nEmbd,
                      countText(model.parameterCount()).c_str());
  if (!c.note.empty()) ImGui::TextDisabled("%s", c.note.c_str());
  if (c.nKvHead < c.nHead)
    ImGui::TextDisabled("%d query heads, %d KV heads (%s: %d query heads share each K and V)",
                        c.nHead, c.nKvHead, c.nKvHead == 1 ? "MQA" : "GQA", c.kvGroup());
  else
    ImGui::TextDisabled("%d heads, each with its own K and V", c.nHead);
  ImGui::TextDisabled("weights %s", model.weightsDescription().c_str());
  if (c.positions == PositionKind::Rope)
    ImGui::TextDisabled("context %d \xc2\xb7 RoPE \xce\xb8 = %g (%s)%s", c.nPositions, c.ropeTheta,
                        c.ropeStyle == RopeStyle::HalfSplit ? "rotate-half" : "adjacent pairs",
                        c.slidingWindow > 0
                            ? (" \xc2\xb7 window " + std::to_string(c.slidingWindow)).c_str()
                            : "");
  else
    ImGui::TextDisabled("context %d \xc2\xb7 learned positions", c.nPositions);
  ImGui::TextDisabled("tokenizer: %s \xc2\xb7 %zu tokens", model.tokenizer().kind().c_str(),
                      m.source->tokens().size());
  if (const std::string block = c.blockDescription(); !block.empty())
    ImGui::TextDisabled("block: %s", block.c_str());
  // Families whose layers differ (local and global, their own RoPE bases): one line a layer.
  if (!c.layerWindows.empty() || !c.layerRopeTheta.empty()) {
    if (ImGui::TreeNode("layers", "Layers (local and global)")) {
      for (int l = 0; l < c.nLayer; ++l)
        ImGui::TextDisabled("%d: %s", l, c.layerDescription(l).c_str());
      ImGui::TreePop();
    }
  }
  if (!c.causal) changed |= encoderFacts(s);
  ImGui::PopTextWrapPos();
  const bool encoder = !c.causal;
  if (encoder && m.pairs < 0) {
    try {
      m.pairs = !model.tokenizer().encodePair("a", "b").ids.empty();
    } catch (const std::exception&) {
      m.pairs = 0;
    }
  }
  if (encoder && m.pairs == 1)
    ImGui::TextColored(ImColor(kColourA), "Sentence A");
  else
    ImGui::TextUnformatted("Text");
  if (ImGui::InputTextMultiline("##modeltext", m.text, sizeof m.text,
                                ImVec2(-1, ImGui::GetTextLineHeight() * 4))) {
    m.textEditedAt = nowSeconds();
    changed = true;
  }
  if (encoder && m.pairs == 1 && !m.chat) changed |= pairControls(s);
  changed |= chatControls(s);
  if (m.textBusy()) ImGui::TextDisabled("running\xe2\x80\xa6");
  int layer = m.layer;
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderInt("##layer", &layer, 0, c.nLayer - 1, "layer %d")) {
    m.layer = std::clamp(layer, 0, c.nLayer - 1);
    m.layerDirty = true;
    changed = true;
  }
  ImGui::Checkbox("Average of this layer's heads", &s.view.headAverage);

  ImGui::Separator();
  ImGui::TextUnformatted("Interventions (inside the pass)");
  const int l = m.layer, h = s.view.head;
  const bool abl = m.source->ablated(l, h);
  const std::string ablLabel = (abl ? "Restore" : "Ablate") + std::string(" head ") +
                               std::to_string(l) + ":" + std::to_string(h);
  if (ImGui::Button(ablLabel.c_str(), ImVec2(-1, 0)) && !s.view.headAverage) {
    m.actions.push_back([l, h, abl](AppState& st) { st.model.source->setAblated(l, h, !abl); });
    changed = true;
  }
  if (c.positions == PositionKind::Rope) {
    bool off = m.source->ropeOff(l);
    if (ImGui::Checkbox(("RoPE off in layer " + std::to_string(l)).c_str(), &off)) {
      m.actions.push_back([l, off](AppState& st) { st.model.source->setRopeOff(l, off); });
      changed = true;
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("Run this layer with q and k not rotated: the heads lose what positions "
                        "told them, and every later layer and the prediction change.");
  }
  if (ImGui::Button("Mask and \xcf\x84 \xe2\x86\x92 this layer")) {
    m.actions.push_back([l](AppState& st) {
      st.model.source->applyParams(st.session.scene().params, l);
    });
    changed = true;
  }
  ImGui::SameLine();
  if (ImGui::Button("\xe2\x86\x92 all layers")) {
    m.actions.push_back(
        [](AppState& st) { st.model.source->applyParams(st.session.scene().params, -1); });
    changed = true;
  }
  if (ImGui::Button("Clear interventions", ImVec2(-1, 0))) {
    m.actions.push_back([](AppState& st) { st.model.source->clearInterventions(); });
    changed = true;
  }
  if (m.source->lastRerunFrom() >= 0)
    ImGui::TextDisabled("last re-run: layers %d..%d", m.source->lastRerunFrom(), c.nLayer - 1);
  return changed;
}

bool drawOpenModelPopup(AppState& s) {
  ModelState& m = s.model;
  if (m.requestOpenDialog) {
    m.requestOpenDialog = false;
    ImGui::OpenPopup("Open model");
  }
  bool changed = false;
  if (ImGui::BeginPopupModal("Open model", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextUnformatted(
        "A model folder (config.json, model.safetensors, the tokenizer), a .gguf file, or a "
        "name: ORG/NAME from the Hugging Face cache, ollama:NAME:TAG from Ollama's store");
    ImGui::SetNextItemWidth(520 * s.ui.uiScale);
    bool open = ImGui::InputText("##modeldir", m.openPath, sizeof m.openPath,
                                 ImGuiInputTextFlags_EnterReturnsTrue);
    if (ImGui::IsWindowAppearing()) m.storedModels = listStoredModels();
    if (!m.storedModels.empty()) {
      ImGui::TextDisabled("Models on this machine (%s, %s):", huggingFaceHubDir().c_str(),
                          ollamaModelsDir().c_str());
      ImGui::BeginChild("##stored", ImVec2(520 * s.ui.uiScale, ImGui::GetFontSize() * 10), true);
      for (const StoredModel& sm : m.storedModels) {
        const bool selected = sm.name == m.openPath;
        if (ImGui::Selectable((sm.name + "##" + sm.path).c_str(), selected,
                              ImGuiSelectableFlags_AllowDoubleClick)) {
          std::snprintf(m.openPath, sizeof m.openPath, "%s", sm.name.c_str());
          if (ImGui::IsMouseDoubleClicked(0)) open = true;
        }
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %s", sm.store.c_str(), sm.path.c_str());
      }
      ImGui::EndChild();
    }
    if (ImGui::Button("Open") || open) {
      s.ui.dropped.push_back(m.openPath);  // opened at the frame boundary
      ImGui::CloseCurrentPopup();
      changed = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  return changed;
}

}  // namespace attnviz::gui
