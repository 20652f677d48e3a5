// attnviz panel: an encoder-decoder model (T5, BART, Marian). Its Source text (the encoder's
// input) and Target text (the decoder's: its start id, then the text's tokens), the site shown
// (a row of the layers x heads grid: the encoder's layers, then each decoder layer's self and
// cross sites), the Ablate button for the shown head of that site, and the decoder's next token
// after the last target token, with and without the ablations.
#include "panels/panels.h"

#include "attnviz/engine/mask.h"
#include "attnviz/session/request.h"

#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace attnviz::gui {

namespace {

void tokenLines(const char* title, const Seq2SeqSource& q, const std::vector<TokenProb>& top) {
  ImGui::BeginGroup();
  ImGui::TextUnformatted(title);
  for (const TokenProb& t : top)
    ImGui::Text("%-12s %5.1f%%", ("'" + q.tokenLabel(t.id) + "'").c_str(), 100.0 * t.prob);
  ImGui::EndGroup();
}

}  // namespace

bool drawSeq2SeqPanel(AppState& s) {
  DumpState& d = s.dump;
  if (!d.seq2seq || !d.source) return false;
  const Seq2SeqSource& q = *d.seq2seq;
  const ModelConfig& c = q.model().config();
  bool changed = false;
  ImGui::TextUnformatted(std::filesystem::path(d.path).filename().c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", d.path.c_str());
  ImGui::TextDisabled("%s: %d encoder, %d decoder layers x %d heads", c.family.c_str(),
                      c.nEncoderLayer, c.nLayer, c.nHead);
  ImGui::TextUnformatted("Source (the encoder's input)");
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextMultiline("##s2ssource", d.sourceText, sizeof d.sourceText,
                            ImVec2(-1, ImGui::GetTextLineHeight() * 3));
  if (ImGui::IsItemDeactivatedAfterEdit()) d.rerun = changed = true;
  ImGui::TextUnformatted("Target (the decoder's input after its start token)");
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextMultiline("##s2starget", d.targetText, sizeof d.targetText,
                            ImVec2(-1, ImGui::GetTextLineHeight() * 2));
  if (ImGui::IsItemDeactivatedAfterEdit()) d.rerun = changed = true;

  const int n = int(q.sites().size());
  const int cur = std::clamp(d.layer, 0, n - 1);
  const SiteId site = q.sites()[cur];
  int layer = cur;
  const std::string fmt = "site: " + seq2seqSiteLabel(site);
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderInt("##s2ssite", &layer, 0, n - 1, fmt.c_str())) {
    d.layer = std::clamp(layer, 0, n - 1);
    d.layerDirty = changed = true;
  }
  const DumpLayer& dl = d.source->dump().layers[cur];
  ImGui::TextDisabled("%s: %d query x %d key tokens",
                      site.stack == 1   ? "encoder self (no mask)"
                      : site.site == 1 ? "cross: rows the target, columns the source"
                                       : "decoder self (causal)",
                      dl.weights.rows, dl.weights.cols);
  const int h = std::clamp(s.view.head, 0, c.nHead - 1);
  const bool abl = q.ablated(site, h);
  const std::string label = (abl ? "Restore" : "Ablate") + std::string(" head ") +
                            seq2seqSiteLabel(site) + ":" + std::to_string(h);
  if (ImGui::Button(label.c_str(), ImVec2(-1, 0))) {
    try {
      d.seq2seq->setAblated(site, h, !abl);
    } catch (const InputError& e) {
      notify(s, e.what());
    }
    d.rerun = changed = true;
  }
  // Source positions hidden from every cross site (attnviz model --mask-source), applied when
  // the box is left or on Enter.
  ImGui::TextDisabled("Source positions hidden from cross-attention:");
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##s2smask", "hide source positions from cross-attention, e.g. 2,5",
                           d.maskSource, sizeof d.maskSource);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Source positions (0-based, the cross site's columns) that no decoder layer's "
                      "cross-attention may read, in the pass and in translation, as attnviz "
                      "model --mask-source does. Empty: none.");
  if (ImGui::IsItemDeactivatedAfterEdit()) {
    try {
      d.seq2seq->setMaskedSource(parsePositionList(d.maskSource, "mask-source"));
      d.rerun = changed = true;
    } catch (const std::runtime_error& e) {  // a malformed list, or a position past the source
      notify(s, e.what());
    }
  }
  // Watched translation: the decoder's greedy token appended one at a time, each a decode step
  // on the worker (the heatmap of a cross site grows a row for each, over the source).
  DumpState::Translate& t = d.translate;
  if (t.left > 0) {
    if (ImGui::Button("Stop", ImVec2(-1, 0))) t.left = 0, t.stop = "stopped";
    ImGui::TextDisabled("translating: %d tokens so far, %d to go", int(t.ids.size()), t.left);
  } else {
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.45f);
    ImGui::SliderInt("##s2stokens", &t.tokens, 1, 200, "%d tokens");
    ImGui::SameLine();
    if (ImGui::Button("Translate (greedy)", ImVec2(-1, 0))) {
      t.requested = t.tokens;
      changed = true;
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("Continue the target with the decoder's most likely token, one decode "
                        "step over the cached keys and values a token, as attnviz generate does "
                        "(ablations apply); clear the target first to translate from the start.");
    if (!t.stop.empty())
      ImGui::TextDisabled("translated %d tokens: %s", int(t.ids.size()),
                          t.stop == "eos"      ? "stopped at the end token"
                          : t.stop == "length" ? "the count reached"
                                               : t.stop.c_str());
  }
  ImGui::Separator();
  ImGui::Text("Next token after '%s'",
              q.tokenLabel(q.pass().ids.empty() ? 0 : q.pass().ids.back()).c_str());
  if (q.ablations().empty() && q.maskedSource().empty()) {
    tokenLines("", q, d.after);
  } else {
    tokenLines("before", q, d.before);
    ImGui::SameLine(0, 24);
    tokenLines(q.ablations().empty() ? "after the mask" : "after ablation", q, d.after);
  }
  return changed;
}

}  // namespace attnviz::gui
