// Image files and the Hugging Face image preprocessing (see image.h and
// docs/image-preprocessing.md). The decoding is Debian's stb_image (libstb, linked as a shared
// library, so no implementation is compiled here); the resampling follows Pillow's algorithm
// (separable passes, fixed-point coefficients, 8-bit between the passes) so results are exact.
#include "attnviz/formats/image.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <stb_image.h>

namespace attnviz {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw InputError(name + ": " + what);
}

// ---- resampling ---------------------------------------------------------------------------

// Pillow keeps 22 fractional bits in its 8-bit coefficients (32 - 8 - 2).
constexpr int kPrecisionBits = 32 - 8 - 2;

double bilinearWeight(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic with a = -0.5.
double bicubicWeight(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// One output coordinate's taps: first input index and the integer weights.
struct Taps {
  int ksize = 0;
  std::vector<int> first;   // [out]
  std::vector<int> count;   // [out]
  std::vector<int> weight;  // [out * ksize]
};

// The taps of one axis, computed in double and rounded to fixed point as Pillow does.
Taps axisTaps(int inSize, int outSize, ResampleFilter filter) {
  const double support0 = filter == ResampleFilter::Bicubic ? 2.0 : 1.0;
  const double scale = double(inSize) / double(outSize);
  const double filterScale = std::max(scale, 1.0);
  const double support = support0 * filterScale;
  Taps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(outSize);
  t.count.resize(outSize);
  t.weight.assign(std::size_t(outSize) * std::size_t(t.ksize), 0);
  std::vector<double> w(std::size_t(t.ksize), 0.0);
  for (int o = 0; o < outSize; ++o) {
    const double center = (o + 0.5) * scale;
    const double inv = 1.0 / filterScale;
    int lo = int(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = int(center + support + 0.5);
    if (hi > inSize) hi = inSize;
    const int n = std::min(hi - lo, t.ksize);
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
      const double x = (k + lo - center + 0.5) * inv;
      w[k] = filter == ResampleFilter::Bicubic ? bicubicWeight(x) : bilinearWeight(x);
      sum += w[k];
    }
    for (int k = 0; k < n; ++k) {
      const double v = sum != 0.0 ? w[k] / sum : w[k];
      const double scaled = v * double(1 << kPrecisionBits);
      t.weight[std::size_t(o) * t.ksize + k] = v < 0 ? int(-0.5 + scaled) : int(0.5 + scaled);
    }
    t.first[o] = lo;
    t.count[o] = n;
  }
  return t;
}

inline std::uint8_t clip8(long long v) {
  if (v >= (1LL << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return std::uint8_t(v >> kPrecisionBits);
}

// ---- configuration ------------------------------------------------------------------------

enum class ProcessorClass { Vit, Deit, Clip, Bit, Siglip };

bool processorFromModelType(const std::string& t, ProcessorClass& out) {
  if (t == "vit") out = ProcessorClass::Vit;
  else if (t == "deit") out = ProcessorClass::Deit;
  else if (t == "clip" || t == "clip_vision_model") out = ProcessorClass::Clip;
  else if (t == "dinov2" || t == "dinov2_with_registers" || t == "bit") out = ProcessorClass::Bit;
  else if (t == "siglip" || t == "siglip_vision_model") out = ProcessorClass::Siglip;
  else return false;
  return true;
}

bool processorFromClassName(const std::string& c, ProcessorClass& out) {
  if (c.rfind("ViTImageProcessor", 0) == 0 || c == "ViTFeatureExtractor") out = ProcessorClass::Vit;
  else if (c.rfind("DeiTImageProcessor", 0) == 0 || c == "DeiTFeatureExtractor") out = ProcessorClass::Deit;
  else if (c.rfind("CLIPImageProcessor", 0) == 0 || c == "CLIPFeatureExtractor") out = ProcessorClass::Clip;
  else if (c.rfind("BitImageProcessor", 0) == 0) out = ProcessorClass::Bit;
  else if (c.rfind("SiglipImageProcessor", 0) == 0) out = ProcessorClass::Siglip;
  else return false;
  return true;
}

// The processor class's defaults (what transformers uses when a key is absent).
void setDefaults(ImagePreprocessor& p, ProcessorClass c) {
  const double imagenetMean[3] = {0.485, 0.456, 0.406};
  const double imagenetStd[3] = {0.229, 0.224, 0.225};
  const double clipMean[3] = {0.48145466, 0.4578275, 0.40821073};
  const double clipStd[3] = {0.26862954, 0.26130258, 0.27577711};
  auto set3 = [](double* dst, const double* src) { std::copy(src, src + 3, dst); };
  switch (c) {
    case ProcessorClass::Vit:
      p.resizeHeight = p.resizeWidth = 224;
      p.resample = ResampleFilter::Bilinear;
      break;
    case ProcessorClass::Deit:
      p.resizeHeight = p.resizeWidth = 256;
      p.resample = ResampleFilter::Bicubic;
      p.doCenterCrop = true;
      p.cropHeight = p.cropWidth = 224;
      set3(p.mean, imagenetMean);
      set3(p.std, imagenetStd);
      break;
    case ProcessorClass::Clip:
    case ProcessorClass::Bit:
      p.shortestEdge = 224;
      p.resample = ResampleFilter::Bicubic;
      p.doCenterCrop = true;
      p.cropHeight = p.cropWidth = 224;
      set3(p.mean, clipMean);
      set3(p.std, clipStd);
      break;
    case ProcessorClass::Siglip:
      p.resizeHeight = p.resizeWidth = 224;
      p.resample = ResampleFilter::Bicubic;
      break;
  }
}

int sideValue(const nlohmann::json& v, const std::string& name, const std::string& key) {
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > kMaxImageSide)
    fail(name, key + " must be an integer from 1 to " + std::to_string(kMaxImageSide));
  return int(v.get<long long>());
}

bool boolValue(const nlohmann::json& j, const char* key, bool dflt, const std::string& name) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) fail(name, std::string(key) + " must be true or false");
  return it->get<bool>();
}

void readTriple(const nlohmann::json& j, const char* key, double* dst, bool positive,
                const std::string& name) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  auto check = [&](const nlohmann::json& v) {
    if (!v.is_number()) fail(name, std::string(key) + " must be a number or a list of 3 numbers");
    const double d = v.get<double>();
    if (!std::isfinite(d) || (positive && !(d > 0)))
      fail(name, std::string(key) + (positive ? " must be finite and positive" : " must be finite"));
    return d;
  };
  if (it->is_array()) {
    if (it->size() != 3) fail(name, std::string(key) + " must list 3 numbers (one per channel)");
    for (int c = 0; c < 3; ++c) dst[c] = check((*it)[c]);
  } else {
    const double d = check(*it);
    dst[0] = dst[1] = dst[2] = d;
  }
}

}  // namespace

