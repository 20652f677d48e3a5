// attnviz GUI: the GL side of the heatmap. The shown matrix lives in R32F textures, one per level
// of a max pyramid (never averaged); shaders/heatmap.frag colours the level that fits the zoom
// through the one colormap table into an offscreen texture that ImGui draws as an image.
// (Separate textures rather than mip levels: GL's mip sizes round down, a max pyramid must
// round up so that the last odd row and column are kept.)
#pragma once

#include "attnviz/render/colormap.h"
#include "attnviz/session/session.h"  // DisplayMatrix

#include <GL/glcorearb.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnviz::gui {

// A move-only GL texture handle.
class GlTexture {
 public:
  GlTexture() = default;
  ~GlTexture();
  GlTexture(const GlTexture&) = delete;
  GlTexture& operator=(const GlTexture&) = delete;
  GlTexture(GlTexture&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  GlTexture& operator=(GlTexture&& o) noexcept;
  GLuint id() const { return id_; }
  GLuint create();  // generates a fresh name, deleting the old one
 private:
  GLuint id_ = 0;
};

// An RGBA8 image texture for thumbnails and small matrices.
struct RgbaImage {
  GlTexture tex;
  int width = 0, height = 0;
  std::uint64_t version = ~std::uint64_t{0};
  bool used = false;  // asked for since the last releaseUnusedImages()
  void set(const std::vector<std::uint8_t>& rgba, int w, int h);
  void* imguiId() const { return reinterpret_cast<void*>(std::uintptr_t(tex.id())); }
};

// The max pyramid of a [rows, cols] matrix: level L holds the max over 2^L x 2^L blocks.
// NaN wins over everything so that it is never hidden. Exposed for tests of the reduction.
std::vector<std::vector<float>> maxPyramid(const std::vector<float>& level0, int cols, int rows);
// The same levels from 1 up, into `upper` (upper[0] is level 1), reusing its buffers: what the
// renderer calls on every upload, so level 0 is never copied.
void maxPyramidLevels(const float* level0, int cols, int rows,
                      std::vector<std::vector<float>>& upper);

class HeatmapRenderer {
 public:
  HeatmapRenderer() = default;
  ~HeatmapRenderer();
  HeatmapRenderer(const HeatmapRenderer&) = delete;
  HeatmapRenderer& operator=(const HeatmapRenderer&) = delete;

  // Compiles the shaders and uploads the colormap tables. Throws std::runtime_error with the
  // shader's name and the compile log.
  void init();

  // The 256x1 texture of one colormap (NEAREST): the colour bar draws it.
  void* colormapId(ColormapId id) const;

  // Uploads the matrix and its max pyramid when its version changed. A matrix beyond the GL
  // texture limit is not uploaded; error() then says why (empty otherwise).
  void upload(const DisplayMatrix& m);
  const std::string& error() const { return error_; }

  struct Target {
    int width = 0, height = 0;       // pixels
    float originX = 0, originY = 0;  // matrix (col, row) at the top-left corner
    float cellsPerPixel = 1;
    ColormapId colormap = ColormapId::Viridis;
    ValueMapping mapping;
    bool grid = false;
    bool operator==(const Target& o) const;
  };
  // Draws into the offscreen texture (only when something changed) and returns it for
  // ImGui::Image, with uv0 = (0, 1) and uv1 = (1, 0) (GL textures are bottom-up).
  void* render(const Target& t);

  // Draws again with the last target when the matrix changed since (a slider moved after the
  // heatmap was laid out this frame), so the frame being built already shows the new values.
  void refresh();

  // The image named `key` (thumbnails, the mask matrix, the FlashAttention figure), created
  // empty on first use.
  RgbaImage& image(const std::string& key) {
    RgbaImage& im = images_[key];
    im.used = true;
    return im;
  }
  // Deletes the images no panel asked for since the last call (once a frame): the thumbnails of
  // heads and layers that are gone, a closed panel's picture. Without it every head ever shown
  // kept its texture for the rest of the session.
  void releaseUnusedImages();
  // Deletes the matrix's textures and host pyramid (the colormaps and images stay): the pooled
  // renderer once the view is no longer pooled. The next upload starts afresh.
  void releaseMatrix();
  bool holdsMatrix() const { return !levels_.empty() || target_.id() != 0; }
  int maxTextureSize() const { return maxTextureSize_; }

 private:
  GLuint program_ = 0, vao_ = 0, fbo_ = 0;
  std::vector<GlTexture> levels_;            // the max pyramid, one texture per level
  std::vector<std::vector<float>> pyramid_;  // levels 1.. on the host, kept between uploads
  GlTexture target_;
  std::array<GlTexture, 4> colormaps_;
  int cols_ = 0, rows_ = 0;
  int targetW_ = 0, targetH_ = 0;
  std::uint64_t uploadedVersion_ = ~std::uint64_t{0};
  std::uint64_t renderedVersion_ = ~std::uint64_t{0};
  Target last_;
  bool haveLast_ = false;
  int maxTextureSize_ = 0;
  std::string error_;
  std::map<std::string, RgbaImage> images_;
};

}  // namespace attnviz::gui
