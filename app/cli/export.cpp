// attnviz export: a heatmap PNG from a scene or from Q, K, V files, with no display and no GL
// (unless --backend gpu asks for the headless EGL engine).
#include "cli/backend.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/model_options.h"
#include "cli/overlay_view.h"
#include "cli/progress.h"

#include "attnviz/engine/text_parse.h"
#include "attnviz/render/colormap.h"
#include "attnviz/formats/dump.h"
#include "attnviz/engine/engine.h"
#include "attnviz/render/flash_figure.h"
#include "attnviz/formats/image.h"
#include "attnviz/formats/npy.h"
#include "attnviz/model/model_names.h"
#include "attnviz/model/vision.h"
#include "attnviz/model/vision_maps.h"
#include "attnviz/render/overlay_figure.h"
#include "attnviz/render/raster.h"
#include "attnviz/formats/scene.h"
#include "attnviz/model/attribution.h"
#include "attnviz/session/dump_source.h"
#include "attnviz/session/model_grid.h"
#include "attnviz/session/model_source.h"
#include "attnviz/session/seq2seq_source.h"
#include "attnviz/session/session.h"
#include "attnviz/render/streamed_export.h"
#include "attnviz/render/vector_figure.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

namespace attnviz::app {

namespace {

// "all" -> -1, a non-negative integer -> itself; anything else is bad usage.
int parseHead(const std::string& s) {
  if (s == "all") return -1;
  const std::optional<int> v = parseIndex(s, 1'000'000);
  if (!v) throw UsageError("--head: expected a head index (0, 1, ...) or 'all', got '" + s + "'");
  return *v;
}

// --stage and a scene's saved stage: the stage keys of the view ("value_weighted"), the score
// stages drawing the logits.
ExportStage exportStageOf(const std::string& key) {
  if (key == "weights") return ExportStage::Weights;
  if (key == "value_weighted") return ExportStage::ValueWeighted;
  if (key == "rollout") return ExportStage::Rollout;
  return ExportStage::Scores;
}

// The files one run writes: the same figure as PNG, SVG and PDF, any of them.
struct Outputs {
  std::string png, svg, pdf;
  bool vector() const { return !svg.empty() || !pdf.empty(); }
};

// Writes each asked-for format (each file atomically) and says so, one line a file; `note`
// ends the PNG's line.
void writeOutputs(const Outputs& o, const Image& img, const std::string& note = "") {
  if (!o.png.empty()) {
    writePng(o.png, img);
    std::printf("wrote %s (%d x %d)%s\n", o.png.c_str(), img.width, img.height, note.c_str());
  }
  if (!o.svg.empty()) {
    writeSvg(o.svg, img);
    std::printf("wrote %s (%d x %d%s)\n", o.svg.c_str(), img.vector->width, img.vector->height,
                img.vector->pooled ? ", max-pooled" : "");
  }
  if (!o.pdf.empty()) {
    writePdf(o.pdf, img);
    std::printf("wrote %s (%d x %d pt%s)\n", o.pdf.c_str(), img.vector->width,
                img.vector->height, img.vector->pooled ? ", max-pooled" : "");
  }
}

// Scene masks first, the command line's on top: a term set on the command line wins, flags
// combine, and --temperature replaces the scene's when given. (The session adds the causal term
// of the scene's mode.)
AttentionParams mergeParams(const AttentionParams& scene, const AttentionParams& cli,
                            bool cliTemperature) {
  AttentionParams p = scene;
  const MaskSpec& c = cli.mask;
  p.mask.causal = p.mask.causal || c.causal;
  if (c.window > 0) p.mask.window = c.window;
  if (c.prefix > 0) p.mask.prefix = c.prefix;
  if (c.sink > 0) p.mask.sink = c.sink;
  if (c.pad > 0) p.mask.pad = c.pad;
  if (c.chunk > 0) p.mask.chunk = c.chunk;
  if (!c.docs.empty()) p.mask.docs = c.docs;
  if (!c.expr.empty()) p.mask.expr = c.expr;
  if (c.softcap > 0.0f) p.mask.softcap = c.softcap;
  p.mask.alibi = p.mask.alibi || c.alibi;
  if (c.customKind != MaskSpec::Custom::None) {
    p.mask.customKind = c.customKind;
    p.mask.custom = c.custom;
  }
  if (cliTemperature) p.temperature = cli.temperature;
  return p;
}

std::string formatTemperature(float t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(t));
  return buf;
}

// --layer: an index into the dump's layers, or a layer's name ("decoder.0.cross").
const DumpLayer& pickLayer(const Dump& d, const std::string& which) {
  for (const DumpLayer& l : d.layers)
    if (l.name == which) return l;
  if (const std::optional<int> v = parseIndex(which, long(d.layers.size()) - 1))
    return d.layers[std::size_t(*v)];
  std::string names;
  for (const DumpLayer& l : d.layers) names += (names.empty() ? "" : ", ") + l.name;
  throw UsageError("--layer " + which + ": the dump has " + std::to_string(d.layers.size()) +
                   " layers (0.." + std::to_string(d.layers.size() - 1) + ": " + names + ")");
}

// An encoder-decoder's scene in the session as the app shows it: the pass on its
// source and target texts with its ablations, the site it names put in the session as a dump
// layer. Bad indices are input errors naming the scene, as the app reports them.
void showSeq2SeqScene(Session& session, std::shared_ptr<const Model> model, const Scene& scene,
                      const std::string& scenePath) {
  const SceneModel& sm = scene.model;
  const ModelConfig& c = model->config();
  Seq2SeqSource src(model);
  int site = 0;
  if (!sm.site.empty()) {
    site = src.siteIndex(inScene(scenePath, [&] {
      const SiteId id = parseSiteName(sm.site, "model.site");
      checkSiteInRange(id, c, "model.site");
      return id;
    }));
  } else if (sm.layer > 0) {
    throw InputError(scenePath + ": model.layer: an encoder-decoder's sites are chosen with "
                     "model.site");
  }
  inScene(scenePath, [&] { checkHeadInRange(sm.head, c, "model.head"); });
  if (!sm.interventions.empty())
    throw InputError(scenePath + ": model.interventions: not for encoder-decoders (ablations only)");
  std::vector<SiteHead> ablate;
  for (auto [l, h] : sm.ablate) ablate.push_back({SiteId{0, l, 0}, h});
  inScene(scenePath, [&] {
    for (const std::string& a : sm.siteAblate) ablate.push_back(parseSiteAblation(a, "model.ablate"));
    for (const SiteHead& a : ablate) checkSiteAblation(a, c, "model.ablate");
  });
  for (const SiteHead& a : ablate) src.setAblated(a.site, a.head, true);
  try {
    src.setTexts(sm.text.empty() ? kDefaultModelText : sm.text, sm.target);
    if (!sm.maskSource.empty()) src.setMaskedSource(sm.maskSource);
    // A watched translation (the scene's "generate"): its greedy tokens from the saved target,
    // as the app decodes them when the scene opens, up to the end token or the count.
    if (sm.generate.any())
      for (int k = 0; k < sm.generate.tokens; ++k) {
        const int id = src.greedyNext();
        if (src.endsTarget(id)) break;
        src.appendTarget(id);
      }
  } catch (const InputError& e) {
    throw InputError(scenePath + ": " + e.what());
  }
  DumpSource dump(src.dump());
  dump.showLayer(session, site);
}

// A dump layer: its weights are the truth; temperature, masks and bias re-normalise them
// exactly (with q/k/v present, the logits come from them).
Image exportDumpLayer(const std::string& dumpPath, const std::string& layerName,
                      const AttentionCliOptions& opts, ExportOptions eo) {
  const Dump dump = loadDump(dumpPath);
  const DumpLayer& layer = pickLayer(dump, layerName);
  ExportData data;
  data.queryTokens = layer.queryTokens;
  data.keyTokens = layer.keyTokens;
  if (eo.stage == ExportStage::Scores && !layer.hasQkv())
    throw InputError(dumpPath + ": layer " + layer.name +
                     " has no q/k/v tensors; --stage scores needs them (the weights alone "
                     "fix the logits only up to a constant per row)");
  const Dims d = layer.hasQkv()
                     ? validateInputs(layer.q, layer.k, layer.v)
                     : Dims{layer.weights.heads, layer.weights.rows, layer.weights.cols, 0, 0};
  if (eo.head >= d.H)
    throw UsageError("--head " + std::to_string(eo.head) + ": out of range, the input has " +
                     std::to_string(d.H) +
                     (d.H == 1 ? " head (0)" : " heads (0.." + std::to_string(d.H - 1) + ")"));
  const AttentionParams params = buildParams(opts, d.H, d.Tq, d.Tk);
  const AttentionResult fromWeights = renormalizeWeights(layer.weights, params);
  data.weights = &fromWeights.weights;
  Tensor3 logits;
  if (layer.hasQkv()) {
    std::string note;
    auto engine = createHeadlessEngine(opts.backend, note);
    if (!note.empty()) std::fprintf(stderr, "attnviz export: %s\n", note.c_str());
    engine->setInputs(layer.q, layer.k, layer.v);
    logits = computeLogits(engine->result(kStageScaled).scaled, params);
  } else {
    logits = computeLogits(fromWeights.scaled, params);
  }
  data.logits = &logits;
  data.description = (dump.model.empty() ? std::string() : dump.model + " \xC2\xB7 ") + "layer " +
                     layer.name + " \xC2\xB7 mask: " + describeMask(params.mask) +
                     " \xC2\xB7 \xCF\x84 = " + formatTemperature(params.temperature);
  return renderExport(data, eo);
}

// Long inputs from tensors: a labelled weights figure whose materialised scores would pass the
// budget (exportStreamBudget) is streamed, the weights pooled block by block as the figure is
// drawn and never held whole, with a progress bar on stderr when it is a terminal. The same
// pixels as the session's export, which would materialise S. Returns false when this export
// is not one to stream.
bool exportStreamed(const Tensor3& Q, const Tensor3& K, const Tensor3& V,
                    const AttentionCliOptions& opts, ExportOptions eo, int head,
                    bool defaultColormap, const Outputs& out) {
  const Dims d{Q.heads, Q.rows, K.rows, Q.cols, V.cols};
  if (!exportShouldStream(d, eo, exportStreamBudget())) return false;
  if (head >= d.H)
    throw UsageError("--head " + std::to_string(head) + ": out of range, the input has " +
                     std::to_string(d.H) +
                     (d.H == 1 ? " head (0)" : " heads (0.." + std::to_string(d.H - 1) + ")"));
  eo.head = head;
  if (defaultColormap) eo.colormap = ColormapId::Viridis;  // the weights stage's default
  const AttentionParams params = buildParams(opts, d.H, d.Tq, d.Tk);
  ExportData labels;  // a tensor source: index labels, no mode in the description
  labels.description = "mask: " + describeMask(params.mask) +
                       " \xC2\xB7 \xCF\x84 = " + formatTemperature(params.temperature);
  Image img;
  {
    ProgressBar bar("attnviz export");  // its line ends before "wrote" is printed
    img = renderStreamedExport(Q, K, V, params, labels, eo, [&](int h, double f) {
      bar.update("streaming head " + std::to_string(h), f);
    });
  }
  writeOutputs(out, img);
  return true;
}

// --grid: the layers x heads figure of a model's pass, with the thumbnails the app's model view
// keeps (the same call as the app's Export dialog).
int exportModelGrid(ModelCliOptions& modelOpts, const AttentionCliOptions& opts,
                    const CLI::App& app, const std::string& scenePath,
                    const std::string& colormap, const std::string& title, const Outputs& out) {
  ModelGridOptions go;
  go.title = title;
  go.vector = out.vector();
  // Bad usage before any file is read.
  std::optional<ColormapId> cliColormap;
  if (!colormap.empty()) {
    cliColormap = colormapFromName(colormap);
    if (!cliColormap) throw UsageError("--colormap: unknown colormap '" + colormap + "'");
  }
  std::optional<ModelRun> run;
  std::string dir;
  if (!scenePath.empty()) {
    const Scene scene = loadScene(scenePath);
    if (!scene.model.any())
      throw UsageError(scenePath + ": not a model scene; --grid draws a model's layers x heads");
    const SceneView view = parseSceneView(scene.extraJson, scenePath);
    if (const auto id = colormapFromName(view.weightColormap)) go.colormap = *id;
    run = runModelScene(scene, scenePath, opts, Capture::view(kModelGridThumbnail),
                        parseMaxMemory(modelOpts.maxMemory));
    if (run->model->config().encoderDecoder())
      throw UsageError(scenePath + ": --grid draws a decoder's or an encoder's layers x heads; "
                       "export an encoder-decoder's site with --scene alone");
    dir = scene.model.path;
  } else {
    modelOpts.capture = Capture::view(kModelGridThumbnail);
    run = runModelFromOptions(modelOpts, opts, app);
    dir = modelOpts.dir;
  }
  if (cliColormap) go.colormap = *cliColormap;
  const Image img = renderModelGrid(*run->model, run->result, run->interventions,
                                    modelTitleName(*run->model, dir), go);
  writeOutputs(out, img);
  return 0;
}

// What --overlay takes beside --model, --layer, --head and the outputs.
struct OverlayCliOptions {
  bool overlay = false, rollout = false;
  std::string image, token, rolloutHeads, maskPatches;
  double opacity = 0.6, rolloutDiscard = 0;
  bool discardGiven = false, maskGiven = false;
  std::vector<std::string> ablate;
  double temperature = 1.0;  // --temperature (checked by checkAttentionOptions)
};

// --overlay: an image model's view of --image with one token's attention row (or the rollout's)
// over its patches (docs/image-models.md#the-overlay-figure).
int exportOverlay(const std::string& model, const std::string& layerText,
                  const std::string& headText, const OverlayCliOptions& ov,
                  const std::string& colormap, const std::string& title, const Outputs& out) {
  // Bad usage before any file is read.
  const bool probeRow = ov.token == "probe" || ov.token == "PROBE" || ov.token == "Probe";
  if (layerText.empty() && !probeRow) throw UsageError("--overlay needs --layer L");
  const int layer = layerText.empty() ? 0 : parseLayerIndex(layerText);
  const std::optional<int> head = parseIndex(headText, 1'000'000);
  if (!head) throw UsageError("--head: expected a head index (0, 1, ...), got '" + headText + "'");
  int token = kDefaultOverlayToken;
  bool cls = false;
  if (!ov.token.empty()) {
    std::string lower = ov.token;
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == "cls") {
      cls = true;
    } else if (lower == "probe") {
      token = kProbeOverlayToken;
    } else {
      const std::optional<int> t = parseIndex(ov.token, 1'000'000'000);
      if (!t)
        throw UsageError("--token: expected 'cls', 'probe' or a token index (0, 1, ...), got '" +
                         ov.token + "'");
      token = *t;
    }
  }
  if ((!ov.rolloutHeads.empty() || ov.discardGiven) && !ov.rollout)
    throw UsageError("--rollout-heads and --rollout-discard go with --rollout");
  if (token == kProbeOverlayToken && ov.rollout)
    throw UsageError("--token probe draws the probe's own row: no --rollout");
  RolloutOptions ro;
  if (!ov.rolloutHeads.empty()) {
    if (ov.rolloutHeads != "mean" && ov.rolloutHeads != "max")
      throw UsageError("--rollout-heads: expected mean or max, got '" + ov.rolloutHeads + "'");
    ro.maxHeads = ov.rolloutHeads == "max";
  }
  if (!(ov.rolloutDiscard >= 0 && ov.rolloutDiscard <= 0.9))
    throw UsageError("--rollout-discard: expected a fraction in 0..0.9");
  ro.discard = ov.rolloutDiscard;
  VisionInterventions iv;
  iv.ablate = parseLayerHeadList(ov.ablate);
  if (ov.maskGiven) iv.maskPatches = parsePatchList(ov.maskPatches);
  iv.temperature = ov.temperature;
  if (!(ov.opacity >= 0.0 && ov.opacity <= 1.0))
    throw UsageError("--opacity: expected a value in 0..1");
  ColormapId cmap = ColormapId::Viridis;
  if (!colormap.empty()) {
    const std::optional<ColormapId> id = colormapFromName(colormap);
    if (!id) throw UsageError("--colormap: unknown colormap '" + colormap + "'");
    cmap = *id;
  }

  const std::string dir = locateModelFiles(resolveModelName(model), false).dir;
  if (!VisionModel::isVisionFolder(dir))
    throw UsageError("--overlay: " + model + " is not an image model (config.json's model_type)");
  const VisionModel m = VisionModel::load(dir);
  const VisionConfig& c = m.config();
  if (layer >= c.layers)
    throw UsageError("--layer " + std::to_string(layer) + ": out of range, the model has " +
                     std::to_string(c.layers) + " layers (0.." + std::to_string(c.layers - 1) +
                     ")");
  if (*head >= c.heads)
    throw UsageError("--head " + std::to_string(*head) + ": out of range, the model has " +
                     std::to_string(c.heads) + " heads (0.." + std::to_string(c.heads - 1) + ")");
  if (cls && !c.hasCls)
    throw UsageError("--token cls: " + model + " (" + c.family +
                     ") has no CLS token; give a token index, or no --token for the mean of the "
                     "patch queries");
  if (token == kProbeOverlayToken && !c.hasProbe)
    throw UsageError("--token probe: " + model + " (" + c.family +
                     ") has no pooling probe (SigLIP's head)");
  const VisionPass pass = runVisionPass(dir, ov.image, {}, &m, iv);
  OverlayChoice oc;
  oc.layer = layer, oc.head = *head, oc.token = token, oc.rollout = ov.rollout;
  oc.rolloutOptions = ro;
  oc.opacity = ov.opacity, oc.colormap = cmap, oc.title = title, oc.vector = out.vector();
  const Image img = renderOverlayChoice(pass, oc);
  char note[96];
  std::snprintf(note, sizeof note, ": the image at (%d, %d), %d px per image pixel", img.heatX,
                img.heatY, img.cellPx);
  writeOutputs(out, img, note);
  return 0;
}

}  // namespace

