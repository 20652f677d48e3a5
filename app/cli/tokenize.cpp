// attnviz tokenize: GPT-2 byte-level BPE with a model folder's vocab.json and merges.txt.
#include "cli/cli.h"
#include "cli/options.h"

#include "attnviz/model/model.h"

#include <cstdio>

namespace attnviz::app {

int runTokenize(int argc, char** argv) {
  CLI::App app{
      "Tokenize text with a model folder's GPT-2 tokenizer (config.json, vocab.json, "
      "merges.txt)",
      "tokenize"};
  std::string dir, text;
  bool pieces = false;
  app.add_option("--model", dir, "model folder")->required();
  app.add_option("--text", text, "text to tokenize")->required();
  app.add_flag("--pieces", pieces,
               "print each token's decoded bytes, one a line (\\n, \\r, \\t and \\xNN escaped)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("tokenize", [&] {
    const Gpt2Tokenizer tok = loadModelTokenizer(dir);
    const std::vector<int> ids = tok.encode(text);
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
