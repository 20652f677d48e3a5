// attnviz core: the in-memory figure (image.h).
#include "attnviz/render/image.h"

namespace attnviz {

RGBA8 Image::pixel(int x, int y) const {
  const std::size_t o = (std::size_t(y) * std::size_t(width) + std::size_t(x)) * 4;
  return RGBA8{rgba[o], rgba[o + 1], rgba[o + 2], rgba[o + 3]};
}

}  // namespace attnviz
