// attnviz GPU tests: the engine's behaviour beyond a single run: re-softmax from cached scores,
// per-head work, tiling past the SSBO limit, readback on request, and clear failures.
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/glcorearb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "gpu_test_util.h"

namespace attnviz {
namespace {

using gputest::withinParity;

struct Inputs {
  Tensor3 q, k, v;
};

Inputs seededInputs(int H, int Tq, int Tk, int d, std::uint32_t seed) {
  return {ref::randomTensor(H, Tq, d, seed), ref::randomTensor(H, Tk, d, seed + 1),
          ref::randomTensor(H, Tk, d, seed + 2)};
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(GpuEngine, ReSoftmaxAfterChangingTemperatureEqualsAFreshRun) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  ATTNVIZ_GPU_ENGINE_OR_SKIP(fresh);
  const Inputs in = seededInputs(12, 129, 129, 64, 7);
  AttentionParams first;
  first.mask.causal = true;
  first.temperature = 1.0f;
  AttentionParams second = first;
  second.temperature = 0.1f;
  second.mask.window = 16;

  gpu->run(in.q, in.k, in.v, first);
  gpu->softmax(second);  // from the cached S: no new inputs
  gpu->output();
  const AttentionResult got = gpu->result();
  fresh->run(in.q, in.k, in.v, second);
  const AttentionResult& want = fresh->result();

  // Same device, same kernels, same cached S: the results must be bit-identical.
  EXPECT_EQ(got.weights.data, want.weights.data);
  EXPECT_EQ(got.output.data, want.output.data);
  auto cpu = makeCpuEngine();
  cpu->run(in.q, in.k, in.v, second);
  EXPECT_TRUE(withinParity("weights", got.weights, cpu->result().weights));
  EXPECT_TRUE(withinParity("output", got.output, cpu->result().output));
}

TEST(GpuEngine, SoftmaxOfOneHeadLeavesTheOtherHeadsUntouched) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const Inputs in = seededInputs(4, 33, 33, 16, 8);
  AttentionParams plain;
  gpu->run(in.q, in.k, in.v, plain);
  const Tensor3 before = gpu->result(kStageWeights).weights;
  AttentionParams causal;
  causal.mask.causal = true;
  gpu->softmax(causal, {2});
  const Tensor3 after = gpu->result(kStageWeights).weights;

