// attnviz session: an encoder-decoder's cross attention read as a word alignment,
// and its alignment error rate against a gold alignment. No window, no GL.
//
// The two strips. The *source* strip shows the encoder's input tokens (the cross site's
// columns). The *target* strip shows the produced target tokens: the target text's tokens,
// without the decoder's start id (the decoder input is start id, then those tokens, so a cross
// site has one row more than the target strip has tokens). Each strip shows either its tokens
// (pieces) or its words:
//   - pieces: one unit per token, special tokens (T5's </s>) included;
//   - words:  a piece whose bytes start with a space (SentencePiece's U+2581, byte-level BPE's
//     leading space) starts a word, and so does the first piece after a special token; the
//     other pieces join the word before them. Special tokens (</s>, <s>, <pad>; not <unk>)
//     belong to no word and are not shown.
// Indices everywhere below (gold pairs, links, AER map) are 0-based units of these strips.
//
// Reading a row as a link. Decoder row r reads input token r (row 0 reads the start id) and
// predicts token r + 1 of the input, that is produced target token r. So:
//   - shift on (the right reading): produced target token t is read on row t, the row that
//     *produces* it;
//   - shift off (the naive reading, one late): produced token t is read on row t + 1, the row
//     where t is already the input.
// For a target word of several pieces the rows of its pieces are averaged; for a source word
// the columns of its pieces are summed (the word's share of the row). A word pair's weight so
// lies in [0, 1], and argmax links are those of tools/train/t5_card.py (which sums the rows:
// the same argmax), so the app reproduces the shipped model card's figures.
//
// Links: argmax (each target unit links to the source unit of largest weight, the first on a
// tie, as numpy's argmax: a row whose weight all went to special tokens (exactly 0 on every
// word) links to source unit 0, as the card counts it) or threshold (every pair of weight >= the
// threshold).
// AER = 1 - 2|A ∩ G| / (|A| + |G|) (Och & Ney 2003 with sure links only): A the predicted
// links, G the gold ones. Over several sentences the counts are pooled (added) first.
#pragma once

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/dump.h"

#include <Eigen/Dense>

#include <compare>
#include <string>
#include <vector>

namespace attnviz {

class Tokenizer;
class Seq2SeqSource;

// One link: source unit `source` with target unit `target`.
struct AlignLink {
  int source = 0;
  int target = 0;
  auto operator<=>(const AlignLink&) const = default;
};
using Alignment = std::vector<AlignLink>;  // sorted by (source, target), no repeats

// The units of one strip.
struct AlignUnits {
  std::vector<int> unitOf;          // per token: its unit, -1 for none (a special token in words)
  std::vector<std::string> labels;  // per unit, as the strip shows it
  int count() const { return int(labels.size()); }
};

// The tokens `ids` as units: pieces (every token) or words (see the top of this file).
AlignUnits alignUnits(const Tokenizer& tok, const std::vector<int>& ids, bool words);

struct AlignmentStrips {
  AlignUnits source;  // over the source ids (the cross site's columns)
  AlignUnits target;  // over the produced target tokens (decoder ids without the start id)
};
AlignmentStrips alignmentStrips(const Seq2SeqSource& q, bool words);

// A gold alignment typed as Pharaoh pairs "S-T S-T ..." (S a source unit, T a target unit, both
// 0-based over the strips; whitespace between pairs; repeats count once). Empty text: no links.
// Throws InputError with one line naming the first bad pair: not two integers joined by '-', or
// an index past its strip (nSource / nTarget units; a negative count skips that check).
Alignment parsePharaoh(const std::string& text, int nSource = -1, int nTarget = -1);
std::string pharaohText(const Alignment& a);  // "S-T S-T", the form parsePharaoh reads

enum class AlignRule { Argmax, Threshold };
struct AlignOptions {
  AlignRule rule = AlignRule::Argmax;
  float threshold = 0.3f;  // the Threshold rule's
  bool shift = true;       // read produced token t on row t (on) or on row t + 1 (off)
  bool operator==(const AlignOptions&) const = default;
};

// A cross site's weights `w` ([H, rows, cols]: rows the decoder input, columns the source) as a
// [target units x source units] matrix for head `head` (-1: the mean over the heads), with the
// shift and the grouping above. Throws InputError when the shape does not fit the strips (rows
// must be the target strip's tokens + 1, cols its source tokens) or the head is out of range.
Eigen::MatrixXd unitWeights(const Tensor3& w, int head, const AlignmentStrips& strips, bool shift);

// The links of a unit weight matrix under the rule (argmax or threshold).
Alignment predictAlignment(const Eigen::MatrixXd& unitWeights, const AlignOptions& o);

// |A ∩ G|, |A| and |G|: add those of several sentences to pool them.
struct AerCounts {
  long long both = 0, predicted = 0, gold = 0;
  // 1 - 2 both / (predicted + gold); 0 when both alignments are empty.
  double aer() const;
  AerCounts& operator+=(const AerCounts& o);
};
AerCounts aerCounts(const Alignment& predicted, const Alignment& gold);
inline double alignmentErrorRate(const Alignment& predicted, const Alignment& gold) {
  return aerCounts(predicted, gold).aer();
}

// Every head of every cross site of a dump (layers in dump order: an encoder-decoder's decoder
// layers) against one gold alignment.
struct AerMap {
  int layers = 0, heads = 0;
  std::vector<int> sites;          // per map layer: its index among the dump's layers
  std::vector<AerCounts> counts;   // [layers x heads], row-major
  int bestLayer = -1, bestHead = -1;  // the lowest AER, the first one on a tie (row-major)
  double aer(int l, int h) const { return counts[std::size_t(l) * heads + h].aer(); }
  AerMap& operator+=(const AerMap& o);  // pools sentences (same shape); recomputes the best
  void findBest();
};
AerMap aerMap(const Dump& d, const AlignmentStrips& strips, const Alignment& gold,
              const AlignOptions& o);

}  // namespace attnviz
