// The head finder's tree read back (the GUI's Head finder panel), the ranks and the nearest
// heads in metric space, and a run over a corpus shared by `attnviz heads` and the GUI's worker.
#include "attnviz/model/head_finder.h"
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/chat_template.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace attnviz {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

json parseJsonText(const std::string& text, const std::string& path) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (const std::size_t c = what.find("] "); c != std::string::npos) what = what.substr(c + 2);
    throw InputError(path + ": malformed JSON (" + what + ")");
  }
}

json readJson(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw InputError(path.string() + ": missing (not a head finder tree)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path.string() + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) throw InputError(path.string() + ": read error");
  return parseJsonText(s.str(), path.string());
}

// A number, or NaN for null; anything else is refused naming `what`.
double numberOr(const json& v, const std::string& where, const std::string& what) {
  if (v.is_null()) return kNaN;
  if (!v.is_number()) throw InputError(where + what + " is not a number");
  return v.get<double>();
}

std::vector<double> numbers(const json& o, const char* key, const std::string& where) {
  std::vector<double> out;
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return out;
  if (!it->is_array()) throw InputError(where + "'" + key + "' is not a list");
  out.reserve(it->size());
  for (const json& v : *it) out.push_back(numberOr(v, where, std::string("an entry of '") + key + "'"));
  return out;
}

int integer(const json& o, const char* key, const std::string& where, int lo, int hi) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer())
    throw InputError(where + "no integer '" + key + "'");
  const long long v = it->get<long long>();
  if (v < lo || v > hi)
    throw InputError(where + "'" + key + "' " + std::to_string(v) + " is out of range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return int(v);
}

std::vector<HeadTokenWeight> topTokens(const json& o, const char* key, const std::string& where) {
  std::vector<HeadTokenWeight> out;
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return out;
  if (!it->is_array()) throw InputError(where + "'" + key + "' is not a list");
  for (const json& e : *it) {
    if (!e.is_object() || !e.contains("token") || !e["token"].is_string())
      throw InputError(where + "'" + key + "': an entry without a string 'token'");
    HeadTokenWeight t;
    t.token = e["token"].get<std::string>();
    t.weight = e.contains("weight") ? numberOr(e["weight"], where, "a weight of '" + std::string(key) + "'") : kNaN;
    out.push_back(std::move(t));
  }
  return out;
}

void histogram(const json& o, const char* key, std::vector<double>& edges,
               std::vector<double>& values, const std::string& where) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return;
  if (!it->is_object()) throw InputError(where + "'" + key + "' is not an object");
  const std::string w = where + key + ": ";
  edges = numbers(*it, "bin_edges", w);
  values = numbers(*it, "bin_values", w);
  if (!edges.empty() && edges.size() != values.size() + 1)
    throw InputError(w + std::to_string(edges.size()) + " bin edges for " +
                     std::to_string(values.size()) + " bins");
}

}  // namespace

HeadTree readHeadTree(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw InputError(dir + ": not a folder (a head finder tree)");
  HeadTree t;
  t.dir = dir;
  const fs::path cp = root / "config.json";
  const json config = readJson(cp);
  if (!config.is_object()) throw InputError(cp.string() + ": not a JSON object");
  auto str = [&](const char* key) {
    const auto it = config.find(key);
    return it != config.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  t.modelName = str("model_name");
  t.datasetName = str("dataset_name");
  if (const std::string p = str("head_data_pattern"); !p.empty()) {
    if (p.find('/') != std::string::npos || p.find("..") != std::string::npos)
      throw InputError(cp.string() + ": head_data_pattern '" + p + "' leaves the heads folder");
    t.headDataPattern = p;
  }
  auto count = [&](const char* key) {
    const auto it = config.find(key);
    if (it == config.end()) return 0;
    if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > 1 << 20)
      throw InputError(cp.string() + ": '" + key + "' is not a count");
    return int(it->get<long long>());
  };
  t.layers = count("n_layers");
  t.heads = count("n_heads");
  t.intervals = count("n_intervals");
  if (auto it = config.find("pipeline_config"); it != config.end() && it->is_object())
    t.pipelineConfigJson = it->dump();
  t.metrics = treeMetrics(dir);  // config.json's list, else scatter_data.json's numbers
  if (t.metrics.empty()) throw InputError(cp.string() + ": no metrics (config.json's 'metrics' and scatter_data.json name none)");

  const fs::path sp = root / "scatter_data.json";
  const json scatter = readJson(sp);
  const json* list = scatter.is_array() ? &scatter : nullptr;
  if (scatter.is_object())
    for (const char* key : {"heads", "data", "points", "scatter"})
      if (auto it = scatter.find(key); !list && it != scatter.end() && it->is_array()) list = &*it;
  if (!list) throw InputError(sp.string() + ": not a list of heads");
  if (list->empty()) throw InputError(sp.string() + ": no heads");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& o = (*list)[i];
    const std::string where = sp.string() + ": entry " + std::to_string(i) + ": ";
    if (!o.is_object()) throw InputError(where + "not an object");
    HeadTreeRow r;
    r.layer = integer(o, "layer", where, 0, 1 << 16);
    r.head = integer(o, "head", where, 0, 1 << 16);
    for (const std::string& m : t.metrics) {
      const auto it = o.find(m);
      r.values.push_back(it == o.end() ? kNaN : numberOr(*it, where, "'" + m + "'"));
    }
    t.layers = std::max(t.layers, r.layer + 1);
    t.heads = std::max(t.heads, r.head + 1);
    t.rows.push_back(std::move(r));
  }
  return t;
}

