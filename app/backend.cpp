#include "backend.h"

#ifdef ATTNVIZ_HAVE_GPU
#include "attnviz/gpu_engine.h"
#endif

#include <stdexcept>

namespace attnviz::app {

std::unique_ptr<AttentionEngine> createHeadlessEngine(const std::string& backend,
                                                      std::string& note) {
  if (backend == "cpu") return makeCpuEngine();
  if (backend != "gpu" && backend != "auto") {
    throw UsageError("--backend: expected cpu, gpu or auto, got '" + backend + "'");
  }
#ifdef ATTNVIZ_HAVE_GPU
  try {
    std::unique_ptr<GpuEngine> gpu = makeGpuEngineHeadless();
    const std::string r = gpu->renderer();
    // As in the GUI: on a software rasterizer the CPU engine is many times faster.
    if (backend == "gpu" || !isSoftwareRenderer(r)) return gpu;
    note = "GL renderer is software (" + r +
           "): using the CPU, which is faster; --backend gpu forces the GPU";
    return makeCpuEngine();
  } catch (const std::runtime_error& e) {
    if (backend == "gpu") throw InputError(std::string("--backend gpu: ") + e.what());
    note = std::string("GPU backend unavailable (") + e.what() + "); using the CPU";
    return makeCpuEngine();
  }
#else
  if (backend == "gpu") throw InputError("--backend gpu: not available in this build");
  note = "GPU backend not available in this build; using the CPU";
  return makeCpuEngine();
#endif
}

}  // namespace attnviz::app
