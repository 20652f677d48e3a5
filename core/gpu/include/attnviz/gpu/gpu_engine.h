// attnviz GPU backend: attention in OpenGL 4.3 compute shaders, with the CPU engine's semantics.
//
// Every call must be made on the thread whose GL context the engine was built on. The engine
// keeps S, A and O in GPU buffers and reads back only what result() is asked for.
//
// Buffers (std430, float32, row-major, all heads contiguous):
//   scaled  S: [H, T_q, T_k]    weights A: [H, T_q, T_k]    output O: [H, T_q, d_v]
// Sizes beyond GL_MAX_SHADER_STORAGE_BLOCK_SIZE are processed head by head and, within a head,
// in tiles of query rows; one row of scores (T_k floats) and one head of K or V must each fit
// one binding, or setInputs() throws InputError naming the limit.
//
// Environment: ATTNVIZ_SHADER_DIR (load shaders/*.comp from a folder, read when the engine is
// built), ATTNVIZ_EGL_PLATFORM (see makeGpuEngineHeadless), and for tuning and tests
// ATTNVIZ_GPU_MATMUL="WG_X,WG_Y,BK", ATTNVIZ_GPU_SOFTMAX_WG=<power of two> and
// ATTNVIZ_GPU_MAX_BIND_BYTES=<n> (pretend the SSBO binding limit is n bytes).
#pragma once

#include <memory>
#include <string>

#include "attnviz/engine/engine.h"

namespace attnviz {

class GpuEngine : public AttentionEngine {
 public:
  // The GL renderer string, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)".
  virtual std::string renderer() const = 0;
  // SSBO holding the weights [H, T_q, T_k] (float, std430) after softmax(); 0 if none. For
  // display without readback. The name may change after setInputs() grows the buffers; it is
  // valid on the engine's context (or one sharing objects with it).
  virtual unsigned weightsBuffer() const = 0;
};

// Whether a GL renderer string names a CPU rasterizer (llvmpipe, softpipe, SwiftShader), where
// the Eigen engine is faster than compute shaders.
bool isSoftwareRenderer(const std::string& renderer);

// Builds the engine on the calling thread's current GL context (the GUI's GLFW context). Needs
// GL >= 4.3. Throws std::runtime_error with a one-line reason (no 4.3 context; shader <name>
// failed: <log>).
std::unique_ptr<GpuEngine> makeGpuEngineOnCurrentContext();

// Creates and owns a headless EGL context (Mesa surfaceless first, then EGL_PLATFORM_DEVICE_EXT
// first non-software device), then the engine. The context is made current on the calling
// thread, and again on every engine call when another context has been made current meanwhile.
// The environment variable ATTNVIZ_EGL_PLATFORM=surfaceless|device forces one platform (use
// `device` to reach an NVIDIA GPU on a machine that also has Mesa). Throws std::runtime_error.
std::unique_ptr<GpuEngine> makeGpuEngineHeadless();

}  // namespace attnviz
