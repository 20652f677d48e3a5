// attnviz GPU backend: move-only owners of GL objects, and compute-program building.
// Every object must be created and destroyed with its context current.
#pragma once

#include <GL/glcorearb.h>

#include <cstddef>
#include <string>
#include <utility>

namespace attnviz::gpu {

// A shader storage buffer. Contents are zeroed on creation.
class GlBuffer {
 public:
  GlBuffer() = default;
  // Throws std::runtime_error naming `what` when the driver cannot allocate `bytes`.
  GlBuffer(std::size_t bytes, const char* what);
  ~GlBuffer() { reset(); }
  GlBuffer(GlBuffer&& o) noexcept
      : id_(std::exchange(o.id_, 0u)), bytes_(std::exchange(o.bytes_, std::size_t{0})) {}
  GlBuffer& operator=(GlBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, 0u);
      bytes_ = std::exchange(o.bytes_, std::size_t{0});
    }
    return *this;
  }
  GlBuffer(const GlBuffer&) = delete;
  GlBuffer& operator=(const GlBuffer&) = delete;

  GLuint id() const { return id_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* data, std::size_t bytes, std::size_t offset = 0);
  void download(void* data, std::size_t bytes, std::size_t offset = 0) const;
  void reset();

 private:
  GLuint id_ = 0;
  std::size_t bytes_ = 0;
};

// A linked compute program.
class GlProgram {
 public:
  GlProgram() = default;
  ~GlProgram() { reset(); }
  GlProgram(GlProgram&& o) noexcept : id_(std::exchange(o.id_, 0u)), label_(std::move(o.label_)) {}
  GlProgram& operator=(GlProgram&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, 0u);
      label_ = std::move(o.label_);
    }
    return *this;
  }
  GlProgram(const GlProgram&) = delete;
  GlProgram& operator=(const GlProgram&) = delete;

  // Compiles shaders/<name> with `#version 430 core` and `defines` (whole "#define X Y\n" lines)
  // prepended as separate strings, then links it. On failure throws std::runtime_error
  // "shader <name> failed: <compiler or linker log on one line>" and logs the full log to stderr.
  static GlProgram compute(const std::string& name, const std::string& defines);

  GLuint id() const { return id_; }
  const std::string& label() const { return label_; }
  void reset();

 private:
  GLuint id_ = 0;
  std::string label_;
};

// Joins a multi-line driver log into one line ("a; b; c"), trimmed.
std::string oneLine(const std::string& log);

}  // namespace attnviz::gpu
