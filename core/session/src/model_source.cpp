// attnviz session: a GPT-2 model as the session's source (model_source.h).
#include "attnviz/session/model_source.h"

#include "attnviz/model/attribution.h"
#include "attnviz/model/tokenizers/chat_template.h"

#include "attnviz/formats/fileio.h"

#include <algorithm>
#include <cmath>

namespace attnviz {

namespace {

bool sameMask(const MaskSpec& a, const MaskSpec& b) {
  return a.causal == b.causal && a.window == b.window && a.prefix == b.prefix &&
         a.sink == b.sink && a.pad == b.pad && a.alibi == b.alibi &&
         a.customKind == b.customKind && a.custom.sameShape(b.custom) &&
         a.custom.data == b.custom.data && a.chunk == b.chunk && a.docs == b.docs &&
         a.expr == b.expr && a.softcap == b.softcap;
}

bool sameLayer(const LayerIntervention* a, const LayerIntervention* b) {
  static const LayerIntervention none;
  if (!a) a = &none;
  if (!b) b = &none;
  std::vector<int> ha = a->ablatedHeads, hb = b->ablatedHeads;
  std::sort(ha.begin(), ha.end());
  std::sort(hb.begin(), hb.end());
  std::vector<int> ma = a->meanAblatedHeads, mb = b->meanAblatedHeads;
  std::sort(ma.begin(), ma.end());
  std::sort(mb.begin(), mb.end());
  if (ma != mb || a->patchedHeads.size() != b->patchedHeads.size()) return false;
  for (std::size_t i = 0; i < a->patchedHeads.size(); ++i) {
    const MatrixRM &x = a->patchedHeads[i].second, &y = b->patchedHeads[i].second;
    if (a->patchedHeads[i].first != b->patchedHeads[i].first || x.rows() != y.rows() ||
        x.cols() != y.cols() || x != y)
      return false;
  }
  return ha == hb && a->temperature == b->temperature && a->ropeOff == b->ropeOff &&
         a->residualEdits == b->residualEdits && sameMask(a->mask, b->mask);
}

// Drops what fits another length than T: a custom matrix that is not [.., T, T] and document ids
// that are not T long. Returns what it dropped, "" when nothing.
std::string refitToLength(Interventions& iv, int T) {
  std::string note;
  for (std::size_t l = 0; l < iv.layers.size(); ++l) {
    MaskSpec& m = iv.layers[l].mask;
    if (m.customKind != MaskSpec::Custom::None && (m.custom.rows != T || m.custom.cols != T)) {
      note += (note.empty() ? "" : "; ") + std::string("layer ") + std::to_string(l) +
              ": the custom mask (" + std::to_string(m.custom.rows) + "\xc3\x97" +
              std::to_string(m.custom.cols) + ")";
      m.customKind = MaskSpec::Custom::None;
      m.custom = Tensor3{};
    }
    if (!m.docs.empty() && int(m.docs.size()) != T) {
      note += (note.empty() ? "" : "; ") + std::string("layer ") + std::to_string(l) +
              ": the document ids (" + std::to_string(m.docs.size()) + " positions)";
      m.docs.clear();
      m.exprCache.reset();
    }
  }
  if (!note.empty())
    note = "interventions refit to the new text (" + std::to_string(T) + " tokens), dropped " + note;
  return note;
}

}  // namespace

EncodedText encodeModelText(const Model& model, const std::string& text,
                            const std::string& textPair, const ChatSetting& chat) {
  EncodedText e;
  const ModelConfig& c = model.config();
  if (chat.on) {
    if (!textPair.empty())
      throw InputError("the chat format takes one text: clear the second text (sentence B)");
    ChatTurns turns;
    if (chat.system && !chat.system->empty()) turns.system = *chat.system;
    turns.user = text;
    e.ids = encodeModelChat(model, turns);
    e.segments = tokenSegments(model.tokenizer(), e.ids, {}, false);
    return e;
  }
  if (textPair.empty()) {
    e.ids = model.encode(text);
    e.segments = tokenSegments(model.tokenizer(), e.ids, {}, false);
    return e;
  }
  if (c.causal || c.encoderDecoder())
    throw InputError("a second text (sentence B) needs an encoder; " + c.family +
                     " takes one text");
  if (text.empty()) throw InputError("the text (sentence A) is empty");
  PairEncoding pe = model.tokenizer().encodePair(text, textPair, true);
  model.checkIds(pe.ids);
  e.ids = std::move(pe.ids);
  e.segments = tokenSegments(model.tokenizer(), e.ids, pe.typeIds, true);
  if (c.typeVocabSize > 1) e.typeIds = std::move(pe.typeIds);
  return e;
}

std::vector<MaskFill> fillMasks(const Model& model, const ForwardResult& r, int k) {
  const ModelConfig& c = model.config();
  if (c.causal) throw InputError(c.family + " is not an encoder: it has no mask to fill");
  if (!model.headMissing().empty())
    throw InputError(model.files().weights + ": no masked-LM head (missing tensor '" +
                     model.headMissing() + "')");
  const std::optional<int> mask = model.tokenizer().mask();
  if (!mask) throw InputError(model.files().dir + ": the tokenizer has no mask token");
  std::vector<MaskFill> out;
  std::vector<int> positions;
  for (std::size_t t = 0; t < r.ids.size(); ++t)
    if (r.ids[t] == *mask) positions.push_back(int(t));
  if (positions.empty() || r.residualOut.rows() != MatrixRM::Index(r.ids.size())) return out;
  MatrixRM rows(MatrixRM::Index(positions.size()), r.residualOut.cols());
  for (std::size_t p = 0; p < positions.size(); ++p)
    rows.row(MatrixRM::Index(p)) = r.residualOut.row(positions[p]);
  const MatrixRM logits = model.unembedResidual(rows);
  const int V = int(logits.cols()), n = std::min(std::max(k, 1), V);
  for (std::size_t p = 0; p < positions.size(); ++p) {
    const float* row = logits.row(MatrixRM::Index(p)).data();
    const double mx = *std::max_element(row, row + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    std::vector<int> order(static_cast<std::size_t>(V));
    for (int v = 0; v < V; ++v) order[std::size_t(v)] = v;
    std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int a, int b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    MaskFill f;
    f.position = positions[p];
    for (int i = 0; i < n; ++i) {
      const int id = order[std::size_t(i)];
      f.top.emplace_back(id, std::exp(double(row[id]) - mx) / sum);
    }
    out.push_back(std::move(f));
  }
  return out;
}

EncoderFacts encoderFacts(const Model& model) {
  EncoderFacts f;
  const ModelConfig& c = model.config();
  for (int l = 0; l < c.nLayer; ++l) {
    const int w = c.windowOf(l);
    (w > 0 ? f.localLayers : f.globalLayers).push_back(l);
    if (w > 0) f.window = w;
  }
  f.vocabulary = vocabularyKind(model.tokenizer().kind());
  f.pooling = sentenceTransformersPooling(model.files().dir);
  return f;
}

ModelSource::ModelSource(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  if (!model_) throw UsageError("ModelSource: no model");
}

void ModelSource::setText(const std::string& text, const std::string& textPair) {
  adoptText(runText(*model_, text, iv_, ivVersion_, capture_, textPair, nextChat_));
}

ModelSource::TextPass ModelSource::runText(const Model& model, const std::string& text,
                                           const Interventions& iv,
                                           std::uint64_t interventionsVersion,
                                           const Capture& capture,
                                           const std::string& textPair,
                                           const ChatSetting& chat) {
  TextPass p;
  EncodedText e = encodeModelText(model, text, textPair, chat);
  const std::vector<int> ids = std::move(e.ids);
  p.typeIds = std::move(e.typeIds);
  p.segments = std::move(e.segments);
  p.interventions = iv;
  p.note = refitToLength(p.interventions, int(ids.size()));
  p.refit = !p.note.empty();
  // The pass shares the baseline's layers below the first one an intervention changes.
  const int L = model.config().nLayer;
  int from = L;
  for (int l = 0; l < L; ++l)
    if (!sameLayer(nullptr, p.interventions.find(l))) {
      from = l;
      break;
    }
  if (PassProgress* progress = PassProgress::current()) progress->layersPlanned += L + (L - from);
  p.baseline = model.forward(ids, {}, capture, p.typeIds);
  p.pass = p.baseline;
  if (from < L) model.rerunFrom(p.pass, from, p.interventions);
  p.tokens.reserve(ids.size());
  for (int id : ids) p.tokens.push_back(model.tokenizer().label(id));
  p.text = text;
  p.textPair = textPair;
  p.chat = chat;
  p.interventionsVersion = interventionsVersion;
  return p;
}

bool ModelSource::adoptText(TextPass&& p) {
  if (p.interventionsVersion != ivVersion_) return false;
  if (p.refit) {
    iv_ = std::move(p.interventions);
    ++ivVersion_;
    note_ = std::move(p.note);
  }
  baseline_ = std::move(p.baseline);
  pass_ = std::move(p.pass);
  ++passVersion_;
  qkvLayer_ = -1;
  tokens_ = std::move(p.tokens);
  text_ = std::move(p.text);
  textPair_ = std::move(p.textPair);
  chat_ = nextChat_ = p.chat;
  typeIds_ = std::move(p.typeIds);
  segments_ = std::move(p.segments);
  return true;
}

void ModelSource::showLayer(Session& session, int layer) {
  if (layer < 0 || layer >= layers())
    throw UsageError("layer " + std::to_string(layer) + " is out of range (the model has " +
                     std::to_string(layers()) + " layers)");
  if (!ready()) throw UsageError("the model has no text to run on yet");
  const Qkv& a = layerQkv(layer);
  // The session shows what the pass computed: the model's own mask AND the layer's intervention.
  const AttentionParams p = layerAttentionParams(model_->config(), iv_, layer, a.q.rows);
  session.editScene().params.mask = p.mask;
  session.editScene().params.temperature = p.temperature;
  session.touchMask();
  // The session's engines take one K and V per query head: this layer's are repeated for it.
  const int group = model_->config().kvGroup();
  session.setTensors(a.q, repeatKvHeads(a.k, group), repeatKvHeads(a.v, group), tokens_, tokens_);
  if (!name_.empty()) session.setSourceLabel(modelLayerLabel(name_, layer, iv_));
  layer_ = layer;
  showStages(session);
}

void ModelSource::showStages(Session& session) {
  if (!ready() || layer_ < 0) return;
  if (stages_.pass != passVersion_ || stages_.layer != layer_) {
    stages_ = StageCache{};
    stages_.pass = passVersion_;
    stages_.layer = layer_;
  }
  const bool norms = shownStage_ == ViewStage::ValueWeighted;
  const bool rollout = shownStage_ == ViewStage::Rollout;
  if (norms && stages_.norms.empty()) stages_.norms = valueNorms(*model_, pass_, layer_);
  const int T = static_cast<int>(pass_.ids.size());
  if (rollout && stages_.rollout.empty() && T <= kRolloutMaxTokens) {
    const MatrixRM r = attentionRolloutTo(*model_, pass_, layer_);
    stages_.rollout.assign(r.data(), r.data() + r.size());
  }
  session.setSourceStages(norms ? stages_.norms : std::vector<float>{},
                          rollout ? stages_.rollout : std::vector<float>{});
}

const Model::QkNorms& ModelSource::shownQkNorms() {
  static const Model::QkNorms kNone;
  if (!ready() || layer_ < 0) return kNone;
  if (stages_.pass != passVersion_ || stages_.layer != layer_) {
    stages_ = StageCache{};
    stages_.pass = passVersion_;
    stages_.layer = layer_;
  }
  if (!stages_.qkDone) {
    stages_.qk = model_->layerQkNorms(pass_, layer_);
    stages_.qkDone = true;
  }
  return stages_.qk;
}

const ModelSource::Qkv& ModelSource::layerQkv(int layer) {
  if (layer != qkvLayer_) {
    qkvLayer_ = -1;
    model_->layerQkv(pass_, layer, qkv_.q, qkv_.k, qkv_.v);
    qkvLayer_ = layer;
  }
  return qkv_;
}

std::string modelName(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (d.rfind("ollama:", 0) == 0) d = d.substr(7);  // ollama:NAME:TAG is shown as NAME:TAG
  if (const std::size_t at = d.find("models--"); at != std::string::npos) {
    const std::string rest = d.substr(at + 8);
    return rest.substr(0, rest.find('/'));
  }
  return d.substr(d.find_last_of('/') == std::string::npos ? 0 : d.find_last_of('/') + 1);
}

std::string modelTitleName(const Model& model, const std::string& dir) {
  const std::string& q = model.quantization();
  return q.empty() ? modelName(dir) : modelName(dir) + " \xC2\xB7 " + q;
}

std::string modelLayerLabel(const std::string& name, int layer, const Interventions& iv) {
  std::string label = name + " \xC2\xB7 layer " + std::to_string(layer);
  std::string ablated;
  for (std::size_t l = 0; l < iv.layers.size(); ++l)
    for (int h : iv.layers[l].ablatedHeads)
      ablated += (ablated.empty() ? "" : ", ") + std::to_string(l) + ":" + std::to_string(h);
  if (!ablated.empty()) label += " \xC2\xB7 ablated " + ablated;
  return label;
}

bool ModelSource::ablated(int layer, int head) const {
  const LayerIntervention* li = iv_.find(layer);
  return li && std::find(li->ablatedHeads.begin(), li->ablatedHeads.end(), head) !=
                   li->ablatedHeads.end();
}

void ModelSource::setAblated(int layer, int head, bool ablate) {
  if (ablated(layer, head) == ablate) return;
  Interventions iv = iv_;
  if (ablate) {
    iv.ablate(layer, head, model_->config());
  } else {
    auto& heads = iv.layer(layer, layers()).ablatedHeads;
    heads.erase(std::remove(heads.begin(), heads.end(), head), heads.end());
  }
  setInterventions(iv);
}

bool ModelSource::ropeOff(int layer) const {
  const LayerIntervention* li = iv_.find(layer);
  return li && li->ropeOff;
}

void ModelSource::setRopeOff(int layer, bool off) {
  if (ropeOff(layer) == off) return;
  Interventions iv = iv_;
  iv.layer(layer, layers()).ropeOff = off;
  setInterventions(iv);
}

void ModelSource::applyParams(const AttentionParams& p, int layer) {
  if (!(p.temperature > 0.0f)) throw UsageError("temperature must be > 0");
  MaskSpec mask = p.mask;
  mask.causal = false;  // the pass keeps its own causal mask
  Interventions iv = iv_;
  // A window no narrower than the model's own adds nothing to it (the two are ANDed): what the
  // session shows of the model's window is not stored as an intervention.
  auto own = [&](int l) {
    MaskSpec m = mask;
    const int W = model_->config().windowOf(l);
    if (W > 0 && m.window >= W) m.window = 0;
    return m;
  };
  if (layer < 0) {
    for (int l = 0; l < layers(); ++l) {
      LayerIntervention& li = iv.layer(l, layers());
      li.mask = own(l);
      li.temperature = p.temperature;
    }
  } else {
    if (layer >= layers()) throw UsageError("layer " + std::to_string(layer) + " is out of range");
    LayerIntervention& li = iv.layer(layer, layers());
    li.mask = own(layer);
    li.temperature = p.temperature;
  }
  setInterventions(iv);
}

void ModelSource::clearInterventions() { setInterventions(Interventions{}); }

void ModelSource::setInterventions(const Interventions& iv) {
  ++ivVersion_;
  int from = layers();
  for (int l = 0; l < layers(); ++l)
    if (!sameLayer(iv_.find(l), iv.find(l))) {
      from = l;
      break;
    }
  if (from == layers()) {
    iv_ = iv;
    return;
  }
  rerun(iv, from);
}

void ModelSource::rerun(const Interventions& iv, int fromLayer) {
  if (deferReruns_) {  // recorded: the pass is stale until a re-run is adopted
    iv_ = iv;
    return;
  }
  if (!ready()) {
    iv_ = iv;
    ++reruns_;
    lastFrom_ = fromLayer;
    return;
  }
  ForwardResult r = pass_;
  model_->rerunFrom(r, fromLayer, iv);  // r shares the layers below fromLayer with pass_
  iv_ = iv;  // only once it ran: a re-run that throws changes nothing
  takeRerun(std::move(r), fromLayer);
}

void ModelSource::takeRerun(ForwardResult&& pass, int fromLayer) {
  pass_ = std::move(pass);
  ++passVersion_;
  qkvLayer_ = -1;
  ++reruns_;
  lastFrom_ = fromLayer;
}

int ModelSource::staleFrom() const {
  for (int l = 0; l < layers(); ++l)
    if (!sameLayer(pass_.interventions.find(l), iv_.find(l))) return l;
  return layers();
}

ModelSource::Rerun ModelSource::rerunJob() const {
  Rerun job;
  job.pass = pass_;
  job.interventions = iv_;
  job.interventionsVersion = ivVersion_;
  job.from = staleFrom();
  return job;
}

void ModelSource::runRerun(const Model& model, Rerun& job) {
  if (PassProgress* progress = PassProgress::current())
    progress->layersPlanned += model.config().nLayer - job.from;
  model.rerunFrom(job.pass, job.from, job.interventions);
}

bool ModelSource::adoptRerun(Rerun&& job) {
  if (job.interventionsVersion != ivVersion_) return false;
  takeRerun(std::move(job.pass), job.from);
  return true;
}

void ModelSource::revertInterventions() {
  if (!ready() || !stale()) return;
  iv_ = pass_.interventions;
  ++ivVersion_;
}

std::vector<TokenProb> ModelSource::topK(int k) const {
  return ready() ? Model::topK(pass_, k) : std::vector<TokenProb>{};
}

std::vector<TokenProb> ModelSource::baselineTopK(int k) const {
  return ready() ? Model::topK(baseline_, k) : std::vector<TokenProb>{};
}

}  // namespace attnviz
