// attnviz export: a heatmap PNG from a scene or from Q, K, V files, with no display and no GL
// (unless --backend gpu asks for the headless EGL engine).
#include "backend.h"
#include "cli.h"
#include "cli_common.h"
#include "cli_model.h"

#include "attnviz/colormap.h"
#include "attnviz/dump.h"
#include "attnviz/engine.h"
#include "attnviz/npy.h"
#include "attnviz/raster.h"
#include "attnviz/scene.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

namespace attnviz::app {

namespace {

// "all" -> -1, a non-negative integer -> itself; anything else is bad usage.
int parseHead(const std::string& s) {
  if (s == "all") return -1;
  std::size_t used = 0;
  long v = -1;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || v < 0 || v > 1'000'000)
    throw UsageError("--head: expected a head index (0, 1, ...) or 'all', got '" + s + "'");
  return int(v);
}

std::string formatTemperature(float t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(t));
  return buf;
}

// Scene masks first, the command line's on top: a term set on the command line wins, flags
// combine, and --temperature replaces the scene's when given.
AttentionParams mergeParams(const AttentionParams& scene, const AttentionParams& cli,
                            bool cliTemperature) {
  AttentionParams p = scene;
  const MaskSpec& c = cli.mask;
  p.mask.causal = p.mask.causal || c.causal;
  if (c.window > 0) p.mask.window = c.window;
  if (c.prefix > 0) p.mask.prefix = c.prefix;
  if (c.sink > 0) p.mask.sink = c.sink;
  if (c.pad > 0) p.mask.pad = c.pad;
  p.mask.alibi = p.mask.alibi || c.alibi;
  if (c.customKind != MaskSpec::Custom::None) {
    p.mask.customKind = c.customKind;
    p.mask.custom = c.custom;
  }
  if (cliTemperature) p.temperature = cli.temperature;
  return p;
}

// --layer: an index into the dump's layers, or a layer's name ("decoder.0.cross").
const DumpLayer& pickLayer(const Dump& d, const std::string& which) {
  for (const DumpLayer& l : d.layers)
    if (l.name == which) return l;
  std::size_t used = 0;
  long v = -1;
  try {
    v = std::stol(which, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == which.size() && !which.empty() && v >= 0 && v < long(d.layers.size()))
    return d.layers[std::size_t(v)];
  std::string names;
  for (const DumpLayer& l : d.layers) names += (names.empty() ? "" : ", ") + l.name;
  throw UsageError("--layer " + which + ": the dump has " + std::to_string(d.layers.size()) +
                   " layers (0.." + std::to_string(d.layers.size() - 1) + ": " + names + ")");
}

}  // namespace

