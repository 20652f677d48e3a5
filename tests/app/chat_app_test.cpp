// The text panel's chat format in the app: `attnviz --model M --text U --chat --system S` (what
// the checkbox and the system field set) runs the ids of the model's chat template, the ones
// `attnviz tokenize --chat` prints (tests/tokenizers/chat_template_test.cpp holds those against
// Hugging Face's apply_chat_template); the saved scene keeps "chat" and "system", `export
// --scene` draws it byte for byte as the app exported it, and the scene reopens to itself.
#include "run_shell.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using attnviz::testing::runShell;
using attnviz::testing::shellQuote;
using attnviz::testing::ShellRun;

namespace {

// The chat references (tests/tokenizers/chat_reference.py): template folders, the random
// one-layer Llama checkpoints of the cases a pass runs on, and cases.json.
struct ChatFolders {
  attnviz::testing::ProcessTempDir owned{"attnviz_chat_app"};
  nlohmann::json cases;
  std::string error;
  ChatFolders() {
    const ShellRun py = runShell(ATTNVIZ_PYTHON " " +
                                 shellQuote(std::string(ATTNVIZ_SOURCE_DIR) +
                                            "/tests/tokenizers/chat_reference.py") +
                                 " " + shellQuote(owned.path) + " 2>&1");
    if (py.rc != 0) {
      error = "chat_reference.py failed: " + py.out;
      return;
    }
    std::ifstream f(fs::path(owned.path) / "cases.json");
    cases = nlohmann::json::parse(f);
  }
  std::string dir(const std::string& name) const { return (fs::path(owned.path) / name).string(); }
};

const ChatFolders& folders() {
  static ChatFolders f;
  return f;
}

std::string tmp(const std::string& name) { return ::testing::TempDir() + "attnviz_chatapp_" + name; }

ShellRun cli(const std::string& args) { return runShell(std::string(ATTNVIZ_BIN) + " " + args); }

std::vector<unsigned char> bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct App {
  int rc = -1;
  std::string out;
  int rows = 0, cols = 0;
  bool geometry = false;
};

App runApp(const std::string& args) {
  App a;
  const std::string cmd = std::string(ATTNVIZ_XVFB_RUN) + " -a -s \"-screen 0 1600x1000x24\" " +
                          ATTNVIZ_BIN + " --size 1600x1000 --frames 8 --screenshot " +
                          shellQuote(tmp("shot.png")) + " " + args;
  for (int attempt = 0; attempt < 3; ++attempt) {  // xvfb-run -a can race another server
    const ShellRun r = runShell(cmd);
    a.rc = r.rc;
    a.out = r.out;
    if (a.out.find("xvfb-run: error") == std::string::npos) break;
  }
  if (const auto at = a.out.find("geometry:"); at != std::string::npos) {
    float x0, y0, w, h, cell;
    a.geometry = std::sscanf(a.out.c_str() + at,
                             "geometry: x0=%f y0=%f w=%f h=%f cell=%f rows=%d cols=%d", &x0, &y0,
                             &w, &h, &cell, &a.rows, &a.cols) == 7;
  }
  return a;
}

int countIds(const std::string& printed) {
  std::istringstream in(printed);
  int n = 0;
  for (std::string id; in >> id;) ++n;
  return n;
}

}  // namespace

TEST(ChatApp, TheChatFormatRunsTheTemplatesIdsAndTheSceneKeepsIt) {
  const ChatFolders& f = folders();
  ASSERT_TRUE(f.error.empty()) << f.error;
  const nlohmann::json& c = f.cases["mistral_v03_system"];
  const std::string model = f.dir("mistral_v03_system");
  const std::string user = c["user"].get<std::string>(), system = c["system"].get<std::string>();
  const std::string chatArgs = "--model " + shellQuote(model) + " --text " + shellQuote(user) +
                               " --chat --system " + shellQuote(system);

  // The ids the template gives, and the plain text's: the view must show the first.
  ShellRun r = cli("tokenize " + chatArgs);
  ASSERT_EQ(r.rc, 0) << r.out;
  const int chatT = countIds(r.out);
  r = cli("tokenize --model " + shellQuote(model) + " --text " + shellQuote(user));
  ASSERT_EQ(r.rc, 0) << r.out;
  const int plainT = countIds(r.out);
  ASSERT_GT(chatT, plainT);

  const std::string saved = tmp("chat.json"), appPng = tmp("chat-app.png");
  const App a = runApp(chatArgs + " --layer 0 --head 1 --save-scene " + shellQuote(saved) +
                       " --export " + shellQuote(appPng));
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_TRUE(a.geometry) << a.out;
  EXPECT_EQ(a.rows, chatT);
  EXPECT_EQ(a.cols, chatT);

  std::ifstream in(saved);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["model"]["text"], user);
  EXPECT_EQ(j["model"]["chat"], true);
  EXPECT_EQ(j["model"]["system"], system);

  // export --scene draws what the app exported, byte for byte (another T would not).
  const std::string scenePng = tmp("chat-scene.png");
  r = cli("export --scene " + shellQuote(saved) + " --png " + shellQuote(scenePng));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::vector<unsigned char> appBytes = bytes(appPng);
  ASSERT_FALSE(appBytes.empty());
  EXPECT_TRUE(appBytes == bytes(scenePng)) << "the app's export and export --scene differ";

  // The scene reopens to the same view: saved again, the same JSON.
  const std::string again = tmp("chat-again.json");
  const App b = runApp("--scene " + shellQuote(saved) + " --save-scene " + shellQuote(again));
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(b.rows, chatT);
  EXPECT_TRUE(bytes(saved) == bytes(again));

  // Without the chat format the same text is its plain tokens.
  const App plain = runApp("--model " + shellQuote(model) + " --text " + shellQuote(user));
  ASSERT_EQ(plain.rc, 0) << plain.out;
  EXPECT_EQ(plain.rows, plainT);
}

// A model without a chat template: --chat is one line naming the file, exit 1; the scene's
// "system" without "chat" is refused where it is read.
TEST(ChatApp, AModelWithoutATemplateRefusesTheChatFormat) {
  const std::string model = std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-byte-2l";
  const App a = runApp("--model " + shellQuote(model) + " --text hello --chat");
  EXPECT_EQ(a.rc, 1) << a.out;
  EXPECT_NE(a.out.find("--chat: no chat_template"), std::string::npos) << a.out;
  const App u = runApp("--model " + shellQuote(model) + " --text hello --system hi");
  EXPECT_EQ(u.rc, 2) << u.out;
  EXPECT_NE(u.out.find("--system goes with --chat"), std::string::npos) << u.out;

  const std::string scene = tmp("system-only.json");
  {
    std::ofstream o(scene);
    o << nlohmann::json{{"model", {{"path", model}, {"text", "hello"}, {"system", "hi"}}}}.dump();
  }
  ShellRun r = cli("export --scene " + shellQuote(scene) + " --png " + shellQuote(tmp("x.png")));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("'model.system' goes with \"chat\": true"), std::string::npos) << r.out;
}
