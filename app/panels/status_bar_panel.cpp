// attnviz panel: the status bar: backend and GL renderer, compute and frame times, notices.
#include "panels/panels.h"

#include "attnviz/engine/ggml_kernels.h"  // fastActivations
#include "attnviz/engine/isa.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>

namespace attnviz::gui {

bool drawStatusBar(AppState& s) {
  const Dims d = s.dims();
  // A model opening on the worker thread (the files, then its first pass), or an edited text's
  // pass: a bar, what it does, and Cancel (a 1B model's pass takes seconds).
  auto passLine = [](const PassProgress& p, const char* what, char* out, std::size_t n) {
    const int planned = p.layersPlanned.load(), done = std::min(p.layersDone.load(), planned);
    if (planned > 0)
      std::snprintf(out, n, "%s: layer %d of %d", what, done, planned);
    else
      std::snprintf(out, n, "%s", what);
  };
  auto cancelButton = [&](const char* tip) {
    ImGui::SameLine();
    if (ImGui::SmallButton("Cancel##pass")) cancelPass(s);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
    ImGui::SameLine();
  };
  char line[128];
  // An edited text's pass or the interventions' re-run: its bar, its layers and Cancel.
  auto workerPass = [&](const PassProgress& p, const char* what, const char* tip) {
    passLine(p, what, line, sizeof line);
    ImGui::ProgressBar(float(p.fraction()), ImVec2(240 * s.ui.uiScale, 0));
    ImGui::SameLine();
    ImGui::TextDisabled("%s", line);
    cancelButton(p.cancel.load() ? "Cancelling\xe2\x80\xa6" : tip);
  };
  if (s.model.progress) {
    ModelLoadProgress& p = *s.model.progress;
    double f = 0;
    std::string what;
    {
      std::lock_guard<std::mutex> lock(p.m);
      f = p.fraction;
      what = p.what;
    }
    if (p.pass.layersPlanned.load() > 0) {  // open: its first pass runs
      f = p.pass.fraction();
      passLine(p.pass, "running the pass", line, sizeof line);
      what = line;
    }
    ImGui::ProgressBar(float(f), ImVec2(240 * s.ui.uiScale, 0));
    ImGui::SameLine();
    ImGui::TextDisabled("opening %s: %s", s.model.loadingDir.c_str(), what.c_str());
    cancelButton(p.pass.cancel.load() ? "Cancelling\xe2\x80\xa6"
                                      : "Stop opening this model (what is open stays)");
  } else if (s.model.textPass.valid() && s.model.textProgress) {
    workerPass(*s.model.textProgress, "running the pass",
               "Stop this pass (the view keeps the last text's)");
  } else if (s.model.rerun.valid() && s.model.rerunProgress) {
    workerPass(*s.model.rerunProgress, "re-running with the interventions",
               "Stop this re-run (the interventions go back to what the view shows)");
  } else if (s.dump.job.valid() && s.dump.jobProgress) {
    if (s.dump.jobStep) {  // one decode step: no layers to count
      std::snprintf(line, sizeof line, "translating: token %d, %d to go",
                    int(s.dump.translate.ids.size()) + 1, s.dump.translate.left);
      ImGui::TextDisabled("%s", line);
      cancelButton("Stop translating (the tokens so far stay)");
    } else {
      workerPass(*s.dump.jobProgress, "running the pass",
                 "Stop this pass (the view keeps the last pass; the texts and ablations go back "
                 "to what it shows)");
    }
  }
  const Timing& t = s.timing;
  const Session::Timing& st = s.session.timing();
  ImGui::TextDisabled("Backend:");
  ImGui::SameLine();
  ImGui::TextUnformatted(s.backend.backend.c_str());
  if (!s.backend.backendNote.empty() && ImGui::IsItemHovered())
    ImGui::SetTooltip("%s", s.backend.backendNote.c_str());
  ImGui::SameLine();
  // The instruction-set level of the CPU kernels (isa.h: picked at start-up or by ATTNVIZ_ISA).
  ImGui::TextDisabled("| CPU kernels: %s", attnviz::isaName(attnviz::activeIsa()));
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", attnviz::isaDescription().c_str());
  ImGui::SameLine();
  if (attnviz::fastActivations()) {  // the Generate panel's fast path: not exact, so said here
    ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1), "| fast activations (8-bit x)");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "Decode's products on Q8_0 and K-quant weights round x to 8 bits per "
          "block: every decode step (Generate, translation, a StreamingLLM cache's "
          "loss) is not exact to float32 rounding; full passes are. Turn it off in "
          "the Generate panel");
    ImGui::SameLine();
  }
  ImGui::TextDisabled("| GL: %s",
                      s.backend.glRenderer.substr(0, s.backend.glRenderer.find(" (")).c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.backend.glRenderer.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("| H=%d T_q=%d T_k=%d d=%d", d.H, d.Tq, d.Tk, d.dk);
  ImGui::SameLine();
  if (s.session.pooledMode()) {
    // No engine run: the inputs, then the pyramid's worker (its last whole pass and tile).
    const PooledPyramid& py = s.session.pooled();
    ImGui::TextDisabled(
        "| inputs %.1f ms  pooled: whole %.0f ms, tile %.0f ms%s | frame %.1f ms (%.0f FPS)",
        st.setInputsMs, py.lastCoarseMs(), py.lastTileMs(), py.busy() ? " (refining)" : "",
        t.frameMs, t.intervalMs > 0 ? 1000.0 / t.intervalMs : 0.0);
  } else {
    ImGui::TextDisabled(
        "| QK\xe1\xb5\x80 %.1f ms  softmax %.2f ms  view %.2f ms | frame %.1f ms (%.0f FPS)",
        st.setInputsMs, st.softmaxMs, st.displayMs, t.frameMs,
        t.intervalMs > 0 ? 1000.0 / t.intervalMs : 0.0);
  }
  if (!s.ui.notice.empty() && nowSeconds() < s.ui.noticeUntil) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.55f, 0.9f, 0.55f, 1), "| %s", s.ui.notice.c_str());
  } else if (!s.backend.backendNote.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.95f, 0.75f, 0.4f, 1), "| why CPU? (hover)");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.backend.backendNote.c_str());
  }
  return false;
}

}  // namespace attnviz::gui
