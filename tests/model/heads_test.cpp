// `attnviz heads` (docs/head-finder.md) through the real binary, against heads_reference.py: a
// float64 torch reference written from the contract, on a random-init LLaMA (GQA, no BOS) and a
// random-init BERT it builds at test time, with corpora in the three formats. Every metric of
// every head, the warm-up and its boundaries, the max-activation histogram, the top interval's
// kept sequences and their sparse entries, the tree's files and fields, `--top`'s lines, ranking
// a tree in HeadVis's layout, and the refusals.
#include "model_test_util.h"
#include "reference_script.h"

#include "attnviz/model/head_finder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

namespace attnviz::testing {
namespace {

using nlohmann::json;

const std::vector<std::string> kMetrics{"self_attention_score", "prev_token_score",
                                        "pattern_entropy",      "qk_distance",
                                        "qk_distance_variance", "induction_score",
                                        "first_token_share"};
constexpr double kMetricTol = 1e-5;

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

json readJson(const fs::path& p) { return json::parse(slurp(p.string())); }

// The command line of a reference case.
std::vector<std::string> caseArgs(const json& c, const fs::path& root, const fs::path& out) {
  const json& o = c["options"];
  std::vector<std::string> a{"heads",
                             "--model", (root / c["model"].get<std::string>()).string(),
                             "--corpus", (root / c["corpus"].get<std::string>()).string(),
                             "--out", out.string(),
                             "--seq-len", std::to_string(c["seq_len"].get<int>()),
                             "--intervals", std::to_string(o["intervals"].get<int>()),
                             "--samples", std::to_string(o["samples"].get<int>()),
                             "--top-samples", std::to_string(o["top_samples"].get<int>()),
                             "--sparse-topk", std::to_string(o["sparse_topk"].get<int>()),
                             "--sparse-threshold", o["sparse_threshold"].dump(),
                             "--induction-threshold", o["induction_threshold"].dump(),
                             "--seed", std::to_string(o["seed"].get<int>())};
  if (c.contains("field")) a.insert(a.end(), {"--field", c["field"].get<std::string>()});
  if (c.contains("sequences")) a.insert(a.end(), {"--sequences", std::to_string(c["sequences"].get<int>())});
  return a;
}

class Heads : public ::testing::Test {
 protected:
  struct Run {
    CliRun cli;
    fs::path tree;
  };

  static void SetUpTestSuite() {
    ref_ = std::make_unique<ReferenceScript>("heads_reference.py");
    if (!ref_->ok) return;
    // The decoder's run, shared by the tests that read its tree (with --top).
    const json& c = ref_->find("decoder");
    std::vector<std::string> args = caseArgs(c, ref_->tmp.path, ref_->path("tree_decoder"));
    args.insert(args.end(), {"--top", c["top_metric"].get<std::string>()});
    decoder_.tree = ref_->path("tree_decoder");
    decoder_.cli = runBinary(args, ref_->tmp.path);
  }
  static void TearDownTestSuite() { ref_.reset(); }
  void SetUp() override { ASSERT_TRUE(ref_ && ref_->ok) << "heads_reference.py failed"; }

  static const json& refCase(const std::string& name) { return ref_->find(name); }
  static fs::path root() { return ref_->tmp.path; }

  // A case's own run (the decoder's is shared).
  static Run runCase(const std::string& name) {
    if (name == "decoder") return decoder_;
    Run r;
    r.tree = ref_->path("tree_" + name);
    r.cli = runBinary(caseArgs(refCase(name), root(), r.tree), root());
    return r;
  }

  // Every metric of every head (the head files' unrounded values and mean_max_activation), the
  // warm-up, the boundaries and the histogram against the reference; returns the largest error.
  static double checkMetrics(const std::string& name, const Run& run) {
    const json& c = refCase(name);
    EXPECT_EQ(run.cli.exitCode, 0) << run.cli.err;
    const json config = readJson(run.tree / "config.json");
    EXPECT_EQ(config["pipeline_config"]["warmup"], c["W"]) << name;
    EXPECT_EQ(config["pipeline_config"]["sequences"], c["N"]) << name;
    double worst = 0.0;
    for (const json& h : c["heads"]) {
      const std::string file = "L" + h["layer"].dump() + "H" + h["head"].dump() + ".json";
      const json got = readJson(run.tree / "heads" / file);
      for (const std::string& m : kMetrics) {
        const json& want = h["metrics"][m];
        if (want.is_null()) {
          EXPECT_TRUE(got["metrics"][m].is_null()) << name << " " << file << " " << m;
          continue;
        }
        const double e = std::fabs(got["metrics"][m].get<double>() - want.get<double>());
        worst = std::max(worst, e);
        EXPECT_LE(e, kMetricTol) << name << " " << file << " " << m;
      }
      const double em = std::fabs(got["statistics"]["mean_max_activation"].get<double>() -
                                  h["mean_max_activation"].get<double>());
      worst = std::max(worst, em);
      EXPECT_LE(em, kMetricTol) << name << " " << file << " mean_max_activation";
      EXPECT_EQ(got["histogram"]["bin_values"], h["histogram"]) << name << " " << file;
      const json& gb = got["interval_boundaries"];
      EXPECT_EQ(gb.size(), h["boundaries"].size()) << name << " " << file;
      for (std::size_t k = 0; k < gb.size() && k < h["boundaries"].size(); ++k) {
        const double e = std::fabs(gb[k].get<double>() - h["boundaries"][k].get<double>());
        worst = std::max(worst, e);
        EXPECT_LE(e, kMetricTol) << name << " " << file << " boundary " << k;
      }
    }
    return worst;
  }

