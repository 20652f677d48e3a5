// The head finder's metrics, HeadVis's interval sampling, and the tree (docs/head-finder.md).
#include "attnviz/model/head_finder.h"

#include "attnviz/engine/parallel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include <unistd.h>

namespace attnviz {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kHistogramBins = 50;
constexpr int kTopTokens = 50;

// The metric slots (headMetricNames() order).
enum Metric { kSelf, kPrev, kEntropy, kDistance, kVariance, kInduction, kFirst, kMetricCount };

double round4(double v) { return std::nearbyint(v * 1e4) / 1e4; }

std::string readWhole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) throw InputError(path + ": read error");
  return s.str();
}

bool blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

// Lines of `text`, split at '\n', each without a trailing '\r'.
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    if (end == text.size()) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

const std::vector<std::string>& headMetricNames() {
  static const std::vector<std::string> names{
      "self_attention_score", "prev_token_score",     "pattern_entropy",  "qk_distance",
      "qk_distance_variance", "induction_score",      "first_token_share"};
  return names;
}

std::string headMetricDescription(const std::string& metric) {
  static const std::map<std::string, std::string> d{
      {"self_attention_score", "mean weight a query gives its own position"},
      {"prev_token_score", "mean weight a query gives the position before it"},
      {"pattern_entropy", "mean entropy (nats) of a query's attention row"},
      {"qk_distance", "mean |query - key| distance, weighted by attention"},
      {"qk_distance_variance", "variance of the query - key distance, weighted by attention"},
      {"induction_score",
       "mean weight a query gives the token after an earlier copy of itself (over queries that "
       "have one)"},
      {"first_token_share", "mean weight a query gives position 0"}};
  const auto it = d.find(metric);
  return it == d.end() ? std::string() : it->second;
}

// ---------------------------------------------------------------------------------------------
// The corpus

std::vector<std::string> readCorpusDocuments(const std::string& path, const std::string& field) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) throw InputError(path + ": no such file or folder");
  std::vector<std::string> docs;
  auto add = [&](std::string d) {
    if (!blank(d)) docs.push_back(std::move(d));
  };
  if (fs::is_directory(p, ec)) {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0 &&
          e.is_regular_file(ec))
        names.push_back(name);
    }
    if (ec) throw InputError(path + ": cannot list the folder (" + ec.message() + ")");
    std::sort(names.begin(), names.end());
    if (names.empty()) throw InputError(path + ": a corpus folder without .txt files");
    for (const std::string& n : names) add(readWhole((p / n).string()));
    return docs;
  }
  const std::string text = readWhole(path);
  const bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  const std::vector<std::string> ls = lines(text);
  if (jsonl) {
    for (std::size_t i = 0; i < ls.size(); ++i) {
      if (blank(ls[i])) continue;
      const std::string where = path + ":" + std::to_string(i + 1) + ": ";
      json j;
      try {
        j = json::parse(ls[i]);
      } catch (const json::exception& e) {
        std::string what = e.what();
        if (const std::size_t c = what.find("] "); c != std::string::npos) what = what.substr(c + 2);
        throw InputError(where + "malformed JSON (" + what + ")");
      }
      if (!j.is_object()) throw InputError(where + "not a JSON object");
      const auto it = j.find(field);
      if (it == j.end() || !it->is_string())
        throw InputError(where + "no string field '" + field + "'");
      add(it->get<std::string>());
    }
    return docs;
  }
  std::string doc;
  bool open = false;
  for (const std::string& line : ls) {
    if (blank(line)) {
      if (open) add(std::move(doc));
      doc.clear();
      open = false;
      continue;
    }
    if (open) doc += '\n';
    doc += line;
    open = true;
  }
  if (open) add(std::move(doc));
  return docs;
}

std::string corpusName(const std::string& path) {
  fs::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..")
    name = fs::weakly_canonical(fs::absolute(path)).filename().string();
  return name;
}

// ---------------------------------------------------------------------------------------------
// Sampling

int headFinderWarmup(long long n) {
  const long long w = std::max<long long>(1, std::min<long long>(2000, std::max<long long>(50, n / 10)));
  return int(w);
}

int boundaryIndex(int k, int W, int K) {
  // round(k W / K), half to even, in exact integers.
  const long long num = (long long)k * W, den = K;
  long long q = num / den;
  const long long r2 = 2 * (num % den);
  if (r2 > den || (r2 == den && (q % 2) == 1)) ++q;
  return int(std::min<long long>(q, W - 1));
}