std::string headFilePath(const HeadTree& tree, int layer, int head) {
  std::string name = tree.headDataPattern;
  for (const auto& [key, v] : {std::pair<std::string, int>{"{layer}", layer}, {"{head}", head}})
    for (std::size_t at; (at = name.find(key)) != std::string::npos;)
      name.replace(at, key.size(), std::to_string(v));
  return (fs::path(tree.dir) / "heads" / name).string();
}

HeadDashboardData parseHeadFile(const std::string& text, const std::string& path) {
  const json j = parseJsonText(text, path);
  const std::string where = path + ": ";
  if (!j.is_object()) throw InputError(where + "not a JSON object");
  HeadDashboardData d;
  if (j.contains("layer") && j["layer"].is_number_integer()) d.layer = j["layer"].get<int>();
  if (j.contains("head") && j["head"].is_number_integer()) d.head = j["head"].get<int>();
  if (auto it = j.find("sequences"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) throw InputError(where + "'sequences' is not a list");
    for (std::size_t n = 0; n < it->size(); ++n) {
      const json& o = (*it)[n];
      const std::string w = where + "sequence " + std::to_string(n) + ": ";
      if (!o.is_object()) throw InputError(w + "not an object");
      HeadTreeSequence q;
      q.sequenceId = integer(o, "sequence_id", w, 0, 1 << 30);
      q.interval = o.contains("interval") ? integer(o, "interval", w, 0, 1 << 16) : 0;
      const auto tk = o.find("tokens");
      if (tk == o.end() || !tk->is_array()) throw InputError(w + "no list 'tokens'");
      for (const json& t : *tk) {
        if (!t.is_string()) throw InputError(w + "a token that is not a string");
        q.tokens.push_back(t.get<std::string>());
      }
      q.seqLen = o.contains("seq_len") ? integer(o, "seq_len", w, 1, 1 << 20) : int(q.tokens.size());
      if (q.seqLen != int(q.tokens.size()))
        throw InputError(w + "seq_len " + std::to_string(q.seqLen) + " but " +
                         std::to_string(q.tokens.size()) + " tokens");
      q.maxActivation = o.contains("max_activation") ? numberOr(o["max_activation"], w, "'max_activation'") : kNaN;
      if (auto ti = o.find("token_ids"); ti != o.end() && !ti->is_null()) {
        if (!ti->is_array() || ti->size() != q.tokens.size())
          throw InputError(w + "'token_ids' is not a list of one id a token");
        for (const json& v : *ti) {
          if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1LL << 31) - 1)
            throw InputError(w + "'token_ids': an entry that is not an id");
          q.ids.push_back(int(v.get<long long>()));
        }
      }
      const auto ai = o.find("attention_indices");
      const auto av = o.find("attention_values");
      if (ai == o.end() || !ai->is_array() || av == o.end() || !av->is_array())
        throw InputError(w + "no lists 'attention_indices' and 'attention_values'");
      if (ai->size() != av->size())
        throw InputError(w + std::to_string(ai->size()) + " attention indices but " +
                         std::to_string(av->size()) + " values");
      const long long cells = (long long)q.seqLen * q.seqLen;
      for (std::size_t e = 0; e < ai->size(); ++e) {
        const json& ix = (*ai)[e];
        if (!ix.is_number_integer() || ix.get<long long>() < 0 || ix.get<long long>() >= cells)
          throw InputError(w + "attention index " + ix.dump() + " is outside the " +
                           std::to_string(q.seqLen) + " x " + std::to_string(q.seqLen) + " matrix");
        q.indices.push_back(ix.get<long long>());
        const double v = numberOr((*av)[e], w, "an attention value");
        q.values.push_back(v);
      }
      d.sequences.push_back(std::move(q));
    }
  }
  histogram(j, "qk_distance_histogram", d.qkEdges, d.qkValues, where);
  histogram(j, "histogram", d.histEdges, d.histValues, where);
  d.topQuery = topTokens(j, "top_query_tokens", where);
  d.topKey = topTokens(j, "top_key_tokens", where);
  if (auto it = j.find("statistics"); it != j.end() && it->is_object()) {
    if (auto n = it->find("n_samples"); n != it->end() && n->is_number_integer())
      d.nSamples = n->get<long long>();
    if (auto m = it->find("mean_max_activation"); m != it->end())
      d.meanMaxActivation = numberOr(*m, where, "statistics.mean_max_activation");
  }
  return d;
}

