// attnviz tokenize: a model folder's tokenizer (tokenizer.json, tokenizer.model or GPT-2's
// vocab.json + merges.txt), or a GGUF file's (vocab-only files included).
#include "cli/cli.h"
#include "cli/options.h"

#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/chat_template.h"

#include <cstdio>

namespace attnviz::app {

int runTokenize(int argc, char** argv) {
  CLI::App app{
      "Tokenize text with a model's tokenizer (a folder with config.json and tokenizer.json, "
      "tokenizer.model or vocab.json + merges.txt; or a .gguf file)",
      "tokenize"};
  std::string dir, text;
  std::string system;
  bool pieces = false, noSpecial = false, parseSpecial = true, target = false, chat = false;
  app.add_option("--model", dir, "model folder, .gguf file or name (ORG/NAME, ollama:NAME:TAG)")->required();
  app.add_option("--text", text, "text to tokenize")->required();
  app.add_flag("--pieces", pieces,
               "print each token's decoded bytes, one a line (\\n, \\r, \\t and \\xNN escaped)");
  app.add_flag("--no-special", noSpecial,
               "leave out the special tokens the tokenizer adds (Llama's BOS)");
  app.add_flag("--parse-special,!--no-parse-special", parseSpecial,
               "special tokens written in the text (<|endoftext|>, <s>) are those tokens (the "
               "default), or, with --no-parse-special, plain text");
  app.add_flag("--target", target,
               "an encoder-decoder's target side (Marian: target.spm; others: the same "
               "tokenizer)");
  app.add_flag("--chat", chat,
               "wrap --text as one user turn in the model's chat format and print the ids "
               "apply_chat_template(add_generation_prompt=True) gives");
  app.add_option("--system", system, "with --chat: a system turn before the user's");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("tokenize", [&] {
    if (app.count("--system") && !chat) throw UsageError("--system goes with --chat");
    if (chat && (noSpecial || target || !parseSpecial))
      throw UsageError("--chat renders the template's own special tokens: drop --no-special, "
                       "--target and --no-parse-special");
    const std::unique_ptr<Tokenizer> tokp = loadModelTokenizer(dir);
    tokp->setParseSpecial(parseSpecial);
    const Tokenizer& tok = *tokp;
    std::vector<int> ids;
    if (chat) {
      ChatTurns turns;
      if (app.count("--system")) turns.system = system;
      turns.user = text;
      ids = encodeChat(tok, loadChatTemplate(dir), turns);
    } else {
      ids = target ? tok.encodeTarget(text, !noSpecial) : tok.encode(text, !noSpecial);
    }
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (pieces) {
        out += tok.printable(ids[i]) + "\n";
      } else {
        out += (i ? " " : "") + std::to_string(ids[i]);
      }
    }
    if (!pieces) out += "\n";
    std::fputs(out.c_str(), stdout);
    return 0;
  });
}

}  // namespace attnviz::app