  // The kept sequences: the top interval's equal the reference's (ids, order, entries); the
  // others at most --samples each, after the warm-up, in the interval their max activation
  // falls in; histograms and top tokens consistent with the entries.
  static void checkKept(const std::string& name, const Run& run, bool tokens) {
    const json& c = refCase(name);
    const int K = c["options"]["intervals"].get<int>();
    const int samples = c["options"]["samples"].get<int>();
    const int W = c["W"].get<int>();
    for (const json& h : c["heads"]) {
      const std::string file = "L" + h["layer"].dump() + "H" + h["head"].dump() + ".json";
      const std::string what = name + " " + file;
      const json got = readJson(run.tree / "heads" / file);
      const json& seqs = got["sequences"];
      std::vector<json> top;
      std::map<int, int> perInterval;
      int lastInterval = 0;
      std::vector<double> bounds;
      for (const json& b : got["interval_boundaries"]) bounds.push_back(b.get<double>());
      for (const json& s : seqs) {
        for (const char* key : {"sequence_id", "interval", "tokens", "attention_indices",
                                "attention_values", "seq_len", "max_activation"})
          EXPECT_TRUE(s.contains(key)) << what << ": no " << key;
        const int iv = s["interval"].get<int>();
        EXPECT_GE(iv, lastInterval) << what << ": sequences not by interval";
        lastInterval = iv;
        EXPECT_GE(s["sequence_id"].get<int>(), W) << what << ": a warm-up sequence kept";
        const double mx = s["max_activation"].get<double>();
        const int expect = std::min(
            int(std::upper_bound(bounds.begin(), bounds.end(), mx) - bounds.begin()), K - 1);
        EXPECT_EQ(iv, expect + 1) << what << ": sequence " << s["sequence_id"];
        EXPECT_EQ(s["tokens"].size(), s["seq_len"].get<std::size_t>()) << what;
        if (iv == K) top.push_back(s);
        else ++perInterval[iv];
      }
      for (const auto& [iv, n] : perInterval) EXPECT_LE(n, samples) << what << " interval " << iv;
      EXPECT_EQ(got["statistics"]["n_samples"].get<std::size_t>(), seqs.size()) << what;

      const json& want = h["top"];
      ASSERT_EQ(top.size(), want.size()) << what << ": top interval";
      for (std::size_t i = 0; i < top.size(); ++i) {
        const json& g = top[i];
        const json& w = want[i];
        EXPECT_EQ(g["sequence_id"], w["sequence_id"]) << what << " top " << i;
        EXPECT_EQ(g["seq_len"], w["seq_len"]) << what << " top " << i;
        EXPECT_NEAR(g["max_activation"].get<double>(), w["max_activation"].get<double>(), 1e-5)
            << what << " top " << i;
        if (tokens) {
          EXPECT_EQ(g["tokens"], w["tokens"]) << what << " top " << i;
        }
        EXPECT_EQ(g["attention_indices"], w["attention_indices"]) << what << " top " << i;
        const json& gv = g["attention_values"];
        ASSERT_EQ(gv.size(), w["raw_values"].size()) << what << " top " << i;
        for (std::size_t e = 0; e < gv.size(); ++e) {
          const double v = gv[e].get<double>(), raw = w["raw_values"][e].get<double>();
          // Rounded to 4 decimals, from a weight within float32's error of the reference's.
          EXPECT_NEAR(v * 1e4, std::nearbyint(v * 1e4), 1e-6) << what << " entry " << e;
          EXPECT_LE(std::fabs(v - raw), 5e-5 + 1e-6) << what << " entry " << e;
          EXPECT_NEAR(v, w["attention_values"][e].get<double>(), 1e-4 + 1e-9) << what;
        }
      }

      // qk_distance_histogram and the top tokens from the file's own entries.
      const json& qh = got["qk_distance_histogram"];
      const std::vector<long long> edges{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
      EXPECT_EQ(qh["bin_edges"], json(edges)) << what;
      std::vector<double> bins(edges.size() - 1, 0.0);
      std::map<std::string, double> qTok, kTok;
      for (const json& s : seqs) {
        const long long T = s["seq_len"].get<long long>();
        for (std::size_t e = 0; e < s["attention_indices"].size(); ++e) {
          const long long idx = s["attention_indices"][e].get<long long>();
          const long long q = idx / T, k = idx % T, d = std::llabs(q - k);
          const double v = s["attention_values"][e].get<double>();
          std::size_t b = std::size_t(std::upper_bound(edges.begin(), edges.end(), d) - edges.begin()) - 1;
          bins[std::min(b, bins.size() - 1)] += v;
          qTok[s["tokens"][std::size_t(q)].get<std::string>()] += v;
          kTok[s["tokens"][std::size_t(k)].get<std::string>()] += v;
        }
      }
      ASSERT_EQ(qh["bin_values"].size(), bins.size()) << what;
      for (std::size_t b = 0; b < bins.size(); ++b)
        EXPECT_NEAR(qh["bin_values"][b].get<double>(), bins[b], 1e-4) << what << " bin " << b;
      for (const auto& [key, sums] : {std::pair{"top_query_tokens", &qTok}, std::pair{"top_key_tokens", &kTok}}) {
        const json& list = got[key];
        EXPECT_EQ(list.size(), std::min<std::size_t>(50, sums->size())) << what << " " << key;
        double prev = 1e300;
        for (const json& t : list) {
          const double wgt = t["weight"].get<double>();
          EXPECT_LE(wgt, prev + 1e-12) << what << " " << key << ": not largest first";
          prev = wgt;
          EXPECT_NEAR(wgt, (*sums)[t["token"].get<std::string>()], 1e-4) << what << " " << key;
        }
      }
      const json& hist = got["histogram"];
      ASSERT_EQ(hist["bin_edges"].size(), 51u) << what;
      EXPECT_DOUBLE_EQ(hist["bin_edges"][0].get<double>(), 0.0);
      EXPECT_DOUBLE_EQ(hist["bin_edges"][25].get<double>(), 0.5);
      EXPECT_DOUBLE_EQ(hist["bin_edges"][50].get<double>(), 1.0);
      long long counted = 0;
      for (const json& v : hist["bin_values"]) counted += v.get<long long>();
      EXPECT_EQ(counted, c["N"].get<long long>()) << what;
    }
  }

  static std::unique_ptr<ReferenceScript> ref_;
  static Run decoder_;
};

std::unique_ptr<ReferenceScript> Heads::ref_;
Heads::Run Heads::decoder_;

TEST_F(Heads, BoundaryIndexRoundsHalfToEvenAsPython) {
  const json& c = refCase("boundary_index");
  int halves = 0;
  for (const json& row : c["table"]) {
    const int k = row[0], W = row[1], K = row[2];
    EXPECT_EQ(boundaryIndex(k, W, K), row[3].get<int>()) << "k=" << k << " W=" << W << " K=" << K;
    halves += (2 * k * W) % K == 0 && (k * W) % K != 0;
  }
  EXPECT_GT(halves, 10) << "the table holds exact halves";
  EXPECT_EQ(boundaryIndex(1, 50, 4), 12);  // 12.5 -> 12
  EXPECT_EQ(boundaryIndex(3, 50, 4), 38);  // 37.5 -> 38
  for (const json& row : c["warmup"])
    EXPECT_EQ(headFinderWarmup(row[0].get<long long>()), row[1].get<int>()) << "N=" << row[0];
}

TEST_F(Heads, DecoderMetricsMatchTheReference) {
  const double worst = checkMetrics("decoder", decoder_);
  std::cout << "[ heads    ] decoder: largest metric error " << worst << "\n";
}

TEST_F(Heads, DecoderTopIntervalSequencesAndSparseEntries) {
  ASSERT_EQ(decoder_.cli.exitCode, 0) << decoder_.cli.err;
  checkKept("decoder", decoder_, true);
}

TEST_F(Heads, EncoderMetricsAndKeptSequences) {
  const Run run = runCase("encoder");
  ASSERT_EQ(run.cli.exitCode, 0) << run.cli.err;
  const double worst = checkMetrics("encoder", run);
  std::cout << "[ heads    ] encoder: largest metric error " << worst << "\n";
  checkKept("encoder", run, false);
  // --top self_attention_score (the encoder run did not ask): from the tree.
  const CliRun top = runBinary({"heads", "--tree", run.tree.string(), "--top",
                                "self_attention_score"}, root());
  ASSERT_EQ(top.exitCode, 0) << top.err;
  const std::vector<std::string> lines = splitLines(top.out);
  EXPECT_EQ(lines.size(), refCase("encoder")["heads"].size());
}

TEST_F(Heads, JsonlAndFolderCorporaReadTheSameDocuments) {
  for (const char* name : {"decoder_jsonl", "decoder_dir"}) {
    const Run run = runCase(name);
    ASSERT_EQ(run.cli.exitCode, 0) << name << ": " << run.cli.err;
    checkMetrics(name, run);
    // 12 sequences end inside the warm-up: nothing is sampled.
    for (const auto& e : fs::directory_iterator(run.tree / "heads")) {
      const json h = readJson(e.path());
      EXPECT_TRUE(h["sequences"].empty()) << name << " " << e.path();
      EXPECT_EQ(h["statistics"]["n_samples"], 0) << name;
    }
    EXPECT_EQ(readJson(run.tree / "config.json")["dataset_name"], refCase(name)["corpus"]);
  }
}

TEST_F(Heads, TheSeedFixesTheReservoirSamples) {
  ASSERT_EQ(decoder_.cli.exitCode, 0) << decoder_.cli.err;
  const json& c = refCase("decoder");
  // The decoder's own options again: the same kept sequences, head by head.
  const fs::path again = ref_->path("tree_decoder_again");
  const CliRun same = runBinary(caseArgs(c, root(), again), root());
  ASSERT_EQ(same.exitCode, 0) << same.err;
  // Another seed: the top interval is the same, the reservoirs (somewhere) are not.
  std::vector<std::string> args = caseArgs(c, root(), ref_->path("tree_decoder_seed"));
  const auto seedAt = std::find(args.begin(), args.end(), "--seed") + 1;
  *seedAt = std::to_string(c["options"]["seed"].get<int>() + 1);
  const CliRun other = runBinary(args, root());
  ASSERT_EQ(other.exitCode, 0) << other.err;
  const int K = c["options"]["intervals"].get<int>();
  auto ids = [&](const fs::path& tree, const std::string& file, bool top) {
    std::vector<int> out;
    const json head = readJson(tree / "heads" / file);
    for (const json& s : head["sequences"])
      if ((s["interval"].get<int>() == K) == top) out.push_back(s["sequence_id"].get<int>());
    return out;
  };
  int differing = 0;
  for (const json& h : c["heads"]) {
    const std::string file = "L" + h["layer"].dump() + "H" + h["head"].dump() + ".json";
    // (The same ids, not the same bytes: a pass may differ from the last in float32's last bit.)
    EXPECT_EQ(ids(again, file, false), ids(decoder_.tree, file, false)) << file;
    EXPECT_EQ(ids(again, file, true), ids(decoder_.tree, file, true)) << file;
    const fs::path seeded = ref_->path("tree_decoder_seed");
    EXPECT_EQ(ids(seeded, file, true), ids(decoder_.tree, file, true)) << file;
    differing += ids(seeded, file, false) != ids(decoder_.tree, file, false);
    EXPECT_FALSE(ids(seeded, file, true).empty()) << file;
  }
  EXPECT_GT(differing, 0) << "--seed changed no reservoir";
}

TEST_F(Heads, ScatterDataHoldsEveryHeadRounded) {
  ASSERT_EQ(decoder_.cli.exitCode, 0) << decoder_.cli.err;
  const json scatter = readJson(decoder_.tree / "scatter_data.json");
  const json& heads = refCase("decoder")["heads"];
  ASSERT_TRUE(scatter.is_array());
  ASSERT_EQ(scatter.size(), heads.size());
  for (std::size_t i = 0; i < scatter.size(); ++i) {
    const json& s = scatter[i];
    const json& h = heads[i];
    EXPECT_EQ(s["layer"], h["layer"]) << "layer then head order";
    EXPECT_EQ(s["head"], h["head"]) << "layer then head order";
    std::set<std::string> keys;
    for (const auto& [k, v] : s.items()) keys.insert(k);
    std::set<std::string> want{"layer", "head"};
    want.insert(kMetrics.begin(), kMetrics.end());
    EXPECT_EQ(keys, want);
    for (const std::string& m : kMetrics) {
      const double v = s[m].get<double>(), r = h["metrics"][m].get<double>();
      EXPECT_NEAR(v * 1e4, std::nearbyint(v * 1e4), 1e-6) << m << ": not 4 decimals";
      EXPECT_LE(std::fabs(v - r), 5e-5 + kMetricTol) << m << " of head " << i;
    }
  }
}

TEST_F(Heads, ConfigJsonFields) {
  ASSERT_EQ(decoder_.cli.exitCode, 0) << decoder_.cli.err;
  const json c = readJson(decoder_.tree / "config.json");
  const json& r = refCase("decoder");
  EXPECT_EQ(c["model_name"], "llama");
  EXPECT_EQ(c["dataset_name"], "corpus.txt");
  EXPECT_EQ(c["n_layers"], 2);
  EXPECT_EQ(c["n_heads"], 4);
  EXPECT_EQ(c["n_intervals"], r["options"]["intervals"]);
  json heads = json::array();
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) heads.push_back({l, h});
  EXPECT_EQ(c["heads"], heads);
  EXPECT_EQ(c["metrics"], json(kMetrics));
  for (const std::string& m : kMetrics) {
    ASSERT_TRUE(c["metric_descriptions"].contains(m)) << m;
    EXPECT_FALSE(c["metric_descriptions"][m].get<std::string>().empty()) << m;
  }
  EXPECT_EQ(c["head_data_pattern"], "L{layer}H{head}.json");
  EXPECT_EQ(c["has_umap"], false);
  EXPECT_EQ(c["umap_heads"], json::array());
  EXPECT_TRUE(c["custom_plots"].is_array());
  EXPECT_TRUE(c["custom_tables"].is_array());
  EXPECT_TRUE(c.contains("statistics_display"));
  EXPECT_TRUE(c["pipeline_config"].is_object());
  EXPECT_EQ(c["pipeline_config"]["seq_len"], r["seq_len"]);
  for (const json& h : heads)
    EXPECT_TRUE(fs::exists(decoder_.tree / "heads" / ("L" + h[0].dump() + "H" + h[1].dump() + ".json")));
  // Written through a temporary folder: nothing of it is left beside the tree.
  for (const auto& e : fs::directory_iterator(root()))
    EXPECT_EQ(e.path().filename().string().find(".tree_decoder.tmp"), std::string::npos);
}

TEST_F(Heads, TopPrintsEveryHeadLargestFirst) {
  ASSERT_EQ(decoder_.cli.exitCode, 0) << decoder_.cli.err;
  const json& r = refCase("decoder");
  const std::vector<std::string> got = splitLines(decoder_.cli.out);
  std::vector<std::string> want;
  for (const json& l : r["top_lines"]) want.push_back(l.get<std::string>());
  ASSERT_EQ(got.size(), want.size()) << decoder_.cli.out;
  const std::regex line(R"((\d+)\t(\d+)\t(-?\d+\.\d{6}|nan))");
  double prev = 1e300;
  for (std::size_t i = 0; i < got.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(got[i], m, line)) << "'" << got[i] << "'";
    const double v = std::stod(m[3].str());
    EXPECT_LE(v, prev) << "not largest first at line " << i;
    prev = v;
    // Same head, same value to 6 decimals (within the metric tolerance).
    const std::vector<std::string> parts = [&] {
      std::vector<std::string> p;
      std::stringstream ss(want[i]);
      for (std::string x; std::getline(ss, x, '\t');) p.push_back(x);
      return p;
    }();
    EXPECT_EQ(m[1].str(), parts[0]) << "line " << i;
    EXPECT_EQ(m[2].str(), parts[1]) << "line " << i;
    EXPECT_NEAR(v, std::stod(parts[2]), kMetricTol) << "line " << i;
  }
  // The same tree ranked again with --tree: the same heads in the same order.
  const CliRun again = runBinary({"heads", "--tree", decoder_.tree.string(), "--top",
                                  r["top_metric"].get<std::string>()}, root());
  ASSERT_EQ(again.exitCode, 0) << again.err;
  const std::vector<std::string> lines = splitLines(again.out);
  ASSERT_EQ(lines.size(), got.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i].substr(0, lines[i].rfind('\t')), got[i].substr(0, got[i].rfind('\t')));
}

