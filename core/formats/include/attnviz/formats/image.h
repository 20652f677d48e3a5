// attnviz core: image files for image models. Decodes PNG, JPEG or BMP to 8-bit RGB and applies
// a model's preprocessor_config.json the way the Hugging Face image processors do (resize with
// Pillow's resampling, centre crop, rescale, normalise), giving the float32 [3, H, W] pixels the
// patch embedding sees and the 8-bit image as the model sees it (after resize and crop).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

// 8-bit RGB, rows top to bottom, pixels interleaved R, G, B.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // width * height * 3
};

// Largest image accepted: each side at most kMaxImageSide and at most kMaxImagePixels pixels.
inline constexpr int kMaxImageSide = 16384;
inline constexpr long long kMaxImagePixels = 64LL << 20;

// Decodes the bytes of a PNG, JPEG or BMP file to RGB: grey is replicated to the three
// channels, alpha is discarded (as Pillow's convert("RGB") does). Throws InputError
// "<name>: <problem>" for another format, a file that does not decode, or one beyond the limits.
RgbImage decodeImage(const std::string& bytes, const std::string& name);
// readFile + decodeImage.
RgbImage readImageFile(const std::string& path);

// Pillow's resampling filters, by their number in preprocessor_config.json's `resample`.
enum class ResampleFilter { Bilinear = 2, Bicubic = 3 };

// Resizes as Pillow's Image.resize does for an RGB image: separable, the horizontal pass then
// the vertical one, each with the filter's support widened by the reduction factor, fixed-point
// coefficients and an 8-bit result between the passes. Bit-exact with Pillow. width, height >= 1.
RgbImage resizeLikePillow(const RgbImage& in, int width, int height, ResampleFilter filter);

// transformers' center_crop: offsets (in - crop) // 2 (floor), zero padding where the crop is
// larger than the image.
RgbImage centerCrop(const RgbImage& in, int width, int height);

// A preprocessor_config.json as the model family's image processor reads it.
struct ImagePreprocessor {
  bool doResize = true;
  // Either shortestEdge > 0 (keep the aspect ratio) or resizeHeight/resizeWidth > 0.
  int shortestEdge = 0;
  int resizeHeight = 0;
  int resizeWidth = 0;
  ResampleFilter resample = ResampleFilter::Bilinear;
  bool doCenterCrop = false;
  int cropHeight = 0;
  int cropWidth = 0;
  bool doRescale = true;
  double rescaleFactor = 1.0 / 255.0;
  bool doNormalize = true;
  double mean[3] = {0.5, 0.5, 0.5};
  double std[3] = {0.5, 0.5, 0.5};

  // Parses the JSON text of a preprocessor_config.json; `modelType` (config.json's model_type)
  // picks the processor class, its defaults and how a bare-integer `size` reads: the shortest
  // edge for clip*, dinov2*, bit; a square for vit, deit, siglip*. An unknown model type falls
  // back on the file's image_processor_type. Throws InputError "<name>: <problem>".
  static ImagePreprocessor fromJson(const std::string& text, const std::string& modelType,
                                    const std::string& name);
  // Reads <modelDir>/preprocessor_config.json and <modelDir>/config.json's model_type.
  static ImagePreprocessor fromModelDir(const std::string& modelDir);

  // The size after the resize step (height, width) for an input of the given size, as
  // transformers' get_resize_output_image_size computes it (the long side truncated).
  void resizedSize(int inHeight, int inWidth, int& outHeight, int& outWidth) const;
  // Resize then centre crop (each when enabled): the image as the model sees it.
  RgbImage resizeAndCrop(const RgbImage& in) const;
  // Rescale and normalise `seen` (the result of resizeAndCrop) to float32 [3, H, W], with the
  // float32 arithmetic transformers uses.
  std::vector<float> toPixels(const RgbImage& seen) const;
};

struct PreprocessedImage {
  int height = 0;
  int width = 0;
  std::vector<float> pixels;  // [3, height, width]
  RgbImage seen;              // after resize and crop, before rescale and normalisation
};

PreprocessedImage preprocessImage(const RgbImage& image, const ImagePreprocessor& pre);
// Decodes `imagePath` and applies <modelDir>'s preprocessor_config.json (and config.json's
// model_type). Throws InputError naming the file at fault.
PreprocessedImage preprocessImageFile(const std::string& imagePath, const std::string& modelDir);

}  // namespace attnviz