int runExport(int argc, char** argv) {
  CLI::App app{"Export an attention heatmap as PNG, SVG or PDF (no display needed)", "export"};
  Outputs out;
  std::string scenePath, q, k, v, head = "0", stage = "weights", colormap, title, blocks;
  int cell = 0, width = 0, columns = 0, flashStep = -1;
  bool bare = false, noLabels = false;
  AttentionCliOptions opts;

  auto* sceneOpt = app.add_option("--scene", scenePath, "scene .json (tokens, mode, heads, masks)");
  auto* qOpt = app.add_option("--q", q, "queries [T_q, d_k] or [H, T_q, d_k] (.npy)");
  auto* kOpt = app.add_option("--k", k, "keys [T_k, d_k] or [H, T_k, d_k] (.npy)");
  auto* vOpt = app.add_option("--v", v, "values [T_k, d_v] or [H, T_k, d_v] (.npy)");
  std::string dumpPath, layerName;
  auto* dumpOpt = app.add_option(
      "--dump", dumpPath, "attention dump (.safetensors or .npz; see docs/dumps.md)");
  app.add_option("--layer", layerName,
                 "layer to draw: of the dump (index or name) or of the --model (index); required "
                 "with either");
  sceneOpt->excludes(qOpt)->excludes(kOpt)->excludes(vOpt);
  dumpOpt->excludes(sceneOpt)->excludes(qOpt)->excludes(kOpt)->excludes(vOpt);
  ModelCliOptions modelOpts;
  addModelOptions(app, modelOpts, false);
  addAttentionOptions(app, opts);
  app.add_option("--png", out.png, "output PNG (written atomically)");
  app.add_option("--svg", out.svg,
                 "output SVG: a rect per cell, labels as text (written atomically)");
  app.add_option("--pdf", out.pdf,
                 "output PDF: a rectangle per cell, labels as text in the PNG's font (written "
                 "atomically)");
  app.add_option(
      "--head", head,
      "head index, or 'all' for a grid of every head (default: the scene's saved head, else 0)");
  app.add_option("--stage", stage,
                 "weights (softmax), scores (logits, -inf where masked), or of a model's layer "
                 "value_weighted (A_ij |v_j W_O^h|) or rollout (to the layer); default: the "
                 "scene's saved stage, else weights")
      ->check(CLI::IsMember({"weights", "scores", "value_weighted", "rollout"}));
  bool grid = false;
  app.add_flag("--grid", grid,
               "the layers x heads figure of --model (no --layer) or of a model scene: every "
               "attention site a row, every head a panel");
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
  addBlocksOption(app, blocks);
  app.add_option("--flash-step", flashStep,
                 "draw step K of the FlashAttention walkthrough (counted from 1; 0: before the "
                 "first) with tiles of --blocks (default: the scene's, else 8x8); a scene saved in "
                 "that stage draws its step unless --stage is given");
  OverlayCliOptions overlay;
  app.add_flag("--overlay", overlay.overlay,
               "an image model's figure: --image with one token's attention row over its "
               "patches (--model DIR --image FILE --layer L --head H)");
  app.add_option("--image", overlay.image,
                 "with --overlay: the image file (PNG, JPEG, BMP), preprocessed as the model's "
                 "preprocessor_config.json says");
  app.add_option("--token", overlay.token,
                 "with --overlay: whose row, 'cls' or a token index (CLS, DIST, REG0.., patches); "
                 "default CLS, or the mean of the patch queries for a model without one");
  app.add_flag("--rollout", overlay.rollout,
               "with --overlay: the attention rollout to --layer (heads averaged, + I) instead "
               "of one head's weights");
  app.add_option("--opacity", overlay.opacity,
                 "with --overlay: the colours' opacity over the image, 0..1 (default 0.6)");
  app.add_option("--rollout-heads", overlay.rolloutHeads,
                 "with --overlay --rollout: fuse the heads by their mean (default) or max");
  auto* discardOpt = app.add_option(
      "--rollout-discard", overlay.rolloutDiscard,
      "with --overlay --rollout: zero this lowest fraction (0..0.9) of each layer's fused "
      "attention before + I, never the CLS-to-CLS entry (default 0)");
  auto* maskOpt = app.add_option(
      "--mask-patches", overlay.maskPatches,
      "with --overlay: hide these patches (0-based, row-major) from every query's keys, e.g. 3,7");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;
  overlay.discardGiven = discardOpt->count() > 0;
  overlay.maskGiven = maskOpt->count() > 0;

  return guarded("export", [&] {
    // Everything that is bad usage is refused before any file is read.
    if (out.png.empty() && !out.vector())
      throw UsageError("give one or more of --png OUT.png, --svg OUT.svg and --pdf OUT.pdf");
    if ((!out.png.empty() && (out.png == out.svg || out.png == out.pdf)) ||
        (!out.svg.empty() && out.svg == out.pdf))
      throw UsageError("--png, --svg and --pdf name the same file; give each its own");
    const bool fromScene = !scenePath.empty(), fromDump = !dumpPath.empty(),
               fromModel = !modelOpts.dir.empty();
    if (overlay.overlay || !overlay.image.empty()) {
      if (!overlay.overlay)
        throw UsageError("--image draws the overlay figure: add --overlay");
      if (overlay.image.empty()) throw UsageError("--overlay needs --image FILE");
      if (!fromModel) throw UsageError("--overlay needs --model DIR (an image model)");
      if (fromScene || fromDump || !q.empty() || !k.empty() || !v.empty() || grid || bare ||
          noLabels || app.count("--stage") || app.count("--cell") || app.count("--width") ||
          app.count("--columns") || !blocks.empty() || app.count("--flash-step") ||
          !modelOpts.text.empty() || !modelOpts.ids.empty())
        throw UsageError("--overlay takes --model, --image, --layer, --head, --token, "
                         "--rollout, --rollout-heads, --rollout-discard, --ablate, "
                         "--mask-patches, --temperature, --opacity, --colormap, --title and the "
                         "outputs only");
      for (const char* o : {"--mask", "--mask-expr", "--softcap", "--mask-file", "--alibi",
                            "--backend"})
        if (app.count(o))
          throw UsageError(std::string(o) +
                           ": an image model's pass takes no attention options but "
                           "--temperature");
      if (head == "all") throw UsageError("--overlay draws one head: --head N");
      checkAttentionOptions(opts);
      overlay.ablate = modelOpts.ablate;
      overlay.temperature = opts.temperature;
      return exportOverlay(modelOpts.dir, layerName, head, overlay,
                           colormap, title, out);
    }
    if (!overlay.token.empty() || overlay.rollout || app.count("--opacity") ||
        app.count("--rollout-heads") || overlay.discardGiven || overlay.maskGiven)
      throw UsageError("--token, --rollout, --rollout-heads, --rollout-discard, --mask-patches "
                       "and --opacity go with --overlay");
    if (fromScene && isImageSceneFile(scenePath)) {
      // An image-view scene (the app's image view saved): its overlay figure, as the app
      // exports it.
      if (fromModel || fromDump || !q.empty() || !k.empty() || !v.empty() || grid || bare ||
          noLabels || !layerName.empty() || app.count("--head") || app.count("--stage") ||
          app.count("--cell") || app.count("--width") || app.count("--columns") ||
          !blocks.empty() || app.count("--flash-step"))
        throw UsageError("an image-view scene takes --colormap, --title and the outputs only");
      const ImageScene sc = readImageScene(scenePath);
      const std::string dir = locateModelFiles(resolveModelName(sc.model), false).dir;
      if (!VisionModel::isVisionFolder(dir))
        throw InputError(scenePath + ": model.path " + sc.model + " is not an image model");
      const VisionPass pass = runVisionPass(dir, sc.image, {}, nullptr, sc.interventions);
      OverlayChoice oc = sc.choice;
      if (!colormap.empty()) {
        const std::optional<ColormapId> id = colormapFromName(colormap);
        if (!id) throw UsageError("--colormap: unknown colormap '" + colormap + "'");
        oc.colormap = *id;
      }
      oc.title = title;
      oc.vector = out.vector();
      const Image img = renderOverlayChoice(pass, oc);
      writeOutputs(out, img);
      return 0;
    }
    if (fromModel && isVisionModelArg(modelOpts.dir))
      throw UsageError("--model " + modelOpts.dir +
                       " is an image model: export its overlay with --image FILE --overlay");
    if (fromModel && (fromScene || fromDump || !q.empty() || !k.empty() || !v.empty()))
      throw UsageError("--model excludes --scene, --dump and --q/--k/--v");
    if (!fromScene && !fromDump && !fromModel && (q.empty() || k.empty() || v.empty()))
      throw UsageError(
          "give --scene SCENE.json, --dump FILE --layer L, --model DIR --layer L, or all three of "
          "--q, --k and --v");
    if (grid) {
      if (!fromModel && !fromScene)
        throw UsageError("--grid draws a model's layers x heads: give --model DIR or a model "
                         "scene");
      if (!layerName.empty()) throw UsageError("--grid draws every layer: no --layer");
      if (app.count("--head") || app.count("--stage") || bare || app.count("--flash-step") > 0 ||
          !blocks.empty() || app.count("--cell") || app.count("--columns") || noLabels)
        throw UsageError("--grid draws every head's weights: it takes none of --head, --stage, "
                         "--bare, --cell, --columns, --no-labels, --blocks, --flash-step");
      if (app.count("--width")) throw UsageError("--grid sizes its panels itself: no --width");
      return exportModelGrid(modelOpts, opts, app, scenePath, colormap, title, out);
    }
    if ((fromDump || fromModel) != !layerName.empty())
      throw UsageError(fromDump    ? "--dump needs --layer L (an index or a layer name)"
                       : fromModel ? "--model needs --layer L"
                                   : "--layer goes with --dump or --model");
    const int modelLayer = fromModel ? parseLayerIndex(layerName) : -1;
    const int parsedHead = parseHead(head);
    checkAttentionOptions(opts);
    const BlockSize blockSize = blocks.empty() ? BlockSize{} : parseBlockSize(blocks);
    const bool flashAsked = app.count("--flash-step") > 0;
    if (flashAsked && flashStep < 0)
      throw UsageError("--flash-step: expected a step >= 0 (0: before the first), got " +
                       std::to_string(flashStep));
    if (flashAsked && fromDump)
      throw UsageError("--flash-step needs Q, K and V: give --scene, --model or --q/--k/--v");
    if (flashAsked && (parsedHead < 0 || stage == "scores"))
      throw UsageError(
          "--flash-step draws one head's weights: pick it with --head N, and no "
          "--stage scores");
    ExportOptions eo;
    eo.stage = exportStageOf(stage);
    if (exportStageFromModel(eo.stage) && !fromModel && !fromScene)
      throw UsageError("--stage " + stage + " is a model layer's: give --model DIR --layer L or "
                       "a model scene");
    if (!colormap.empty()) {
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
    if (bare && parsedHead < 0) throw UsageError("--bare draws one head; pick it with --head N");
    eo.bare = bare;
    eo.cell = cell;
    if (width > 0) eo.targetWidth = width;
    eo.labels = !noLabels;
    eo.title = title;
    eo.gridColumns = columns;
    eo.vector = out.vector();

    if (fromDump) {
      eo.head = parsedHead;
      if (colormap.empty())
        eo.colormap = eo.stage == ExportStage::Scores ? ColormapId::Diverging : ColormapId::Viridis;
      const Image img = exportDumpLayer(dumpPath, layerName, opts, eo);
      writeOutputs(out, img);
      return 0;
    }

    // The same session and export path as the GUI's dialog and Ctrl+S.
    std::string note;
    Session session(createHeadlessEngine(opts.backend, note));
    if (!note.empty()) std::fprintf(stderr, "attnviz export: %s\n", note.c_str());
    std::optional<SceneView> view;
    std::optional<AttentionParams> modelParams;
    // The layer's Q, K and V from the pass (with every intervention applied), drawn with the
    // parameters that layer ran with.
    auto showLayer = [&](ModelRun& run, int layer, const std::string& dir) {
      // The pass kept no activations (Capture::view): the layer's Q, K, V are recomputed from
      // its residual stream, and K, V repeated per query head for the session's engines.
      Tensor3 q, k, v;
      run.model->layerQkv(run.result, layer, q, k, v);
      const int group = run.model->config().kvGroup();
      std::vector<std::string> labels = tokenLabels(*run.model, run.result.ids);
      modelParams = layerParams(*run.model, run.result, layer);
      session.setTensors(std::move(q), repeatKvHeads(k, group), repeatKvHeads(v, group), labels,
                         labels);
      session.setSourceLabel(
          modelLayerLabel(modelTitleName(*run.model, dir), layer, run.interventions));
    };
    // A model's own stages (value-weighted, rollout) from the shown layer's pass, as the app's
    // model source computes them.
    auto modelStages = [&](ModelRun& run, int layer, ExportStage st) {
      if (st == ExportStage::ValueWeighted) {
        session.setSourceStages(valueNorms(*run.model, run.result, layer), {});
      } else if (st == ExportStage::Rollout) {
        if (int(run.result.ids.size()) > ModelSource::kRolloutMaxTokens)
          throw UsageError("the rollout is computed for up to " +
                           std::to_string(ModelSource::kRolloutMaxTokens) + " tokens; the text has " +
                           std::to_string(run.result.ids.size()));
        const MatrixRM r = attentionRolloutTo(*run.model, run.result, layer);
        session.setSourceStages({}, std::vector<float>(r.data(), r.data() + r.size()));
      }
    };
    int sceneModelHead = -1;  // a model scene's head, the default for --head
    if (fromModel) {
      modelOpts.capture = Capture::view(0);
      ModelRun run = runModelFromOptions(modelOpts, opts, app);
      checkLayer(modelLayer, run.model->config());
      showLayer(run, modelLayer, modelOpts.dir);
      modelStages(run, modelLayer, eo.stage);
    } else if (fromScene) {
      Scene scene = loadScene(scenePath);
      if (scene.model.any()) {
        // A model scene exports what the app shows for it: the layer and head it names, on its
        // text, with its ablations, in the stage and colours its view was saved with.
        view = parseSceneView(scene.extraJson, scenePath);
        ModelRun run = runModelScene(scene, scenePath, opts, Capture::view(0),
                                     parseMaxMemory(modelOpts.maxMemory));
        if (run.model->config().encoderDecoder()) {
          // An encoder-decoder: its pass as the app shows it, the scene's site a dump layer.
          showSeq2SeqScene(session, std::move(run.model), scene, scenePath);
          sceneModelHead = scene.model.head;
          if (app.count("--stage") ? exportStageFromModel(eo.stage)
                                   : !view->stage.empty() &&
                                         exportStageFromModel(exportStageOf(view->stage)))
            throw UsageError(scenePath + ": an encoder-decoder's sites have weights only; "
                             "no model stages");
        } else {
          showLayer(run, scene.model.layer, scene.model.path);
          sceneModelHead = scene.model.head;
          // An encoder's block (a pair's slice, the special tokens hidden), as the app shows it.
          const SceneModel& sm = scene.model;
          if (!sm.slice.empty() || !sm.special.empty()) {
            const EncodedText e = encodeModelText(
                *run.model, sm.text.empty() ? kDefaultModelText : sm.text, sm.textPair,
                ChatSetting{sm.chat, sm.system});
            session.setBlock(blockFor(e.segments, pairSliceFromKey(sm.slice).value_or(PairSlice::All),
                                      specialTokensFromKey(sm.special).value_or(SpecialTokens::Show)));
          }
          const ExportStage st = app.count("--stage") || view->stage.empty()
                                     ? eo.stage
                                     : exportStageOf(view->stage);
          modelStages(run, scene.model.layer, st);
        }
      } else {
        view = parseSceneView(scene.extraJson, scenePath);
        session.setScene(std::move(scene));
      }
    } else {
      QkvTensors in = loadQkvNpy(q, k, v);
      Tensor3 Q = std::move(in.q), K = std::move(in.k), V = std::move(in.v);
      if (exportStreamed(Q, K, V, opts, eo, parsedHead, colormap.empty(), out)) return 0;
      validateInputs(Q, K, V);
      session.setTensors(std::move(Q), std::move(K), std::move(V));
    }
    session.updateInputs();
    const Dims d = session.dims();
    // A scene exports as it was shown: its saved head, stage and colormap, unless given here.
    int headIndex = parsedHead;
    if (view && !app.count("--head")) headIndex = std::clamp(view->head, 0, d.H - 1);
    if (sceneModelHead >= 0 && !app.count("--head")) headIndex = sceneModelHead;
    if (view && !app.count("--stage") && !view->stage.empty()) {
      eo.stage = exportStageOf(view->stage);
      // A tensor scene has no model stages: its view falls back to the weights, as the app's.
      if (exportStageFromModel(eo.stage) && sceneModelHead < 0) eo.stage = ExportStage::Weights;
    }
    if (colormap.empty()) {
      eo.colormap = eo.stage == ExportStage::Scores ? ColormapId::Diverging : ColormapId::Viridis;
      if (view && eo.stage != ExportStage::Scores)
        if (const auto id = colormapFromName(view->weightColormap)) eo.colormap = *id;
    }
    if (bare && headIndex < 0) throw UsageError("--bare draws one head; pick it with --head N");
    eo.head = headIndex;
    if (headIndex >= d.H)
      throw UsageError("--head " + std::to_string(headIndex) + ": out of range, the input has " +
                       std::to_string(d.H) +
                       (d.H == 1 ? " head (0)" : " heads (0.." + std::to_string(d.H - 1) + ")"));

    // The command line's masks on top of the scene's.
    const AttentionParams cli = modelParams ? *modelParams : buildParams(opts, d.H, d.Tq, d.Tk);
    Scene& scene = session.editScene();
    scene.params = fromScene && !modelParams ? mergeParams(scene.params, cli, app.count("--temperature") > 0) : cli;
    session.touchMask();
    View shown;
    shown.head = std::max(headIndex, 0);
    session.setView(shown);

    // FlashAttention: --flash-step, or a scene saved in that stage (unless --stage is given).
    if (flashAsked || (view && view->flashOn && !app.count("--stage"))) {
      BlockSize b{8, 8};
      if (view && view->flashOn) b = {view->flashBlockRows, view->flashBlockKeys};
      if (!blocks.empty()) b = blockSize;
      const int step = flashAsked ? flashStep : view->flashStep;
      if (headIndex < 0)
        throw UsageError("a FlashAttention step draws one head; pick it with --head N");
      if ((long long)d.Tq * d.Tk > 4096LL * 4096LL)
        throw UsageError("--flash-step: the walkthrough keeps the whole " + std::to_string(d.Tq) +
                         " x " + std::to_string(d.Tk) +
                         " matrix of one head; it teaches on up to 4096 x 4096");
      session.update();
      const SceneInputs& in = session.inputs();
      FlashWalkthrough w(in.q, in.k, in.v, headIndex, session.params(), b.rows, b.cols);
      if (flashAsked && step > w.steps())
        throw UsageError("--flash-step " + std::to_string(step) + ": " + std::to_string(b.rows) +
                         "x" + std::to_string(b.cols) + " tiles give " + std::to_string(w.steps()) +
                         " steps (0.." + std::to_string(w.steps()) + ")");
      w.seek(step - 1);  // a scene's step past the end shows the last, as the GUI does
      eo.stage = ExportStage::Weights;  // whatever stage the scene was saved with
      if (colormap.empty()) {
        eo.colormap = ColormapId::Viridis;
        if (view)
          if (const auto id = colormapFromName(view->weightColormap)) eo.colormap = *id;
      }
      const Image img = renderFlashStep(w, in.queryTokens, in.keyTokens, session.describe(), eo);
      writeOutputs(out, img, ": " + flashStepTitle(w));
      if (w.done())
        std::printf("max |O_flash - O| = %.9g, max |A_flash - A| = %.9g\n",
                    double(w.maxOutputDifference()), double(w.maxWeightDifference()));
      return 0;
    }
    if (!blocks.empty()) {
      // The mask as the session runs it: a scene's mode adds its causal term; tensors have none.
      const AttentionParams shownParams = fromScene ? effectiveParams(scene) : scene.params;
      eo.blocks = classifyEveryHead(shownParams, d.H, d.Tq, d.Tk, blockSize);
      printBlockCounts(eo.blocks);
    }
    const Image img = session.exportImage(eo);
    writeOutputs(out, img);
    return 0;
  });
}

}  // namespace attnviz::app
