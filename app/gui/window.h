// attnviz GUI: the window and Dear ImGui's lifetime behind RAII guards, so every exit path
// (an exception included) shuts them down in order: ImGui, then the window, then GLFW.
#pragma once

#include <string>

struct GLFWwindow;

namespace attnviz::gui {

struct UiFonts;  // gui/fonts.h

// glfwInit / glfwTerminate. ok() is false when there is no display.
class GlfwLibrary {
 public:
  GlfwLibrary();
  ~GlfwLibrary();
  GlfwLibrary(const GlfwLibrary&) = delete;
  GlfwLibrary& operator=(const GlfwLibrary&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// An OpenGL 4.3 core window (3.3 when 4.3 is refused), its context made current. get() is
// null when no window could be created.
class Window {
 public:
  Window(int width, int height, bool vsync);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  GLFWwindow* get() const { return window_; }
  float contentScale() const;  // the monitor's content scale, clamped to [1, 4]

 private:
  GLFWwindow* window_ = nullptr;
};

// ImGui's context with the GLFW and OpenGL 3 backends on `window`, fonts and style at `scale`.
// iniPath empty: no imgui.ini.
class ImGuiContextGuard {
 public:
  ImGuiContextGuard(GLFWwindow* window, float scale, const std::string& iniPath, UiFonts& fonts);
  ~ImGuiContextGuard();
  ImGuiContextGuard(const ImGuiContextGuard&) = delete;
  ImGuiContextGuard& operator=(const ImGuiContextGuard&) = delete;

 private:
  std::string iniPath_;  // ImGui keeps the pointer
};

}  // namespace attnviz::gui
