// attnviz session: an encoder-decoder's pass as a dump of its attention sites (seq2seq_source.h).
#include "attnviz/session/seq2seq_source.h"


#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <sstream>

namespace attnviz {

std::string seq2seqSiteLabel(const SiteId& s) {
  if (s.stack == 1) return "enc " + std::to_string(s.layer);
  return "dec " + std::to_string(s.layer) + (s.site == 1 ? " cross" : " self");
}

std::string seq2seqSiteName(const SiteId& s) {
  if (s.stack == 1) return "enc:" + std::to_string(s.layer);
  return "dec:" + std::to_string(s.layer) + (s.site == 1 ? ":cross" : ":self");
}

Seq2SeqSource::Seq2SeqSource(std::shared_ptr<const Model> model)
    : model_(std::move(model)), sites_(model_->config().sites()) {
  if (!model_->config().encoderDecoder())
    throw InputError(model_->files().dir + ": " + model_->config().family +
                     " is not an encoder-decoder");
}

namespace {

// The decoder's input for a target text: its start id, then the text's tokens without a final
// EOS (`attnviz model --target`).
std::vector<int> decoderInput(const Model& model, const std::string& target) {
  const ModelConfig& c = model.config();
  std::vector<int> ids{c.decoderStartId.value_or(0)};
  if (target.empty()) return ids;
  std::vector<int> t = model.tokenizer().encodeTarget(target, true);
  if (!t.empty() && c.isEos(t.back())) t.pop_back();
  ids.insert(ids.end(), t.begin(), t.end());
  return ids;
}

}  // namespace

std::vector<int> Seq2SeqSource::targetIds(const std::string& target) const {
  return decoderInput(*model_, target);
}

void Seq2SeqSource::setTexts(const std::string& source, const std::string& target) {
  Job j = passJob(source, target);
  runJob(*model_, j);  // throws for bad texts: the last good pass stays
  adopt(std::move(j));
}

namespace {

// The decoder's greedy token after the last row of `logits`: the largest, the lowest id on
// ties, never the pad token (as `attnviz generate` picks it).
int greedyToken(const ModelConfig& c, const MatrixRM& logits) {
  const int T = int(logits.rows()), V = int(logits.cols());
  if (T == 0) throw InputError("no pass to continue: set the texts first");
  const auto row = logits.row(T - 1);
  int best = -1;
  for (int v = 0; v < V; ++v) {
    if (c.padId && v == *c.padId) continue;
    if (best < 0 || row(v) > row(best)) best = v;  // ties: the lowest id
  }
  return best;
}

}  // namespace

int Seq2SeqSource::greedyNext() const { return greedyToken(model_->config(), pass_.logits); }

bool Seq2SeqSource::endsTarget(int id) const {
  const std::optional<int> eos = model_->tokenizer().eos();
  return (eos && id == *eos) || model_->config().isEos(id);
}

void Seq2SeqSource::appendTarget(int id) {
  std::vector<int> t = targetIds_;
  t.push_back(id);
  model_->checkIds(t);  // past the model's positions: the last good pass stays
  Job j = stepJob(id);
  runJob(*model_, j);
  adopt(std::move(j));
}

void checkMaskedSource(std::vector<int>& positions, int S) {
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  if (!positions.empty() && (positions.front() < 0 || positions.back() >= S))
    throw InputError("mask-source " + std::to_string(positions.front() < 0 ? positions.front()
                                                                            : positions.back()) +
                     ": past the source's " + std::to_string(S) + " tokens (positions 0.." +
                     std::to_string(S - 1) + ")");
  if (int(positions.size()) >= S)
    throw InputError("mask-source: every source position masked; a cross row needs one key");
}

void hideSourcePositions(Interventions& iv, const ModelConfig& c, const std::vector<int>& positions) {
  if (positions.empty()) return;
  std::string expr;
  for (int p : positions) expr += (expr.empty() ? "k != " : " && k != ") + std::to_string(p);
  for (int l = 0; l < c.nLayer; ++l) iv.at(SiteId{0, l, 1}, c).mask.expr = expr;
}

// The masked positions the pass ran with, inside its source (a later, shorter source ignores
// the rest), unless they are all of it: dump() draws those columns masked.
std::vector<int> Seq2SeqSource::maskedInside() const {
  std::vector<int> in;
  for (int p : passMasked_)
    if (p < int(sourceIds_.size())) in.push_back(p);
  if (in.size() >= sourceIds_.size()) in.clear();
  return in;
}

void Seq2SeqSource::setMaskedSource(std::vector<int> positions) {
  if (!sourceIds_.empty()) {
    checkMaskedSource(positions, int(sourceIds_.size()));
  } else {  // before the first setTexts: checked against the source when it comes
    std::sort(positions.begin(), positions.end());
    positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  }
  if (positions == masked_) return;
  std::swap(positions, masked_);
  try {
    changed();
  } catch (...) {
    std::swap(positions, masked_);
    --ivVersion_;
    throw;
  }
}

void Seq2SeqSource::changed() {
  ++ivVersion_;
  if (defer_ || sourceIds_.empty()) return;  // deferred, or before the first setTexts
  Job j = passJob(source_, target_);
  runJob(*model_, j);
  adopt(std::move(j));
}

void Seq2SeqSource::revertInterventions() {
  iv_ = passIv_;
  masked_ = passMasked_;
  passIvVersion_ = ++ivVersion_;
}

// ---- passes computed apart -------------------------------------------------------------------

struct Seq2SeqSource::Caches {
  KvCache pass, baseline;  // baseline: only with interventions
};

namespace {

// What a pass keeps: every site's weights (the dump) and Q, K, V (the caches of a watched
// translation are the pass's own K and V, as `attnviz generate` takes them), the last logits.
Capture passCapture() {
  Capture c = Capture::view(0);
  c.weights = c.qkv = LayerSet::every();
  return c;
}

// The masked positions inside a source of S tokens (the rest ignored), unless they are all of it.
std::vector<int> maskedWithin(const std::vector<int>& masked, std::size_t S) {
  std::vector<int> in;
  for (int p : masked)
    if (p < int(S)) in.push_back(p);
  if (in.size() >= S) in.clear();
  return in;
}

// Both passes of a job on its ids: the baseline, and the pass with `iv` (the baseline itself
// when there are none), their layers planned under a PassProgress scope.
void runPasses(const Model& model, Seq2SeqSource::Job& j, const Interventions& iv) {
  const ModelConfig& c = model.config();
  const bool plain = iv.entries().empty();
  if (PassProgress* p = PassProgress::current())
    p->layersPlanned += (c.nEncoderLayer + c.nLayer) * (plain ? 1 : 2);
  const Capture cap = passCapture();
  ForwardResult baseline = model.forwardSeq2Seq(j.sourceIds, j.targetIds, {}, cap);
  ForwardResult pass = plain ? baseline : model.forwardSeq2Seq(j.sourceIds, j.targetIds, iv, cap);
  j.baseline = std::move(baseline);
  j.pass = std::move(pass);
}

// A site's weights [H, T, K] grown by one row (the decode step's [H, 1, K']; K' <= K' of the
// grown site: the decoder's self site grows a column too, 0 above the new row).
void growSite(SiteActivations& s, const Tensor3& row) {
  const Tensor3& w = s.weights;
  const int H = row.heads, T = w.rows, K = row.cols;
  Tensor3 n(H, T + 1, K);
  for (int h = 0; h < H; ++h) {
    if (T > 0) n.mat(h).topLeftCorner(T, w.cols) = w.mat(h);
    n.mat(h).row(T) = row.mat(h).row(0);
  }
  s.weights = std::move(n);
  s.rows.clear();  // the row stats and thumbnails are not kept for grown passes
  s.thumb = Tensor3{};
  s.q = s.k = s.v = Tensor3{};  // the caches hold the grown K and V
}

// A decode step's token appended to a pass: its rows at every decoder site, its logits.
void appendStep(const ModelConfig& c, ForwardResult& r, int id, DecodeStep& step) {
  for (int l = 0; l < c.nLayer; ++l) {
    LayerActivations& a = r.layers[std::size_t(l)];  // copied first when shared
    growSite(a.site(0), step.rows[std::size_t(l)]);
    if (a.sites.size() > 1) growSite(a.site(1), step.crossRows[std::size_t(l)]);
  }
  r.ids.push_back(id);
  r.logits = Eigen::Map<const MatrixRM>(step.logits.data(), 1, Eigen::Index(step.logits.size()));
}

}  // namespace

Seq2SeqSource::Job Seq2SeqSource::passJob(const std::string& source,
                                          const std::string& target) const {
  Job j;
  j.kind = Job::Kind::Pass;
  j.source = source.empty() ? std::string(kDefaultModelText) : source;
  j.target = target;
  j.iv = iv_;
  j.masked = masked_;
  j.interventionsVersion = ivVersion_;
  j.passVersion = passVersion_;
  // The texts shown: their ids as they are (a translated target is its tokens, whatever its
  // decoded text would encode to).
  if (ready() && j.source == source_ && j.target == target_) {
    j.sourceIds = sourceIds_;
    j.targetIds = targetIds_;
  }
  return j;
}

Seq2SeqSource::Job Seq2SeqSource::stepJob(int id) {
  if (!ready()) throw InputError("no pass to continue: set the texts first");
  Job j;
  j.kind = Job::Kind::Step;
  j.source = source_;
  j.target = target_;
  j.iv = passIv_;
  j.masked = passMasked_;
  j.interventionsVersion = passIvVersion_;
  j.passVersion = passVersion_;
  j.caches = std::move(caches_);
  j.synthesized = synthesized_;
  j.sourceIds = sourceIds_;
  j.targetIds = targetIds_;
  j.pass = pass_;  // the layers shared, not copied
  j.baseline = baseline_;
  j.id = id;
  return j;
}

void Seq2SeqSource::runJob(const Model& model, Job& j) {
  const ModelConfig& c = model.config();
  if (j.kind == Job::Kind::Pass) {
    if (j.sourceIds.empty()) {  // else the ids of the texts the source shows (passJob)
      std::vector<int> s = model.encode(j.source);
      std::vector<int> t = decoderInput(model, j.target);
      model.checkIds(s);
      model.checkIds(t);
      j.sourceIds = std::move(s);
      j.targetIds = std::move(t);
    }
    Interventions iv = j.iv;
    hideSourcePositions(iv, c, maskedWithin(j.masked, j.sourceIds.size()));
    runPasses(model, j, iv);
    return;
  }
  Interventions iv = j.iv;
  hideSourcePositions(iv, c, maskedWithin(j.masked, j.sourceIds.size()));
  const bool plain = iv.entries().empty();
  if (!j.caches) {
    // A grown pass holds no K and V of its own: its ids run again in full first.
    if (j.synthesized) runPasses(model, j, iv);
    auto caches = std::make_shared<Caches>();
    caches->pass = model.cacheFrom(j.pass);
    if (!plain) caches->baseline = model.cacheFrom(j.baseline);
    j.caches = std::move(caches);
    j.synthesized = false;
  }
  if (j.id < 0) {
    j.id = greedyToken(c, j.pass.logits);
    const std::optional<int> eos = model.tokenizer().eos();
    if ((eos && j.id == *eos) || c.isEos(j.id)) {
      j.eos = true;  // the translation ends: nothing appended
      return;
    }
  }
  std::vector<int> t = j.targetIds;
  t.push_back(j.id);
  model.checkIds(t);  // past the model's positions (before the caches change)
  const auto t0 = std::chrono::steady_clock::now();
  DecodeStep step = model.decodeStep(j.caches->pass, j.id, iv, LayerSet::every());
  DecodeStep base;
  if (!plain) base = model.decodeStep(j.caches->baseline, j.id, {}, LayerSet::every());
  j.stepSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  appendStep(c, j.pass, j.id, step);
  if (plain) j.baseline = j.pass;
  else appendStep(c, j.baseline, j.id, base);
  j.targetIds = std::move(t);
  j.target = model.tokenizer().decode(std::vector<int>(j.targetIds.begin() + 1, j.targetIds.end()));
  j.synthesized = true;
}

bool Seq2SeqSource::adopt(Job&& j) {
  if (j.kind == Job::Kind::Pass) {
    if (j.interventionsVersion != ivVersion_) return false;
    caches_.reset();
    synthesized_ = false;
  } else {
    if (j.interventionsVersion != ivVersion_ || j.passVersion != passVersion_) return false;
    caches_ = std::move(j.caches);
    synthesized_ = j.synthesized;
    if (j.eos) {  // nothing appended: the pass stays, with its caches
      ++passVersion_;
      return true;
    }
  }
  sourceIds_ = std::move(j.sourceIds);
  targetIds_ = std::move(j.targetIds);
  source_ = std::move(j.source);
  target_ = std::move(j.target);
  pass_ = std::move(j.pass);
  baseline_ = std::move(j.baseline);
  passIv_ = std::move(j.iv);
  passMasked_ = std::move(j.masked);
  passIvVersion_ = j.interventionsVersion;
  ++passVersion_;
  return true;
}

int Seq2SeqSource::siteIndex(const SiteId& s) const {
  for (std::size_t i = 0; i < sites_.size(); ++i)
    if (sites_[i] == s) return int(i);
  return -1;
}

Dump Seq2SeqSource::dump() const {
  Dump d;
  d.model = modelName(model_->files().dir);
  const Tokenizer& tok = model_->tokenizer();
  for (int id : targetIds_) d.tokens.push_back(tok.label(id));
  for (int id : sourceIds_) d.keyTokens.push_back(tok.label(id));
  // A cross site's masked source columns stay 0: drawn as masked cells.
  const std::vector<int> hiddenColumns = maskedInside();
  auto hidden = [&](int j) {
    return std::binary_search(hiddenColumns.begin(), hiddenColumns.end(), j);
  };
  for (const SiteId& s : sites_) {
    DumpLayer l;
    l.name = seq2seqSiteLabel(s);
    l.axes = s.stack == 1 ? DumpAxes::KeySelf : s.site == 1 ? DumpAxes::Cross : DumpAxes::Self;
    l.weights = pass_.site(s).weights;
    // A weight of exactly 0 on a key the site may attend (every key of an encoder or cross
    // site, the keys up to the row in the decoder's causal one) is a softmax that underflowed,
    // not a mask: it is kept as the least normal float so the view does not hatch it as masked
    // (a masked source column of a cross site is a mask, and stays 0).
    for (int h = 0; h < l.weights.heads; ++h) {
      auto m = l.weights.mat(h);
      for (int i = 0; i < l.weights.rows; ++i)
        for (int j = 0; j < l.weights.cols; ++j)
          if (m(i, j) == 0.0f && (l.axes != DumpAxes::Self || j <= i) &&
              !(l.axes == DumpAxes::Cross && hidden(j)))
            m(i, j) = std::numeric_limits<float>::min();
    }
    l.queryTokens = l.axes == DumpAxes::KeySelf ? d.keyTokens : d.tokens;
    l.keyTokens = l.axes == DumpAxes::Self ? d.tokens : d.keyTokens;
    d.layers.push_back(std::move(l));
  }
  return d;
}

bool Seq2SeqSource::ablated(const SiteId& s, int head) const {
  const LayerIntervention* e = iv_.find(s);
  return e && std::find(e->ablatedHeads.begin(), e->ablatedHeads.end(), head) !=
                  e->ablatedHeads.end();
}

void Seq2SeqSource::setAblated(const SiteId& s, int head, bool ablate) {
  const ModelConfig& c = model_->config();
  if (head < 0 || head >= c.nHead || !c.hasSite(s))
    throw InputError("ablate " + seq2seqSiteName(s) + ":" + std::to_string(head) +
                     ": out of range (the model has " + std::to_string(c.nHead) + " heads)");
  if (ablated(s, head) == ablate) return;
  Interventions iv = iv_;
  std::vector<int>& hs = iv.at(s, c).ablatedHeads;
  if (ablate) hs.push_back(head), std::sort(hs.begin(), hs.end());
  else hs.erase(std::find(hs.begin(), hs.end(), head));
  std::swap(iv, iv_);
  try {
    changed();
  } catch (...) {
    std::swap(iv, iv_);
    --ivVersion_;
    throw;
  }
}

std::vector<std::pair<SiteId, int>> Seq2SeqSource::ablations() const {
  std::vector<std::pair<SiteId, int>> out;
  for (const SiteId& s : sites_)
    if (const LayerIntervention* e = iv_.find(s))
      for (int h : e->ablatedHeads) out.emplace_back(s, h);
  return out;
}

}  // namespace attnviz
