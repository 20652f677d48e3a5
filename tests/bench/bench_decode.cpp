// A SmolLM2-135M-shaped random checkpoint (hidden 576, 30 layers, 9 query heads over 3 KV heads,
// head 64, MLP 1536, vocab 49152, tied head), written here at start-up as an F32 Hugging Face
// folder (bench_util.h) and converted once by tools/gguf/hf_to_gguf.py to three GGUF files:
//   F32    every matrix F32 (mapped in place)
//   Q8_0   every matrix Q8_0
//   Q4_K   Q4_K where a row is whole 256-value super-blocks (ffn_down, rows of 1536), else Q5_0
//          (--fallback Q5_0, as llama.cpp's quantizer does for Q4_K: rows of 576 are not)
// Each figure beside its floor from the same run (targets: docs/design/performance.md):
//   SmolDecode/<type>        Model::decodeStep with a 512-token cache (random keys and values; the
//                            cache is cut back to 512 rows after every step): the matrix-vector
//                            products read every matrix as stored, the tied head included
//   SmolDecodeFloor/<type>   a memcpy of the bytes of weights that step reads in that format
//                            (every tensor of the file: the head is the embedding)
//   SmolOpen/<type>          Model::open (within the default budget: Q8_0 and Q4_K are converted
//                            to F32 for the prompt's GEMMs)
//   SmolForward_T128/<type>  Model::forward on 128 ids; the F32 file's is the floor of the others
//   SmolForwardKept_T128/<type>  the same past the memory budget (1 byte): each layer converted
//                            into the pass's scratch as it runs
//   SmolPeakMemory/<type>    `attnviz model` on the file at T = 128 (default budget, and past a
//                            1-byte one): the child's peak RSS
// Counters: tok/s and GB/s (weight bytes read per second) for decode and its floor.
// The files go to $ATTNVIZ_BENCH_DIR or the temp folder and are removed at exit (kept when
// ATTNVIZ_BENCH_KEEP is set, e.g. for `/usr/bin/time -v attnviz model --model FILE ...`).
#include "bench/bench_util.h"

#include "attnviz/formats/gguf.h"
#include "attnviz/model/model.h"

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

