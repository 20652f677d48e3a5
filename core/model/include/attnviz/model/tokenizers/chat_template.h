// attnviz model: the chat format (`--chat`): a text wrapped as one user turn (after an optional
// system turn) in the model's own chat template, ending with the assistant's opening, as Hugging
// Face's apply_chat_template(messages, add_generation_prompt=True) renders and tokenizes it.
//
// The template is not interpreted as Jinja: each known format is recognised by the fragments its
// template contains (the markers llama.cpp's llama-chat.cpp looks for, narrowed to the exact
// expressions that decide the output) and rendered here. A template that is not one of them is
// refused, never approximated. See docs/generation.md#chat-format.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attnviz {

class GgufFile;
class Model;
class Tokenizer;
struct ModelFiles;

struct ChatTemplate {
  std::string file;      // where the template was read (tokenizer_config.json or the .gguf)
  std::string text;      // the Jinja source
  std::string bosToken;  // what `bos_token` renders as ("" when the tokenizer has none)
  std::string eosToken;
};

struct ChatTurns {
  std::optional<std::string> system;  // --system TEXT
  std::string user;                   // --text
};

// The known formats, for messages: "llama2, llama3, mistral, chatml, gemma, phi3, olmo2".
std::string knownChatFormats();

// A model folder's template: tokenizer_config.json's `chat_template` (a string, or a list of
// {name, template} of which "default" is used), with bos_token / eos_token from the same file (a
// string or an added-token object), else special_tokens_map.json. Throws InputError
// "<file>: --chat: no chat_template" when there is none.
ChatTemplate readFolderChatTemplate(const std::string& dir);
// A GGUF's `tokenizer.chat_template`; bos/eos are the pieces of tokenizer.ggml.bos_token_id and
// eos_token_id. Throws InputError "<file>: --chat: no tokenizer.chat_template".
ChatTemplate readGgufChatTemplate(const GgufFile& file);
// Either of the above for a model path (folder or .gguf, as locateModelFiles finds it), or for
// the files an opened model came from.
ChatTemplate loadChatTemplate(const std::string& modelPath);
ChatTemplate loadChatTemplate(const ModelFiles& files);

// The format's name ("llama3", "chatml", ...). Throws InputError
// "<file>: chat template not recognised (known: ...)".
std::string chatFormatOf(const ChatTemplate& t);

// The rendered prompt (bos_token included where the template writes it). Throws InputError naming
// the file when the template is not recognised, or when it refuses the turns (Gemma 2 and a
// system turn: "System role not supported", as the template raises).
std::string renderChat(const ChatTemplate& t, const ChatTurns& turns);

// The ids: the rendered prompt tokenized without added special tokens, special tokens written in
// it matched as single ids (apply_chat_template's tokenize=True). The tokenizer must parse
// special tokens (the default).
std::vector<int> encodeChat(const Tokenizer& tok, const ChatTemplate& t, const ChatTurns& turns);

// An opened model's chat ids (its template, its tokenizer), checked as Model::encode checks text
// (not empty, within the context).
std::vector<int> encodeModelChat(const Model& model, const ChatTurns& turns);

// Today's date as the Llama 3.2 template's strftime_now("%d %b %Y") writes it ("06 Dec 2026"),
// local time.
std::string chatTodayDate();

}  // namespace attnviz
