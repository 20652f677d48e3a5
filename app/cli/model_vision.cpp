// attnviz model on an image model (ViT, DeiT, DINOv2, CLIP's and SigLIP's vision towers):
// preprocessed pixels in, attention, last hidden states and the classification head's logits out.
#include "cli/cli.h"
#include "cli/options.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/image.h"
#include "attnviz/formats/npy.h"
#include "attnviz/model/model.h"
#include "attnviz/model/model_names.h"
#include "attnviz/model/vision.h"
#include "attnviz/session/request.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace attnviz::app {

bool isVisionModelArg(const std::string& model) {
  try {
    return VisionModel::isVisionFolder(locateModelFiles(resolveModelName(model), false).dir);
  } catch (...) {
    return false;
  }
}

int runVisionModel(int argc, char** argv) {
  CLI::App app{
      "Run an image model (ViT, DeiT, DINOv2, CLIP's and SigLIP's vision towers) on preprocessed "
      "pixels",
      "model"};
  std::string model, pixels, image, pixelsOut, weights, hidden, logits, maskPatches, probeWeights,
      residual;
  std::vector<std::string> ablate;
  int topK = 0;
  double temperature = 1.0;
  app.add_option("--model", model, "a Hugging Face image model folder")->required();
  app.add_option("--pixels", pixels,
                 "preprocessed pixels: float32 or float64 .npy, [3, H, W] or [1, 3, H, W]");
  app.add_option("--image", image,
                 "an image file (PNG, JPEG, BMP), preprocessed as the model's "
                 "preprocessor_config.json says (docs/image-preprocessing.md)");
  app.add_option("--pixels-out", pixelsOut,
                 "write the pixels the model ran on, float32 [3, H, W] (with --image: what the "
                 "preprocessing produced)");
  app.add_option("--weights", weights, "write the attention weights [L, H, T, T] (float32 .npy)");
  app.add_option("--hidden", hidden, "write the last hidden state [T, d] (float32 .npy)");
  app.add_option("--residual", residual,
                 "write the residual stream [L + 1, T, d]: after the embeddings and after each "
                 "layer, before the final norm (float32 .npy)");
  app.add_option("--logits", logits, "write the classification head's logits [num_labels]");
  app.add_option("--probe-weights", probeWeights,
                 "SigLIP: write the pooling probe's attention [H, 1, T] (float32 .npy)");
  app.add_option("--top-k", topK, "print the N most likely labels: id, probability, label");
  app.add_option("--ablate", ablate, "zero head H's output in layer L (repeatable), L:H");
  app.add_option("--mask-patches", maskPatches,
                 "hide these patches (0-based, row-major) from every query's keys, e.g. 3,7");
  app.add_option("--temperature", temperature,
                 "divide every site's scores (and SigLIP's probe's) by T before the softmax "
                 "(default 1)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("model", [&] {
    if (!image.empty() && !pixels.empty()) throw UsageError("--image and --pixels: give one");
    if (pixels.empty() && image.empty())
      throw UsageError("an image model needs --image FILE or --pixels P.npy");
    if (app.count("--top-k") && topK < 1)
      throw UsageError("--top-k: expected a number >= 1, got " + std::to_string(topK));
    VisionRunOptions opts;
    opts.ablate = parseLayerHeadList(ablate);
    if (app.count("--mask-patches")) opts.maskPatches = parsePatchList(maskPatches);
    opts.temperature = temperature;
    opts.weights = !weights.empty();
    opts.probe = !probeWeights.empty();
    opts.residual = !residual.empty();

    const std::string dir = locateModelFiles(resolveModelName(model), false).dir;
    if (!VisionModel::isVisionFolder(dir))
      throw UsageError("--pixels: " + model + " is not an image model (config.json's model_type)");
    const VisionModel m = VisionModel::load(dir);
    if (!logits.empty() || topK > 0) {
      if (!m.hasHead())
        throw UsageError(std::string(!logits.empty() ? "--logits" : "--top-k") + ": " + model +
                         " has no classification head");
    }

    if (!probeWeights.empty() && !m.config().hasProbe)
      throw UsageError("--probe-weights: " + model + " has no pooling probe (SigLIP's head)");
    std::vector<float> data;
    long long Hh = 0, Ww = 0;
    const int C = m.config().channels;
    if (!image.empty()) {
      // The image through the model's own preprocessing (resize as PIL does, crop, rescale,
      // normalise): float32 [3, H, W].
      const PreprocessedImage pre = preprocessImageFile(image, dir);
      if (C != 3)
        throw InputError(dir + ": " + std::to_string(C) + " channels; an image file gives 3");
      data = pre.pixels;
      Hh = pre.height, Ww = pre.width;
      pixels = image;  // what errors below name
    } else {
      const NpyArray px = readNpy(pixels);
      const auto& s = px.shape;
      const bool ok = (s.size() == 3 && s[0] == C) || (s.size() == 4 && s[0] == 1 && s[1] == C);
      if (!ok)
        throw InputError(pixels + ": expected pixels [" + std::to_string(C) + ", H, W] or [1, " +
                         std::to_string(C) + ", H, W]");
      Hh = s[s.size() - 2], Ww = s[s.size() - 1];
      if (Hh < 1 || Ww < 1 || Hh > 16384 || Ww > 16384)
        throw InputError(pixels + ": image size " + std::to_string(Hh) + "x" + std::to_string(Ww) +
                         " is out of range");
      data.assign(px.data.begin(), px.data.end());
    }
    if (!pixelsOut.empty()) saveNpy(pixelsOut, {C, Hh, Ww}, data.data());
    for (std::size_t i = 0; i < data.size(); ++i)
      if (!std::isfinite(data[i]))
        throw InputError(pixels + ": value " + std::to_string(i) + " is not finite");

    const VisionResult r = m.run(data, int(Hh), int(Ww), opts, pixels);
    const VisionConfig& c = m.config();
    const long long T = r.tokens;
    if (!weights.empty()) saveNpy(weights, {c.layers, c.heads, T, T}, r.weights.data());
    if (!hidden.empty()) saveNpy(hidden, {T, c.hidden}, r.hidden.data());
    if (!residual.empty()) saveNpy(residual, {c.layers + 1, T, c.hidden}, r.residual.data());
    if (!probeWeights.empty()) saveNpy(probeWeights, {c.heads, 1, T}, r.probe.data());
    if (!logits.empty()) saveNpy(logits, {(long long)r.logits.size()}, r.logits.data());

    const bool quiet =
        !weights.empty() || !hidden.empty() || !residual.empty() || !logits.empty() || topK > 0 || !probeWeights.empty();
    if (!quiet) {
      std::printf("model: %s (%s, %d layers x %d heads, d=%d, patch %d)\n", dir.c_str(),
                  c.family.c_str(), c.layers, c.heads, c.hidden, c.patchSize);
      std::printf("tokens: %lld (%d x %d patches)\n", T, r.gridH, r.gridW);
      if (!m.hasHead()) return 0;
    }
    if (!m.hasHead()) return 0;
    const int k = std::min<int>(quiet ? topK : 5, int(r.logits.size()));
    // softmax over the labels, in double
    const double mx = *std::max_element(r.logits.begin(), r.logits.end());
    std::vector<double> prob(r.logits.size());
    double sum = 0;
    for (std::size_t i = 0; i < prob.size(); ++i) sum += prob[i] = std::exp(r.logits[i] - mx);
    std::vector<int> order(prob.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
    for (int i = 0; i < k; ++i) {
      const int id = order[i];
      const auto it = c.id2label.find(id);
      std::printf(
          "%d\t%.6f\t%s\n", id, prob[id] / sum,
          it != c.id2label.end() ? it->second.c_str() : ("LABEL_" + std::to_string(id)).c_str());
    }
    return 0;
  });
}

}  // namespace attnviz::app