namespace {

namespace fs = std::filesystem;

using S = attnviz::bench::SmolLm2;
constexpr int kL = S::kL, kH = S::kH, kKv = S::kKv, kDh = S::kDh, kD = S::kD, kI = S::kI,
              kV = S::kV, kP = S::kP;
constexpr int kCache = 512, kT = 128;
const char* const kTypes[] = {"F32", "Q8_0", "Q4_K"};

struct Files {
  // Its own folder: bench_llama.cpp's attnviz_smollm2_135m_<pid> keeps model.safetensors, which
  // this one deletes once the GGUF files are written.
  attnviz::bench::BenchFolder folder{"smollm2_135m_gguf"};
  fs::path gguf[3];
};

const Files& files() {
  static Files f = [] {
    Files ck;
    const fs::path& dir = ck.folder.dir;
    attnviz::bench::writeSmolLm2Folder(dir);
    const fs::path tool = fs::path(ATTNVIZ_SOURCE_DIR) / "tools" / "gguf" / "hf_to_gguf.py";
    for (int t = 0; t < 3; ++t) {
      ck.gguf[t] = dir / (std::string("smol_") + kTypes[t] + ".gguf");
      const std::string cmd = "/usr/bin/python3 '" + tool.string() + "' '" + dir.string() +
                              "' '" + ck.gguf[t].string() + "' --type " + kTypes[t] +
                              " --fallback Q5_0 >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    }
    fs::remove(dir / "model.safetensors");  // 540 MB the benchmarks never read
    return ck;
  }();
  return f;
}

const std::string& file(const benchmark::State& state) {
  static std::string p[3];
  const int t = int(state.range(0));
  if (p[t].empty()) p[t] = files().gguf[t].string();
  return p[t];
}

// The bytes of every tensor in the file: what one decode step reads (the tied head is the
// embedding; one embedding row more is noise).
std::size_t weightBytes(const std::string& path) {
  const auto g = attnviz::GgufFile::open(path);
  std::size_t n = 0;
  for (const attnviz::GgufTensor& t : g->tensors()) n += t.bytes;
  return n;
}

std::vector<int> ids(int n) {
  std::vector<int> v(n);
  for (int t = 0; t < n; ++t) v[t] = (t * 7919 + 11) % kV;
  return v;
}

void SmolDecode(benchmark::State& state) {
  const auto model = attnviz::Model::open(file(state));
  attnviz::KvCache cache;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int l = 0; l < kL; ++l) {
    cache.k.push_back(attnviz::MatrixRM::NullaryExpr(kCache, kKv * kDh, [&] { return nd(gen); }));
    cache.v.push_back(attnviz::MatrixRM::NullaryExpr(kCache, kKv * kDh, [&] { return nd(gen); }));
  }
  int id = 5;
  for (auto _ : state) {
    const attnviz::DecodeStep step = model->decodeStep(cache, id);
    benchmark::DoNotOptimize(step.logits.data());
    cache.rows = kCache;  // the next step again attends over 512 cached positions + itself
    id = (id * 31 + 7) % kV;
  }
  state.SetLabel(kTypes[state.range(0)]);
  state.counters["tok/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(double(weightBytes(file(state))) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void SmolDecodeFloor(benchmark::State& state) {
  const std::size_t bytes = weightBytes(file(state));
  std::vector<unsigned char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(kTypes[state.range(0)]);
  state.counters["tok/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(double(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void SmolOpen(benchmark::State& state) {
  const std::string& path = file(state);
  for (auto _ : state) benchmark::DoNotOptimize(attnviz::Model::open(path).get());
  state.SetLabel(kTypes[state.range(0)]);
}

void SmolForward_T128(benchmark::State& state) {
  const auto model = attnviz::Model::open(file(state));
  const std::vector<int> in = ids(kT);
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in).logits.data());
  state.SetLabel(kTypes[state.range(0)] + std::string(" ") + model->weightsDescription());
}

void SmolForwardKept_T128(benchmark::State& state) {
  const auto model = attnviz::Model::open(file(state), {}, 1);
  const std::vector<int> in = ids(kT);
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in).logits.data());
  state.SetLabel(kTypes[state.range(0)] + std::string(" ") + model->weightsDescription());
}

// The child is `attnviz model` (exec'd: a forked copy of this process would inherit a thread
// pool without its threads), so the figure is what a user's run costs.
void SmolPeakMemory(benchmark::State& state) {
  const std::string& path = file(state);
  const std::int64_t budget = state.range(1);
  std::string idList;
  for (int id : ids(kT)) idList += (idList.empty() ? "" : ",") + std::to_string(id);
  const std::string budgetText = budget < 0 ? "" : std::to_string(budget);
  for (auto _ : state) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (!std::freopen("/dev/null", "w", stdout)) std::_Exit(2);
      if (budget < 0) {
        ::execl(ATTNVIZ_BINARY, ATTNVIZ_BINARY, "model", "--model", path.c_str(), "--ids",
                idList.c_str(), static_cast<char*>(nullptr));
      } else {
        ::execl(ATTNVIZ_BINARY, ATTNVIZ_BINARY, "model", "--model", path.c_str(), "--ids",
                idList.c_str(), "--max-memory", budgetText.c_str(), static_cast<char*>(nullptr));
      }
      std::_Exit(127);
    }
    int status = 0;
    rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    state.counters["peak_MB"] = double(ru.ru_maxrss) / 1024.0;
    state.counters["file_MB"] = double(fs::file_size(path)) / (1024.0 * 1024.0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("child failed");
  }
  state.SetLabel(kTypes[state.range(0)] + std::string(budget < 0 ? " default budget" : " kept"));
}

}  // namespace

BENCHMARK(SmolDecode)
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolDecodeFloor)
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolOpen)
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolForward_T128)
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolForwardKept_T128)
    ->DenseRange(1, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolPeakMemory)
    ->ArgsProduct({{0, 1, 2}, {-1}})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
