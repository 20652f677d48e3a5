#include "backend.h"

namespace attnviz::app {

std::unique_ptr<AttentionEngine> createHeadlessEngine(const std::string& backend,
                                                      std::string& note) {
  if (backend == "cpu") return makeCpuEngine();
  if (backend == "gpu") throw InputError("--backend gpu: not available in this build");
  if (backend == "auto") {
    note = "GPU backend not available in this build; using the CPU";
    return makeCpuEngine();
  }
  throw UsageError("--backend: expected cpu, gpu or auto, got '" + backend + "'");
}

}  // namespace attnviz::app