  auto cpu = makeCpuEngine();
  cpu->run(in.q, in.k, in.v, causal);
  const Tensor3& want = cpu->result().weights;
  for (int h = 0; h < 4; ++h) {
    Tensor3 a(1, 33, 33), b(1, 33, 33);
    std::copy(after.head(h), after.head(h) + after.headStride(), a.data.begin());
    std::copy((h == 2 ? want : before).head(h), (h == 2 ? want : before).head(h) + 33 * 33,
              b.data.begin());
    EXPECT_TRUE(withinParity("weights of one head", a, b)) << "head " << h;
  }
  EXPECT_EQ(after.at(2, 0, 1), 0.0f);  // causal now holds on head 2 only
  EXPECT_NE(after.at(1, 0, 1), 0.0f);
}

TEST(GpuEngine, TilesQueryRowsWhenAHeadExceedsTheStorageBlockLimit) {
  // 64 KiB bindings: one head of S (129 x 129 floats = 66 KiB) must be split into row tiles,
  // and head offsets are not multiples of the binding alignment.
  ScopedEnv limit("ATTNVIZ_GPU_MAX_BIND_BYTES", "65536");
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const Inputs in = seededInputs(3, 129, 131, 64, 9);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.alibi = true;
  p.mask.customKind = MaskSpec::Custom::Bias;
  p.mask.custom = ref::randomTensor(3, 129, 131, 10);
  gpu->run(in.q, in.k, in.v, p);
  const AttentionResult& got = gpu->result();
  auto cpu = makeCpuEngine();
  cpu->run(in.q, in.k, in.v, p);
  const AttentionResult& want = cpu->result();
  EXPECT_TRUE(withinParity("scaled", got.scaled, want.scaled));
  EXPECT_TRUE(withinParity("weights", got.weights, want.weights));
  EXPECT_TRUE(withinParity("output", got.output, want.output));
  for (std::size_t r = 0; r < want.rows.size(); ++r) {
    ASSERT_EQ(got.rows[r].argmax, want.rows[r].argmax) << "row " << r;
  }
}

TEST(GpuEngine, OtherKernelShapesGiveTheSameResults) {
  // llvmpipe gets 8-wide softmax workgroups; GPUs get 256 (a deeper shared-memory reduction).
  // Run the GPU defaults (256-wide rows, 16 x 16 GEMM workgroups) here too, so CI covers them.
  ScopedEnv wg("ATTNVIZ_GPU_SOFTMAX_WG", "256");
  ScopedEnv mm("ATTNVIZ_GPU_MATMUL", "16,16,16");
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const Inputs in = seededInputs(3, 300, 517, 72, 15);
  AttentionParams p;
  p.mask.causal = true;
  p.mask.window = 200;
  p.mask.sink = 3;
  p.mask.alibi = true;
  p.temperature = 0.5f;
  gpu->run(in.q, in.k, in.v, p);
  auto cpu = makeCpuEngine();
  cpu->run(in.q, in.k, in.v, p);
  EXPECT_TRUE(withinParity("scaled", gpu->result().scaled, cpu->result().scaled));
  EXPECT_TRUE(withinParity("weights", gpu->result().weights, cpu->result().weights));
  EXPECT_TRUE(withinParity("output", gpu->result().output, cpu->result().output));
  const AttentionResult& g = gpu->result();
  const AttentionResult& c = cpu->result();
  for (std::size_t r = 0; r < c.rows.size(); ++r) {
    ASSERT_EQ(g.rows[r].argmax, c.rows[r].argmax) << "row " << r;
    ASSERT_NEAR(g.rows[r].entropy, c.rows[r].entropy, 1e-4) << "row " << r;
  }
}

TEST(GpuEngine, TinyTemperaturesStayOneHotAsOnTheCpu) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const Inputs in = seededInputs(2, 33, 40, 16, 16);
  auto cpu = makeCpuEngine();
  // 1e-30: 1/tau is finite but every gap / tau overflows; 1e-45 (denormal): 1/tau is inf.
  for (float tau : {1e-30f, 1e-45f}) {
    AttentionParams p;
    p.mask.causal = true;
    p.temperature = tau;
    gpu->run(in.q, in.k, in.v, p);
    cpu->run(in.q, in.k, in.v, p);
    const AttentionResult& g = gpu->result();
    const AttentionResult& c = cpu->result();
    EXPECT_TRUE(withinParity("weights", g.weights, c.weights)) << "tau " << tau;
    EXPECT_TRUE(withinParity("output", g.output, c.output)) << "tau " << tau;
    for (std::size_t r = 0; r < c.rows.size(); ++r) {
      ASSERT_EQ(g.rows[r].argmax, c.rows[r].argmax) << "tau " << tau << " row " << r;
      ASSERT_NEAR(g.rows[r].entropy, c.rows[r].entropy, 1e-4) << "tau " << tau << " row " << r;
    }
    {  // independent of the CPU: each row is one-hot at its largest score
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 33; ++i) {
          const RowStats& st = g.row(h, i);
          ASSERT_FALSE(std::isnan(g.weights.at(h, i, 0)));
          EXPECT_EQ(g.weights.at(h, i, st.argmax), 1.0f) << "tau " << tau;
        }
    }
  }
}

TEST(GpuEngine, RefusesScoresThatOverflowFloatNamingTheHead) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  Inputs in = seededInputs(3, 5, 6, 4, 17);
  for (float& x : in.q.data) x = 1e20f;
  for (int t = 0; t < 6 * 4; ++t) in.k.data[2 * 6 * 4 + t] = 1e20f;  // head 2 only: 4e40/2
  for (int t = 0; t < 6 * 4; ++t) in.k.data[t] = 1e-20f;             // head 0 stays finite
  for (int t = 0; t < 6 * 4; ++t) in.k.data[6 * 4 + t] = 1e-20f;     // head 1 stays finite
  try {
    gpu->setInputs(in.q, in.k, in.v);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("overflows float32 in head 2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(gpu->softmax(AttentionParams{}), InputError);  // holds no inputs now
}

TEST(GpuEngine, RefusesAKeyRowLargerThanTheStorageBlockLimit) {
  ScopedEnv limit("ATTNVIZ_GPU_MAX_BIND_BYTES", "8192");
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const Inputs in = seededInputs(1, 2, 4000, 4, 10);  // one row of S is 16000 bytes
  try {
    gpu->setInputs(in.q, in.k, in.v);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("GL_MAX_SHADER_STORAGE_BLOCK_SIZE"), std::string::npos)
        << e.what();
  }
}

TEST(GpuEngine, WeightsBufferHoldsTheWeightsWithoutReadback) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  EXPECT_EQ(gpu->weightsBuffer(), 0u);
  const Inputs in = seededInputs(2, 7, 9, 16, 11);
  gpu->run(in.q, in.k, in.v, AttentionParams{});
  ASSERT_NE(gpu->weightsBuffer(), 0u);
  std::vector<float> raw(2 * 7 * 9);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, gpu->weightsBuffer());
  glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, GLsizeiptr(raw.size() * 4), raw.data());
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  auto cpu = makeCpuEngine();
  cpu->run(in.q, in.k, in.v, AttentionParams{});
  Tensor3 got(2, 7, 9);
  got.data.assign(raw.begin(), raw.end());
  EXPECT_TRUE(withinParity("weights buffer", got, cpu->result().weights));
}

