// attnviz app: choosing an engine for --backend cpu|gpu|auto.
#pragma once

#include "attnviz/engine.h"

#include <memory>
#include <string>

namespace attnviz::app {

// cpu: the Eigen engine. gpu: the OpenGL compute engine on a headless EGL context, or
// throws InputError with the reason. auto: the GPU when it starts on a hardware renderer,
// otherwise the CPU with `note` saying why (no context, a shader failed, or a software
// renderer such as llvmpipe, where the CPU is faster). Throws UsageError for any other name.
std::unique_ptr<AttentionEngine> createHeadlessEngine(const std::string& backend,
                                                      std::string& note);

}  // namespace attnviz::app
