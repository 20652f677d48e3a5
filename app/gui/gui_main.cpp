// attnviz GUI: the window, the main loop (poll, NewFrame, panels, Render, swap) and the
// scripted runs the tests and `--report-timing` use.
#include "cli.h"
#include "gui/app_state.h"
#include "gui/fonts.h"
#include "gui/heatmap_renderer.h"
#include "gui/screenshot.h"
#include "panels/panels.h"

#include "attnviz/data_dir.h"
#include "attnviz/mask.h"

#if ATTNVIZ_HAVE_GPU
#include "attnviz/gpu_engine.h"
#endif

#include <CLI/CLI.hpp>
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_internal.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnviz::app {

namespace {

using namespace attnviz::gui;
using Clock = std::chrono::steady_clock;

// Ctrl+C or a polite kill closes the window normally, so settings and imgui.ini are saved.
volatile std::sig_atomic_t gStopRequested = 0;
void onStopSignal(int) { gStopRequested = 1; }

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Options {
  std::string scenePositional, scene;
  int frames = -1;
  std::string screenshot, exportPath, saveScenePath, popup;
  std::string size = "1600x960";
  std::optional<float> temperature;
  std::optional<int> selectRow, head;
  std::string hoverCell, clickCell;
  std::string stage, colormap, backend = "auto";
  bool wrongAxis = false;
  bool paint = false;
  bool reportTiming = false;
  float zoom = 0;
  int syntheticTokens = 0;
  int heads = 0;
  float uiScale = 0;
};

struct CellArg {
  int i = -1, j = -1;
};

CellArg parseCell(const std::string& text, const char* option) {
  CellArg c;
  if (text.empty()) return c;
  if (std::sscanf(text.c_str(), "%d,%d", &c.i, &c.j) != 2 || c.i < 0 || c.j < 0)
    throw UsageError(std::string(option) + ": expected I,J (two non-negative integers), got '" +
                     text + "'");
  return c;
}

// What the script does to ImGui's input this frame (the real input path: io.MousePos etc.).
struct ScriptedMouse {
  bool active = false;
  float x = 0, y = 0;
  bool down = false;
};

struct App {
  GLFWwindow* window = nullptr;
  AppState s;
  std::unique_ptr<HeatmapRenderer> renderer = std::make_unique<HeatmapRenderer>();
  std::string iniPath;
  std::string shownTitle;  // the window title's scene title
  int quietFrames = 0;     // frames since the last input event (interactive runs only)
  UiFonts fonts;
  bool interactive = true;
};

void onDrop(GLFWwindow* w, int count, const char** paths) {
  auto* app = static_cast<App*>(glfwGetWindowUserPointer(w));
  for (int k = 0; k < count; ++k) app->s.ui.dropped.push_back(paths[k]);
}

void applyStyle(float scale) {
  ImGui::StyleColorsDark();
  ImGuiStyle& st = ImGui::GetStyle();
  st.WindowRounding = 0;
  st.ChildRounding = 3;
  st.FrameRounding = 3;
  st.GrabRounding = 3;
  st.PopupRounding = 3;
  st.WindowBorderSize = 0;
  st.FramePadding = ImVec2(6, 3);
  st.ItemSpacing = ImVec2(7, 5);
  ImVec4* c = st.Colors;
  // The window and panel backgrounds are the glClear colour: on a software rasterizer
  // (llvmpipe) every full-window layer costs milliseconds, so none is drawn.
  c[ImGuiCol_WindowBg] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_PopupBg] = ImVec4(0.13f, 0.135f, 0.155f, 0.98f);
  c[ImGuiCol_Border] = ImVec4(0.26f, 0.27f, 0.31f, 1);
  c[ImGuiCol_MenuBarBg] = ImVec4(0.085f, 0.088f, 0.10f, 1);
  c[ImGuiCol_Header] = ImVec4(0.20f, 0.24f, 0.32f, 1);
  c[ImGuiCol_HeaderHovered] = ImVec4(0.26f, 0.32f, 0.44f, 1);
  c[ImGuiCol_FrameBg] = ImVec4(0.17f, 0.18f, 0.21f, 1);
  c[ImGuiCol_Button] = ImVec4(0.20f, 0.23f, 0.30f, 1);
  c[ImGuiCol_ButtonActive] = ImVec4(0.85f, 0.52f, 0.10f, 1);
  c[ImGuiCol_SliderGrab] = ImVec4(0.90f, 0.60f, 0.15f, 0.55f);
  c[ImGuiCol_SliderGrabActive] = ImVec4(1.0f, 0.70f, 0.25f, 1);
  c[ImGuiCol_CheckMark] = ImVec4(1.0f, 0.68f, 0.20f, 1);
  st.ScaleAllSizes(scale);
}

// Chooses the engine: the GPU backend on this window's context when it starts and is a real
// GPU, otherwise the CPU, saying why.
void chooseEngine(App& app, const std::string& backend) {
  ComputeState& c = app.s.compute;
  const char* rend = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  c.glRenderer = rend ? rend : "unknown";
  if (backend != "cpu" && backend != "gpu" && backend != "auto")
    throw UsageError("--backend: expected cpu, gpu or auto, got '" + backend + "'");
#if ATTNVIZ_HAVE_GPU
  const std::string r = c.glRenderer;
  const bool software = isSoftwareRenderer(r);
  if (backend == "gpu" || (backend == "auto" && !software)) {
    try {
      auto gpu = makeGpuEngineOnCurrentContext();
      c.engine = std::move(gpu);
      c.backend = c.engine->name();
      return;
    } catch (const std::exception& e) {
      c.backendNote = std::string("GPU backend failed, using the CPU: ") + e.what();
    }
  } else if (backend == "auto") {
    c.backendNote = "GL renderer is software (" + r +
                    "): the CPU engine is faster; --backend gpu forces the GPU";
  }
#else
  if (backend != "cpu") c.backendNote = "this build has no GPU backend; using the CPU";
#endif
  c.engine = makeCpuEngine();
  c.backend = c.engine->name();
}

void drawLayout(App& app) {
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
  if (s.scene.scene.title != app.shownTitle) {
    app.shownTitle = s.scene.scene.title;
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
  if (ImGui::CollapsingHeader("Scene", ImGuiTreeNodeFlags_DefaultOpen)) drawScenePanel(s);
  if (ImGui::CollapsingHeader("Temperature", ImGuiTreeNodeFlags_DefaultOpen))
    drawTemperaturePanel(s);
  if (ImGui::CollapsingHeader("Mask", ImGuiTreeNodeFlags_DefaultOpen)) drawMaskPanel(s);
  if (ImGui::CollapsingHeader("View", ImGuiTreeNodeFlags_DefaultOpen)) drawViewPanel(s);
  ImGui::Spacing();
  if (ImGui::Button("Export PNG\xe2\x80\xa6  (Ctrl+S)", ImVec2(-1, 0)))
    s.exporter.requestOpen = true;
  ImGui::EndChild();

  // Centre: stage bar, title line and the heatmap.
  splitter("##split-left", s.ui.leftWidth, leftW, 1.0f);
  ImGui::BeginChild("centre", ImVec2(centreW, bodyH), true,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  drawStageBar(s);
  {
    const int h = s.view.head;
    const Archetype a = headArchetype(s.scene.scene, h);
    std::string who = s.view.headAverage && s.view.stage == ViewStage::Weights
                          ? "average of " + std::to_string(s.heads()) + " heads"
                          : "head " + std::to_string(h) + " (" + archetypeName(a) + ")";
    if (s.scene.scene.qPath.size()) who = "head " + std::to_string(h) + " (from files)";
    ImGui::Text("%s  \xc2\xb7  \xcf\x84 = %.3g  \xc2\xb7  mask: %s", who.c_str(),
                s.compute.params.temperature, describeMask(s.compute.params.mask).c_str());
  }
  drawLessonPanel(s);
  ImGui::Spacing();
  drawHeatmapPanel(s);
  ImGui::EndChild();

  // Right: heads, the selected row, the mask.
  splitter("##split-right", s.ui.rightWidth, rightW, -1.0f);
  ImGui::BeginChild("side", ImVec2(rightW, bodyH), true);
  if (ImGui::CollapsingHeader("Heads", ImGuiTreeNodeFlags_DefaultOpen)) drawHeadGridPanel(s);
  if (ImGui::CollapsingHeader("Row inspector", ImGuiTreeNodeFlags_DefaultOpen))
    drawRowInspectorPanel(s);
  if (ImGui::CollapsingHeader("Mask matrix", ImGuiTreeNodeFlags_DefaultOpen))
    drawMaskMatrixPanel(s);
  ImGui::EndChild();

  ImGui::BeginChild("status", ImVec2(0, statusH), false, ImGuiWindowFlags_NoScrollbar);
  ImGui::SetCursorPosY(ImGui::GetCursorPosY() + 2 * sc);
  drawStatusBar(s);
  ImGui::EndChild();

  drawExportPopup(s);
  drawFileDialogs(s);
  drawErrorPopup(s);
  ImGui::End();
}

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
    updateCompute(s);
  } catch (const std::exception& e) {
    reportError(s, e.what());
    // Leave the engine on its last good inputs: undo the edit that broke them.
    s.scene.inputsDirty = false;
    s.scene.paramsDirty = false;
  }
}

// One frame. Returns the milliseconds from its start until the GPU finished drawing it.
double runFrame(App& app, const ScriptedMouse* mouse, bool swap) {
  AppState& s = app.s;
  const auto t0 = Clock::now();
  // An app left open should not burn a core: once nothing has happened for a few frames (and
  // no thumbnail is waiting), sleep until an event arrives or half a second passes.
  const bool stale = !allHeadsFresh(s);
  if (app.interactive && app.quietFrames > 10 && !stale && !ImGui::GetIO().WantTextInput) {
    glfwWaitEventsTimeout(0.5);
    if (msSince(t0) < 490.0) app.quietFrames = 0;  // woken by an event
  } else {
    glfwPollEvents();
  }
  ++app.quietFrames;
  if (ImGui::IsAnyMouseDown()) app.quietFrames = 0;
  if (glfwWindowShouldClose(app.window) || gStopRequested) s.ui.quit = true;
  const auto tc = Clock::now();
  const std::uint64_t before = s.compute.weightsVersion;
  frameBoundary(app);
  s.computedThisFrame = s.compute.weightsVersion != before;
  s.timing.computeMs = msSince(tc);
  const std::uint64_t versionBefore = s.compute.weightsVersion;

  addTokenGlyphs(app.fonts, s.scene.inputs.queryTokens, s.scene.inputs.keyTokens,
                 s.compute.inputsVersion);
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
  if (s.scene.paramsDirty && !s.scene.inputsDirty && s.compute.haveInputs) {
    try {
      updateCompute(s);
      s.renderer->upload(s.display);
      s.renderer->refresh();
    } catch (const std::exception& e) {
      reportError(s, e.what());
      s.scene.paramsDirty = false;
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
  glFinish();
  const double ms = msSince(t0);
  // Thumbnails of the other heads catch up when this frame did not already run a softmax.
  const bool busy = s.compute.weightsVersion != versionBefore;
  if (!busy) {
    try {
      refreshStaleHeads(s, 6.0);
    } catch (const std::exception& e) {
      reportError(s, e.what());
    }
  }
  s.timing.lastFrameMs = ms;
  s.timing.frameMs = s.timing.frameMs == 0 ? ms : s.timing.frameMs * 0.9 + ms * 0.1;
  if (swap) glfwSwapBuffers(app.window);
  return ms;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, std::size_t(p * (v.size() - 1) + 0.5))];
}

// The element at index n / 2 of the sorted values, as percentile(v, 0.5) picks it.
double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

std::string repeatedText(const std::string& base, int n) {
  auto toks = tokenize(base);
  if (toks.empty()) toks = {"token"};
  std::string out;
  for (int k = 0; k < n; ++k) {
    if (k) out += ' ';
    out += toks[k % toks.size()];
  }
  return out;
}

// --report-timing: scripted temperature drag at T=1024 x 12 heads, then panning at T=4096.
void reportTiming(App& app) {
  AppState& s = app.s;
  Scene sc = defaultScene();
  sc.queryText = repeatedText(sc.queryText, 1024);
  sc.heads = 12;
  sc.archetypes.clear();
  s.scene.scene = sc;
  s.view = ViewState{};
  s.view.selectedRow = 512;
  markInputsDirty(s);
  for (int k = 0; k < 5; ++k) runFrame(app, nullptr, true);
  std::printf("timing: setInputs (12 heads, T=1024, d_k=%d): %.1f ms\n", sc.dHead,
              s.timing.setInputsMs);
  // Let every thumbnail catch up, then drag.
  for (int k = 0; k < 40; ++k) runFrame(app, nullptr, true);
  std::vector<double> drag, softmax, compute, ui, upload, render;
  const int n = 90;
  for (int k = 0; k < n; ++k) {
    const double u = double(k % 30) / 29.0;
    const double logTau =
        std::log(0.05) + (std::log(20.0) - std::log(0.05)) * (k / 30 % 2 ? 1 - u : u);
    s.scene.scene.params.temperature = float(std::exp(logTau));
    markTemperatureDirty(s);  // what the slider does on a change
    drag.push_back(runFrame(app, nullptr, true));
    softmax.push_back(s.timing.softmaxMs);
    compute.push_back(s.timing.computeMs);
    ui.push_back(s.timing.uiMs);
    upload.push_back(s.timing.uploadMs);
    render.push_back(s.timing.renderMs);
  }
  std::printf(
      "timing: temperature drag T=1024 H=12: slider-to-frame median %.2f ms, p90 %.2f ms, max %.2f "
      "ms "
      "(softmax of the shown head median %.2f ms; %d frames)\n",
      median(drag), percentile(drag, 0.9), percentile(drag, 1.0), median(softmax), n);
  std::printf(
      "timing:   medians: engine + view matrix %.2f ms (softmax %.2f), panels %.2f ms (of which "
      "texture "
      "upload %.2f, heatmap draw %.2f); the rest is ImGui's draw + glFinish\n",
      median(compute), median(softmax), median(ui), median(upload), median(render));
  // The same through ImGui's input: press on the temperature slider and drag it end to end.
  std::vector<double> real;
  std::vector<float> taus;
  {
    ScriptedMouse m;
    m.active = true;
    const float y = 0.5f * (s.ui.tauSlider[1] + s.ui.tauSlider[3]);
    const float x0 = s.ui.tauSlider[0] + 4, x1 = s.ui.tauSlider[2] - 4;
    m.x = x0;
    m.y = y;
    runFrame(app, &m, true);  // hover
    m.down = true;
    runFrame(app, &m, true);  // press
    for (int k = 0; k < 60; ++k) {
      const float u = float(k % 30) / 29.0f;
      m.x = x0 + (x1 - x0) * ((k / 30) % 2 ? 1 - u : u);
      const float before = s.scene.scene.params.temperature;
      const double ms = runFrame(app, &m, true);
      if (s.scene.scene.params.temperature != before) {
        real.push_back(ms);
        taus.push_back(s.scene.scene.params.temperature);
      }
    }
    m.down = false;
    runFrame(app, &m, true);
  }
  std::printf(
      "timing: real slider drag (ImGui input) T=1024 H=12: %d frames changed tau (%.3g .. %.3g), "
      "input-to-frame median %.2f ms, p90 %.2f ms\n",
      int(real.size()), taus.empty() ? 0.0 : *std::min_element(taus.begin(), taus.end()),
      taus.empty() ? 0.0 : *std::max_element(taus.begin(), taus.end()), median(real),
      percentile(real, 0.9));
  std::vector<double> maskDrag, maskCompute;
  for (int k = 0; k < 40; ++k) {
    s.scene.scene.params.mask.window = 8 + (k * 37) % 400;  // what the window slider does
    markParamsDirty(s);
    maskDrag.push_back(runFrame(app, nullptr, true));
    maskCompute.push_back(s.timing.computeMs);
  }
  s.scene.scene.params.mask.window = 0;
  markParamsDirty(s);
  std::printf(
      "timing: window-mask drag T=1024 H=12: slider-to-frame median %.2f ms, p90 %.2f ms "
      "(engine + mask + view matrix median %.2f ms; %d frames)\n",
      median(maskDrag), percentile(maskDrag, 0.9), median(maskCompute), int(maskDrag.size()));
  std::vector<double> idle;
  for (int k = 0; k < 60; ++k) idle.push_back(runFrame(app, nullptr, true));
  std::printf("timing: idle frame T=1024 H=12: median %.2f ms\n", median(idle));

  // Panning at T=4096 (one head: 12 x 4096^2 would need ~1.6 GB for scores and weights).
  sc = defaultScene();
  sc.queryText = repeatedText(sc.queryText, 4096);
  sc.heads = 1;
  sc.archetypes = {Archetype::PreviousToken};
  s.scene.scene = sc;
  s.view = ViewState{};
  markInputsDirty(s);
  for (int k = 0; k < 3; ++k) runFrame(app, nullptr, true);
  std::printf("timing: setInputs (1 head, T=4096): %.1f ms\n", s.timing.setInputsMs);
  std::vector<double> pan, fit;
  for (int k = 0; k < 30; ++k) {
    s.view.panX = float(k * 37 % 3000);
    s.view.panY = float(k * 53 % 3000);
    fit.push_back(runFrame(app, nullptr, true));  // zoom 1: pan is clamped, the whole matrix
  }
  s.view.zoom = 4.0f;
  for (int k = 0; k < 90; ++k) {
    s.view.panX = 200.0f + float(k) * 23.5f;
    s.view.panY = 100.0f + float(k) * 17.25f;
    pan.push_back(runFrame(app, nullptr, true));
  }
  std::printf(
      "timing: pan T=4096 H=1 at zoom 4: median %.2f ms, p90 %.2f ms (%d frames); fit-to-window "
      "frames median %.2f ms\n",
      median(pan), percentile(pan, 0.9), int(pan.size()), median(fit));
  std::printf("timing: GL renderer %s, backend %s\n", s.compute.glRenderer.c_str(),
              s.compute.backend.c_str());
  std::fflush(stdout);
}

}  // namespace