TEST_F(Heads, AnUndefinedMetricIsNullAndRanksLastAsNan) {
  // No sequence repeats a token: no query has an earlier copy, so induction_score is undefined.
  const fs::path corpus = root() / "no_repeats.txt";
  std::ofstream(corpus) << "the cat\n\nsat on\n\nfell upon\n";
  const fs::path tree = root() / "tree_no_repeats";
  const CliRun r = runBinary({"heads", "--model", (root() / "llama").string(), "--corpus",
                              corpus.string(), "--out", tree.string(), "--top",
                              "induction_score"}, root());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const std::vector<std::string> lines = splitLines(r.out);
  ASSERT_EQ(lines.size(), 8u);
  for (const std::string& l : lines) EXPECT_EQ(l.substr(l.rfind('\t') + 1), "nan") << l;
  const json scatter = readJson(tree / "scatter_data.json");
  for (const json& s : scatter) {
    EXPECT_TRUE(s["induction_score"].is_null());
    EXPECT_TRUE(s["prev_token_score"].is_number());
  }
  EXPECT_TRUE(readJson(tree / "heads" / "L0H0.json")["metrics"]["induction_score"].is_null());
}

TEST_F(Heads, RanksATreeInHeadVisLayout) {
  const json& c = refCase("headvis_tree");
  for (const char* metric : {"prev_token_score", "my_score"}) {
    const CliRun r = runBinary({"heads", "--tree", (root() / "headvis_tree").string(), "--top",
                                metric}, root());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::vector<std::string> want;
    for (const json& l : c[metric]) want.push_back(l.get<std::string>());
    EXPECT_EQ(splitLines(r.out), want) << metric;
  }
  const CliRun bad = runBinary({"heads", "--tree", (root() / "headvis_tree").string(), "--top",
                                "no_such_metric"}, root());
  EXPECT_EQ(bad.exitCode, 2) << bad.err;
  EXPECT_EQ(lineCount(bad.err), 1) << bad.err;
}

