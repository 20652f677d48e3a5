// attnviz GUI: the model view's side of the frame. A model folder opens on a worker thread (the
// status bar shows Model::open's progress); the pass runs at the frame boundary once the
// text has not changed for a moment, and the selected layer goes to the session as tensors.
#include "gui/app_state.h"
#include "cli/cli.h"
#include "panels/panels.h"

#include "attnviz/engine/parallel.h"
#include "attnviz/model/tokenizers/chat_template.h"
#include "attnviz/session/model_grid.h"
#include "attnviz/session/request.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>

namespace attnviz::gui {

namespace {

constexpr double kTextDebounceSeconds = 0.3;
constexpr int kTopK = 5;
// Cells a side of each head's pooled weights in the layers x heads grid (its thumbnails are at
// most 64 pixels a side at a UI scale of 1, 128 at 2): the export's grid figure's, so that the
// app's and `export --grid`'s figures pool the same cells.
constexpr int kGridThumbnail = kModelGridThumbnail;

// A worker's last act, whether it returns or throws: the frame loop adopts its result at once.
struct WakeOnExit {
  WakeOnExit() = default;
  WakeOnExit(const WakeOnExit&) = delete;
  WakeOnExit& operator=(const WakeOnExit&) = delete;
  ~WakeOnExit() { wakeFrameLoop(); }
};

// A worker pass's progress: each finished layer wakes the frame loop (the status bar's count).
void wakeOnEachLayer(PassProgress& p) {
  p.onLayer = [](int) { wakeFrameLoop(); };
}
std::shared_ptr<PassProgress> newPassProgress() {
  auto p = std::make_shared<PassProgress>();
  wakeOnEachLayer(*p);
  return p;
}

// Max-pools heads [h0, h1) of weights [H, T_q, T_k] into blocks of ceil(max(T_q, T_k) / side)
// cells a side, as the pass pools Capture::view's thumbnails (a block's max, from 0: weights are
// never negative), so a layer's grid row drawn before the pass ends is the one drawn after.
Tensor3 poolBlocks(const Tensor3& w, int h0, int h1, int side) {
  const int T = std::max(w.rows, w.cols), step = std::max(1, (T + side - 1) / side);
  const int nr = (w.rows + step - 1) / step, nc = (w.cols + step - 1) / step;
  Tensor3 out(h1 - h0, nr, nc);
  detail::parallelFor(h1 - h0, [&](int k) {
    for (int i = 0; i < w.rows; ++i) {
      const float* row = w.head(h0 + k) + std::size_t(i) * w.cols;
      float* dst = out.head(k) + std::size_t(i / step) * nc;
      for (int b = 0; b < nc; ++b) {
        const int j0 = b * step, n = std::min(w.cols, j0 + step) - j0;
        dst[b] = std::max(dst[b], Eigen::Map<const Eigen::ArrayXf>(row + j0, n).maxCoeff());
      }
    }
  });
  return out;
}

// On the pass's thread, as each layer of the opening pass finishes: its grid row, and the shown
// head's matrix when it is the shown layer, for the frame to draw at once (OpenPreview).
void publishLayer(OpenPreview& p, int layer, const Tensor3& w) {
  Tensor3 thumb = poolBlocks(w, 0, w.heads, kGridThumbnail);
  int want = 0, head = 0;
  {
    std::lock_guard<std::mutex> lock(p.m);
    if (layer <= p.lastLayer) ++p.round;  // the request's ablations re-run from here
    p.lastLayer = layer;
    if (layer >= p.layers || (p.round == 0 && layer >= p.finalFrom)) return;
    want = p.wantLayer, head = std::clamp(p.wantHead, 0, w.heads - 1);
  }
  Tensor3 shown;
  if (layer == want) shown = poolBlocks(w, head, head + 1, OpenPreview::kPreviewSide);
  const double ms = std::chrono::duration<double, std::milli>(OpenPreview::Clock::now() - p.start).count();
  std::lock_guard<std::mutex> lock(p.m);
  if (p.thumbs[std::size_t(layer)].empty()) ++p.layersDone;
  p.tokens = w.rows;
  p.thumbs[std::size_t(layer)] = std::move(thumb);
  p.layerDoneMs[std::size_t(layer)] = ms;
  if (!shown.empty()) {
    p.shown = std::move(shown);
    p.shownLayer = layer, p.shownHead = head;
    ++p.shownVersion;
  }
  ++p.version;
}

// Before the opening pass of a decoder or encoder: the preview's sizes, the layer and head the
// request shows, and the hook that publishes each layer.
void startPreview(ModelLoadProgress& progress, const ModelConfig& c, const ModelState::Request& rq) {
  OpenPreview& p = progress.preview;
  {
    std::lock_guard<std::mutex> lock(p.m);
    p.openedMs = std::chrono::duration<double, std::milli>(OpenPreview::Clock::now() - p.start).count();
    p.layers = c.nLayer, p.heads = c.nHead, p.kvGroup = c.kvGroup();
    p.thumbs.assign(std::size_t(c.nLayer), Tensor3{});
    p.layerDoneMs.assign(std::size_t(c.nLayer), -1.0);
    p.wantLayer = std::clamp(rq.layer, 0, std::max(0, c.nLayer - 1));
    p.wantHead = std::clamp(rq.head, 0, std::max(0, c.nHead - 1));
    // The first round (the baseline) is the final pass only below the first layer an ablation or
    // a saved intervention changes.
    for (auto [l, h] : rq.ablate) p.finalFrom = std::min(p.finalFrom, l);
    for (const SceneLayerIntervention& li : rq.interventions) p.finalFrom = std::min(p.finalFrom, li.layer);
  }
  progress.pass.onWeights = [p = &progress.preview](int layer, const Tensor3& w) {
    publishLayer(*p, layer, w);
  };
}

// A model scene's text, held until its model has opened and its request passed the checks (the
// text box keeps the open model's text until then). One model opens at a time (openModel).
struct PendingText {
  bool set = false;
  std::string text;
} gPendingText;

// Puts the encoder-decoder's sites in the dump view (s.dump.source rebuilt from the pass).
void showSeq2Seq(AppState& s) {
  DumpState& ds = s.dump;
  ds.source = std::make_unique<DumpSource>(ds.seq2seq->dump());
  ds.layer = std::clamp(ds.layer, 0, ds.source->layers() - 1);
  ds.layerDirty = true;
  ++ds.version;
  ds.before = ds.seq2seq->baselineTopK(kTopK);
  ds.after = ds.seq2seq->topK(kTopK);
}

// Runs `f`, the request's parse and range checks (attnviz/session/request.h): an option's
// mistake stays a usage error, a scene's becomes an input error naming the file.
template <class F>
auto checkRequest(const ModelState::Request& rq, F&& f) -> decltype(f()) {
  if (rq.cli) return f();
  return inScene(rq.origin, f);
}

// The request's ablations (its "L:H" pairs, then its "enc:L:H" and "cross:L:H"), each checked
// against the model.
std::vector<SiteHead> requestAblations(const ModelState::Request& rq, const ModelConfig& c,
                                       const std::string& what) {
  std::vector<SiteHead> out;
  for (auto [l, h] : rq.ablate) out.push_back({SiteId{0, l, 0}, h});
  for (const std::string& a : rq.siteAblate) out.push_back(parseSiteAblation(a, what));
  for (const SiteHead& a : out) checkSiteAblation(a, c, what);
  return out;
}

// On the opening worker: an encoder-decoder's source with the request checked (site, head,
// ablations, masked source positions: before anything open is closed) and its first pass run
// on the source and target texts. Reads nothing of the app's state (`box`: the text box as it
// was when the model began to open).
void prepareSeq2Seq(OpenedModel& out, const ModelState::Request& rq, const std::string& dir,
                    const PendingText& pending, const std::string& box) {
  auto fail = [&](const std::string& what) -> void {
    if (rq.cli) throw UsageError(what);
    throw InputError(rq.origin + ": " + what);
  };
  auto src = std::make_unique<Seq2SeqSource>(std::shared_ptr<const Model>(std::move(out.model)));
  const ModelConfig& c = src->model().config();
  const std::string prefix = rq.cli ? "--" : "model.";
  int site = 0;
  if (!rq.site.empty()) {
    site = src->siteIndex(checkRequest(rq, [&] {
      const SiteId id = parseSiteName(rq.site, prefix + "site");
      checkSiteInRange(id, c, prefix + "site");
      return id;
    }));
  } else if (rq.layer > 0) {
    fail(prefix + "layer: an encoder-decoder's sites are chosen with " + prefix + "site");
  }
  const std::vector<SiteHead> ablate = checkRequest(rq, [&] {
    checkHeadInRange(rq.head, c, prefix + "head");
    return requestAblations(rq, c, prefix + "ablate");
  });
  if (!rq.interventions.empty())
    fail(prefix + "interventions: not for encoder-decoders (ablations only)");
  std::string text = pending.set ? pending.text : box;
  if (text.empty()) text = kDefaultModelText;
  // The ablations and masked positions are recorded first (a source without texts runs
  // nothing), so that the texts' one pass and its baseline carry them.
  for (const SiteHead& a : ablate) src->setAblated(a.site, a.head, true);
  if (!rq.maskSource.empty()) {
    std::vector<int> positions = rq.maskSource;
    const int S = int(src->model().encode(text).size());  // may refuse the text
    try {
      checkMaskedSource(positions, S);
    } catch (const InputError& e) {
      fail(prefix + e.what());
    }
    src->setMaskedSource(positions);
  }
  src->setTexts(text, rq.target);  // may refuse the texts: nothing closed yet
  out.seq2seq = std::move(src);
  out.site = site;
  out.text = std::move(text);
}

// An encoder-decoder's source from the opening worker: its sites shown as a dump's layers.
void adoptSeq2Seq(AppState& s, OpenedModel opened, const ModelState::Request& rq,
                  const std::string& dir) {
  ModelState& m = s.model;
  m.gen.stopAll();
  closeSources(s);
  DumpState& ds = s.dump;
  ds.savedEngine = s.session.releaseEngine();
  ds.seq2seq = std::move(opened.seq2seq);
  // From now on its passes run on a worker (syncSeq2Seq).
  ds.seq2seq->setDeferPasses(true);
  ds.path = dir;
  ds.layer = opened.site;
  const std::string& text = opened.text;
  std::snprintf(ds.sourceText, sizeof ds.sourceText, "%s", text.c_str());
  std::snprintf(ds.targetText, sizeof ds.targetText, "%s", rq.target.c_str());
  {
    std::string list;
    for (int p : ds.seq2seq->maskedSource()) list += (list.empty() ? "" : ",") + std::to_string(p);
    std::snprintf(ds.maskSource, sizeof ds.maskSource, "%s", list.c_str());
  }
  ds.translate = DumpState::Translate{};
  if (rq.generate.any()) ds.translate.tokens = ds.translate.requested = rq.generate.tokens;
  showSeq2Seq(s);
  s.scene.path.clear();
  s.view.head = rq.head;
  s.view.headAverage = false;
  Scene& sc = s.session.editScene();
  sc.params = AttentionParams{};
  sc.mode = Mode::Self;  // the pass's weights carry their own masks
  if (m.sceneTitle.empty()) {
    sc.title = std::filesystem::path(dir).filename().string() + " (model)";
    sc.notes.clear();
  } else {
    sc.title = m.sceneTitle;
    sc.notes = m.sceneNotes;
  }
  m.sceneTitle.clear();
  m.sceneNotes.clear();
  notify(s, "Opened the encoder-decoder " + std::filesystem::path(dir).filename().string() +
                " (" + ds.seq2seq->model().weightsDescription() + ")");
}

// On the opening worker: a decoder's or encoder's source with the request checked (against the
// model's sizes, before anything open is closed: a bad request leaves the open model or scene as
// it was) and its first pass run. Command-line options are usage errors, a scene's fields input
// errors naming the file. Reads nothing of the app's state: `box` and `boxPair` are the text
// boxes as they were when the model began to open.
void prepareSource(OpenedModel& out, const ModelState::Request& rq, const std::string& dir,
                   const PendingText& pending, const std::string& box,
                   const std::string& boxPair, const ChatSetting& boxChat) {
  auto source = std::make_unique<ModelSource>(std::shared_ptr<const Model>(std::move(out.model)));
  // Figure titles name the model (and a GGUF's quantization), the layer and the ablations.
  source->setName(modelTitleName(source->model(), dir));
  // The passes keep only what the window shows: the grid's thumbnails and the last logits row
  // (the shown layer's Q, K, V are recomputed from its residual stream when it is shown).
  // Head outputs too (the Attribution panel's direct effect reads the shown head's): [H, T, d_h]
  // a layer, the size of the residual stream.
  Capture view = Capture::view(kGridThumbnail);
  view.headOut = LayerSet::every();
  source->setCapture(view);
  const int L = source->layers();
  const std::string prefix = rq.cli ? "--" : "model.";
  const ModelConfig& c = source->model().config();
  const bool rope = c.positions == PositionKind::Rope;
  checkRequest(rq, [&] {
    checkLayerInRange(rq.layer, c, prefix + "layer");
    checkHeadInRange(rq.head, c, prefix + "head");
    (void)requestAblations(rq, c, prefix + "ablate");  // enc:/cross: ones refused here
    if (!rq.site.empty()) checkSiteInRange(parseSiteName(rq.site, prefix + "site"), c, prefix + "site");
    if (!rq.maskSource.empty()) checkHasCrossSites(c, prefix + (rq.cli ? "mask-source" : "mask_source"));
    for (const SceneLayerIntervention& li : rq.interventions)
      checkLayerInRange(li.layer, c, prefix + "interventions layer");
  });
  for (const SceneLayerIntervention& li : rq.interventions) {
    if (li.ropeOff && !rope) {
      throw InputError(rq.origin + ": model.interventions: layer " + std::to_string(li.layer) +
                       " asks for RoPE off, but the model " + dir + " has no RoPE");
    }
  }
  std::string text = pending.set ? pending.text : box;
  if (text.empty()) text = kDefaultModelText;
  // An encoder's sentence B: the scene's or --text-pair's; a decoder takes one text.
  const bool encoder = !c.causal;
  std::string pairText = rq.hasPair ? rq.textPair : boxPair;
  if (!encoder) {
    if (rq.hasPair && !rq.textPair.empty()) {
      const std::string what = c.family + " is not an encoder: a second text (sentence B) needs one";
      if (rq.cli) throw UsageError("--text-pair: " + what);
      throw InputError(rq.origin + ": model.text_pair: " + what);
    }
    pairText.clear();
  }
  // The ablations and a saved model view's masks, τ and RoPE switches are set first (a source
  // without a text runs nothing), so that the text's one pass and its baseline carry them.
  for (auto [l, h] : rq.ablate) source->setAblated(l, h, true);
  if (!rq.interventions.empty()) {
    Interventions iv = source->interventions();
    for (const SceneLayerIntervention& li : rq.interventions) {
      LayerIntervention& e = iv.layer(li.layer, L);
      e.mask = li.mask;
      e.temperature = li.temperature;
      e.ropeOff = li.ropeOff;
    }
    // A painted mask of another length than the text's is refused, as a re-run refuses it.
    const int T = int(encodeModelText(source->model(), text, pairText,
                                      rq.chat ? *rq.chat : ChatSetting{}).ids.size());
    try {
      for (const SceneLayerIntervention& li : rq.interventions)
        (void)layerAttentionParams(c, iv, li.layer, T);
    } catch (const InputError& e) {
      throw InputError(rq.origin + ": model.interventions: " + e.what());
    }
    source->setInterventions(iv);
  }
  // The chat format: the request's (a scene's, --chat) must apply; the text panel's is kept
  // when this model has a chat template too, else dropped.
  try {
    out.chatFormat = chatFormatOf(loadChatTemplate(source->model().files()));
  } catch (const InputError& e) {
    out.chatWhyNot = e.what();
  }
  ChatSetting chat = rq.chat ? *rq.chat : boxChat;
  if (chat.on && out.chatFormat.empty()) {
    if (rq.chat) {
      throw InputError(rq.cli ? out.chatWhyNot : rq.origin + ": model.chat: " + out.chatWhyNot);
    }
    chat = {};
  }
  if (chat.on) pairText.clear();
  source->setChat(chat);
  source->setText(text, pairText);  // may refuse the text (too long for the model)
  if (const std::string note = source->takeNote(); !note.empty() && !rq.interventions.empty())
    throw InputError(rq.origin + ": model.interventions: " + note);
  out.source = std::move(source);
  out.text = std::move(text);
  out.textPair = std::move(pairText);
}

void adopt(AppState& s, OpenedModel opened) {
  ModelState& m = s.model;
  const ModelState::Request rq = m.request;
  const std::string dir = m.loadingDir;
  m.request = {};
  m.loadingDir.clear();
  const PendingText pending = std::exchange(gPendingText, PendingText{});
  if (opened.seq2seq) {
    adoptSeq2Seq(s, std::move(opened), rq, dir);
    return;
  }
  std::unique_ptr<ModelSource> source = std::move(opened.source);
  const std::string text = opened.text, pairText = opened.textPair;
  // The text box edited while the model opened: that text runs next, on the worker.
  const bool edited = !pending.set && std::string(m.text) != text &&
                      !(m.text[0] == 0 && text == kDefaultModelText);
  const std::string typed = m.text;
  // A new model: the last one's continuation goes (its worker stopped before the model closes);
  // a scene's "generate" sets up the next.
  GenerateState& g = m.gen;
  g.stopAll();
  closeSources(s);
  std::snprintf(m.text, sizeof m.text, "%s", (edited ? typed : text).c_str());
  std::snprintf(m.textPair, sizeof m.textPair, "%s", pairText.c_str());
  m.chatFormat = opened.chatFormat;
  m.chatWhyNot = opened.chatWhyNot;
  m.chat = source->chat().on;
  std::snprintf(m.system, sizeof m.system, "%s", source->chat().system.value_or("").c_str());
  if (!rq.slice.empty()) m.slice = int(pairSliceFromKey(rq.slice).value_or(PairSlice::All));
  if (!rq.special.empty())
    m.special = int(specialTokensFromKey(rq.special).value_or(SpecialTokens::Show));
  m.fill.textFor = ~std::uint64_t{0};
  m.pairs = -1;
  m.facts.reset();
  g.run.reset(), g.plain.reset();
  g.autoStart = false;
  if (rq.generate.any()) {
    g.n = rq.generate.tokens;
    g.sample = !rq.generate.greedy;
    g.temperature = float(rq.generate.temperature);
    g.topK = rq.generate.topK;
    g.seed = rq.generate.seed;
    g.autoStart = true;
  }
  // From now on the panels' interventions re-run on a worker (syncModel).
  source->setDeferReruns(true);
  m.source = std::move(source);
  m.dir = dir;
  m.layer = rq.layer;
  s.view.head = rq.head;
  s.view.headAverage = false;
  m.layerDirty = true;
  m.textEditedAt = edited ? 0 : -1;
  s.scene.path.clear();
  Scene& sc = s.session.editScene();
  if (m.sceneTitle.empty()) {
    sc.title = std::filesystem::path(m.dir).filename().string() + " (model)";
    sc.notes.clear();
  } else {
    sc.title = m.sceneTitle;
    sc.notes = m.sceneNotes;
  }
  m.sceneTitle.clear();
  m.sceneNotes.clear();
  applySceneAttribution(s, rq.attribution);
  refreshNextTokens(s);
  notify(s, "Opened the model " + std::filesystem::path(m.dir).filename().string() + " (" +
                m.source->model().weightsDescription() + ")");
}

}  // namespace

void openModel(AppState& s, const std::string& dir, bool wait) {
  if (app::isVisionModelArg(dir)) {  // an image model: the image view (image_view_panel.cpp)
    openImageModel(s, dir, "");
    return;
  }
  ModelState& m = s.model;
  if (m.loading.valid()) throw InputError(dir + ": another model is still opening");
  m.loadingDir = dir;
  m.loadingDropped = false;
  m.progress = std::make_shared<ModelLoadProgress>();
  wakeOnEachLayer(m.progress->pass);
  auto progress = m.progress;
  // The worker opens the model, checks the request and runs the first pass; the frame adopts the
  // result (syncModel). It gets copies of what it reads: the request, a scene's text and the
  // text boxes as they are now.
  m.loading = std::async(std::launch::async, [dir, progress, maxMemory = m.maxMemory,
                                              rq = m.request, pending = gPendingText,
                                              box = std::string(m.text),
                                              boxPair = std::string(m.textPair),
                                              boxChat = m.chatSetting()] {
    const WakeOnExit wake;
    OpenedModel out;
    out.model = Model::open(
        dir,
        [progress](double f, const std::string& what) {
          if (progress->pass.cancel.load()) throw PassCancelled();
          std::lock_guard<std::mutex> lock(progress->m);
          progress->fraction = f;
          progress->what = what;
        },
        maxMemory);
    {
      std::lock_guard<std::mutex> lock(progress->m);
      progress->what = "running the pass";
    }
    if (!out.model->config().encoderDecoder()) startPreview(*progress, out.model->config(), rq);
    PassProgress::Scope scope(&progress->pass);
    if (out.model->config().encoderDecoder())
      prepareSeq2Seq(out, rq, dir, pending, box);
    else
      prepareSource(out, rq, dir, pending, box, boxPair, boxChat);
    return out;
  });
  if (wait) m.loading.wait();
}

void openModelScene(AppState& s, const Scene& scene, const std::string& path, bool wait) {
  const SceneModel& sm = scene.model;
  if (s.model.loading.valid()) throw InputError(sm.path + ": another model is still opening");
  s.model.request = {sm.layer, sm.head, sm.ablate, sm.generate, path, false,
                     sm.attribution, sm.interventions, sm.textPair, sm.slice, sm.special, true,
                     sm.target, sm.site, sm.siteAblate, sm.maskSource,
                     sm.chat ? std::optional<ChatSetting>(ChatSetting{true, sm.system})
                             : std::nullopt};
  gPendingText = {true, sm.text};
  openModel(s, sm.path, wait);
}

bool cancelPass(AppState& s) {
  ModelState& m = s.model;
  if (m.loading.valid() && m.progress) {
    m.progress->pass.cancel = true;
    return true;
  }
  if (m.textPass.valid() && m.textProgress) {
    m.textProgress->cancel = true;
    m.textCancelledByUser = true;
    return true;
  }
  if (m.rerun.valid() && m.rerunProgress) {
    m.rerunProgress->cancel = true;
    m.rerunCancelledByUser = true;
    return true;
  }
  DumpState& d = s.dump;
  if (d.job.valid() && d.jobProgress) {
    // A pass stops at its next layer; a translation step (one token) ends, and no other starts.
    d.jobProgress->cancel = true;
    d.jobCancelledByUser = true;
    if (d.translate.left > 0) d.translate.left = 0, d.translate.stop = "stopped";
    return true;
  }
  return false;
}

void closeSources(AppState& s) {
  // The Generate panel's continuation belongs to the model going away: its workers are stopped
  // and joined, its tokens dropped (they were kept, with their threads unjoined, until another
  // model's panel drew, and showed there). A --generate request waiting for the model stays.
  GenerateState& g = s.model.gen;
  g.stopAll();
  g.run.reset(), g.plain.reset();
  // The loss-by-token and retrieval scores belong to it too: stopped at their next layer and
  // dropped, so the next model never shows (or ablates) this one's heads.
  s.model.cacheLoss.stop();
  s.model.retrieval.stop();
  s.model.whyHere.stop();
  s.model.heads.stopRun();  // the Head finder's run over a corpus (its tree stays open)
  g.prompt.clear();
  g.step = 0, g.follow = true;
  if (s.model.textPass.valid()) {  // it holds its own model reference: stopped at its next layer
    if (s.model.textProgress) s.model.textProgress->cancel = true;
    s.model.textPass.wait();
  }
  s.model.textPass = {};
  s.model.textProgress.reset();
  if (s.model.rerun.valid()) {  // the same for the interventions' re-run
    if (s.model.rerunProgress) s.model.rerunProgress->cancel = true;
    s.model.rerun.wait();
  }
  s.model.rerun = {};
  s.model.rerunProgress.reset();
  s.model.rerunCancelledByUser = false;
  s.model.textEditedAt = -1;
  s.model.attr.stop();  // its worker holds its own model reference and copies of the passes
  if (s.image.active) {  // the image view's run finishes first (it cannot be stopped midway)
    if (s.image.job.valid()) s.image.job.wait();
    s.image = ImageViewState{};
  }
  s.model.attr.run.reset();
  s.model.attr.wantRun = false;
  s.model.source.reset();
  // A model still opening belongs to what is being closed: it is dropped when it arrives (its
  // first pass stopped at the next layer).
  if (s.model.loading.valid()) {
    s.model.loadingDropped = true;
    if (s.model.progress) s.model.progress->pass.cancel = true;
  }
  if (s.dump.job.valid()) {  // the encoder-decoder's pass: stopped at its next layer
    if (s.dump.jobProgress) s.dump.jobProgress->cancel = true;
    s.dump.job.wait();
  }
  s.dump.job = {};
  s.dump.jobProgress.reset();
  s.dump.jobCancelledByUser = false;
  s.dump.seq2seq.reset();
  s.dump.rerun = false;
  if (s.dump.source) {
    s.dump.source.reset();
    if (s.dump.savedEngine) s.session.setEngine(std::move(s.dump.savedEngine));
    s.session.editScene().params = AttentionParams{};
  }
}

void openDump(AppState& s, const std::string& path) {
  Dump d = loadDump(path);  // throws InputError naming the file
  if (d.layers.empty()) throw InputError(path + ": the dump has no layers");
  closeSources(s);
  DumpState& ds = s.dump;
  ds.savedEngine = s.session.releaseEngine();
  ds.source = std::make_unique<DumpSource>(std::move(d));
  ds.path = path;
  ds.layer = 0;
  ds.layerDirty = true;
  ++ds.version;
  s.scene.path.clear();
  s.view.head = 0;
  s.view.headAverage = false;
  Scene& sc = s.session.editScene();
  sc.params = AttentionParams{};
  sc.mode = Mode::Self;  // the dump's weights carry their own masks
  const std::string model = ds.source->dump().model;
  sc.title = std::filesystem::path(path).filename().string() + (model.empty() ? "" : " (" + model + ")");
  sc.notes.clear();
  notify(s, "Opened the dump " + path);
}

namespace {
bool model_causal(const ModelSource& src) { return src.model().config().causal; }

// A text cut to about 40 bytes at a character boundary, "…" after it when cut (notices).
std::string shortText(const std::string& t) {
  if (t.size() <= 40) return t;
  std::size_t n = 40;
  while (n > 0 && (static_cast<unsigned char>(t[n]) & 0xC0) == 0x80) --n;
  return t.substr(0, n) + "\xe2\x80\xa6";
}
}  // namespace

void refreshNextTokens(AppState& s) {
  ModelState& m = s.model;
  ++m.passVersion;
  m.after = m.source->topK(kTopK);
  m.before = m.source->baselineTopK(kTopK);
  m.afterLabels.clear();
  m.beforeLabels.clear();
  for (const auto& t : m.after) m.afterLabels.push_back(m.source->tokenLabel(t.id));
  for (const auto& t : m.before) m.beforeLabels.push_back(m.source->tokenLabel(t.id));
  refreshFill(s);
}

void refreshFill(AppState& s) {
  ModelState& m = s.model;
  FillState& f = m.fill;
  f.after.clear(), f.before.clear(), f.tokens.clear(), f.error.clear();
  if (!m.source || !m.source->ready() || m.source->model().config().causal) return;
  const Model& model = m.source->model();
  try {
    if (f.text[0] == 0) {
      // The model view's text: its passes, with and without the interventions.
      f.after = fillMasks(model, m.source->pass(), f.topK);
      f.before = fillMasks(model, m.source->baselinePass(), f.topK);
      f.tokens = m.source->tokens();
      f.ranText.clear();
    } else {
      // Its own text, with the model view's interventions (refit to its length).
      const std::string text = f.text;
      const std::vector<int> ids = model.encode(text);
      Interventions iv = m.source->interventions();
      for (LayerIntervention& li : iv.layers) {
        if (li.mask.custom.rows != int(ids.size())) {
          li.mask.customKind = MaskSpec::Custom::None;
          li.mask.custom = Tensor3{};
        }
        if (!li.mask.docs.empty() && li.mask.docs.size() != ids.size()) li.mask.docs.clear();
      }
      const ForwardResult after = model.forward(ids, iv, Capture::none());
      const ForwardResult before = model.forward(ids, {}, Capture::none());
      f.after = fillMasks(model, after, f.topK);
      f.before = fillMasks(model, before, f.topK);
      for (int id : ids) f.tokens.push_back(model.tokenizer().label(id));
      f.ranText = text;
    }
    if (f.after.empty()) {
      const std::optional<int> mask = model.tokenizer().mask();
      f.error = "no " + (mask ? model.tokenizer().pieceBytes(*mask) : std::string("mask")) +
                " token in the text: write one where a token should be predicted";
    }
  } catch (const std::exception& e) {
    f.after.clear(), f.before.clear();
    f.error = e.what();
  }
  f.textFor = m.passVersion;
}

namespace {

// The interventions' re-run: a finished one adopted (or refused, when they changed meanwhile:
// the next is made below), a stale one stopped, and the next started when the pass is stale and
// no text pass runs (a text pass carries the interventions itself).
void syncRerun(AppState& s) {
  ModelState& m = s.model;
  ModelSource& src = *m.source;
  if (m.rerun.valid() && m.rerunProgress && !m.rerunCancelledByUser &&
      (m.textEditedAt >= 0 || m.textPass.valid()))
    m.rerunProgress->cancel = true;  // the text's pass makes it moot
  if (m.rerun.valid() &&
      m.rerun.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    m.rerunProgress.reset();
    const bool byUser = std::exchange(m.rerunCancelledByUser, false);
    try {
      if (src.adoptRerun(m.rerun.get())) {
        m.layerDirty = true;
        refreshNextTokens(s);
      }
    } catch (const PassCancelled&) {
      if (byUser) {
        src.revertInterventions();
        m.layerDirty = true;
        refreshNextTokens(s);
        notify(s, "Cancelled the re-run: the interventions are back to what the view shows");
      }
    }
  }
  if (!m.rerun.valid() && !m.textPass.valid() && m.textEditedAt < 0 && src.stale()) {
    m.rerunProgress = newPassProgress();
    m.rerunCancelledByUser = false;
    m.rerun = std::async(std::launch::async, [model = src.sharedModel(), job = src.rerunJob(),
                                              progress = m.rerunProgress]() mutable {
      const WakeOnExit wake;
      PassProgress::Scope scope(progress.get());
      ModelSource::runRerun(*model, job);
      return std::move(job);
    });
  }
}

// Runs an encoder-decoder's job on a worker (its layers counted for the status bar's bar).
void startSeq2SeqJob(AppState& s, Seq2SeqSource::Job job) {
  DumpState& d = s.dump;
  d.jobProgress = newPassProgress();
  d.jobCancelledByUser = false;
  d.jobStep = job.kind == Seq2SeqSource::Job::Kind::Step;
  d.jobVersion = d.seq2seq->interventionsVersion();
  d.job = std::async(std::launch::async, [model = d.seq2seq->sharedModel(), job = std::move(job),
                                          progress = d.jobProgress]() mutable {
    const WakeOnExit wake;
    PassProgress::Scope scope(progress.get());
    Seq2SeqSource::runJob(*model, job);
    return std::move(job);
  });
}

// An encoder-decoder at the frame boundary: its finished job adopted (or refused, when the
// interventions changed meanwhile: another starts), a moot one stopped, and the next started:
// the pass when the boxes were edited or the interventions changed, else the next token of a
// watched translation (one decode step over the caches). The frame never runs a pass itself.
void syncSeq2Seq(AppState& s) {
  DumpState& d = s.dump;
  Seq2SeqSource& q = *d.seq2seq;
  DumpState::Translate& t = d.translate;
  if (s.model.gen.scripted > 0) {  // --generate N on an encoder-decoder: translate N tokens
    t.tokens = t.requested = s.model.gen.scripted;
    s.model.gen.scripted = 0;
  }
  // Edited boxes or other interventions make a running pass moot: it stops at its next layer.
  if (d.job.valid() && !d.jobStep && d.jobProgress && !d.jobCancelledByUser &&
      (d.rerun || q.interventionsVersion() != d.jobVersion))
    d.jobProgress->cancel = true;
  if (d.job.valid() && d.job.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    d.jobProgress.reset();
    const bool byUser = std::exchange(d.jobCancelledByUser, false);
    const bool step = d.jobStep;
    try {
      Seq2SeqSource::Job j = d.job.get();
      const int id = j.id;
      const bool eos = j.eos;
      const double seconds = j.stepSeconds;
      if (q.adopt(std::move(j))) {
        if (step) {
          t.ids.push_back(id);
          t.stepSeconds += seconds;
          if (eos) t.left = 0, t.stop = "eos";
          else if (t.left > 0) t.stop = --t.left == 0 ? "length" : "";
          std::snprintf(d.targetText, sizeof d.targetText, "%s", q.targetText().c_str());
        }
        if (!eos) showSeq2Seq(s);
      }
    } catch (const PassCancelled&) {
      if (byUser) {
        // The view keeps its pass: the boxes and the interventions go back to what it shows.
        q.revertInterventions();
        d.rerun = false;
        std::snprintf(d.sourceText, sizeof d.sourceText, "%s", q.sourceText().c_str());
        std::snprintf(d.targetText, sizeof d.targetText, "%s", q.targetText().c_str());
        std::string list;
        for (int p : q.maskedSource()) list += (list.empty() ? "" : ",") + std::to_string(p);
        std::snprintf(d.maskSource, sizeof d.maskSource, "%s", list.c_str());
        notify(s, "Cancelled the pass: the view still shows the source \"" +
                      shortText(q.sourceText()) + "\"");
      }
    } catch (const InputError& e) {
      if (step && t.left > 0) t.left = 0, t.stop = "context";
      notify(s, e.what());  // the last good pass stays
    }
  }
  if (d.job.valid()) return;
  if (d.rerun || q.stale()) {
    // The boxes' texts when edited; else (the interventions alone) the texts the view shows.
    const bool edited = std::exchange(d.rerun, false);
    // Edited texts or an ablation: a finished translation's start no longer describes the view.
    // A translation asked for and not begun yet stays asked for.
    if (edited && t.left == 0) {
      DumpState::Translate fresh;
      fresh.tokens = t.tokens;
      fresh.requested = t.requested;
      t = std::move(fresh);
    }
    startSeq2SeqJob(s, q.passJob(edited ? std::string(d.sourceText) : q.sourceText(),
                                 edited ? std::string(d.targetText) : q.targetText()));
    return;
  }
  if (t.requested > 0) {
    t.left = t.requested, t.requested = 0;
    t.from = q.targetText();
    t.ids.clear();
    t.stop.clear();
    t.stepSeconds = 0;
  }
  if (t.left > 0) {
    try {
      startSeq2SeqJob(s, q.stepJob());
    } catch (const InputError& e) {
      t.left = 0, t.stop = "context";
      notify(s, e.what());
    }
  }
}

}  // namespace

void syncModel(AppState& s) {
  if (s.dump.seq2seq) syncSeq2Seq(s);
  if (s.dump.source && s.dump.layerDirty) {
    s.dump.layerDirty = false;
    s.dump.source->showLayer(s.session, s.dump.layer);
  }
  ModelState& m = s.model;
  if (m.loading.valid() &&
      m.loading.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    OpenedModel opened;
    const std::string name = std::filesystem::path(m.loadingDir).filename().string();
    try {
      opened = m.loading.get();
    } catch (const PassCancelled&) {
      m.loadingDir.clear();
      m.progress.reset();
      m.request = {};
      m.sceneTitle.clear();
      m.sceneNotes.clear();
      gPendingText = {};
      // Cancelled by the user (the status bar), or by closeSources for a dropped model.
      if (!std::exchange(m.loadingDropped, false))
        notify(s, "Cancelled opening the model " + name + (m.source ? ": the open one stays" : ""));
    } catch (...) {
      m.loadingDir.clear();
      m.progress.reset();
      m.request = {};
      m.sceneTitle.clear();
      m.sceneNotes.clear();
      gPendingText = {};
      // A dropped model's error is not the user's concern any more.
      if (!std::exchange(m.loadingDropped, false)) throw;
    }
    // The layer and head the preview showed last (clicked in its grid while the pass ran).
    int wantLayer = -1, wantHead = -1;
    if (m.progress) {
      std::lock_guard<std::mutex> lock(m.progress->preview.m);
      if (m.progress->preview.layers > 0)
        wantLayer = m.progress->preview.wantLayer, wantHead = m.progress->preview.wantHead;
    }
    m.progress.reset();
    if (!opened.model && !opened.source && !opened.seq2seq) {
      // dropped, and it failed to open: nothing to say
    } else if (m.loadingDropped) {
      m.loadingDropped = false;
      notify(s, "Dropped the model " + std::filesystem::path(m.loadingDir).filename().string() +
                    ": something else was opened while it loaded");
      m.loadingDir.clear();
      m.request = {};
      m.sceneTitle.clear();
      m.sceneNotes.clear();
      gPendingText = {};
    } else {
      adopt(s, std::move(opened));
      if (m.source && wantLayer >= 0 && wantLayer < m.source->layers() &&
          wantHead < m.source->heads()) {
        m.layer = wantLayer;
        s.view.head = wantHead;
      }
    }
  }
  if (!m.source) {
    s.session.setBlock({});
    return;
  }
  // An edited text runs on a worker thread: typing into a large model never stalls the window.
  // A newer edit makes a running pass stale: it stops at its next layer, and the newer text runs.
  if (m.textPass.valid() && m.textEditedAt >= 0 && m.textProgress) m.textProgress->cancel = true;
  if (m.textPass.valid() &&
      m.textPass.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    ModelSource::TextPass pass;
    bool cancelled = false;
    m.textProgress.reset();
    try {
      pass = m.textPass.get();  // throws for an empty text; the last pass stays
    } catch (const PassCancelled&) {
      cancelled = true;
      if (m.textCancelledByUser)
        notify(s, "Cancelled the pass: the view still shows the text \"" +
                      shortText(m.source->text()) + "\"");
    }
    m.textCancelledByUser = false;
    if (cancelled) {
      // nothing to adopt: the last pass stays (a newer edit runs once its pause is over)
    } else if (m.source->adoptText(std::move(pass))) {
      m.layerDirty = true;
      refreshNextTokens(s);
      // A painted mask or document ids of the old length were dropped: say so.
      if (const std::string note = m.source->takeNote(); !note.empty()) notify(s, note);
    } else if (m.textEditedAt < 0) {
      m.textEditedAt = 0;  // the interventions changed while it ran: run the text again
    }
  }
  if (!m.textPass.valid() && m.textEditedAt >= 0 &&
      nowSeconds() - m.textEditedAt >= kTextDebounceSeconds) {
    m.textEditedAt = -1;
    m.textProgress = newPassProgress();
    m.textCancelledByUser = false;
    m.textPass = std::async(std::launch::async,
                            [model = m.source->sharedModel(), text = std::string(m.text),
                             pair = model_causal(*m.source) || m.chat ? std::string()
                                                                      : std::string(m.textPair),
                             chat = m.chatSetting(),
                             iv = m.source->interventions(),
                             version = m.source->interventionsVersion(),
                             capture = m.source->capture(), progress = m.textProgress] {
                              const WakeOnExit wake;
                              PassProgress::Scope scope(progress.get());
                              return ModelSource::runText(*model, text, iv, version, capture,
                                                          pair, chat);
                            });
  }
  if (!m.actions.empty()) {
    auto actions = std::move(m.actions);
    m.actions.clear();
    for (auto& a : actions) a(s);  // the source records them; the re-run starts below
    m.layerDirty = true;
    refreshNextTokens(s);
  }
  syncRerun(s);
  // The model's own stages are computed while shown (value norms: a product a head; rollout: one
  // T³ product a layer below the shown one), not on every layer switch and re-run.
  const ViewStage want = stageFromSource(s.view.stage) ? s.view.stage : ViewStage::Weights;
  if (want != m.source->shownStage()) {
    m.source->setShownStage(want);
    if (!m.layerDirty && m.source->ready() && m.source->shownLayer() == m.layer)
      m.source->showStages(s.session);
  }
  if (m.layerDirty) {
    m.layerDirty = false;
    m.source->showLayer(s.session, m.layer);
  }
  // An encoder's block (a pair's slice, the special tokens hidden): a view of the layer shown.
  s.session.setBlock(blockFor(m.source->segments(), PairSlice(m.slice),
                              SpecialTokens(m.special)));
  // The fill panel's own text was edited (or its top-k changed): its lists again.
  if (m.fill.editedAt >= 0 && nowSeconds() - m.fill.editedAt >= kTextDebounceSeconds) {
    m.fill.editedAt = -1;
    m.fill.textFor = ~std::uint64_t{0};
  }
  if (m.fill.textFor != m.passVersion && !m.textBusy()) refreshFill(s);
  // The Attribution panel: a scene's run once its text has run; a finished worker joined.
  AttributionState& a = m.attr;
  if (a.wantRun && !m.textBusy() && m.actions.empty() && m.source->ready()) startAttribution(s);
  if (a.run && a.worker.joinable()) {
    bool done;
    {
      std::lock_guard<std::mutex> lock(a.run->m);
      done = a.run->done;
    }
    if (done) a.worker.join();
  }
}

}  // namespace attnviz::gui
