// Opening another model while a panel's worker still scores the first one: the Retrieval and
// Loss-by-token jobs are stopped and their results dropped, so the new model never shows (or
// ablates) the old one's heads, and the app does not wait for the old job to finish.
#include "run_shell.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

using attnviz::testing::runShell;
using attnviz::testing::runUnderXvfb;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;

namespace {

std::string asset(const std::string& rel) { return std::string(ATTNVIZ_SOURCE_DIR) + "/" + rel; }

ShellRun app(const std::string& args) {
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1280x800x24\" " +
                          ATTNVIZ_BIN + " --size 1280x800 --frames 40 --screenshot " +
                          shellQuote(::testing::TempDir() + "attnviz_model_switch.png") + " " +
                          args;
  const ShellRun r = runUnderXvfb(cmd);
  return r;
}

}  // namespace

// The retrieval preset scores 5 needle depths and 5 random draws on a worker; the Gemma-2-layout
// model is dropped on the window while that runs. The scripted run then shows the Gemma-2-layout
// model with no retrieval result (the old model's would print a "retrieval:" line naming its
// heads).
TEST(ModelSwitchApp, ARetrievalJobIsStoppedWhenAnotherModelOpens) {
  const ShellRun r = app("--scene " + shellQuote(asset("assets/scenes/29-retrieval-heads.json")) +
                         " --retrieval --drop-while-busy " +
                         shellQuote(asset("assets/models/kjv-sp-gemma2")));
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_NE(r.out.find("drop-while-busy: retrieval running"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model-grid:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers=4 heads=8"), std::string::npos) << r.out;  // kjv-sp-gemma2
  EXPECT_EQ(r.out.find("retrieval:"), std::string::npos) << r.out;
}

// The same for the Loss-by-token panel's three caches.
TEST(ModelSwitchApp, ALossByTokenJobIsStoppedWhenAnotherModelOpens) {
  std::string text;  // 200 tokens or so: three caches scored token by token
  while (text.size() < 900)
    text += "And God said, Let there be light: and there was light. And God saw the light, that "
            "it was good. ";
  const ShellRun r = app("--model " + shellQuote(asset("assets/models/kjv-sp-llama")) +
                         " --text " + shellQuote(text) + " --cache-loss 4,8 --drop-while-busy " +
                         shellQuote(asset("assets/models/kjv-sp-gemma2")));
  ASSERT_EQ(r.rc, 0) << r.out;
  if (r.out.find("drop-while-busy: cache-loss running") == std::string::npos)
    GTEST_SKIP() << "the job finished before a frame saw it running: " << r.out;
  EXPECT_NE(r.out.find("layers=4 heads=8"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cache-loss:"), std::string::npos) << r.out;
}

// Bad usage: the option needs a scripted job to wait for.
TEST(ModelSwitchApp, DropWhileBusyNeedsAJob) {
  const ShellRun r = app("--model " + shellQuote(asset("assets/models/kjv-sp-llama")) +
                         " --drop-while-busy " + shellQuote(asset("assets/models/kjv-sp-gemma2")));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--drop-while-busy goes with --retrieval or --cache-loss"),
            std::string::npos)
      << r.out;
}
