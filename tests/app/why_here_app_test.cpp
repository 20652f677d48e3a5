// The "Why here?" panel in the app: for the selected cell it shows the split `attnviz qk` prints
// for the same model, text, layer, head and cell (tests/model/qk_test.cpp holds that split against
// a float64 torch reference): the score, the sum of the parts and the largest pair.
#include "run_shell.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

using attnviz::testing::runShell;
using attnviz::testing::runUnderXvfb;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;

namespace {

const char* kText = "In the beginning God created the heaven and the earth. And the earth was";

std::string model() { return std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-sp-llama"; }

ShellRun app(const std::string& args, int frames = 30) {
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1600x1000x24\" " +
                          ATTNVIZ_BIN + " --size 1600x1000 --frames " + std::to_string(frames) + " --screenshot " +
                          shellQuote(::testing::TempDir() + "attnviz_whyhere.png") + " " + args;
  const ShellRun r = runUnderXvfb(cmd);
  return r;
}

}  // namespace

TEST(WhyHereApp, ThePanelShowsTheSplitAttnvizQkPrints) {
  // Layer 2's head 1 (the shipped model's induction head) at query 15, its largest key.
  const ShellRun a = app("--model " + shellQuote(model()) + " --text " + shellQuote(kText) +
                         " --layer 2 --head 1 --select-row 15 --why-here");
  ASSERT_EQ(a.rc, 0) << a.out;
  const auto at = a.out.find("why-here:");
  ASSERT_NE(at, std::string::npos) << a.out;
  int layer = -1, head = -1, query = -1, key = -1;
  double score = 0, sum = 0, top = 0;
  char names[256] = "";
  ASSERT_EQ(std::sscanf(a.out.c_str() + at,
                        "why-here: layer=%d head=%d query=%d key=%d score=%lf sum=%lf top=%255s",
                        &layer, &head, &query, &key, &score, &sum, names),
            7)
      << a.out;
  std::string pair = names;  // "Q,K,value"
  const auto c1 = pair.find(','), c2 = pair.rfind(',');
  ASSERT_NE(c1, c2);
  top = std::stod(pair.substr(c2 + 1));
  const std::string q = pair.substr(0, c1), k = pair.substr(c1 + 1, c2 - c1 - 1);
  EXPECT_EQ(layer, 2);
  EXPECT_EQ(head, 1);
  EXPECT_EQ(query, 15);

  const ShellRun cli = runShell(std::string(ATTNVIZ_BIN) + " qk --model " + shellQuote(model()) +
                                " --text " + shellQuote(kText) + " --layer 2 --head 1 --query 15" +
                                " --key " + std::to_string(key) + " --top 1");
  ASSERT_EQ(cli.rc, 0) << cli.out;
  std::istringstream in(cli.out);
  std::string word, pq, pk;
  double cs = 0, csum = 0, cv = 0;
  in >> word >> cs >> word >> csum >> word >> pq >> pk >> cv;
  EXPECT_NEAR(score, cs, 1e-5);
  EXPECT_NEAR(sum, csum, 1e-5);
  EXPECT_EQ(q, pq);
  EXPECT_EQ(k, pk);
  EXPECT_NEAR(top, cv, 1e-5);
  EXPECT_NEAR(sum, score, 1e-4 * std::abs(score));
}

namespace {

std::string scene(const std::string& name) {
  return std::string(ATTNVIZ_SOURCE_DIR) + "/assets/scenes/" + name;
}

// The last "why-here:" line of a scripted run: layer, head, query, key, score.
struct Shown {
  int layer = -1, head = -1, query = -1, key = -1;
  double score = 0, sum = 0;
};

Shown lastShown(const std::string& out) {
  Shown s;
  const auto at = out.rfind("why-here:");
  if (at == std::string::npos) return s;
  std::sscanf(out.c_str() + at, "why-here: layer=%d head=%d query=%d key=%d score=%lf sum=%lf",
              &s.layer, &s.head, &s.query, &s.key, &s.score, &s.sum);
  return s;
}

double cliScore(const std::string& text, const std::string& extra) {
  const ShellRun r = runShell(std::string(ATTNVIZ_BIN) + " qk --model " + shellQuote(model()) +
                              " --text " + shellQuote(text) + " " + extra + " --top 1");
  EXPECT_EQ(r.rc, 0) << r.out;
  double score = NAN;
  std::sscanf(r.out.c_str(), "score\t%lf", &score);
  return score;
}

const char* kTwice =
    "And the fine linen is the righteousness of saints. And the fine linen is the "
    "righteousness of saints.";

}  // namespace

// The induction preset opens the panel on its cell (query 20, key 6); pressing the ablate button
// of L1H3 (a previous-token head, beside the bars) re-runs the pass and splits the same cell
// again: the key stays 6 although the ablation moves the row's largest weight to <s>, and the new
// score is `attnviz qk --ablate 1:3`'s, not the unablated one.
TEST(WhyHereApp, AnAblationFromThePanelSplitsTheSameCellAgain) {
  const std::string base = "--layer 2 --head 1 --query 20 --key 6";
  const double before = cliScore(kTwice, base);
  const double after = cliScore(kTwice, base + " --ablate 1:3");
  ASSERT_GT(std::abs(before - after), 1.0);  // the ablation changes this cell

  const ShellRun plain = app("--scene " + shellQuote(scene("40-why-the-induction-head-attends-here.json")), 60);
  ASSERT_EQ(plain.rc, 0) << plain.out;
  const Shown p = lastShown(plain.out);
  EXPECT_EQ(p.layer, 2);
  EXPECT_EQ(p.head, 1);
  EXPECT_EQ(p.query, 20);
  EXPECT_EQ(p.key, 6);
  EXPECT_NEAR(p.score, before, 1e-4);

  const ShellRun ablated =
      app("--why-here-ablate 1:3 --scene " +
              shellQuote(scene("40-why-the-induction-head-attends-here.json")),
          150);
  ASSERT_EQ(ablated.rc, 0) << ablated.out;
  const Shown a = lastShown(ablated.out);
  EXPECT_EQ(a.query, 20);
  EXPECT_EQ(a.key, 6);
  EXPECT_NEAR(a.score, after, 1e-4) << ablated.out;
  EXPECT_NEAR(a.sum, a.score, 1e-4 * std::abs(a.score));
}

// A scene's panels.whyHere object opens the Composition tab on a kind; saving keeps it; a bad
// value is one line naming the field, exit 1.
TEST(WhyHereApp, SceneOpensTheCompositionTabAndBadValuesAreRefused) {
  const std::string saved = ::testing::TempDir() + "attnviz_whyhere_scene.json";
  std::remove(saved.c_str());
  const ShellRun r = app(
      "--save-scene " + shellQuote(saved) + " --scene " + shellQuote(scene("42-k-composition.json")),
      20);
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream in(saved);
  std::stringstream text;
  text << in.rdbuf();
  const std::string js = text.str();
  EXPECT_NE(js.find("\"tab\": \"composition\""), std::string::npos) << js;
  EXPECT_NE(js.find("\"kind\": \"k\""), std::string::npos) << js;

  const std::string bad = ::testing::TempDir() + "attnviz_whyhere_bad.json";
  {
    std::ifstream src(scene("42-k-composition.json"));
    std::stringstream all;
    all << src.rdbuf();
    std::string s = all.str();
    const auto at = s.find("\"kind\": \"k\"");
    ASSERT_NE(at, std::string::npos);
    s.replace(at, 11, "\"kind\": \"o\"");
    std::ofstream(bad) << s;
  }
  const ShellRun refused = app("--scene " + shellQuote(bad), 5);
  EXPECT_EQ(refused.rc, 1) << refused.out;
  EXPECT_NE(refused.out.find("view.panels.whyHere.kind"), std::string::npos) << refused.out;
}
