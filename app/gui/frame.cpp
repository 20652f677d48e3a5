// attnviz GUI: one frame. Work that may throw (dropped files, the session's stages) runs at the
// frame boundary, never inside a Begin/End pair; a slider moved in this frame's panels is
// computed before ImGui renders, so the change shows in this very frame.
#include "gui/app.h"
#include "panels/panels.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_internal.h>

#include <chrono>
#include <csignal>
#include <mutex>

namespace attnviz::gui {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

volatile std::sig_atomic_t gStopRequested = 0;

// Workers post an empty event so a waiting loop runs; never before the window opens or after
// it closes (GLFW is gone then).
std::mutex gWakeMutex;
bool gWakeOpen = false;

// Work that may throw runs here, between frames, never inside a Begin/End pair.
void frameBoundary(App& app) {
  AppState& s = app.s;
  try {
    std::vector<std::string> dropped;
    dropped.swap(s.ui.dropped);
    for (const auto& p : dropped) openDroppedFile(s, p);
    if (s.ui.npyRole) {
      const char role = s.ui.npyRole;
      s.ui.npyRole = 0;
      useNpyAs(s, s.ui.npyRolePath, role);
    }
    // A scripted run also waits for a model a dropped file opens, and for an edited text's
    // pass (deterministic output).
    if (app.waitForPooled && s.model.loading.valid()) s.model.loading.wait();
    if (app.waitForPooled && s.model.textPass.valid()) s.model.textPass.wait();
    if (app.waitForPooled && s.model.rerun.valid()) s.model.rerun.wait();
    if (app.waitForPooled && s.dump.job.valid()) s.dump.job.wait();  // an encoder-decoder's
    syncModel(s);
    syncSession(s);
    // A scripted run shows each pooled level once it is done (deterministic screenshots); a
    // window keeps drawing while the worker computes.
    if (app.waitForPooled && s.session.pooledMode()) {
      s.session.pooled().wait();
      syncSession(s);
    }
  } catch (const std::exception& e) {
    // The session keeps its last good results and does not retry the stage that failed.
    reportError(s, e.what());
  }
}

}  // namespace

void requestStop() { gStopRequested = 1; }

void setFrameWake(bool open) {
  std::lock_guard<std::mutex> lock(gWakeMutex);
  gWakeOpen = open;
}

void wakeFrameLoop() {
  std::lock_guard<std::mutex> lock(gWakeMutex);
  if (gWakeOpen) glfwPostEmptyEvent();
}

