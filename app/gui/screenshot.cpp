#include "screenshot.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/engine/tensor.h"

#include <GL/glcorearb.h>
#include <stb_image_write.h>

namespace attnviz::gui {

void saveScreenshot(const std::string& path, int width, int height) {
  std::vector<std::uint8_t> px(std::size_t(width) * height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  std::vector<std::uint8_t> flipped(px.size());
  const std::size_t stride = std::size_t(width) * 4;
  for (int y = 0; y < height; ++y) {
    const std::uint8_t* src = px.data() + std::size_t(height - 1 - y) * stride;
    std::uint8_t* dst = flipped.data() + std::size_t(y) * stride;
    for (std::size_t k = 0; k < stride; k += 4) {
      dst[k] = src[k];
      dst[k + 1] = src[k + 1];
      dst[k + 2] = src[k + 2];
      dst[k + 3] = 255;
    }
  }
  std::string bytes;
  auto sink = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), std::size_t(size));
  };
  if (!stbi_write_png_to_func(sink, &bytes, width, height, 4, flipped.data(), int(stride)))
    throw InputError(path + ": PNG encoding failed");
  writeFileAtomic(path, bytes);
}

}  // namespace attnviz::gui
