// attnviz GUI: --report-timing. Frame times of scripted runs through the real frame path, as
// medians and 90th percentiles; the figures docs/performance.md and the performance targets
// (docs/design/performance.md) quote.
#include "gui/app.h"
#include "gui/screenshot.h"

#include "attnviz/formats/npy.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnviz::gui {

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, std::size_t(p * (v.size() - 1) + 0.5))];
}

// The element at index n / 2 of the sorted values, as percentile(v, 0.5) picks it.
double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Frames until the pooled view shows a tile at the pool the zoom wants (at most `limit`);
// returns the milliseconds that took, the frame times into `frames`.
double framesUntilExact(App& app, std::vector<double>& frames, int limit = 2000) {
  const auto t0 = Clock::now();
  for (int k = 0; k < limit; ++k) {
    frames.push_back(runFrame(app, nullptr, true));
    if (app.s.pooledView.tile && app.s.pooledView.exact) break;
  }
  return msSince(t0);
}

// Long contexts: T=32768, one head, pooled (nothing materialised), frames drawn while the
// worker computes (as in a window: no waiting at the frame boundary).
void reportPooledTiming(App& app) {
  AppState& s = app.s;
  Scene sc = defaultScene();
  sc.queryText = repeatedText(sc.queryText, 32768);
  sc.heads = 1;
  sc.archetypes = {Archetype::PreviousToken};
  app.waitForPooled = false;
  const auto t0 = Clock::now();
  s.session.setScene(sc);
  s.view = ViewState{};
  runFrame(app, nullptr, true);
  const double firstFrame = msSince(t0);
  std::vector<double> meanwhile;
  const double coarse = firstFrame + framesUntilExact(app, meanwhile);
  std::printf(
      "timing: pooled T=32768 H=1: first frame %.0f ms after the scene was set (inputs %.0f "
      "ms), the whole coarse level on screen after %.0f ms (worker %.0f ms; %d frames meanwhile, "
      "median %.1f ms)\n",
      firstFrame, s.session.timing().setInputsMs, coarse, s.session.pooled().lastCoarseMs(),
      int(meanwhile.size()), median(meanwhile));
  for (float zoom : {2.0f, 8.0f, 64.0f, 1024.0f}) {
    s.view.zoom = zoom;
    s.view.panX = 16384.0f - 16384.0f / zoom;
    s.view.panY = 16384.0f - 8192.0f / zoom;
    std::vector<double> frames;
    const double ms = framesUntilExact(app, frames);
    std::printf(
        "timing: pooled T=32768 zoom %g: refined (pool %d) on screen after %.0f ms (worker %.0f "
        "ms; %d frames meanwhile, median %.1f ms)\n",
        double(zoom), s.pooledView.tile ? s.pooledView.tile->pool() : 0, ms,
        s.session.pooled().lastTileMs(), int(frames.size()), median(frames));
  }
  // Pan at zoom 8, a twentieth of the view a frame, then straight back to the start.
  s.view.zoom = 8.0f;
  const float x0 = 4000.0f, y0 = 9000.0f;
  s.view.panX = x0;
  s.view.panY = y0;
  std::vector<double> settle, pan;
  framesUntilExact(app, settle);
  int exact = 0;
  for (int k = 1; k <= 60; ++k) {
    s.view.panX = x0 + float(k) * 200.0f;
    s.view.panY = y0 + float(k) * 100.0f;
    pan.push_back(runFrame(app, nullptr, true));
    exact += s.pooledView.exact;
  }
  s.view.panX = x0;
  s.view.panY = y0;
  runFrame(app, nullptr, true);
  const bool back = s.pooledView.exact;
  std::printf(
      "timing: pooled pan T=32768 zoom 8: median %.1f ms, p90 %.1f ms (%d frames, %d of them at "
      "the wanted pool); back at the start: %s; %zu tiles cached\n",
      median(pan), percentile(pan, 0.9), int(pan.size()), exact,
      back ? "refined on the first frame" : "coarser first", s.session.pooled().tilesCached());
  s.session.pooled().wait();
  app.waitForPooled = true;
}

