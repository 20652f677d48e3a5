// attnviz session: what an encoder's view adds to a model's: which text each token
// came from when the input is a pair, the tokenizer's special tokens, and the block of the
// matrix the user asked to see (BertViz's "A -> B" and the like), with the special tokens
// greyed or hidden. The block is a view of the session's matrix (Session::setBlock), so the
// app's heatmap, its export and `attnviz export --scene` cut and renormalise it the same way.
// No window, no GL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnviz {

class Tokenizer;

// Which block of a pair's matrix is shown: rows from the first text, keys from the second.
enum class PairSlice { All, AtoA, BtoB, AtoB, BtoA };
constexpr int kPairSliceCount = 5;
const char* pairSliceKey(PairSlice s);    // "all", "a-a", "b-b", "a-b", "b-a" (scenes)
const char* pairSliceLabel(PairSlice s);  // "All", "A\u2192A", ...
std::optional<PairSlice> pairSliceFromKey(const std::string& key);

// What happens to the tokenizer's special tokens ([CLS], [SEP], [PAD], <s>, </s>): shown as
// any token, greyed out on screen, or hidden (their rows and columns leave the matrix and each
// remaining row is renormalised over the keys still shown).
enum class SpecialTokens { Show, Grey, Hide };
const char* specialTokensKey(SpecialTokens s);  // "show", "grey", "hide" (scenes)
std::optional<SpecialTokens> specialTokensFromKey(const std::string& key);

// Per token of a model's input: the text it belongs to (0: A, 1: B) and whether it is one of
// the tokenizer's special tokens.
struct TokenSegments {
  bool pair = false;          // the input is a pair (B is not empty)
  std::vector<int> segment;   // [T] 0 or 1
  std::vector<std::uint8_t> special;  // [T]
  int size() const { return int(segment.size()); }
};
// From the pair template's type ids (Tokenizer::encodePair: BERT 0 for [CLS] A [SEP], 1 for
// B [SEP]; RoBERTa's tokenizer gives 1 to </s> B </s>); empty typeIds: one text, all A.
TokenSegments tokenSegments(const Tokenizer& tok, const std::vector<int>& ids,
                            const std::vector<int>& typeIds, bool pair);

// The part of a [T_q, T_k] matrix a view keeps: the rows and columns in ascending order of
// their index in the whole matrix (empty `rows` and `cols` with active() false: everything), and
// whether each kept row of a weights matrix is divided by its sum over the kept keys.
struct BlockView {
  bool on = false;
  std::vector<int> rows, cols;
  bool renormalise = false;
  std::string label;  // what a figure's title says of it: "A\u2192B", "specials hidden, ..."
  bool active() const { return on; }
  bool operator==(const BlockView&) const = default;
};
// The block for a slice and the specials' treatment; inactive when it keeps everything as is.
BlockView blockFor(const TokenSegments& seg, PairSlice slice, SpecialTokens specials);

// Cuts one head's matrix [Tq, Tk] to the block into out [rows, cols] (out resized). With
// `renormalise` (weights only) each row is divided by the sum of its finite kept values when
// that sum is > 0; -inf (masked) cells stay -inf.
void cutBlock(const float* m, int Tq, int Tk, const BlockView& b, bool renormalise,
              std::vector<float>& out);

// The vocabulary's kind in one word from Tokenizer::kind(): "WordPiece", "BPE", "Unigram",
// "SentencePiece"; the kind itself when it names none of them.
std::string vocabularyKind(const std::string& tokenizerKind);

// A sentence-transformers folder's pooling (modules.json names a Pooling module, whose
// config.json says the mode): "mean", "cls", "max", "mean (sqrt len)", "last token", "weighted
// mean"; "" for any other folder or a file it cannot read.
std::string sentenceTransformersPooling(const std::string& dir);

}  // namespace attnviz