struct HeadFinder::Impl {
  struct Head {
    double sums[kMetricCount] = {};
    double induction = 0.0;
    double maxSum = 0.0;
    std::vector<double> warm;
    std::vector<double> boundaries;
    bool bounded = false;
    std::vector<long long> histogram = std::vector<long long>(kHistogramBins, 0);
    std::vector<std::vector<KeptSequence>> below;  // per interval 0 .. K - 2
    std::vector<long long> seen;                   // per interval: sequences assigned
    std::vector<KeptSequence> top;
    std::mt19937_64 rng;
  };

  int L = 0, H = 0;
  HeadFinderSettings s;
  long long expected = 0;
  int W = 1;
  std::vector<Head> heads;
  // Denominators over every counted sequence.
  double sumT = 0, sumT1 = 0, inductionQueries = 0;
  long long count = 0;

  // The current sequence.
  bool inSequence = false;
  std::shared_ptr<const std::vector<int>> ids;
  std::vector<std::vector<int>> earlier;  // per query i: p < i with id[p] = id[i]
  std::vector<char> layerDone;

  void setBoundaries(Head& h) {
    std::vector<double> v = h.warm;
    std::sort(v.begin(), v.end());
    const int n = int(v.size());
    h.boundaries.clear();
    if (n > 0)
      for (int k = 1; k < s.intervals; ++k) h.boundaries.push_back(v[std::size_t(boundaryIndex(k, n, s.intervals))]);
    h.bounded = true;
  }

  // The sparse rows of one head's weights A [T, T].
  void sparse(const float* A, int T, KeptSequence& k) const {
    std::vector<int> order;
    std::vector<int> keep;
    for (int i = 0; i < T; ++i) {
      const float* row = A + std::size_t(i) * std::size_t(T);
      order.clear();
      for (int j = 0; j < T; ++j)
        if (double(row[j]) >= s.sparseThreshold) order.push_back(j);
      auto better = [&](int a, int b) { return row[a] != row[b] ? row[a] > row[b] : a < b; };
      if (int(order.size()) > s.sparseTopk) {
        std::partial_sort(order.begin(), order.begin() + s.sparseTopk, order.end(), better);
        order.resize(std::size_t(s.sparseTopk));
      }
      std::sort(order.begin(), order.end());
      for (int j : order) {
        k.indices.push_back((long long)i * T + j);
        k.values.push_back(round4(double(row[j])));
      }
    }
  }

  KeptSequence kept(const float* A, int T, int interval, double mx) const {
    KeptSequence k;
    k.sequenceId = int(count);
    k.interval = interval;
    k.maxActivation = mx;
    k.seqLen = T;
    k.ids = ids;
    sparse(A, T, k);
    return k;
  }

  void sample(Head& h, const float* A, int T, double mx) {
    const int K = s.intervals;
    const int interval =
        std::min(int(std::upper_bound(h.boundaries.begin(), h.boundaries.end(), mx) -
                     h.boundaries.begin()),
                 K - 1);
    if (interval == K - 1) {
      if (s.topSamples <= 0) return;
      if (int(h.top.size()) < s.topSamples) {
        h.top.push_back(kept(A, T, interval, mx));
        return;
      }
      // The weakest kept: smallest max, ties the higher id (a later sequence never wins a tie).
      auto worst = std::min_element(h.top.begin(), h.top.end(), [](const auto& a, const auto& b) {
        return a.maxActivation != b.maxActivation ? a.maxActivation < b.maxActivation
                                                  : a.sequenceId > b.sequenceId;
      });
      if (mx > worst->maxActivation) *worst = kept(A, T, interval, mx);
      return;
    }
    const long long n = ++h.seen[std::size_t(interval)];
    std::vector<KeptSequence>& r = h.below[std::size_t(interval)];
    if (s.samples <= 0) return;
    if (int(r.size()) < s.samples) {
      r.push_back(kept(A, T, interval, mx));
      return;
    }
    const std::uint64_t j = h.rng() % std::uint64_t(n);  // Algorithm R
    if (j < std::uint64_t(s.samples)) r[std::size_t(j)] = kept(A, T, interval, mx);
  }

