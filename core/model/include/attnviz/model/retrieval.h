// attnviz core (model): retrieval heads (Wu et al. 2024, arXiv 2404.15574). A needle sentence is
// hidden at a chosen depth in a filler text and a question asks for it; the model answers by
// copying. A head "retrieves" a token when, at the step that generates it, the head's most
// attended key is that same token inside the needle. A head's retrieval score is the share of the
// answer's tokens it retrieved in that sense. Masking the few heads with the highest scores should
// break the copy; masking as many random heads should not. Decoders only; CPU.
#pragma once

#include "attnviz/model/model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

// What to build a needle-in-a-haystack prompt from.
struct NeedleSpec {
  std::string filler;    // the haystack
  std::string needle;    // the sentence to find ("And the name of the servant was Jehoiada.")
  std::string question;  // asked after the haystack ("And the name of the servant was")
  std::string answer;    // what the model should copy from the needle ("Jehoiada")
  double depth = 0.5;    // where the needle goes, as a share of the filler (0: first, 1: last)
};

// One prompt, tokenized as a whole (the model's own special tokens included), with the spans
// located in it: ids[needleBegin, needleEnd) are the needle's tokens, and the answer's ids sit at
// ids[answerBegin, answerBegin + answer.size()), inside the needle.
struct NeedleCase {
  std::string text;
  std::vector<int> ids;
  int needleBegin = 0, needleEnd = 0;
  int answerBegin = 0;
  std::vector<int> answer;
  double depth = 0.0;
};

// The prompt text is filler[0, cut) + needle + " " + filler[cut, end) + " " + question, with `cut`
// the sentence start (after ". ", "; ", a line end..., or the filler's start or end) nearest to
// depth·|filler|. The needle's span is where the whole prompt's ids stop agreeing
// with the ids of the text before the needle (from the front) and of the text after it (from the
// back); the answer is its ids without special tokens (with a leading space when that is how the
// needle holds it), found inside that span. Throws UsageError for a depth outside [0, 1] or an
// empty part, InputError when the answer's tokens are not in the needle as the prompt tokenizes it,
// or the prompt and the answer do not fit the context.
NeedleCase buildNeedleCase(const Model& m, const NeedleSpec& spec);

// What one greedy copy did. `generated` holds the |answer| tokens the model produced, `top[s]`
// (s < |answer|) every head's most attended key at the step that produced generated[s]: [L * H],
// layer-major, for the query that step ran (the prompt's last token, then each generated one).
struct CopyTrace {
  std::vector<int> generated;
  std::vector<std::vector<int>> top;
  bool correct = false;  // generated == answer
  // Bytes the prefix's pass kept (ForwardResult::bytes: the residual stream, K and V, the last
  // logits row; no Q).
  std::size_t prefixBytes = 0;
};

// Greedy decoding of |answer| tokens after the prompt, with `iv` in every step. The prompt's last
// token runs as the first decode step, so its attention row is read like the others.
CopyTrace traceCopy(const Model& m, const NeedleCase& c, const Interventions& iv = {});

// The heads that retrieved: hits[l * H + h] counts the distinct answer tokens w for which some
// step s generated w while head (l, h)'s top key j lay in [needleBegin, needleEnd) with ids[j] ==
// w. Pure bookkeeping over a trace, added to `hits` ([L * H], zero-filled by the caller).
void countRetrievals(const NeedleCase& c, const CopyTrace& t, std::vector<int>& hits);

// Per head, the mean over the cases of hits / |distinct answer tokens|: [L, H], layer-major.
struct RetrievalScores {
  int layers = 0, heads = 0;
  std::vector<float> score;
  std::vector<CopyTrace> traces;  // one per case, unmasked
  float at(int l, int h) const { return score[std::size_t(l) * std::size_t(heads) + h]; }
};
RetrievalScores retrievalScores(const Model& m, const std::vector<NeedleCase>& cases);

// log p(answer | prompt), teacher-forced: the sum over the answer's tokens of the log-softmax of
// the logits before each one (float64 softmaxes), with `iv` in the pass.
double answerLogProb(const Model& m, const NeedleCase& c, const Interventions& iv = {});

// A set of masked heads and what it does to the cases: the answer's mean log-probability, and how
// many greedy copies still come out right.
struct MaskOutcome {
  std::vector<std::pair<int, int>> heads;  // (layer, head)
  double meanLogProb = 0.0;
  int correct = 0, cases = 0;
};

// The top-k heads by score (ties: the earlier layer, then head), and `draws` random k-sets drawn
// from the other heads with a generator seeded by `seed`, each masked through the ablation
// machinery (the heads' outputs zeroed before W_o, in every step). Plus the unmasked baseline.
struct MaskComparison {
  MaskOutcome none, top;
  std::vector<MaskOutcome> random;
  double randomMeanLogProb() const;
  int randomCorrect() const;  // summed over the draws
};
MaskComparison compareMasks(const Model& m, const std::vector<NeedleCase>& cases,
                            const RetrievalScores& s, int k, int draws, std::uint64_t seed);

// The k highest-scoring heads (score > 0 or not), ties to the earlier layer, then head.
std::vector<std::pair<int, int>> topHeads(const RetrievalScores& s, int k);

}  // namespace attnviz
