// A SmolLM2-135M-shaped LLaMA (30 layers, d 576, 9 query heads over 3 KV heads, head 64, MLP
// 1536, vocab 49152, tied), a random-init F32 checkpoint written here at start-up (never
// committed), each figure beside its floor from the same run (docs/design/performance.md):
//   SmolForward/T        Model::forward on T ids, every layer's weights, Q, K, V and head outputs
//                        kept (the default Capture)
//   SmolForwardView/T    the same pass keeping what the GUI's model view keeps (Capture::view:
//                        128-cell thumbnails, the last logits row)
//   SmolGemmFloor/T      the same GEMMs alone on the same mapped weights: per layer q, k, v, o,
//                        9 heads of Q K^T and A V (a KV head read by its 3 query heads), gate, up,
//                        down; then the tied logits. The same threading (matmulOutIn).
//   SmolOpen             Model::open: config, tokenizer files, header validation, mmap
//   SmolPeakMemory/T     a forked child opens the model and runs T ids (default Capture); its
//                        peak RSS, and above the file size
// T is 128 and 512. The checkpoint goes to $ATTNVIZ_BENCH_DIR or the temp folder and is removed at
// exit (kept when ATTNVIZ_BENCH_KEEP is set: the GUI memory and torch figures of
// docs/performance.md run on it).
#include "bench_util.h"

#include "attnviz/formats/safetensors.h"
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/gpt2_bpe.h"

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

namespace {

namespace fs = std::filesystem;
using attnviz::MatrixRM;

using S = attnviz::bench::SmolLm2;
constexpr int kL = S::kL, kH = S::kH, kKv = S::kKv, kDh = S::kDh, kD = S::kD, kI = S::kI,
              kV = S::kV, kP = S::kP;

struct Checkpoint {
  fs::path dir;
  std::uintmax_t bytes = 0;
  ~Checkpoint() {
    std::error_code ec;
    if (!dir.empty() && !std::getenv("ATTNVIZ_BENCH_KEEP")) fs::remove_all(dir, ec);
  }
};

// config.json as SmolLM2-135M's (its sizes, RoPE θ 100000, RMSNorm 1e-5, tied), a byte-level
// vocabulary of 49152 entries (256 bytes, two-byte pieces, <|endoftext|>; no merges, so a text
// of n ASCII bytes is n tokens) and the random weights.
const Checkpoint& checkpoint() {
  static Checkpoint c = [] {
    Checkpoint ck;
    const char* base = std::getenv("ATTNVIZ_BENCH_DIR");
    ck.dir = fs::path(base ? base : fs::temp_directory_path().string()) /
             ("attnviz_smollm2_135m_" + std::to_string(::getpid()));
    fs::create_directories(ck.dir);
    ck.bytes = attnviz::bench::writeSmolLm2Folder(ck.dir);
    return ck;
  }();
  return c;
}

std::vector<int> ids(int T) {
  std::vector<int> v(T);
  for (int t = 0; t < T; ++t) v[t] = (t * 7919) % kV;
  return v;
}

// Multiply-adds x2 of the projections, the attention GEMMs (Q K^T and A V over all T keys, as
// the engine computes them) and the logits.
double forwardFlops(int T) {
  const double t = T, d = kD;
  const double proj = 2 * t * d * (kH * kDh + 2 * kKv * kDh) + 2 * t * (kH * kDh) * d;
  const double attn = kH * 2 * (2 * t * t * kDh);
  const double mlp = 2 * t * d * kI * 3;
  return kL * (proj + attn + mlp) + 2 * t * d * kV;
}

void setFlops(benchmark::State& state, int T) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(forwardFlops(T) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void SmolForward(benchmark::State& state) {
  const int T = int(state.range(0));
  const auto model = attnviz::Model::open(checkpoint().dir.string());
  const std::vector<int> in = ids(T);
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in).logits.data());
  setFlops(state, T);
}

void SmolForwardView(benchmark::State& state) {
  const int T = int(state.range(0));
  const auto model = attnviz::Model::open(checkpoint().dir.string());
  const std::vector<int> in = ids(T);
  for (auto _ : state)
    benchmark::DoNotOptimize(model->forward(in, {}, attnviz::Capture::view(128)).logits.data());
  setFlops(state, T);
}

void SmolGemmFloor(benchmark::State& state) {
  const int T = int(state.range(0));
  const auto f = attnviz::SafetensorsFile::open((checkpoint().dir / "model.safetensors").string());
  auto w = [&](const std::string& n) { return f.f32View(f.at(n)).data(); };
  std::mt19937 gen(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const MatrixRM x = MatrixRM::NullaryExpr(T, kD, [&] { return dist(gen); });
  MatrixRM q, k, v, merged(T, kH * kDh), proj, gate, up, hidden, down, logits, scores(T, T);
  merged.setRandom();
  hidden = MatrixRM::NullaryExpr(T, kI, [&] { return dist(gen); });
  for (auto _ : state) {
    for (int l = 0; l < kL; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      attnviz::matmulOutIn(x, w(p + "self_attn.q_proj.weight"), kH * kDh, kD, q);
      attnviz::matmulOutIn(x, w(p + "self_attn.k_proj.weight"), kKv * kDh, kD, k);
      attnviz::matmulOutIn(x, w(p + "self_attn.v_proj.weight"), kKv * kDh, kD, v);
      for (int h = 0; h < kH; ++h) {
        const int g = h / (kH / kKv);
        scores.noalias() = q.middleCols(h * kDh, kDh) * k.middleCols(g * kDh, kDh).transpose();
        merged.middleCols(h * kDh, kDh).noalias() = scores * v.middleCols(g * kDh, kDh);
      }
      attnviz::matmulOutIn(merged, w(p + "self_attn.o_proj.weight"), kD, kH * kDh, proj);
      attnviz::matmulOutIn(x, w(p + "mlp.gate_proj.weight"), kI, kD, gate);
      attnviz::matmulOutIn(x, w(p + "mlp.up_proj.weight"), kI, kD, up);
      attnviz::matmulOutIn(hidden, w(p + "mlp.down_proj.weight"), kD, kI, down);
    }
    attnviz::matmulOutIn(x, w("model.embed_tokens.weight"), kV, kD, logits);
    benchmark::DoNotOptimize(logits.data());
  }
  setFlops(state, T);
}

void SmolOpen(benchmark::State& state) {
  const std::string dir = checkpoint().dir.string();
  for (auto _ : state) benchmark::DoNotOptimize(attnviz::Model::open(dir).get());
}

void SmolPeakMemory(benchmark::State& state) {
  const int T = int(state.range(0));
  const Checkpoint& ck = checkpoint();
  for (auto _ : state) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const auto model = attnviz::Model::open(ck.dir.string());
      const auto r = model->forward(ids(T));
      std::_Exit(std::size_t(r.logits.size()) == std::size_t(T) * kV ? 0 : 1);
    }
    int status = 0;
    rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    state.counters["peak_MB"] = double(ru.ru_maxrss) / 1024.0;
    state.counters["file_MB"] = double(ck.bytes) / (1024.0 * 1024.0);
    state.counters["over_file_MB"] =
        (double(ru.ru_maxrss) * 1024.0 - double(ck.bytes)) / (1024.0 * 1024.0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("child failed");
  }
}

}  // namespace

BENCHMARK(SmolForward)
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolForwardView)
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolGemmFloor)
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(SmolOpen)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(SmolPeakMemory)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
