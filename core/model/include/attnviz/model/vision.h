// attnviz model: image transformers (ViT, DeiT, DINOv2, CLIP, SigLIP) run from a Hugging
// Face folder on pixels that are already preprocessed. The tokens are CLS (where the family has
// one), DIST (DeiT), then the patches row by row; every token attends to every other.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnviz {

struct VisionConfig {
  std::string family;  // config.json's model_type
  int hidden = 0, layers = 0, heads = 0, intermediate = 0;
  int imageSize = 0, patchSize = 0, channels = 3;
  double eps = 1e-12;
  bool qkvBias = true;
  bool quickGelu = false;
  bool tanhGelu = false;  // SigLIP: gelu_pytorch_tanh
  bool hasProbe =
      false;  // SigLIP's pooling head  // CLIP: x * sigmoid(1.702 x); else the exact GELU
  bool hasCls = true;
  int distTokens = 0;                 // DeiT: 1
  int registers = 0;                  // DINOv2 with registers
  bool layerScale = false;            // DINOv2: lambda1 on both branches
  bool interpolatePositions = false;  // DINOv2: other image sizes
  int numLabels = 0;                  // 0: no classification head in the folder
  std::map<int, std::string> id2label;

  int prefixTokens() const { return (hasCls ? 1 : 0) + distTokens + registers; }
};

struct VisionRunOptions {
  std::vector<std::pair<int, int>> ablate;  // (layer, head): the head's output zeroed
  std::vector<int> maskPatches;             // patch indices hidden from every query's keys
  double temperature = 1.0;  // every site's scores (and the probe's) divided by it: L = s / tau
  bool weights = false;
  bool probe = false;        // keep SigLIP's probe attention [H, 1, T]
  bool residual = false;     // keep the residual stream [L + 1, T, d]
};

struct VisionResult {
  int tokens = 0, gridH = 0, gridW = 0;
  std::vector<std::string> labels;  // CLS, DIST, REG0.., p(row,col)
  std::vector<float> weights;       // [L, H, T, T] when asked for
  std::vector<float> hidden;        // last_hidden_state [T, d]
  std::vector<float> residual;      // [L + 1, T, d] when asked for: after the embeddings (and
                                    // CLIP's pre-norm), then after each layer (HF's
                                    // hidden_states), no final norm
  std::vector<float> logits;
  std::vector<float>
      probe;  // [H, 1, T] when asked for        // [num_labels] when the folder has a head
};

class VisionModel {
 public:
  // True when the folder's config.json names an image family this class runs.
  static bool isVisionFolder(const std::string& dir);
  // Reads config.json and the weights; throws InputError naming the file and the problem.
  static VisionModel load(const std::string& dir);

  const VisionConfig& config() const { return cfg_; }
  bool hasHead() const { return cfg_.numLabels > 0; }

  // pixels: [3, H, W] C order. `name` is what errors say (the .npy file). Throws InputError when
  // the size does not fit the model.
  VisionResult run(const std::vector<float>& pixels, int height, int width,
                   const VisionRunOptions& opts, const std::string& name) const;

  struct Impl;

 private:
  VisionConfig cfg_;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace attnviz