// ---- decoding -----------------------------------------------------------------------------

RgbImage decodeImage(const std::string& bytes, const std::string& name) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  const bool png = n >= 8 && std::memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0;
  const bool jpeg = n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
  const bool bmp = n >= 2 && p[0] == 'B' && p[1] == 'M';
  if (!png && !jpeg && !bmp) fail(name, "not a PNG, JPEG or BMP image");
  if (n > std::size_t(INT_MAX)) fail(name, "image file too large");
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(p, int(n), &w, &h, &comp)) {
    const char* why = stbi_failure_reason();
    fail(name, std::string("cannot decode the image (") + (why ? why : "unknown error") + ")");
  }
  if (w < 1 || h < 1 || w > kMaxImageSide || h > kMaxImageSide ||
      (long long)w * h > kMaxImagePixels)
    fail(name, "image of " + std::to_string(w) + "x" + std::to_string(h) +
                   " pixels is beyond the limit (" + std::to_string(kMaxImageSide) +
                   " a side, " + std::to_string(kMaxImagePixels) + " pixels)");
  // 3 channels asked for: stb replicates grey and drops alpha, as Pillow's convert("RGB").
  int w2 = 0, h2 = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> data(
      stbi_load_from_memory(p, int(n), &w2, &h2, &comp, 3), stbi_image_free);
  if (!data) {
    const char* why = stbi_failure_reason();
    fail(name, std::string("cannot decode the image (") + (why ? why : "unknown error") + ")");
  }
  if (w2 != w || h2 != h) fail(name, "cannot decode the image (inconsistent size)");
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.assign(data.get(), data.get() + std::size_t(w) * std::size_t(h) * 3);
  return img;
}

