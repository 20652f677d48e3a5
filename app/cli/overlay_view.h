// attnviz app: an image model's pass over one image and the overlay figure drawn from it, shared
// by `attnviz export --overlay` and the GUI's image view, so that both write the same bytes.
#pragma once

#include "attnviz/formats/image.h"
#include "attnviz/model/vision.h"
#include "attnviz/model/vision_maps.h"
#include "attnviz/render/colormap.h"
#include "attnviz/render/overlay_figure.h"
#include "attnviz/render/raster.h"

#include <functional>
#include <string>

namespace attnviz::app {

// An image model run on one image file, every layer's weights kept.
struct VisionPass {
  std::string dir;    // the model's folder
  std::string name;   // its name in titles (the folder's name)
  std::string image;  // the image file, as given
  VisionModel model;
  PreprocessedImage pre;  // pixels and the image as the model sees it
  VisionResult result;    // with weights [L, H, T, T]
};

// Loads the folder `dir` (an image model's), preprocesses `image` and runs the model keeping
// the weights. `step` (may be empty) is told what starts: "loading", "preprocessing",
// "running". `loaded`: the folder's model when the caller has loaded it already. Throws
// InputError naming the file at fault.
VisionPass runVisionPass(const std::string& dir, const std::string& image,
                         const std::function<void(const char*)>& step = {},
                         const VisionModel* loaded = nullptr);

// What the figure shows: the map (one head's row, the heads' mean, or the rollout's) and how.
struct OverlayChoice {
  int layer = 0, head = 0;
  bool headAverage = false;  // the mean of every head's row (not with rollout)
  int token = kDefaultOverlayToken;
  bool rollout = false;
  double opacity = 0.6;
  ColormapId colormap = ColormapId::Viridis;
  std::string title;  // empty: the figure's own
  bool vector = false;
};

// The map the choice draws (overlayPatchMap; with headAverage the mean over the heads).
// Throws UsageError for a layer, head or token out of range.
PatchMap overlayChoiceMap(const VisionPass& p, const OverlayChoice& c);
// The overlay figure of the choice, as `attnviz export --overlay` writes it.
Image renderOverlayChoice(const VisionPass& p, const OverlayChoice& c);

}  // namespace attnviz::app

namespace attnviz::app {

// An image-view scene: {"title", "model": {"path", "image"}, "view": {"layer", "head",
// "head_average", "token" ("cls", "default" or an index), "rollout", "opacity", "colormap"}}.
struct ImageScene {
  std::string title, model, image;
  OverlayChoice choice;
};
// Whether the JSON file at `path` is an image-view scene (its "model" has "image"); false for
// anything unreadable (the scene loader then says why).
bool isImageSceneFile(const std::string& path);
// Throws InputError naming the file and the field.
ImageScene readImageScene(const std::string& path);
// The scene's JSON text (model and image paths as given).
std::string imageSceneJson(const ImageScene& sc);

}  // namespace attnviz::app
