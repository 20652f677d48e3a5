// The chat format (`--chat`, `--system`) against Hugging Face's apply_chat_template: the real
// templates of Llama 2, Llama 3, 3.1 and 3.2, Mistral v0.1 and v0.3, Qwen2.5 (ChatML), Gemma 2 and
// 3, Phi-3 and OLMo 2 (tests/tokenizers/chat/, origins in chat_reference.py) rendered by Jinja2 as
// transformers renders them, tokenized by @huggingface/tokenizers without added special tokens
// (chat_tokenize.mjs). attnviz's ids come from `attnviz tokenize --chat`, from the library, from a
// GGUF's tokenizer.chat_template, and from the pass itself (`model --chat` writes the same logits
// as `model --ids` with the reference ids).
#include "tokenizer_test_util.h"

#include "run_binary.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/chat_template.h"

#include <nlohmann/json.hpp>

namespace attnviz::testing {
namespace {

struct ChatReference {
  fs::path dir;
  nlohmann::json cases, ids;
  std::string error;
};

const ChatReference& chatReference() {
  static const ChatReference ref = [] {
    ChatReference r;
    std::string key = slurp(testDir() / "chat_reference.py") + slurp(testDir() / "chat_tokenize.mjs");
    for (const auto& e : fs::directory_iterator(testDir() / "chat")) key += slurp(e.path());
    key += chatTodayDate();  // Llama 3.2's template writes today's date
    r.dir = cachedReference("chat", key, [](const fs::path& out) -> std::string {
      const ShellRun py = runShell(ATTNVIZ_PYTHON " " + shellQuote((testDir() / "chat_reference.py").string()) +
                                   " " + shellQuote(out.string()));
      if (py.rc != 0) return "chat_reference.py failed: " + py.out;
      const ShellRun js = runShell("node " + shellQuote((testDir() / "chat_tokenize.mjs").string()) +
                                   " " + shellQuote(npmModules().string()) + " " +
                                   shellQuote(out.string()));
      if (js.rc != 0) return "chat_tokenize.mjs failed: " + js.out;
      return "";
    }, r.error);
    if (r.error.empty()) {
      r.cases = nlohmann::json::parse(slurp(r.dir / "cases.json"));
      r.ids = nlohmann::json::parse(slurp(r.dir / "reference.json"));
    }
    return r;
  }();
  return ref;
}

std::vector<std::string> chatArgs(const std::string& model, const nlohmann::json& c) {
  std::vector<std::string> a = {"--model", model, "--text", c["user"].get<std::string>(), "--chat"};
  if (!c["system"].is_null()) a.insert(a.end(), {"--system", c["system"].get<std::string>()});
  return a;
}

std::vector<int> idsOf(const nlohmann::json& j) { return j.get<std::vector<int>>(); }

#define CHAT_REFERENCE()                                          \
  const ChatReference& ref = chatReference();                     \
  ASSERT_TRUE(ref.error.empty()) << ref.error

// Every case the templates render: the rendered text equals Jinja2's, and `tokenize --chat`
// prints the ids @huggingface/tokenizers gives for it.
TEST(ChatTemplate, TokenizeChatEqualsApplyChatTemplate) {
  CHAT_REFERENCE();
  ProcessTempDir tmp("chat");
  int checked = 0;
  for (const auto& [name, c] : ref.cases.items()) {
    if (c["rendered"].is_null() || c["template"] == "openchat") continue;
    SCOPED_TRACE(name);
    const fs::path dir = ref.dir / name;
    ChatTurns turns;
    if (!c["system"].is_null()) turns.system = c["system"].get<std::string>();
    turns.user = c["user"].get<std::string>();
    EXPECT_EQ(renderChat(readFolderChatTemplate(dir.string()), turns), c["rendered"].get<std::string>());
    std::vector<std::string> args = {"tokenize"};
    for (const std::string& a : chatArgs(dir.string(), c)) args.push_back(a);
    const CliRun run = runBinary(args, fs::path(tmp.path));
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(run.out, joinIds(idsOf(ref.ids[name])) + "\n");
    ++checked;
  }
  EXPECT_EQ(checked, 19);
}

// A GGUF's tokenizer.chat_template (bos/eos are its tokens' pieces) gives the same ids.
TEST(ChatTemplate, GgufChatTemplateEqualsApplyChatTemplate) {
  CHAT_REFERENCE();
  ProcessTempDir tmp("chat");
  int checked = 0;
  for (const auto& [name, c] : ref.cases.items()) {
    if (!c["gguf"].get<bool>()) continue;
    SCOPED_TRACE(name);
    std::vector<std::string> args = {"tokenize"};
    for (const std::string& a : chatArgs((ref.dir / (name + ".gguf")).string(), c)) args.push_back(a);
    const CliRun run = runBinary(args, fs::path(tmp.path));
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(run.out, joinIds(idsOf(ref.ids[name])) + "\n");
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

// The pass runs on those ids: `model --chat` writes exactly the logits of `model --ids REF`.
TEST(ChatTemplate, ModelPassRunsOnTheChatIds) {
  CHAT_REFERENCE();
  ProcessTempDir tmp("chat");
  for (const char* name : {"llama3_2_system", "qwen2_5", "gemma3_system", "mistral_v03_system"}) {
    SCOPED_TRACE(name);
    const nlohmann::json& c = ref.cases[name];
    const fs::path dir = ref.dir / name;
    std::vector<std::string> chat = {"model"};
    for (const std::string& a : chatArgs(dir.string(), c)) chat.push_back(a);
    chat.insert(chat.end(), {"--logits", (fs::path(tmp.path) / "chat.npy").string()});
    const CliRun a = runBinary(chat, fs::path(tmp.path));
    ASSERT_EQ(a.exitCode, 0) << a.err;
    std::string ids;
    for (int id : idsOf(ref.ids[name])) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    const CliRun b = runBinary({"model", "--model", dir.string(), "--ids", ids, "--logits",
                                (fs::path(tmp.path) / "ids.npy").string()}, fs::path(tmp.path));
    ASSERT_EQ(b.exitCode, 0) << b.err;
    const std::string la = slurp(fs::path(tmp.path) / "chat.npy"), lb = slurp(fs::path(tmp.path) / "ids.npy");
    EXPECT_FALSE(la.empty());
    EXPECT_EQ(la, lb);
  }
}

// The head finder takes --chat (each document as one user turn) and runs; a model with an unknown
// template is refused before any pass, naming the file.
TEST(ChatTemplate, HeadsTakesChat) {
  CHAT_REFERENCE();
  ProcessTempDir tmp("chat");
  const nlohmann::json& c = ref.cases["qwen2_5"];
  spit(fs::path(tmp.path) / "corpus.jsonl", nlohmann::json({{"text", c["user"]}}).dump() + "\n");
  const CliRun run = runBinary({"heads", "--model", (ref.dir / "qwen2_5").string(), "--corpus",
                                (fs::path(tmp.path) / "corpus.jsonl").string(), "--out",
                                (fs::path(tmp.path) / "tree").string(), "--chat"},
                               fs::path(tmp.path));
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const nlohmann::json cfg = nlohmann::json::parse(slurp(fs::path(tmp.path) / "tree" / "config.json"));
  EXPECT_TRUE(cfg["pipeline_config"]["chat"].get<bool>());
}

// What the templates refuse, attnviz refuses: one line naming the file, exit 1.
TEST(ChatTemplate, RefusesWhatTheTemplateRaisesOrDoesNotKnow) {
  CHAT_REFERENCE();
  ProcessTempDir tmp("chat");
  const std::vector<std::pair<std::string, std::string>> expect = {
      {"gemma2_system", "refuses a system turn (it raises 'System role not supported')"},
      {"mistral_v01_system", "refuses a system turn"},
      {"openchat", "chat template not recognised (known: llama2, llama3, mistral, chatml, gemma, "
                   "phi3, olmo2)"}};
  for (const auto& [name, what] : expect) {
    SCOPED_TRACE(name);
    const nlohmann::json& c = ref.cases[name];
    if (name != "openchat") {
      EXPECT_TRUE(c["rendered"].is_null());  // Jinja2 raised as well
    }
    std::vector<std::string> args = {"tokenize"};
    for (const std::string& a : chatArgs((ref.dir / name).string(), c)) args.push_back(a);
    const CliRun run = runBinary(args, fs::path(tmp.path));
    EXPECT_EQ(run.exitCode, 1);
    EXPECT_EQ(lineCount(run.err), 1) << run.err;
    EXPECT_NE(run.err.find((ref.dir / name / "tokenizer_config.json").string() + ": "),
              std::string::npos) << run.err;
    EXPECT_NE(run.err.find(what), std::string::npos) << run.err;
  }
}

TEST(ChatTemplate, RefusesAModelWithoutATemplate) {
  CHAT_REFERENCE();
  ProcessTempDir tmp("chat");
  const fs::path dir = fs::path(tmp.path) / "plain";
  fs::create_directories(dir);
  for (const char* f : {"tokenizer.json", "config.json"})
    fs::copy_file(ref.dir / "llama3" / f, dir / f);
  spit(dir / "tokenizer_config.json", R"({"bos_token": "<|begin_of_text|>"})");
  const CliRun run = runBinary({"tokenize", "--model", dir.string(), "--text", "hi", "--chat"}, fs::path(tmp.path));
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.err, "attnviz tokenize: " + (dir / "tokenizer_config.json").string() +
                         ": --chat: no chat_template\n");
  const CliRun sys = runBinary({"tokenize", "--model", dir.string(), "--text", "hi", "--system", "s"},
                               fs::path(tmp.path));
  EXPECT_EQ(sys.exitCode, 2) << sys.err;
}

}  // namespace
}  // namespace attnviz::testing
