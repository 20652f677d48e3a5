#include "heatmap_renderer.h"

#include "attnviz/shaders/shader_source.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>

namespace attnviz::gui {

GlTexture::~GlTexture() {
  if (id_) glDeleteTextures(1, &id_);
}

GlTexture& GlTexture::operator=(GlTexture&& o) noexcept {
  if (this != &o) {
    if (id_) glDeleteTextures(1, &id_);
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

GLuint GlTexture::create() {
  if (id_) glDeleteTextures(1, &id_);
  glGenTextures(1, &id_);
  return id_;
}

void HeatmapRenderer::releaseUnusedImages() {
  for (auto it = images_.begin(); it != images_.end();) {
    if (!it->second.used) {
      it = images_.erase(it);
    } else {
      it->second.used = false;
      ++it;
    }
  }
}

void HeatmapRenderer::releaseMatrix() {
  levels_.clear();
  pyramid_.clear();
  pyramid_.shrink_to_fit();
  target_ = GlTexture();
  cols_ = rows_ = 0;
  targetW_ = targetH_ = 0;
  uploadedVersion_ = renderedVersion_ = ~std::uint64_t{0};
  haveLast_ = false;
}

namespace {

GLuint compile(GLenum type, const std::string& name) {
  const std::string src = shaderSource(name);
  const char* parts[2] = {"#version 330 core\n", src.c_str()};
  GLuint sh = glCreateShader(type);
  glShaderSource(sh, 2, parts, nullptr);
  glCompileShader(sh);
  GLint ok = 0;
  glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    char log[4096] = {};
    glGetShaderInfoLog(sh, sizeof log, nullptr, log);
    glDeleteShader(sh);
    throw std::runtime_error(name + ": compile failed: " + log);
  }
  return sh;
}

void setColor(GLuint prog, const char* name, RGBA8 c) {
  glUniform4f(glGetUniformLocation(prog, name), c.r / 255.0f, c.g / 255.0f, c.b / 255.0f,
              c.a / 255.0f);
}

// A fresh single-level texture (NEAREST, clamped) of w x h texels from `data` (may be null),
// left bound to GL_TEXTURE_2D.
void allocateTexture(GlTexture& tex, GLenum internalFormat, int w, int h, GLenum format,
                     GLenum type, const void* data) {
  tex.create();
  glBindTexture(GL_TEXTURE_2D, tex.id());
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_BASE_LEVEL, 0);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAX_LEVEL, 0);
  glTexImage2D(GL_TEXTURE_2D, 0, GLint(internalFormat), w, h, 0, format, type, data);
}

}  // namespace

void RgbaImage::set(const std::vector<std::uint8_t>& rgba, int w, int h) {
  if (!tex.id() || w != width || h != height) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    allocateTexture(tex, GL_RGBA8, w, h, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
    width = w;
    height = h;
  } else {
    glBindTexture(GL_TEXTURE_2D, tex.id());
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
  }
  glBindTexture(GL_TEXTURE_2D, 0);
}

void maxPyramidLevels(const float* level0, int cols, int rows,
                      std::vector<std::vector<float>>& upper) {
  std::size_t count = 0;
  for (int w = cols, h = rows; w > 1 || h > 1; w = (w + 1) / 2, h = (h + 1) / 2) ++count;
  upper.resize(count);
  auto vmax = [](float a, float b) {
    return (std::isnan(a) || std::isnan(b)) ? a + b : (a > b ? a : b);
  };
  const float* src = level0;
  int w = cols, h = rows;
  for (std::size_t l = 0; l < count; ++l) {
    const int nw = (w + 1) / 2, nh = (h + 1) / 2;
    std::vector<float>& dst = upper[l];
    dst.resize(std::size_t(nw) * nh);
    for (int y = 0; y < nh; ++y) {
      const int y0 = 2 * y, y1 = std::min(2 * y + 1, h - 1);
      const float* r0 = src + std::size_t(y0) * w;
      const float* r1 = src + std::size_t(y1) * w;
      float* out = dst.data() + std::size_t(y) * nw;
      for (int x = 0; x < nw; ++x) {
        const int x0 = 2 * x, x1 = std::min(2 * x + 1, w - 1);
        out[x] = vmax(vmax(r0[x0], r0[x1]), vmax(r1[x0], r1[x1]));
      }
    }
    src = dst.data();
    w = nw;
    h = nh;
  }
}

