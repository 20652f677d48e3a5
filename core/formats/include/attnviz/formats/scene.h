// attnviz formats: scenes (what the app shows) and their JSON files. The synthetic inputs a
// scene's text gives are core/session's (attnviz/session/scene_inputs.h).
#pragma once

#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnviz {

enum class Mode { Self, Causal, Cross, Decode };

// The most tokens a scene's text may have: as many as the pooled view streams
// (attnviz/session/pooled_view.h).
constexpr int kMaxSceneTokens = 131072;

// How a synthetic head's Q and K are built, so that the pattern comes out of the real Q K^T.
enum class Archetype { PreviousToken, FirstToken, SameToken, LocalWindow, Broad, Random };

const char* modeName(Mode m);
Mode modeFromName(const std::string& s);  // throws InputError
const char* archetypeName(Archetype a);
Archetype archetypeFromName(const std::string& s);  // throws InputError
std::vector<Archetype> allArchetypes();

// A continuation to generate when a model scene opens (the model object's "generate":
// {"tokens", "greedy", "temperature", "top_k", "seed"}): the Generate panel's settings. The GUI
// starts it once the model's text has run, as a user opening "Watch it write" expects.
// temperature, top_k and seed matter only when greedy is false (top_k 0: every token).
struct SceneGenerate {
  int tokens = 0;  // 0: no "generate" object
  bool greedy = true;
  double temperature = 1.0;
  int topK = 40;
  int seed = 0;
  bool any() const { return tokens > 0; }
};

// One layer's mask, temperature and RoPE switch inside a model's pass, as a model scene saves it
// (the model object's "interventions": [{"layer", "temperature", "rope_off", "mask"}]). The mask
// is ANDed with the model's own (causal, its window); ablations are saved in "ablate".
struct SceneLayerIntervention {
  int layer = 0;
  MaskSpec mask;
  float temperature = 1.0f;
  bool ropeOff = false;
};

// A scene that opens a model (the "model" object): the model view on `text` with layer
// and head shown and heads ablated, and optionally a continuation to generate. `path` is a model folder; loadScene resolves a relative one
// against dataSubdir("models") (the shipped models). Indices are checked against the model's
// config when it opens (they are only known to be >= 0 here).
// The model view's attribution panel (the model object's "attribution"): which heads matter for
// one prediction. method "zero" | "mean" (an ablation sweep) or "patch" (activation patching from
// `clean` into the model's text, the corrupted run); position, target and foil -1 = the default
// (the last position; the run's most likely next token; the corrupted run's most likely other
// token). `run`: compute it as the scene opens (the panel showed a result when it was saved).
struct SceneAttribution {
  std::string method;  // empty: no attribution object
  int position = -1, target = -1, foil = -1;
  std::string clean;  // patch only
  bool run = false;
  bool any() const { return !method.empty(); }
  bool operator==(const SceneAttribution&) const = default;
};

struct SceneModel {
  std::string path;
  std::string text;
  int layer = 0, head = 0;
  std::vector<std::pair<int, int>> ablate;  // (layer, head), written "L:H"
  SceneGenerate generate;
  SceneAttribution attribution;
  std::vector<SceneLayerIntervention> interventions;  // at most one entry a layer
  // Encoders: the second text of a pair ("text_pair"), the block shown ("slice":
  // "all", "a-a", "b-b", "a-b", "b-a") and the special tokens ("special": "show", "grey",
  // "hide"). Empty: not given (one text, all, show).
  std::string textPair, slice, special;
  // Encoder-decoders: `text` is the source (the encoder's input) and "target" the
  // decoder's text after its start id; "site" the site shown ("enc:L", "dec:L:self",
  // "dec:L:cross"; empty: the first); ablations of the encoder's and the cross sites
  // ("enc:L:H", "cross:L:H", kept in "ablate" beside the decoder self site's "L:H"). Both read
  // as the command line's --site and --ablate (attnviz/engine/request_grammar.h).
  std::string target, site;
  std::vector<std::string> siteAblate;
  // "mask_source": source positions no cross site may read (--mask-source), sorted.
  std::vector<int> maskSource;
  // Decoders: "chat": true runs the text as a user turn in the model's chat template, after a
  // system turn when "system" is given (--chat, --system).
  bool chat = false;
  std::optional<std::string> system;
  bool any() const { return !path.empty(); }
};

struct Scene {
  std::string title = "attnviz";
  std::string notes;      // what this scene shows, in a few sentences (shown above the heatmap)
  std::string queryText;  // whitespace-separated tokens
  std::string keyText;    // cross mode only: the key/value sequence
  Mode mode = Mode::Causal;
  int heads = 6;
  int dModel = 64;  // width of the token vectors X
  int dHead = 32;   // d_k = d_v per head
  std::uint32_t seed = 1;
  std::vector<Archetype> archetypes;  // per head; missing entries cycle through allArchetypes()
  int decodeStep = -1;                // decode: KV-cache length T_k (-1 = every token)
  float sharpness = 1.0f;             // scales archetype logits (1 = default contrast)
  AttentionParams params;             // masks (incl. causal for Mode::Causal) and temperature
  // Optional tensors that replace the synthetic Q, K, V (paths relative to the scene file).
  std::string qPath, kPath, vPath;
  SceneModel model;  // empty path: not a model scene
  // Opaque extras (e.g. the GUI's view state), kept verbatim through load/save.
  std::string extraJson = "{}";
};

// The sample sentence the app opens on.
Scene defaultScene();

// Splits on whitespace; an empty text gives no tokens.
std::vector<std::string> tokenize(const std::string& text);

// The view a scene was saved with: the "view" object, kept verbatim in Scene::extraJson. Empty
// strings mean "not given". Export takes its head, stage and colormap from it, so a saved scene
// exports as it was shown.
struct SceneView {
  int head = 0;
  std::string stage;  // qk | scaled | capped | biased | logits | weights | output
  std::string weightColormap, scoreColormap, scale;
  float gamma = 0.5f;
  bool autoRange = false, wrongAxis = false, headAverage = false;
  int selectedRow = -1;
  float zoom = 1.0f, panX = 0.0f, panY = 0.0f;
  bool blocksOn = false;  // the block-sparsity overlay, tiles of blockRows x blockCols
  int blockRows = 128, blockCols = 128;
  // The FlashAttention stage ("flash": {"blockRows", "blockKeys", "step"}): the scene opens on
  // step `flashStep`, counted from 1 as the stage shows it (0: before the first; past the
  // schedule's end: its last step), of tiles flashBlockRows x flashBlockKeys (a size larger than
  // T is one block).
  bool flashOn = false;
  int flashBlockRows = 8, flashBlockKeys = 8, flashStep = 0;
};
// Parses Scene::extraJson; every number is range-checked before conversion. Throws InputError
// naming `name` and the field.
SceneView parseSceneView(const std::string& viewJson, const std::string& name);

// JSON (nlohmann) round trip. Throws InputError naming `name` and the bad field. Numbers are
// range-checked before any conversion. Painted cells saved by older builds under view.painted
// become the custom mask's cells.
Scene sceneFromJson(const std::string& json, const std::string& name);
std::string sceneToJson(const Scene& s);
Scene loadScene(const std::string& path);               // resolves tensor paths against its folder
void saveScene(const std::string& path, const Scene&);  // atomic

// The mask the scene's mode implies on top of s.params.mask (Mode::Causal adds causal).
AttentionParams effectiveParams(const Scene& s);

}  // namespace attnviz