int runExport(int argc, char** argv) {
  CLI::App app{"Export an attention heatmap as a PNG (no display needed)", "export"};
  std::string scenePath, q, k, v, png, head = "0", stage = "weights", colormap, title;
  int cell = 0, width = 0, columns = 0;
  bool bare = false, noLabels = false;
  AttentionCliOptions opts;

  auto* sceneOpt = app.add_option("--scene", scenePath, "scene .json (tokens, mode, heads, masks)");
  auto* qOpt = app.add_option("--q", q, "queries [T_q, d_k] or [H, T_q, d_k] (.npy)");
  auto* kOpt = app.add_option("--k", k, "keys [T_k, d_k] or [H, T_k, d_k] (.npy)");
  auto* vOpt = app.add_option("--v", v, "values [T_k, d_v] or [H, T_k, d_v] (.npy)");
  std::string dumpPath, layerName;
  auto* dumpOpt = app.add_option(
      "--dump", dumpPath, "attention dump (.safetensors or .npz; see README, Attention dumps)");
  app.add_option("--layer", layerName,
                 "layer to draw: of the dump (index or name) or of the --model (index); required "
                 "with either");
  sceneOpt->excludes(qOpt)->excludes(kOpt)->excludes(vOpt);
  dumpOpt->excludes(sceneOpt)->excludes(qOpt)->excludes(kOpt)->excludes(vOpt);
  ModelCliOptions modelOpts;
  addModelOptions(app, modelOpts, false);
  addAttentionOptions(app, opts);
  app.add_option("--png", png, "output PNG (written atomically)")->required();
  app.add_option("--head", head, "head index, or 'all' for a grid of every head (default 0)");
  app.add_option("--stage", stage, "weights (softmax) or scores (logits, -inf where masked)")
      ->check(CLI::IsMember({"weights", "scores"}));
  app.add_flag("--bare", bare, "only the cells: T_k*PX x T_q*PX pixels, row 0 at the top");
  app.add_option("--cell", cell, "pixels per cell (default: fit --width)");
  app.add_option("--width", width,
                 "target page width in pixels when --cell is not given (default 1200); too "
                 "many tokens for a pixel each are max-pooled to fit");
  app.add_option(
      "--colormap", colormap,
      "viridis | magma | gray | diverging (default: viridis for weights, diverging for scores)");
  app.add_option("--title", title, "title text instead of the generated one");
  app.add_flag("--no-labels", noLabels, "no token labels or axis titles");
  app.add_option("--columns", columns, "panels per row with --head all (default: by shape)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("export", [&] {
    // Everything that is bad usage is refused before any file is read.
    const bool fromScene = !scenePath.empty(), fromDump = !dumpPath.empty(),
               fromModel = !modelOpts.dir.empty();
    if (fromModel && (fromScene || fromDump || !q.empty() || !k.empty() || !v.empty()))
      throw UsageError("--model excludes --scene, --dump and --q/--k/--v");
    if (!fromScene && !fromDump && !fromModel && (q.empty() || k.empty() || v.empty()))
      throw UsageError(
          "give --scene SCENE.json, --dump FILE --layer L, --model DIR --layer L, or all three of "
          "--q, --k and --v");
    if ((fromDump || fromModel) != !layerName.empty())
      throw UsageError(fromDump    ? "--dump needs --layer L (an index or a layer name)"
                       : fromModel ? "--model needs --layer L"
                                   : "--layer goes with --dump or --model");
    const int modelLayer = fromModel ? parseLayerIndex(layerName) : -1;
    const int headIndex = parseHead(head);
    ExportOptions eo;
    eo.stage = stage == "scores" ? ExportStage::Scores : ExportStage::Weights;
    if (colormap.empty()) {
      eo.colormap = eo.stage == ExportStage::Scores ? ColormapId::Diverging : ColormapId::Viridis;
    } else {
      const std::optional<ColormapId> id = colormapFromName(colormap);
      if (!id) {
        std::string names;
        for (const auto& n : colormapNames()) names += (names.empty() ? "" : ", ") + n;
        throw UsageError("--colormap: unknown colormap '" + colormap + "' (expected one of " +
                         names + ")");
      }
      eo.colormap = *id;
    }
    if (app.count("--cell") && cell < 1)
      throw UsageError("--cell: expected a whole number of pixels >= 1, got " +
                       std::to_string(cell));
    if (app.count("--width") && width < 1)
      throw UsageError("--width: expected a whole number of pixels >= 1, got " +
                       std::to_string(width));
    if (app.count("--columns") && columns < 1)
      throw UsageError("--columns: expected a number >= 1, got " + std::to_string(columns));
    if (bare && headIndex < 0) throw UsageError("--bare draws one head; pick it with --head N");
    eo.head = headIndex;
    eo.bare = bare;
    eo.cell = cell;
    if (width > 0) eo.targetWidth = width;
    eo.labels = !noLabels;
    eo.title = title;
    eo.gridColumns = columns;

    // Inputs.
    Tensor3 Q, K, V;
    ExportData data;
    std::optional<Scene> scene;
    std::optional<Dump> dump;
    const DumpLayer* layer = nullptr;
    std::optional<AttentionParams> modelParams;
    std::string modelDesc;
    if (fromModel) {
      // The layer's Q, K and V from the pass (with every intervention applied), redrawn with the
      // parameters that layer ran with.
      ModelRun run = runModelFromOptions(modelOpts, opts, app);
      checkLayer(modelLayer, run.model->config());
      LayerActivations& a = run.result.layers[modelLayer];
      Q = std::move(a.q), K = std::move(a.k), V = std::move(a.v);
      data.queryTokens = tokenLabels(*run.model, run.result.ids);
      data.keyTokens = data.queryTokens;
      modelParams = layerParams(run.result, modelLayer);
      modelDesc =
          modelName(modelOpts.dir) + " \xC2\xB7 layer " + std::to_string(modelLayer) + " \xC2\xB7 ";
    } else if (fromScene) {
      scene = loadScene(scenePath);
      SceneInputs in = buildSceneInputs(*scene);
      Q = std::move(in.q), K = std::move(in.k), V = std::move(in.v);
      data.queryTokens = std::move(in.queryTokens);
      data.keyTokens = std::move(in.keyTokens);
    } else if (fromDump) {
      dump = loadDump(dumpPath);
      layer = &pickLayer(*dump, layerName);
      data.queryTokens = layer->queryTokens;
      data.keyTokens = layer->keyTokens;
      if (layer->hasQkv()) Q = layer->q, K = layer->k, V = layer->v;
      if (eo.stage == ExportStage::Scores && !layer->hasQkv())
        throw InputError(dumpPath + ": layer " + layer->name +
                         " has no q/k/v tensors; --stage scores needs them (the weights alone "
                         "fix the logits only up to a constant per row)");
    } else {
      Q = loadTensorNpy(q), K = loadTensorNpy(k), V = loadTensorNpy(v);
    }
    const Dims d = layer && !layer->hasQkv()
                       ? Dims{layer->weights.heads, layer->weights.rows, layer->weights.cols, 0, 0}
                       : validateInputs(Q, K, V);
    if (headIndex >= d.H)
      throw UsageError("--head " + std::to_string(headIndex) + ": out of range, the input has " +
                       std::to_string(d.H) +
                       (d.H == 1 ? " head (0)" : " heads (0.." + std::to_string(d.H - 1) + ")"));

    AttentionParams params = modelParams ? *modelParams : buildParams(opts, d.H, d.Tq, d.Tk);
    if (scene) {
      params = mergeParams(effectiveParams(*scene), params, app.count("--temperature") > 0);
      validateParams(params, d.H, d.Tq, d.Tk);
    }

    std::string desc = modelDesc;
    Tensor3 logits;
    AttentionResult fromWeights;
    std::unique_ptr<AttentionEngine> engine;  // owns the weights drawn for Q, K, V inputs
    if (layer) {
      // A dump's weights are the truth: temperature, masks and bias re-normalise them exactly.
      fromWeights = renormalizeWeights(layer->weights, params);
      data.weights = &fromWeights.weights;
      if (!layer->hasQkv()) logits = computeLogits(fromWeights.scaled, params);
      desc = (dump->model.empty() ? std::string() : dump->model + " \xC2\xB7 ") + "layer " +
             layer->name + " \xC2\xB7 ";
    }
    if (!layer || layer->hasQkv()) {
      // Compute only what is drawn: the softmax of the chosen head (the logits need S only).
      std::string note;
      engine = createHeadlessEngine(opts.backend, note);
      if (!note.empty()) std::fprintf(stderr, "attnviz export: %s\n", note.c_str());
      engine->setInputs(Q, K, V);
      if (eo.stage == ExportStage::Weights && !layer) {
        if (headIndex >= 0)
          engine->softmax(params, {headIndex});
        else
          engine->softmax(params);
      }
      const AttentionResult& r =
          engine->result(eo.stage == ExportStage::Weights && !layer ? (kStageScaled | kStageWeights)
                                                                    : kStageScaled);
      logits = computeLogits(r.scaled, params);
      if (!layer) data.weights = &r.weights;
    }
    data.logits = &logits;

    // The causal mode shows as "mask: causal"; the other modes name themselves.
    if (scene && scene->mode != Mode::Causal)
      desc = std::string(modeName(scene->mode)) + " \xC2\xB7 ";
    desc += "mask: " + describeMask(params.mask) +
            " \xC2\xB7 \xCF\x84 = " + formatTemperature(params.temperature);
    data.description = desc;

    const Image img = renderExport(data, eo);
    writePng(png, img);
    std::printf("wrote %s (%d x %d)\n", png.c_str(), img.width, img.height);
    return 0;
  });
}

}  // namespace attnviz::app
