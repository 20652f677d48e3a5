// attnviz session: a model (any family) as the session's source (session.h, "A model source ...").
//
// The model's pass yields per-layer Q, K, V; the source hands one layer's to the session with
// Session::setTensors (so the heatmap, the temperature slider, the mask panel, the tooltip and
// the export see that layer as they see any tensors), and keeps the whole pass for the layers x
// heads grid and the next-token panel. Interventions (ablations, a mask and τ applied inside the
// pass) re-run the pass from the first layer they change, with Model::rerunFrom.
// No window, no GL: tested without a display (tests/session/model_source_test.cpp).
#pragma once

#include "attnviz/model/model.h"
#include "attnviz/session/encoder_view.h"
#include "attnviz/session/session.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnviz {

// A short name for titles: the folder's name, or NAME of a Hugging Face models--NAME cache path.
std::string modelName(const std::string& dir);
// The name figure titles give a model: modelName(dir), then " · Q4_K_M" (Model::quantization)
// when it is a quantized GGUF. The app and `export --model` / `export --scene` both title with it.
std::string modelTitleName(const Model& model, const std::string& dir);

// What a figure's title names for a model layer: "NAME · layer L", then " · ablated L:H, ..."
// for every head the pass ablated (in any layer: an earlier one changes this layer's inputs).
std::string modelLayerLabel(const std::string& name, int layer, const Interventions& iv);

// A text, or a pair (A, B) for an encoder, as a model runs it: the ids, the token types the
// pass takes (empty: all 0; RoBERTa's single type runs on zeros) and each token's text and
// special flag. A pair goes through the tokenizer's pair template. Throws InputError for a
// pair on a model that is not an encoder, an empty text or ids the model cannot run.
struct EncodedText {
  std::vector<int> ids, typeIds;
  TokenSegments segments;
};
// The chat format (`--chat`, the text panel's checkbox): the text as one user turn after an
// optional system turn, in the model's own chat template, ending with the assistant's opening
// (attnviz/model/tokenizers/chat_template.h). Off: the text as it is.
struct ChatSetting {
  bool on = false;
  std::optional<std::string> system;  // a system turn (--system); none when empty
  bool operator==(const ChatSetting&) const = default;
};
// With `chat` on, the text is wrapped in the model's chat template (encodeModelChat); a pair
// then throws InputError (a chat prompt is one text), as does a model without a template.
EncodedText encodeModelText(const Model& model, const std::string& text,
                            const std::string& textPair, const ChatSetting& chat = {});

// An encoder's masked-LM predictions at each of its mask tokens (the tokenizer's [MASK] or
// <mask>): the k most likely ids, most likely first, with the softmax over the whole vocabulary
// in double (as `attnviz fill` prints them). Empty when the pass has no mask token; throws
// InputError when the model has no masked-LM head or its tokenizer no mask token.
struct MaskFill {
  int position = 0;  // in the full ids ([CLS] included)
  std::vector<std::pair<int, double>> top;  // (id, probability)
};
std::vector<MaskFill> fillMasks(const Model& model, const ForwardResult& r, int k);

// What the Model panel says of an encoder: which layers see a local window (ModernBERT: its
// local_attention, a query seeing keys within window / 2) and which see every key, the
// vocabulary's kind (vocabularyKind) and a sentence-transformers folder's pooling ("" if none).
struct EncoderFacts {
  std::vector<int> localLayers, globalLayers;
  int window = 0;
  std::string vocabulary, pooling;
};
EncoderFacts encoderFacts(const Model& model);

// What a model runs on when no text was given (the app, a model scene without "text").
inline constexpr const char* kDefaultModelText = "The cat sat on the mat.";

class ModelSource {
 public:
  explicit ModelSource(std::shared_ptr<const Model> model);

  const Model& model() const { return *model_; }
  int layers() const { return model_->config().nLayer; }
  int heads() const { return model_->config().nHead; }

  // Runs the whole pass on `text` with the current interventions, and the baseline pass (none)
  // for the next-token panel's "before". Throws InputError (empty or too long text); the last
  // good pass is kept then. The same as adoptText(runText(model(), text, interventions(), …)).
  // `textPair` (an encoder's second text, "" for none) runs A and B through the tokenizer's
  // pair template (Tokenizer::encodePair), with its token types when the model has more than one
  // (RoBERTa runs on zeros, as Hugging Face's does). Throws InputError for a pair on a decoder.
  void setText(const std::string& text, const std::string& textPair = {});
  // The chat format of the next setText (and of the passes the GUI runs through runText); the
  // pass adopted last ran with chat().
  void setChat(const ChatSetting& chat) { nextChat_ = chat; }
  const ChatSetting& chat() const { return chat_; }

