// attnviz GUI: the command line of the app, then the window, ImGui and the engine behind RAII
// guards, then the interactive loop, a scripted run (gui/drivers/script.cpp) or --report-timing
// (gui/drivers/report_timing.cpp).
#include "cli/backend.h"
#include "cli/cli.h"
#include "cli/model_options.h"
#include "gui/app.h"
#include "gui/drivers/script.h"
#include "gui/drivers/soak.h"
#include "gui/window.h"
#include "panels/panels.h"

#include "attnviz/engine/text_parse.h"
#include "attnviz/engine/blocks.h"
#include "attnviz/engine/ggml_kernels.h"  // setFastActivations
#include "attnviz/engine/mask.h"
#include "attnviz/formats/data_dir.h"
#include "attnviz/formats/dump.h"

#include <CLI/CLI.hpp>
#include <GLFW/glfw3.h>

#include <malloc.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnviz::app {

namespace {

using namespace attnviz::gui;

void onStopSignal(int) { requestStop(); }

void onDrop(GLFWwindow* w, int count, const char** paths) {
  auto* app = static_cast<App*>(glfwGetWindowUserPointer(w));
  for (int k = 0; k < count; ++k) app->s.ui.dropped.push_back(paths[k]);
}

struct Options {
  std::string scenePositional, scene;
  int frames = -1;
  std::vector<std::string> drop;
  std::vector<std::string> dropWhileBusy;
  std::string screenshot, exportPath, saveScenePath, popup;
  bool exportGrid = false;
  std::string size = "1600x960";
  std::optional<float> temperature;
  std::optional<int> selectRow, head;
  std::string site;  // an encoder-decoder's site shown (--model)
  std::optional<std::string> gold;  // the Alignment panel's gold pairs
  bool noShift = false;
  std::string hoverCell, clickCell;
  std::optional<std::string> typeMaskExpr;
  std::string stage, colormap, backend = "auto";
  bool wrongAxis = false;
  bool paint = false;
  bool reportTiming = false;
  std::string firstHeatmapNpy;  // --first-heatmap-npy
  float zoom = 0;
  std::string pan;
  std::string pooled;
  int syntheticTokens = 0;
  int heads = 0;
  std::string headsArg;  // --heads N (a number of heads) or --heads DIR (a head finder tree)
  std::string headTree, headFinderSelect, headFinderSort, headFinderCorpus;
  std::optional<int> headFinderSequence;
  int headFinderSeqLen = 256;
  float uiScale = 0;
  // --model, --text, --text-pair, --chat, --system, --target, --mask-source, --ablate and
  // --max-memory: `attnviz model`'s options, registered by its functions (model_options.h).
  app::ModelCliOptions run;
  std::string slice, special;
  bool printFill = false;
  std::optional<std::string> fillText;
  std::optional<std::string> editText, editTarget;
  std::optional<int> layer;
  std::optional<int> flashStep;
  std::string flashBlocks;
  int generate = 0;
  std::string cacheLoss;
  bool showResidual = false;
  bool whyHere = false;
  std::string whyHereAblate;
  bool retrieval = false;
  std::string attribute, attributionClick, attributionExport;
  double soak = 0;
  std::uint64_t seed = 1;
  // An image model's view: the image, its token, rollout, opacity and a hovered patch.
  std::string image, token, hoverPatch;
  bool rollout = false;
  std::optional<float> opacity;
  // ... its rollout options, interventions, side panel, and scripted hovers and clicks there.
  std::string rolloutHeads, maskPatches, imageSide, hoverSide, clickSide;
  std::optional<double> rolloutDiscard;
  std::optional<float> normThreshold;
};

}  // namespace

// The --help heading of the options that drive a scripted run (tests, screenshots, timing):
// listed after the options a person opens the app with.
constexpr const char* kScriptedGroup = "Scripted runs and tests";

