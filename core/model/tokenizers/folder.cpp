// loadFolderTokenizer: which tokenizer a Hugging Face model folder has.
#include "attnviz/model/tokenizers/tokenizer.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/gpt2_bpe.h"
#include "attnviz/model/tokenizers/marian.h"
#include "attnviz/model/tokenizers/sentencepiece.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"
#include "attnviz/model/tokenizers/wordpiece.h"

#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace attnviz {

namespace {

// config.json's model_type, "" when the file or the key is missing or unreadable (the model's
// own loading reports a bad config.json).
std::string modelType(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto path = dir / "config.json";
  if (!std::filesystem::exists(path, ec)) return "";
  try {
    const nlohmann::json j = nlohmann::json::parse(readFile(path.string()));
    if (j.is_object() && j.contains("model_type") && j["model_type"].is_string()) {
      return j["model_type"].get<std::string>();
    }
  } catch (const std::exception&) {
  }
  return "";
}

}  // namespace

std::unique_ptr<Tokenizer> loadFolderTokenizer(const std::string& dir, int vocabSize) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  const std::string config = (d / "tokenizer_config.json").string();
  std::error_code ec;
  if (fs::exists(d / "tokenizer.json", ec)) {
    return loadTokenizerJson((d / "tokenizer.json").string(), config, vocabSize);
  }
  if (fs::exists(d / "spiece.model", ec)) {  // T5: </s> after the text
    return loadT5SentencePieceTokenizer((d / "spiece.model").string(), vocabSize);
  }
  if (fs::exists(d / "tokenizer.model", ec)) {
    return loadSentencePieceTokenizer((d / "tokenizer.model").string(), config, vocabSize);
  }
  const bool vocab = fs::exists(d / "vocab.json", ec), merges = fs::exists(d / "merges.txt", ec);
  if (fs::exists(d / "source.spm", ec)) {  // Marian: two SentencePiece models, one vocab.json
    for (const char* f : {"target.spm", "vocab.json"})
      if (!fs::exists(d / f, ec))
        throw InputError((d / f).string() + ": missing (source.spm needs it)");
    return loadMarianTokenizer((d / "source.spm").string(), (d / "target.spm").string(),
                               (d / "vocab.json").string(), vocabSize);
  }
  if (vocab || merges) {
    if (!merges) throw InputError((d / "merges.txt").string() + ": missing (vocab.json needs it)");
    if (!vocab) throw InputError((d / "vocab.json").string() + ": missing (merges.txt needs it)");
    if (modelType(d) == "bart") {  // BartTokenizer's template: <s> A </s>
      return loadBartVocabTokenizer((d / "vocab.json").string(), (d / "merges.txt").string(),
                                    config, vocabSize);
    }
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load(
        (d / "vocab.json").string(), (d / "merges.txt").string(), vocabSize));
  }
  if (fs::exists(d / "vocab.txt", ec)) {
    return loadVocabTxtTokenizer((d / "vocab.txt").string(), config, vocabSize);
  }
  throw InputError(dir + ": no tokenizer (tokenizer.json, tokenizer.model, vocab.json + "
                         "merges.txt, Marian's source.spm + target.spm + vocab.json, or a "
                         "WordPiece vocab.txt)");
}

}  // namespace attnviz
