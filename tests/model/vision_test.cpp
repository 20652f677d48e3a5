// Image models (vit, deit, dinov2, dinov2_with_registers, clip, clip_vision_model, siglip,
// siglip_vision_model) through the real binary against vision_reference.py's float64 torch
// reference: random-init folders generated at test time (never committed), every layer's attention
// weights within 1e-5, the last hidden state and the head's logits within 1e-4 of their scale;
// DINOv2's position embeddings resized bicubically for other image sizes; SigLIP's probe
// attention; hidden patches and ablated heads against the reference doing the same; --top-k; bad
// folders and pixels.
#include "model_test_util.h"
#include "reference_script.h"

#include "attnviz/formats/npy.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

using namespace attnviz;
using namespace attnviz::testing;

namespace {

const ReferenceScript& generated() {
  static ReferenceScript g("vision_reference.py");
  return g;
}

std::string joinInts(const nlohmann::json& list) {
  std::string s;
  for (const auto& v : list) s += (s.empty() ? "" : ",") + std::to_string(v.get<int>());
  return s;
}

// `attnviz model --pixels` on a case, with the case's interventions; the outputs against the
// reference.
void checkCase(const std::string& name) {
  const ReferenceScript& g = generated();
  ASSERT_TRUE(g.ok) << "vision_reference.py failed";
  const nlohmann::json& c = g.find(name);
  ASSERT_FALSE(c.is_null()) << name;
  TempDir out;
  const fs::path w = out.path / "w.npy", h = out.path / "h.npy", z = out.path / "z.npy";
  std::vector<std::string> args = {"model",
                                   "--model",
                                   g.path(c["folder"]).string(),
                                   "--pixels",
                                   g.path(c["pixels"]).string(),
                                   "--weights",
                                   w.string(),
                                   "--hidden",
                                   h.string()};
  const bool head = c.contains("logits");
  if (head) args.insert(args.end(), {"--logits", z.string()});
  const fs::path pw = out.path / "probe.npy";
  if (c.contains("probe")) args.insert(args.end(), {"--probe-weights", pw.string()});
  const fs::path rs = out.path / "residual.npy";
  if (c.contains("residual")) args.insert(args.end(), {"--residual", rs.string()});
  if (c.contains("mask_patches"))
    args.insert(args.end(), {"--mask-patches", joinInts(c["mask_patches"])});
  if (c.contains("temperature"))
    args.insert(args.end(), {"--temperature", std::to_string(c["temperature"].get<double>())});
  if (c.contains("ablate"))
    for (const auto& lh : c["ablate"])
      args.insert(args.end(), {"--ablate", std::to_string(lh[0].get<int>()) + ":" +
                                               std::to_string(lh[1].get<int>())});
  const CliRun run = runBinary(args, out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
  const NpyArray gw = readNpy(w.string()), gh = readNpy(h.string());
  const NpyArray rw = readNpy(g.path(name + "_weights.npy").string());
  const NpyArray rh = readNpy(g.path(name + "_hidden.npy").string());
  EXPECT_EQ(gw.shape, rw.shape);
  EXPECT_EQ(gh.shape, rh.shape);
  expectClose(gw.data, rw, 1e-5, 0, name + " weights");
  expectClose(gh.data, rh, 0, 1e-4, name + " hidden");
  if (c.contains("probe")) {
    const NpyArray gp = readNpy(pw.string()), rp = readNpy(g.path(c["probe"]).string());
    EXPECT_EQ(gp.shape, rp.shape);
    expectClose(gp.data, rp, 1e-5, 0, name + " probe weights");
  }
  if (c.contains("residual")) {  // after the embeddings and each layer [L + 1, T, d]
    const NpyArray gr = readNpy(rs.string()), rr = readNpy(g.path(c["residual"]).string());
    EXPECT_EQ(gr.shape, rr.shape);
    expectClose(gr.data, rr, 0, 1e-4, name + " residual");
  }
  if (head) {
    const NpyArray gz = readNpy(z.string()), rz = readNpy(g.path(c["logits"]).string());
    EXPECT_EQ(gz.shape, rz.shape);
    expectClose(gz.data, rz, 0, 1e-4, name + " logits");
  }
}

}  // namespace

TEST(VisionModels, VitForImageClassification) { checkCase("vit_cls"); }
TEST(VisionModels, VitModelWithPooler) { checkCase("vit_bare"); }
TEST(VisionModels, DeitWithTeacherAveragesBothHeads) { checkCase("deit_teacher"); }
TEST(VisionModels, DeitForImageClassification) { checkCase("deit_cls"); }
TEST(VisionModels, Dinov2AtItsImageSize) { checkCase("dinov2_native"); }
TEST(VisionModels, Dinov2BareModel) { checkCase("dinov2_bare"); }
// A 5 x 7 and a 3 x 2 patch grid from a 4 x 4 one: the position embeddings resized bicubically.
TEST(VisionModels, Dinov2InterpolatesPositionsForALargerImage) { checkCase("dinov2_larger"); }
TEST(VisionModels, Dinov2InterpolatesPositionsForASmallerImage) { checkCase("dinov2_smaller"); }
// Hidden patches get weight exactly 0 from every query; ablated heads change the later layers.
TEST(VisionModels, VitMaskPatches) { checkCase("vit_mask"); }
TEST(VisionModels, VitAblateHeads) { checkCase("vit_ablate"); }
// tau = 0.5 with a hidden patch; tau = 2.5 on SigLIP, its probe included.
TEST(VisionModels, VitTemperature) { checkCase("vit_temperature"); }
TEST(VisionModels, SiglipTemperatureScalesTheProbeToo) { checkCase("siglip_temperature"); }
TEST(VisionModels, DeitMaskPatchesAndAblate) { checkCase("deit_mask"); }
TEST(VisionModels, Dinov2MaskPatchesAndAblateAtAnotherSize) { checkCase("dinov2_mask"); }
// Registers after CLS (no position embedding); the resize antialiases.
TEST(VisionModels, Dinov2WithRegistersAtItsImageSize) { checkCase("dinov2_reg_native"); }
TEST(VisionModels, Dinov2WithRegistersBareModel) { checkCase("dinov2_reg_bare"); }
TEST(VisionModels, Dinov2WithRegistersLargerImage) { checkCase("dinov2_reg_larger"); }
TEST(VisionModels, Dinov2WithRegistersSmallerImageAntialiased) { checkCase("dinov2_reg_smaller"); }
TEST(VisionModels, Dinov2WithRegistersMaskPatchesAndAblate) { checkCase("dinov2_reg_mask"); }
// CLIP's vision tower: CLIPModel's vision_config, CLIPVisionModel; pre_layrnorm, quick GELU,
// last_hidden_state without post_layernorm.
TEST(VisionModels, ClipModelVisionTower) { checkCase("clip"); }
TEST(VisionModels, ClipVisionModel) { checkCase("clip_vision_model"); }
TEST(VisionModels, ClipMaskPatchesAndAblate) { checkCase("clip_mask"); }
TEST(VisionModels, ClipVisionModelMaskPatchesAndAblate) { checkCase("clip_vision_model_mask"); }
// SigLIP's vision tower: no CLS, tanh GELU, post_layernorm in last_hidden_state; the pooling
// probe's attention [H, 1, T] (--probe-weights), hidden patches masked there too.
TEST(VisionModels, SiglipModelVisionTower) { checkCase("siglip"); }
TEST(VisionModels, SiglipVisionModel) { checkCase("siglip_vision_model"); }
TEST(VisionModels, SiglipMaskPatchesAndAblate) { checkCase("siglip_mask"); }
TEST(VisionModels, SiglipVisionModelMaskPatchesAndAblate) { checkCase("siglip_vision_model_mask"); }

// --top-k N: id, probability, label from id2label, the most likely first.
TEST(VisionModels, TopKPrintsLabels) {
  const ReferenceScript& g = generated();
  ASSERT_TRUE(g.ok);
  for (const char* name : {"vit_cls", "deit_teacher", "dinov2_larger"}) {
    const nlohmann::json& c = g.find(name);
    TempDir out;
    const CliRun run = runBinary({"model", "--model", g.path(c["folder"]).string(), "--pixels",
                                  g.path(c["pixels"]).string(), "--top-k", "3"},
                                 out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    std::istringstream lines(run.out);
    std::string line;
    int n = 0;
    while (std::getline(lines, line)) {
      ASSERT_LT(n, 3) << run.out;
      const int id = c["top"][n].get<int>();
      int gotId = -1;
      double p = 0;
      char label[64] = {0};
      ASSERT_EQ(std::sscanf(line.c_str(), "%d\t%lf\t%63[^\n]", &gotId, &p, label), 3) << line;
      EXPECT_EQ(gotId, id) << name << ": " << run.out;
      EXPECT_NEAR(p, c["probs"][id].get<double>(), 2e-6) << name;
      EXPECT_EQ(std::string(label), std::string("class ") + char('A' + id)) << name;
      ++n;
    }
    EXPECT_EQ(n, 3) << run.out;
  }
}

// Pixels of the wrong size (a family without interpolation), the wrong shape or channel count:
// exit 1, one line naming the .npy file.
TEST(VisionModels, BadPixelsExitOneNamingTheFile) {
  const ReferenceScript& g = generated();
  ASSERT_TRUE(g.ok);
  TempDir out;
  struct Bad {
    const char* folder;
    std::vector<long long> shape;
    const char* problem;
  };
  const std::vector<Bad> bad = {{"vit_cls", {3, 40, 32}, "takes 32x32"},
                                {"deit_cls", {1, 3, 16, 16}, "takes 32x32"},
                                {"vit_cls", {32, 32}, "expected pixels"},
                                {"vit_cls", {4, 32, 32}, "expected pixels"},
                                {"vit_cls", {2, 3, 32, 32}, "expected pixels"},
                                {"dinov2_cls", {3, 5, 28}, "smaller than one patch"}};
  int i = 0;
  for (const Bad& b : bad) {
    const fs::path px = out.path / ("bad" + std::to_string(i++) + ".npy");
    std::size_t n = 1;
    for (long long s : b.shape) n *= std::size_t(s);
    std::vector<float> data(n, 0.5f);
    saveNpy(px.string(), b.shape, data.data());
    const CliRun run = runBinary({"model", "--model", g.path(b.folder).string(), "--pixels",
                                  px.string(), "--hidden", (out.path / "h.npy").string()},
                                 out.path);
    expectOneLineRefusal(run, px, b.problem);
    EXPECT_FALSE(fs::exists(out.path / "h.npy"));
  }
}

// Broken folders: exit 1, one line naming config.json or model.safetensors.
TEST(VisionModels, BadFoldersExitOneNamingTheFile) {
  const ReferenceScript& g = generated();
  ASSERT_TRUE(g.ok);
  TempDir out;
  const std::string px = g.path("vit_cls_pixels.npy").string();
  auto runOn = [&](const fs::path& dir) {
    return runBinary({"model", "--model", dir.string(), "--pixels", px}, out.path);
  };
  fs::path d = editedCopy(g.path("vit_cls"), out.path / "heads",
                          [](nlohmann::json& j) { j["num_attention_heads"] = 5; });
  expectOneLineRefusal(runOn(d), d / "config.json", "not a multiple of num_attention_heads");
  d = editedCopy(g.path("vit_cls"), out.path / "act",
                 [](nlohmann::json& j) { j["hidden_act"] = "swish"; });
  expectOneLineRefusal(runOn(d), d / "config.json", "hidden_act");
  d = editedCopy(g.path("vit_cls"), out.path / "size",
                 [](nlohmann::json& j) { j["hidden_size"] = 48; });
  expectOneLineRefusal(runOn(d), d / "model.safetensors", "has shape");
  d = editedCopy(g.path("vit_cls"), out.path / "layers",
                 [](nlohmann::json& j) { j["num_hidden_layers"] = 3; });
  expectOneLineRefusal(runOn(d), d / "model.safetensors", "encoder.layer.2.");
  d = editedCopy(g.path("vit_cls"), out.path / "patch",
                 [](nlohmann::json& j) { j["patch_size"] = "8"; });
  expectOneLineRefusal(runOn(d), d / "config.json", "patch_size");
}

// Usage: a text model given --pixels, an image model given --text, --logits without a head,
// both --image and --pixels, a patch index outside the grid, a temperature not above 0: exit 2.
TEST(VisionModels, UsageErrorsExitTwo) {
  const ReferenceScript& g = generated();
  ASSERT_TRUE(g.ok);
  TempDir out;
  const std::string px = g.path("vit_cls_pixels.npy").string();
  const std::string vit = g.path("vit_cls").string();
  const std::vector<std::vector<std::string>> cases = {
      {"model", "--model", ATTNVIZ_SHIPPED_MODEL_DIR, "--pixels", px},
      {"model", "--model", vit, "--text", "a cat"},
      {"model", "--model", g.path("vit_bare").string(), "--pixels",
       g.path("vit_bare_pixels.npy").string(), "--logits", (out.path / "z.npy").string()},
      {"model", "--model", vit, "--pixels", px, "--image", px},
      {"model", "--model", vit, "--pixels", px, "--mask-patches", "16"},
      {"model", "--model", vit, "--pixels", px, "--ablate", "2:0"},
      {"model", "--model", vit, "--pixels", px, "--ablate", "x"},
      {"model", "--model", vit, "--pixels", px, "--temperature", "0"},
      {"model", "--model", vit, "--pixels", px, "--temperature", "-1"},
      {"model", "--model", vit, "--pixels", px, "--probe-weights", (out.path / "z.npy").string()}};
  for (const auto& args : cases) {
    const CliRun run = runBinary(args, out.path);
    EXPECT_EQ(run.exitCode, 2) << args[3] << " " << args.back() << ": " << run.err;
    EXPECT_EQ(lineCount(run.err), 1) << run.err;
  }
  EXPECT_FALSE(fs::exists(out.path / "z.npy"));
}

// --image: the file through the folder's preprocessor_config.json gives the pixels PIL and numpy
// give (vision_image_reference.py: a square bilinear resize for ViT, CLIP's shortest edge with
// bicubic and a centre crop), --pixels-out writes them, and the pass on them equals the pass on
// those pixels given with --pixels.
TEST(VisionModels, ImageFilesArePreprocessedAsPilDoesIt) {
  const ReferenceScript& g = generated();
  ASSERT_TRUE(g.ok) << "vision_reference.py failed";
  for (const char* name : {"vit_cls", "clip"}) {
    SCOPED_TRACE(name);
    const fs::path folder = g.path(g.find(name)["folder"]);
    TempDir out;
    const std::string script = (modelDir() / "vision_image_reference.py").string();
    ASSERT_EQ(std::system((ATTNVIZ_PYTHON " " + shellQuote(script) + " " +
                           shellQuote(folder.string()) + " " + shellQuote(out.path.string()))
                              .c_str()),
              0);
    const fs::path png = out.path / "image.png", px = out.path / "px.npy",
                   w1 = out.path / "w1.npy", w2 = out.path / "w2.npy";
    CliRun run = runBinary({"model", "--model", folder.string(), "--image", png.string(),
                            "--pixels-out", px.string(), "--weights", w1.string()},
                           out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const NpyArray got = readNpy(px.string());
    const NpyArray want = readNpy((out.path / "pixels.npy").string());
    ASSERT_EQ(got.shape, want.shape);
    expectClose(got.data, want, 1e-5, 0, std::string(name) + " pixels");
    run = runBinary({"model", "--model", folder.string(), "--pixels", px.string(), "--weights",
                     w2.string()},
                    out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(readNpy(w1.string()).data, readNpy(w2.string()).data);
  }
  // A file that is not an image: exit 1, one line naming it.
  TempDir out;
  const fs::path bad = out.path / "not.png";
  { std::ofstream(bad) << "not an image"; }
  const CliRun r = runBinary({"model", "--model", g.path(g.find("vit_cls")["folder"]).string(),
                              "--image", bad.string()},
                             out.path);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find(bad.string()), std::string::npos) << r.err;
}
