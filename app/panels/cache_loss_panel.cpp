// attnviz panel: loss by token under three KV caches (StreamingLLM, Xiao et al. 2023). The model
// view's text is scored (attnviz/model/score.h, on a worker thread) with the whole context, with
// S attention sinks + the last W tokens, and with a plain window of the last S + W tokens (the
// same number of keys); the three per-token NLL curves on one scale, with their means.
#include "panels/panels.h"

#include "attnviz/model/score.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace attnviz::gui {

namespace {

void startScoring(ModelState& m) {
  CacheLossState& c = m.cacheLoss;
  std::shared_ptr<const Model> model = m.source->sharedModel();
  const std::vector<int> ids = m.source->pass().ids;
  const int S = c.sinks, W = c.window;
  c.progress = std::make_shared<PassProgress>();
  c.job = std::async(std::launch::async, [model, ids, S, W, progress = c.progress] {
    CacheLossState::Result r;
    r.sinks = S, r.window = W;
    PassProgress::Scope scope(progress.get());  // closeSources cancels it at the next layer
    try {
      r.dense = tokenNll(*model, ids, {});
      r.sinksWindow = tokenNll(*model, ids, {true, S, W});
      r.windowOnly = tokenNll(*model, ids, {true, 0, S + W});
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    return r;
  });
}

double mean(const std::vector<float>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

}  // namespace

bool drawCacheLossPanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  CacheLossState& c = m.cacheLoss;
  const ModelConfig& cfg = m.source->model().config();
  if (!cfg.causal || cfg.encoderDecoder()) {
    ImGui::TextDisabled("Decoders only: an encoder predicts no next token.");
    return false;
  }
  const bool running = c.job.valid();
  if (c.scripted && !m.textBusy() && m.actions.empty() && !running) {
    c.scripted = false;
    startScoring(m);
    if (c.scriptedWait) c.job.wait();  // a scripted run prints the result this frame
  }
  if (c.job.valid() && c.job.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    c.result = c.job.get();

  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.45f);
  ImGui::SliderInt("##cl-sinks", &c.sinks, 0, 16, "%d sinks");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderInt("##cl-window", &c.window, 1, 256, "window %d");
  if (ImGui::Button(c.job.valid() ? "scoring\xe2\x80\xa6" : "Score the text: 3 caches",
                    ImVec2(-1, 0)) &&
      !c.job.valid())
    startScoring(m);
  const CacheLossState::Result& r = c.result;
  if (!r.error.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", r.error.c_str());
    ImGui::PopTextWrapPos();
    return false;
  }
  if (r.dense.empty()) {
    ImGui::TextDisabled("Each token's -log p given the tokens before it, as each cache sees them.");
    return false;
  }
  float top = 1e-6f;
  for (const auto* v : {&r.dense, &r.sinksWindow, &r.windowOnly})
    top = std::max(top, *std::max_element(v->begin(), v->end()));
  const float w = ImGui::GetContentRegionAvail().x, h = 48 * s.ui.uiScale;
  char label[96];
  std::snprintf(label, sizeof label, "full context: mean %.3f", mean(r.dense));
  ImGui::PlotLines("##cl-dense", r.dense.data(), int(r.dense.size()), 0, label, 0.0f, top,
                   ImVec2(w, h));
  std::snprintf(label, sizeof label, "%d sinks + last %d: mean %.3f", r.sinks, r.window,
                mean(r.sinksWindow));
  ImGui::PlotLines("##cl-sw", r.sinksWindow.data(), int(r.sinksWindow.size()), 0, label, 0.0f,
                   top, ImVec2(w, h));
  std::snprintf(label, sizeof label, "window of last %d: mean %.3f", r.sinks + r.window,
                mean(r.windowOnly));
  ImGui::PlotLines("##cl-w", r.windowOnly.data(), int(r.windowOnly.size()), 0, label, 0.0f, top,
                   ImVec2(w, h));
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextDisabled("NLL in nats by token (0..%.1f); the cache evicts once the text passes %d "
                      "tokens. attnviz score --kv-sinks S --kv-window W gives the same numbers.",
                      top, r.sinks + r.window);
  ImGui::PopTextWrapPos();
  return false;
}

}  // namespace attnviz::gui
