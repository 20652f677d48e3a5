// attnviz GUI: the running application (window, state, renderer) and the per-frame entry
// points shared by the main loop, the scripted driver and --report-timing.
#pragma once

#include "gui/app_state.h"
#include "gui/fonts.h"
#include "gui/heatmap_renderer.h"

#include <chrono>
#include <memory>
#include <string>

struct GLFWwindow;

namespace attnviz::gui {

// What a script does to ImGui's input in one frame (the real input path: io.MousePos etc.).
struct ScriptedMouse {
  bool active = false;
  float x = 0, y = 0;
  bool down = false;
};

struct App {
  GLFWwindow* window = nullptr;  // owned by the Window guard in gui_main.cpp
  AppState s;
  std::unique_ptr<HeatmapRenderer> renderer = std::make_unique<HeatmapRenderer>();
  std::unique_ptr<HeatmapRenderer> pooledRenderer = std::make_unique<HeatmapRenderer>();
  std::string shownTitle;  // the window title's scene title
  int quietFrames = 0;     // frames since the last input event (interactive runs only)
  // When the last frame's work began, after its wait for events (the status bar's FPS).
  std::chrono::steady_clock::time_point lastWorkStart;
  UiFonts fonts;           // the atlas and the fallback faces merged into it
  bool interactive = true;
  // A scripted run waits at each frame boundary for the pooled worker and for an edited text's
  // pass (deterministic screenshots); --report-timing turns it off to time frames while the
  // worker runs.
  bool waitForPooled = false;
  // --report-timing with --screenshot (a model's edited text): the frame half way through the
  // pass, its progress bar in the status bar.
  std::string timingScreenshot;
  // --first-heatmap-npy: the first heatmap drawn while a model's first pass ran, as .npy.
  std::string firstHeatmapNpy;
};

// frame.cpp: one frame (events, session, panels, render). Returns the milliseconds from its
// start until the GPU finished drawing it. `swap` presents it.
double runFrame(App& app, const ScriptedMouse* mouse, bool swap);
// The window is open (true) or about to close (false): wakeFrameLoop posts events only between.
void setFrameWake(bool open);
// Set by SIGINT/SIGTERM: the loop ends normally, so settings are saved.
void requestStop();

// layout.cpp: the whole window: menu bar, the three columns of panels, status bar, popups.
void drawLayout(App& app);

// gui/drivers/report_timing.cpp: --report-timing, a scripted temperature drag at T=1024 x 12 heads, a real
// slider drag, a mask drag, idle frames and panning at T=4096; prints "timing: ..." lines.
// With a model and --generate N instead: the frame times while the Generate panel's worker
// decodes N tokens; with a model and --edit-text, while the edited text's pass runs, then a
// second edit cancelled half way. With an encoder-decoder and --edit-text (--edit-target), then
// --generate N: the frame times while its pass runs on the worker, then while it translates.
void reportTiming(App& app);
// --report-timing with --tokens N: the command line's scene to its first frame, then exit.
void reportFirstFrame(App& app);
// The scene's text repeated to n tokens.
std::string repeatedText(const std::string& base, int n);

}  // namespace attnviz::gui
