// attnviz panel: retrieval heads (Wu et al. 2024). The model view's text is the haystack: a needle
// sentence goes in at evenly spaced depths, a question follows, and the model copies the answer
// greedily (attnviz/model/retrieval.h, on a worker thread). Every head's retrieval score as a
// layers x heads grid, the top heads listed, and the answer's log-probability with the top k
// masked against k random others. Buttons open the middle case in the view, and mask the top k
// there (the ablation machinery: every later layer and the prediction change).
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace attnviz::gui {

namespace {

void startScoring(ModelState& m) {
  RetrievalState& r = m.retrieval;
  std::shared_ptr<const Model> model = m.source->sharedModel();
  // The view's text is the haystack; a case the view shows already (its needle, its question at
  // the end) is taken back out first.
  std::string filler = m.source->text();
  const std::string needle = r.needle, question = r.question;
  if (const std::size_t at = filler.find(needle); !needle.empty() && at != std::string::npos) {
    std::size_t end = at + needle.size();
    if (end < filler.size() && filler[end] == ' ') ++end;
    filler.erase(at, end - at);
  }
  if (!question.empty() && filler.size() >= question.size() &&
      filler.compare(filler.size() - question.size(), question.size(), question) == 0)
    filler.erase(filler.size() - question.size());
  const NeedleSpec base{filler, r.needle, r.question, r.answer, 0.0};
  const int n = std::max(1, r.depths), k = r.k, draws = r.draws;
  r.progress = std::make_shared<PassProgress>();
  r.job = std::async(std::launch::async, [model, base, n, k, draws, progress = r.progress] {
    RetrievalState::Result res;
    res.filler = base.filler;
    PassProgress::Scope scope(progress.get());  // closeSources cancels it at the next layer
    try {
      for (int i = 0; i < n; ++i) {
        NeedleSpec spec = base;
        spec.depth = n == 1 ? 0.5 : double(i) / double(n - 1);
        res.cases.push_back(buildNeedleCase(*model, spec));
      }
      res.scores = retrievalScores(*model, res.cases);
      res.masks = compareMasks(*model, res.cases, res.scores, k, draws, 1);
    } catch (const std::exception& e) {
      res.error = e.what();
    }
    return res;
  });
}

std::string headList(const std::vector<std::pair<int, int>>& hs) {
  std::string s;
  for (const auto& [l, h] : hs) s += (s.empty() ? "" : " ") + std::to_string(l) + ":" + std::to_string(h);
  return s;
}

}  // namespace

// What the panel showed last (scripted runs print it).
RetrievalShown g_retrievalShown;

bool drawRetrievalPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  RetrievalState& r = m.retrieval;
  const ModelConfig& cfg = m.source->model().config();
  if (!cfg.causal || cfg.encoderDecoder()) {
    ImGui::TextDisabled("Decoders only: retrieval is read while the model generates.");
    return false;
  }
  if (r.scripted && !m.textBusy() && m.actions.empty() && !r.job.valid()) {
    r.scripted = false;
    startScoring(m);
    if (r.scriptedWait) r.job.wait();  // a scripted run prints the result this frame
  }
  if (r.job.valid() && r.job.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    r.result = r.job.get();

  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextDisabled("The text above is the haystack. The needle goes in at each depth, the "
                      "question follows, and the model answers greedily.");
  ImGui::PopTextWrapPos();
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##rt-needle", "needle sentence", r.needle, sizeof r.needle);
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##rt-question", "question", r.question, sizeof r.question);
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##rt-answer", "answer (in the needle)", r.answer, sizeof r.answer);
  const float third = (ImGui::GetContentRegionAvail().x - 2 * ImGui::GetStyle().ItemSpacing.x) / 3;
  ImGui::SetNextItemWidth(third);
  ImGui::SliderInt("##rt-depths", &r.depths, 1, 11, "%d depths");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(third);
  ImGui::SliderInt("##rt-k", &r.k, 1, std::max(1, std::min(16, cfg.nLayer * cfg.nHead - 1)),
                   "mask %d");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(third);
  ImGui::SliderInt("##rt-draws", &r.draws, 0, 20, "%d random");
  if (ImGui::Button(r.job.valid() ? "scoring\xe2\x80\xa6" : "Score every head", ImVec2(-1, 0)) &&
      !r.job.valid())
    startScoring(m);

  const RetrievalState::Result& res = r.result;
  if (!res.error.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", res.error.c_str());
    ImGui::PopTextWrapPos();
    return false;
  }
  if (res.cases.empty()) return false;
  const RetrievalScores& sc = res.scores;
  int copied = 0;
  for (const CopyTrace& t : sc.traces) copied += t.correct ? 1 : 0;
  ImGui::Text("copied in %d of %zu cases", copied, res.cases.size());

  // The scores as a layers x heads grid, one cell a head (0 dark, 1 bright).
  const float cell = std::min(18.0f * s.ui.uiScale,
                              (ImGui::GetContentRegionAvail().x - 30 * s.ui.uiScale) /
                                  float(std::max(1, sc.heads)));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float lab = 30 * s.ui.uiScale;
  for (int l = 0; l < sc.layers; ++l) {
    char t[16];
    std::snprintf(t, sizeof t, "L%d", l);
    dl->AddText(ImVec2(o.x, o.y + l * cell), ImGui::GetColorU32(ImGuiCol_TextDisabled), t);
    for (int h = 0; h < sc.heads; ++h) {
      const float v = std::clamp(sc.at(l, h), 0.0f, 1.0f);
      const RGBA8 c = colormapLookup(ColormapId::Viridis, v);
      const ImVec2 a(o.x + lab + h * cell, o.y + l * cell);
      dl->AddRectFilled(a, ImVec2(a.x + cell - 1, a.y + cell - 1), IM_COL32(c.r, c.g, c.b, 255));
    }
  }
  ImGui::Dummy(ImVec2(lab + sc.heads * cell, sc.layers * cell));
  if (ImGui::IsItemHovered()) {
    const ImVec2 p = ImGui::GetMousePos();
    const int h = int((p.x - o.x - lab) / cell), l = int((p.y - o.y) / cell);
    if (h >= 0 && h < sc.heads && l >= 0 && l < sc.layers)
      ImGui::SetTooltip("head %d:%d: retrieval score %.3f", l, h, double(sc.at(l, h)));
  }
  const auto top = topHeads(sc, 6);
  std::string line;
  for (const auto& [l, h] : top) {
    if (sc.at(l, h) <= 0.0f) break;
    char t[32];
    std::snprintf(t, sizeof t, "%s%d:%d %.2f", line.empty() ? "" : ", ", l, h, double(sc.at(l, h)));
    line += t;
  }
  ImGui::TextWrapped("top: %s", line.empty() ? "no head retrieves" : line.c_str());

  const MaskComparison& mc = res.masks;
  ImGui::TextUnformatted("answer log p (mean), copies right");
  ImGui::Text("  none masked      %8.3f  %d/%d", mc.none.meanLogProb, mc.none.correct, mc.none.cases);
  ImGui::Text("  top %d (%s) %8.3f  %d/%d", r.k, headList(mc.top.heads).c_str(), mc.top.meanLogProb,
              mc.top.correct, mc.top.cases);
  if (!mc.random.empty()) {
    ImGui::Text("  random %d (%zu draws) %8.3f  %d/%zu", r.k, mc.random.size(),
                mc.randomMeanLogProb(), mc.randomCorrect(), mc.random.size() * res.cases.size());
    if (ImGui::IsItemHovered()) {
      std::string tip;
      for (const MaskOutcome& o2 : mc.random) {
        char t[96];
        std::snprintf(t, sizeof t, "%s: %.3f, %d/%d\n", headList(o2.heads).c_str(), o2.meanLogProb,
                      o2.correct, o2.cases);
        tip += t;
      }
      ImGui::SetTooltip("%s", tip.c_str());
    }
  }
  g_retrievalShown = {top.empty() ? -1 : top[0].first, top.empty() ? -1 : top[0].second,
                      top.empty() ? 0.0f : sc.at(top[0].first, top[0].second),
                      mc.none.meanLogProb, mc.top.meanLogProb, mc.randomMeanLogProb(), copied};

  bool changed = false;
  const NeedleCase& mid = res.cases[res.cases.size() / 2];
  if (ImGui::Button("Show the middle case") && !top.empty()) {
    std::snprintf(m.text, sizeof m.text, "%s", mid.text.c_str());
    m.textEditedAt = 0;  // runs at the next frame
    m.layer = top[0].first;
    m.layerDirty = true;
    s.view.head = top[0].second;
    s.view.headAverage = false;
    s.view.selectedRow = int(mid.ids.size()) - 1;
    changed = true;
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("The view's text becomes the case with the needle in the middle, on the "
                      "best head, its last row (the question's end) selected.");
  ImGui::SameLine();
  if (ImGui::Button(("Mask the top " + std::to_string(mc.top.heads.size())).c_str())) {
    const auto heads = mc.top.heads;
    m.actions.push_back([heads](AppState& st) {
      for (const auto& [l, h] : heads) st.model.source->setAblated(l, h, true);
    });
    changed = true;
  }
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextDisabled("attnviz retrieval --filler-file F --needle N --question Q --answer A "
                      "--depths ... --mask-k %d --random %d gives the same numbers.",
                      r.k, r.draws);
  ImGui::PopTextWrapPos();
  return changed;
}

}  // namespace attnviz::gui
