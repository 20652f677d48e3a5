// The fifth shipped model (assets/models/shapes-vit, tools/train/train_vit.py): a small ViT image
// classifier trained on drawn pictures whose object mask is known. Through the real binary:
// `attnviz model --image` on the card's first held-out pictures and on the examples computes what
// an independent float64 torch reference computes (shipped_vit_reference.py, run here: the
// pixels from the PNG's bytes, vision_reference.py's ViT); and the card's figures (card.json: each
// picture's prediction and last-layer CLS share on the object, the examples' figures the presets
// quote; README.md's accuracy and shares) are what the binary gives on the same pictures.
#include "model_test_util.h"
#include "reference_script.h"

#include "attnviz/formats/npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

using namespace attnviz;
using namespace attnviz::testing;

namespace {

fs::path shippedVit() { return fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "shapes-vit"; }

nlohmann::json readJson(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::string readText(const fs::path& p) {
  std::ifstream f(p);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The reference on the card's first 6 held-out pictures and the 4 examples (a few seconds).
const ReferenceScript& reference() {
  static ReferenceScript g("shipped_vit_reference.py");
  return g;
}

std::vector<const nlohmann::json*> cases(const std::string& prefix) {
  std::vector<const nlohmann::json*> v;
  for (const auto& c : reference().cases)
    if (c["name"].get<std::string>().rfind(prefix, 0) == 0) v.push_back(&c);
  return v;
}

// The share of the CLS row (query 0) of layer `layer`, head `head` on the object: the weight on
// each patch times the share of that patch's pixels on the mask, summed.
double clsShare(const NpyArray& w, const NpyArray& mask, int patch, std::size_t layer,
                std::size_t head) {
  const std::size_t H = w.shape[1], T = w.shape[2];
  const std::size_t side = mask.shape[0], g = side / std::size_t(patch);
  double s = 0;
  for (std::size_t r = 0; r < g; ++r)
    for (std::size_t c = 0; c < g; ++c) {
      double cover = 0;
      for (int y = 0; y < patch; ++y)
        for (int x = 0; x < patch; ++x)
          cover += mask.data[(r * patch + std::size_t(y)) * side + c * patch + std::size_t(x)];
      cover /= double(patch * patch);
      s += double(w.data[((layer * H + head) * T + 0) * T + 1 + r * g + c]) * cover;
    }
  return s;
}

struct Pass {
  NpyArray w, z, px;
};

Pass runImage(const fs::path& png, const TempDir& out) {
  const fs::path w = out.path / "w.npy", z = out.path / "z.npy", px = out.path / "px.npy";
  const CliRun run = runBinary({"model", "--model", shippedVit().string(), "--image", png.string(),
                                "--weights", w.string(), "--logits", z.string(), "--pixels-out",
                                px.string()},
                               out.path);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  Pass p;
  if (run.exitCode != 0) return p;
  p.w = readNpy(w.string());
  p.z = readNpy(z.string());
  p.px = readNpy(px.string());
  return p;
}

std::size_t argmax(const NpyArray& a) {
  return std::size_t(std::max_element(a.data.begin(), a.data.end()) - a.data.begin());
}

}  // namespace

TEST(ShippedVit, OpensAsAVitClassifierOfFourShapes) {
  const nlohmann::json cfg = readJson(shippedVit() / "config.json");
  EXPECT_EQ(cfg["model_type"], "vit");
  EXPECT_EQ(cfg["architectures"][0], "ViTForImageClassification");
  EXPECT_EQ(cfg["id2label"].size(), 4u);
  EXPECT_LE(fs::file_size(shippedVit() / "model.safetensors"), 10u * 1000 * 1000);
  const nlohmann::json pre = readJson(shippedVit() / "preprocessor_config.json");
  EXPECT_EQ(pre["image_processor_type"], "ViTImageProcessor");
  for (const char* c : {"circle", "square", "triangle", "cross"}) {
    EXPECT_TRUE(fs::exists(shippedVit() / "examples" / (std::string(c) + ".png"))) << c;
    EXPECT_TRUE(fs::exists(shippedVit() / "examples" / (std::string(c) + "-mask.png"))) << c;
  }
}

// `attnviz model --image` on held-out pictures and the examples: the pixels it ran on within
// 1e-6 of the reference's (from the PNG's bytes), every weight within 1e-5 and the logits within
// 1e-4 of their scale; `--pixels` with the reference's pixels gives the same.
TEST(ShippedVit, PicturesMatchTheFloat64Reference) {
  const ReferenceScript& g = reference();
  ASSERT_TRUE(g.ok) << "shipped_vit_reference.py failed";
  ASSERT_EQ(cases("").size(), 10u);
  for (const nlohmann::json* c : cases("")) {
    const std::string name = (*c)["name"];
    SCOPED_TRACE(name);
    TempDir out;
    const Pass p = runImage(g.path((*c)["png"]), out);
    ASSERT_FALSE(p.w.data.empty());
    const NpyArray rw = readNpy(g.path((*c)["weights"]).string());
    const NpyArray rz = readNpy(g.path((*c)["logits"]).string());
    const NpyArray rp = readNpy(g.path((*c)["pixels"]).string());
    ASSERT_EQ(p.w.shape, rw.shape);
    ASSERT_EQ(p.z.shape, rz.shape);
    expectClose(p.px.data, rp, 1e-6, 0, name + " pixels");
    expectClose(p.w.data, rw, 1e-5, 0, name + " weights");
    expectClose(p.z.data, rz, 0, 1e-4, name + " logits");
    const fs::path w2 = out.path / "w2.npy", z2 = out.path / "z2.npy";
    const CliRun run =
        runBinary({"model", "--model", shippedVit().string(), "--pixels",
                   g.path((*c)["pixels"]).string(), "--weights", w2.string(), "--logits",
                   z2.string()},
                  out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    expectClose(readNpy(w2.string()).data, rw, 1e-5, 0, name + " weights (--pixels)");
    expectClose(readNpy(z2.string()).data, rz, 0, 1e-4, name + " logits (--pixels)");
  }
}

// The card's per-picture records (card.json) for the first held-out pictures: the label drawn,
// the binary's prediction, and the last layer's CLS share on the object per head, re-measured
// through the binary here (and the reference's shares agree). --top-k 1 names the predicted
// label.
TEST(ShippedVit, TheCardsPerPictureFiguresHold) {
  const ReferenceScript& g = reference();
  ASSERT_TRUE(g.ok);
  const nlohmann::json card = readJson(shippedVit() / "card.json");
  const nlohmann::json cfg = readJson(shippedVit() / "config.json");
  const int patch = cfg["patch_size"];
  const std::size_t L = cfg["num_hidden_layers"], H = cfg["num_attention_heads"];
  const auto held = cases("heldout");
  ASSERT_EQ(held.size(), 6u);
  for (std::size_t i = 0; i < held.size(); ++i) {
    const nlohmann::json& c = *held[i];
    const nlohmann::json& rec = card["per_image"][i];
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(rec["label"], c["label"]) << "the card's picture is not the one drawn here";
    TempDir out;
    const Pass p = runImage(g.path(c["png"]), out);
    ASSERT_FALSE(p.w.data.empty());
    EXPECT_EQ(int(argmax(p.z)), rec["pred"].get<int>());
    EXPECT_EQ(c["pred"], rec["pred"]);
    const NpyArray mask = readNpy(g.path(c["mask"]).string());
    for (std::size_t h = 0; h < H; ++h) {
      const double got = clsShare(p.w, mask, patch, L - 1, h);
      EXPECT_NEAR(got, rec["cls_pixel_last"][h].get<double>(), 2e-6) << "head " << h;
      EXPECT_NEAR(got, c["cls_pixel_last"][h].get<double>(), 1e-5) << "head " << h;
    }
    const CliRun top = runBinary({"model", "--model", shippedVit().string(), "--image",
                                  g.path(c["png"]).string(), "--top-k", "1"},
                                 out.path);
    ASSERT_EQ(top.exitCode, 0) << top.err;
    const std::string label = cfg["id2label"][std::to_string(rec["pred"].get<int>())];
    EXPECT_EQ(top.out.rfind(std::to_string(rec["pred"].get<int>()) + "\t", 0), 0u) << top.out;
    EXPECT_NE(top.out.find("\t" + label + "\n"), std::string::npos) << top.out;
  }
}

// The card's summary figures are those of its per-picture records (accuracy, the last layer's
// CLS share heads averaged and of the best head, the uniform baseline), README.md says them, and
// they say what the card claims: accuracy above 0.9, CLS on the object well above uniform.
TEST(ShippedVit, TheCardsSummaryIsItsRecordsAndTheReadmeSaysIt) {
  const nlohmann::json card = readJson(shippedVit() / "card.json");
  const nlohmann::json& per = card["per_image"];
  ASSERT_EQ(per.size(), card["images"].get<std::size_t>());
  const std::size_t H = card["heads"];
  double correct = 0, uniform = 0;
  std::vector<double> head(H, 0.0);
  for (const auto& r : per) {
    correct += r["pred"] == r["label"];
    uniform += r["uniform_pixel"].get<double>();
    for (std::size_t h = 0; h < H; ++h) head[h] += r["cls_pixel_last"][h].get<double>();
  }
  const double n = double(per.size());
  EXPECT_EQ(correct, card["correct"].get<double>());
  EXPECT_NEAR(correct / n, card["accuracy"].get<double>(), 1e-12);
  const nlohmann::json& last = card["last_layer"];
  const double mean = std::accumulate(head.begin(), head.end(), 0.0) / double(H) / n;
  EXPECT_NEAR(mean, last["head_mean_pixel"].get<double>(), 1e-5);
  const std::size_t bh = last["best_head"];
  EXPECT_NEAR(head[bh] / n, last["best_head_pixel"].get<double>(), 1e-5);
  for (std::size_t h = 0; h < H; ++h) EXPECT_LE(head[h], head[bh] + 1e-9) << "head " << h;
  EXPECT_NEAR(uniform / n, card["uniform_pixel"].get<double>(), 1e-5);
  EXPECT_GT(card["accuracy"].get<double>(), 0.9);
  EXPECT_GT(mean, 2 * uniform / n);
  const std::string readme = readText(shippedVit() / "README.md");
  char buf[160];
  std::snprintf(buf, sizeof buf, "accuracy %.3f", card["accuracy"].get<double>());
  EXPECT_NE(readme.find(buf), std::string::npos) << buf;
  std::snprintf(buf, sizeof buf, "heads averaged: %.3f", mean);
  EXPECT_NE(readme.find(buf), std::string::npos) << buf;
  std::snprintf(buf, sizeof buf, "%zu:%zu): %.3f", std::size_t(card["layers"]) - 1, bh,
                head[bh] / n);
  EXPECT_NE(readme.find(buf), std::string::npos) << buf;
}

// The examples the presets open: card.json's figures for each (prediction, last-layer CLS share
// per head, the rollout's share) are the reference's.
TEST(ShippedVit, TheExamplesFiguresAreTheReferences) {
  const ReferenceScript& g = reference();
  ASSERT_TRUE(g.ok);
  const nlohmann::json card = readJson(shippedVit() / "card.json");
  const std::size_t L = card["layers"], H = card["heads"];
  for (const nlohmann::json* c : cases("example_")) {
    const std::string cls = (*c)["name"].get<std::string>().substr(8);
    SCOPED_TRACE(cls);
    const nlohmann::json& e = card["examples"][cls];
    EXPECT_EQ(e["pred"], (*c)["pred"]);
    for (std::size_t h = 0; h < H; ++h)
      EXPECT_NEAR(e["cls_pixel"][L - 1][h].get<double>(), (*c)["cls_pixel_last"][h].get<double>(),
                  1e-5);
    EXPECT_NEAR(e["rollout_pixel"][L - 1].get<double>(), (*c)["rollout_pixel_last"].get<double>(),
                1e-5);
  }
}

// ---- the presets (assets/scenes/46-48): the image view on the examples --------------------------

namespace {

struct Preset {
  const char* file;
  const char* example;
  // what the note quotes: the share on the object of the row shown, and the prediction's p
  const char* share;
  const char* p;
};

const Preset kPresets[] = {
    {"46-where-the-classifier-looks.json", "cross", "0.851", "p 0.997"},
    {"47-one-patchs-row-over-the-image.json", "square", "1.000", "p 0.985"},
    {"48-rollout-attention-through-the-layers.json", "triangle", "0.216", "p 0.937"},
};

// Row `token` of the rollout to `layer` (per layer 0.5 * head mean + 0.5 * I, rows renormalised,
// multiplied up), written here from the weights.
std::vector<double> rolloutRow(const NpyArray& w, std::size_t layer, std::size_t token) {
  const std::size_t H = w.shape[1], T = w.shape[2];
  std::vector<double> r(T * T, 0.0), a(T * T), next(T * T);
  for (std::size_t i = 0; i < T; ++i) r[i * T + i] = 1;
  for (std::size_t l = 0; l <= layer; ++l) {
    for (std::size_t i = 0; i < T; ++i) {
      double sum = 0;
      for (std::size_t j = 0; j < T; ++j) {
        double m = 0;
        for (std::size_t h = 0; h < H; ++h) m += w.data[((l * H + h) * T + i) * T + j];
        a[i * T + j] = 0.5 * m / double(H) + (i == j ? 0.5 : 0.0);
        sum += a[i * T + j];
      }
      for (std::size_t j = 0; j < T; ++j) a[i * T + j] /= sum;
    }
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < T; ++j) {
        double s = 0;
        for (std::size_t k = 0; k < T; ++k) s += a[i * T + k] * r[k * T + j];
        next[i * T + j] = s;
      }
    r.swap(next);
  }
  return std::vector<double>(r.begin() + long(token * T), r.begin() + long((token + 1) * T));
}

}  // namespace

// Each preset names the shipped model and one of its examples; `attnviz export --scene` draws
// the same bytes as `attnviz export --overlay` with the view's settings; and the figures its note
// quotes (the row's share on the object, the prediction's probability) are what the binary's
// weights and logits give on that example.
TEST(ShippedVitPresets, EachRendersAndItsNoteQuotesTheBinarysFigures) {
  const fs::path scenes = fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "scenes";
  const nlohmann::json cfg = readJson(shippedVit() / "config.json");
  const int patch = cfg["patch_size"];
  for (const Preset& pr : kPresets) {
    SCOPED_TRACE(pr.file);
    const nlohmann::json scene = readJson(scenes / pr.file);
    const std::string notes = scene["notes"];
    const fs::path model = fs::weakly_canonical(scenes / scene["model"]["path"].get<std::string>());
    const fs::path image = fs::weakly_canonical(scenes / scene["model"]["image"].get<std::string>());
    EXPECT_EQ(model, fs::weakly_canonical(shippedVit()));
    EXPECT_EQ(image, fs::weakly_canonical(shippedVit() / "examples" / (std::string(pr.example) + ".png")));
    const nlohmann::json& v = scene["view"];
    const int layer = v["layer"], head = v["head"];
    const bool rollout = v["rollout"];
    const int token = v["token"].is_string() ? 0 : v["token"].get<int>();
    TempDir out;
    // the preset's figure, and the command line's with the same settings
    const fs::path a = out.path / "scene.png", b = out.path / "cli.png";
    CliRun run = runBinary({"export", "--scene", (scenes / pr.file).string(), "--png", a.string()},
                           out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    std::vector<std::string> args = {"export", "--model", model.string(), "--image", image.string(),
                                     "--layer", std::to_string(layer), "--head",
                                     std::to_string(head), "--token", std::to_string(token)};
    if (rollout) args.push_back("--rollout");
    args.insert(args.end(), {"--overlay", "--png", b.string()});
    run = runBinary(args, out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const std::string pa = readText(a), pb = readText(b);
    ASSERT_GT(pa.size(), 10000u);
    EXPECT_EQ(pa.substr(1, 3), "PNG");
    EXPECT_TRUE(pa == pb) << "the preset's figure differs from the command line's";
    // the note's figures
    const Pass p = runImage(image, out);
    ASSERT_FALSE(p.w.data.empty());
    const NpyArray mask = [&] {
      // the example's mask as a [side, side] 0/1 array, from the reference's copy of it
      const ReferenceScript& g = reference();
      return readNpy(g.path(std::string("example_") + pr.example + "_mask.npy").string());
    }();
    const std::size_t H = p.w.shape[1], T = p.w.shape[2];
    std::vector<double> row(T);
    if (rollout) {
      row = rolloutRow(p.w, std::size_t(layer), std::size_t(token));
    } else {
      for (std::size_t j = 0; j < T; ++j)
        row[j] = p.w.data[((std::size_t(layer) * H + std::size_t(head)) * T + std::size_t(token)) * T + j];
    }
    const std::size_t side = mask.shape[0], gsz = side / std::size_t(patch);
    double share = 0;
    for (std::size_t r = 0; r < gsz; ++r)
      for (std::size_t c = 0; c < gsz; ++c) {
        double cover = 0;
        for (int y = 0; y < patch; ++y)
          for (int x = 0; x < patch; ++x)
            cover += mask.data[(r * patch + std::size_t(y)) * side + c * patch + std::size_t(x)];
        share += row[1 + r * gsz + c] * cover / double(patch * patch);
      }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", share);
    EXPECT_EQ(std::string(buf), pr.share);
    EXPECT_NE(notes.find(std::string(pr.share) + " of"), std::string::npos) << notes;
    double zmax = -1e30, zsum = 0;
    for (float z : p.z.data) zmax = std::max(zmax, double(z));
    for (float z : p.z.data) zsum += std::exp(double(z) - zmax);
    std::snprintf(buf, sizeof buf, "p %.3f", 1.0 / zsum);
    EXPECT_EQ(std::string(buf), pr.p);
    EXPECT_NE(notes.find(pr.p), std::string::npos) << notes;
    const std::string label = cfg["id2label"][std::to_string(argmax(p.z))];
    EXPECT_EQ(label, pr.example) << "the example is not classified as what it is";
  }
}