TEST_F(Heads, RefusalsNameTheFile) {
  const std::string corpus = (root() / "corpus.txt").string();
  const fs::path out = root() / "refused_tree";
  struct Case {
    std::vector<std::string> args;
    std::string names;  // what the one line must name
  };
  const fs::path broken = root() / "broken_tree";
  fs::create_directories(broken / "heads");
  fs::copy_file(root() / "headvis_tree" / "config.json", broken / "config.json");
  const fs::path noConfig = root() / "tree_without_config";
  fs::create_directories(noConfig);
  fs::copy_file(root() / "headvis_tree" / "scatter_data.json", noConfig / "scatter_data.json");
  const fs::path malformed = root() / "malformed_tree";
  fs::create_directories(malformed);
  fs::copy_file(root() / "headvis_tree" / "config.json", malformed / "config.json");
  std::ofstream(malformed / "scatter_data.json") << "[{\"layer\": 0, \"head\": 1,";
  const std::vector<Case> cases{
      {{"heads", "--model", (root() / "bart").string(), "--corpus", corpus, "--out", out.string()},
       (root() / "bart" / "config.json").string()},
      {{"heads", "--model", (root() / "vit").string(), "--corpus", corpus, "--out", out.string()},
       (root() / "vit" / "config.json").string()},
      {{"heads", "--model", (root() / "llama").string(), "--corpus",
        (root() / "empty.txt").string(), "--out", out.string()},
       (root() / "empty.txt").string()},
      {{"heads", "--model", (root() / "llama").string(), "--corpus",
        (root() / "bad.jsonl").string(), "--out", out.string()},
       (root() / "bad.jsonl").string() + ":3:"},
      {{"heads", "--model", (root() / "llama").string(), "--corpus",
        (root() / "corpus.jsonl").string(), "--field", "title", "--out", out.string()},
       (root() / "corpus.jsonl").string() + ":1:"},
      {{"heads", "--model", (root() / "llama").string(), "--corpus",
        (root() / "no_such_corpus").string(), "--out", out.string()},
       (root() / "no_such_corpus").string()},
      {{"heads", "--model", (root() / "llama").string(), "--corpus", corpus, "--out", out.string(),
        "--chat"},
       (root() / "llama" / "tokenizer_config.json").string()},
      {{"heads", "--tree", broken.string(), "--top", "prev_token_score"},
       (broken / "scatter_data.json").string()},
      {{"heads", "--tree", malformed.string(), "--top", "prev_token_score"},
       (malformed / "scatter_data.json").string() + ": malformed JSON"},
      {{"heads", "--tree", noConfig.string(), "--top", "prev_token_score"},
       (noConfig / "config.json").string()},
  };
  for (const Case& c : cases) {
    const CliRun r = runBinary(c.args, root());
    EXPECT_EQ(r.exitCode, 1) << c.names << ": " << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << "'" << r.err << "' does not name " << c.names;
    EXPECT_FALSE(fs::exists(out)) << "a refused run left " << out;
  }
}

