// attnviz core: GPT-2's byte-level BPE tokenizer, on its own (no model needed).
//
// Encoding runs in three steps, exactly as GPT-2 does:
//   1. the pre-tokenizer splits the text with GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (Unicode letter, number and White_Space classes from ICU);
//   2. each piece's UTF-8 bytes become symbols (GPT-2's byte-to-unicode map is only how the vocab
//      and merges files spell bytes; in memory a symbol is its raw bytes);
//   3. the lowest-ranked adjacent pair from merges.txt is merged until no pair has a rank.
// Bytes that are not valid UTF-8 (possible in text from a command line) each count as one
// character that is neither a letter, a number nor a space, and keep their byte.
//
// A vocab.json may lack single bytes (a character-level model such as nanoGPT's): it loads, and
// only a text that needs a missing byte is refused (InputError naming the character). vocab.json
// names no unknown token, so there is none (a token spelt "<unk>" is an ordinary token here).
// Special tokens written in the text ("<|endoftext|>") are encoded as text, as GPT-2's own
// encoder does.
#pragma once

#include "attnviz/model/tokenizers/tokenizer.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attnviz {

// GPT-2's printable spelling of byte b in vocab.json and merges.txt: the byte itself for
// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF, else U+0100 + n in byte order. UTF-8.
std::string gpt2ByteToUnicode(unsigned char b);

// Step 1: the pieces of `text` (views into it, in order, covering it exactly).
std::vector<std::string_view> gpt2PreTokenize(std::string_view text);

class Gpt2Tokenizer : public Tokenizer {
 public:
  Gpt2Tokenizer() = default;

  // Reads vocab.json (token -> id) and merges.txt ("#version" line, then "a b" per line, best
  // first). Checks: JSON object of non-negative integer ids, no id twice, every id < vocabSize
  // (when vocabSize > 0) and below twice the number of tokens + 1024 (so no table is sized from
  // an unbounded id), every token spelt in the byte alphabet, every merge a pair of vocab tokens
  // whose concatenation is in the vocab. Throws InputError "<file>: <problem>".
  static Gpt2Tokenizer load(const std::string& vocabPath, const std::string& mergesPath,
                            int vocabSize = 0);
  // The same from the files' text; the names are what errors say.
  static Gpt2Tokenizer fromText(const std::string& vocabJson, const std::string& mergesText,
                                const std::string& vocabName, const std::string& mergesName,
                                int vocabSize = 0);

  // GPT-2 adds no special tokens, so `addSpecial` changes nothing.
  std::vector<int> encode(std::string_view text, bool addSpecial = true) const override;

  // The raw bytes of a token (may be part of a UTF-8 character); throws InputError when `id` is
  // not in the vocab.
  std::string pieceBytes(int id) const override;

  // The largest id + 1 (the number of entries in vocab.json when its ids are dense); at most the
  // model's vocab_size.
  int size() const override { return maxId_ + 1; }
  bool contains(int id) const override;
  // "<|endoftext|>" when vocab.json has it (GPT-2's BOS and EOS; never added by encode()).
  std::optional<int> bos() const override { return endOfText_; }
  std::optional<int> eos() const override { return endOfText_; }
  bool isSpecial(int id) const override { return endOfText_ && id == *endOfText_; }
  std::string kind() const override { return "GPT-2 byte-level BPE (vocab.json + merges.txt)"; }

  int entries() const { return static_cast<int>(ids_.size()); }
  int maxId() const { return maxId_; }
  int mergeCount() const { return static_cast<int>(merges_.size()); }

 private:
  std::unordered_map<std::string, int> ids_;    // raw bytes -> id
  std::vector<std::string> pieces_;             // id -> raw bytes
  std::vector<bool> present_;                   // id is in vocab.json
  // A merge of the tokens with ids a and b: its rank, and the id of the token it makes.
  struct Merge {
    int rank;
    int id;
  };
  // (a << 32 | b) -> the merge of a and b (a repeated pair keeps its last rank).
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::array<int, 256> byteIds_{};  // the id of each single byte's token, -1 where none
  int maxId_ = -1;
  std::string vocabName_;    // for errors
  std::optional<int> endOfText_;

  void bpe(std::string_view piece, std::vector<int>& out) const;
};

// BART's slow-tokenizer files (vocab.json + merges.txt, no tokenizer.json): what transformers'
// BartTokenizer builds from them, written as the tokenizer.json its converter makes (byte-level
// BPE, the special tokens <s> <pad> </s> <unk> <mask> cut out of the text, <mask> taking the
// spaces before it, RobertaProcessing: <s> A </s>, pairs <s> A </s></s> B </s>) and read by
// tokenizer_json.cpp. tokenizer_config.json's bos/eos/sep/cls/unk/pad/mask_token name other
// tokens when given. Checks the files as load() does. Throws InputError naming the file.
std::unique_ptr<Tokenizer> loadBartVocabTokenizer(const std::string& vocabPath,
                                                  const std::string& mergesPath,
                                                  const std::string& configPath,
                                                  int vocabSize = 0);

}  // namespace attnviz
