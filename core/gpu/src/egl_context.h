// attnviz GPU backend: an owned headless EGL context with desktop OpenGL 4.3 core.
#pragma once

#include <memory>
#include <string>

namespace attnviz::gpu {

class EglContext {
 public:
  // Tries the platforms in order (ATTNVIZ_EGL_PLATFORM=surfaceless|device forces one), creates a
  // GL 4.3 core context and makes it current. Throws std::runtime_error naming each failure.
  static std::unique_ptr<EglContext> create();
  ~EglContext();
  EglContext(const EglContext&) = delete;
  EglContext& operator=(const EglContext&) = delete;

  // Makes the context current on this thread when it is not already.
  void makeCurrent();
  // "surfaceless" or "device <n>".
  const std::string& platform() const { return platform_; }

 private:
  EglContext() = default;
  void* display_ = nullptr;
  void* context_ = nullptr;
  void* surface_ = nullptr;  // a 1x1 pbuffer only when surfaceless contexts are unsupported
  std::string platform_;
};

}  // namespace attnviz::gpu
