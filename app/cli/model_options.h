// attnviz app: the options shared by the subcommands that run a model (`model`, `export --model`).
#pragma once

#include "cli/options.h"

#include "attnviz/model/model.h"
#include "attnviz/session/model_source.h"  // modelName, modelLayerLabel
#include "attnviz/session/request.h"       // parseIdList, parseSiteAblation, ...
#include "attnviz/formats/scene.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnviz::app {

// --model DIR (--text TEXT | --ids 1,2,3) [--ablate L:H]... The attention options (--mask,
// --mask-file, --alibi, --temperature; added by the caller) apply in every layer.
struct ModelCliOptions {
  std::string dir, text, ids;
  std::string textPair;   // --text-pair B (encoders: the tokenizer's pair template with --text)
  // --target TEXT / --target-ids 1,2,3: an encoder-decoder's decoder input (--text is the source)
  std::string target, targetIds;
  std::string maxMemory;  // --max-memory SIZE (empty: defaultMemoryBudget())
  std::vector<std::string> ablate;
  std::vector<std::string> ropeOff;  // --rope-off L (model, generate): layers run unrotated
  std::vector<std::string> residualEdits;  // --residual-edit L:P:D:zero|mean (model)
  bool chat = false;       // --chat: --text as a user turn in the model's chat format
  std::string system;      // --system TEXT: a system turn before it (with --chat)
  std::string maskSource;  // --mask-source 2,5: source positions no cross site may read
  bool prepareOnly = false;  // runModelFromOptions opens and checks, but runs no pass
  // --text may be longer than the model's context (a StreamingLLM cache runs past it; --ids
  // never had the limit before a pass)
  bool pastContext = false;
  // An encoder-decoder without --target starts its decoder at its start id (generate).
  bool startWithoutTarget = false;
  Capture capture;           // what the pass keeps (everything unless the command narrows it)
};

// `required` = false leaves --model optional (export also takes --scene or Q/K/V).
// --model, --text or --ids, --ablate, --max-memory, --chat and --system: the parts below.
void addModelOptions(CLI::App& app, ModelCliOptions& o, bool required);
// --fast-activations: setFastActivations(true) as it is parsed (the whole process: passes and
// decode).
void addFastActivationsOption(CLI::App& app);
// Its parts, which the window's command line registers too (it runs no --ids).
void addModelPathOption(CLI::App& app, ModelCliOptions& o, bool required);  // --model MODEL
CLI::Option* addTextOption(CLI::App& app, ModelCliOptions& o);              // --text TEXT
// --ablate L:H | enc:L:H | cross:L:H (repeatable; parseSiteAblation reads each).
void addAblateOption(CLI::App& app, ModelCliOptions& o);
void addMaxMemoryOption(CLI::App& app, ModelCliOptions& o);                  // --max-memory SIZE
// --text-pair B: an encoder's second text (`model`, `fill`).
void addTextPairOption(CLI::App& app, ModelCliOptions& o);
// --target TEXT / --target-ids 1,2,3: an encoder-decoder's decoder input (`model`; the window
// takes --target alone: `ids` = false).
void addTargetOptions(CLI::App& app, ModelCliOptions& o, bool ids = true);
// --mask-source P,P,...: an encoder-decoder's source positions hidden from every cross site
// (`model`, `generate`).
void addMaskSourceOption(CLI::App& app, ModelCliOptions& o);
// --rope-off L (repeatable): layer L runs with q and k not rotated (RoPE models), the GUI's
// "RoPE off in layer L". For `model` and `generate`.
void addRopeOffOption(CLI::App& app, ModelCliOptions& o);
// --residual-edit L:P:D:zero|mean (repeatable): dimension D of the stream layer L writes, at
// position P (or 'all'), set to zero or to its mean over the positions, inside the pass (`model`).
void addResidualEditOption(CLI::App& app, ModelCliOptions& o);

// --chat and --system TEXT: --text wrapped as one user turn (after a system turn) in the model's
// chat template, ending with the assistant's opening (every command addModelOptions serves).
void addChatOptions(CLI::App& app, ModelCliOptions& o);
// Usage checks of --chat/--system against the other input options (--ids, --text-pair).
void checkChatOptions(const ModelCliOptions& o, const CLI::App& app);

