// attnviz qk and attnviz compose: why a head attends where it does (docs/why-here.md). qk splits
// one pre-softmax score over what wrote the residual stream (attnviz/model/qk_split.h); compose
// writes the composition scores between every pair of heads in different layers.
#include "cli/cli.h"
#include "cli/model_options.h"

#include "attnviz/engine/text_parse.h"
#include "attnviz/engine/mask.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/formats/npy.h"
#include "attnviz/model/qk_split.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

namespace attnviz::app {

namespace {

// "--query 3" -> 3; anything but a non-negative integer is bad usage.
int parseIndexOption(const std::string& option, const std::string& text) {
  const std::optional<int> v = parseIndex(text, 1'000'000'000);
  if (!v) throw UsageError(option + ": expected a non-negative integer, got '" + text + "'");
  return *v;
}

// Image models (which Model::open does not read) are refused in one line naming why, before the
// weights are read; the other families are refused by qkSplitRefusal once the model is open.
void refuseImageModel(const std::string& dir) {
  static const std::set<std::string> image = {"vit",    "deit", "clip", "clip_vision_model",
                                              "siglip", "siglip_vision_model", "dinov2",
                                              "dinov2_with_registers"};
  ModelFiles files;
  nlohmann::json j;
  try {
    files = locateModelFiles(dir, false);
    if (!files.gguf.empty() || files.config.empty()) return;
    j = nlohmann::json::parse(readFile(files.config));
  } catch (const std::exception&) {
    return;  // Model::open names the problem
  }
  const std::string type = j.is_object() ? j.value("model_type", std::string()) : "";
  if (image.count(type)) {
    throw InputError(files.config + ": " + type +
                     " is an image model (an encoder over patches): the split is exact for the "
                     "pre-norm decoders of text only");
  }
}

// The indices of the `n` largest |values| (ties: the lower index first).
std::vector<int> largest(const std::vector<double>& values, int n) {
  std::vector<int> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t k = std::min<std::size_t>(std::size_t(std::max(n, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + long(k), order.end(), [&](int a, int b) {
    const double x = std::fabs(values[std::size_t(a)]), y = std::fabs(values[std::size_t(b)]);
    return x != y ? x > y : a < b;
  });
  order.resize(k);
  return order;
}

}  // namespace

int runQk(int argc, char** argv) {
  CLI::App app{"Split one pre-softmax score of a head over what wrote the residual stream: "
               "C[a, b] = scale * (q_a . k_b) over the embedding, every earlier head and MLP, the "
               "biases and a constant",
               "qk"};
  ModelCliOptions o;
  AttentionCliOptions attention;
  std::string layer, head, query, key, top, out, names;
  addModelOptions(app, o, true);
  addAttentionOptions(app, attention);
  app.add_option("--layer", layer, "the layer L of the head")->required();
  app.add_option("--head", head, "the query head H")->required();
  app.add_option("--query", query, "the query position I (0-based)")->required();
  app.add_option("--key", key, "the key position J (0-based)")->required();
  app.add_option("--top", top, "print the N largest pairs, row sums and column sums (default 10)");
  app.add_option("--out", out, "write C as float32 [n, n] .npy (rows: q side; const last)");
  app.add_option("--names", names, "write the n component names, one a line");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("qk", [&] {
    const int L = parseIndexOption("--layer", layer), H = parseIndexOption("--head", head);
    const int I = parseIndexOption("--query", query), J = parseIndexOption("--key", key);
    const int N = app.count("--top") ? parseIndexOption("--top", top) : 10;
    if (!out.empty() && out == names) throw UsageError("--out and --names name the same file");
    checkAttentionOptions(attention);
    refuseImageModel(o.dir);
    o.prepareOnly = true;
    o.startWithoutTarget = true;  // an encoder-decoder is refused below, not asked for a target
    ModelRun run = runModelFromOptions(o, attention, app);
    const Model& m = *run.model;
    const ModelConfig& c = m.config();
    if (const std::string why = qkSplitRefusal(c); !why.empty())
      throw InputError((m.files().gguf.empty() ? m.files().dir : m.files().gguf) + ": " + why);
    checkLayer(L, c);
    if (H >= c.nHead) {
      throw UsageError("--head " + std::to_string(H) + ": out of range, the model has " +
                       std::to_string(c.nHead) + " query heads (0.." +
                       std::to_string(c.nHead - 1) + ")");
    }
    const int T = static_cast<int>(run.ids.size());
    for (const auto& [name, p] : {std::pair<const char*, int>{"--query", I}, {"--key", J}}) {
      if (p >= T) {
        throw UsageError(std::string(name) + " " + std::to_string(p) + ": outside the " +
                         std::to_string(T) + " tokens (0.." + std::to_string(T - 1) + ")");
      }
    }
    runPass(run, run.ids, run.ablations, attention, qkSplitCapture(L));
    const QkSplit s = splitQk(m, run.result, L, H, I, J);
    const int n = s.n();

    if (!out.empty()) {
      std::vector<float> values(s.c.begin(), s.c.end());
      saveNpy(out, {n, n}, values.data());
    }
    if (!names.empty()) {
      std::string text;
      for (const std::string& name : s.names) text += name + "\n";
      writeFileAtomic(names, text);
    }
    std::printf("score\t%.6f\tsum\t%.6f\n", s.score, s.sum);
    for (int i : largest(s.c, N))
      std::printf("pair\t%s\t%s\t%.6f\n", s.names[std::size_t(i / n)].c_str(),
                  s.names[std::size_t(i % n)].c_str(), s.c[std::size_t(i)]);
    std::vector<double> rowSums(std::size_t(n), 0.0), colSums(std::size_t(n), 0.0);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        rowSums[std::size_t(a)] += s.at(a, b);
        colSums[std::size_t(b)] += s.at(a, b);
      }
    }
    for (int i : largest(rowSums, N))
      std::printf("q\t%s\t%.6f\n", s.names[std::size_t(i)].c_str(), rowSums[std::size_t(i)]);
    for (int i : largest(colSums, N))
      std::printf("k\t%s\t%.6f\n", s.names[std::size_t(i)].c_str(), colSums[std::size_t(i)]);
    return 0;
  });
}

int runCompose(int argc, char** argv) {
  CLI::App app{"Composition scores between every pair of heads in different layers (Elhage et "
               "al. 2021): [L, H, L, H] indexed [l2, h2, l1, h1], NaN where l1 >= l2",
               "compose"};
  std::string model, kind, out, maxMemory;
  app.add_option("--model", model, "model folder, .gguf file or name (ORG/NAME, ollama:NAME:TAG)")->required();
  app.add_option("--kind", kind, "q, k or v: which input of the later head reads the earlier "
                                 "head's output")->required();
  app.add_option("--out", out, "write the scores as float32 [L, H, L, H] .npy")->required();
  app.add_option("--max-memory", maxMemory,
                 "SIZE (bytes, or 512M, 4G): budget for float32 copies of F16/BF16/quantized "
                 "weights (default: 1G, or a quarter of physical RAM if less)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("compose", [&] {
    CompositionKind k;
    if (kind == "q") {
      k = CompositionKind::Q;
    } else if (kind == "k") {
      k = CompositionKind::K;
    } else if (kind == "v") {
      k = CompositionKind::V;
    } else {
      throw UsageError("--kind: expected q, k or v, got '" + kind + "'");
    }
    refuseImageModel(model);
    const std::unique_ptr<Model> m = Model::open(model, {}, parseMaxMemory(maxMemory));
    const ModelConfig& c = m->config();
    if (const std::string why = qkSplitRefusal(c); !why.empty())
      throw InputError((m->files().gguf.empty() ? m->files().dir : m->files().gguf) + ": " + why);
    const std::vector<float> s = compositionScores(*m, k);
    saveNpy(out, {c.nLayer, c.nHead, c.nLayer, c.nHead}, s.data());
    // Beside the scores, what random weights of these shapes score (docs/why-here.md).
    const CompositionBaseline b = compositionBaseline(c.nEmbd, c.headSize);
    std::printf("random\t%.6f\t%.6f\n", b.mean, b.sd);
    return 0;
  });
}

}  // namespace attnviz::app
