// attnviz session: an encoder-decoder (T5, BART, Marian) as the session's source.
//
// One pass (Model::forwardSeq2Seq) runs the source text through the encoder and the target
// through the decoder. Every attention site of the pass (the encoder's layers, then per decoder
// layer its self site and its cross site) becomes one layer of a Dump (dump.h): an encoder site
// key_tokens x key_tokens, a decoder self site tokens x tokens (causal), a cross site tokens x
// key_tokens (rows: the target, columns: the source). The app shows it as it shows a dump (the
// heatmap, the layers x heads grid with a site a row); `export --scene` builds the same dump.
// Ablations address a site (SiteId) and re-run the pass. No window, no GL.
//
// The passes can run apart from the source (the app's worker thread, with PassProgress and
// Cancel): passJob / stepJob make a job from the source's state, runJob computes it reading only
// the (immutable) model and the job, adopt takes it unless the interventions (or, for a step, the
// pass it continues) changed meanwhile. Watched translation decodes as `attnviz generate` does:
// the pass's K and V (the decoder's self sites and the encoder's cross keys) become the caches
// once, then each new token is one decode step over them, its rows appended to the pass shown.
#pragma once

#include "attnviz/formats/dump.h"
#include "attnviz/model/model.h"
#include "attnviz/session/model_source.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnviz {

// A site's label in the app and figure titles: "enc 0", "dec 0 self", "dec 0 cross".
std::string seq2seqSiteLabel(const SiteId& s);
// The command line's and a scene's name of a site: "enc:L", "dec:L:self", "dec:L:cross"
// (parseSiteName in request.h reads it; an ablation's form is siteAblationText's).
std::string seq2seqSiteName(const SiteId& s);
// Hidden source positions (`--mask-source`, a scene's model.mask_source, the panel's box):
// sorted and made unique in place; throws InputError "mask-source P: past the source's S tokens"
// or "mask-source: every source position masked" for a source of S tokens.
void checkMaskedSource(std::vector<int>& positions, int sourceTokens);
// Masks those source positions in every cross site of iv: a key-only mask expression, the same at
// every target row, so it holds as the decoder grows. Nothing for an empty list.
void hideSourcePositions(Interventions& iv, const ModelConfig& c, const std::vector<int>& positions);

class Seq2SeqSource {
 public:
  explicit Seq2SeqSource(std::shared_ptr<const Model> model);

  const Model& model() const { return *model_; }
  // The decoder's input for a target text as `attnviz model --target` builds it: its start id,
  // then the text's tokens without a final EOS. An empty text: the start id alone.
  std::vector<int> targetIds(const std::string& target) const;
  // Runs the pass (and the baseline, without interventions, for the next-token panel's
  // "before"). An empty source runs on kDefaultModelText. Throws InputError (too long, bad
  // ids); the last good pass is kept then.
  void setTexts(const std::string& source, const std::string& target);
  // Watched translation, a token at a time: the decoder's greedy next token after the last
  // target token (the interventions applied; never the pad token, as `attnviz generate`), whether
  // a token ends the target (EOS), and the token appended to the decoder's input by one decode
  // step over the caches (stepJob; the target text becomes the decoded target). appendTarget
  // throws InputError past the model's positions; the last good pass is kept then.
  int greedyNext() const;
  bool endsTarget(int id) const;
  void appendTarget(int id);
  const std::string& sourceText() const { return source_; }
  const std::string& targetText() const { return target_; }
  // The ids of the last good pass: the source's (the cross sites' columns) and the decoder's
  // input (its start id, then the target's tokens: the rows).
  const std::vector<int>& sourceIds() const { return sourceIds_; }
  const std::vector<int>& decoderIds() const { return targetIds_; }

  // The sites in pass order (ModelConfig::sites), and the index of one in it (-1: none).
  const std::vector<SiteId>& sites() const { return sites_; }
  int siteIndex(const SiteId& s) const;
  // The pass as a dump: layer i is sites()[i], named seq2seqSiteLabel; the query tokens are the
  // target's, the key tokens the source's.
  Dump dump() const;

  const Interventions& interventions() const { return iv_; }
  bool ablated(const SiteId& s, int head) const;
  // Ablates (or restores) one head of a site and re-runs the pass.
  void setAblated(const SiteId& s, int head, bool ablate);
  // Every ablated head with its site, in site order (scenes).
  std::vector<std::pair<SiteId, int>> ablations() const;
  // Source positions no cross site may read (`attnviz model --mask-source`): their columns masked
  // in every decoder layer's cross-attention, in the pass and in watched translation. Sorted and
  // unique. Throws InputError for a position past the source, or every one of them; the last
  // good pass is kept then. Positions past a later, shorter source are ignored.
  void setMaskedSource(std::vector<int> positions);
  const std::vector<int>& maskedSource() const { return masked_; }

