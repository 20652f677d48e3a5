#include "cli/backend.h"

#ifdef ATTNVIZ_HAVE_GPU
#include "attnviz/gpu/gpu_engine.h"
#endif

#include <stdexcept>

namespace attnviz::app {

#ifdef ATTNVIZ_HAVE_GPU
namespace {

const char* kSoftwareNote = "): the CPU engine is faster; --backend gpu forces the GPU";

}  // namespace
#endif

EngineChoice chooseEngine(const std::string& backend, EngineSite site,
                          const std::string& renderer) {
  EngineChoice c;
  if (backend != "cpu" && backend != "gpu" && backend != "auto")
    throw UsageError("--backend: expected cpu, gpu or auto, got '" + backend + "'");
  if (backend == "cpu") {
    c.engine = makeCpuEngine();
    return c;
  }
#ifdef ATTNVIZ_HAVE_GPU
  // On the window's context the renderer is known before any shader is compiled.
  if (site == EngineSite::CurrentContext && backend == "auto" && isSoftwareRenderer(renderer)) {
    c.note = "GL renderer is software (" + renderer + kSoftwareNote;
    c.engine = makeCpuEngine();
    return c;
  }
  try {
    std::unique_ptr<GpuEngine> gpu =
        site == EngineSite::Headless ? makeGpuEngineHeadless() : makeGpuEngineOnCurrentContext();
    const std::string r = gpu->renderer();
    // As in the GUI: on a software rasterizer the CPU engine is many times faster.
    if (backend == "gpu" || !isSoftwareRenderer(r)) {
      c.engine = std::move(gpu);
      return c;
    }
    c.note = "GL renderer is software (" + r + kSoftwareNote;
  } catch (const std::runtime_error& e) {
    if (backend == "gpu" && site == EngineSite::Headless)
      throw InputError(std::string("--backend gpu: ") + e.what());
    c.note = std::string(backend == "gpu" ? "GPU backend failed, using the CPU: "
                                          : "GPU backend unavailable, using the CPU: ") +
             e.what();
  }
#else
  (void)renderer;
  if (backend == "gpu" && site == EngineSite::Headless)
    throw InputError("--backend gpu: not available in this build");
  c.note = "this build has no GPU backend; using the CPU";
#endif
  c.engine = makeCpuEngine();
  return c;
}

std::unique_ptr<AttentionEngine> createHeadlessEngine(const std::string& backend,
                                                      std::string& note) {
  EngineChoice c = chooseEngine(backend, EngineSite::Headless);
  note = c.note;
  return std::move(c.engine);
}

}  // namespace attnviz::app
