// attnviz app: choosing an engine for --backend cpu|gpu|auto, in one place for the GUI and the
// headless commands.
#pragma once

#include "attnviz/engine/engine.h"

#include <memory>
#include <string>

namespace attnviz::app {

// Where a GPU engine would run.
enum class EngineSite {
  Headless,        // its own EGL context (compute, export)
  CurrentContext,  // the GL context current on this thread (the GUI's window)
};

struct EngineChoice {
  std::unique_ptr<AttentionEngine> engine;
  std::string note;  // why the GPU is not used, when it is not; empty otherwise
};

// cpu: the Eigen engine. auto: the GPU when it starts on a hardware renderer, otherwise the
// CPU with a note saying why (no context, a shader failed, or a software renderer such as
// llvmpipe, where the CPU is faster). gpu: the GPU, or, when it cannot start, headless throws
// InputError with the reason while the GUI falls back to the CPU and says why. `renderer` is
// the current context's GL_RENDERER (CurrentContext only). Throws UsageError for any other name.
EngineChoice chooseEngine(const std::string& backend, EngineSite site,
                          const std::string& renderer = "");

// chooseEngine(backend, Headless), its note into `note`.
std::unique_ptr<AttentionEngine> createHeadlessEngine(const std::string& backend,
                                                      std::string& note);

}  // namespace attnviz::app
