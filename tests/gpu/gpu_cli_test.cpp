// attnviz GPU tests: `attnviz compute --backend gpu` writes what `--backend cpu` writes.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attnviz/formats/npy.h"
#include "gpu_test_util.h"
#include "run_binary.h"

namespace attnviz {
namespace {

namespace fs = std::filesystem;
using gputest::withinParity;

using Args = std::vector<std::string>;
using testing::CliRun;

Args operator+(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs `attnviz compute <args>` with `env` prefixed (e.g. "ATTNVIZ_EGL_PLATFORM=none").
CliRun runCompute(const std::string& env, const Args& args, const fs::path& dir) {
  return testing::runBinary(Args{"compute"} + args, dir, env.empty() ? "" : "env " + env);
}

class GpuCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("attnviz_gpu_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    saveNpy((dir_ / "q.npy").string(), ref::randomTensor(3, 33, 16, 21));
    saveNpy((dir_ / "k.npy").string(), ref::randomTensor(3, 40, 16, 22));
    saveNpy((dir_ / "v.npy").string(), ref::randomTensor(3, 40, 24, 23));
    io_ = {"--q", (dir_ / "q.npy").string(), "--k", (dir_ / "k.npy").string(),
           "--v", (dir_ / "v.npy").string()};
  }
  void TearDown() override { fs::remove_all(dir_); }
  Args outArgs(const std::string& tag) const {
    return {"--weights", (dir_ / (tag + "_a.npy")).string(),
            "--out",     (dir_ / (tag + "_o.npy")).string(),
            "--scores",  (dir_ / (tag + "_s.npy")).string()};
  }
  Tensor3 load(const std::string& name) const {
    const NpyArray a = readNpy((dir_ / name).string());
    Tensor3 t(int(a.shape[0]), int(a.shape[1]), int(a.shape[2]));
    t.data = a.data;
    return t;
  }
  fs::path dir_;
  Args io_;
};

TEST_F(GpuCli, ComputeWithBackendGpuWritesWhatTheCpuWrites) {
  {
    ATTNVIZ_GPU_ENGINE_OR_SKIP(probe);  // fails or skips here when this machine has no context
  }
  const Args opts{"--mask", "causal", "--mask", "sink:2", "--alibi", "--temperature", "0.5"};
  const CliRun cpu = runCompute("", io_ + opts + Args{"--backend", "cpu"} + outArgs("cpu"), dir_);
  ASSERT_EQ(cpu.exitCode, 0) << cpu.err;
  const CliRun gpu = runCompute("", io_ + opts + Args{"--backend", "gpu"} + outArgs("gpu"), dir_);
  ASSERT_EQ(gpu.exitCode, 0) << gpu.err;
  EXPECT_TRUE(withinParity("weights", load("gpu_a.npy"), load("cpu_a.npy")));
  EXPECT_TRUE(withinParity("output", load("gpu_o.npy"), load("cpu_o.npy")));
  // The logits carry -inf where masked: compare the finite ones and the -inf pattern.
  Tensor3 sg = load("gpu_s.npy"), sc = load("cpu_s.npy");
  ASSERT_TRUE(sg.sameShape(sc));
  for (std::size_t n = 0; n < sc.size(); ++n) {
    ASSERT_EQ(std::isinf(sg.data[n]), std::isinf(sc.data[n])) << "logit " << n;
    if (std::isinf(sc.data[n])) {
      sg.data[n] = 0.0f;
      sc.data[n] = 0.0f;
    }
  }
  EXPECT_TRUE(withinParity("logits", sg, sc));
}

TEST_F(GpuCli, BackendGpuWithoutAContextFailsWithOneLineAndExitStatus1) {
  // An invalid platform choice makes the headless context impossible on any machine.
  const CliRun r =
      runCompute("ATTNVIZ_EGL_PLATFORM=none", io_ + Args{"--backend", "gpu"} + outArgs("x"), dir_);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("--backend gpu"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "x_a.npy"));
}

TEST_F(GpuCli, BackendAutoFallsBackToTheCpuAndSaysSo) {
  const CliRun r = runCompute("ATTNVIZ_EGL_PLATFORM=none",
                              io_ + Args{"--backend", "auto"} + outArgs("auto"), dir_);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("using the CPU"), std::string::npos) << r.err;
  const CliRun cpu = runCompute("", io_ + Args{"--backend", "cpu"} + outArgs("cpu"), dir_);
  ASSERT_EQ(cpu.exitCode, 0) << cpu.err;
  // The CPU engine's sums may differ by an ulp between processes (Eigen peels unaligned heads
  // of its reductions by address), so compare within the parity bound rather than bitwise.
  EXPECT_TRUE(withinParity("weights", load("auto_a.npy"), load("cpu_a.npy")));
}

}  // namespace
}  // namespace attnviz
