// attnviz model: Hugging Face's tokenizer.json (+ optional tokenizer_config.json).
//
// Encoding follows the `tokenizers` library (Rust), step by step:
//   1. added tokens are matched in the raw text, leftmost-longest (those with "normalized": false,
//      which special tokens are by default), honouring lstrip, rstrip and single_word; the rest
//      of the text is normalized and searched again for the "normalized": true added tokens
//      (whose content is normalized the same way);
//   2. normalizers: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace (String or
//      Regex), Prepend, BertNormalizer, Precompiled (SentencePiece's precompiled_charsmap, base64,
//      applied as the Rust library does: per grapheme cluster, see tokenizer_internal.h),
//      Sequence; any other normalizer is refused: "<file>: unsupported normalizer X";
//   3. pre-tokenizers: ByteLevel (add_prefix_space, use_regex with GPT-2's pattern), Split
//      (String or Regex; Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous;
//      invert), Metaspace (replacement, prepend_scheme always/first/never or the older
//      add_prefix_space, split), Whitespace, WhitespaceSplit, Digits, Punctuation,
//      BertPreTokenizer, Sequence. Regexes are Oniguruma's dialect, compiled by ICU (see
//      tokenizer_internal.h for the rewrites that keep the two in step);
//   4. the model: BPE (vocab, merges as "a b" strings or [a, b] arrays, byte_fallback, unk_token,
//      fuse_unk, ignore_merges, continuing_subword_prefix, end_of_word_suffix; dropout is
//      ignored), WordPiece (unk_token, continuing_subword_prefix, max_input_chars_per_word) or
//      Unigram (vocab as [piece, score] pairs, unk_id, byte_fallback: the best segmentation by
//      score, an unknown character scored the lowest score - 10, a run of unknowns one <unk> or
//      its bytes); any other model type is refused: "<file>: unsupported tokenizer model type X";
//   5. special tokens around the text (encode(text, true) only):
//        - from the post_processor: TemplateProcessing's "single" template, RobertaProcessing,
//          BertProcessing, a Sequence of those (ByteLevel adds nothing);
//        - tokenizer_config.json's add_bos_token / add_eos_token, when present, decide for their
//          own token over the post_processor (as transformers' LlamaTokenizerFast rebuilds its
//          template from them): true adds bos_token / eos_token (a string or {"content": ...}),
//          false removes that token from the template's ends; a key that is absent leaves the
//          post_processor's choice;
//   6. encodePair(): TemplateProcessing's "pair" template (string or array form, with its type
//      ids), BertProcessing's [CLS] A [SEP] B [SEP] (B [SEP] type 1), RobertaProcessing's
//      <s> A </s></s> B </s> (every type 0, as the Rust library); no pair template: InputError.
// mask(): tokenizer_config.json's mask_token, else a [MASK] or <mask> token.
// A character the model cannot express (not in the vocab, no byte fallback, no unk_token) is an
// InputError naming it (the Rust library drops it silently).
//
// bos()/eos(): tokenizer_config.json's bos_token/eos_token, else the template's first/last added
// token. pieceBytes(): byte-level tokens as their bytes, <0xNN> as byte NN, U+2581 as a space,
// WordPiece word starts with a leading space and "##" continuations without it, added tokens as
// their content.
#pragma once

#include "attnviz/model/tokenizers/tokenizer.h"

#include <memory>
#include <string>

namespace attnviz {

// Reads `jsonPath` and, when `configPath` is not empty and exists, tokenizer_config.json.
// `vocabSize` > 0 bounds the ids (config.json's vocab_size). Throws InputError naming the file.
std::unique_ptr<Tokenizer> loadTokenizerJson(const std::string& jsonPath,
                                             const std::string& configPath = "",
                                             int vocabSize = 0);

// The same from the files' text (`configText` may be empty); the names are what errors say.
std::unique_ptr<Tokenizer> tokenizerFromJson(const std::string& jsonText,
                                             const std::string& configText,
                                             const std::string& jsonName,
                                             const std::string& configName = "tokenizer_config.json",
                                             int vocabSize = 0);

}  // namespace attnviz