RgbImage readImageFile(const std::string& path) { return decodeImage(readFile(path), path); }

// ---- resize and crop ----------------------------------------------------------------------

RgbImage resizeLikePillow(const RgbImage& in, int width, int height, ResampleFilter filter) {
  if (width < 1 || height < 1 || in.width < 1 || in.height < 1)
    throw InputError("resize: empty image or size");
  const bool horizontal = width != in.width;
  const bool vertical = height != in.height;
  if (!horizontal && !vertical) return in;
  const Taps th = axisTaps(in.width, width, filter);
  const Taps tv = axisTaps(in.height, height, filter);

  // Horizontal pass over the input rows the vertical pass reads.
  const int rowFirst = tv.first[0];
  const int rowEnd = tv.first[height - 1] + tv.count[height - 1];
  RgbImage mid;
  const RgbImage* src = &in;
  int rowOffset = 0;
  if (horizontal) {
    mid.width = width;
    mid.height = rowEnd - rowFirst;
    mid.rgb.resize(std::size_t(mid.width) * mid.height * 3);
    for (int y = 0; y < mid.height; ++y) {
      const std::uint8_t* row = in.rgb.data() + std::size_t(y + rowFirst) * in.width * 3;
      std::uint8_t* out = mid.rgb.data() + std::size_t(y) * width * 3;
      for (int x = 0; x < width; ++x) {
        const int* k = th.weight.data() + std::size_t(x) * th.ksize;
        const std::uint8_t* s = row + std::size_t(th.first[x]) * 3;
        long long acc[3] = {1LL << (kPrecisionBits - 1), 1LL << (kPrecisionBits - 1),
                            1LL << (kPrecisionBits - 1)};
        for (int i = 0; i < th.count[x]; ++i)
          for (int c = 0; c < 3; ++c) acc[c] += (long long)s[i * 3 + c] * k[i];
        for (int c = 0; c < 3; ++c) out[x * 3 + c] = clip8(acc[c]);
      }
    }
    src = &mid;
    rowOffset = rowFirst;
  }
  if (!vertical) return mid;

  RgbImage out;
  out.width = width;
  out.height = height;
  out.rgb.resize(std::size_t(width) * height * 3);
  const std::size_t stride = std::size_t(src->width) * 3;
  for (int y = 0; y < height; ++y) {
    const int* k = tv.weight.data() + std::size_t(y) * tv.ksize;
    const int first = tv.first[y] - rowOffset;
    std::uint8_t* o = out.rgb.data() + std::size_t(y) * width * 3;
    for (std::size_t xc = 0; xc < std::size_t(width) * 3; ++xc) {
      long long acc = 1LL << (kPrecisionBits - 1);
      for (int i = 0; i < tv.count[y]; ++i)
        acc += (long long)src->rgb[std::size_t(first + i) * stride + xc] * k[i];
      o[xc] = clip8(acc);
    }
  }
  return out;
}