// --report-timing with a model and --generate N: the Generate panel's worker decodes while the
// frames keep coming, paced as in a window (one a token, four a second at least), from the one
// that starts the run to the one that takes its last token; their times show whether the window
// stalls.
void reportGenerateTiming(App& app) {
  AppState& s = app.s;
  GenerateState& g = s.model.gen;
  const int asked = g.scripted;
  // Frames paced as a window's are while the worker decodes (runFrame).
  const bool interactive = std::exchange(app.interactive, true);
  std::vector<double> frames;
  const auto t0 = Clock::now();
  bool started = false;
  while (g.busy() && msSince(t0) < 600e3) {
    const double ms = runFrame(app, nullptr, true);
    if (g.run) started = true;
    if (started) frames.push_back(ms);
  }
  const int tokens = g.run ? int(g.run->tokens.size()) : 0;
  const double seconds = g.run ? g.run->seconds : 0.0;
  std::printf(
      "timing: generate %d of %d tokens on the worker in %.2f s (%.1f tokens/s): %d frames drawn "
      "meanwhile, median %.1f ms, p90 %.1f ms, max %.1f ms\n",
      tokens, asked, seconds, seconds > 0 ? tokens / seconds : 0.0, int(frames.size()),
      median(frames), percentile(frames, 0.9), percentile(frames, 1.0));
  std::fflush(stdout);
  app.interactive = interactive;
}

// --report-timing with a model and --edit-text: the edited text's pass runs on the worker while
// the frames keep coming, its progress in the status bar; then a second edit is cancelled (as the
// status bar's Cancel does) once half its layers ran, and the view keeps the first edit's pass.
void reportPassTiming(App& app) {
  AppState& s = app.s;
  ModelState& m = s.model;
  const bool wait = std::exchange(app.waitForPooled, false);
  // Frames paced as a window's are while a worker runs the pass (runFrame).
  const bool interactive = std::exchange(app.interactive, true);
  const std::string edited = m.text;
  std::vector<double> frames;
  std::vector<int> shown;  // the layer counts the status bar showed, in order
  int planned = 0;
  const auto t0 = Clock::now();
  while (m.textBusy() && msSince(t0) < 600e3) {
    const double ms = runFrame(app, nullptr, true);
    if (m.textPass.valid() && m.textProgress) {
      frames.push_back(ms);
      planned = m.textProgress->layersPlanned.load();
      const int done = m.textProgress->layersDone.load();
      if (shown.empty() || shown.back() != done) shown.push_back(done);
      if (!app.timingScreenshot.empty() && planned > 0 && done * 2 >= planned) {
        runFrame(app, nullptr, false);  // drawn again, kept in the back buffer
        int fbw = 0, fbh = 0;
        glfwGetFramebufferSize(app.window, &fbw, &fbh);
        saveScreenshot(app.timingScreenshot, fbw, fbh);
        std::printf("screenshot: %s (%dx%d) at layer %d of %d\n", app.timingScreenshot.c_str(),
                    fbw, fbh, done, planned);
        app.timingScreenshot.clear();
      }
    }
  }
  const double seconds = msSince(t0) / 1000.0;
  std::printf(
      "timing: text pass of %d tokens on the worker in %.2f s: %d frames drawn meanwhile, median "
      "%.1f ms, p90 %.1f ms, max %.1f ms; the status bar showed %d layer counts of %d planned\n",
      m.source ? int(m.source->tokens().size()) : 0, seconds, int(frames.size()), median(frames),
      percentile(frames, 0.9), percentile(frames, 1.0), int(shown.size()), planned);
  // A second edit, cancelled half way.
  std::snprintf(m.text, sizeof m.text, "%s", ("Cancelled: " + edited).c_str());
  m.textEditedAt = 0;
  int atCancel = -1, atStop = -1, total = 0;
  double stopMs = 0;
  const auto t1 = Clock::now();
  while (m.textBusy() && msSince(t1) < 600e3) {
    runFrame(app, nullptr, true);
    if (atCancel >= 0 || !m.textPass.valid() || !m.textProgress) continue;
    const std::shared_ptr<PassProgress> p = m.textProgress;
    total = p->layersPlanned.load();
    if (total > 0 && p->layersDone.load() * 2 >= total) {
      atCancel = p->layersDone.load();
      const auto cancelledAt = Clock::now();
      cancelPass(s);
      // The worker's count once it stopped (the layer running when Cancel came ends first).
      m.textPass.wait();
      atStop = p->layersDone.load();
      stopMs = msSince(cancelledAt);
    }
  }
  std::printf(
      "timing: second pass cancelled at layer %d of %d: the worker stopped after layer %d, %.0f ms "
      "after Cancel; the view shows %s\n",
      atCancel, total, atStop, stopMs,
      m.source && m.source->text() == edited ? "the first edit's pass" : "another text");
  std::printf("timing: notice: %s\n", s.ui.notice.c_str());
  // The Model panel's "Ablate head 0:0" re-runs every layer on the worker: once to its end, once
  // cancelled half way (the head is restored: the interventions the pass ran with).
  for (int round = 0; round < 2; ++round) {
    const bool cancel = round == 1;
    m.actions.push_back([cancel](AppState& st) { st.model.source->setAblated(0, 0, !cancel); });
    if (cancel) m.actions.push_back([](AppState& st) { st.model.source->setAblated(1, 0, true); });
    std::vector<double> rf;
    int at = -1, of = 0;
    const auto t3 = Clock::now();
    runFrame(app, nullptr, true);  // runs the actions: the source records them, the worker starts
    const bool recorded = m.source->ablated(0, 0) != cancel;
    while (m.textBusy() && msSince(t3) < 600e3) {
      const double ms = runFrame(app, nullptr, true);
      if (!m.rerun.valid() || !m.rerunProgress) continue;
      rf.push_back(ms);
      of = m.rerunProgress->layersPlanned.load();
      if (cancel && at < 0 && of > 0 && m.rerunProgress->layersDone.load() * 2 >= of) {
        at = m.rerunProgress->layersDone.load();
        cancelPass(s);
      }
    }
    const LayerIntervention* li = m.source->pass().interventions.find(0);
    const bool inPass = li && !li->ablatedHeads.empty();
    if (!cancel)
      std::printf(
          "timing: ablation re-run of %d layers on the worker in %.2f s: %d frames drawn "
          "meanwhile, median %.1f ms; recorded at once: %s; in the pass after: %s\n",
          of, msSince(t3) / 1000.0, int(rf.size()), median(rf), recorded ? "yes" : "no",
          inPass ? "yes" : "no");
    else
      std::printf(
          "timing: ablation re-run cancelled at layer %d of %d: head 0:0 %s, head 1:0 %s (the "
          "pass ran with 0:0 ablated); the pass %s\n",
          at, of, m.source->ablated(0, 0) ? "ablated" : "restored",
          m.source->ablated(1, 0) ? "ablated" : "restored",
          m.source->stale() ? "is stale" : "matches its interventions");
  }
  std::printf("timing: notice: %s\n", s.ui.notice.c_str());
  // The same model opened again, cancelled half way through its first pass: the open one stays.
  const std::string dir = m.dir;
  const ModelSource* before = m.source.get();
  openModel(s, dir);
  int openAt = -1, openTotal = 0;
  const auto t2 = Clock::now();
  while (m.loading.valid() && msSince(t2) < 600e3) {
    runFrame(app, nullptr, true);
    if (openAt >= 0 || !m.progress) continue;
    const PassProgress& p = m.progress->pass;
    openTotal = p.layersPlanned.load();
    if (openTotal > 0 && p.layersDone.load() * 2 >= openTotal) {
      openAt = p.layersDone.load();
      cancelPass(s);
    }
  }
  runFrame(app, nullptr, true);
  std::printf(
      "timing: reopening cancelled at layer %d of %d of its first pass; the open model %s\n",
      openAt, openTotal,
      m.source.get() == before && m.source->text() == edited ? "stays" : "was replaced");
  std::printf("timing: notice: %s\n", s.ui.notice.c_str());
  std::fflush(stdout);
  app.waitForPooled = wait;
  app.interactive = interactive;
}

