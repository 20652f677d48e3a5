// attnviz model: the one tokenizer interface every vocabulary kind implements (GPT-2's
// vocab.json + merges.txt, tokenizer.json, SentencePiece's tokenizer.model, GGUF metadata).
//
// Ids are exactly those the model runs on. encode(text, true) adds the special tokens the
// tokenizer's own files say to add (Llama's BOS: tokenizer_config.json's add_bos_token, the
// tokenizer.json post-processor, GGUF's add_bos_token); encode(text, false) adds none.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz {

// Two texts encoded as one input for an encoder: the ids and, one per id, its token type
// (segment) id as the tokenizer's pair template gives it (BERT: 0 for [CLS] A [SEP], 1 for
// B [SEP]).
struct PairEncoding {
  std::vector<int> ids;
  std::vector<int> typeIds;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text -> ids. Throws InputError when the text needs a piece the vocabulary cannot express
  // (a byte with no token and no unk token), naming the character.
  virtual std::vector<int> encode(std::string_view text, bool addSpecial = true) const = 0;
  // An encoder-decoder's target text -> ids (Marian: the target side's SentencePiece model);
  // the same as encode() for every other tokenizer.
  virtual std::vector<int> encodeTarget(std::string_view text, bool addSpecial = true) const {
    return encode(text, addSpecial);
  }

  // The raw bytes a token stands for (byte-fallback tokens are their byte; SentencePiece's
  // U+2581 is a space; special tokens are their text). Throws InputError for an id outside the
  // vocabulary.
  virtual std::string pieceBytes(int id) const = 0;

  // The bytes of a token sequence joined (special tokens included, as their text): the text back.
  // A SentencePiece-style vocabulary drops the one leading space its normalizer added.
  virtual std::string decode(const std::vector<int>& ids) const;

  // Number of ids (the largest id + 1).
  virtual int size() const = 0;
  virtual bool contains(int id) const { return id >= 0 && id < size(); }

  // Special ids, when the vocabulary has them.
  virtual std::optional<int> bos() const { return std::nullopt; }
  virtual std::optional<int> eos() const { return std::nullopt; }
  // The id unknown characters map to, when the vocabulary has one.
  virtual std::optional<int> unk() const { return std::nullopt; }
  // The masked-LM mask token ([MASK], <mask>), when the vocabulary has one.
  virtual std::optional<int> mask() const { return std::nullopt; }

  // A and B as one input, through the pair template (tokenizer.json's post_processor pair:
  // TemplateProcessing's "pair", BertProcessing's [CLS] A [SEP] B [SEP], RobertaProcessing's
  // <s> A </s></s> B </s>; a BERT vocab.txt or GGUF bert: [CLS] A [SEP] B [SEP]). addSpecial
  // false leaves the template's special tokens out and keeps the sequences' type ids. The type
  // ids are the tokenizer's (RobertaProcessing gives 1 to </s> B </s>, as Hugging Face's
  // tokenizers does; RoBERTa models themselves have one type and run on zeros). The default
  // throws InputError "<kind>: this tokenizer has no pair template".
  virtual PairEncoding encodePair(std::string_view a, std::string_view b,
                                  bool addSpecial = true) const;
  virtual bool isSpecial(int /*id*/) const { return false; }

  // Special tokens written in the text (`<|endoftext|>`, `<s>`, `<|im_start|>`): on (the
  // default), each is that token; off, it is plain text and tokenized as such (llama.cpp's
  // parse_special). Pieces that are not special stay matched either way: GGUF's user-defined
  // pieces, tokenizer.json's added tokens without "special" (as llama.cpp and Hugging Face's
  // split_special_tokens do). GPT-2's vocab.json + merges.txt matches none either way.
  void setParseSpecial(bool on) { parseSpecial_ = on; }
  bool parseSpecial() const { return parseSpecial_; }

  // "GPT-2 byte-level BPE (vocab.json + merges.txt)", "tokenizer.json: BPE, byte fallback",
  // "SentencePiece (tokenizer.model)", "GGUF llama", ...
  virtual std::string kind() const = 0;

  // A one-line, readable label for axis labels: a leading space (or a lone one) shows as U+2423,
  // a newline as U+21B5, a tab as U+2192, other control bytes and invalid UTF-8 as \xNN.
  std::string label(int id) const;
  // The piece for `tokenize --pieces`: the bytes on one line, with \n, \r and \t escaped, other
  // control bytes and invalid UTF-8 as \xNN.
  std::string printable(int id) const;

 protected:
  bool parseSpecial_ = true;
};

// label() and printable() of raw bytes (shared by every vocabulary kind).
std::string tokenLabelOf(const std::string& bytes);
std::string tokenPrintableOf(const std::string& bytes);

// The tokenizer of a Hugging Face model folder: tokenizer.json, else tokenizer.model
// (SentencePiece), else vocab.json + merges.txt (GPT-2), else a WordPiece vocab.txt (BERT's
// defaults, wordpiece.h); tokenizer_config.json is read when
// present. `vocabSize` > 0 (config.json's vocab_size) bounds the ids. Throws InputError naming
// the file and the problem (attnviz/model/tokenizers/folder.cpp).
std::unique_ptr<Tokenizer> loadFolderTokenizer(const std::string& dir, int vocabSize = 0);

// The tokenizer in a GGUF file's metadata (tokenizer.ggml.*); see gguf_vocab.h.
class GgufFile;
std::unique_ptr<Tokenizer> loadGgufTokenizer(const GgufFile& file);

// The tokenizer of a model folder: tokenizer.json, else tokenizer.model (SentencePiece), else
// GPT-2's vocab.json + merges.txt; tokenizer_config.json read when present. `vocabSize` is the
// model's (0 = unknown): ids must lie below it. Throws InputError naming the file.
std::unique_ptr<Tokenizer> loadFolderTokenizer(const std::string& dir, int vocabSize);

class GgufFile;
// The tokenizer in a GGUF file's metadata (tokenizer.ggml.*). Throws InputError naming the file.
std::unique_ptr<Tokenizer> loadGgufTokenizer(const GgufFile& file);

}  // namespace attnviz
