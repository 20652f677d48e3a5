// attnviz app: choosing an engine for --backend cpu|gpu|auto.
#pragma once

#include "attnviz/engine.h"

#include <memory>
#include <string>

namespace attnviz::app {

// cpu: the Eigen engine. gpu: the OpenGL compute engine on a headless EGL context, or
// throws InputError with the reason. auto: gpu when it starts, otherwise cpu with `note` set to
// why. Throws UsageError for any other name.
std::unique_ptr<AttentionEngine> createHeadlessEngine(const std::string& backend, std::string& note);

}  // namespace attnviz::app
