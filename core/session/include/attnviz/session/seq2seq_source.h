// attnviz session: an encoder-decoder (T5, BART, Marian) as the session's source.
//
// One pass (Model::forwardSeq2Seq) runs the source text through the encoder and the target
// through the decoder. Every attention site of the pass (the encoder's layers, then per decoder
// layer its self site and its cross site) becomes one layer of a Dump (dump.h): an encoder site
// key_tokens x key_tokens, a decoder self site tokens x tokens (causal), a cross site tokens x
// key_tokens (rows: the target, columns: the source). The app shows it as it shows a dump (the
// heatmap, the layers x heads grid with a site a row); `export --scene` builds the same dump.
// Ablations address a site (SiteId) and re-run the pass. No window, no GL.
#pragma once

#include "attnviz/formats/dump.h"
#include "attnviz/model/model.h"
#include "attnviz/session/model_source.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnviz {

// A site's label in the app and figure titles: "enc 0", "dec 0 self", "dec 0 cross".
std::string seq2seqSiteLabel(const SiteId& s);
// The command line's and a scene's name of a site: "enc:L", "dec:L:self", "dec:L:cross" (and
// "dec:L" for the self site). nullopt when the text names none of the model's sites.
std::optional<SiteId> parseSeq2SeqSite(const std::string& text, const ModelConfig& c);
std::string seq2seqSiteName(const SiteId& s);  // the form parseSeq2SeqSite reads
// An ablation as `attnviz model --ablate` and a scene's model.ablate write it: "L:H" the decoder's
// self site, "enc:L:H" the encoder's, "cross:L:H" the cross site. nullopt when the text is none
// of these; whether the model has the site and head is the caller's to check.
std::optional<std::pair<SiteId, int>> parseSeq2SeqAblation(const std::string& text);
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
  // a token ends the target (EOS), and the token appended to the decoder's input with the pass
  // run again (the target text becomes the decoded target). appendTarget throws InputError
  // past the model's positions; the last good pass is kept then.
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

  // The decoder's next-token candidates after the last target token, with and without the
  // interventions.
  std::vector<TokenProb> topK(int k) const { return Model::topK(pass_, k); }
  std::vector<TokenProb> baselineTopK(int k) const { return Model::topK(baseline_, k); }
  std::string tokenLabel(int id) const { return model_->tokenizer().label(id); }
  const ForwardResult& pass() const { return pass_; }

 private:
  void run();

  std::shared_ptr<const Model> model_;
  std::vector<SiteId> sites_;
  std::string source_, target_;
  std::vector<int> sourceIds_, targetIds_;
  Interventions iv_;
  std::vector<int> masked_;
  ForwardResult pass_, baseline_;
  // iv_ with the masked source positions in every cross site's mask.
  Interventions effective() const;
  std::vector<int> maskedInside() const;
};

}  // namespace attnviz
