// libFuzzer target: attnviz::decodeImage on arbitrary bytes (PNG, JPEG or BMP by their magic),
// then the bilinear and bicubic resizes and a centre crop of what decoded. Any input must either
// decode into an image whose buffer matches its size and the limits, or throw InputError;
// nothing else (no crash, no other exception, no sanitizer report).
#include "attnviz/formats/image.h"

#include "attnviz/engine/tensor.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const attnviz::RgbImage img = attnviz::decodeImage(bytes, "fuzz.img");
    if (img.width < 1 || img.height < 1 || img.width > attnviz::kMaxImageSide ||
        img.height > attnviz::kMaxImageSide)
      std::abort();
    if (img.rgb.size() != std::size_t(img.width) * std::size_t(img.height) * 3) std::abort();
    // Small targets derived from the input, so up- and downscaling both happen.
    const int w = 1 + (img.width * 7 + size) % 61, h = 1 + (img.height * 5 + size) % 47;
    for (auto f : {attnviz::ResampleFilter::Bilinear, attnviz::ResampleFilter::Bicubic}) {
      const attnviz::RgbImage r = attnviz::resizeLikePillow(img, w, h, f);
      if (r.width != w || r.height != h || r.rgb.size() != std::size_t(w) * h * 3) std::abort();
    }
    const attnviz::RgbImage c = attnviz::centerCrop(img, 1 + img.width % 13, 1 + img.height % 11);
    if (c.width != 1 + img.width % 13 || c.height != 1 + img.height % 11) std::abort();
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
