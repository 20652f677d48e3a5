// libFuzzer target: the chat format on arbitrary bytes. The first byte chooses what they are:
// even, a chat template's Jinja source (chatFormatOf, then renderChat with and without a system
// turn); odd, a folder's tokenizer_config.json (readFolderChatTemplate, then the same). Each
// either renders or throws InputError; nothing else.
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/chat_template.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

std::string g_dir;  // a folder of this process for tokenizer_config.json

void render(const attnviz::ChatTemplate& t) {
  (void)attnviz::chatFormatOf(t);
  attnviz::ChatTurns turns;
  turns.user = "Why is the sky blue?";
  try {
    (void)attnviz::renderChat(t, turns);
  } catch (const attnviz::InputError&) {
  }
  turns.system = "Answer briefly.";
  (void)attnviz::renderChat(t, turns);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string t = (std::filesystem::temp_directory_path() / "attnviz_fuzz_chat_XXXXXX").string();
  if (!::mkdtemp(t.data())) std::abort();
  g_dir = t;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      attnviz::ChatTemplate t;
      t.file = "tokenizer_config.json";
      t.text = text;
      t.bosToken = "<s>";
      t.eosToken = "</s>";
      render(t);
    } else {
      const std::string path = g_dir + "/tokenizer_config.json";
      if (FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
      }
      render(attnviz::readFolderChatTemplate(g_dir));
    }
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