RgbImage centerCrop(const RgbImage& in, int width, int height) {
  auto floorDiv2 = [](int v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  // Offsets into the image, padded first (centred, the extra row/column after) when smaller.
  const int top = floorDiv2(in.height - height);
  const int left = floorDiv2(in.width - width);
  const int newH = std::max(height, in.height), newW = std::max(width, in.width);
  const int topPad = (newH - in.height + 1) / 2, leftPad = (newW - in.width + 1) / 2;
  // Crop window inside the padded image, clamped to it as the numpy slice does.
  const int y0 = std::max(0, top + topPad), y1 = std::min(newH, top + topPad + height);
  const int x0 = std::max(0, left + leftPad), x1 = std::min(newW, left + leftPad + width);
  RgbImage out;
  out.width = x1 - x0;
  out.height = y1 - y0;
  out.rgb.assign(std::size_t(out.width) * out.height * 3, 0);
  for (int y = y0; y < y1; ++y) {
    const int sy = y - topPad;
    if (sy < 0 || sy >= in.height) continue;
    for (int x = x0; x < x1; ++x) {
      const int sx = x - leftPad;
      if (sx < 0 || sx >= in.width) continue;
      for (int c = 0; c < 3; ++c)
        out.rgb[(std::size_t(y - y0) * out.width + (x - x0)) * 3 + c] =
            in.rgb[(std::size_t(sy) * in.width + sx) * 3 + c];
    }
  }
  return out;
}

// ---- preprocessor -------------------------------------------------------------------------

ImagePreprocessor ImagePreprocessor::fromJson(const std::string& text, const std::string& modelType,
                                              const std::string& name) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) fail(name, "not valid JSON");
  if (!j.is_object()) fail(name, "not a JSON object");
  ProcessorClass cls;
  if (!processorFromModelType(modelType, cls)) {
    std::string klass;
    for (const char* key : {"image_processor_type", "feature_extractor_type"}) {
      auto it = j.find(key);
      if (it != j.end() && it->is_string()) {
        klass = it->get<std::string>();
        break;
      }
    }
    if (!processorFromClassName(klass, cls))
      fail(name, "no image processor known for model_type '" + modelType + "'" +
                     (klass.empty() ? std::string() : " or image_processor_type '" + klass + "'"));
  }
  const bool bareIsShortest = cls == ProcessorClass::Clip || cls == ProcessorClass::Bit;
  ImagePreprocessor p;
  setDefaults(p, cls);

  p.doResize = boolValue(j, "do_resize", true, name);
  if (auto it = j.find("size"); it != j.end() && !it->is_null()) {
    const nlohmann::json& s = *it;
    if (s.is_number()) {
      const int v = sideValue(s, name, "size");
      p.shortestEdge = bareIsShortest ? v : 0;
      p.resizeHeight = p.resizeWidth = bareIsShortest ? 0 : v;
    } else if (s.is_object() && s.contains("height") && s.contains("width")) {
      p.resizeHeight = sideValue(s["height"], name, "size.height");
      p.resizeWidth = sideValue(s["width"], name, "size.width");
      p.shortestEdge = 0;
    } else if (s.is_object() && s.contains("shortest_edge") && !s.contains("longest_edge")) {
      p.shortestEdge = sideValue(s["shortest_edge"], name, "size.shortest_edge");
      p.resizeHeight = p.resizeWidth = 0;
    } else {
      fail(name, "size must be an integer, {\"shortest_edge\": N} or {\"height\": H, \"width\": W}");
    }
  }
  if (auto it = j.find("resample"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) fail(name, "resample must be an integer (2 bilinear, 3 bicubic)");
    const long long r = it->get<long long>();
    if (r == 2) p.resample = ResampleFilter::Bilinear;
    else if (r == 3) p.resample = ResampleFilter::Bicubic;
    else fail(name, "resample " + std::to_string(r) + " is not supported (2 bilinear, 3 bicubic)");
  }
  p.doCenterCrop = boolValue(j, "do_center_crop", p.doCenterCrop, name);
  if (auto it = j.find("crop_size"); it != j.end() && !it->is_null()) {
    const nlohmann::json& s = *it;
    if (s.is_number()) {
      p.cropHeight = p.cropWidth = sideValue(s, name, "crop_size");
    } else if (s.is_object() && s.contains("height") && s.contains("width")) {
      p.cropHeight = sideValue(s["height"], name, "crop_size.height");
      p.cropWidth = sideValue(s["width"], name, "crop_size.width");
    } else {
      fail(name, "crop_size must be an integer or {\"height\": H, \"width\": W}");
    }
  }
  if (p.doCenterCrop && (p.cropHeight < 1 || p.cropWidth < 1))
    fail(name, "do_center_crop without a crop_size");
  p.doRescale = boolValue(j, "do_rescale", true, name);
  if (auto it = j.find("rescale_factor"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()))
      fail(name, "rescale_factor must be a finite number");
    p.rescaleFactor = it->get<double>();
  }
  p.doNormalize = boolValue(j, "do_normalize", true, name);
  readTriple(j, "image_mean", p.mean, false, name);
  readTriple(j, "image_std", p.std, true, name);
  return p;
}

