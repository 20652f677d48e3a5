// The Head finder panel in the app, on a tree `attnviz heads` writes for the shipped LLaMA-layout
// model over part of its held-out corpus: the panel's table, sorted by a metric, ranks the heads
// as `attnviz heads --top METRIC` prints them (the run's own path, not the tree's); opening a
// kept sequence sets the main view to that head and to the sequence's ids; a malformed tree is
// one line and no crash; the presets open on the heads their notes name.
#include "run_shell.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

using attnviz::testing::runShell;
using attnviz::testing::runUnderXvfb;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string model() { return std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-sp-llama"; }
std::string corpus() { return std::string(ATTNVIZ_SOURCE_DIR) + "/assets/corpora/kjv-heldout.txt"; }

// `env` (e.g. "TMPDIR=/x") is set for the app's process.
ShellRun app(const std::string& args, int frames = 10, const std::string& env = "") {
  const std::string cmd = (env.empty() ? std::string() : "env " + env + " ") +
                          std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1600x1000x24\" " +
                          ATTNVIZ_BIN + " --size 1600x1000 --frames " + std::to_string(frames) +
                          " --screenshot " +
                          shellQuote(::testing::TempDir() + "attnviz_headfinder.png") + " " + args;
  const ShellRun r = runUnderXvfb(cmd);
  return r;
}

struct Ranked {
  int layer = 0, head = 0;
  double value = 0;
};

// "layer<TAB>head<TAB>value" lines (after `prefix`, e.g. "head-finder-row\t").
std::vector<Ranked> rankedLines(const std::string& out, const std::string& prefix) {
  std::vector<Ranked> r;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream f(line.substr(prefix.size()));
    Ranked x;
    std::string v;
    if (f >> x.layer >> x.head >> v) {
      x.value = v == "nan" ? NAN : std::stod(v);
      r.push_back(x);
    }
  }
  return r;
}

std::string lineAfter(const std::string& out, const std::string& key) {
  const auto at = out.find(key);
  if (at == std::string::npos) return "";
  return out.substr(at + key.size(), out.find('\n', at) - at - key.size());
}

int countLines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n + (!s.empty() && s.back() != '\n');
}