// --report-timing with an encoder-decoder and --edit-text (or --edit-target), then --generate N:
// the edited texts' pass runs on the worker while the frames keep coming, its layers in the
// status bar; then N tokens of watched translation, each one decode step over the caches on the
// worker. Frames are paced as in a window.
void reportSeq2SeqTiming(App& app) {
  AppState& s = app.s;
  DumpState& d = s.dump;
  const bool wait = std::exchange(app.waitForPooled, false);
  const bool interactive = std::exchange(app.interactive, true);
  std::vector<double> frames;
  std::vector<int> shown;  // the layer counts the status bar showed, in order
  int planned = 0;
  auto passPending = [&] {
    return d.rerun || d.seq2seq->stale() || (d.job.valid() && !d.jobStep);
  };
  const auto t0 = Clock::now();
  while (d.seq2seq && passPending() && msSince(t0) < 600e3) {
    const double ms = runFrame(app, nullptr, true);
    if (d.job.valid() && !d.jobStep && d.jobProgress) {
      frames.push_back(ms);
      planned = d.jobProgress->layersPlanned.load();
      const int done = d.jobProgress->layersDone.load();
      if (shown.empty() || shown.back() != done) shown.push_back(done);
    }
  }
  const double passSeconds = msSince(t0) / 1000.0;
  const Seq2SeqSource& q = *d.seq2seq;
  std::printf(
      "timing: seq2seq pass of %d source and %d target tokens on the worker in %.2f s: %d frames "
      "drawn meanwhile, median %.1f ms, p90 %.1f ms, max %.1f ms; the status bar showed %d layer "
      "counts of %d planned\n",
      int(q.sourceIds().size()), int(q.decoderIds().size()), passSeconds, int(frames.size()),
      median(frames), percentile(frames, 0.9), percentile(frames, 1.0), int(shown.size()),
      planned);
  std::fflush(stdout);
  // Watched translation (--generate N): a decode step a token on the worker.
  DumpState::Translate& t = d.translate;
  std::vector<double> tf;
  const auto t1 = Clock::now();
  while ((t.left > 0 || t.requested > 0 || s.model.gen.scripted > 0 || d.job.valid()) &&
         msSince(t1) < 600e3)
    tf.push_back(runFrame(app, nullptr, true));
  if (t.used()) {
    const double seconds = msSince(t1) / 1000.0;
    const int n = int(t.ids.size());
    std::printf(
        "timing: seq2seq translate %d tokens on the worker in %.2f s (decode steps %.2f ms a "
        "token): %d frames drawn meanwhile, median %.1f ms, p90 %.1f ms; stopped: %s\n",
        n, seconds, n > 0 ? 1000.0 * t.stepSeconds / n : 0.0, int(tf.size()), median(tf),
        percentile(tf, 0.9), t.stop.c_str());
    std::string ids;
    for (int id : t.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    std::printf("timing: seq2seq translated ids=%s\n", ids.c_str());
  }
  std::fflush(stdout);
  app.waitForPooled = wait;
  app.interactive = interactive;
}

}  // namespace

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

