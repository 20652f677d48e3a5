// attnviz model: Marian's tokenizer (MarianMT folders). The source text is cut into pieces by
// source.spm, the decoder's target text by target.spm; both sides look their pieces up in one
// vocab.json (a piece it lacks is <unk>), and encode(text, true) appends </s>, as Hugging
// Face's MarianTokenizer does (no BOS). </s>, <unk>, <pad> and language codes (">>fr<<")
// written in the text are those tokens.
#pragma once

#include "attnviz/model/tokenizers/tokenizer.h"

#include <memory>
#include <string>

namespace attnviz {

// Throws InputError naming the file (not a SentencePiece model, a bad vocab.json, ids past
// `vocabSize` > 0, no </s> or <unk> piece).
std::unique_ptr<Tokenizer> loadMarianTokenizer(const std::string& sourceSpm,
                                               const std::string& targetSpm,
                                               const std::string& vocabJson, int vocabSize = 0);

// The same from the files' bytes; the names are what errors say.
struct MarianFiles {
  std::string source, target, vocab;              // source.spm, target.spm, vocab.json bytes
  std::string sourceName, targetName, vocabName;  // their paths
};
std::unique_ptr<Tokenizer> marianFromBytes(const MarianFiles& files, int vocabSize = 0);

}  // namespace attnviz