// One frame. Returns the milliseconds from its start until the GPU finished drawing it.
double runFrame(App& app, const ScriptedMouse* mouse, bool swap) {
  AppState& s = app.s;
  const auto t0 = Clock::now();
  // An app left open should not burn a core: once nothing has happened for a few frames (and
  // no thumbnail is waiting), sleep until an event arrives or half a second passes.
  // (A model opening on the worker thread keeps the frames coming for its progress bar.)
  const bool stale = !s.session.allHeadsFresh() || s.model.loading.valid() ||
                     s.model.textBusy() || s.dump.busy() || (s.flash.active && s.flash.playing);
  const bool pooledBusy = s.session.pooledMode() && s.session.pooled().busy();
  // A model's pass on a worker (opening, an edited text, the interventions' re-run, the Generate
  // panel's decoding, the Attribution panel's re-runs) takes every core: the window draws when
  // the worker reports (a layer, a token, a row; wakeFrameLoop), on input, and otherwise four
  // times a second, instead of as fast as it can (a 1B pass took 1.9x as long beside unpaced
  // software-GL frames).
  auto decoding = [](const std::shared_ptr<GenerateRun>& r) {
    if (!r) return false;
    std::lock_guard<std::mutex> lock(r->m);
    return !r->done;
  };
  const bool workerPass =
      s.model.loading.valid() || s.model.textPass.valid() || s.model.rerun.valid() ||
      s.dump.job.valid() || decoding(s.model.gen.run) || decoding(s.model.gen.plain) ||
      (s.model.attr.run && !s.model.attr.run->done);
  if (app.interactive && workerPass && !ImGui::IsAnyMouseDown()) {
    glfwWaitEventsTimeout(0.25);
    app.quietFrames = 0;
  } else if (app.interactive && pooledBusy && !stale) {
    glfwWaitEventsTimeout(0.04);  // the worker's tile shows within a frame or two
  } else if (app.interactive && app.quietFrames > 10 && !stale && !ImGui::GetIO().WantTextInput) {
    glfwWaitEventsTimeout(0.5);
    if (msSince(t0) < 490.0) app.quietFrames = 0;  // woken by an event
  } else {
    glfwPollEvents();
  }
  ++app.quietFrames;
  if (ImGui::IsAnyMouseDown()) app.quietFrames = 0;
  if (glfwWindowShouldClose(app.window) || gStopRequested) s.ui.quit = true;
  const auto tw = Clock::now();  // the frame's work starts: the wait for events is over
  if (app.lastWorkStart != Clock::time_point{}) {
    const double interval =
        std::chrono::duration<double, std::milli>(tw - app.lastWorkStart).count();
    s.timing.intervalMs =
        s.timing.intervalMs == 0 ? interval : s.timing.intervalMs * 0.9 + interval * 0.1;
  }
  app.lastWorkStart = tw;
  const auto tc = Clock::now();
  const std::uint64_t before = s.session.weightsVersion();
  frameBoundary(app);
  s.computedThisFrame = s.session.weightsVersion() != before;
  s.timing.computeMs = msSince(tc);
  const std::uint64_t versionBefore = s.session.weightsVersion();

  addTokenGlyphs(app.fonts, s.session.inputs().queryTokens, s.session.inputs().keyTokens,
                 s.session.inputsVersion());
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (mouse && mouse->active) {
    io.MousePos = ImVec2(mouse->x, mouse->y);
    io.MouseDown[0] = mouse->down;
  }
  ImGui::NewFrame();
  const auto tu = Clock::now();
  try {
    if (!io.WantTextInput || io.KeyCtrl) {
      if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false)) s.ui.requestOpenDialog = true;
      if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_S, false)) s.exporter.requestOpen = true;
      if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_Q, false)) s.ui.quit = true;
    }
    drawLayout(app);
  } catch (const std::exception& e) {
    ImGui::ErrorCheckEndFrameRecover(nullptr);
    reportError(s, e.what());
  }
  // A slider moved in this frame's panels (temperature, a mask): softmax now and redraw the
  // heatmap texture before ImGui renders, so the change shows in this very frame.
  const Session::Generations want = s.session.requested(), have = s.session.computed();
  if (want.params != have.params && want.inputs == have.inputs && s.session.ready()) {
    try {
      syncSession(s);
      if (!s.display().pooled) {
        s.renderer->upload(s.display());
        s.renderer->refresh();
      }
    } catch (const std::exception& e) {
      reportError(s, e.what());
    }
  }
  ImGui::Render();
  s.timing.uiMs = msSince(tu);
  int fbw = 0, fbh = 0;
  glfwGetFramebufferSize(app.window, &fbw, &fbh);
  glViewport(0, 0, fbw, fbh);
  glClearColor(0.118f, 0.121f, 0.140f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  // Thumbnails and pictures no panel drew this frame (heads or layers that are gone) go.
  app.renderer->releaseUnusedImages();
  // Out of pooled mode, the last pooled tile's textures and texels go (they stayed, up to a
  // screenful of texels on the GPU and on the host, until the next long scene).
  if (!s.session.pooledMode() && (app.pooledRenderer->holdsMatrix() || s.pooledView.tile)) {
    app.pooledRenderer->releaseMatrix();
    s.pooledView = PooledViewState{};
  }
  glFinish();
  const double ms = msSince(t0);
  // Thumbnails of the other heads catch up when this frame did not already run a softmax.
  const bool busy = s.session.weightsVersion() != versionBefore;
  if (!busy) {
    try {
      s.session.refreshStaleHeads(6.0);
    } catch (const std::exception& e) {
      reportError(s, e.what());
    }
  }
  const double work = msSince(tw);
  s.timing.lastFrameMs = work;
  s.timing.frameMs = s.timing.frameMs == 0 ? work : s.timing.frameMs * 0.9 + work * 0.1;
  if (swap) glfwSwapBuffers(app.window);
  return ms;
}

}  // namespace attnviz::gui