struct ModelRun {
  std::unique_ptr<Model> model;
  ForwardResult result;
  Interventions interventions;  // what the pass ran with
  std::vector<int> ids;         // the input ids
  std::vector<int> typeIds;     // their token types (--text-pair; empty: all 0)
  std::vector<int> targetIds;   // an encoder-decoder's decoder ids (ids are the source's)
  std::vector<std::pair<int, int>> ablations;
  // An encoder-decoder's ablations at its other sites (--ablate enc:L:H, cross:L:H).
  std::vector<std::pair<SiteId, int>> siteAblations;
  std::vector<int> maskedSource;  // --mask-source: positions no cross site reads
  std::vector<int> ropeOff;  // layers run with q and k not rotated
  std::vector<std::pair<int, ResidualEdit>> residualEdits;  // per layer, in the order given

  // Adds siteAblations and the masked source positions (every cross site's mask) to iv.
  void addSiteAblations(Interventions& iv) const;
};

// The end of a successful one-shot command: the model and the pass's buffers are left to the
// process's exit, which returns them at once, instead of being freed piece by piece (unmapping a
// populated checkpoint and freeing a tokenizer's tables: 30-40 ms of GPT-2 small's 0.5 s run).
// Sanitizer builds free them as usual, so their leak check still sees everything else.
void endWithoutTeardown(ModelRun& run);

// The interventions the command line asks for: the ablations, and the attention options (mask,
// temperature) in every layer.
Interventions cliInterventions(const Model& m, const std::vector<int>& ids,
                              const std::vector<std::pair<int, int>>& ablations,
                              const AttentionCliOptions& attention,
                              const std::vector<int>& ropeOff = {});

// --max-memory's bytes (-1 when not given: the model's default budget); throws UsageError for a
// value that is not a size.
std::int64_t parseMaxMemory(const std::string& text);

// Opens the model, tokenizes (or checks the ids), builds the interventions and runs the pass.
// Throws UsageError for bad option values, InputError for bad files or text.
ModelRun runModelFromOptions(const ModelCliOptions& o, const AttentionCliOptions& attention,
                             const CLI::App& app);

// A model scene's pass (scene.model: its folder, text and ablations; loadScene resolved the
// path): its layer, head and ablations out of the model's range are input errors naming
// `scenePath`. The attention options apply in every layer, as with --model. An
// encoder-decoder's scene returns the opened model without a pass (the caller runs it as a
// Seq2SeqSource); target, site or site ablations on another model are input errors.
ModelRun runModelScene(const Scene& scene, const std::string& scenePath,
                       const AttentionCliOptions& attention, const Capture& capture = {},
                       std::int64_t maxMemory = -1);

// Runs the pass on `ids` with the heads in `ablations` (already checked against the model)
// zeroed and the attention options in every layer, into run.result. A model scene's per-layer
// interventions (checked too) replace those layers' mask, τ and RoPE switch.
void runPass(ModelRun& run, const std::vector<int>& ids,
             const std::vector<std::pair<int, int>>& ablations,
             const AttentionCliOptions& attention, const Capture& capture = {},
             const std::vector<SceneLayerIntervention>& sceneLayers = {});

// The attention parameters layer `layer` ran with (the causal mask plus its interventions).
AttentionParams layerParams(const Model& m, const ForwardResult& r, int layer);


// Axis labels for the tokens: the BPE pieces with a visible mark for a leading space.
std::vector<std::string> tokenLabels(const Model& m, const std::vector<int>& ids);

// "3" -> 3; anything but a non-negative integer is bad usage.
int parseLayerIndex(const std::string& text);

// Throws UsageError unless 0 <= layer < the model's layers.
void checkLayer(int layer, const ModelConfig& c);

// Throws InputError naming the file when the encoder has no masked-LM head (a folder that lacks
// its tensors, or a GGUF bert, which never holds one); `what` says what cannot be done.
void requireMlmHead(const Model& m, const std::string& what);

}  // namespace attnviz::app
