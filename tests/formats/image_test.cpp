// Image decoding and the Hugging Face preprocessing against Pillow + numpy (image_reference.py,
// run here into a temporary folder): decoded RGB, the resized and cropped 8-bit image and the
// float32 [3, H, W] pixels per family (vit, deit, clip, dinov2, siglip, bare-integer sizes,
// bilinear and bicubic); bad images and configs give one-line errors naming the file.
#include "attnviz/formats/image.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/npy.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace fs = std::filesystem;

namespace {

using attnviz::ImagePreprocessor;
using attnviz::InputError;
using attnviz::RgbImage;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

class ImageReference : public ::testing::Test {
 protected:
  // The reference is written once for the suite; a failure there fails every test (an assertion
  // in SetUpTestSuite would only skip them).
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/attnviz_image_test_XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = d;
    const std::string script = std::string(ATTNVIZ_IMAGE_TEST_DIR) + "/image_reference.py";
    const std::string cmd = ATTNVIZ_PYTHON " " + script + " " + dir_;
    if (std::system(cmd.c_str()) != 0) {
      error_ = "failed: " + cmd;
      return;
    }
    manifest_ = nlohmann::json::parse(slurp(dir_ + "/manifest.json"));
  }
  void SetUp() override { ASSERT_TRUE(error_.empty()) << error_; }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  static std::string dir_, error_;
  static nlohmann::json manifest_;
};
std::string ImageReference::dir_;
std::string ImageReference::error_;
nlohmann::json ImageReference::manifest_;

// The largest |a - b| over the 8-bit image and a float32 [H, W, 3] .npy of the same.
double maxDiff(const RgbImage& img, const std::string& npyPath) {
  const attnviz::NpyArray e = attnviz::readNpy(npyPath);
  if (e.shape.size() != 3 || e.shape[0] != img.height || e.shape[1] != img.width ||
      e.shape[2] != 3) {
    ADD_FAILURE() << npyPath << ": shape differs from " << img.height << "x" << img.width;
    return 1e9;
  }
  double m = 0;
  for (std::size_t i = 0; i < img.rgb.size(); ++i)
    m = std::max(m, std::fabs(double(img.rgb[i]) - double(e.data[i])));
  return m;
}

RgbImage fromNpy(const std::string& npyPath) {
  const attnviz::NpyArray e = attnviz::readNpy(npyPath);
  RgbImage img;
  img.height = int(e.shape[0]);
  img.width = int(e.shape[1]);
  img.rgb.resize(e.data.size());
  for (std::size_t i = 0; i < e.data.size(); ++i) img.rgb[i] = std::uint8_t(e.data[i]);
  return img;
}

// Checks one case's seen image and pixels; returns the seen image's max error (8-bit units).
double checkCase(const nlohmann::json& c, const attnviz::PreprocessedImage& got) {
  const std::string what = c["name"].get<std::string>() + " / " + c["family"].get<std::string>();
  const double seenErr = maxDiff(got.seen, c["seen"]);
  const attnviz::NpyArray px = attnviz::readNpy(c["pixels"]);
  EXPECT_EQ(px.shape, (std::vector<long long>{3, got.height, got.width})) << what;
  if (px.data.size() != got.pixels.size()) return 1e9;
  double pxErr = 0;
  for (std::size_t i = 0; i < got.pixels.size(); ++i)
    pxErr = std::max(pxErr, double(std::fabs(got.pixels[i] - px.data[i])));
  // With the same 8-bit image the float32 arithmetic is the same as numpy's: exact.
  if (seenErr == 0) {
    EXPECT_EQ(pxErr, 0.0) << what;
  }
  return seenErr;
}

TEST_F(ImageReference, DecodesLikePillowConvertRgb) {
  double jpegErr = 0;
  int n = 0;
  for (const auto& c : manifest_) {
    if (c["family"] != "vit") continue;  // once per image
    const RgbImage img = attnviz::readImageFile(c["image"]);
    const double err = maxDiff(img, c["rgb"]);
    if (c["jpeg"].get<bool>()) {
      jpegErr = std::max(jpegErr, err);
    } else {
      EXPECT_EQ(err, 0.0) << c["name"];  // PNG (RGB, RGBA, L, LA) and BMP: exact
    }
    ++n;
  }
  EXPECT_EQ(n, 11);
  // stb_image's JPEG decoder is not libjpeg's; its IDCT and rounding differ by a few levels.
  std::printf("JPEG decode: max |stb - Pillow| = %g / 255\n", jpegErr);
  EXPECT_LE(jpegErr, 8.0);
}

void checkFilter(const nlohmann::json& manifest, int filter) {
  double worst = 0;
  int n = 0;
  for (const auto& c : manifest) {
    if (c["filter"] != filter) continue;
    const std::string what = c["name"].get<std::string>() + " / " + c["family"].get<std::string>();
    attnviz::PreprocessedImage got;
    if (c["jpeg"].get<bool>()) {
      // Resize Pillow's own decode, so only the resampling is compared.
      got = attnviz::preprocessImage(fromNpy(c["rgb"]),
                                     ImagePreprocessor::fromModelDir(c["model"]));
    } else {
      got = attnviz::preprocessImageFile(c["image"], c["model"]);
    }
    const double err = checkCase(c, got);
    EXPECT_EQ(err, 0.0) << what;
    worst = std::max(worst, err);
    ++n;
  }
  EXPECT_GT(n, 20);
  std::printf("filter %d: %d cases, max |attnviz - Pillow| before normalisation = %g / 255\n",
              filter, n, worst);
}

