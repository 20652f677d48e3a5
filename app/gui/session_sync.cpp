// attnviz GUI: hands the view to the session, plus the small helpers every panel shares
// (notices, errors). What is computed, and when, is the session's business (attnviz/session.h).
#include "app_state.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace attnviz::gui {

View sessionView(const ViewState& v) {
  View out;
  out.head = v.head;
  out.headAverage = v.headAverage;
  out.stage = v.stage;
  out.wrongAxis = v.wrongAxis;
  out.pooledMean = v.pooledMean;
  return out;
}

void syncSession(AppState& s) {
  // A model's own stage with no model (or past the rollout's length) is the weights. (A stage
  // just asked for is computed by syncModel at the start of the next frame.)
  if (stageFromSource(s.view.stage) && !s.session.stageAvailable(s.view.stage)) {
    const bool model = s.model.source && s.model.source->ready();
    const bool tooLong = s.view.stage == ViewStage::Rollout &&
                         s.tq() > ModelSource::kRolloutMaxTokens;
    if (!model || s.session.pooledMode() || tooLong) {
      if (model && s.view.stage == ViewStage::Rollout && tooLong)
        notify(s, "rollout is computed for texts up to " +
                      std::to_string(ModelSource::kRolloutMaxTokens) + " tokens");
      s.view.stage = ViewStage::Weights;
    }
  }
  s.session.setView(sessionView(s.view));
  s.session.update();
  if (s.session.pooledMode()) {
    // Only the pooled weights exist at this size (the stage bar says so).
    s.view.stage = ViewStage::Weights;
    s.view.wrongAxis = s.view.headAverage = s.view.paintMode = false;
    s.flash.active = false;  // the walkthrough compares against the materialised softmax
    s.session.setView(sessionView(s.view));
    s.session.update();
  }
  const int tq = s.tq();
  s.view.head = s.session.view().head;
  if (s.view.selectedRow >= tq) s.view.selectedRow = tq - 1;
  if (std::string note = s.session.takeNote(); !note.empty()) notify(s, note, 10);
}

Archetype headArchetype(const Scene& scene, int h) {
  if (h >= 0 && h < int(scene.archetypes.size())) return scene.archetypes[h];
  const auto all = allArchetypes();
  return all[std::size_t(h) % all.size()];
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void notify(AppState& s, const std::string& text, double seconds) {
  s.ui.notice = text;
  s.ui.noticeUntil = nowSeconds() + seconds;
}

void reportError(AppState& s, const std::string& what) {
  s.ui.error = what;
  s.ui.errorPending = true;
  std::fprintf(stderr, "attnviz: %s\n", what.c_str());
}

}  // namespace attnviz::gui
