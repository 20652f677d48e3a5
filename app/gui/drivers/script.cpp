#include "gui/drivers/script.h"

#include "gui/screenshot.h"
#include "panels/panels.h"
#include "panels/row_inspector.h"

#include "attnviz/engine/ggml_kernels.h"  // fastActivations

#include <GLFW/glfw3.h>

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace attnviz::gui {

CellArg parseCell(const std::string& text, const char* option) {
  CellArg c;
  if (text.empty()) return c;
  if (std::sscanf(text.c_str(), "%d,%d", &c.i, &c.j) != 2 || c.i < 0 || c.j < 0)
    throw UsageError(std::string(option) + ": expected I,J (two non-negative integers), got '" +
                     text + "'");
  return c;
}

namespace {

// "first=F n=N values=v0,v1,...": a row of numbers, exact (%.9g), -inf where masked.
void printValues(int first, const float* v, int n) {
  std::printf("first=%d n=%d values=", first, n);
  for (int k = 0; k < n; ++k) std::printf(k ? ",%.9g" : "%.9g", double(v[k]));
  std::printf("\n");
}

// The selected row as the heatmap shows it: the display matrix's row (its stage and mode), or in
// pooled mode the row of the tile on screen when it holds one cell a texel; then the row as the
// row inspector showed it. Tests hold the two against each other.
void printSelectedRow(const AppState& s) {
  const int i = s.view.selectedRow;
  const DisplayMatrix& d = s.display();
  if (i < 0 || i >= d.rows) return;
  const View& v = s.session.view();
  if (!d.pooled) {
    std::printf(
        "heatmap-row: row=%d stage=%s wrong_axis=%d average=%d pooled=0 sum=%.9g min=%.9g "
        "max=%.9g ",
        i, stageKey(v.stage), int(v.wrongAxis), int(v.headAverage), double(d.rowSums[i]),
        double(d.minFinite), double(d.maxFinite));
    printValues(0, d.values.data() + std::size_t(i) * d.cols, d.cols);
  } else if (const auto& tile = s.pooledView.tile;
             tile && tile->w.poolQ == 1 && i >= tile->w.r0 && i < tile->w.r1) {
    const PooledWeights& w = tile->w;
    std::vector<float> row(std::size_t(w.width));
    for (int x = 0; x < w.width; ++x) {
      const std::size_t n = w.at(i - w.r0, x);
      row[std::size_t(x)] = w.masked[n] ? -INFINITY : w.max[n];
    }
    std::printf(
        "heatmap-row: row=%d stage=weights wrong_axis=0 average=0 pooled=1 sum=%.9g min=0 "
        "max=%.9g ",
        i, double(d.rowSums[i]), double(d.maxFinite));
    printValues(w.c0, row.data(), w.width);
  }
  const RowInspectorValues& r = rowInspectorValues();
  if (r.row >= 0) {
    std::printf("row-inspector-values: row=%d what=%s ", r.row, r.what.c_str());
    printValues(r.first, r.values.data(), int(r.values.size()));
    if (g_residualShown.token >= 0)
      std::printf("residual: token=%d dim=%d stream=%d largest=%.9g over_median=%.9g marked=%d\n",
                  g_residualShown.token, g_residualShown.dim, g_residualShown.stream,
                  double(g_residualShown.largest), double(g_residualShown.overMedian),
                  g_residualShown.marked);
    if (g_neuronShown.layer >= 0)
      std::printf("neuron-view: layer=%d head=%d row=%d key=%d score=%.9g terms=%.9g pairs=%.9g "
                  "plain=%.9g\n",
                  g_neuronShown.layer, g_neuronShown.head, g_neuronShown.row, g_neuronShown.key,
                  double(g_neuronShown.score), double(g_neuronShown.termSum),
                  double(g_neuronShown.pairSum), double(g_neuronShown.plainScore));
    if (g_whyHereShown.layer >= 0)
      std::printf("why-here: layer=%d head=%d query=%d key=%d score=%.6f sum=%.6f top=%s,%s,%.6f\n",
                  g_whyHereShown.layer, g_whyHereShown.head, g_whyHereShown.query,
                  g_whyHereShown.key, g_whyHereShown.score, g_whyHereShown.sum,
                  g_whyHereShown.topQ.c_str(), g_whyHereShown.topK.c_str(), g_whyHereShown.top);
    if (r.kvHead >= 0)
      std::printf("row-inspector-qk-norms: row=%d kv_head=%d q=%.9g,%.9g k=%.9g,%.9g\n", r.row,
                  r.kvHead, double(r.qBefore), double(r.qAfter), double(r.kBefore),
                  double(r.kAfter));
  }
}

// The Generate panel's continuation and the selected step's attention row (the shown layer and
// head), for tests to compare with `attnviz generate --print-ids` and `attnviz model --weights`.
void printGeneration(const AppState& s) {
  const GenerateState& g = s.model.gen;
  if (!g.run) return;
  std::string line;
  for (int id : g.prompt) line += " " + std::to_string(id);
  std::printf("generate-prompt-ids:%s\n", line.c_str());
  line.clear();
  for (const GeneratedToken& t : g.run->tokens) line += " " + std::to_string(t.id);
  std::printf("generated-ids:%s\n", line.c_str());
  // Whether the fast path is on, and whether this level has its 8-bit kernels (the baseline
  // level has none: its steps stay exact).
  std::printf("generate-fast-activations: %s kernels=%s\n", fastActivations() ? "on" : "off",
              fastActivationKernel(GgmlType::Q8_0) ? "yes" : "no");
  if (g.plain) {  // the compare view's continuation without the interventions
    line.clear();
    for (const GeneratedToken& t : g.plain->tokens) line += " " + std::to_string(t.id);
    std::printf("generated-plain-ids:%s\n", line.c_str());
  }
  if (g.step < 1 || g.step > int(g.run->tokens.size())) return;
  const GeneratedToken& t = g.run->tokens[std::size_t(g.step - 1)];
  const int layer = s.model.layer, head = s.view.head;
  if (layer >= int(t.rows.size()) || head >= t.rows[std::size_t(layer)].heads) return;
  const Tensor3& row = t.rows[std::size_t(layer)];
  std::printf("generate-step: step=%d layer=%d head=%d keys=%d\n", g.step, layer, head, row.cols);
  const float* v = row.data.data() + std::size_t(head) * row.cols;
  std::printf("generate-row: ");
  for (int k = 0; k < row.cols; ++k) std::printf(k ? ",%.9g" : "%.9g", double(v[k]));
  std::printf("\n");
}

// The Attribution panel's map as it was drawn, its values (exact) and its timing: the time from
// Run to the worker's first finished row, and to the first frame that drew it.
void printAttribution(const AppState& s) {
  const AttributionState& a = s.model.attr;
  if (!a.run) return;
  AttributionRun& r = *a.run;
  std::lock_guard<std::mutex> lock(r.m);
  const auto& g = a.grid;
  if (g.valid)
    std::printf("attribution-grid: x0=%.2f y0=%.2f cell=%.2f rows=%d cols=%d\n", g.x0, g.y0,
                g.cell, g.rows, g.cols);
  std::printf(
      "attribution: rows_done=%d of %d done=%d error=%s first_row_ms=%.1f first_shown_ms=%.1f "
      "total_ms=%.1f\n",
      r.rowsDone, r.rows, int(r.done.load()), r.error.empty() ? "-" : r.error.c_str(),
      r.firstRowAt < 0 ? -1.0 : 1000.0 * (r.firstRowAt - r.startedAt),
      a.firstShownAt < 0 ? -1.0 : 1000.0 * (a.firstShownAt - r.startedAt),
      r.finishedAt < 0 ? -1.0 : 1000.0 * (r.finishedAt - r.startedAt));
  if (r.haveReport)
    std::printf("attribution-target: position=%d target=%d foil=%d patch=%d\n", r.report.position,
                r.report.target, r.report.foil, int(r.report.patch));
  std::printf("attribution-values: ");
  for (std::size_t k = 0; k < r.values.size(); ++k)
    std::printf(k ? ",%.9g" : "%.9g", double(r.values[k]));
  std::printf("\n");
}

}  // namespace

// --print-fill: the [MASK] fill panel's lists, each line as `attnviz fill` prints its own
// (position, id, probability, piece), after "fill-after\t" (with the interventions) or
// "fill-before\t" (without them).
static void printFill(AppState& s) {
  if (s.model.fill.textFor != s.model.passVersion) refreshFill(s);
  const FillState& f = s.model.fill;
  if (!f.error.empty()) std::printf("fill-error: %s\n", f.error.c_str());
  const Tokenizer& tok = s.model.source->model().tokenizer();
  for (const auto* list : {&f.after, &f.before})
    for (const MaskFill& m : *list)
      for (const auto& [id, p] : m.top)
        std::printf("%s\t%d\t%d\t%.6f\t%s\n", list == &f.after ? "fill-after" : "fill-before",
                    m.position, id, p, tok.printable(id).c_str());
  std::fflush(stdout);
}

void runScript(App& app, const Script& script) {
  AppState& s = app.s;
  std::vector<std::string> dropWhileBusy = script.dropWhileBusy;
  const double genDeadline = nowSeconds() + 600;
  for (int frame = 0; !s.ui.quit && (script.frames < 0 || frame < script.frames); ++frame) {
    ScriptedMouse mouse;
    if (script.frames > 0) {
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
      if (script.click.i >= 0 && frame <= 4) {
        cellCentre(script.click);
        mouse.down = frame == 3;
      } else if (script.hover.i >= 0) {
        cellCentre(script.hover);
        s.ui.printHover = true;
      }
    }
    // --attribution-click: once the attribution has run and its map is laid out, the mouse
    // moves onto the cell, presses and releases (three frames).
    AttributionState& attr = s.model.attr;
    const bool attrClickPending = s.model.open() && attr.clickLayer >= 0 && attr.clickPhase < 3;
    if (attrClickPending && !attr.busy() && attr.run && attr.grid.valid && frame >= 2) {
      mouse.active = true;
      mouse.x = attr.grid.x0 + (attr.clickHead + 0.5f) * attr.grid.cell;
      mouse.y = attr.grid.y0 + (attr.clickLayer + 0.5f) * attr.grid.cell;
      mouse.down = attr.clickPhase == 1;
      ++attr.clickPhase;
    }
    if (!dropWhileBusy.empty()) {
      const auto running = [](const auto& job) {
        return job.valid() && job.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
      };
      const char* which = running(s.model.retrieval.job)   ? "retrieval"
                          : running(s.model.cacheLoss.job) ? "cache-loss"
                                                           : nullptr;
      if (which) {
        std::printf("drop-while-busy: %s running\n", which);
        for (const std::string& d : dropWhileBusy) s.ui.dropped.push_back(d);
        dropWhileBusy.clear();
      }
    }
    // --hover-patch: the mouse over that patch of the image view, once it is laid out.
    if (const ImageViewState& iv = s.image;
        iv.active && iv.pass && iv.geometry.valid && iv.scriptHoverRow >= 0 && frame >= 2) {
      const float px = float(iv.pass->model.config().patchSize) * iv.geometry.scale;
      mouse.active = true;
      mouse.x = iv.geometry.x0 + (float(iv.scriptHoverCol) + 0.5f) * px;
      mouse.y = iv.geometry.y0 + (float(iv.scriptHoverRow) + 0.5f) * px;
    }
    // --click-side, then --hover-side: the mouse on a cell of the image view's side panel (a
    // click moves there, presses and releases over three frames).
    if (ImageViewState& iv = s.image; iv.active && iv.pass && iv.sideGeometry.valid && frame >= 2) {
      const auto onSide = [&](int r, int c) {
        mouse.active = true;
        mouse.x = iv.sideGeometry.x0 + (float(c) + 0.5f) * iv.sideGeometry.cellW;
        mouse.y = iv.sideGeometry.y0 + (float(r) + 0.5f) * iv.sideGeometry.cellH;
      };
      if (iv.scriptSideClickRow >= 0 && iv.sideClickPhase < 3) {
        onSide(iv.scriptSideClickRow, iv.scriptSideClickCol);
        mouse.down = iv.sideClickPhase == 1;
        ++iv.sideClickPhase;
      } else if (iv.scriptSideHoverRow >= 0) {
        onSide(iv.scriptSideHoverRow, iv.scriptSideHoverCol);
      }
    }
    runFrame(app, &mouse, true);
    // A scripted run's last frame waits (up to 10 minutes) for the Generate and Attribution
    // panels to finish (and a scripted click on the attribution's map to be made).
    const bool attrBusy =
        s.model.open() && (attr.busy() || (attr.clickLayer >= 0 && attr.clickPhase < 3) ||
                           s.model.heads.busy() || s.model.heads.wantSequence >= 0 ||
                           s.model.retrieval.job.valid() || s.model.cacheLoss.job.valid());
    const bool translating = s.dump.seq2seq && (s.dump.busy() || s.model.gen.scripted > 0);
    if (script.frames > 0 && frame == script.frames - 1 &&
        ((s.model.open() && (s.model.gen.busy() || attrBusy)) || translating) &&
        nowSeconds() < genDeadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --frame;
      continue;
    }
    // A run with --frames saves the last frame before it is swapped away.
    if (!script.screenshot.empty() && script.frames > 0 && frame == script.frames - 1) {
      // Rendered again without swapping so the back buffer holds exactly this frame.
      runFrame(app, &mouse, false);
      int fbw = 0, fbh = 0;
      glfwGetFramebufferSize(app.window, &fbw, &fbh);
      saveScreenshot(script.screenshot, fbw, fbh);
      std::printf("screenshot: %s (%dx%d)\n", script.screenshot.c_str(), fbw, fbh);
      const auto& g2 = s.view.geometry;
      std::printf(
          "geometry: x0=%.2f y0=%.2f w=%.2f h=%.2f cell=%.5f rows=%d cols=%d panX=%.4f "
          "panY=%.4f\n",
          g2.x0, g2.y0, g2.w, g2.h, g2.cellPx, s.display().rows, s.display().cols, s.view.panX,
          s.view.panY);
      if (s.session.pooledMode()) {
        const auto& pv = s.pooledView;
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        std::printf(
            "pooled: pool=%d exact=%d tile=[%d,%d)x[%d,%d) coarse_ms=%.1f tile_ms=%.1f "
            "peak_rss_mb=%ld\n",
            pv.tile ? pv.tile->pool() : 0, int(pv.exact), pv.tile ? pv.tile->w.r0 : 0,
            pv.tile ? pv.tile->w.r1 : 0, pv.tile ? pv.tile->w.c0 : 0, pv.tile ? pv.tile->w.c1 : 0,
            s.session.pooled().lastCoarseMs(), s.session.pooled().lastTileMs(),
            long(ru.ru_maxrss / 1024));
      }
      if (s.rowShown.row >= 0) {
        const RowInspectorShown& r = s.rowShown;
        std::printf(
            "row-inspector: row=%d head=%d pooled=%d top_key=%d top_weight=%.6f sum=%.6f "
            "entropy=%.6f allowed=%d fully_masked=%d row_ms=%.3f\n",
            r.row, r.head, int(r.pooled), r.topKey, double(r.topWeight), double(r.sum),
            double(r.entropy), r.allowed, int(r.fullyMasked), s.session.lastPooledRowMs());
      }
      printSelectedRow(s);
      if (s.flash.active && s.flash.walk) {
        const FlashWalkthrough& w = *s.flash.walk;
        const FlashWalkthrough::Tile t = w.current();
        std::printf(
            "flash: step=%d steps=%d blocks=%dx%d queryBlock=%d keyBlock=%d skipped=%d "
            "done=%d maxOutputDiff=%.9g maxWeightDiff=%.9g\n",
            w.step() + 1, w.steps(), w.blockRows(), w.blockKeys(), w.step() < 0 ? -1 : t.queryBlock,
            w.step() < 0 ? -1 : t.keyBlock, int(w.step() >= 0 && t.skipped), int(w.done()),
            double(w.maxOutputDifference()), double(w.maxWeightDifference()));
      }
      if (s.dump.open()) {
        const auto& mg = s.model.grid;
        std::printf("model-grid: x0=%.2f y0=%.2f thumb=%.2f pitch=%.2f layers=%d heads=%d\n",
                    mg.x0, mg.y0, mg.thumb, mg.pitch, s.dump.source->layers(), s.heads());
        std::printf("dump-layer: %d qkv=%d\n", s.dump.layer,
                    int(s.dump.source->hasQkv(s.dump.layer)));
        if (g_panelVertices.positionBias >= 0)
          std::printf("panel-vertices: position-bias=%d\n", g_panelVertices.positionBias);
        if (const Seq2SeqSource* q = s.dump.seq2seq.get()) {
          const SiteId& site = q->sites().at(s.dump.layer);
          std::string masked;
          for (int p : q->maskedSource()) masked += (masked.empty() ? "" : ",") + std::to_string(p);
          std::printf("seq2seq-view: site=%s head=%d rows=%d cols=%d ablated=%d masked-source=%s\n",
                      seq2seqSiteName(site).c_str(), s.view.head,
                      s.dump.source->dump().layers[s.dump.layer].weights.rows,
                      s.dump.source->dump().layers[s.dump.layer].weights.cols,
                      int(q->ablations().size()), masked.empty() ? "-" : masked.c_str());
          for (const TokenProb& t : s.dump.before)
            std::printf("next-token before: %d %.6f\n", t.id, double(t.prob));
          for (const TokenProb& t : s.dump.after)
            std::printf("next-token after: %d %.6f\n", t.id, double(t.prob));
          printAlignment(s);
          printPositionBias(s);
          if (s.dump.translate.used()) {
            std::string ids;
            for (int id : s.dump.translate.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
            std::printf("translated: ids=%s stop=%s target=%s\n", ids.c_str(),
                        s.dump.translate.stop.c_str(), q->targetText().c_str());
          }
        }
      }
      if (s.model.open()) {
        const auto& mg = s.model.grid;
        std::printf("model-grid: x0=%.2f y0=%.2f thumb=%.2f pitch=%.2f layers=%d heads=%d\n",
                    mg.x0, mg.y0, mg.thumb, mg.pitch, s.model.source->layers(),
                    s.model.source->heads());
        std::printf("model-layer: %d\n", s.model.layer);
        for (std::size_t k = 0; k < s.model.before.size(); ++k)
          std::printf("next-token before: %d %.6f\n", s.model.before[k].id, s.model.before[k].prob);
        for (std::size_t k = 0; k < s.model.after.size(); ++k)
          std::printf("next-token after: %d %.6f\n", s.model.after[k].id, s.model.after[k].prob);
        printGeneration(s);
        if (const CacheLossState::Result& cl = s.model.cacheLoss.result; !cl.dense.empty()) {
          auto mean = [](const std::vector<float>& v) {
            double t = 0;
            for (float x : v) t += x;
            return t / double(v.size());
          };
          std::printf("cache-loss: sinks=%d window=%d dense=%.9g sinks_window=%.9g window_only=%.9g\n",
                      cl.sinks, cl.window, mean(cl.dense), mean(cl.sinksWindow),
                      mean(cl.windowOnly));
        }
        if (!s.model.retrieval.result.cases.empty() && s.model.retrieval.result.error.empty()) {
          const RetrievalShown& r = g_retrievalShown;
          std::printf("retrieval: best=%d:%d score=%.6f none=%.6f top=%.6f random=%.6f copied=%d\n",
                      r.layer, r.head, double(r.score), r.none, r.top, r.random, r.copied);
        }
        std::printf("model-view: layer=%d head=%d\n", s.model.layer, s.view.head);
        if (g_panelVertices.residual >= 0)
          std::printf("panel-vertices: residual=%d\n", g_panelVertices.residual);
        if (const Model& md = s.model.source->model(); !md.config().causal) {
          // The Model panel's facts of an encoder, and its pair and block.
          const EncoderFacts f = encoderFacts(md);
          auto list = [](const std::vector<int>& v) {
            std::string out;
            for (int l : v) out += (out.empty() ? "" : ",") + std::to_string(l);
            return out.empty() ? std::string("-") : out;
          };
          const TokenSegments& seg = s.model.source->segments();
          std::printf("encoder: family=%s attention=bidirectional local=%s window=%d global=%s "
                      "vocabulary=%s pooling=%s pair=%d slice=%s special=%s\n",
                      md.config().family.c_str(), list(f.localLayers).c_str(), f.window,
                      list(f.globalLayers).c_str(), f.vocabulary.c_str(),
                      f.pooling.empty() ? "-" : f.pooling.c_str(), int(seg.pair),
                      pairSliceKey(PairSlice(s.model.slice)),
                      specialTokensKey(SpecialTokens(s.model.special)));
        }
        printAttribution(s);
      }
      printHeadFinder(s);
      std::fflush(stdout);
    }
    if (s.image.active && script.frames > 0 && frame == script.frames - 1) {
      printImageView(s);
      std::fflush(stdout);
    }
    if (s.model.fill.print && s.model.open() && script.frames > 0 && frame == script.frames - 1)
      printFill(s);
    if (!script.saveScene.empty() && script.frames > 0 && frame == script.frames - 1) {
      saveSceneFrom(s, script.saveScene);
      std::printf("saved scene: %s\n", script.saveScene.c_str());
    }
    if (!s.model.attr.scriptExport.empty() && script.frames > 0 && frame == script.frames - 1)
      std::printf("attribution-exported: %s\n",
                  exportAttribution(s, s.model.attr.scriptExport).c_str());
    if (!script.exportPath.empty() && script.frames > 0 && frame == script.frames - 1) {
      exportOptionsFromView(s);
      s.exporter.grid = script.exportGrid;
      std::printf("exported: %s\n", exportPng(s, script.exportPath).c_str());
      std::printf("export-geometry: x0=%d y0=%d cell=%d\n", s.exporter.lastHeatX,
                  s.exporter.lastHeatY, s.exporter.lastCellPx);
    }
  }
}

}  // namespace attnviz::gui
