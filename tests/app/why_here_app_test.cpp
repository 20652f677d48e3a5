// The "Why here?" panel in the app: for the selected cell it shows the split `attnviz qk` prints
// for the same model, text, layer, head and cell (tests/model/qk_test.cpp holds that split against
// a float64 torch reference): the score, the sum of the parts and the largest pair.
#include "run_shell.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>

using attnviz::testing::runShell;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;

namespace {

const char* kText = "In the beginning God created the heaven and the earth. And the earth was";

std::string model() { return std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-sp-llama"; }

ShellRun app(const std::string& args) {
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1600x1000x24\" " +
                          ATTNVIZ_BIN + " --size 1600x1000 --frames 30 --screenshot " +
                          shellQuote(::testing::TempDir() + "attnviz_whyhere.png") + " " + args;
  ShellRun r;
  for (int attempt = 0; attempt < 3; ++attempt) {  // xvfb-run -a can race another server
    r = runShell(cmd);
    if (r.out.find("xvfb-run: error") == std::string::npos) break;
  }
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
