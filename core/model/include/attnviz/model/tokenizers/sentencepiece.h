// attnviz model: SentencePiece's tokenizer.model, through libsentencepiece.
//
// The text is cut at the control and unknown pieces written in it ("<s>", "</s>", "<unk>":
// leftmost-longest, as transformers' LlamaTokenizer splits its special tokens out first), and
// each remaining part is encoded by SentencePieceProcessor::Encode, so each part gets the
// model's dummy-prefix "▁" (transformers' legacy behaviour, and llama.cpp's).
// encode(text, true) adds BOS when tokenizer_config.json's add_bos_token says so, or, when the
// key (or the file) is absent, whenever the model has a BOS piece; EOS only when add_eos_token is
// true. bos_token / eos_token of tokenizer_config.json name the ids when they are pieces of the
// model, else the model's own bos_id / eos_id.
#pragma once

#include "attnviz/model/tokenizers/tokenizer.h"

#include <memory>
#include <string>

namespace attnviz {

// Reads `modelPath` and, when `configPath` is not empty and exists, tokenizer_config.json.
// `vocabSize` > 0: the model's pieces must fit it. Throws InputError naming the file (a file that
// is not a SentencePiece model included).
std::unique_ptr<Tokenizer> loadSentencePieceTokenizer(const std::string& modelPath,
                                                      const std::string& configPath = "",
                                                      int vocabSize = 0);

// T5's spiece.model: the model's pieces (no BOS) and </s> after every text, as T5's tokenizer
// builds its inputs; when `vocabSize` has room for 100 more, T5's sentinels <extra_id_k> after the
// pieces in reverse (id pieces + 99 - k), cut out of the text like the control pieces.
std::unique_ptr<Tokenizer> loadT5SentencePieceTokenizer(const std::string& modelPath,
                                                        int vocabSize = 0);

// T5's from a serialized SentencePiece model (a GGUF `t5` vocabulary rebuilt as one); `name` is
// what errors say.
std::unique_ptr<Tokenizer> t5SentencePieceFromBytes(const std::string& modelBytes,
                                                    const std::string& name, int vocabSize = 0);

// The same from the files' bytes (`configText` may be empty); the names are what errors say.
std::unique_ptr<Tokenizer> sentencePieceFromBytes(const std::string& modelBytes,
                                                  const std::string& configText,
                                                  const std::string& modelName,
                                                  const std::string& configName =
                                                      "tokenizer_config.json",
                                                  int vocabSize = 0);

}  // namespace attnviz
