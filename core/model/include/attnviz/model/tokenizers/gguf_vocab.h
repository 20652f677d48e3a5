// attnviz model: tokenizers from GGUF metadata (tokenizer.ggml.*), as llama.cpp builds them.
//
// GgufVocab is a plain struct, so the tokenizers do not depend on the reader; readGgufVocab()
// fills it from a GgufFile. Kinds (tokenizer.ggml.model):
//   "llama"  SentencePiece-style BPE over scores: the text (a space in front when
//            add_space_prefix, default true, and the text starts or follows a special token;
//            spaces as U+2581) is split into characters, then the adjacent pair whose
//            concatenation is a vocabulary piece with the highest score is merged (the leftmost on
//            a tie) until none is; a character with no piece becomes its <0xNN> byte pieces.
//   "gpt2"   byte-level BPE with merges (rank order) after the pre-tokenizer regexes that
//            tokenizer.ggml.pre names (every name of llama.cpp's table: default, llama3/llama-bpe,
//            qwen2, gpt-2, deepseek-llm, deepseek-coder, deepseek-v3, falcon, mpt, starcoder,
//            tekken, gpt-4o, kimi-k2, superbpe, ...; see ggufPreTokenizers(); the few that run
//            BPE over raw UTF-8 instead of bytes, such as gemma4, are refused); each regex splits
//            every piece in turn, keeping what lies between matches ("Isolated"). Where llama.cpp
//            rewrote a Hugging Face regex for std::regex and quotes the original, the original
//            is used (ICU runs it as Oniguruma would). llama3-style pre-tokenizers emit a whole
//            piece that is in the vocabulary directly (ignore_merges).
//   "bert"   WordPiece after Hugging Face's BertNormalizer (clean text, spaces around CJK,
//            accents stripped, lowercase) and BertPreTokenizer; word starts are the pieces with
//            the converter's U+2581 prefix, continuations the bare pieces; a word with a part
//            that has no piece is [UNK].
//   "t5"     SentencePiece Unigram (llama.cpp's UGM): the pieces, scores and types with the
//            normalizer the file keeps (tokenizer.ggml.precompiled_charsmap, add_space_prefix,
//            remove_extra_whitespaces) are rebuilt as a SentencePiece model and run by the
//            sentencepiece library, as T5's spiece.model is; </s> after every text, no BOS.
// Special tokens written in the text: user-defined pieces (token type 4) are always cut out
// first (as llama.cpp does even with parse_special off); control and unknown pieces too when
// `parseSpecial` is on (the default; off reproduces llama.cpp's tokenizer tests; the option sets
// the tokenizer's first Tokenizer::parseSpecial(), which setParseSpecial() changes later). Longest piece
// first; Phi-3 (general.name) strips the spaces after them as llama.cpp does.
// encode(text, true) adds BOS when add_bos_token (default: true for llama, bert and llama3-style
// gpt2 vocabularies, else false) and EOS when add_eos_token; bert adds [CLS] ... [SEP], and
// encodes pairs as [CLS] A [SEP] B [SEP] (B [SEP] type 1; the other kinds have no pair template).
// mask(): tokenizer.ggml.mask_token_id, else a [MASK] or <mask> piece.
// llama.cpp's own WPM differs from Hugging Face's BERT tokenizer in a few places (see
// tests/tokenizers/wordpiece_test.cpp); "bert" here is Hugging Face's, the model's own.
#pragma once

#include "attnviz/model/tokenizers/tokenizer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnviz {

class GgufFile;

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class GgufTokenType : int {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

struct GgufVocab {
  std::string model;  // tokenizer.ggml.model: "llama", "gpt2", "bert" or "t5"
  std::string pre;    // tokenizer.ggml.pre ("" when absent: "default")
  std::string name;   // general.name (llama.cpp keys a few token attributes on it, e.g. Phi-3)
  std::vector<std::string> tokens;
  std::vector<float> scores;        // empty: every score 0
  std::vector<int> tokenType;       // empty: every token normal
  std::vector<std::string> merges;  // "a b", best first (gpt2)
  // Special ids (absent, or outside the vocabulary in the file: the kind's defaults apply, as
  // llama.cpp's — llama bos 1, eos 2, unk 0; bert cls 101, unk 100, sep 102 — except gpt2, which
  // has none where llama.cpp would take id 11).
  std::optional<int> bos, eos, unk, sep, pad, cls, mask;
  std::optional<bool> addBos, addEos, addSpacePrefix;
  // t5: the normalizer's precompiled character map (bytes) and its whitespace rule.
  std::string charsmap;
  std::optional<bool> removeExtraWhitespaces;
};

struct GgufTokenizerOptions {
  bool parseSpecial = true;  // match control and unknown pieces written in the text
};

// One name of llama.cpp's pre-tokenizer table (tokenizer.ggml.pre; "default" when absent) and the
// regexes attnviz runs for it, in order (Hugging Face's dialect, compiled by ICU). `unsupported`
// is empty for a name attnviz tokenizes, else why it refuses that name.
struct GgufPreTokenizer {
  std::string name;
  std::vector<std::string> regexes;
  std::string unsupported;
};
// Every name attnviz knows, in the table's order.
std::vector<GgufPreTokenizer> ggufPreTokenizers();

// Reads tokenizer.ggml.* and general.name. Throws InputError "<file>: <problem>" (no tokenizer,
// wrong types, arrays shorter than the token list).
GgufVocab readGgufVocab(const GgufFile& file);

// Builds the tokenizer; `name` is what errors say. Throws InputError for an unsupported model or
// pre-tokenizer, duplicate tokens, bad merges or special ids.
std::unique_ptr<Tokenizer> makeGgufTokenizer(const GgufVocab& vocab, const std::string& name,
                                             const GgufTokenizerOptions& options = {});

// readGgufVocab + makeGgufTokenizer (the one-argument form is declared in tokenizer.h).
std::unique_ptr<Tokenizer> loadGgufTokenizer(const GgufFile& file,
                                             const GgufTokenizerOptions& options);

}  // namespace attnviz
