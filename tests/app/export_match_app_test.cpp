// App tests: what you see is what you export. The app's export and `attnviz export --scene` of
// the scene the app saved give the same bytes, for every preset.
// The app runs under Xvfb (support/app_run.h); expected values come from references
// worked out here or from the command line, never from the app's own output.

#include "app_run.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

using namespace attnviz::apptest;

namespace {

// What you see is what you export: the app's export (as Ctrl+S writes it, through --export) and
// `attnviz export --scene` of the scene the app saved in the same run give the same PNG: same
// size, same title, same pixels. For every preset, and for a scene with a painted cell.

class AppExportMatchesCli : public ::testing::TestWithParam<std::string> {};

TEST_P(AppExportMatchesCli, GuiExportAndCliExportOfTheSavedSceneAreIdentical) {
  const std::string name = GetParam();
  const bool painted = name == "painted";
  const std::string file = painted ? "01-rows-sum-to-one.json" : name;
  const std::string tag = "wysiwye-" + std::to_string(std::hash<std::string>{}(name));
  const std::string gui = tempPath(tag + "-gui.png"), cli = tempPath(tag + "-cli.png");
  const std::string saved = tempPath(tag + ".json");
  for (const auto& f : {gui, cli, saved}) std::remove(f.c_str());
  std::string args =
      "--scene " + scene(file.c_str()) + " --export " + gui + " --save-scene " + saved;
  if (painted) args += " --paint --click-cell 6,3";
  const Shot s = runApp(tag, args, 8);
  ASSERT_RAN(s);
  if (painted) {
    ASSERT_TRUE(isMasked(s.cell(6, 3))) << "the click did not paint the cell";
    const std::vector<unsigned char> json = fileBytes(saved);
    ASSERT_NE(std::string(json.begin(), json.end()).find("\"custom\""), std::string::npos)
        << "the painted cell is not in the saved scene's custom mask";
  }
  const std::string out = runCli("export --scene " + saved + " --png " + cli);
  ASSERT_EQ(out.find("exit status"), std::string::npos) << out;

  const Decoded a = decode(gui), b = decode(cli);
  ASSERT_GT(a.width, 0) << "the app wrote no PNG\n" << s.out;
  ASSERT_GT(b.width, 0) << "the command line wrote no PNG\n" << out;
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  ASSERT_EQ(a.rgba.size(), b.rgba.size());
  std::size_t differing = 0, first = 0;
  for (std::size_t k = 0; k < a.rgba.size(); k += 4)
    if (!std::equal(&a.rgba[k], &a.rgba[k] + 4, &b.rgba[k]) && differing++ == 0) first = k / 4;
  EXPECT_EQ(differing, 0u) << "pixels differ, the first at (" << first % a.width << ", "
                           << first / a.width << ")";
  EXPECT_TRUE(fileBytes(gui) == fileBytes(cli)) << "the PNG files differ";
}

// The same for the vector figures: the app's --export to .svg and .pdf (the Export dialog's SVG
// and PDF choices) and `export --scene --svg --pdf` of the saved scene write the same bytes.
TEST(AppExportMatchesCliVector, SvgAndPdfOfTheSavedSceneAreIdentical) {
  for (const char* ext : {"svg", "pdf"}) {
    const std::string tag = std::string("wysiwye-vector-") + ext;
    const std::string gui = tempPath(tag + "-gui." + ext), cli = tempPath(tag + "-cli." + ext);
    const std::string saved = tempPath(tag + ".json");
    for (const auto& f : {gui, cli, saved}) std::remove(f.c_str());
    const Shot s = runApp(tag,
                          "--scene " + scene("03-causal-triangle.json") + " --export " + gui +
                              " --save-scene " + saved,
                          6);
    ASSERT_RAN(s);
    const std::string out = runCli("export --scene " + saved + " --" + ext + " " + cli);
    ASSERT_EQ(out.find("exit status"), std::string::npos) << out;
    const std::vector<unsigned char> a = fileBytes(gui), b = fileBytes(cli);
    ASSERT_GT(a.size(), 100u) << "the app wrote no " << ext << "\n" << s.out;
    EXPECT_TRUE(a == b) << "the " << ext << " files differ";
    const std::string head(a.begin(), a.begin() + 5);
    EXPECT_EQ(head, std::string(ext) == "svg" ? "<?xml" : "%PDF-");
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryPresetAndAPaintedScene, AppExportMatchesCli,
    ::testing::Values("01-rows-sum-to-one.json", "02-wrong-axis-softmax.json",
                      "03-causal-triangle.json", "04-cross-attention-5x12.json",
                      "05-decode-kv-cache.json", "06-temperature.json", "07-sliding-window.json",
                      "08-alibi.json", "09-llama4-chunked-attention.json",
                      "10-packed-documents.json", "11-gemma2-softcap.json",
                      "12-how-sparse-is-my-mask.json", "14-flashattention.json", "painted"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      return info.param == "painted" ? std::string("painted") : "preset" + info.param.substr(0, 2);
    });

// The presets are all there: a new one is covered by the list above or this fails. Model
// presets ("model" object, the model view) are covered by the model-view tests
// (model_view_app_test.cpp, model_presets_app_test.cpp) instead.
TEST(AppExportMatchesCliPresets, TheListAboveHoldsEveryPreset) {
  int n = 0, models = 0;
  for (const auto& e : std::filesystem::directory_iterator(ATTNVIZ_SCENES)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    (text.find("\"model\":") != std::string::npos ? models : n) += 1;
  }
  EXPECT_EQ(n, 13);
  // previous-token, induction, ablation, which heads copy, patching (kjv-byte-2l); grouped-query
  // attention, RoPE, induction on English, watch it write, ablate and watch it forget (kjv-sp-llama);
  // local and global layers, soft-capping (kjv-sp-gemma2); what RoPE's frequencies carry,
  // attention sinks, massive activations, retrieval heads (kjv-sp-llama, the research demos);
  // bidirectional rows, [SEP] as a no-op, sentence pairs, fill then ablate (kjv-wp-bert);
  // cross-attention, shifted by one, which head aligns, ablate the aligning heads, watch it
  // translate, T5's position bias (kjv-t5-align, tests/app/seq2seq_app_test.cpp); find the
  // induction heads, a head on one prompt vs the corpus, sinks everywhere (kjv-sp-llama's Head
  // finder, tests/app/head_finder_app_test.cpp); why the induction head attends here, what
  // writes a sink's key, K-composition (kjv-sp-llama's Why here? panel,
  // tests/app/why_here_app_test.cpp); high-norm tokens and registers, SigLIP's probe (random-init
  // image models' image view, tests/app/image_view_app_test.cpp); where the classifier looks,
  // one patch's row, rollout through the layers (shapes-vit's image view,
  // tests/model/shipped_vit_test.cpp)
  EXPECT_EQ(models, 37);
}

}  // namespace