TEST_F(Heads, BadUsageExitsTwo) {
  const std::string model = (root() / "llama").string(), corpus = (root() / "corpus.txt").string();
  const std::string out = (root() / "usage_tree").string();
  const std::vector<std::vector<std::string>> cases{
      {"heads", "--model", model, "--corpus", corpus},  // no --out
      {"heads", "--model", model, "--corpus", corpus, "--out", out, "--intervals", "0"},
      {"heads", "--model", model, "--corpus", corpus, "--out", out, "--seq-len", "1"},
      {"heads", "--model", model, "--corpus", corpus, "--out", out, "--top", "nonsense"},
      {"heads", "--tree", (root() / "headvis_tree").string()},  // no --top
      {"heads", "--model", model, "--corpus", corpus, "--out", out, "--no-such-option"},
  };
  for (const auto& args : cases) {
    const CliRun r = runBinary(args, root());
    EXPECT_EQ(r.exitCode, 2) << args.back() << ": " << r.err;
    EXPECT_EQ(lineCount(r.err), 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// ---- The tree read back as the app's Head finder reads it (readHeadTree, readHeadFile)

// NaN-aware equality of a tree row's value and scatter_data.json's entry.
void expectValue(double got, const json& want, const std::string& what) {
  if (want.is_null()) {
    EXPECT_TRUE(std::isnan(got)) << what;
  } else {
    EXPECT_DOUBLE_EQ(got, want.get<double>()) << what;
  }
}

TEST_F(Heads, ThePanelsReaderReadsAttnvizsTree) {
  ASSERT_EQ(decoder_.cli.exitCode, 0) << decoder_.cli.err;
  const HeadTree t = readHeadTree(decoder_.tree.string());
  EXPECT_EQ(t.metrics, kMetrics);
  const json scatter = readJson(decoder_.tree / "scatter_data.json");
  ASSERT_EQ(t.rows.size(), scatter.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    EXPECT_EQ(t.rows[r].layer, scatter[r]["layer"].get<int>());
    EXPECT_EQ(t.rows[r].head, scatter[r]["head"].get<int>());
    for (std::size_t m = 0; m < kMetrics.size(); ++m)
      expectValue(t.rows[r].values[m], scatter[r][kMetrics[m]], "row " + std::to_string(r) + " " + kMetrics[m]);
  }
  const json& c = refCase("decoder");
  const int K = c["options"]["intervals"].get<int>();
  int checked = 0;
  for (const json& h : c["heads"]) {
    const int l = h["layer"].get<int>(), hd = h["head"].get<int>();
    const std::string what = "L" + std::to_string(l) + "H" + std::to_string(hd);
    const HeadDashboardData d = readHeadFile(headFilePath(t, l, hd));
    EXPECT_EQ(d.layer, l) << what;
    EXPECT_EQ(d.head, hd) << what;
    EXPECT_EQ(d.nSamples, (long long)d.sequences.size()) << what;
    EXPECT_NEAR(d.meanMaxActivation, h["mean_max_activation"].get<double>(), 1e-5) << what;
    double counted = 0;
    for (double v : d.histValues) counted += v;
    EXPECT_EQ(counted, c["N"].get<double>()) << what;
    EXPECT_EQ(d.histEdges.size(), d.histValues.size() + 1) << what;
    std::vector<const HeadTreeSequence*> top;
    for (const HeadTreeSequence& q : d.sequences)
      if (q.interval == K) top.push_back(&q);
    const json& want = h["top"];
    ASSERT_EQ(top.size(), want.size()) << what;
    for (std::size_t i = 0; i < top.size(); ++i, ++checked) {
      const HeadTreeSequence& q = *top[i];
      const json& w = want[i];
      EXPECT_EQ(q.sequenceId, w["sequence_id"].get<int>()) << what;
      EXPECT_EQ(q.seqLen, w["seq_len"].get<int>()) << what;
      EXPECT_EQ(q.ids, w["ids"].get<std::vector<int>>()) << what << " top " << i;
      EXPECT_EQ(q.tokens.size(), std::size_t(q.seqLen)) << what;
      EXPECT_EQ(q.indices, w["attention_indices"].get<std::vector<long long>>()) << what;
      ASSERT_EQ(q.values.size(), w["attention_values"].size()) << what;
      for (std::size_t e = 0; e < q.values.size(); ++e)
        EXPECT_NEAR(q.values[e], w["attention_values"][e].get<double>(), 1e-4 + 1e-9) << what;
      EXPECT_NEAR(q.maxActivation, w["max_activation"].get<double>(), 1e-5) << what;
    }
  }
  EXPECT_GT(checked, 0) << "no top-interval sequence compared";
}

TEST_F(Heads, ThePanelsReaderReadsAHeadVisTree) {
  const json& c = refCase("headvis_tree");
  const HeadTree t = readHeadTree((root() / "headvis_tree").string());
  EXPECT_EQ(t.metrics, (std::vector<std::string>{"prev_token_score", "my_score"}));
  EXPECT_EQ(t.modelName, "gpt2");
  EXPECT_EQ(t.datasetName, "wiki");
  const json scatter = readJson(root() / "headvis_tree" / "scatter_data.json");
  ASSERT_EQ(t.rows.size(), scatter.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    expectValue(t.rows[r].values[0], scatter[r]["prev_token_score"], "prev " + std::to_string(r));
    expectValue(t.rows[r].values[1], scatter[r]["my_score"], "my " + std::to_string(r));
  }
  // Ranks: 0.9, 0.7512, 0.25, 0.25 (shared), 0.0, -0.125; undefined: 0.
  std::map<std::pair<int, int>, int> ranks;
  for (std::size_t r = 0; r < t.rows.size(); ++r)
    ranks[{t.rows[r].layer, t.rows[r].head}] = headRank(t, r, 0);
  EXPECT_EQ(ranks[std::make_pair(2, 3)], 1);
  EXPECT_EQ(ranks[std::make_pair(0, 0)], 2);
  EXPECT_EQ(ranks[std::make_pair(0, 1)], 3);
  EXPECT_EQ(ranks[std::make_pair(1, 0)], 3);
  EXPECT_EQ(ranks[std::make_pair(1, 1)], 5);
  EXPECT_EQ(ranks[std::make_pair(0, 2)], 6);
  EXPECT_EQ(ranks[std::make_pair(1, 2)], 0);

  // The head file HeadVis's pipeline wrote.
  const json& w = c["head_file"];
  const HeadDashboardData d = readHeadFile(headFilePath(t, 1, 0));
  EXPECT_EQ(d.layer, -1);
  ASSERT_EQ(d.sequences.size(), w["sequences"].size());
  for (std::size_t i = 0; i < d.sequences.size(); ++i) {
    const HeadTreeSequence& q = d.sequences[i];
    const json& ws = w["sequences"][i];
    EXPECT_EQ(q.sequenceId, ws["sequence_id"].get<int>());
    EXPECT_EQ(q.interval, ws["interval"].get<int>());
    EXPECT_EQ(q.seqLen, ws["seq_len"].get<int>());
    EXPECT_EQ(q.tokens, ws["tokens"].get<std::vector<std::string>>());
    EXPECT_TRUE(q.ids.empty());
    EXPECT_EQ(q.indices, ws["attention_indices"].get<std::vector<long long>>());
    EXPECT_EQ(q.values, ws["attention_values"].get<std::vector<double>>());
    EXPECT_DOUBLE_EQ(q.maxActivation, ws["max_activation"].get<double>());
  }
  EXPECT_EQ(d.qkEdges, w["qk_distance_histogram"]["bin_edges"].get<std::vector<double>>());
  EXPECT_EQ(d.qkValues, w["qk_distance_histogram"]["bin_values"].get<std::vector<double>>());
  EXPECT_EQ(d.histValues, w["histogram"]["bin_values"].get<std::vector<double>>());
  ASSERT_EQ(d.topQuery.size(), 2u);
  EXPECT_EQ(d.topQuery[1].token, " a");
  EXPECT_DOUBLE_EQ(d.topQuery[1].weight, 0.9);
  ASSERT_EQ(d.topKey.size(), 1u);
  EXPECT_EQ(d.nSamples, 2);
  EXPECT_DOUBLE_EQ(d.meanMaxActivation, 0.825);
  // The other heads' files hold no sequences.
  EXPECT_TRUE(readHeadFile(headFilePath(t, 0, 0)).sequences.empty());
}

TEST_F(Heads, NearestHeadsAreByZScoredEuclideanDistance) {
  const HeadTree t = readHeadTree(decoder_.tree.string());
  const std::size_t M = t.metrics.size(), R = t.rows.size();
  // The z-scores, computed here on their own.
  std::vector<std::vector<double>> z(R, std::vector<double>(M, NAN));
  for (std::size_t m = 0; m < M; ++m) {
    std::vector<double> v;
    for (const HeadTreeRow& r : t.rows)
      if (std::isfinite(r.values[m])) v.push_back(r.values[m]);
    if (v.size() < 2) continue;
    double mean = 0, var = 0;
    for (double x : v) mean += x / double(v.size());
    for (double x : v) var += (x - mean) * (x - mean) / double(v.size());
    if (!(var > 0)) continue;
    for (std::size_t r = 0; r < R; ++r) z[r][m] = (t.rows[r].values[m] - mean) / std::sqrt(var);
  }
  for (std::size_t me = 0; me < R; me += 3) {
    std::vector<std::pair<double, std::size_t>> all;
    for (std::size_t o = 0; o < R; ++o) {
      if (o == me) continue;
      double d2 = 0;
      for (std::size_t m = 0; m < M; ++m)
        if (std::isfinite(z[me][m]) && std::isfinite(z[o][m])) d2 += (z[me][m] - z[o][m]) * (z[me][m] - z[o][m]);
      all.push_back({std::sqrt(d2), o});
    }
    std::stable_sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first < b.first; });
    const std::vector<NearHead> near = nearestHeads(t, me, 4);
    ASSERT_EQ(near.size(), std::min<std::size_t>(4, R - 1));
    for (std::size_t k = 0; k < near.size(); ++k) {
      EXPECT_NEAR(near[k].distance, all[k].first, 1e-9) << "row " << me << " k " << k;
      EXPECT_EQ(near[k].row, all[k].second) << "row " << me << " k " << k;
    }
  }
}

TEST_F(Heads, ThePanelsReaderRefusesBadFilesInOneLine) {
  const fs::path dir = root() / "bad_reader";
  fs::create_directories(dir / "heads");
  auto write = [&](const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  };
  const std::string good =
      R"({"sequences": [{"sequence_id": 1, "interval": 1, "tokens": ["a", "b"], "seq_len": 2,)"
      R"( "attention_indices": [2, 3], "attention_values": [1.0, 0.5], "max_activation": 0.5}]})";
  write(dir / "heads" / "good.json", good);
  EXPECT_EQ(readHeadFile((dir / "heads" / "good.json").string()).sequences.size(), 1u);
  const std::vector<std::pair<std::string, std::string>> heads{
      {"truncated", good.substr(0, good.size() / 2)},
      {"index_outside", R"({"sequences": [{"sequence_id": 1, "tokens": ["a", "b"], "seq_len": 2, "attention_indices": [4], "attention_values": [1.0]}]})"},
      {"fewer_values", R"({"sequences": [{"sequence_id": 1, "tokens": ["a", "b"], "seq_len": 2, "attention_indices": [1, 2], "attention_values": [1.0]}]})"},
      {"seq_len_mismatch", R"({"sequences": [{"sequence_id": 1, "tokens": ["a"], "seq_len": 2, "attention_indices": [], "attention_values": []}]})"},
      {"token_not_string", R"({"sequences": [{"sequence_id": 1, "tokens": ["a", 3], "attention_indices": [], "attention_values": []}]})"},
      {"ids_mismatch", R"({"sequences": [{"sequence_id": 1, "tokens": ["a", "b"], "token_ids": [1], "attention_indices": [], "attention_values": []}]})"},
      {"not_object", "[1, 2]"},
      {"bad_histogram", R"({"histogram": {"bin_edges": [0, 1], "bin_values": [1, 2, 3]}})"},
      {"value_not_number", R"({"sequences": [{"sequence_id": 1, "tokens": ["a", "b"], "attention_indices": [1], "attention_values": ["x"]}]})"},
  };
  for (const auto& [name, text] : heads) {
    const fs::path p = dir / "heads" / (name + ".json");
    write(p, text);
    try {
      (void)readHeadFile(p.string());
      ADD_FAILURE() << name << ": accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(p.string()), std::string::npos) << name << ": " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << name << ": " << what;
    }
  }
  EXPECT_THROW((void)readHeadFile((dir / "heads" / "absent.json").string()), InputError);
  // Trees: a missing folder, a missing or malformed config.json or scatter_data.json.
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> trees{
      {"no_config", "", "[]", "config.json"},
      {"bad_config", "{", "[]", "config.json"},
      {"no_heads", R"({"metrics": ["a"]})", "[]", "scatter_data.json"},
      {"no_layer", R"({"metrics": ["a"]})", R"([{"head": 0, "a": 1}])", "scatter_data.json"},
      {"bad_value", R"({"metrics": ["a"]})", R"([{"layer": 0, "head": 0, "a": "x"}])", "scatter_data.json"},
      {"escaping_pattern", R"({"metrics": ["a"], "head_data_pattern": "../L{layer}.json"})",
       R"([{"layer": 0, "head": 0, "a": 1}])", "config.json"},
  };
  for (const auto& [name, config, scatter, names] : trees) {
    const fs::path t = dir / name;
    fs::create_directories(t);
    if (!config.empty()) write(t / "config.json", config);
    write(t / "scatter_data.json", scatter);
    try {
      (void)readHeadTree(t.string());
      ADD_FAILURE() << name << ": accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find((t / names).string()), std::string::npos) << name << ": " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << name << ": " << what;
    }
  }
  EXPECT_THROW((void)readHeadTree((dir / "absent").string()), InputError);
}

}  // namespace
}  // namespace attnviz::testing