  // ---- passes computed apart ---------------------------------------------------------------
  // With setDeferPasses(true) setAblated and setMaskedSource record the change (ablated(),
  // maskedSource() and interventionsVersion() change at once) and leave the pass as it was:
  // stale() until a pass job made after the change is adopted.
  void setDeferPasses(bool defer) { defer_ = defer; }
  // Bumped by every change of the ablations or the masked source positions.
  std::uint64_t interventionsVersion() const { return ivVersion_; }
  bool ready() const { return !pass_.layers.empty(); }
  bool stale() const { return ready() && passIvVersion_ != ivVersion_; }
  // Back to the ablations and masked positions the pass ran with (a cancelled pass).
  void revertInterventions();
  // Bumped by every adopted job (a pass or a step).
  std::uint64_t passVersion() const { return passVersion_; }

  struct Caches;  // the decoder's K/V and the cross K/V of a pass (with and without the
                  // interventions), held by the source between steps and by a step job
  struct Job {
    enum class Kind { Pass, Step } kind = Kind::Pass;
    // Pass: the texts (an empty source runs on kDefaultModelText) and what it runs with.
    std::string source, target;
    Interventions iv;          // the ablations
    std::vector<int> masked;   // the masked source positions as set (past the source: ignored)
    std::uint64_t interventionsVersion = 0, passVersion = 0;
    // Step: the pass it continues (its layers shared), its ids, and the caches (made from the
    // pass by the first step). `id` >= 0: append that token; else the greedy one.
    std::shared_ptr<Caches> caches;
    bool synthesized = false;  // the pass was grown by steps (the caches must come with it)
    // Results: the ids and both passes (a step's pass has the new token's rows appended).
    std::vector<int> sourceIds, targetIds;
    ForwardResult pass, baseline;
    int id = -1;
    bool eos = false;  // a step whose greedy token ends the target: nothing appended
    double stepSeconds = 0;  // a step: the decode step(s) alone
  };
  // A pass on these texts with the current interventions (the texts the source shows: their
  // ids as they are).
  Job passJob(const std::string& source, const std::string& target) const;
  // The next token of a watched translation (id < 0: the greedy one, never the pad token; an
  // end token then ends it, appending nothing) over the last pass. The source's caches move into the job (the source's next stepJob makes them
  // again from the pass if this one is not adopted). Throws InputError before any pass.
  Job stepJob(int id = -1);
  // Computes a job. A pass: the source's and target's ids, the pass and its baseline (the
  // layers they share run once: a pass without interventions is its own baseline). Under a
  // PassProgress scope it adds the layers it will compute to layersPlanned, counts them, and
  // throws PassCancelled when cancelled. A step: the caches from the pass when the job has none,
  // then one decode step (two with interventions: the baseline's). Throws InputError for bad
  // texts or a target past the model's positions. Reads only the model and the job.
  static void runJob(const Model& model, Job& job);
  // Takes a computed job. False, changing nothing, when the interventions changed after it was
  // made, or (a step) another pass was adopted meanwhile.
  bool adopt(Job&& job);

  // The decoder's next-token candidates after the last target token, with and without the
  // interventions.
  std::vector<TokenProb> topK(int k) const { return Model::topK(pass_, k); }
  std::vector<TokenProb> baselineTopK(int k) const { return Model::topK(baseline_, k); }
  std::string tokenLabel(int id) const { return model_->tokenizer().label(id); }
  const ForwardResult& pass() const { return pass_; }
  const ForwardResult& baselinePass() const { return baseline_; }
  std::shared_ptr<const Model> sharedModel() const { return model_; }

 private:
  std::shared_ptr<const Model> model_;
  std::vector<SiteId> sites_;
  std::string source_, target_;
  std::vector<int> sourceIds_, targetIds_;
  Interventions iv_;
  std::vector<int> masked_;
  ForwardResult pass_, baseline_;
  bool defer_ = false;
  std::uint64_t ivVersion_ = 0, passIvVersion_ = 0, passVersion_ = 0;
  Interventions passIv_;            // what the pass ran with (revertInterventions)
  std::vector<int> passMasked_;
  std::shared_ptr<Caches> caches_;  // the pass's, once a step made them
  bool synthesized_ = false;        // pass_ was grown by decode steps
  // Records a change of the interventions: runs the pass unless deferred.
  void changed();
  std::vector<int> maskedInside() const;
};

}  // namespace attnviz