// --report-timing with --tokens N: the scene as the command line set it, from its inputs to its
// first frame (drawn, and every head's thumbnail after it), then exit. With /usr/bin/time -v
// this gives the memory figures of docs/performance.md.
void reportFirstFrame(App& app) {
  AppState& s = app.s;
  const auto t0 = Clock::now();
  runFrame(app, nullptr, true);
  const double first = msSince(t0);
  const Dims d = s.session.dims();
  std::printf(
      "timing: first frame T=%d H=%d: %.0f ms (inputs %.0f ms, softmax %.0f ms); %s\n", d.Tq, d.H,
      first, s.session.timing().setInputsMs, s.session.timing().softmaxMs,
      s.session.pooledMode()      ? "pooled: nothing materialised"
      : s.session.headsStreamed() ? "only the shown head materialised"
                                  : "every head materialised");
  int frames = 0;
  while (!s.session.allHeadsFresh() && frames < 10000) {
    runFrame(app, nullptr, true);
    ++frames;
  }
  if (s.session.pooledMode()) s.session.pooled().wait();
  std::printf("timing: every head's thumbnail after %.0f ms (%d more frames)\n", msSince(t0),
              frames);
  std::fflush(stdout);
}

// --report-timing with --model alone: frames drawn while the model opens and runs its first pass,
// paced as in a window; each layer is drawn as the pass finishes it (open_preview_panel.cpp).
// Times from openModel: Model::open's end, the first heatmap drawn (the shown layer's head), the
// whole layers x heads grid drawn, and the model's full view (the pass adopted, its heatmap
// drawn). With --screenshot, the frame of the first heatmap; with --first-heatmap-npy, its matrix.
void reportOpenTiming(App& app) {
  AppState& s = app.s;
  ModelState& m = s.model;
  const std::shared_ptr<ModelLoadProgress> progress = m.progress;
  const bool wait = std::exchange(app.waitForPooled, false);
  const bool interactive = std::exchange(app.interactive, true);
  OpenPreview& p = progress->preview;
  auto sincePreview = [&] {
    return std::chrono::duration<double, std::milli>(OpenPreview::Clock::now() - p.start).count();
  };
  int frames = 0;
  bool shot = false;
  while (m.loading.valid() && sincePreview() < 600e3) {
    runFrame(app, nullptr, true);
    ++frames;
    bool drawn;
    {
      std::lock_guard<std::mutex> lock(p.m);
      drawn = p.firstHeatmapMs >= 0;
    }
    if (drawn && !shot && !app.timingScreenshot.empty()) {
      shot = true;
      runFrame(app, nullptr, false);  // drawn again, kept in the back buffer
      int fbw = 0, fbh = 0;
      glfwGetFramebufferSize(app.window, &fbw, &fbh);
      saveScreenshot(app.timingScreenshot, fbw, fbh);
      std::printf("screenshot: %s (%dx%d) at the first heatmap\n", app.timingScreenshot.c_str(),
                  fbw, fbh);
      app.timingScreenshot.clear();
    }
  }
  // The frame that adopts the pass draws the full view.
  runFrame(app, nullptr, true);
  const double full = sincePreview();
  std::lock_guard<std::mutex> lock(p.m);
  std::printf(
      "timing: open %s: Model::open %.0f ms; first heatmap (layer %d, head %d, T=%d) drawn %.0f "
      "ms after the open began, %d of %d layers done then (that layer finished at %.0f ms); the "
      "whole layers x heads grid drawn %.0f ms (the last layer finished at %.0f ms); the full "
      "view %.0f ms; %d frames meanwhile\n",
      m.dir.c_str(), p.openedMs, p.heatmapLayer, p.heatmapHead, p.tokens, p.firstHeatmapMs,
      p.layersAtFirstHeatmap, p.layers,
      p.heatmapLayer >= 0 ? p.layerDoneMs[std::size_t(p.heatmapLayer)] : -1.0, p.wholeGridMs,
      p.layers > 0 ? p.layerDoneMs.back() : -1.0, full, frames);
  if (!app.firstHeatmapNpy.empty()) {
    if (p.firstHeatmap.empty()) throw InputError("no heatmap was drawn while the pass ran");
    saveNpy(app.firstHeatmapNpy, p.firstHeatmap);
  }
  std::fflush(stdout);
  app.waitForPooled = wait;
  app.interactive = interactive;
}