HeadDashboardData readHeadFile(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw InputError(path + ": missing (not a head file)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) throw InputError(path + ": read error");
  return parseHeadFile(s.str(), path);
}

int headRank(const HeadTree& tree, std::size_t row, std::size_t metric) {
  if (row >= tree.rows.size() || metric >= tree.metrics.size()) return 0;
  const double v = tree.rows[row].values[metric];
  if (std::isnan(v)) return 0;
  int rank = 1;
  for (const HeadTreeRow& r : tree.rows)
    if (!std::isnan(r.values[metric]) && r.values[metric] > v) ++rank;
  return rank;
}

std::vector<NearHead> nearestHeads(const HeadTree& tree, std::size_t row, int n) {
  std::vector<NearHead> out;
  if (row >= tree.rows.size() || n <= 0) return out;
  const std::size_t M = tree.metrics.size();
  std::vector<double> mean(M, 0.0), sd(M, 0.0);
  for (std::size_t m = 0; m < M; ++m) {
    double s = 0, s2 = 0;
    long long c = 0;
    for (const HeadTreeRow& r : tree.rows)
      if (std::isfinite(r.values[m])) s += r.values[m], ++c;
    if (c < 2) continue;
    mean[m] = s / double(c);
    for (const HeadTreeRow& r : tree.rows)
      if (std::isfinite(r.values[m])) s2 += (r.values[m] - mean[m]) * (r.values[m] - mean[m]);
    sd[m] = std::sqrt(s2 / double(c));
  }
  const HeadTreeRow& me = tree.rows[row];
  for (std::size_t k = 0; k < tree.rows.size(); ++k) {
    if (k == row) continue;
    const HeadTreeRow& r = tree.rows[k];
    double d2 = 0;
    int used = 0;
    for (std::size_t m = 0; m < M; ++m) {
      if (!(sd[m] > 0) || !std::isfinite(me.values[m]) || !std::isfinite(r.values[m])) continue;
      const double d = (me.values[m] - r.values[m]) / sd[m];
      d2 += d * d;
      ++used;
    }
    if (used == 0) continue;
    out.push_back({k, std::sqrt(d2)});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const NearHead& a, const NearHead& b) { return a.distance < b.distance; });
  if (out.size() > std::size_t(n)) out.resize(std::size_t(n));
  return out;
}

std::vector<std::vector<int>> headFinderSequences(const Model& model,
                                                  const std::vector<std::string>& docs,
                                                  const std::string& corpus, int seqLen,
                                                  long long maxSequences, bool chat) {
  const ModelConfig& c = model.config();
  std::optional<ChatTemplate> chatTemplate;
  if (chat) {
    chatTemplate = loadChatTemplate(model.files());
    (void)chatFormatOf(*chatTemplate);  // an unknown template is refused before any pass
  }
  const int cut = c.nPositions > 0 ? std::min(seqLen, c.nPositions) : seqLen;
  std::vector<std::vector<int>> seqs;
  for (std::size_t d = 0; d < docs.size(); ++d) {
    if (maxSequences > 0 && (long long)seqs.size() >= maxSequences) break;
    std::vector<int> ids;
    try {
      ids = chatTemplate
                ? encodeChat(model.tokenizer(), *chatTemplate, ChatTurns{std::nullopt, docs[d]})
                : model.tokenizer().encode(docs[d], true);
    } catch (const InputError& e) {
      throw InputError(corpus + ": document " + std::to_string(d + 1) + ": " + e.what());
    }
    if (ids.size() > std::size_t(cut)) ids.resize(std::size_t(cut));
    if (ids.size() < 2) continue;
    seqs.push_back(std::move(ids));
  }
  if (seqs.empty())
    throw InputError(corpus + ": no document of at least 2 tokens (" +
                     std::to_string(docs.size()) + " documents read)");
  return seqs;
}

std::vector<HeadResult> runHeadFinder(const Model& model,
                                      const std::vector<std::vector<int>>& sequences,
                                      const HeadFinderSettings& settings,
                                      const std::function<void(long long, long long)>& progress,
                                      int* warmup) {
  const ModelConfig& c = model.config();
  const long long N = (long long)sequences.size();
  HeadFinder finder(c.nLayer, c.nHead, settings, N);
  // The caller's PassProgress (its cancel) when there is one; each layer's weights folded in.
  PassProgress own;
  PassProgress* outer = PassProgress::current();
  PassProgress& p = outer ? *outer : own;
  auto previous = p.onWeights;
  p.onWeights = [&](int layer, const Tensor3& w) { finder.addLayer(layer, w); };
  struct Restore {
    PassProgress& p;
    std::function<void(int, const Tensor3&)> f;
    ~Restore() { p.onWeights = std::move(f); }
  } restore{p, previous};
  PassProgress::Scope scope(&p);
  for (long long i = 0; i < N; ++i) {
    if (progress) progress(i, N);
    if (p.cancel) throw PassCancelled();
    finder.beginSequence(sequences[std::size_t(i)]);
    (void)model.forward(sequences[std::size_t(i)], {}, Capture::none());
    finder.endSequence();
  }
  if (progress) progress(N, N);
  if (warmup) *warmup = finder.warmup();
  return finder.finish();
}

}  // namespace attnviz