  void addHead(Head& h, const float* A, int T) {
    double self = 0, prev = 0, ent = 0, dist = 0, dist2 = 0, first = 0, ind = 0;
    double mx = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < T; ++i) {
      const float* row = A + std::size_t(i) * std::size_t(T);
      self += row[i];
      if (i >= 1) prev += row[i - 1];
      first += row[0];
      for (int j = 0; j < T; ++j) {
        const double a = row[j];
        if (a <= 0) continue;
        ent -= a * std::log(a);
        const double d = double(i - j);
        dist += a * std::abs(d);
        dist2 += a * d * d;
        if (i >= 1 && j >= 1 && a > mx) mx = a;
      }
      for (int p : earlier[std::size_t(i)]) {
        const double a = row[p + 1];
        if (a >= s.inductionThreshold) ind += a;
      }
    }
    if (mx < 0) mx = 0;  // every cell past position 0 exactly 0
    h.sums[kSelf] += self;
    h.sums[kPrev] += prev;
    h.sums[kEntropy] += ent;
    h.sums[kDistance] += dist;
    h.sums[kVariance] += dist2;
    h.sums[kFirst] += first;
    h.induction += ind;
    h.maxSum += mx;
    h.histogram[std::size_t(std::clamp(int(std::floor(kHistogramBins * mx)), 0, kHistogramBins - 1))] += 1;
    if (count < W) {
      h.warm.push_back(mx);
      if (int(h.warm.size()) == W) setBoundaries(h);
      return;
    }
    sample(h, A, T, mx);
  }
};

HeadFinder::HeadFinder(int layers, int heads, const HeadFinderSettings& s, long long expected)
    : impl_(std::make_unique<Impl>()) {
  if (layers < 1 || heads < 1) throw UsageError("head finder: no heads");
  if (s.intervals < 1) throw UsageError("--intervals: expected a number >= 1");
  Impl& m = *impl_;
  m.L = layers, m.H = heads, m.s = s, m.expected = expected;
  m.W = headFinderWarmup(expected);
  m.heads.resize(std::size_t(layers) * std::size_t(heads));
  for (int l = 0; l < layers; ++l) {
    for (int h = 0; h < heads; ++h) {
      Impl::Head& hd = m.heads[std::size_t(l) * std::size_t(heads) + std::size_t(h)];
      hd.below.resize(std::size_t(s.intervals - 1));
      hd.seen.assign(std::size_t(s.intervals - 1), 0);
      // Seeded from the run's seed, the layer and the head.
      std::seed_seq seq{std::uint32_t(s.seed & 0xffffffffu), std::uint32_t(s.seed >> 32),
                        std::uint32_t(l), std::uint32_t(h)};
      hd.rng.seed(seq);
    }
  }
}

HeadFinder::~HeadFinder() = default;

void HeadFinder::beginSequence(const std::vector<int>& ids) {
  Impl& m = *impl_;
  if (m.inSequence) throw std::logic_error("HeadFinder: a sequence is already open");
  if (ids.size() < 2) throw std::logic_error("HeadFinder: a sequence of fewer than 2 ids");
  m.inSequence = true;
  m.ids = std::make_shared<const std::vector<int>>(ids);
  const int T = int(ids.size());
  m.earlier.assign(std::size_t(T), {});
  std::map<int, std::vector<int>> at;
  for (int i = 0; i < T; ++i) {
    std::vector<int>& before = at[ids[std::size_t(i)]];
    m.earlier[std::size_t(i)] = before;  // every p < i with the same id (p + 1 <= i < T)
    if (!before.empty()) m.inductionQueries += 1;
    before.push_back(i);
  }
  m.layerDone.assign(std::size_t(m.L), 0);
}

void HeadFinder::addLayer(int layer, const Tensor3& w) {
  Impl& m = *impl_;
  const int T = int(m.ids ? m.ids->size() : 0);
  if (!m.inSequence || layer < 0 || layer >= m.L || m.layerDone[std::size_t(layer)])
    throw std::logic_error("HeadFinder: unexpected layer " + std::to_string(layer));
  if (w.heads != m.H || w.rows != T || w.cols != T)
    throw InputError("head finder: layer " + std::to_string(layer) + " weights of shape [" +
                     std::to_string(w.heads) + ", " + std::to_string(w.rows) + ", " +
                     std::to_string(w.cols) + "], expected [" + std::to_string(m.H) + ", " +
                     std::to_string(T) + ", " + std::to_string(T) + "]");
  m.layerDone[std::size_t(layer)] = 1;
  // Heads are independent (each has its own sums, samples and generator): one task a head.
  detail::parallelFor(m.H, [&](int h) {
    m.addHead(m.heads[std::size_t(layer) * std::size_t(m.H) + std::size_t(h)], w.head(h), T);
  });
}