// --report-timing: scripted temperature drag at T=1024 x 12 heads, then panning at T=4096.
void reportTiming(App& app) {
  AppState& s = app.s;
  if (s.model.loading.valid() && s.model.progress) {  // --model M --report-timing
    reportOpenTiming(app);
    return;
  }
  if (s.dump.seq2seq && (s.dump.busy() || s.model.gen.scripted > 0)) {  // --model SEQ2SEQ
    reportSeq2SeqTiming(app);
    return;
  }
  if (s.model.open() && s.model.gen.scripted > 0) {  // --model M --generate N --report-timing
    reportGenerateTiming(app);
    return;
  }
  if (s.model.open() && s.model.textBusy()) {  // --model M --edit-text T --report-timing
    reportPassTiming(app);
    return;
  }
  Scene sc = defaultScene();
  sc.queryText = repeatedText(sc.queryText, 1024);
  sc.heads = 12;
  sc.archetypes.clear();
  s.session.setScene(sc);
  s.view = ViewState{};
  s.view.selectedRow = 512;
  for (int k = 0; k < 5; ++k) runFrame(app, nullptr, true);
  std::printf("timing: setInputs (12 heads, T=1024, d_k=%d): %.1f ms\n", sc.dHead,
              s.session.timing().setInputsMs);
  // Let every thumbnail catch up, then drag.
  for (int k = 0; k < 40; ++k) runFrame(app, nullptr, true);
  std::vector<double> drag, softmax, compute, ui, upload, render;
  const int n = 90;
  for (int k = 0; k < n; ++k) {
    const double u = double(k % 30) / 29.0;
    const double logTau =
        std::log(0.05) + (std::log(20.0) - std::log(0.05)) * (k / 30 % 2 ? 1 - u : u);
    s.session.setTemperature(float(std::exp(logTau)));  // what the slider does on a change
    drag.push_back(runFrame(app, nullptr, true));
    softmax.push_back(s.session.timing().softmaxMs);
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
      const float before = s.sceneData().params.temperature;
      const double ms = runFrame(app, &m, true);
      if (s.sceneData().params.temperature != before) {
        real.push_back(ms);
        taus.push_back(s.sceneData().params.temperature);
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
    s.session.editScene().params.mask.window = 8 + (k * 37) % 400;  // the window slider
    s.session.touchMask();
    maskDrag.push_back(runFrame(app, nullptr, true));
    maskCompute.push_back(s.timing.computeMs);
  }
  s.session.editScene().params.mask.window = 0;
  s.session.touchMask();
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
  s.session.setScene(sc);
  s.view = ViewState{};
  for (int k = 0; k < 3; ++k) runFrame(app, nullptr, true);
  std::printf("timing: setInputs (1 head, T=4096): %.1f ms\n", s.session.timing().setInputsMs);
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
  reportPooledTiming(app);
  std::printf("timing: GL renderer %s, backend %s\n", s.backend.glRenderer.c_str(),
              s.backend.backend.c_str());
  std::fflush(stdout);
}

}  // namespace attnviz::gui
