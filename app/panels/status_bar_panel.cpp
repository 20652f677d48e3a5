// attnviz panel: the status bar: backend and GL renderer, compute and frame times, notices.
#include "panels/panels.h"

#include "attnviz/engine/isa.h"

#include <imgui.h>

namespace attnviz::gui {

bool drawStatusBar(AppState& s) {
  const Dims d = s.dims();
  if (s.model.progress) {  // a model folder is opening on the worker thread
    double f = 0;
    std::string what;
    {
      std::lock_guard<std::mutex> lock(s.model.progress->m);
      f = s.model.progress->fraction;
      what = s.model.progress->what;
    }
    ImGui::ProgressBar(float(f), ImVec2(240 * s.ui.uiScale, 0));
    ImGui::SameLine();
    ImGui::TextDisabled("opening %s: %s", s.model.loadingDir.c_str(), what.c_str());
    ImGui::SameLine();
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
        t.frameMs, t.frameMs > 0 ? 1000.0 / t.frameMs : 0.0);
  } else {
    ImGui::TextDisabled(
        "| QK\xe1\xb5\x80 %.1f ms  softmax %.2f ms  view %.2f ms | frame %.1f ms (%.0f FPS)",
        st.setInputsMs, st.softmaxMs, st.displayMs, t.frameMs,
        t.frameMs > 0 ? 1000.0 / t.frameMs : 0.0);
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
