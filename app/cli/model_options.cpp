// The model options shared by `attnviz model`, `export --model` and the GUI: parsing, loading and
// running the pass with the requested interventions.
#include "cli/cli.h"
#include "cli/model_options.h"

#include "attnviz/engine/ggml_kernels.h"  // setFastActivations
#include "attnviz/engine/text_parse.h"
#include "attnviz/engine/mask.h"
#include "attnviz/model/tokenizers/chat_template.h"
#include "attnviz/formats/npy.h"
#include "attnviz/session/request.h"
#include "attnviz/session/seq2seq_source.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

namespace attnviz::app {

void addModelOptions(CLI::App& app, ModelCliOptions& o, bool required) {
  addModelPathOption(app, o, required);
  CLI::Option* text = addTextOption(app, o);
  auto* ids = app.add_option("--ids", o.ids, "token ids to run, e.g. 464,3290,318");
  text->excludes(ids);
  addAblateOption(app, o);
  addMaxMemoryOption(app, o);
  addChatOptions(app, o);
  addFastActivationsOption(app);
}

void addFastActivationsOption(CLI::App& app) {
  app.add_flag_callback(
      "--fast-activations", [] { setFastActivations(true); },
      "the products on Q4_K/Q5_K/Q6_K weights (and Q8_0's in decode) take x rounded to 8 bits "
      "per block and sum in integers, as llama.cpp does: faster, no longer exact to float32 "
      "rounding");
}

void addModelPathOption(CLI::App& app, ModelCliOptions& o, bool required) {
  auto* model = app.add_option("--model", o.dir,
                               "MODEL: a folder (config.json, model.safetensors, the "
                               "tokenizer), a .gguf file, ORG/NAME from the Hugging Face cache "
                               "or ollama:NAME[:TAG] from Ollama's store");
  if (required) model->required();
}

CLI::Option* addTextOption(CLI::App& app, ModelCliOptions& o) {
  return app.add_option("--text", o.text, "text to tokenize and run");
}

void addAblateOption(CLI::App& app, ModelCliOptions& o) {
  app.add_option("--ablate", o.ablate,
                 "L:H zeroes head H's output in layer L (repeatable); an encoder-decoder's "
                 "L:H is the decoder's self site, enc:L:H the encoder's, cross:L:H the cross site")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void addMaxMemoryOption(CLI::App& app, ModelCliOptions& o) {
  app.add_option("--max-memory", o.maxMemory,
                 "SIZE (bytes, or 512M, 4G): budget for float32 copies of F16/BF16/quantized "
                 "weights; past it they stay as stored and each layer is converted as it runs "
                 "(default: 1G, or a quarter of physical RAM if less)");
}

void addChatOptions(CLI::App& app, ModelCliOptions& o) {
  app.add_flag("--chat", o.chat,
               "wrap --text as one user turn in the model's chat format (its chat_template), "
               "ending with the assistant's opening");
  app.add_option("--system", o.system, "with --chat: a system turn before the user's");
}

void checkChatOptions(const ModelCliOptions& o, const CLI::App& app) {
  if (app.get_option_no_throw("--system") && app.count("--system") && !o.chat)
    throw UsageError("--system goes with --chat");
  if (!o.chat) return;
  if (!app.count("--text")) throw UsageError("--chat wraps --text (not --ids)");
  if (!o.textPair.empty()) throw UsageError("--chat takes one text (not --text-pair)");
}

void addTextPairOption(CLI::App& app, ModelCliOptions& o) {
  app.add_option("--text-pair", o.textPair,
                 "second text of an encoder's input: the tokenizer's pair template with --text "
                 "(BERT: [CLS] A [SEP] B [SEP], token types 0 then 1)");
}

void addTargetOptions(CLI::App& app, ModelCliOptions& o, bool ids) {
  auto* t = app.add_option("--target", o.target,
                           "encoder-decoders: the target text; the decoder reads its start id "
                           "and the text's tokens without the final EOS");
  if (!ids) return;
  auto* i = app.add_option("--target-ids", o.targetIds,
                           "encoder-decoders: the decoder's ids as given, e.g. 2,0,31");
  t->excludes(i);
}

std::int64_t parseMaxMemory(const std::string& text) {
  if (text.empty()) return -1;
  try {
    return parseMemorySize(text);
  } catch (const InputError& e) {
    throw UsageError(std::string("--max-memory: ") + e.what());
  }
}

void addRopeOffOption(CLI::App& app, ModelCliOptions& o) {
  app.add_option("--rope-off", o.ropeOff,
                 "L runs layer L with q and k not rotated (RoPE models; repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void addResidualEditOption(CLI::App& app, ModelCliOptions& o) {
  app.add_option("--residual-edit", o.residualEdits,
                 "L:P:D:zero|mean sets dimension D of the residual stream layer L writes, at "
                 "position P (or 'all'), to zero or to its prefix mean (position t: the mean over "
                 "positions 0..t) (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void ModelRun::addSiteAblations(Interventions& iv) const {
  for (const auto& [site, h] : siteAblations) {
    std::vector<int>& heads = iv.at(site, model->config()).ablatedHeads;
    if (std::find(heads.begin(), heads.end(), h) == heads.end()) heads.push_back(h);
  }
  hideSourcePositions(iv, model->config(), maskedSource);
}

void addMaskSourceOption(CLI::App& app, ModelCliOptions& o) {
  app.add_option("--mask-source", o.maskSource,
                 "encoder-decoders: source positions (0-based, e.g. 2,5) that no cross site may "
                 "read: their columns are masked in every decoder layer's cross-attention");
}

AttentionParams layerParams(const Model& m, const ForwardResult& r, int layer) {
  return layerAttentionParams(m.config(), r.interventions, layer, int(r.ids.size()));
}

std::vector<std::string> tokenLabels(const Model& m, const std::vector<int>& ids) {
  std::vector<std::string> labels;
  for (int id : ids)
    labels.push_back(m.tokenizer().contains(id) ? m.tokenizer().label(id)
                                                 : "#" + std::to_string(id));
  return labels;
}

int parseLayerIndex(const std::string& text) {
  const std::optional<int> v = parseIndex(text, 1'000'000);
  if (!v) throw UsageError("--layer: expected a layer index (0, 1, ...), got '" + text + "'");
  return *v;
}

void checkLayer(int layer, const ModelConfig& c) { checkLayerInRange(layer, c); }

void requireMlmHead(const Model& m, const std::string& what) {
  if (m.headMissing().empty()) return;
  if (!m.files().gguf.empty()) {
    throw InputError(m.files().gguf + ": the GGUF has no masked-LM head (llama.cpp's " +
                     m.config().family + " files hold the encoder alone), so " + what);
  }
  throw InputError(m.files().weights + ": no masked-LM head (missing tensor '" + m.headMissing() +
                   "'), so " + what);
}

Interventions cliInterventions(const Model& m, const std::vector<int>& ids,
                              const std::vector<std::pair<int, int>>& ablations,
                              const AttentionCliOptions& attention,
                              const std::vector<int>& ropeOff) {
  const ModelConfig& c = m.config();
  Interventions iv;
  for (const auto& [l, h] : ablations) iv.ablate(l, h, c);
  for (int l : ropeOff) iv.layer(l, c.nLayer).ropeOff = true;
  const int T = static_cast<int>(ids.size());
  const AttentionParams p = buildParams(attention, c.nHead, T, T);
  if (p.mask.any() || p.temperature != 1.0f) iv.setAll(p.mask, p.temperature, c.nLayer);
  return iv;
}

ModelRun runModelFromOptions(const ModelCliOptions& o, const AttentionCliOptions& attention,
                             const CLI::App& app) {
  if (app.count("--text") + app.count("--ids") != 1) {
    throw UsageError("give the input as --text TEXT or --ids 1,2,3");
  }
  std::vector<int> ids;
  if (app.count("--ids")) ids = parseIdList(o.ids);
  std::vector<SiteHead> ablate;
  for (const std::string& a : o.ablate) ablate.push_back(parseSiteAblation(a));
  std::vector<int> ropeOff;
  for (const std::string& a : o.ropeOff) ropeOff.push_back(parseLayerArg(a, "--rope-off"));
  std::vector<ResidualEditRequest> residualEdits;
  for (const std::string& a : o.residualEdits) residualEdits.push_back(parseResidualEdit(a));
  std::vector<int> maskSource;
  if (!o.maskSource.empty()) maskSource = parsePositionList(o.maskSource);

  checkChatOptions(o, app);
  const std::int64_t maxMemory = parseMaxMemory(o.maxMemory);
  ModelRun run;
  run.model = Model::open(o.dir, {}, maxMemory);
  const ModelConfig& c = run.model->config();
  if (!o.textPair.empty()) {
    if (!app.count("--text")) throw UsageError("--text-pair goes with --text (not --ids)");
    if (c.causal) {
      throw UsageError("--text-pair: " + c.family +
                       " is not an encoder (bert, roberta, distilbert take a pair)");
    }
    PairEncoding p = run.model->tokenizer().encodePair(o.text, o.textPair, true);
    run.model->checkIds(p.ids);
    ids = std::move(p.ids);
    // Models with one token type (RoBERTa) run on zeros, as Hugging Face's do.
    if (c.typeVocabSize > 1) run.typeIds = std::move(p.typeIds);
  } else if (app.count("--text") && o.chat) {
    ChatTurns turns;
    if (app.count("--system")) turns.system = o.system;
    turns.user = o.text;
    ids = encodeModelChat(*run.model, turns);
  } else if (app.count("--text")) {
    if (o.pastContext) {
      ids = run.model->tokenizer().encode(o.text, true);
      if (ids.empty()) throw InputError("the text is empty: nothing to run");
    } else {
      ids = run.model->encode(o.text);
    }
  }
  const bool target = !o.target.empty() || !o.targetIds.empty();
  if (c.encoderDecoder() && !target && o.startWithoutTarget) {
    run.targetIds = {c.decoderStartId.value_or(0)};
  } else if (c.encoderDecoder()) {
    if (!target) {
      throw UsageError(c.family + " is an encoder-decoder: give the decoder's input as --target "
                       "TEXT or --target-ids 1,2,3 (--text/--ids is the source)");
    }
    if (!o.targetIds.empty()) {
      run.targetIds = parseIdList(o.targetIds, "--target-ids");
    } else {
      // The decoder's start id, then the target's tokens without the final EOS (as the shifted
      // labels a seq2seq model trains on).
      std::vector<int> t = run.model->tokenizer().encodeTarget(o.target, true);
      if (!t.empty() && c.isEos(t.back())) t.pop_back();
      run.targetIds.push_back(c.decoderStartId.value_or(0));
      run.targetIds.insert(run.targetIds.end(), t.begin(), t.end());
    }
    run.model->checkIds(run.targetIds);
  } else if (target) {
    throw UsageError("--target: " + c.family + " is not an encoder-decoder (bart reads one)");
  }
  std::vector<std::pair<int, int>> ablations;
  for (const SiteHead& a : ablate) {
    checkSiteAblation(a, c);
    if (a.site.stack == 0 && a.site.site == 0) ablations.emplace_back(a.site.layer, a.head);
    else run.siteAblations.push_back({a.site, a.head});
  }
  for (int l : ropeOff) checkRopeOffLayer(l, c);
  run.ropeOff = ropeOff;
  for (const ResidualEditRequest& e : residualEdits) {
    checkResidualEdit(e, c);
    run.residualEdits.emplace_back(e.layer, e.edit);
  }
  if (!o.maskSource.empty()) {
    checkHasCrossSites(c);
    try {
      checkMaskedSource(maskSource, int(ids.size()));
    } catch (const InputError& e) {  // the option's value: a usage error
      throw UsageError(std::string("--") + e.what());
    }
    run.maskedSource = std::move(maskSource);
  }
  run.ablations = ablations;
  run.ids = ids;
  if (!o.prepareOnly) runPass(run, ids, ablations, attention, o.capture);
  return run;
}

ModelRun runModelScene(const Scene& scene, const std::string& scenePath,
                       const AttentionCliOptions& attention, const Capture& capture,
                       std::int64_t maxMemory) {
  const SceneModel& sm = scene.model;
  ModelRun run;
  run.model = Model::open(sm.path, {}, maxMemory);
  const ModelConfig& c = run.model->config();
  // An encoder-decoder's scene is run by the caller as a Seq2SeqSource (its two texts, its
  // sites): only the model is returned.
  if (c.encoderDecoder()) return run;
  if (!sm.target.empty())
    throw InputError(scenePath + ": model.target is for encoder-decoders; " + sm.path + " is a " +
                     c.family + " decoder or encoder");
  // The scene's indices, checked now that the model's sizes are known, as the app checks them
  // (in its order, with its words: an enc: or cross: ablation, a site or a masked source on a
  // model with one site per layer included).
  inScene(scenePath, [&] {
    checkLayerInRange(sm.layer, c, "model.layer");
    checkHeadInRange(sm.head, c, "model.head");
    for (const auto& [l, h] : sm.ablate) checkSiteAblation({SiteId{0, l, 0}, h}, c, "model.ablate");
    for (const std::string& a : sm.siteAblate)
      checkSiteAblation(parseSiteAblation(a, "model.ablate"), c, "model.ablate");
    if (!sm.site.empty()) checkSiteInRange(parseSiteName(sm.site, "model.site"), c, "model.site");
    if (!sm.maskSource.empty()) checkHasCrossSites(c, "model.mask_source");
    for (const SceneLayerIntervention& li : sm.interventions)
      checkLayerInRange(li.layer, c, "model.interventions layer");
  });
  for (const SceneLayerIntervention& li : sm.interventions) {
    if (li.ropeOff && c.positions != PositionKind::Rope)
      throw InputError(scenePath + ": model.interventions: layer " + std::to_string(li.layer) +
                       " asks for RoPE off, but the model " + sm.path + " has no RoPE");
  }
  // An empty text runs on the app's default sentence, as the app does.
  try {
    // A pair (an encoder's sentence B) through the tokenizer's pair template, as the app runs it.
    EncodedText e = encodeModelText(*run.model, sm.text.empty() ? kDefaultModelText : sm.text,
                                    sm.textPair, ChatSetting{sm.chat, sm.system});
    run.typeIds = std::move(e.typeIds);
    runPass(run, e.ids, sm.ablate, attention, capture, sm.interventions);
  } catch (const UsageError& e) {  // the scene's request does not fit its text: the file's fault
    throw InputError(scenePath + ": " + e.what());
  } catch (const InputError& e) {  // (a painted mask of another length, say)
    const std::string what = e.what();
    if (what.rfind(scenePath, 0) == 0) throw;
    throw InputError(scenePath + ": " + what);
  }
  return run;
}

void runPass(ModelRun& run, const std::vector<int>& ids,
             const std::vector<std::pair<int, int>>& ablations,
             const AttentionCliOptions& attention, const Capture& capture,
             const std::vector<SceneLayerIntervention>& sceneLayers) {
  run.model->checkIds(ids);
  run.interventions = cliInterventions(*run.model, ids, ablations, attention, run.ropeOff);
  run.addSiteAblations(run.interventions);
  for (const auto& [l, e] : run.residualEdits) {
    if (e.position >= int(ids.size()))
      throw UsageError("--residual-edit: position " + std::to_string(e.position) +
                       " is past the text's " + std::to_string(ids.size()) + " tokens");
    run.interventions.layer(l, run.model->config().nLayer).residualEdits.push_back(e);
  }
  for (const SceneLayerIntervention& li : sceneLayers) {
    LayerIntervention& e = run.interventions.layer(li.layer, run.model->config().nLayer);
    e.mask = li.mask;
    e.temperature = li.temperature;
    e.ropeOff = li.ropeOff;
  }
  if (attention.backend != "cpu") {
    std::fprintf(stderr, "attnviz: note: the model's forward pass runs on the CPU\n");
  }
  if (run.model->config().encoderDecoder()) {
    run.result = run.model->forwardSeq2Seq(ids, run.targetIds, run.interventions, capture);
    return;
  }
  run.result = run.model->forward(ids, run.interventions, capture,
                                  run.typeIds.size() == ids.size() ? run.typeIds
                                                                   : std::vector<int>{});
}

#if defined(__SANITIZE_ADDRESS__)
#define ATTNVIZ_LEAK_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define ATTNVIZ_LEAK_CHECKED 1
#endif
#endif

void endWithoutTeardown(ModelRun& run) {
#if !defined(ATTNVIZ_LEAK_CHECKED)
  std::fflush(nullptr);
  (void)new ModelRun(std::move(run));  // deliberately never freed: the exit takes it back
#else
  (void)run;
#endif
}

}  // namespace attnviz::app