TEST(GpuEngine, ResultReadsBackOnlyTheStagesAskedFor) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const Inputs in = seededInputs(1, 5, 6, 8, 12);
  gpu->run(in.q, in.k, in.v, AttentionParams{});
  const AttentionResult& r = gpu->result(kStageOutput);
  EXPECT_TRUE(r.weights.empty());
  EXPECT_TRUE(r.scaled.empty());
  EXPECT_EQ(r.output.size(), 5u * 8u);
}

TEST(GpuEngine, NameAndRendererNameTheGlRenderer) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  EXPECT_FALSE(gpu->renderer().empty());
  EXPECT_EQ(gpu->name(), "GPU (" + gpu->renderer() + ")");
  std::printf("GL renderer: %s\n", gpu->renderer().c_str());
}

TEST(GpuEngine, TwoEnginesInOneThreadEachUseTheirOwnContext) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(a);
  ATTNVIZ_GPU_ENGINE_OR_SKIP(b);  // now b's context is current
  const Inputs in = seededInputs(2, 17, 19, 16, 13);
  a->run(in.q, in.k, in.v, AttentionParams{});
  b->run(in.q, in.k, in.v, AttentionParams{});
  EXPECT_EQ(a->result().weights.data, b->result().weights.data);
  b.reset();
  EXPECT_EQ(a->result(kStageOutput).output.size(), 2u * 17u * 16u);
}

TEST(GpuEngine, ABrokenShaderNamesTheFileAndTheCompilerMessageOnOneLine) {
  {
    ATTNVIZ_GPU_ENGINE_OR_SKIP(probe);  // a context must exist for the compiler to run
  }
  const auto dir =
      std::filesystem::temp_directory_path() / ("attnviz_badshader_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "softmax.comp") << "layout(local_size_x = WG) in;\nvoid main() { nope(); }\n";
  ScopedEnv shaders("ATTNVIZ_SHADER_DIR", dir.string());
  std::string why;
  try {
    auto e = makeGpuEngineHeadless();
    why = "(no error)";
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  std::filesystem::remove_all(dir);
  EXPECT_NE(why.find("shader softmax.comp failed: "), std::string::npos) << why;
  EXPECT_NE(why.find("nope"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

TEST(GpuEngine, OnCurrentContextRunsOnTheCallersOwnContext) {
  // The GUI's path: the caller owns a GL 4.3 context (here a surfaceless EGL one, as a GLFW
  // window would be) and the engine uses it without switching contexts.
  auto getDisplay = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(
      eglGetProcAddress("eglGetPlatformDisplayEXT"));
  EGLDisplay dpy = getDisplay
                       ? getDisplay(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr)
                       : EGL_NO_DISPLAY;
  const EGLint attribs[] = {EGL_CONTEXT_MAJOR_VERSION,
                            4,
                            EGL_CONTEXT_MINOR_VERSION,
                            3,
                            EGL_CONTEXT_OPENGL_PROFILE_MASK,
                            EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                            EGL_NONE};
  EGLContext ctx = EGL_NO_CONTEXT;
  if (dpy != EGL_NO_DISPLAY && eglInitialize(dpy, nullptr, nullptr) && eglBindAPI(EGL_OPENGL_API)) {
    ctx = eglCreateContext(dpy, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, attribs);
  }
  if (ctx == EGL_NO_CONTEXT || !eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx)) {
    if (gputest::gpuRequired() && std::getenv("ATTNVIZ_EGL_PLATFORM") == nullptr) {
      FAIL() << "no surfaceless EGL context";
    }
    GTEST_SKIP() << "no surfaceless EGL context for this test";
  }
  {
    std::unique_ptr<GpuEngine> gpu = makeGpuEngineOnCurrentContext();
    const Inputs in = seededInputs(2, 33, 40, 16, 14);
    AttentionParams p;
    p.mask.causal = true;
    gpu->run(in.q, in.k, in.v, p);
    auto cpu = makeCpuEngine();
    cpu->run(in.q, in.k, in.v, p);
    EXPECT_TRUE(withinParity("weights", gpu->result().weights, cpu->result().weights));
    EXPECT_TRUE(withinParity("output", gpu->result().output, cpu->result().output));
    EXPECT_EQ(eglGetCurrentContext(), ctx);
  }
  eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
  eglDestroyContext(dpy, ctx);
}

TEST(GpuEngine, OnCurrentContextRefusesWhenNoContextIsCurrent) {
  // Nothing made a context current on this fresh thread.
  std::string why;
  std::thread t([&] {
    try {
      auto e = makeGpuEngineOnCurrentContext();
    } catch (const std::runtime_error& e) {
      why = e.what();
    }
  });
  t.join();
  EXPECT_NE(why.find("no current OpenGL context"), std::string::npos) << why;
}

}  // namespace
}  // namespace attnviz
