#include "egl_context.h"

#include <EGL/egl.h>
#include <EGL/eglext.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace attnviz::gpu {

namespace {

bool hasExtension(const char* list, const char* name) {
  if (list == nullptr) return false;
  const std::size_t n = std::strlen(name);
  for (const char* p = list; (p = std::strstr(p, name)) != nullptr; p += n) {
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  }
  return false;
}

std::string eglErrorName(EGLint e) {
  switch (e) {
    case EGL_SUCCESS:
      return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED:
      return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS:
      return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC:
      return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE:
      return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG:
      return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT:
      return "EGL_BAD_CONTEXT";
    case EGL_BAD_DISPLAY:
      return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH:
      return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER:
      return "EGL_BAD_PARAMETER";
    case EGL_BAD_SURFACE:
      return "EGL_BAD_SURFACE";
    default:
      return "EGL error " + std::to_string(e);
  }
}

struct Attempt {
  EGLDisplay display = EGL_NO_DISPLAY;
  EGLContext context = EGL_NO_CONTEXT;
  EGLSurface surface = EGL_NO_SURFACE;
};

// Initializes `dpy` and creates a current GL 4.3 core context on it; returns a reason on failure.
std::string tryDisplay(EGLDisplay dpy, Attempt& out) {
  if (dpy == EGL_NO_DISPLAY) return "no display (" + eglErrorName(eglGetError()) + ")";
  EGLint major = 0, minor = 0;
  if (!eglInitialize(dpy, &major, &minor)) {
    return "eglInitialize failed (" + eglErrorName(eglGetError()) + ")";
  }
  if (!eglBindAPI(EGL_OPENGL_API)) return "desktop OpenGL is not supported by this EGL";
  const char* ext = eglQueryString(dpy, EGL_EXTENSIONS);
  const EGLint ctxAttribs[] = {EGL_CONTEXT_MAJOR_VERSION,
                               4,
                               EGL_CONTEXT_MINOR_VERSION,
                               3,
                               EGL_CONTEXT_OPENGL_PROFILE_MASK,
                               EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                               EGL_NONE};
  const bool surfaceless = hasExtension(ext, "EGL_KHR_surfaceless_context");
  EGLConfig config = EGL_NO_CONFIG_KHR;
  if (!hasExtension(ext, "EGL_KHR_no_config_context") || !surfaceless) {
    const EGLint cfgAttribs[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE,
                                 EGL_OPENGL_BIT, EGL_NONE};
    EGLint count = 0;
    if (!eglChooseConfig(dpy, cfgAttribs, &config, 1, &count) || count < 1) {
      return "no EGL config with desktop OpenGL and pbuffers";
    }
  }
  EGLContext ctx = eglCreateContext(dpy, config, EGL_NO_CONTEXT, ctxAttribs);
  if (ctx == EGL_NO_CONTEXT) {
    return "cannot create an OpenGL 4.3 core context (" + eglErrorName(eglGetError()) + ")";
  }
  EGLSurface surf = EGL_NO_SURFACE;
  if (!surfaceless) {
    const EGLint pb[] = {EGL_WIDTH, 1, EGL_HEIGHT, 1, EGL_NONE};
    surf = eglCreatePbufferSurface(dpy, config, pb);
    if (surf == EGL_NO_SURFACE) {
      eglDestroyContext(dpy, ctx);
      return "cannot create a pbuffer (" + eglErrorName(eglGetError()) + ")";
    }
  }
  if (!eglMakeCurrent(dpy, surf, surf, ctx)) {
    const std::string why = eglErrorName(eglGetError());
    if (surf != EGL_NO_SURFACE) eglDestroySurface(dpy, surf);
    eglDestroyContext(dpy, ctx);
    return "eglMakeCurrent failed (" + why + ")";
  }
  out.display = dpy;
  out.context = ctx;
  out.surface = surf;
  return {};
}

}  // namespace

std::unique_ptr<EglContext> EglContext::create() {
  const char* clientExt = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  auto getPlatformDisplay = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(
      eglGetProcAddress("eglGetPlatformDisplayEXT"));
  if (getPlatformDisplay == nullptr) {
    throw std::runtime_error("EGL: eglGetPlatformDisplayEXT is unavailable");
  }
  const char* force = std::getenv("ATTNVIZ_EGL_PLATFORM");
  const std::string only = force ? force : "";
  if (!only.empty() && only != "surfaceless" && only != "device") {
    throw std::runtime_error("ATTNVIZ_EGL_PLATFORM must be surfaceless or device, got '" + only +
                             "'");
  }
  std::string reasons;
  auto note = [&](const std::string& what, const std::string& why) {
    reasons += (reasons.empty() ? "" : "; ") + what + ": " + why;
  };
  Attempt got;
  std::string platform;

  if (only.empty() || only == "surfaceless") {
    if (!hasExtension(clientExt, "EGL_MESA_platform_surfaceless")) {
      note("surfaceless", "EGL_MESA_platform_surfaceless missing");
    } else {
      EGLDisplay dpy =
          getPlatformDisplay(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
      if (std::string why = tryDisplay(dpy, got); why.empty()) {
        platform = "surfaceless";
      } else {
        note("surfaceless", why);
      }
    }
  }

  if (got.context == EGL_NO_CONTEXT && (only.empty() || only == "device")) {
    auto queryDevices =
        reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
    auto queryDeviceString = reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(
        eglGetProcAddress("eglQueryDeviceStringEXT"));
    if (!hasExtension(clientExt, "EGL_EXT_platform_device") || queryDevices == nullptr) {
      note("device", "EGL_EXT_platform_device missing");
    } else {
      EGLint n = 0;
      std::vector<EGLDeviceEXT> devices(16);
      if (!queryDevices(EGLint(devices.size()), devices.data(), &n) || n < 1) {
        note("device", "no EGL devices");
      } else {
        devices.resize(std::size_t(n));
        // Hardware devices first: Mesa also lists a software (llvmpipe) device.
        std::vector<int> order;
        for (int pass = 0; pass < 2; ++pass) {
          for (int i = 0; i < n; ++i) {
            const char* dext =
                queryDeviceString ? queryDeviceString(devices[i], EGL_EXTENSIONS) : nullptr;
            const bool software = hasExtension(dext, "EGL_MESA_device_software");
            if (software == (pass == 1)) order.push_back(i);
          }
        }
        for (int i : order) {
          EGLDisplay dpy = getPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
          if (std::string why = tryDisplay(dpy, got); why.empty()) {
            platform = "device " + std::to_string(i);
            break;
          } else {
            note("device " + std::to_string(i), why);
          }
        }
      }
    }
  }

  if (got.context == EGL_NO_CONTEXT) {
    throw std::runtime_error("no headless OpenGL 4.3 context (" + reasons + ")");
  }
  std::unique_ptr<EglContext> c(new EglContext());
  c->display_ = got.display;
  c->context_ = got.context;
  c->surface_ = got.surface;
  c->platform_ = platform;
  return c;
}

void EglContext::makeCurrent() {
  if (eglGetCurrentContext() == context_) return;
  if (!eglMakeCurrent(display_, surface_, surface_, context_)) {
    throw std::runtime_error("EGL: cannot make the engine's context current (" +
                             eglErrorName(eglGetError()) + ")");
  }
}

EglContext::~EglContext() {
  if (eglGetCurrentContext() == context_) {
    eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
  }
  if (surface_ != EGL_NO_SURFACE) eglDestroySurface(display_, surface_);
  eglDestroyContext(display_, context_);
  // The display is shared by every context of the process; it is not terminated here.
}

}  // namespace attnviz::gpu