class HeadFinderApp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("attnviz_hf_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    tree_ = dir_ / "tree";
    // The 56 chapters cut to 128 ids (the warm-up is 50: 6 sequences are sampled per head).
    const ShellRun r = runShell(std::string(ATTNVIZ_BIN) + " heads --model " + shellQuote(model()) +
                                " --corpus " + shellQuote(corpus()) + " --out " +
                                shellQuote(tree_.string()) +
                                " --seq-len 128 --top induction_score 2>/dev/null");
    ASSERT_EQ(r.rc, 0) << r.out;
    cliInduction_ = rankedLines(r.out, "");
    ASSERT_EQ(cliInduction_.size(), 24u) << r.out;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `attnviz heads --top METRIC` over the same corpus and settings (the run's unrounded values).
  std::vector<Ranked> cliTop(const std::string& metric) {
    const ShellRun r = runShell(std::string(ATTNVIZ_BIN) + " heads --model " + shellQuote(model()) +
                                " --corpus " + shellQuote(corpus()) + " --out " +
                                shellQuote((dir_ / ("tree_" + metric)).string()) +
                                " --seq-len 128 --top " + metric + " 2>/dev/null");
    EXPECT_EQ(r.rc, 0) << r.out;
    return rankedLines(r.out, "");
  }

  fs::path dir_, tree_;
  std::vector<Ranked> cliInduction_;
};

// The panel's table is scatter_data.json's values (4 decimals); the CLI's ranking is the run's
// own. At each rank both values agree to the rounding, and the head the panel puts there has
// that value in the CLI's run (heads equal after rounding may trade places).
void expectSameRanking(const std::vector<Ranked>& panel, const std::vector<Ranked>& cli,
                       const std::string& metric) {
  ASSERT_EQ(panel.size(), cli.size()) << metric;
  std::map<std::pair<int, int>, double> byHead;
  for (const Ranked& c : cli) byHead[{c.layer, c.head}] = c.value;
  for (std::size_t k = 0; k < cli.size(); ++k) {
    if (std::isnan(cli[k].value)) {
      EXPECT_TRUE(std::isnan(panel[k].value)) << metric << " rank " << k;
      continue;
    }
    EXPECT_NEAR(panel[k].value, cli[k].value, 5e-5 + 1e-9) << metric << " rank " << k;
    const std::pair<int, int> key{panel[k].layer, panel[k].head};
    ASSERT_TRUE(byHead.count(key)) << metric << " rank " << k;
    EXPECT_NEAR(byHead[key], panel[k].value, 5e-5 + 1e-9)
        << metric << " rank " << k << ": L" << panel[k].layer << "H" << panel[k].head;
  }
}

TEST_F(HeadFinderApp, TheTableRanksTheHeadsAsAttnvizHeadsTop) {
  for (const std::string metric : {"induction_score", "first_token_share", "prev_token_score"}) {
    const std::vector<Ranked> cli = metric == "induction_score" ? cliInduction_ : cliTop(metric);
    const ShellRun a = app("--heads " + shellQuote(tree_.string()) + " --head-finder-sort " + metric, 6);
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_NE(a.out.find("head-finder: tree=" + tree_.string() + " heads=24 metrics=7 sort=" +
                         metric + " descending=1"),
              std::string::npos)
        << a.out;
    expectSameRanking(rankedLines(a.out, "head-finder-row\t"), cli, metric);
  }
  // The shipped model's named heads come first: layer 2's head 1 for induction.
  EXPECT_EQ(cliInduction_[0].layer, 2);
  EXPECT_EQ(cliInduction_[0].head, 1);
}

TEST_F(HeadFinderApp, TheDashboardRanksTheSelectedHeadAndItsNeighbours) {
  const Ranked top = cliInduction_[0];
  const ShellRun a = app("--heads " + shellQuote(tree_.string()) + " --head-finder-select " +
                             std::to_string(top.layer) + "," + std::to_string(top.head),
                         6);
  ASSERT_EQ(a.rc, 0) << a.out;
  const std::string d = lineAfter(a.out, "head-finder-dashboard: ");
  ASSERT_FALSE(d.empty()) << a.out;
  EXPECT_NE(d.find("layer=" + std::to_string(top.layer) + " head=" + std::to_string(top.head)),
            std::string::npos) << d;
  EXPECT_NE(d.find("induction_score:1,"), std::string::npos) << d;  // the top head is #1
  EXPECT_NE(d.find("error=-"), std::string::npos) << d;
  const std::string near = lineAfter(a.out, "head-finder-near: ");
  EXPECT_EQ(std::count(near.begin(), near.end(), ','), 4) << near;  // five neighbours
}

TEST_F(HeadFinderApp, OpeningASequenceShowsItOnThatHeadInTheMainView) {
  const Ranked top = cliInduction_[0];
  const json head = json::parse(std::ifstream(tree_ / "heads" /
                                              ("L" + std::to_string(top.layer) + "H" +
                                               std::to_string(top.head) + ".json")));
  ASSERT_FALSE(head["sequences"].empty());
  // The top interval's strongest sequence (the file lists the intervals lowest first, the top
  // one largest first).
  int topInterval = 0;
  for (const json& q : head["sequences"]) topInterval = std::max(topInterval, q["interval"].get<int>());
  const json* pick = nullptr;
  for (const json& q : head["sequences"])
    if (!pick && q["interval"].get<int>() == topInterval) pick = &q;
  const json& seq = *pick;
  const int id = seq["sequence_id"].get<int>();
  const std::vector<int> ids = seq["token_ids"].get<std::vector<int>>();
  // The main view starts elsewhere (layer 0, head 5, another text): the sequence moves it.
  const ShellRun a = app("--model " + shellQuote(model()) + " --text 'And God said' --layer 0 " +
                             "--head 5 --heads " + shellQuote(tree_.string()) +
                             " --head-finder-select " + std::to_string(top.layer) + "," +
                             std::to_string(top.head) + " --head-finder-sequence " +
                             std::to_string(id),
                         12);
  ASSERT_EQ(a.rc, 0) << a.out;
  std::string want;
  for (int t : ids) want += (want.empty() ? "" : ",") + std::to_string(t);
  EXPECT_EQ(lineAfter(a.out, "head-finder-opened: "),
            "layer=" + std::to_string(top.layer) + " head=" + std::to_string(top.head) +
                " sequence=" + std::to_string(id) + " ids=" + want);
  // What the main view ran: that head, and the sequence's ids through the open model.
  EXPECT_EQ(lineAfter(a.out, "head-finder-view: "), "layer=" + std::to_string(top.layer) +
                                                        " head=" + std::to_string(top.head) +
                                                        " ids=" + want);
  EXPECT_EQ(lineAfter(a.out, "model-view: "),
            "layer=" + std::to_string(top.layer) + " head=" + std::to_string(top.head));
}

// A scene that names a tree (opened as the scene is read) keeps its scatter axes and sort.
TEST_F(HeadFinderApp, ASceneOnATreeSetsTheAxesItNames) {
  const fs::path scene = dir_ / "tree_scene.json";
  std::ofstream(scene) << json{{"title", "axes"},
                               {"model", {{"path", model()}, {"text", "And I saw"}}},
                               {"view",
                                {{"panels",
                                  {{"headFinder",
                                    {{"tree", tree_.string()},
                                     {"sort", "first_token_share"},
                                     {"x", "first_token_share"},
                                     {"y", "pattern_entropy"},
                                     {"select", {2, 2}}}}}}}}}
                                  .dump();
  const ShellRun a = app("--scene " + shellQuote(scene.string()), 4);
  ASSERT_EQ(a.rc, 0) << a.out;
  const std::string h = lineAfter(a.out, "head-finder: ");
  EXPECT_NE(h.find("sort=first_token_share descending=1 selected=2,2 x=first_token_share "
                   "y=pattern_entropy"),
            std::string::npos)
      << h;
}

TEST_F(HeadFinderApp, AMalformedTreeIsOneLineAndNoCrash) {
  // scatter_data.json cut in half: the app refuses the tree at start, one line naming the file.
  const fs::path bad = dir_ / "bad";
  fs::copy(tree_, bad, fs::copy_options::recursive);
  {
    std::ifstream in(bad / "scatter_data.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(bad / "scatter_data.json", std::ios::trunc) << text.substr(0, text.size() / 2);
  }
  const ShellRun a = app("--heads " + shellQuote(bad.string()), 3);
  EXPECT_EQ(a.rc, 1) << a.out;
  EXPECT_EQ(countLines(a.out), 1) << a.out;
  EXPECT_NE(a.out.find((bad / "scatter_data.json").string() + ": malformed JSON"), std::string::npos)
      << a.out;

  // A head file that is not JSON: the tree opens, the dashboard says so in one line, the app
  // runs its frames and exits 0.
  const fs::path bad2 = dir_ / "bad2";
  fs::copy(tree_, bad2, fs::copy_options::recursive);
  std::ofstream(bad2 / "heads" / "L2H1.json", std::ios::trunc) << "{\"sequences\": [1, 2";
  const ShellRun b = app("--heads " + shellQuote(bad2.string()) + " --head-finder-select 2,1", 4);
  EXPECT_EQ(b.rc, 0) << b.out;
  const std::string d = lineAfter(b.out, "head-finder-dashboard: ");
  EXPECT_NE(d.find("layer=2 head=1 sequences=0"), std::string::npos) << b.out;
  EXPECT_NE(d.find("error=" + (bad2 / "heads" / "L2H1.json").string() + ": malformed JSON"),
            std::string::npos)
      << b.out;
}

// The Head finder presets run the finder on the shipped held-out corpus on a worker and open on
// the head their notes name, with the figures the notes give (measured by `attnviz heads --top`).
// One test a preset (each runs the finder over the whole corpus in its own app process), so
// each has the suite's timeout to itself and ctest runs them side by side.
struct PresetCase {
  std::string name, file, selected, sort, firstRow;
};
// gtest names each case by its scene file (not the struct's bytes).
void PrintTo(const PresetCase& c, std::ostream* os) { *os << c.file; }

class HeadFinderPresets : public ::testing::TestWithParam<PresetCase> {};

TEST_P(HeadFinderPresets, OpensOnTheHeadItsNotesName) {
  const PresetCase& c = GetParam();
  // The run's tree goes under the temp dir (the presets name no output folder); the app removes
  // it when it closes.
  const fs::path tmp = fs::path(::testing::TempDir()) / ("attnviz_hf_tmp_" + c.name);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const ShellRun a = app("--scene " + shellQuote(std::string(ATTNVIZ_SCENES) + "/" + c.file), 8,
                         "TMPDIR=" + shellQuote(tmp.string()));
  ASSERT_EQ(a.rc, 0) << c.file << "\n" << a.out;
  for (const auto& e : fs::directory_iterator(tmp))
    ADD_FAILURE() << c.file << ": the run's tree was left behind: " << e.path();
  fs::remove_all(tmp);
  const std::string h = lineAfter(a.out, "head-finder: ");
  EXPECT_NE(h.find("heads=24 metrics=7 sort=" + c.sort + " descending=1 selected=" + c.selected),
            std::string::npos)
      << c.file << ": " << h;
  EXPECT_EQ(lineAfter(a.out, "head-finder-row\t"), c.firstRow) << c.file;
  // 43 opens the top induction head's strongest chapter in the main view, on that head.
  if (c.file[1] == '3')
    EXPECT_NE(a.out.find("head-finder-view: layer=2 head=1 ids=1,"), std::string::npos) << a.out;
}

INSTANTIATE_TEST_SUITE_P(
    Presets, HeadFinderPresets,
    ::testing::Values(
        PresetCase{"FindTheInductionHeads", "43-find-the-induction-heads.json", "2,1",
                   "induction_score", "2\t1\t0.632700"},
        PresetCase{"AHeadOnOnePromptVsTheCorpus", "44-a-head-on-one-prompt-vs-the-corpus.json",
                   "2,3", "induction_score", "2\t1\t0.632700"},
        PresetCase{"SinksEverywhere", "45-sinks-everywhere.json", "2,2", "first_token_share",
                   "2\t2\t0.924300"}),
    [](const ::testing::TestParamInfo<PresetCase>& i) { return i.param.name; });

}  // namespace