int runGui(int argc, char** argv) {
  Options o;
  CLI::App cli{"attnviz: see, change and export multi-head attention"};
  cli.add_option("scene_file", o.scenePositional,
                 "scene JSON to open (default: the built-in scene)");
  cli.add_option("--scene", o.scene, "scene JSON to open");
  cli.add_option("--frames", o.frames, "run this many frames, then exit");
  cli.add_option("--screenshot", o.screenshot, "save the last frame as a PNG");
  cli.add_option("--export", o.exportPath,
                 "after the last frame, export the heatmap PNG as Ctrl+S would");
  cli.add_option("--save-scene", o.saveScenePath,
                 "after the last frame, save the scene and view as JSON");
  cli.add_option("--popup", o.popup,
                 "open a dialog at start: open | save | export (for screenshots)");
  cli.add_option("--size", o.size, "window size WxH")->capture_default_str();
  cli.add_option("--temperature", o.temperature, "softmax temperature (> 0)");
  cli.add_option("--select-row", o.selectRow, "select this query row");
  cli.add_option("--head", o.head, "show this head");
  cli.add_option("--hover-cell", o.hoverCell, "move the mouse over cell I,J and print the tooltip");
  cli.add_option("--click-cell", o.clickCell, "click cell I,J (selects its row)");
  cli.add_option("--stage", o.stage, "qk | scaled | biased | logits | weights | output");
  cli.add_option("--colormap", o.colormap, "weights colormap: viridis | magma | gray | diverging");
  cli.add_option("--backend", o.backend, "cpu | gpu | auto")->capture_default_str();
  cli.add_flag("--wrong-axis", o.wrongAxis, "softmax over the wrong axis (teaching)");
  cli.add_flag("--paint", o.paint, "start in mask-painting mode (a click blocks a cell)");
  cli.add_option("--zoom", o.zoom, "initial zoom (1 = fit)");
  cli.add_option("--tokens", o.syntheticTokens, "repeat the scene's text to this many tokens");
  cli.add_option("--heads", o.heads, "number of heads");
  cli.add_option("--ui-scale", o.uiScale, "UI scale (default: the monitor's content scale)");
  cli.add_flag(
      "--report-timing", o.reportTiming,
      "print frame times of a scripted temperature drag (T=1024, 12 heads) and a pan (T=4096)");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    return 2;
  }

  App app;
  AppState& s = app.s;
  int winW = 1600, winH = 960;
  CellArg hover, click;
  try {
    if (std::sscanf(o.size.c_str(), "%dx%d", &winW, &winH) != 2 || winW < 320 || winH < 240 ||
        winW > 16384 || winH > 16384)
      throw UsageError("--size: expected WxH (at least 320x240), got '" + o.size + "'");
    hover = parseCell(o.hoverCell, "--hover-cell");
    click = parseCell(o.clickCell, "--click-cell");
    if (o.temperature && !(*o.temperature > 0.0f && std::isfinite(*o.temperature)))
      throw UsageError("--temperature: must be a finite number > 0");
    // Validated here; applied after the settings and the scene's own view are loaded.
    const ViewStage stage = o.stage.empty() ? ViewStage::Weights : stageFromKey(o.stage);
    const std::optional<ColormapId> colormap = colormapFromName(o.colormap);
    if (!o.colormap.empty() && !colormap)
      throw UsageError("--colormap: expected viridis, magma, gray or diverging, got '" +
                       o.colormap + "'");
    if (!o.scenePositional.empty() && !o.scene.empty())
      throw UsageError("give the scene either positionally or with --scene, not both");
    const std::string scenePath = o.scene.empty() ? o.scenePositional : o.scene;
    s.configDir = configDirectory();
    loadSettings(s);
    if (!scenePath.empty()) {
      loadSceneInto(s, scenePath);
    } else {
      s.scene.scene = defaultScene();
    }
    if (o.syntheticTokens > 0)
      s.scene.scene.queryText = repeatedText(s.scene.scene.queryText, o.syntheticTokens);
    if (o.heads > 0) s.scene.scene.heads = o.heads;
    if (o.temperature) s.scene.scene.params.temperature = *o.temperature;
    if (o.selectRow) s.view.selectedRow = *o.selectRow;
    if (o.head) s.view.head = *o.head;
    if (!o.stage.empty()) s.view.stage = stage;
    if (colormap) s.view.weightColormap = *colormap;
    if (o.wrongAxis) s.view.wrongAxis = true;
    if (o.paint) s.view.paintMode = true;
    if (o.popup == "open")
      s.ui.requestOpenDialog = true;
    else if (o.popup == "save")
      s.ui.requestSaveDialog = true;
    else if (o.popup == "export")
      s.exporter.requestOpen = true;
    else if (!o.popup.empty())
      throw UsageError("--popup: expected open, save or export, got '" + o.popup + "'");
    if (o.zoom > 0) s.view.zoom = o.zoom;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    return 1;
  }

  std::signal(SIGINT, onStopSignal);
  std::signal(SIGTERM, onStopSignal);
  glfwSetErrorCallback([](int code, const char* desc) {
    std::fprintf(stderr, "attnviz: GLFW error %d: %s\n", code, desc);
  });
  if (!glfwInit()) {
    std::fprintf(
        stderr,
        "attnviz: cannot open a window (no display?). Headless use: attnviz export / compute\n");
    return 1;
  }
  const bool scripted = o.frames > 0 || o.reportTiming;
  app.interactive = !scripted;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 4);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
  app.window = glfwCreateWindow(winW, winH, "attnviz", nullptr, nullptr);
  if (!app.window) {
    // No 4.3: ask for 3.3 (the heatmap needs only that; the GPU backend will say it cannot start).
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    app.window = glfwCreateWindow(winW, winH, "attnviz", nullptr, nullptr);
  }
  if (!app.window) {
    std::fprintf(stderr, "attnviz: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(app.window);
  glfwSwapInterval(scripted ? 0 : 1);
  glfwSetWindowUserPointer(app.window, &app);
  glfwSetDropCallback(app.window, onDrop);

  float xs = 1, ys = 1;
  glfwGetWindowContentScale(app.window, &xs, &ys);
  s.ui.uiScale = o.uiScale > 0 ? o.uiScale : std::clamp(std::max(xs, ys), 1.0f, 4.0f);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  // Arrow keys belong to the heatmap (rows and heads), not to ImGui's keyboard navigation.
  app.iniPath = s.configDir.empty() || scripted ? "" : s.configDir + "/imgui.ini";
  io.IniFilename = app.iniPath.empty() ? nullptr : app.iniPath.c_str();
  loadFonts(app.fonts, s.ui.uiScale);
  applyStyle(s.ui.uiScale);
  ImGui_ImplGlfw_InitForOpenGL(app.window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  int rc = 0;
  try {
    app.renderer->init();
    s.renderer = app.renderer.get();
    chooseEngine(app, o.backend);
    if (!s.compute.backendNote.empty())
      std::fprintf(stderr, "attnviz: %s\n", s.compute.backendNote.c_str());
    if (scripted) std::printf("backend: %s\n", s.compute.backend.c_str());
    // Where the presets and the UI font came from (install tests check the relocated prefix).
    if (scripted)
      std::printf("data: %s\nfont: %s\n", dataDir().c_str(), app.fonts.font->path().c_str());

    if (o.reportTiming) {
      reportTiming(app);
    } else {
      for (int frame = 0; !s.ui.quit && (o.frames < 0 || frame < o.frames); ++frame) {
        ScriptedMouse mouse;
        if (o.frames > 0) {
          // A scripted run owns the mouse: parked outside the window unless a cell is targeted.
          mouse.active = true;
          mouse.x = mouse.y = -1e6f;
        }
        const auto& g = s.view.geometry;
        auto cellCentre = [&](CellArg c) {
          mouse.active = true;
          mouse.x = g.x0 + (c.j + 0.5f - s.view.panX) * g.cellPx;
          mouse.y = g.y0 + (c.i + 0.5f - s.view.panY) * g.cellPx;
        };
        // Scripted input starts once the heatmap has been laid out (frame 2 on).
        if (g.valid && frame >= 2) {
          if (click.i >= 0 && frame <= 4) {
            cellCentre(click);
            mouse.down = frame == 3;
          } else if (hover.i >= 0) {
            cellCentre(hover);
            s.ui.printHover = true;
          }
        }
        runFrame(app, &mouse, true);
        // A run with --frames saves the last frame before it is swapped away.
        if (!o.screenshot.empty() && o.frames > 0 && frame == o.frames - 1) {
          // Rendered again without swapping so the back buffer holds exactly this frame.
          runFrame(app, &mouse, false);
          int fbw = 0, fbh = 0;
          glfwGetFramebufferSize(app.window, &fbw, &fbh);
          saveScreenshot(o.screenshot, fbw, fbh);
          std::printf("screenshot: %s (%dx%d)\n", o.screenshot.c_str(), fbw, fbh);
          const auto& g2 = s.view.geometry;
          std::printf(
              "geometry: x0=%.2f y0=%.2f w=%.2f h=%.2f cell=%.5f rows=%d cols=%d panX=%.4f "
              "panY=%.4f\n",
              g2.x0, g2.y0, g2.w, g2.h, g2.cellPx, s.display.rows, s.display.cols, s.view.panX,
              s.view.panY);
          std::fflush(stdout);
        }
        if (!o.saveScenePath.empty() && o.frames > 0 && frame == o.frames - 1) {
          saveSceneFrom(s, o.saveScenePath);
          std::printf("saved scene: %s\n", o.saveScenePath.c_str());
        }
        if (!o.exportPath.empty() && o.frames > 0 && frame == o.frames - 1) {
          exportOptionsFromView(s);
          std::printf("exported: %s\n", exportPng(s, o.exportPath).c_str());
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    rc = 1;
  }
  if (!scripted) saveSettings(s);
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  s.compute.engine.reset();  // GL objects go before the context
  s.renderer = nullptr;
  app.renderer.reset();
  glfwDestroyWindow(app.window);
  glfwTerminate();
  return rc;
}

}  // namespace attnviz::app
