// The residual-stream panel draws a bounded number of cells whatever the number of tokens: its
// token-by-layer plot pools the tokens into at most 160 rows, so a longer text adds no cells.
#include "run_shell.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using attnviz::testing::runShell;
using attnviz::testing::runUnderXvfb;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;

namespace {

std::string source(const std::string& rel) { return std::string(ATTNVIZ_SOURCE_DIR) + "/" + rel; }

// The vertices the residual panel added on the scripted run's last frame, on `words` words.
int residualVertices(const std::string& model, int words) {
  std::string text;
  for (int k = 0; k < words; ++k) text += k % 7 ? " and the earth" : " In the beginning";
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x900x24\" " +
                          ATTNVIZ_BIN + " --size 1280x900 --frames 8 --screenshot " +
                          shellQuote(::testing::TempDir() + "attnviz_caps.png") + " --model " +
                          shellQuote(model) + " --text " + shellQuote(text) + " --show-residual";
  const ShellRun r = runUnderXvfb(cmd);
  EXPECT_EQ(r.rc, 0) << r.out;
  const auto at = r.out.find("panel-vertices: residual=");
  EXPECT_NE(at, std::string::npos) << r.out;
  return at == std::string::npos ? -1 : std::atoi(r.out.c_str() + at + 25);
}

}  // namespace

// A random LLaMA folder with a 2048-token context (tests/app/make_slow_llama.py): the panel adds
// as many vertices on 400 words as on 100 (both over the 160-row cap), give or take its labels
// (about 20,400 here); with a row per token it adds 20,808 more on the longer text, and fails.
TEST(PanelCapsApp, TheResidualPanelDrawsAsManyCellsAtAnyLength) {
  const std::string dir = ::testing::TempDir() + "attnviz_caps_llama";
  const ShellRun make = runShell(ATTNVIZ_PYTHON " " +
                                 shellQuote(source("tests/app/make_slow_llama.py")) + " " +
                                 shellQuote(source("assets/models/kjv-sp-llama")) + " " +
                                 shellQuote(dir));
  ASSERT_EQ(make.rc, 0) << make.out;
  const int shorter = residualVertices(dir, 100), longer = residualVertices(dir, 400);
  ASSERT_GT(shorter, 0);
  ASSERT_GT(longer, 0);
  EXPECT_LT(std::abs(longer - shorter), 2000) << shorter << " vs " << longer;
}