int runGui(int argc, char** argv) {
  // A session runs pass after pass on worker threads, each allocating and freeing buffers of a
  // few MB. glibc raises its mmap threshold each time such a buffer is freed, after which they
  // come from the threads' arenas, and the arenas' resident pages grow with fragmentation
  // (measured by the soak: 6-23 MB/min after the warm-up, heap in use flat). A fixed threshold
  // keeps buffers from 512 KB up in their own mappings, returned when freed (0.6 MB/min).
  mallopt(M_MMAP_THRESHOLD, 512 * 1024);
  Options o;
  CLI::App cli{"attnviz: see, change and export multi-head attention"};
  cli.footer(
      "Headless subcommands, each with its own --help: compute, export, model, tokenize, "
      "generate, score, retrieval, fill, attribute, heads, qk, compose. attnviz "
      "DUMP.safetensors | DUMP.npz opens an attention dump. See also man attnviz, and "
      "docs/command-line.md in the source tree.");
  cli.add_option("scene_file", o.scenePositional,
                 "scene JSON to open (default: the built-in scene)");
  cli.add_option("--scene", o.scene, "scene JSON to open");
  app::addModelPathOption(cli, o.run, false);
  app::addTextOption(cli, o.run);
  cli.add_option("--image", o.image,
                 "with --model, an image model (vit, deit, dinov2, clip, siglip): the image file "
                 "(PNG, JPEG, BMP) the image view runs it on");
  cli.add_option("--token", o.token,
                 "with --image: whose row the image view shows, 'cls' or a token index (CLS, "
                 "DIST, REG0.., patches)");
  cli.add_flag("--rollout", o.rollout,
               "with --image: the attention rollout to --layer (heads averaged, + I)");
  cli.add_option("--opacity", o.opacity,
                 "with --image: the colours' opacity over the image, 0..1 (default 0.6)");
  cli.add_option("--rollout-heads", o.rolloutHeads,
                 "with --image --rollout: fuse the heads by their mean (default) or max");
  cli.add_option("--rollout-discard", o.rolloutDiscard,
                 "with --image --rollout: zero the lowest fraction (0..0.9) of each layer's fused "
                 "attention, never CLS to CLS");
  cli.add_option("--mask-patches", o.maskPatches,
                 "with --image: hide these patches (0-based, row-major) from every query's keys, "
                 "e.g. 3,7 (--ablate L:H works there too)");
  cli.add_option("--image-side", o.imageSide,
                 "with --image: beside the image, tokens (tokens x tokens, the default), grid "
                 "(layers x heads) or norms (token norms)");
  cli.add_option("--norm-threshold", o.normThreshold,
                 "with --image: the token norms mark a token above this many medians (1..100, "
                 "default 2)");
  cli.add_option("--hover-side", o.hoverSide,
                 "with --image: move the mouse over cell R,C of the side panel (query,key; "
                 "layer,head; a patch's row,col) and print its value on the image-side line")
      ->group(kScriptedGroup);
  cli.add_option("--click-side", o.clickSide,
                 "with --image: click cell R,C of the side panel (selects that query's row, "
                 "that layer and head, or that patch)")
      ->group(kScriptedGroup);
  cli.add_option("--hover-patch", o.hoverPatch,
                 "with --image: move the mouse over patch ROW,COL (a scripted run prints its "
                 "weight on the image-view line)")
      ->group(kScriptedGroup);
  app::addTextPairOption(cli, o.run);
  app::addChatOptions(cli, o.run);
  cli.add_option("--slice", o.slice,
                 "an encoder's pair: show the block all | a-a | b-b | a-b | b-a (rows from the "
                 "first text, keys from the second)");
  cli.add_option("--special", o.special,
                 "an encoder's special tokens ([CLS], [SEP], [PAD]): show | grey | hide (hidden: "
                 "rows renormalised over the keys left)");
  cli.add_flag("--print-fill", o.printFill,
               "with an encoder: after the last frame, print the [MASK] fill panel's lists as "
               "fill-after and fill-before lines (position, id, probability, piece)")
      ->group(kScriptedGroup);
  cli.add_option("--fill-text", o.fillText,
                 "with an encoder: the [MASK] fill panel's own text (instead of the model's)")
      ->group(kScriptedGroup);
  cli.add_option("--edit-target", o.editTarget,
                 "with --model, an encoder-decoder: put this text in the Target box after the "
                 "first pass, as if typed (the pass runs again)")
      ->group(kScriptedGroup);
  cli.add_option("--edit-text", o.editText,
                 "with --model: once it is open, replace the text as if typed (scripted runs)")
      ->group(kScriptedGroup);
  cli.add_option("--layer", o.layer, "with --model: show this layer");
  app::addTargetOptions(cli, o.run, false);
  cli.add_option("--site", o.site,
                 "with --model, an encoder-decoder: show this attention site (enc:L, "
                 "dec:L:self, dec:L:cross)");
  app::addMaskSourceOption(cli, o.run);
  cli.add_option("--gold", o.gold,
                 "with --model, an encoder-decoder: the Alignment panel's gold alignment, Pharaoh "
                 "pairs \"S-T S-T\" (source unit - target unit, 0-based over the strips' words); "
                 "a scripted run prints its alignment and AER lines");
  cli.add_flag("--no-shift", o.noShift,
               "with --model, an encoder-decoder: the Alignment panel reads target token t on "
               "decoder row t+1 (the naive reading) instead of row t, the row that produces it");
  app::addAblateOption(cli, o.run);
  app::addMaxMemoryOption(cli, o.run);
  cli.add_flag("--show-residual", o.showResidual,
               "with --model: open the residual-stream panel (massive activations)");
  cli.add_flag("--why-here", o.whyHere,
               "with --model: open the 'Why here?' panel (the selected cell's score split by what "
               "wrote q and k)");
  cli.add_option("--why-here-ablate", o.whyHereAblate,
                 "L:H, with --why-here: once the first split is shown, press the ablate button "
                 "of head L:H beside its bars (the pass re-runs; the cell is split again)")
      ->group(kScriptedGroup);
  cli.add_flag("--retrieval", o.retrieval,
               "with --model: once the text has run, score every head in the 'Retrieval heads' "
               "panel (the text is the haystack; the panel's needle, question and answer); a "
               "scripted run prints retrieval");
  cli.add_option("--cache-loss", o.cacheLoss,
                 "with --model: once the text has run, score it in the 'Loss by token' panel with "
                 "S sinks + window W (S,W), the full context and a window of S + W; a scripted "
                 "run prints cache-loss");
  cli.add_option("--generate", o.generate,
                 "with --model: once it is open, generate N tokens (greedy) in the Generate panel; "
                 "a scripted run waits for them and prints generated-ids and generate-row");
  cli.add_flag_callback(
      "--fast-activations", [] { setFastActivations(true); },
      "start with fast activations on (the Generate panel's checkbox): the products on "
      "K-quant weights, and decode's on Q8_0, take x rounded to 8 bits per block, in every "
      "pass and decode step (the status bar says so)");
  cli.add_option("--attribute", o.attribute,
                 "with --model: once it is open, run a zero or mean ablation sweep in the "
                 "Attribution panel (zero|mean)");
  cli.add_option("--attribution-click", o.attributionClick,
                 "once the attribution has run, click its map's cell LAYER,HEAD (scripted runs)")
      ->group(kScriptedGroup);
  cli.add_option("--attribution-export", o.attributionExport,
                 "once the attribution has run, export its figure to this PNG (scripted runs)")
      ->group(kScriptedGroup);
  cli.add_option("--frames", o.frames, "run this many frames, then exit")
      ->group(kScriptedGroup);
  cli.add_option("--drop-while-busy", o.dropWhileBusy,
                 "with --retrieval or --cache-loss: open this file (a model folder) on the first "
                 "frame that finds that panel's job still running, as if dropped (the job is not "
                 "waited for)")
      ->group(kScriptedGroup);
  cli.add_option("--drop", o.drop,
                 "open this file (scene, dump, model folder) on the first frame, as if dropped "
                 "on the window (repeatable; scripted runs)")
      ->group(kScriptedGroup);
  cli.add_option("--screenshot", o.screenshot, "save the last frame as a PNG")
      ->group(kScriptedGroup);
  cli.add_option("--export", o.exportPath,
                 "after the last frame, export the heatmap as Ctrl+S would (PNG; SVG or PDF "
                 "when the path ends in .svg or .pdf)")
      ->group(kScriptedGroup);
  cli.add_flag("--export-grid", o.exportGrid,
               "with --export and a model: the layers x heads figure (the Export dialog's "
               "\"layers x heads grid\")")
      ->group(kScriptedGroup);
  cli.add_option("--save-scene", o.saveScenePath,
                 "after the last frame, save the scene and view as JSON")
      ->group(kScriptedGroup);
  cli.add_option("--popup", o.popup,
                 "open a dialog at start: open | save | export, or an encoder pair's slice menu: slice (for screenshots)")
      ->group(kScriptedGroup);
  cli.add_option("--size", o.size, "window size WxH")->capture_default_str();
  cli.add_option("--temperature", o.temperature, "softmax temperature (> 0)");
  cli.add_option("--select-row", o.selectRow, "select this query row")
      ->group(kScriptedGroup);
  cli.add_option("--head", o.head, "show this head");
  cli.add_option("--hover-cell", o.hoverCell, "move the mouse over cell I,J and print the tooltip")
      ->group(kScriptedGroup);
  cli.add_option("--click-cell", o.clickCell, "click cell I,J (selects its row)")
      ->group(kScriptedGroup);
  cli.add_option("--stage", o.stage, "qk | scaled | capped | biased | logits | weights | output | value_weighted | rollout (a model's)");
  cli.add_option("--colormap", o.colormap, "weights colormap: viridis | magma | gray | diverging");
  cli.add_option("--flash-step", o.flashStep,
                 "open the FlashAttention stage at step K (counted from 1; 0: before the first)");
  cli.add_option("--flash-blocks", o.flashBlocks,
                 "FlashAttention tiles B_r x B_c, e.g. 8x8 or 5x7 (opens the stage)");
  cli.add_option("--backend", o.backend, "cpu | gpu | auto")->capture_default_str();
  cli.add_flag("--wrong-axis", o.wrongAxis, "softmax over the wrong axis (teaching)");
  cli.add_flag("--paint", o.paint, "start in mask-painting mode (a click blocks a cell)");
  cli.add_option("--type-mask-expr", o.typeMaskExpr,
                 "type this into the Mask panel's expression field (applied when it compiles, "
                 "else shown with its error)")
      ->group(kScriptedGroup);
  cli.add_option("--zoom", o.zoom, "initial zoom (1 = fit)");
  cli.add_option("--pan", o.pan, "initial pan: the top-left visible cell I,J (with --zoom)");
  cli.add_option("--tokens", o.syntheticTokens,
                 "repeat the scene's text to this many tokens (up to 131072; above 4096 the "
                 "weights are streamed and pooled)");
  cli.add_option("--pooled", o.pooled,
                 "on | off | auto: show the streamed, pooled weights (auto: above 4096 x 4096 "
                 "cells a head)");
  cli.add_option("--heads", o.headsArg,
                 "N: the scene's number of heads; DIR: open the Head finder on a tree written by "
                 "attnviz heads (or HeadVis)");
  cli.add_option("--head-tree", o.headTree,
                 "open the Head finder on this tree (as --heads DIR; with --model M its sequences "
                 "run through M)");
  cli.add_option("--head-finder-corpus", o.headFinderCorpus,
                 "with --model: run the Head finder on this corpus on a worker (as attnviz heads; "
                 "the tree opens when written)");
  cli.add_option("--head-finder-seq-len", o.headFinderSeqLen,
                 "with --head-finder-corpus: cut each document to N ids (default 256)");
  cli.add_option("--head-finder-select", o.headFinderSelect,
                 "show head L,H's dashboard in the Head finder")
      ->group(kScriptedGroup);
  cli.add_option("--head-finder-sort", o.headFinderSort,
                 "sort the Head finder's table by this metric, largest first")
      ->group(kScriptedGroup);
  cli.add_option("--head-finder-sequence", o.headFinderSequence,
                 "open the selected head's kept sequence with this sequence_id in the main view "
                 "(needs --model); a scripted run prints the head-finder lines")
      ->group(kScriptedGroup);
  cli.add_option("--ui-scale", o.uiScale, "UI scale (default: the monitor's content scale)");
  cli.add_flag(
      "--report-timing", o.reportTiming,
      "print frame times of a scripted temperature drag (T=1024, 12 heads) and a pan (T=4096); "
      "with --tokens N: the time to that scene's first frame; with --model alone: the time from "
      "the open to the first heatmap, the whole layers x heads grid and the full view")
      ->group(kScriptedGroup);
  cli.add_option("--first-heatmap-npy", o.firstHeatmapNpy,
                 "with --model and --report-timing: write the first heatmap drawn while the "
                 "model's pass ran (the shown head's weights, [1, T, T]) as .npy")
      ->group(kScriptedGroup);
  cli.add_option("--soak", o.soak,
                 "run SECONDS of random user actions, sample RSS, file descriptors, threads and "
                 "GL objects, print a summary; exit 1 on an RSS slope above 1 MB/min or any "
                 "growth")
      ->group(kScriptedGroup);
  cli.add_option("--seed", o.seed, "with --soak: the seed of its random actions")
      ->capture_default_str()
      ->group(kScriptedGroup);
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
  Script script;
  std::string dumpPath;  // a dump given positionally: opened once the window's engine exists
  try {
    if (std::sscanf(o.size.c_str(), "%dx%d", &winW, &winH) != 2 || winW < 320 || winH < 240 ||
        winW > 16384 || winH > 16384)
      throw UsageError("--size: expected WxH (at least 320x240), got '" + o.size + "'");
    script.hover = parseCell(o.hoverCell, "--hover-cell");
    script.click = parseCell(o.clickCell, "--click-cell");
    script.frames = o.frames;
    if (cli.count("--soak") && !(o.soak >= 1 && o.soak <= 86400))
      throw UsageError("--soak: expected a number of seconds in [1, 86400]");
    if (cli.count("--seed") && !cli.count("--soak")) throw UsageError("--seed goes with --soak");
    if (cli.count("--soak") && (o.frames > 0 || o.reportTiming))
      throw UsageError("--soak goes without --frames and --report-timing");
    script.screenshot = o.screenshot;
    if (o.reportTiming) app.timingScreenshot = o.screenshot;
    app.firstHeatmapNpy = o.firstHeatmapNpy;
    script.saveScene = o.saveScenePath;
    script.exportPath = o.exportPath;
    script.exportGrid = o.exportGrid;
    script.dropWhileBusy = o.dropWhileBusy;
    if (o.temperature && !(*o.temperature > 0.0f && std::isfinite(*o.temperature)))
      throw UsageError("--temperature: expected a finite number > 0");
    if (o.frames == 0 || o.frames < -1)
      throw UsageError("--frames: expected a number of frames >= 1");
    if (cli.count("--zoom") && !(o.zoom >= 1.0f && o.zoom <= 1e4f))
      throw UsageError("--zoom: expected a number >= 1 (1 = fit)");
    if (cli.count("--tokens") && (o.syntheticTokens < 1 || o.syntheticTokens > 131072))
      throw UsageError("--tokens: expected a number of tokens in [1, 131072]");
    PooledPolicy pooledPolicy;
    pooledPolicy.mode = PooledPolicy::Mode::Auto;
    if (o.pooled == "on")
      pooledPolicy.mode = PooledPolicy::Mode::On;
    else if (o.pooled == "off")
      pooledPolicy.mode = PooledPolicy::Mode::Off;
    else if (!o.pooled.empty() && o.pooled != "auto")
      throw UsageError("--pooled: expected on, off or auto, got '" + o.pooled + "'");
    s.session.setPooledPolicy(pooledPolicy);
    const CellArg pan = parseCell(o.pan, "--pan");
    if (cli.count("--heads")) {
      // A number is the scene's heads; anything else (or a folder holding a tree) is a tree.
      namespace fs = std::filesystem;
      std::error_code ec;
      const bool digits = !o.headsArg.empty() &&
                          o.headsArg.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || fs::exists(fs::path(o.headsArg) / "config.json", ec)) {
        if (!o.headTree.empty()) throw UsageError("give the tree either with --heads or --head-tree");
        o.headTree = o.headsArg;
      } else {
        o.heads = digits && o.headsArg.size() < 4 ? std::stoi(o.headsArg) : 0;
        if (o.heads < 1 || o.heads > 64)
          throw UsageError("--heads: expected a number of heads in [1, 64] or a tree's folder");
      }
    }
    if (cli.count("--head-finder-seq-len") && (o.headFinderSeqLen < 2 || o.headFinderSeqLen > 65536))
      throw UsageError("--head-finder-seq-len: expected a number in [2, 65536]");
    if ((!o.headFinderSelect.empty() || !o.headFinderSort.empty() || o.headFinderSequence) &&
        o.headTree.empty() && o.headFinderCorpus.empty() && o.scene.empty() &&
        o.scenePositional.empty())
      throw UsageError("--head-finder-* go with --heads DIR, --head-tree DIR or --head-finder-corpus");
    if (o.headFinderSequence && o.run.dir.empty() && o.scene.empty() && o.scenePositional.empty())
      throw UsageError("--head-finder-sequence goes with --model (the sequence runs through it)");
    if (cli.count("--ui-scale") && !(o.uiScale > 0.0f && o.uiScale <= 8.0f))
      throw UsageError("--ui-scale: expected a number in (0, 8]");
    if (o.head && *o.head < 0) throw UsageError("--head: expected a head index >= 0");
    if (o.selectRow && *o.selectRow < -1) throw UsageError("--select-row: expected a row >= 0");
    if (o.backend != "cpu" && o.backend != "gpu" && o.backend != "auto")
      throw UsageError("--backend: expected cpu, gpu or auto, got '" + o.backend + "'");
    // Validated here; applied after the settings and the scene's own view are loaded.
    const ViewStage stage = o.stage.empty() ? ViewStage::Weights : stageFromKey(o.stage);
    const std::optional<ColormapId> colormap = colormapFromName(o.colormap);
    if (!o.colormap.empty() && !colormap)
      throw UsageError("--colormap: expected viridis, magma, gray or diverging, got '" +
                       o.colormap + "'");
    if (!o.scenePositional.empty() && !o.scene.empty())
      throw UsageError("give the scene either positionally or with --scene, not both");
    std::string scenePath = o.scene.empty() ? o.scenePositional : o.scene;
    if (isDumpPath(scenePath)) std::swap(dumpPath, scenePath);
    if (o.layer && o.run.dir.empty() && dumpPath.empty())
      throw UsageError("--layer goes with --model DIR or a dump");
    if (!o.slice.empty() && !pairSliceFromKey(o.slice))
      throw UsageError("--slice: expected all, a-a, b-b, a-b or b-a, got '" + o.slice + "'");
    if (!o.special.empty() && !specialTokensFromKey(o.special))
      throw UsageError("--special: expected show, grey or hide, got '" + o.special + "'");
    const bool textPair = cli.count("--text-pair") > 0;
    if (o.run.dir.empty() && textPair) throw UsageError("--text-pair goes with --model DIR");
    if (cli.count("--system") && !o.run.chat) throw UsageError("--system goes with --chat");
    if (o.run.chat && o.run.dir.empty()) throw UsageError("--chat goes with --model DIR");
    if (o.run.chat && textPair) throw UsageError("--chat takes one text (not --text-pair)");
    if (o.run.dir.empty() && (!o.run.text.empty() || !o.run.ablate.empty() || !o.run.target.empty() ||
                            !o.site.empty() || !o.run.maskSource.empty()))
      throw UsageError("--text, --target, --site, --ablate and --mask-source go with --model DIR");
    if (!o.run.dir.empty() && !scenePath.empty())
      throw UsageError("give either a scene or --model, not both");
    if (o.layer && *o.layer < 0) throw UsageError("--layer: expected a layer index >= 0");
    // The model's request, parsed as `attnviz model` parses it (attnviz/session/request.h); the
    // indices are checked once the model is open.
    if (!o.site.empty()) (void)parseSiteName(o.site);
    const std::vector<int> maskSource =
        o.run.maskSource.empty() ? std::vector<int>{} : parsePositionList(o.run.maskSource);
    s.model.maxMemory = app::parseMaxMemory(o.run.maxMemory);
    s.configDir = configDirectory();
    loadSettings(s);
    // An image model opens the image view (image_view_panel.cpp); text options are bad usage
    // there, and image options anywhere else.
    const bool imageModel = !o.run.dir.empty() && isVisionModelArg(o.run.dir);
    // An image model's heads: "L:H" items, lists allowed (`attnviz model` on an image model).
    std::vector<std::pair<int, int>> ablations;
    std::vector<std::string> siteAblations;  // enc:L:H, cross:L:H
    if (imageModel) {
      ablations = parseLayerHeadList(o.run.ablate);
    } else {
      for (const std::string& a : o.run.ablate) {
        const SiteHead h = parseSiteAblation(a);
        if (h.site.stack == 0 && h.site.site == 0) ablations.emplace_back(h.site.layer, h.head);
        else siteAblations.push_back(siteAblationText(h));
      }
    }
    if (!o.image.empty() && o.run.dir.empty())
      throw UsageError("--image goes with --model IMAGE_MODEL");
    if (!o.image.empty() && !imageModel)
      throw UsageError("--image: " + o.run.dir +
                       " is not an image model (config.json's model_type); give it --text");
    if (imageModel && (!o.run.text.empty() || textPair || o.run.chat || o.editText))
      throw UsageError("--text: " + o.run.dir + " is an image model; give it --image FILE");
    if (!imageModel && (!o.token.empty() || o.rollout || o.opacity || !o.hoverPatch.empty() ||
                        !o.rolloutHeads.empty() || o.rolloutDiscard || !o.maskPatches.empty() ||
                        !o.imageSide.empty() || o.normThreshold || !o.hoverSide.empty() ||
                        !o.clickSide.empty()))
      throw UsageError("--token, --rollout, --rollout-heads, --rollout-discard, --mask-patches, "
                       "--opacity, --image-side, --norm-threshold, --hover-side, --click-side "
                       "and --hover-patch go with --model IMAGE_MODEL --image FILE");
    if ((!o.rolloutHeads.empty() || o.rolloutDiscard) && !o.rollout)
      throw UsageError("--rollout-heads and --rollout-discard go with --rollout");
    if (!o.rolloutHeads.empty() && o.rolloutHeads != "mean" && o.rolloutHeads != "max")
      throw UsageError("--rollout-heads: expected mean or max, got '" + o.rolloutHeads + "'");
    if (o.rolloutDiscard && !(*o.rolloutDiscard >= 0 && *o.rolloutDiscard <= 0.9))
      throw UsageError("--rollout-discard: expected a fraction in 0..0.9");
    if (!o.imageSide.empty() && o.imageSide != "tokens" && o.imageSide != "grid" &&
        o.imageSide != "norms")
      throw UsageError("--image-side: expected tokens, grid or norms, got '" + o.imageSide + "'");
    if (o.normThreshold && !(*o.normThreshold >= 1 && *o.normThreshold <= 100))
      throw UsageError("--norm-threshold: expected a value in 1..100");
    if (o.opacity && !(*o.opacity >= 0.0f && *o.opacity <= 1.0f))
      throw UsageError("--opacity: expected a value in 0..1");
    bool tokenCls = false;
    int imageToken = -1;
    if (!o.token.empty()) {
      std::string lower = o.token;
      for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      tokenCls = lower == "cls";
      if (lower == "probe") {
        imageToken = app::kProbeOverlayToken;
        if (o.rollout) throw UsageError("--token probe draws the probe's own row: no --rollout");
      } else if (!tokenCls) {
        const std::optional<int> t = parseIndex(o.token, 1'000'000'000);
        if (!t)
          throw UsageError("--token: expected 'cls' or a token index (0, 1, ...), got '" +
                           o.token + "'");
        imageToken = *t;
      }
    }
    const CellArg hoverPatch = parseCell(o.hoverPatch, "--hover-patch");
    std::error_code imageEc;
    if (!o.image.empty() && !std::filesystem::is_regular_file(o.image, imageEc))
      throw InputError(o.image + ": no such image file");
    if (imageModel) {
      app::VisionInterventions interventions;
      interventions.ablate = ablations;
      if (!o.maskPatches.empty()) interventions.maskPatches = parsePatchList(o.maskPatches);
      if (o.temperature) interventions.temperature = app::temperatureOfFloat(*o.temperature);
      const CellArg hoverSide = parseCell(o.hoverSide, "--hover-side");
      const CellArg clickSide = parseCell(o.clickSide, "--click-side");
      s.session.setScene(defaultScene());
      openImageModel(s, o.run.dir, "");
      ImageViewState& iv = s.image;
      iv.interventions = interventions;
      if (!o.image.empty()) openImageFile(s, o.image);
      iv.layer = o.layer.value_or(0), iv.head = o.head.value_or(0);
      iv.token = imageToken, iv.rollout = o.rollout;
      iv.rolloutOptions.maxHeads = o.rolloutHeads == "max";
      iv.rolloutOptions.discard = o.rolloutDiscard.value_or(0.0);
      iv.side = o.imageSide == "grid" ? 1 : o.imageSide == "norms" ? 2 : 0;
      if (o.normThreshold) iv.normThreshold = *o.normThreshold;
      iv.scriptSideHoverRow = hoverSide.i, iv.scriptSideHoverCol = hoverSide.j;
      iv.scriptSideClickRow = clickSide.i, iv.scriptSideClickCol = clickSide.j;
      if (o.opacity) iv.opacity = *o.opacity;
      iv.scriptHoverRow = hoverPatch.i, iv.scriptHoverCol = hoverPatch.j;
      if (o.frames > 0) {  // a scripted run shows the pass: waited for, its errors the exit status
        waitImageView(s);
        if (tokenCls && iv.pass && !iv.pass->model.config().hasCls)
          throw UsageError("--token cls: " + o.run.dir + " has no CLS token");
        if (iv.pass && hoverPatch.i >= 0 &&
            (hoverPatch.i >= iv.pass->result.gridH || hoverPatch.j >= iv.pass->result.gridW))
          throw UsageError("--hover-patch: out of the " + std::to_string(iv.pass->result.gridH) +
                           " x " + std::to_string(iv.pass->result.gridW) + " patch grid");
      }
    } else if (!o.run.dir.empty()) {
      s.session.setScene(defaultScene());
      if (!o.run.text.empty()) std::snprintf(s.model.text, sizeof s.model.text, "%s", o.run.text.c_str());
      if (textPair) s.model.request.textPair = o.run.textPair, s.model.request.hasPair = true;
      if (o.run.chat)
        s.model.request.chat =
            ChatSetting{true, cli.count("--system") ? std::optional<std::string>(o.run.system)
                                                    : std::nullopt};
      s.model.request.layer = o.layer.value_or(0);
      s.model.request.head = o.head.value_or(0);
      s.model.request.ablate = ablations;
      s.model.request.siteAblate = siteAblations;
      s.model.request.target = o.run.target;
      s.model.request.site = o.site;
      s.model.request.maskSource = maskSource;
      s.model.request.cli = true;
      openModel(s, o.run.dir);
    } else if (!scenePath.empty()) {
      loadSceneInto(s, scenePath);
    } else {
      s.session.setScene(defaultScene());
    }
    Scene& sc = s.session.editScene();
    if (o.syntheticTokens > 0) sc.queryText = repeatedText(sc.queryText, o.syntheticTokens);
    if (o.heads > 0) sc.heads = o.heads;
    if (o.temperature) sc.params.temperature = *o.temperature;
    // A scripted run waits for a model (from --model or a model scene), so its frames show it;
    // a window opens at once and shows the progress.
    if (s.image.job.valid() && o.frames > 0) waitImageView(s);  // an image-view scene's run
    // --report-timing on a model alone times its open in the window: the frames draw each
    // layer of the first pass as it finishes.
    const bool timeOpen = o.reportTiming && !o.run.dir.empty() && !o.editText && !o.editTarget &&
                          o.generate == 0 && o.syntheticTokens == 0;
    if (!o.firstHeatmapNpy.empty() && !timeOpen)
      throw UsageError("--first-heatmap-npy goes with --model and --report-timing");
    if (s.model.loading.valid() && (o.frames > 0 || o.reportTiming) && !timeOpen) {
      s.model.loading.wait();
      syncModel(s);
    }
    if (s.dump.seq2seq && (o.editText || o.editTarget)) {
      // An encoder-decoder's Source and Target boxes, as if edited and left: the next frame
      // runs the pass again.
      DumpState& d = s.dump;
      if (o.editText) std::snprintf(d.sourceText, sizeof d.sourceText, "%s", o.editText->c_str());
      if (o.editTarget)
        std::snprintf(d.targetText, sizeof d.targetText, "%s", o.editTarget->c_str());
      d.rerun = true;
    } else if (o.editTarget) {
      throw UsageError("--edit-target goes with --model DIR of an encoder-decoder");
    } else if (o.editText) {
      if (o.run.dir.empty()) throw UsageError("--edit-text goes with --model");
      std::snprintf(s.model.text, sizeof s.model.text, "%s", o.editText->c_str());
      s.model.textEditedAt = 0;  // typed long enough ago: the next frame starts its pass
    }
    if (o.gold || o.noShift) {
      if (o.run.dir.empty() || (s.model.open() && !s.dump.seq2seq))
        throw UsageError("--gold and --no-shift go with --model DIR of an encoder-decoder");
      AlignmentState& al = s.dump.align;
      al.scripted = true;
      al.options.shift = !o.noShift;
      if (o.gold) {
        std::snprintf(al.gold, sizeof al.gold, "%s", o.gold->c_str());
        al.goldApplied = al.gold;
      }
    }
    if (!o.headTree.empty() || !o.headFinderCorpus.empty() || !o.headFinderSelect.empty() ||
        !o.headFinderSort.empty() || o.headFinderSequence) {
      HeadFinderState& hf = s.model.heads;
      hf.open = true;
      hf.print = true;
      if (!o.headTree.empty()) openHeadTree(s, o.headTree);  // InputError: one line, exit 1
      if (!o.headFinderCorpus.empty()) {
        if (o.run.dir.empty()) throw UsageError("--head-finder-corpus goes with --model");
        std::snprintf(hf.corpusPath, sizeof hf.corpusPath, "%s", o.headFinderCorpus.c_str());
        hf.seqLen = o.headFinderSeqLen;
        hf.wantRun = true;
      }
      if (!o.headFinderSelect.empty()) {
        const CellArg c = parseCell(o.headFinderSelect, "--head-finder-select");
        hf.wantLayer = c.i, hf.wantHead = c.j;
      }
      if (!o.headFinderSort.empty()) {
        if (hf.tree) {
          const auto& ms = hf.tree->metrics;
          const auto it = std::find(ms.begin(), ms.end(), o.headFinderSort);
          if (it == ms.end())
            throw UsageError("--head-finder-sort " + o.headFinderSort + ": not a metric of " +
                             hf.tree->dir);
          hf.requestSort = hf.sortColumn = 2 + int(it - ms.begin());
          hf.sortDescending = true;
        } else {
          hf.requestSortName = o.headFinderSort;
        }
      }
      if (o.headFinderSequence) hf.wantSequence = *o.headFinderSequence;
    }
    if (o.showResidual) s.model.showResidual = true;
    if (o.whyHere) s.model.showWhyHere = true;
    if (!o.whyHereAblate.empty())
      s.model.whyHereAblate = parseLayerHead(o.whyHereAblate, "--why-here-ablate");
    if (!o.dropWhileBusy.empty()) {
      if (!o.retrieval && o.cacheLoss.empty())
        throw UsageError("--drop-while-busy goes with --retrieval or --cache-loss");
      s.model.retrieval.scriptedWait = s.model.cacheLoss.scriptedWait = false;
    }
    if (o.retrieval) {
      if (!s.model.open() && !s.model.loading.valid())
        throw UsageError("--retrieval goes with --model (or a model scene)");
      s.model.retrieval.scripted = true;
    }
    if (!o.slice.empty()) s.model.slice = int(*pairSliceFromKey(o.slice));
    if (!o.special.empty()) s.model.special = int(*specialTokensFromKey(o.special));
    if (o.printFill) {
      if (!s.model.open() && !s.model.loading.valid())
        throw UsageError("--print-fill goes with --model (or a model scene)");
      s.model.fill.print = true;
    }
    if (o.fillText) {
      if (!s.model.open() && !s.model.loading.valid())
        throw UsageError("--fill-text goes with --model (or a model scene)");
      std::snprintf(s.model.fill.text, sizeof s.model.fill.text, "%s", o.fillText->c_str());
      s.model.fill.textFor = ~std::uint64_t{0};
    }
    if (!o.cacheLoss.empty()) {
      if (!s.model.open() && !s.model.loading.valid())
        throw UsageError("--cache-loss goes with --model (or a model scene)");
      int S = -1, W = -1;
      char tail = 0;
      if (std::sscanf(o.cacheLoss.c_str(), "%d,%d%c", &S, &W, &tail) != 2 || S < 0 || W < 1)
        throw UsageError("--cache-loss: expected SINKS,WINDOW (S >= 0, W >= 1), got '" +
                         o.cacheLoss + "'");
      s.model.cacheLoss.sinks = S, s.model.cacheLoss.window = W;
      s.model.cacheLoss.scripted = true;
    }
    if (cli.count("--generate")) {
      if (!s.model.open() && !s.model.loading.valid() && !s.dump.seq2seq)
        throw UsageError("--generate goes with --model (or a model scene)");
      if (o.generate < 1 || o.generate > 4096)
        throw UsageError("--generate: expected a number of tokens in [1, 4096]");
      s.model.gen.scripted = o.generate;
    }
    if (!o.attribute.empty() || !o.attributionClick.empty() || !o.attributionExport.empty()) {
      if (!s.model.open() && !s.model.loading.valid())
        throw UsageError("--attribute and --attribution-* go with --model (or a model scene)");
      AttributionState& a = s.model.attr;
      if (!o.attribute.empty()) {
        if (o.attribute != "zero" && o.attribute != "mean")
          throw UsageError("--attribute: expected zero or mean, got '" + o.attribute + "'");
        a.method = o.attribute == "zero" ? 0 : 1;
        a.wantRun = a.used = true;
      }
      if (!o.attributionClick.empty()) {
        const CellArg c = parseCell(o.attributionClick, "--attribution-click");
        a.clickLayer = c.i, a.clickHead = c.j;
      }
      a.scriptExport = o.attributionExport;
    }
    if (!s.model.open() && !s.model.loading.valid()) s.session.touchInputs();
    for (const std::string& d : o.drop) s.ui.dropped.push_back(d);
    if (o.selectRow) s.view.selectedRow = *o.selectRow;
    if (o.head && !s.model.open()) s.view.head = *o.head;
    if (!o.stage.empty()) s.view.stage = stage;
    if (colormap) s.view.weightColormap = *colormap;
    if (o.wrongAxis) s.view.wrongAxis = true;
    if (o.paint) s.view.paintMode = true;
    if (o.flashStep && *o.flashStep < 0)
      throw UsageError("--flash-step: expected a step >= 0 (0: before the first)");
    if (o.flashStep || !o.flashBlocks.empty()) {
      s.flash.active = true;
      s.view.stage = ViewStage::Weights;
      if (o.flashStep) s.flash.step = *o.flashStep;
      if (!o.flashBlocks.empty()) {
        const BlockSize b = parseBlockSize(o.flashBlocks, "--flash-blocks");
        s.flash.blockRows = b.rows, s.flash.blockKeys = b.cols;
      }
    }
    if (o.typeMaskExpr && typeMaskExpression(s, *o.typeMaskExpr)) s.session.touchMask();
    if (o.popup == "open")
      s.ui.requestOpenDialog = true;
    else if (o.popup == "save")
      s.ui.requestSaveDialog = true;
    else if (o.popup == "export")
      s.exporter.requestOpen = true;
    else if (o.popup == "slice")
      s.model.openSliceMenu = true;
    else if (!o.popup.empty())
      throw UsageError("--popup: expected open, save, export or slice, got '" + o.popup + "'");
    if (cli.count("--zoom")) s.view.zoom = o.zoom;
    if (pan.i >= 0) {
      s.view.panY = float(pan.i);
      s.view.panX = float(pan.j);
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    return 1;
  }

  std::signal(SIGINT, onStopSignal);
  std::signal(SIGTERM, onStopSignal);
  GlfwLibrary glfw;
  if (!glfw.ok()) {
    std::fprintf(
        stderr,
        "attnviz: cannot open a window (no display?). Headless use: attnviz export / compute\n");
    return 1;
  }
  const bool scripted = o.frames > 0 || o.reportTiming || o.soak > 0;
  app.interactive = !scripted;
  app.waitForPooled = scripted;
  Window window(winW, winH, !scripted);
  if (!window.get()) {
    std::fprintf(stderr, "attnviz: cannot create an OpenGL 3.3 window\n");
    return 1;
  }
  app.window = window.get();
  setFrameWake(true);
  glfwSetWindowUserPointer(app.window, &app);
  glfwSetDropCallback(app.window, onDrop);
  s.ui.uiScale = o.uiScale > 0 ? o.uiScale : window.contentScale();
  // Arrow keys belong to the heatmap (rows and heads), not to ImGui's keyboard navigation.
  ImGuiContextGuard imgui(app.window, s.ui.uiScale,
                          s.configDir.empty() || scripted ? "" : s.configDir + "/imgui.ini",
                          app.fonts);

  int rc = 0;
  try {
    app.renderer->init();
    s.renderer = app.renderer.get();
    app.pooledRenderer->init();
    s.pooledRenderer = app.pooledRenderer.get();
    const char* rend = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
    s.backend.glRenderer = rend ? rend : "unknown";
    EngineChoice engine = chooseEngine(o.backend, EngineSite::CurrentContext, s.backend.glRenderer);
    s.backend.backend = engine.engine->name();
    s.backend.backendNote = engine.note;
    s.session.setEngine(std::move(engine.engine));
    if (!dumpPath.empty()) {
      openDump(s, dumpPath);
      if (o.layer) {
        if (*o.layer >= s.dump.source->layers())
          throw UsageError("--layer " + std::to_string(*o.layer) + " is out of range (the dump has " +
                           std::to_string(s.dump.source->layers()) + " layers)");
        s.dump.layer = *o.layer;
      }
      if (o.head) s.view.head = *o.head;
      if (o.temperature) s.session.editScene().params.temperature = *o.temperature;
    }
    if (!s.backend.backendNote.empty())
      std::fprintf(stderr, "attnviz: %s\n", s.backend.backendNote.c_str());
    if (scripted) std::printf("backend: %s\n", s.backend.backend.c_str());
    // Where the presets and the UI font came from (install tests check the relocated prefix).
    if (scripted)
      std::printf("data: %s\nfont: %s\n", dataDir().c_str(), app.fonts.font->path().c_str());
    if (o.soak > 0)
      rc = runSoak(app, o.soak, o.seed);
    else if (o.reportTiming && o.syntheticTokens > 0)
      reportFirstFrame(app);
    else if (o.reportTiming)
      reportTiming(app);
    else
      runScript(app, script);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    rc = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnviz: %s\n", e.what());
    rc = 1;
  }
  if (!scripted) saveSettings(s);
  setFrameWake(false);  // a worker still running must not post to a GLFW about to terminate
  closeSources(s);      // the workers stop at their next layer instead of running to the end
  // GL objects go before the context: the engine, then the renderer; the guards close ImGui,
  // the window and GLFW in that order.
  s.session.setEngine(nullptr);
  s.renderer = nullptr;
  s.pooledRenderer = nullptr;
  app.renderer.reset();
  app.pooledRenderer.reset();
  return rc;
}

}  // namespace attnviz::app
