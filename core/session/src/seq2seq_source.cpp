// attnviz session: an encoder-decoder's pass as a dump of its attention sites (seq2seq_source.h).
#include "attnviz/session/seq2seq_source.h"


#include <algorithm>
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

std::optional<SiteId> parseSeq2SeqSite(const std::string& text, const ModelConfig& c) {
  std::vector<std::string> f;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, ':')) f.push_back(part);
  if (f.size() < 2 || f.size() > 3 || f[1].empty() || f[1].size() > 6 ||
      !std::all_of(f[1].begin(), f[1].end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  SiteId s;
  s.layer = std::stoi(f[1]);
  if (f[0] == "enc" && f.size() == 2) {
    s.stack = 1;
  } else if (f[0] == "dec") {
    s.stack = 0;
    if (f.size() == 3 && f[2] == "cross") s.site = 1;
    else if (f.size() == 3 && f[2] != "self") return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (!c.encoderDecoder() || !c.hasSite(s)) return std::nullopt;
  return s;
}

std::optional<std::pair<SiteId, int>> parseSeq2SeqAblation(const std::string& text) {
  std::string rest = text;
  SiteId id;
  if (rest.rfind("enc:", 0) == 0) id.stack = 1, rest = rest.substr(4);
  else if (rest.rfind("cross:", 0) == 0) id.site = 1, rest = rest.substr(6);
  int l = -1, h = -1;
  char tail = 0;
  if (std::sscanf(rest.c_str(), "%d:%d%c", &l, &h, &tail) != 2 || l < 0 || h < 0)
    return std::nullopt;
  id.layer = l;
  return std::make_pair(id, h);
}

Seq2SeqSource::Seq2SeqSource(std::shared_ptr<const Model> model)
    : model_(std::move(model)), sites_(model_->config().sites()) {
  if (!model_->config().encoderDecoder())
    throw InputError(model_->files().dir + ": " + model_->config().family +
                     " is not an encoder-decoder");
}

std::vector<int> Seq2SeqSource::targetIds(const std::string& target) const {
  const ModelConfig& c = model_->config();
  std::vector<int> ids{c.decoderStartId.value_or(0)};
  if (target.empty()) return ids;
  std::vector<int> t = model_->tokenizer().encodeTarget(target, true);
  if (!t.empty() && c.isEos(t.back())) t.pop_back();
  ids.insert(ids.end(), t.begin(), t.end());
  return ids;
}

void Seq2SeqSource::setTexts(const std::string& source, const std::string& target) {
  const std::string src = source.empty() ? std::string(kDefaultModelText) : source;
  std::vector<int> s = model_->encode(src);
  std::vector<int> t = targetIds(target);
  model_->checkIds(s);
  model_->checkIds(t);
  std::swap(s, sourceIds_);
  std::swap(t, targetIds_);
  try {
    run();
  } catch (...) {
    std::swap(s, sourceIds_);
    std::swap(t, targetIds_);
    throw;
  }
  source_ = src;
  target_ = target;
}

int Seq2SeqSource::greedyNext() const {
  const ModelConfig& c = model_->config();
  const int T = int(pass_.logits.rows()), V = int(pass_.logits.cols());
  if (T == 0) throw InputError("no pass to continue: set the texts first");
  const auto row = pass_.logits.row(T - 1);
  int best = -1;
  for (int v = 0; v < V; ++v) {
    if (c.padId && v == *c.padId) continue;
    if (best < 0 || row(v) > row(best)) best = v;  // ties: the lowest id
  }
  return best;
}

bool Seq2SeqSource::endsTarget(int id) const {
  const std::optional<int> eos = model_->tokenizer().eos();
  return (eos && id == *eos) || model_->config().isEos(id);
}

void Seq2SeqSource::appendTarget(int id) {
  std::vector<int> t = targetIds_;
  t.push_back(id);
  model_->checkIds(t);
  std::swap(t, targetIds_);
  try {
    run();
  } catch (...) {
    std::swap(t, targetIds_);
    throw;
  }
  target_ = model_->tokenizer().decode(std::vector<int>(targetIds_.begin() + 1, targetIds_.end()));
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

// The positions inside the source (a later, shorter source ignores the rest), unless they are
// all of it; both the pass and dump() read this.
std::vector<int> Seq2SeqSource::maskedInside() const {
  std::vector<int> in;
  for (int p : masked_)
    if (p < int(sourceIds_.size())) in.push_back(p);
  if (in.size() >= sourceIds_.size()) in.clear();
  return in;
}

Interventions Seq2SeqSource::effective() const {
  Interventions iv = iv_;
  hideSourcePositions(iv, model_->config(), maskedInside());
  return iv;
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
  if (sourceIds_.empty()) return;  // before the first setTexts
  try {
    run();
  } catch (...) {
    std::swap(positions, masked_);
    throw;
  }
}

void Seq2SeqSource::run() {
  Capture c = Capture::view(0);
  c.weights = LayerSet::every();
  ForwardResult baseline = model_->forwardSeq2Seq(sourceIds_, targetIds_, {}, c);
  const Interventions iv = effective();
  ForwardResult pass = iv.entries().empty()
                           ? baseline
                           : model_->forwardSeq2Seq(sourceIds_, targetIds_, iv, c);
  baseline_ = std::move(baseline);
  pass_ = std::move(pass);
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
  if (sourceIds_.empty()) return;  // before the first setTexts
  try {
    run();
  } catch (...) {
    std::swap(iv, iv_);
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