void HeadFinder::endSequence() {
  Impl& m = *impl_;
  if (!m.inSequence) throw std::logic_error("HeadFinder: no sequence open");
  for (char d : m.layerDone)
    if (!d) throw std::logic_error("HeadFinder: a layer's weights were not added");
  const double T = double(m.ids->size());
  m.sumT += T;
  m.sumT1 += T - 1;
  ++m.count;
  m.inSequence = false;
  m.ids.reset();
}

long long HeadFinder::sequences() const { return impl_->count; }
int HeadFinder::warmup() const { return impl_->W; }

std::vector<HeadResult> HeadFinder::finish() {
  Impl& m = *impl_;
  std::vector<HeadResult> out;
  out.reserve(m.heads.size());
  for (int l = 0; l < m.L; ++l) {
    for (int h = 0; h < m.H; ++h) {
      Impl::Head& hd = m.heads[std::size_t(l) * std::size_t(m.H) + std::size_t(h)];
      if (!hd.bounded) m.setBoundaries(hd);  // the corpus ended inside the warm-up
      HeadResult r;
      r.layer = l, r.head = h;
      r.metrics.assign(kMetricCount, kNaN);
      if (m.count > 0) {
        r.metrics[kSelf] = hd.sums[kSelf] / m.sumT;
        r.metrics[kPrev] = hd.sums[kPrev] / m.sumT1;
        r.metrics[kEntropy] = hd.sums[kEntropy] / m.sumT;
        r.metrics[kDistance] = hd.sums[kDistance] / m.sumT;
        r.metrics[kVariance] =
            hd.sums[kVariance] / m.sumT - r.metrics[kDistance] * r.metrics[kDistance];
        r.metrics[kFirst] = hd.sums[kFirst] / m.sumT;
        r.meanMaxActivation = hd.maxSum / double(m.count);
      } else {
        r.meanMaxActivation = kNaN;
      }
      if (m.inductionQueries > 0) r.metrics[kInduction] = hd.induction / m.inductionQueries;
      r.boundaries = hd.boundaries;
      r.histogram = hd.histogram;
      for (std::vector<KeptSequence>& b : hd.below) {
        std::sort(b.begin(), b.end(),
                  [](const auto& a, const auto& c) { return a.sequenceId < c.sequenceId; });
        for (KeptSequence& k : b) r.kept.push_back(std::move(k));
      }
      std::sort(hd.top.begin(), hd.top.end(), [](const auto& a, const auto& c) {
        return a.maxActivation != c.maxActivation ? a.maxActivation > c.maxActivation
                                                  : a.sequenceId < c.sequenceId;
      });
      for (KeptSequence& k : hd.top) r.kept.push_back(std::move(k));
      out.push_back(std::move(r));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The tree

namespace {

// Written in the order the contract lists the fields (ordered_json keeps insertion order).
using ojson = nlohmann::ordered_json;

ojson number(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

void writeText(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw InputError(path.string() + ": cannot write (" + std::strerror(errno) + ")");
}

// The tokens of one side ranked by their summed kept weight.
ojson topTokens(const std::map<std::string, double>& sums) {
  std::vector<std::pair<std::string, double>> v(sums.begin(), sums.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > std::size_t(kTopTokens)) v.resize(std::size_t(kTopTokens));
  ojson out = ojson::array();
  for (const auto& [token, weight] : v) out.push_back({{"token", token}, {"weight", round4(weight)}});
  return out;
}

ojson headJson(const HeadResult& r, const std::function<std::string(int)>& piece) {
  // qk_distance_histogram: bins [e_b, e_b+1) of |q - k| (the last closed), edges 0, 1, 2, 4, ...
  std::vector<long long> edges{0, 1};
  while (edges.back() < 4096) edges.push_back(edges.back() * 2);
  std::vector<double> distBins(edges.size() - 1, 0.0);
  std::map<std::string, double> qTokens, kTokens;
  ojson seqs = ojson::array();
  for (const KeptSequence& k : r.kept) {
    std::vector<std::string> tokens;
    tokens.reserve(k.ids->size());
    for (int id : *k.ids) tokens.push_back(piece(id));
    for (std::size_t e = 0; e < k.indices.size(); ++e) {
      const long long q = k.indices[e] / k.seqLen, key = k.indices[e] % k.seqLen;
      const long long d = q > key ? q - key : key - q;
      if (d <= edges.back()) {
        std::size_t b = std::size_t(std::upper_bound(edges.begin(), edges.end(), d) - edges.begin()) - 1;
        b = std::min(b, distBins.size() - 1);
        distBins[b] += k.values[e];
      }
      qTokens[tokens[std::size_t(q)]] += k.values[e];
      kTokens[tokens[std::size_t(key)]] += k.values[e];
    }
    seqs.push_back({{"sequence_id", k.sequenceId},
                    {"interval", k.interval + 1},
                    {"tokens", tokens},
                    {"attention_indices", k.indices},
                    {"attention_values", k.values},
                    {"seq_len", k.seqLen},
                    {"max_activation", k.maxActivation},
                    {"token_ids", *k.ids}});  // attnviz's own: the ids the pass ran on
  }
  ojson distValues = ojson::array();
  for (double v : distBins) distValues.push_back(round4(v));
  ojson histEdges = ojson::array();
  for (int i = 0; i <= kHistogramBins; ++i) histEdges.push_back(double(i) / kHistogramBins);
  ojson j;
  j["layer"] = r.layer;
  j["head"] = r.head;
  j["sequences"] = std::move(seqs);
  j["qk_distance_histogram"] = {{"bin_edges", edges}, {"bin_values", distValues}};
  j["top_query_tokens"] = topTokens(qTokens);
  j["top_key_tokens"] = topTokens(kTokens);
  j["histogram"] = {{"bin_edges", histEdges}, {"bin_values", r.histogram}};
  // attnviz's own: the metrics unrounded (scatter_data.json rounds them to 4 decimals).
  ojson metrics = ojson::object();
  for (std::size_t m = 0; m < headMetricNames().size(); ++m) metrics[headMetricNames()[m]] = number(r.metrics[m]);
  j["metrics"] = std::move(metrics);
  j["statistics"] = {{"n_samples", r.kept.size()},
                     {"mean_max_activation", number(r.meanMaxActivation)}};
  ojson bounds = ojson::array();
  for (double b : r.boundaries) bounds.push_back(number(b));
  j["interval_boundaries"] = std::move(bounds);
  return j;
}

}  // namespace

void writeHeadTree(const std::string& dir, const HeadTreeInfo& info,
                   const std::vector<HeadResult>& results,
                   const std::function<std::string(int)>& piece) {
  fs::path target(dir);
  while (!target.empty() && target.filename().empty()) target = target.parent_path();
  if (target.empty()) throw InputError(dir + ": not a folder name");
  std::error_code ec;
  if (fs::exists(target, ec) && !fs::is_directory(target, ec))
    throw InputError(dir + ": exists and is not a folder");
  const fs::path parent = fs::absolute(target).parent_path();
  fs::create_directories(parent, ec);
  if (ec) throw InputError(parent.string() + ": cannot create (" + ec.message() + ")");
  std::random_device rd;
  const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(rd());
  const fs::path tmp = parent / ("." + target.filename().string() + ".tmp-" + tag);
  try {
    fs::create_directories(tmp / "heads", ec);
    if (ec) throw InputError(tmp.string() + ": cannot create (" + ec.message() + ")");
    ojson config;
    config["model_name"] = info.modelName;
    config["dataset_name"] = info.datasetName;
    ojson heads = ojson::array();
    for (const HeadResult& r : results) heads.push_back({r.layer, r.head});
    config["heads"] = std::move(heads);
    config["n_layers"] = info.layers;
    config["n_heads"] = info.heads;
    config["n_intervals"] = info.intervals;
    config["metrics"] = headMetricNames();
    ojson desc = ojson::object();
    for (const std::string& m : headMetricNames()) desc[m] = headMetricDescription(m);
    config["metric_descriptions"] = std::move(desc);
    config["head_data_pattern"] = "L{layer}H{head}.json";
    config["has_umap"] = false;
    config["umap_heads"] = ojson::array();
    config["custom_plots"] = ojson::array();
    config["custom_tables"] = ojson::array();
    config["statistics_display"] = ojson::array(
        {{{"key", "n_samples"}, {"label", "kept sequences"}},
         {{"key", "mean_max_activation"}, {"label", "mean max activation"}}});
    config["pipeline_config"] = ojson::parse(info.pipelineConfigJson);
    writeText(tmp / "config.json", config.dump(1));

    ojson scatter = ojson::array();
    for (const HeadResult& r : results) {
      ojson o;
      o["layer"] = r.layer;
      o["head"] = r.head;
      for (std::size_t m = 0; m < headMetricNames().size(); ++m)
        o[headMetricNames()[m]] = std::isfinite(r.metrics[m]) ? ojson(round4(r.metrics[m])) : ojson(nullptr);
      scatter.push_back(std::move(o));
    }
    writeText(tmp / "scatter_data.json", scatter.dump(1));

    for (const HeadResult& r : results) {
      const std::string name = "L" + std::to_string(r.layer) + "H" + std::to_string(r.head) + ".json";
      writeText(tmp / "heads" / name, headJson(r, piece).dump());
    }

    // Into place: an existing tree is moved aside first, and removed once the new one is in.
    fs::path old;
    if (fs::exists(target, ec)) {
      old = parent / ("." + target.filename().string() + ".old-" + tag);
      fs::rename(target, old, ec);
      if (ec) throw InputError(dir + ": cannot replace (" + ec.message() + ")");
    }
    fs::rename(tmp, target, ec);
    if (ec) {
      if (!old.empty()) fs::rename(old, target);
      throw InputError(dir + ": cannot write (" + ec.message() + ")");
    }
    if (!old.empty()) fs::remove_all(old, ec);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

namespace {

json readJsonFile(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path.string() + ": missing (not a head finder tree)");
  const std::string text = readWhole(path.string());
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (const std::size_t c = what.find("] "); c != std::string::npos) what = what.substr(c + 2);
    throw InputError(path.string() + ": malformed JSON (" + what + ")");
  }
}

// scatter_data.json's list of heads (a list, or an object holding one).
const json& scatterList(const json& j, const fs::path& path) {
  if (j.is_array()) return j;
  if (j.is_object())
    for (const char* key : {"heads", "data", "points", "scatter"})
      if (auto it = j.find(key); it != j.end() && it->is_array()) return *it;
  throw InputError(path.string() + ": not a list of heads");
}

}  // namespace

std::vector<std::string> treeMetrics(const std::string& dir) {
  const fs::path root(dir);
  const json config = readJsonFile(root / "config.json");
  if (!config.is_object()) throw InputError((root / "config.json").string() + ": not a JSON object");
  std::vector<std::string> out;
  if (auto it = config.find("metrics"); it != config.end() && it->is_array()) {
    for (const json& m : *it) {
      if (m.is_string()) out.push_back(m.get<std::string>());
      else if (m.is_object() && m.contains("name") && m["name"].is_string())
        out.push_back(m["name"].get<std::string>());
    }
  }
  if (out.empty()) {
    const fs::path sp = root / "scatter_data.json";
    const json scatter = readJsonFile(sp);
    const json& list = scatterList(scatter, sp);
    if (!list.empty() && list[0].is_object())
      for (const auto& [key, v] : list[0].items())
        if (key != "layer" && key != "head" && (v.is_number() || v.is_null())) out.push_back(key);
  }
  return out;
}

std::vector<HeadScore> readTreeScores(const std::string& dir, const std::string& metric) {
  const fs::path path = fs::path(dir) / "scatter_data.json";
  const json scatter = readJsonFile(path);
  const json& list = scatterList(scatter, path);
  std::vector<HeadScore> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& o = list[i];
    const std::string where = path.string() + ": entry " + std::to_string(i) + ": ";
    if (!o.is_object()) throw InputError(where + "not an object");
    HeadScore s;
    for (const char* key : {"layer", "head"}) {
      const auto it = o.find(key);
      if (it == o.end() || !it->is_number_integer())
        throw InputError(where + "no integer '" + key + "'");
      (std::string(key) == "layer" ? s.layer : s.head) = it->get<int>();
    }
    const auto it = o.find(metric);
    if (it == o.end() || it->is_null()) {
      s.value = kNaN;
    } else if (it->is_number()) {
      s.value = it->get<double>();
    } else {
      throw InputError(where + "'" + metric + "' is not a number");
    }
    out.push_back(s);
  }
  return out;
}

void rankHeadScores(std::vector<HeadScore>& scores) {
  std::stable_sort(scores.begin(), scores.end(), [](const HeadScore& a, const HeadScore& b) {
    const bool an = std::isnan(a.value), bn = std::isnan(b.value);
    if (an || bn) return !an && bn;
    return a.value > b.value;
  });
}

std::string headScoreLines(const std::vector<HeadScore>& scores) {
  std::string out;
  char buf[96];
  for (const HeadScore& s : scores) {
    if (std::isnan(s.value)) {
      std::snprintf(buf, sizeof buf, "%d\t%d\tnan\n", s.layer, s.head);
    } else {
      std::snprintf(buf, sizeof buf, "%d\t%d\t%.6f\n", s.layer, s.head, s.value);
    }
    out += buf;
  }
  return out;
}

}  // namespace attnviz