std::vector<std::vector<float>> maxPyramid(const std::vector<float>& level0, int cols, int rows) {
  std::vector<std::vector<float>> upper;
  maxPyramidLevels(level0.data(), cols, rows, upper);
  std::vector<std::vector<float>> levels;
  levels.reserve(upper.size() + 1);
  levels.push_back(level0);
  for (auto& l : upper) levels.push_back(std::move(l));
  return levels;
}

HeatmapRenderer::~HeatmapRenderer() {
  if (program_) glDeleteProgram(program_);
  if (vao_) glDeleteVertexArrays(1, &vao_);
  if (fbo_) glDeleteFramebuffers(1, &fbo_);
}

void HeatmapRenderer::init() {
  GLuint vs = compile(GL_VERTEX_SHADER, "heatmap.vert");
  GLuint fs = 0;
  try {
    fs = compile(GL_FRAGMENT_SHADER, "heatmap.frag");
  } catch (...) {
    glDeleteShader(vs);
    throw;
  }
  program_ = glCreateProgram();
  glAttachShader(program_, vs);
  glAttachShader(program_, fs);
  glLinkProgram(program_);
  glDeleteShader(vs);
  glDeleteShader(fs);
  GLint ok = 0;
  glGetProgramiv(program_, GL_LINK_STATUS, &ok);
  if (!ok) {
    char log[4096] = {};
    glGetProgramInfoLog(program_, sizeof log, nullptr, log);
    throw std::runtime_error(std::string("heatmap program: link failed: ") + log);
  }
  glGenVertexArrays(1, &vao_);
  glGenFramebuffers(1, &fbo_);
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &maxTextureSize_);
  for (int k = 0; k < 4; ++k) {
    const ColormapTable& table = colormapTable(ColormapId(k));
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    allocateTexture(colormaps_[k], GL_RGBA8, kColormapSize, 1, GL_RGBA, GL_UNSIGNED_BYTE,
                    table.data());
  }
  glBindTexture(GL_TEXTURE_2D, 0);
}

void* HeatmapRenderer::colormapId(ColormapId id) const {
  return reinterpret_cast<void*>(std::uintptr_t(colormaps_[int(id)].id()));
}

void HeatmapRenderer::upload(const DisplayMatrix& m) {
  if (m.version == uploadedVersion_) return;
  uploadedVersion_ = m.version;
  if (m.rows <= 0 || m.cols <= 0 || m.values.size() != std::size_t(m.rows) * m.cols) {
    cols_ = rows_ = 0;
    return;
  }
  error_.clear();
  if (m.cols > maxTextureSize_ || m.rows > maxTextureSize_) {
    error_ = "matrix " + std::to_string(m.rows) + "x" + std::to_string(m.cols) +
             " is larger than this GL's texture limit " + std::to_string(maxTextureSize_);
    cols_ = rows_ = 0;
    return;
  }
  // Level 0 is the matrix itself; the levels above reuse their buffers from the last upload.
  // The host levels are reused between uploads, but not at the size of a much larger matrix
  // shown before (their capacity stayed: the soak saw it as growth).
  if (!pyramid_.empty() && pyramid_[0].capacity() > 2 * (std::size_t(m.cols) * m.rows / 4) + 65536) {
    pyramid_.clear();
    pyramid_.shrink_to_fit();
  }
  maxPyramidLevels(m.values.data(), m.cols, m.rows, pyramid_);
  const std::size_t levelCount = pyramid_.size() + 1;
  auto levelData = [&](std::size_t l) { return l == 0 ? m.values.data() : pyramid_[l - 1].data(); };
  const bool reallocate = levels_.size() != levelCount || m.cols != cols_ || m.rows != rows_;
  if (reallocate) {
    levels_.clear();
    levels_.resize(levelCount);
  }
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  int w = m.cols, h = m.rows;
  for (std::size_t l = 0; l < levelCount; ++l) {
    if (reallocate) {
      allocateTexture(levels_[l], GL_R32F, w, h, GL_RED, GL_FLOAT, levelData(l));
    } else {
      glBindTexture(GL_TEXTURE_2D, levels_[l].id());
      glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, GL_RED, GL_FLOAT, levelData(l));
    }
    w = (w + 1) / 2;
    h = (h + 1) / 2;
  }
  glBindTexture(GL_TEXTURE_2D, 0);
  cols_ = m.cols;
  rows_ = m.rows;
}

void HeatmapRenderer::refresh() {
  if (haveLast_ && renderedVersion_ != uploadedVersion_) render(last_);
}