ImagePreprocessor ImagePreprocessor::fromModelDir(const std::string& modelDir) {
  const std::string configPath = modelDir + "/config.json";
  const nlohmann::json config = nlohmann::json::parse(readFile(configPath), nullptr, false);
  if (config.is_discarded() || !config.is_object()) fail(configPath, "not a valid JSON object");
  std::string modelType;
  if (auto it = config.find("model_type"); it != config.end() && it->is_string())
    modelType = it->get<std::string>();
  const std::string prePath = modelDir + "/preprocessor_config.json";
  return fromJson(readFile(prePath), modelType, prePath);
}

void ImagePreprocessor::resizedSize(int inHeight, int inWidth, int& outHeight, int& outWidth) const {
  outHeight = inHeight;
  outWidth = inWidth;
  if (!doResize) return;
  if (shortestEdge > 0) {
    const bool wide = inWidth > inHeight;  // the short side is the height
    const int shortSide = wide ? inHeight : inWidth, longSide = wide ? inWidth : inHeight;
    if (shortSide == shortestEdge) return;
    // Python's int(size * long / short): the product and quotient in double, truncated.
    const double l = double(shortestEdge) * double(longSide) / double(shortSide);
    const int newLong = int(std::min(l, double(kMaxImageSide) * 64));
    outHeight = wide ? shortestEdge : newLong;
    outWidth = wide ? newLong : shortestEdge;
  } else {
    outHeight = resizeHeight;
    outWidth = resizeWidth;
  }
}

RgbImage ImagePreprocessor::resizeAndCrop(const RgbImage& in) const {
  int h = 0, w = 0;
  resizedSize(in.height, in.width, h, w);
  if (h < 1 || w < 1 || h > kMaxImageSide || w > kMaxImageSide ||
      (long long)h * w > kMaxImagePixels)
    throw InputError("resize: the image would be resized to " + std::to_string(w) + "x" +
                     std::to_string(h) + ", beyond the limit");
  RgbImage out = (h == in.height && w == in.width) ? in : resizeLikePillow(in, w, h, resample);
  if (doCenterCrop) out = centerCrop(out, cropWidth, cropHeight);
  return out;
}

std::vector<float> ImagePreprocessor::toPixels(const RgbImage& seen) const {
  const std::size_t hw = std::size_t(seen.width) * seen.height;
  std::vector<float> px(3 * hw);
  for (int c = 0; c < 3; ++c) {
    // numpy's order: the rescale in float64 stored as float32, then (x - mean) / std in float32.
    const float m = float(mean[c]), s = float(std[c]);
    for (std::size_t i = 0; i < hw; ++i) {
      const std::uint8_t v = seen.rgb[i * 3 + c];
      float x = doRescale ? float(double(v) * rescaleFactor) : float(v);
      if (doNormalize) x = (x - m) / s;
      px[c * hw + i] = x;
    }
  }
  return px;
}

PreprocessedImage preprocessImage(const RgbImage& image, const ImagePreprocessor& pre) {
  PreprocessedImage r;
  r.seen = pre.resizeAndCrop(image);
  r.height = r.seen.height;
  r.width = r.seen.width;
  r.pixels = pre.toPixels(r.seen);
  return r;
}

PreprocessedImage preprocessImageFile(const std::string& imagePath, const std::string& modelDir) {
  const ImagePreprocessor pre = ImagePreprocessor::fromModelDir(modelDir);
  const RgbImage image = readImageFile(imagePath);
  try {
    return preprocessImage(image, pre);
  } catch (const InputError& e) {
    fail(imagePath, e.what());
  }
}

}  // namespace attnviz
