// attnviz app: an image model's pass over one image and the overlay figure drawn from it, shared
// by `attnviz export --overlay` and the GUI's image view, so that both write the same bytes.
#pragma once

#include "attnviz/formats/image.h"
#include "attnviz/model/vision.h"
#include "attnviz/model/vision_maps.h"
#include "attnviz/render/colormap.h"
#include "attnviz/render/overlay_figure.h"
#include "attnviz/render/raster.h"
#include "attnviz/session/request.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace attnviz::app {

// What a pass changes in the model: heads whose output is zeroed (layer, head), patches hidden
// from every query's keys (0-based, row-major) and the temperature every site's scores (and
// SigLIP's probe's) are divided by, as `attnviz model --ablate/--mask-patches/--temperature`.
struct VisionInterventions {
  std::vector<std::pair<int, int>> ablate;
  std::vector<int> maskPatches;
  double temperature = 1.0;  // L = s / tau; 1 changes nothing
  bool empty() const { return ablate.empty() && maskPatches.empty() && temperature == 1.0; }
  bool operator==(const VisionInterventions&) const = default;
};
// The ablations ("L:H" items) and patches ("3,7") are read by attnviz/session/request.h's
// parseLayerHeadList and parsePatchList, and written by layerHeadListText and:
std::string maskPatchText(const std::vector<int>& m);               // "3,7"
// "\u03c4 = 0.5": the temperature as captions and the view print it (%g of its value).
std::string temperatureText(double t);
// A float the app holds (a slider's, an option's) as the double of its shortest decimal: 0.7f
// becomes 0.7, the value `--temperature 0.7` gives on the command line, so both run one pass.
double temperatureOfFloat(float t);
// The interventions in one line for captions: "heads ablated: 0:1 \u00b7 patches hidden: 3,7 \u00b7
// \u03c4 = 0.5" (only the parts that change the pass; empty when none does).
std::string interventionsText(const VisionInterventions& iv);

// An image model run on one image file, every layer's weights kept (and the residual stream
// after each layer, and SigLIP's probe attention).
struct VisionPass {
  std::string dir;    // the model's folder
  std::string name;   // its name in titles (the folder's name)
  std::string image;  // the image file, as given
  VisionModel model;
  PreprocessedImage pre;  // pixels and the image as the model sees it
  VisionResult result;    // with weights [L, H, T, T], layerHidden, probe (SigLIP)
  VisionInterventions interventions;
};

// Loads the folder `dir` (an image model's), preprocesses `image` and runs the model keeping
// the weights. `step` (may be empty) is told what starts: "loading", "preprocessing",
// "running". `loaded`: the folder's model when the caller has loaded it already. Throws
// InputError naming the file at fault.
VisionPass runVisionPass(const std::string& dir, const std::string& image,
                         const std::function<void(const char*)>& step = {},
                         const VisionModel* loaded = nullptr,
                         const VisionInterventions& iv = {});

// The probe's row as the overlay's token (SigLIP's pooling head: [H, 1, T]).
constexpr int kProbeOverlayToken = -2;

// What the figure shows: the map (one head's row, the heads' mean, or the rollout's) and how.
struct OverlayChoice {
  int layer = 0, head = 0;
  bool headAverage = false;  // the mean of every head's row (not with rollout)
  int token = kDefaultOverlayToken;
  bool rollout = false;
  RolloutOptions rolloutOptions;  // mean or max over the heads, the discarded fraction
  double opacity = 0.6;
  ColormapId colormap = ColormapId::Viridis;
  std::string title;  // empty: the figure's own
  bool vector = false;
};

// The rollout's words in titles: "heads averaged, + I", "heads' maximum, lowest 90% dropped, + I".
std::string rolloutWords(const RolloutOptions& o);
// The map the choice draws (overlayPatchMap; with headAverage the mean over the heads; the
// probe's row for kProbeOverlayToken, one head's or the heads' mean).
// Throws UsageError for a layer, head or token out of range.
PatchMap overlayChoiceMap(const VisionPass& p, const OverlayChoice& c);
// The overlay figure of the choice, as `attnviz export --overlay` writes it.
Image renderOverlayChoice(const VisionPass& p, const OverlayChoice& c);

}  // namespace attnviz::app

namespace attnviz::app {

// An image-view scene: {"title", "model": {"path", "image", "ablate": ["L:H"..],
// "mask_patches": [..]}, "view": {"layer", "head", "head_average", "token" ("cls", "default",
// "probe" or an index), "rollout", "rollout_heads" ("mean", "max"), "rollout_discard",
// "opacity", "colormap", "side" (the app's side panel: "tokens", "grid", "norms"),
// "norm_threshold"}}.
struct ImageScene {
  std::string title, notes, model, image;
  OverlayChoice choice;
  VisionInterventions interventions;
  std::string side = "tokens";
  double normThreshold = 2.0;
};
// Whether the JSON file at `path` is an image-view scene (its "model" has "image"); false for
// anything unreadable (the scene loader then says why).
bool isImageSceneFile(const std::string& path);
// Throws InputError naming the file and the field.
ImageScene readImageScene(const std::string& path);
// The scene's JSON text (model and image paths as given).
std::string imageSceneJson(const ImageScene& sc);

}  // namespace attnviz::app