bool HeatmapRenderer::Target::operator==(const Target& o) const {
  return width == o.width && height == o.height && originX == o.originX && originY == o.originY &&
         cellsPerPixel == o.cellsPerPixel && colormap == o.colormap && mapping.lo == o.mapping.lo &&
         mapping.hi == o.mapping.hi && mapping.scale == o.mapping.scale &&
         mapping.gamma == o.mapping.gamma && mapping.logFloor == o.mapping.logFloor &&
         grid == o.grid;
}

void* HeatmapRenderer::render(const Target& t) {
  if (t.width <= 0 || t.height <= 0) return nullptr;
  if (haveLast_ && last_ == t && renderedVersion_ == uploadedVersion_)
    return reinterpret_cast<void*>(std::uintptr_t(target_.id()));
  if (!target_.id() || t.width != targetW_ || t.height != targetH_) {
    allocateTexture(target_, GL_RGBA8, t.width, t.height, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    glBindTexture(GL_TEXTURE_2D, 0);
    targetW_ = t.width;
    targetH_ = t.height;
  }
  GLint prevFbo = 0, prevViewport[4];
  glGetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &prevFbo);
  glGetIntegerv(GL_VIEWPORT, prevViewport);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
  glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, target_.id(), 0);
  glViewport(0, 0, t.width, t.height);
  glDisable(GL_SCISSOR_TEST);
  glDisable(GL_BLEND);
  glDisable(GL_DEPTH_TEST);
  glDisable(GL_CULL_FACE);
  if (cols_ == 0 || rows_ == 0) {
    glClearColor(0.11f, 0.11f, 0.13f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
  } else {
    glUseProgram(program_);
    glActiveTexture(GL_TEXTURE0);
    // The pyramid level whose blocks are at least as wide as a pixel: a pixel then touches at
    // most 2 x 2 texels, and their max covers every cell under it (and a little around it).
    int level = 0;
    if (t.cellsPerPixel > 1.0f)
      level = std::min(int(levels_.size()) - 1, int(std::ceil(std::log2(t.cellsPerPixel) - 1e-4f)));
    glBindTexture(GL_TEXTURE_2D, levels_[level].id());
    glActiveTexture(GL_TEXTURE1);
    glBindTexture(GL_TEXTURE_2D, colormaps_[int(t.colormap)].id());
    glUniform1i(glGetUniformLocation(program_, "uValues"), 0);
    glUniform1i(glGetUniformLocation(program_, "uColormap"), 1);
    glUniform2i(glGetUniformLocation(program_, "uSize"), cols_, rows_);
    glUniform1i(glGetUniformLocation(program_, "uLevel"), level);
    glUniform2f(glGetUniformLocation(program_, "uOrigin"), t.originX, t.originY);
    glUniform1f(glGetUniformLocation(program_, "uCellsPerPixel"), t.cellsPerPixel);
    glUniform1f(glGetUniformLocation(program_, "uTargetHeight"), float(t.height));
    glUniform1f(glGetUniformLocation(program_, "uLo"), t.mapping.lo);
    glUniform1f(glGetUniformLocation(program_, "uHi"), t.mapping.hi);
    glUniform1i(glGetUniformLocation(program_, "uScale"), int(t.mapping.scale));
    glUniform1f(glGetUniformLocation(program_, "uGamma"), t.mapping.gamma);
    glUniform1f(glGetUniformLocation(program_, "uLogFloor"), t.mapping.logFloor);
    setColor(program_, "uMasked", kMaskedColor);
    setColor(program_, "uHatch", kMaskedHatchColor);
    setColor(program_, "uNonFinite", kNonFiniteColor);
    setColor(program_, "uBackground", RGBA8{28, 28, 33, 255});
    glUniform1f(glGetUniformLocation(program_, "uGridAlpha"),
                t.grid && t.cellsPerPixel <= 1.0f / 10.0f ? 0.55f : 0.0f);
    glBindVertexArray(vao_);
    glDrawArrays(GL_TRIANGLES, 0, 3);
    glBindVertexArray(0);
    glActiveTexture(GL_TEXTURE1);
    glBindTexture(GL_TEXTURE_2D, 0);
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, 0);
    glUseProgram(0);
  }
  glBindFramebuffer(GL_FRAMEBUFFER, GLuint(prevFbo));
  glViewport(prevViewport[0], prevViewport[1], prevViewport[2], prevViewport[3]);
  last_ = t;
  haveLast_ = true;
  renderedVersion_ = uploadedVersion_;
  return reinterpret_cast<void*>(std::uintptr_t(target_.id()));
}

}  // namespace attnviz::gui
