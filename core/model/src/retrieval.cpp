// Retrieval heads: the needle-in-a-haystack prompt, the greedy copy with every head's top key,
// the per-head score and the top-k against random-k masking (retrieval.h).
#include "attnviz/model/retrieval.h"

#include "attnviz/model/attribution.h"  // logProbOf
#include "attnviz/model/generate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace attnviz {
namespace {

bool isSpace(char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }

// The sentence start (after ". ", "; ", a line end..., or the text's start or end) nearest to
// `from`; the earlier one on a tie.
std::size_t cutPoint(const std::string& f, std::size_t from) {
  std::size_t best = 0;
  auto consider = [&](std::size_t i) {
    const std::size_t d = i > from ? i - from : from - i;
    const std::size_t db = best > from ? best - from : from - best;
    if (d < db) best = i;
  };
  for (std::size_t i = 1; i < f.size(); ++i) {
    if (isSpace(f[i]) || !isSpace(f[i - 1])) continue;
    std::size_t j = i - 1;
    while (j > 0 && isSpace(f[j])) --j;
    const char p = f[j];
    if (f[i - 1] == '\n' || p == '.' || p == ';' || p == ':' || p == '!' || p == '?') consider(i);
  }
  consider(f.size());
  return best;
}

int find(const std::vector<int>& hay, int begin, int end, const std::vector<int>& needle) {
  if (needle.empty()) return -1;
  for (int i = begin; i + int(needle.size()) <= end; ++i)
    if (std::equal(needle.begin(), needle.end(), hay.begin() + i)) return i;
  return -1;
}

int argmaxRow(const float* row, int n) {
  int best = 0;
  for (int j = 1; j < n; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

Interventions masking(const Model& m, const std::vector<std::pair<int, int>>& heads) {
  Interventions iv;
  for (const auto& [l, h] : heads) iv.ablate(l, h, m.config());
  return iv;
}

}  // namespace

NeedleCase buildNeedleCase(const Model& m, const NeedleSpec& spec) {
  const ModelConfig& c = m.config();
  if (c.encoderDecoder() || !c.causal)
    throw InputError(c.family + " is not a decoder: retrieval heads are read while it generates");
  if (!(spec.depth >= 0.0 && spec.depth <= 1.0))
    throw UsageError("the needle's depth must be in [0, 1], got " + std::to_string(spec.depth));
  if (spec.filler.empty() || spec.needle.empty() || spec.question.empty() || spec.answer.empty())
    throw UsageError("a needle case needs a filler, a needle, a question and an answer");
  const std::size_t cut =
      cutPoint(spec.filler, std::size_t(std::llround(spec.depth * double(spec.filler.size()))));
  std::string before = spec.filler.substr(0, cut);
  std::string after = spec.filler.substr(cut);
  // The needle starts a sentence of its own: a space joins it to what comes before, unless that
  // already ends in one.
  if (!before.empty() && !isSpace(before.back())) before += ' ';
  std::string rest = after;
  if (!rest.empty() && !isSpace(rest.back())) rest += ' ';
  rest += spec.question;
  const std::string tail = " " + rest;  // after the needle
  NeedleCase nc;
  nc.depth = spec.depth;
  nc.text = before + spec.needle + tail;
  nc.ids = m.encode(nc.text);
  const int T = int(nc.ids.size());
  // The needle's span: where the ids of the text before it and after it stop agreeing.
  std::vector<int> pre = before.empty() ? std::vector<int>{} : m.encode(before);
  if (before.empty()) {
    // Only the special tokens the tokenizer puts first.
    const std::vector<int> withSpecial = m.encode(spec.needle);
    const std::vector<int> bare = m.tokenizer().encode(spec.needle, false);
    const std::size_t lead = withSpecial.size() >= bare.size() &&
                                     std::equal(bare.begin(), bare.end(),
                                                withSpecial.end() - std::ptrdiff_t(bare.size()))
                                 ? withSpecial.size() - bare.size()
                                 : 0;
    pre.assign(withSpecial.begin(), withSpecial.begin() + std::ptrdiff_t(lead));
  }
  const std::vector<int> post = m.tokenizer().encode(rest, false);
  int lcp = 0;
  while (lcp < T && lcp < int(pre.size()) && nc.ids[std::size_t(lcp)] == pre[std::size_t(lcp)])
    ++lcp;
  int lcs = 0;
  while (lcs < T - lcp && lcs < int(post.size()) &&
         nc.ids[std::size_t(T - 1 - lcs)] == post[post.size() - 1 - std::size_t(lcs)])
    ++lcs;
  nc.needleBegin = lcp;
  nc.needleEnd = T - lcs;
  // The answer as the needle holds it: its bare ids, or with the space before a word.
  for (const std::string& form : {spec.answer, " " + spec.answer}) {
    const std::vector<int> a = m.tokenizer().encode(form, false);
    const int at = find(nc.ids, nc.needleBegin, nc.needleEnd, a);
    if (at >= 0) {
      nc.answer = a;
      nc.answerBegin = at;
      break;
    }
  }
  if (nc.answer.empty())
    throw InputError("the answer \"" + spec.answer +
                     "\" is not among the needle's tokens as the prompt tokenizes it");
  if (T + int(nc.answer.size()) > c.nPositions)
    throw InputError("the needle prompt is " + std::to_string(T) + " tokens and its answer " +
                     std::to_string(nc.answer.size()) + ", more than the " +
                     std::to_string(c.nPositions) + " positions of the model; shorten the filler");
  return nc;
}

CopyTrace traceCopy(const Model& m, const NeedleCase& c, const Interventions& iv) {
  const ModelConfig& cfg = m.config();
  const int L = cfg.nLayer, H = cfg.nHead;
  if (c.ids.size() < 2) throw InputError("a needle prompt needs at least 2 tokens");
  std::vector<int> prefix(c.ids.begin(), c.ids.end() - 1);
  // The prefix's pass keeps K and V (the cache's) and the last logits row: no Q.
  const ForwardResult r = m.forward(prefix, iv, Capture::kvCache());
  KvCache cache = m.cacheFrom(r);
  CopyTrace t;
  t.prefixBytes = r.bytes();
  std::uint64_t rng = 1;
  int next = c.ids.back();
  for (std::size_t s = 0; s < c.answer.size(); ++s) {
    DecodeStep step = m.decodeStep(cache, next, iv, LayerSet::every());
    std::vector<int> top(std::size_t(L) * std::size_t(H), -1);
    for (int l = 0; l < L; ++l) {
      const Tensor3& row = step.rows[std::size_t(l)];
      for (int h = 0; h < H; ++h) top[std::size_t(l) * H + h] = argmaxRow(row.head(h), row.cols);
    }
    t.top.push_back(std::move(top));
    next = sampleToken(step.logits, 0.0f, 0, rng);
    t.generated.push_back(next);
  }
  t.correct = t.generated == c.answer;
  return t;
}

void countRetrievals(const NeedleCase& c, const CopyTrace& t, std::vector<int>& hits) {
  const std::set<int> answer(c.answer.begin(), c.answer.end());
  const std::size_t heads = hits.size();
  std::vector<std::set<int>> got(heads);
  for (std::size_t s = 0; s < t.generated.size() && s < t.top.size(); ++s) {
    const int w = t.generated[s];
    if (!answer.count(w)) continue;
    for (std::size_t h = 0; h < heads && h < t.top[s].size(); ++h) {
      const int j = t.top[s][h];
      if (j >= c.needleBegin && j < c.needleEnd && c.ids[std::size_t(j)] == w) got[h].insert(w);
    }
  }
  for (std::size_t h = 0; h < heads; ++h) hits[h] += int(got[h].size());
}

RetrievalScores retrievalScores(const Model& m, const std::vector<NeedleCase>& cases) {
  const ModelConfig& cfg = m.config();
  RetrievalScores s;
  s.layers = cfg.nLayer;
  s.heads = cfg.nHead;
  s.score.assign(std::size_t(s.layers) * std::size_t(s.heads), 0.0f);
  if (cases.empty()) throw UsageError("retrieval scores need at least one needle case");
  for (const NeedleCase& c : cases) {
    s.traces.push_back(traceCopy(m, c));
    std::vector<int> hits(s.score.size(), 0);
    countRetrievals(c, s.traces.back(), hits);
    const double k = double(std::set<int>(c.answer.begin(), c.answer.end()).size());
    for (std::size_t h = 0; h < hits.size(); ++h)
      s.score[h] += float(double(hits[h]) / k / double(cases.size()));
  }
  return s;
}

double answerLogProb(const Model& m, const NeedleCase& c, const Interventions& iv) {
  std::vector<int> ids = c.ids;
  ids.insert(ids.end(), c.answer.begin(), c.answer.end() - 1);
  Capture cap;
  cap.weights = cap.headOut = cap.qkv = LayerSet::none();
  cap.allLogits = true;
  const ForwardResult r = m.forward(ids, iv, cap);
  const int T = int(c.ids.size());
  double lp = 0.0;
  for (std::size_t i = 0; i < c.answer.size(); ++i) {
    lp += logProbOf(r.logits.row(T - 1 + int(i)).data(), int(r.logits.cols()), c.answer[i]);
  }
  return lp;
}

std::vector<std::pair<int, int>> topHeads(const RetrievalScores& s, int k) {
  std::vector<int> order(s.score.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return s.score[std::size_t(a)] > s.score[std::size_t(b)]; });
  std::vector<std::pair<int, int>> out;
  for (int i = 0; i < k && i < int(order.size()); ++i)
    out.emplace_back(order[std::size_t(i)] / s.heads, order[std::size_t(i)] % s.heads);
  return out;
}

double MaskComparison::randomMeanLogProb() const {
  if (random.empty()) return 0.0;
  double sum = 0.0;
  for (const MaskOutcome& o : random) sum += o.meanLogProb;
  return sum / double(random.size());
}

int MaskComparison::randomCorrect() const {
  int n = 0;
  for (const MaskOutcome& o : random) n += o.correct;
  return n;
}

MaskComparison compareMasks(const Model& m, const std::vector<NeedleCase>& cases,
                            const RetrievalScores& s, int k, int draws, std::uint64_t seed) {
  const int total = s.layers * s.heads;
  if (k < 1 || k >= total)
    throw UsageError("the number of heads to mask must be in [1, " + std::to_string(total - 1) +
                     "], got " + std::to_string(k));
  if (draws < 0) throw UsageError("the number of random draws must be >= 0");
  auto outcome = [&](std::vector<std::pair<int, int>> heads) {
    MaskOutcome o;
    std::sort(heads.begin(), heads.end());
    o.heads = heads;
    const Interventions iv = masking(m, heads);
    for (const NeedleCase& c : cases) {
      o.meanLogProb += answerLogProb(m, c, iv) / double(cases.size());
      o.correct += traceCopy(m, c, iv).correct ? 1 : 0;
    }
    o.cases = int(cases.size());
    return o;
  };
  MaskComparison cmp;
  cmp.none = outcome({});
  const std::vector<std::pair<int, int>> top = topHeads(s, k);
  cmp.top = outcome(top);
  // The other heads, drawn without replacement (a partial Fisher-Yates shuffle, splitmix64).
  std::vector<int> others;
  for (int i = 0; i < total; ++i)
    if (std::find(top.begin(), top.end(), std::make_pair(i / s.heads, i % s.heads)) == top.end())
      others.push_back(i);
  std::uint64_t state = seed;
  auto next = [&state] {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const int kk = std::min(k, int(others.size()));
  for (int d = 0; d < draws; ++d) {
    std::vector<int> pool = others;
    std::vector<std::pair<int, int>> pick;
    for (int i = 0; i < kk; ++i) {
      const std::size_t j = std::size_t(i) + std::size_t(next() % std::uint64_t(pool.size() - i));
      std::swap(pool[std::size_t(i)], pool[j]);
      pick.emplace_back(pool[std::size_t(i)] / s.heads, pool[std::size_t(i)] % s.heads);
    }
    cmp.random.push_back(outcome(pick));
  }
  return cmp;
}

}  // namespace attnviz