  // The passes setText runs, computed apart from the source, e.g. on a worker thread while the
  // window keeps drawing: it reads only the (immutable) model and its arguments.
  // Interventions that fit one length only (a painted [T, T] mask, document ids) are refit to
  // the new text: a custom matrix or a document list of another length is dropped (as the
  // synthetic session drops such a mask itself), the pass runs without it, and `note` says so.
  struct TextPass {
    std::string text, textPair;
    ChatSetting chat;  // the text wrapped in the chat template
    std::vector<std::string> tokens;
    std::vector<int> typeIds;  // the pass's token types (empty: all 0)
    TokenSegments segments;    // which text each token came from, and the special tokens
    ForwardResult baseline, pass;
    std::uint64_t interventionsVersion = 0;  // of the source when the pass started
    Interventions interventions;             // what the pass ran with (refit to its length)
    bool refit = false;                      // differs from the interventions it was given
    std::string note;                        // what the refit dropped, "" when nothing
  };
  // Both passes keep what `capture` asks for, and share the layers below the first one the
  // interventions change (the pass is the baseline re-run from there). Under a
  // PassProgress::Scope (model.h) it adds the layers it will compute to layersPlanned, counts
  // them as they are done, and throws PassCancelled when cancelled.
  static TextPass runText(const Model& model, const std::string& text,
                          const Interventions& iv, std::uint64_t interventionsVersion,
                          const Capture& capture = {}, const std::string& textPair = {},
                          const ChatSetting& chat = {});
  // Takes a pass from runText. Returns false and changes nothing when the interventions changed
  // after it started (run it again with the current ones). A refit pass replaces the
  // interventions with the ones it ran with (a new interventionsVersion) and keeps its note.
  bool adoptText(TextPass&& p);
  // What the last refit dropped (TextPass::note); says it once, then "".
  std::string takeNote() { return std::exchange(note_, std::string()); }
  // What the passes keep (Model's Capture): everything by default; the GUI asks for
  // Capture::view (the grid's thumbnails, the last logits row), and the shown layer's Q, K, V
  // are recomputed from its residual stream (layerQkv). Applies from the next setText.
  void setCapture(const Capture& c) { capture_ = c; }
  const Capture& capture() const { return capture_; }
  // Layer `layer`'s Q [H, T, d_h] and the KV heads' K, V [H_kv, T, d_h] (Model::layerQkv),
  // cached for the last layer asked until the pass changes. Throws InputError out of range.
  struct Qkv {
    Tensor3 q, k, v;
  };
  const Qkv& layerQkv(int layer);
  std::shared_ptr<const Model> sharedModel() const { return model_; }
  // Bumped by every change of the interventions.
  std::uint64_t interventionsVersion() const { return ivVersion_; }
  const std::string& text() const { return text_; }
  const std::string& textPair() const { return textPair_; }
  // Per token: its text (A or B) and whether it is a special token (encoder_view.h).
  const TokenSegments& segments() const { return segments_; }
  // The pass's token types (empty: all 0), for passes run apart from the source (Fill).
  const std::vector<int>& typeIds() const { return typeIds_; }
  bool ready() const { return !pass_.layers.empty(); }
  const ForwardResult& pass() const { return pass_; }
  // The same text without interventions (the next-token and fill panels' "before").
  const ForwardResult& baselinePass() const { return baseline_; }
  // Token labels: the BPE pieces, a leading space shown as U+2423 (Gpt2Tokenizer::label).
  const std::vector<std::string>& tokens() const { return tokens_; }

  // Hands layer `layer`'s Q, K, V and the token labels to the session. The session's
  // parameters get the causal mask (the pass always has it); its other masks, τ and the view
  // stay. Throws UsageError when the layer is out of range.
  void showLayer(Session& session, int layer);
  // The model's own stage of the shown layer (Session::setSourceStages, attribution.h) while it
  // is the one shown (setShownStage), and nothing otherwise: the value norms ‖v_j W_O^h‖ (one
  // [T, d_h] x [d_h, d] product a head) for ViewStage::ValueWeighted, the rollout up to the
  // layer for ViewStage::Rollout when the text has at most kRolloutMaxTokens tokens (one T³
  // product a layer below it). showLayer calls it; call it again after setShownStage. Each is
  // computed once per pass and layer.
  void showStages(Session& session);
  static constexpr int kRolloutMaxTokens = 1024;
  // The shown layer's q and k row norms before and after the family's q/k norm
  // (Model::layerQkNorms: Qwen3, Gemma 3, OLMo 2), computed once per pass and layer; heads 0 for
  // a family without one, or before a layer is shown.
  const Model::QkNorms& shownQkNorms();
  void setShownStage(ViewStage stage) { shownStage_ = stage; }
  ViewStage shownStage() const { return shownStage_; }
  // The name showLayer puts in the session's figure titles (modelLayerLabel); empty: none.
  void setName(std::string name) { name_ = std::move(name); }
  const std::string& name() const { return name_; }
  int shownLayer() const { return layer_; }

