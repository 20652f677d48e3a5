// attnviz model: a bare WordPiece vocab.txt (BERT's original files: one token per line, the id is
// the line number, counting from 0), when a folder has no tokenizer.json.
//
// It is read as transformers' BertTokenizerFast reads it: BertNormalizer (clean text, spaces
// around CJK ideographs, lowercase and accents stripped unless tokenizer_config.json says
// do_lower_case false; tokenize_chinese_chars and strip_accents when given), BertPreTokenizer,
// WordPiece with "##" continuations, [UNK] for a word with a part that has no token or more than
// 100 characters, and the template [CLS] A [SEP] (pair: [CLS] A [SEP] B [SEP], B [SEP] of type
// 1). The special tokens (unk_token, sep_token, pad_token, cls_token, mask_token of
// tokenizer_config.json, by default [UNK], [SEP], [PAD], [CLS], [MASK]) are matched in the raw
// text before normalizing. A token listed twice keeps its last line's id (as transformers).
#pragma once

#include "attnviz/model/tokenizers/tokenizer.h"

#include <memory>
#include <string>

namespace attnviz {

// Reads `vocabPath` and, when `configPath` is not empty and exists, tokenizer_config.json.
// `vocabSize` > 0 bounds the ids. Throws InputError naming the file and the problem (no
// [CLS] or [SEP] token, a line that is not UTF-8, ...).
std::unique_ptr<Tokenizer> loadVocabTxtTokenizer(const std::string& vocabPath,
                                                 const std::string& configPath = "",
                                                 int vocabSize = 0);

// The same from the files' text (`configText` may be empty); the names are what errors say.
std::unique_ptr<Tokenizer> vocabTxtTokenizer(
    const std::string& vocabText, const std::string& configText, const std::string& vocabName,
    const std::string& configName = "tokenizer_config.json", int vocabSize = 0);

}  // namespace attnviz
