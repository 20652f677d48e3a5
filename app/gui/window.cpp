// attnviz GUI: the RAII guards of window.h and the style (the fonts are gui/fonts.cpp).
#include "gui/window.h"

#include "gui/fonts.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#if defined(ATTNVIZ_SANITIZE_BUILD)
#include <dlfcn.h>
#include <link.h>
#endif

namespace attnviz::gui {

namespace {

void applyStyle(float scale) {
  ImGui::StyleColorsDark();
  ImGuiStyle& st = ImGui::GetStyle();
  st.WindowRounding = 0;
  st.ChildRounding = 3;
  st.FrameRounding = 3;
  st.GrabRounding = 3;
  st.PopupRounding = 3;
  st.WindowBorderSize = 0;
  st.FramePadding = ImVec2(6, 3);
  st.ItemSpacing = ImVec2(7, 5);
  ImVec4* c = st.Colors;
  // The window and panel backgrounds are the glClear colour: on a software rasterizer
  // (llvmpipe) every full-window layer costs milliseconds, so none is drawn.
  c[ImGuiCol_WindowBg] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_PopupBg] = ImVec4(0.13f, 0.135f, 0.155f, 0.98f);
  c[ImGuiCol_Border] = ImVec4(0.26f, 0.27f, 0.31f, 1);
  c[ImGuiCol_MenuBarBg] = ImVec4(0.085f, 0.088f, 0.10f, 1);
  c[ImGuiCol_Header] = ImVec4(0.20f, 0.24f, 0.32f, 1);
  c[ImGuiCol_HeaderHovered] = ImVec4(0.26f, 0.32f, 0.44f, 1);
  c[ImGuiCol_FrameBg] = ImVec4(0.17f, 0.18f, 0.21f, 1);
  c[ImGuiCol_Button] = ImVec4(0.20f, 0.23f, 0.30f, 1);
  c[ImGuiCol_ButtonActive] = ImVec4(0.85f, 0.52f, 0.10f, 1);
  c[ImGuiCol_SliderGrab] = ImVec4(0.90f, 0.60f, 0.15f, 0.55f);
  c[ImGuiCol_SliderGrabActive] = ImVec4(1.0f, 0.70f, 0.25f, 1);
  c[ImGuiCol_CheckMark] = ImVec4(1.0f, 0.68f, 0.20f, 1);
  st.ScaleAllSizes(scale);
}

#if defined(ATTNVIZ_SANITIZE_BUILD)
// Under LeakSanitizer: every library loaded once the GL context exists (Mesa's driver, the
// LLVM it links, the GLX vendor library) stays mapped until the process ends. Mesa unloads its
// driver when the window closes, before LeakSanitizer reports at exit; the allocations the
// driver never frees would then come from an unnamed module that no suppression can match.
// Pinned, they are reported with the driver's name, which tests/sanitizers/lsan.supp matches.
void pinLoadedLibraries() {
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        if (info->dlpi_name && info->dlpi_name[0] == '/')
          dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        return 0;
      },
      nullptr);
}
#endif

}  // namespace

GlfwLibrary::GlfwLibrary() {
  glfwSetErrorCallback([](int code, const char* desc) {
    std::fprintf(stderr, "attnviz: GLFW error %d: %s\n", code, desc);
  });
  ok_ = glfwInit() == GLFW_TRUE;
}

GlfwLibrary::~GlfwLibrary() {
  if (ok_) glfwTerminate();
}

Window::Window(int width, int height, bool vsync) {
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 4);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
  window_ = glfwCreateWindow(width, height, "attnviz", nullptr, nullptr);
  if (!window_) {
    // No 4.3: ask for 3.3 (the heatmap needs only that; the GPU backend will say it cannot start).
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    window_ = glfwCreateWindow(width, height, "attnviz", nullptr, nullptr);
  }
  if (!window_) return;
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(vsync ? 1 : 0);
#if defined(ATTNVIZ_SANITIZE_BUILD)
  pinLoadedLibraries();
#endif
}

Window::~Window() {
  if (window_) glfwDestroyWindow(window_);
}

float Window::contentScale() const {
  float xs = 1, ys = 1;
  if (window_) glfwGetWindowContentScale(window_, &xs, &ys);
  return std::clamp(std::max(xs, ys), 1.0f, 4.0f);
}

ImGuiContextGuard::ImGuiContextGuard(GLFWwindow* window, float scale, const std::string& iniPath,
                                     UiFonts& fonts)
    : iniPath_(iniPath) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = iniPath_.empty() ? nullptr : iniPath_.c_str();
  loadFonts(fonts, scale);
  applyStyle(scale);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
}

ImGuiContextGuard::~ImGuiContextGuard() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
}

}  // namespace attnviz::gui