  // ---- interventions ----------------------------------------------------------------------
  const Interventions& interventions() const { return iv_; }
  bool ablated(int layer, int head) const;
  // Ablates (or restores) one head and re-runs the pass from its layer.
  void setAblated(int layer, int head, bool ablate);
  // "RoPE off in this layer": q and k of `layer` are not rotated (re-runs from that layer).
  bool ropeOff(int layer) const;
  void setRopeOff(int layer, bool off);
  // The session's mask and τ inside the pass: in `layer`, or in every layer when layer < 0.
  // The causal term is the pass's own, so only the other masks carry over.
  void applyParams(const AttentionParams& p, int layer);
  // Back to the plain pass.
  void clearInterventions();
  // Re-runs with `iv` from the lowest layer whose entry differs from the current one.
  void setInterventions(const Interventions& iv);

  // ---- deferred re-runs ---------------------------------------------------------------------
  // A re-run of a 1B model takes seconds: the app defers them to a worker thread. With
  // setDeferReruns(true) the calls above record the interventions (interventions(), ablated()
  // and the version change at once) and leave the pass as it was: stale() until a re-run
  // computed apart (rerunJob, runRerun on any thread, adoptRerun) is adopted. A text pass
  // (runText) carries the interventions as well.
  void setDeferReruns(bool defer) { deferReruns_ = defer; }
  // The first layer whose interventions differ from the ones the pass ran with (layers() when
  // none), and whether there is one.
  int staleFrom() const;
  bool stale() const { return ready() && staleFrom() < layers(); }
  struct Rerun {
    ForwardResult pass;  // a copy of the source's (its layers shared) re-run from `from`
    Interventions interventions;
    std::uint64_t interventionsVersion = 0;
    int from = 0;
  };
  // The re-run the interventions need: the pass (its layers shared, not copied) and staleFrom().
  Rerun rerunJob() const;
  // Computes a job (Model::rerunFrom; under a PassProgress scope it plans and counts its layers
  // and may be cancelled). Reads only the model and the job.
  static void runRerun(const Model& model, Rerun& job);
  // Takes a computed job. Returns false and changes nothing when the interventions changed after
  // it was made (make another).
  bool adoptRerun(Rerun&& job);
  // Back to the interventions the pass ran with (a cancelled re-run): nothing is stale after.
  void revertInterventions();

  // Next-token candidates after the last token: with the interventions, and without them.
  std::vector<TokenProb> topK(int k) const;
  std::vector<TokenProb> baselineTopK(int k) const;
  // A candidate's readable text (label()).
  std::string tokenLabel(int id) const { return model_->tokenizer().label(id); }

  // Pushes the shown layer to the session again after a re-run (its activations changed).
  // Counts re-runs, for tests and the status line.
  int reruns() const { return reruns_; }
  int lastRerunFrom() const { return lastFrom_; }

 private:
  void rerun(const Interventions& iv, int fromLayer);

  std::shared_ptr<const Model> model_;
  Capture capture_;
  Qkv qkv_;
  int qkvLayer_ = -1;  // the layer qkv_ holds; -1 after the pass changes
  std::string text_, textPair_;
  ChatSetting chat_, nextChat_;
  std::vector<int> typeIds_;
  TokenSegments segments_;
  std::string name_;
  ForwardResult pass_, baseline_;
  std::vector<std::string> tokens_;
  Interventions iv_;
  std::uint64_t ivVersion_ = 0;
  int layer_ = -1;
  int reruns_ = 0, lastFrom_ = -1;
  bool deferReruns_ = false;
  // A re-run's pass from `fromLayer` becomes the shown one (rerun, adoptRerun).
  void takeRerun(ForwardResult&& pass, int fromLayer);
  std::uint64_t passVersion_ = 0;  // bumped whenever pass_ changes
  ViewStage shownStage_ = ViewStage::Weights;  // setShownStage
  struct StageCache {
    std::uint64_t pass = ~0ull;
    int layer = -1;
    std::vector<float> norms, rollout;
    Model::QkNorms qk;
    bool qkDone = false;
  } stages_;
  std::string note_;
};

}  // namespace attnviz
