// attnviz: GLSL sources embedded at build time from shaders/ (no GL calls here).
#pragma once

#include <string>
#include <vector>

namespace attnviz {

// The source of shaders/<name> (e.g. "softmax.comp"). When the environment variable
// ATTNVIZ_SHADER_DIR names a folder holding <name>, that file is read instead (hot reload).
// Throws std::runtime_error when neither has it.
std::string shaderSource(const std::string& name);

// Names of every embedded shader.
std::vector<std::string> embeddedShaderNames();

}  // namespace attnviz
