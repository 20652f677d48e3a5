// GPT-2 small (12 layers x 12 heads, d=768, vocab 50257), a random-init F32 checkpoint written
// here at start-up (never committed), each figure beside its floor from the same run
// (targets: docs/design/performance.md):
//   Gpt2Forward_T128     Model::forward on 128 ids, every layer's Q, K, V and weights kept
//   Gpt2GemmFloor_T128   the same GEMMs alone on the same mapped weights: per layer c_attn,
//                        12 heads of Q K^T and A V, c_proj, c_fc, mlp c_proj; then the logits.
//                        The same column-split threading (matmulInOut), buffers allocated once.
//   Gpt2Open             Model::open: config, tokenizer files, header validation, mmap
//   Gpt2PeakMemory       a forked child opens the model and runs T=128; the counters give its
//                        peak RSS above the file size and above the parent's RSS at the fork
// The checkpoint goes to $ATTNVIZ_BENCH_DIR or the temp folder and is removed at exit (kept when
// ATTNVIZ_BENCH_KEEP is set, e.g. to time `attnviz model` on it with /usr/bin/time -v).
#include "bench/bench_util.h"

#include "attnviz/model/model.h"
#include "attnviz/formats/safetensors.h"

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

namespace {

namespace fs = std::filesystem;
using attnviz::MatrixRM;

constexpr int kL = 12, kH = 12, kD = 768, kV = 50257, kP = 1024, kT = 128;

struct Checkpoint {
  attnviz::bench::BenchFolder folder{"gpt2_small"};
  fs::path dir = folder.dir;
  std::uintmax_t bytes = 0;
};

// model.safetensors of random F32 tensors (bench_util.h), with the tokenizer files a GPT-2
// folder has: 256 byte tokens, 50000 two-byte tokens, <|endoftext|>.
const Checkpoint& checkpoint() {
  static Checkpoint ck = [] {
    Checkpoint c;
    std::ofstream(c.dir / "config.json") << nlohmann::json{
        {"model_type", "gpt2"},
        {"n_layer", kL},
        {"n_head", kH},
        {"n_embd", kD},
        {"n_positions", kP},
        {"vocab_size", kV},
        {"activation_function", "gelu_new"}}.dump();
    attnviz::bench::writeByteLevelVocab(c.dir, kV);
    attnviz::bench::TensorShapes shapes = {{"wte.weight", {kV, kD}}, {"wpe.weight", {kP, kD}}};
    for (int l = 0; l < kL; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      for (auto [n, s] : attnviz::bench::TensorShapes{
               {"ln_1.weight", {kD}},
               {"ln_1.bias", {kD}},
               {"attn.c_attn.weight", {kD, 3 * kD}},
               {"attn.c_attn.bias", {3 * kD}},
               {"attn.c_proj.weight", {kD, kD}},
               {"attn.c_proj.bias", {kD}},
               {"ln_2.weight", {kD}},
               {"ln_2.bias", {kD}},
               {"mlp.c_fc.weight", {kD, 4 * kD}},
               {"mlp.c_fc.bias", {4 * kD}},
               {"mlp.c_proj.weight", {4 * kD, kD}},
               {"mlp.c_proj.bias", {kD}}})
        shapes.emplace_back(p + n, s);
    }
    shapes.push_back({"ln_f.weight", {kD}});
    shapes.push_back({"ln_f.bias", {kD}});
    c.bytes = attnviz::bench::writeRandomSafetensors(c.dir / "model.safetensors", shapes,
                                                     "transformer.");
    return c;
  }();
  return ck;
}

std::vector<int> ids() {
  std::vector<int> v(kT);
  for (int t = 0; t < kT; ++t) v[t] = (t * 7919) % kV;
  return v;
}

double forwardFlops() {
  const double T = kT, d = kD;
  const double perLayer = 2 * T * d * (3 * d + d + 4 * d + 4 * d) + kH * 2 * (2 * T * T * (d / kH));
  return kL * perLayer + 2 * T * d * kV;
}

void Gpt2Forward_T128(benchmark::State& state) {
  const auto model = attnviz::Model::open(checkpoint().dir.string());
  const std::vector<int> in = ids();
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in).logits.data());
  state.counters["GFLOP/s"] =
      benchmark::Counter(forwardFlops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Gpt2GemmFloor_T128(benchmark::State& state) {
  const auto f = attnviz::SafetensorsFile::open((checkpoint().dir / "model.safetensors").string());
  auto w = [&](const std::string& n) { return f.f32View(f.at("transformer." + n)).data(); };
  std::mt19937 gen(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  MatrixRM x = MatrixRM::NullaryExpr(kT, kD, [&] { return dist(gen); });
  MatrixRM qkv, proj, hidden, out, logits, scores(kT, kT), o(kT, kD / kH);
  const int dh = kD / kH;
  for (auto _ : state) {
    for (int l = 0; l < kL; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      attnviz::matmulInOut(x, w(p + "attn.c_attn.weight"), nullptr, kD, 3 * kD, qkv);
      for (int h = 0; h < kH; ++h) {
        scores.noalias() = qkv.middleCols(h * dh, dh) * qkv.middleCols(kD + h * dh, dh).transpose();
        o.noalias() = scores * qkv.middleCols(2 * kD + h * dh, dh);
      }
      attnviz::matmulInOut(x, w(p + "attn.c_proj.weight"), nullptr, kD, kD, proj);
      attnviz::matmulInOut(x, w(p + "mlp.c_fc.weight"), nullptr, kD, 4 * kD, hidden);
      attnviz::matmulInOut(hidden, w(p + "mlp.c_proj.weight"), nullptr, 4 * kD, kD, out);
    }
    attnviz::matmulOutIn(x, w("wte.weight"), kV, kD, logits);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(forwardFlops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Gpt2Open(benchmark::State& state) {
  const std::string dir = checkpoint().dir.string();
  for (auto _ : state) benchmark::DoNotOptimize(attnviz::Model::open(dir).get());
}

void Gpt2PeakMemory(benchmark::State& state) {
  const Checkpoint& ck = checkpoint();
  for (auto _ : state) {
    const long before = attnviz::bench::currentRssKb();
    const pid_t pid = ::fork();
    if (pid == 0) {
      const auto model = attnviz::Model::open(ck.dir.string());
      const auto r = model->forward(ids());
      std::_Exit(r.logits.size() == std::size_t(kT) * kV ? 0 : 1);
    }
    int status = 0;
    rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    state.counters["peak_MB"] = double(ru.ru_maxrss) / 1024.0;
    state.counters["file_MB"] = double(ck.bytes) / (1024.0 * 1024.0);
    state.counters["over_file_MB"] =
        (double(ru.ru_maxrss) * 1024.0 - double(ck.bytes)) / (1024.0 * 1024.0);
    state.counters["parent_rss_MB"] = double(before) / 1024.0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("child failed");
  }
}

}  // namespace

BENCHMARK(Gpt2Forward_T128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(Gpt2GemmFloor_T128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(Gpt2Open)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(Gpt2PeakMemory)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