TEST_F(ImageReference, BilinearMatchesPillowExactly) { checkFilter(manifest_, 2); }
TEST_F(ImageReference, BicubicMatchesPillowExactly) { checkFilter(manifest_, 3); }

TEST_F(ImageReference, SizesFollowTheProcessorClass) {
  // A bare integer: shortest edge for CLIP, square for ViT; the long side truncated.
  const auto clip = ImagePreprocessor::fromModelDir(dir_ + "/models/clip_bare");
  int h = 0, w = 0;
  clip.resizedSize(517, 333, h, w);
  EXPECT_EQ(w, 224);
  EXPECT_EQ(h, int(224.0 * 517 / 333));
  const auto vit = ImagePreprocessor::fromModelDir(dir_ + "/models/vit_bare");
  vit.resizedSize(517, 333, h, w);
  EXPECT_EQ(h, 96);
  EXPECT_EQ(w, 96);
  const auto deit = ImagePreprocessor::fromModelDir(dir_ + "/models/deit");
  const auto pre = attnviz::preprocessImageFile(dir_ + "/images/land_640x480.png",
                                                dir_ + "/models/deit");
  EXPECT_EQ(pre.height, 224);
  EXPECT_EQ(pre.width, 224);
  EXPECT_EQ(deit.resizeHeight, 256);
}

// `f` must throw InputError with one line starting with `path`.
void expectOneLineError(const std::function<void()>& f, const std::string& path,
                        const std::string& fragment = "") {
  try {
    f();
    ADD_FAILURE() << path << ": no error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(path + ": ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    if (!fragment.empty()) {
      EXPECT_NE(m.find(fragment), std::string::npos) << m;
    }
  }
}

std::string be32(unsigned v) {
  return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

TEST_F(ImageReference, BadImagesGiveOneLineErrors) {
  const std::string good = slurp(dir_ + "/images/small_50x40.png");
  const std::string bmp = slurp(dir_ + "/images/bmp_161x99.bmp");
  const std::string model = dir_ + "/models/vit";
  std::string huge = std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + "IHDR" + be32(20000) +
                     be32(10) + std::string("\x08\x02\x00\x00\x00", 5) + be32(0);
  huge += good.substr(33);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"empty.png", ""},
      {"garbage.png", "this is not an image at all"},
      {"gif.png", "GIF89a\x01\x00\x01\x00\x00\x00\x00;"},
      {"truncated.png", good.substr(0, good.size() / 2)},
      {"header_only.png", good.substr(0, 40)},
      {"truncated.bmp", bmp.substr(0, 30)},
      {"huge.png", huge},
  };
  for (const auto& [name, bytes] : bad) {
    const std::string path = dir_ + "/" + name;
    spit(path, bytes);
    expectOneLineError([&] { attnviz::readImageFile(path); }, path);
    expectOneLineError([&] { attnviz::preprocessImageFile(path, model); }, path);
  }
  expectOneLineError([&] { attnviz::preprocessImageFile(dir_ + "/huge.png", model); },
                     dir_ + "/huge.png", "beyond the limit");
  expectOneLineError([&] { attnviz::readImageFile(dir_ + "/missing.png"); },
                     dir_ + "/missing.png");
}

TEST_F(ImageReference, BadConfigsGiveOneLineErrors) {
  const std::string image = dir_ + "/images/small_50x40.png";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"vit", "{ not json"},
      {"vit", "[1, 2]"},
      {"vit", R"({"size": "big"})"},
      {"vit", R"({"size": {"longest_edge": 300}})"},
      {"vit", R"({"size": 0})"},
      {"vit", R"({"resample": 0})"},
      {"vit", R"({"resample": "bicubic"})"},
      {"vit", R"({"image_std": [0.5, 0, 0.5]})"},
      {"vit", R"({"image_mean": [0.5, 0.5]})"},
      {"vit", R"({"do_center_crop": true, "crop_size": null})"},
      {"vit", R"({"do_normalize": "yes"})"},
      {"llama", R"({"size": 224})"},
  };
  int i = 0;
  for (const auto& [type, pre] : bad) {
    const std::string md = dir_ + "/badcfg" + std::to_string(i++);
    fs::create_directories(md);
    spit(md + "/config.json", "{\"model_type\": \"" + type + "\"}");
    spit(md + "/preprocessor_config.json", pre);
    expectOneLineError([&] { attnviz::preprocessImageFile(image, md); },
                       md + "/preprocessor_config.json");
  }
  // No config.json, then no preprocessor_config.json: each error names the missing file.
  const std::string md = dir_ + "/noconfig";
  fs::create_directories(md);
  expectOneLineError([&] { attnviz::preprocessImageFile(image, md); }, md + "/config.json");
  spit(md + "/config.json", "{\"model_type\": \"vit\"}");
  expectOneLineError([&] { attnviz::preprocessImageFile(image, md); },
                     md + "/preprocessor_config.json");
}

}  // namespace