namespace attnviz::testing {
namespace {

// On the held-out corpus the shipped models' cards were not measured on (whole chapters cut at
// 256 ids; 96 for the BERT, its positions), the finder ranks each card's named heads first for
// their metric: the previous-token and induction heads the decoders' cards and presets name, and
// the encoder's previous-token head (its card's "prev", measured on other verses).
TEST(HeadsShipped, EachCardsNamedHeadsRankFirstOnTheHeldOutCorpus) {
  const fs::path assets = fs::path(ATTNVIZ_SOURCE_DIR) / "assets";
  const fs::path corpus = assets / "corpora" / "kjv-heldout.txt";
  struct Case {
    const char* model;
    const char* metric;
    std::vector<std::string> first;  // "L\tH", any order, ranked first
    const char* seqLen = "256";
  };
  const std::vector<Case> cases = {
      {"kjv-byte-2l", "prev_token_score", {"0\t3"}},
      {"kjv-byte-2l", "induction_score", {"1\t2"}},
      {"kjv-sp-llama", "prev_token_score", {"1\t1", "1\t3"}},
      {"kjv-sp-llama", "induction_score", {"2\t1"}},
      {"kjv-sp-gemma2", "prev_token_score", {"1\t7"}},
      {"kjv-sp-gemma2", "induction_score", {"3\t6"}},
      {"kjv-wp-bert", "prev_token_score", {"1\t2"}, "96"},
  };
  TempDir tmp;
  std::set<std::string> run;  // one finder run per model; the second metric reads its tree
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.model) + " " + c.metric);
    const fs::path tree = tmp.path / c.model;
    const CliRun r =
        run.insert(c.model).second
            ? runBinary({"heads", "--model", (assets / "models" / c.model).string(), "--corpus",
                         corpus.string(), "--out", tree.string(), "--seq-len", c.seqLen, "--top",
                         c.metric},
                        tmp.path)
            : runBinary({"heads", "--tree", tree.string(), "--top", c.metric}, tmp.path);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::istringstream lines(r.out);
    std::set<std::string> top;
    std::string line;
    for (std::size_t k = 0; k < c.first.size() && std::getline(lines, line); ++k)
      top.insert(line.substr(0, line.rfind('\t')));
    EXPECT_EQ(top, std::set<std::string>(c.first.begin(), c.first.end())) << r.out;
  }
}

}  // namespace
}  // namespace attnviz::testing
