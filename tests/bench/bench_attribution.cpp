// A full zero-ablation sweep (attribution.h) of a GPT-2-small-shaped random checkpoint (12 layers
// x 12 heads, d=768, vocab 50257; F32, written here at start-up and removed at exit) at T = 64,
// beside what it saves:
//   AttributionSweep_T64        ablationSweep: 144 heads, each re-run from its own layer on one
//                               kept copy, logits of position P only (Model::rerunLogitsAt)
//   SweepByRerunFrom_T64        the sum over heads of Model::rerunFrom from the head's layer
//                               (every layer from there, and the logits of all T positions)
//   SweepByFullPasses_T64       one full Model::forward per head
//   AttributionFirstRow_T64     the GUI's time to the first filled row of the map: from the model
//                               view's narrow pass (Capture::view), the Attribution worker's full
//                               pass, then the sweep until its first row (a layer's 12 heads)
//                               is reported; the window draws it on its next frame (+ one frame)
// Counters: heads/s, and "layers" (the layer passes one sweep runs).
// The checkpoint is bench_model.cpp's (bench_util.h); the folder goes to $ATTNVIZ_BENCH_DIR or the
// temp folder.
#include "bench/bench_util.h"

#include "attnviz/model/attribution.h"
#include "attnviz/model/model.h"

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

namespace {

namespace fs = std::filesystem;

constexpr int kL = 12, kH = 12, kD = 768, kV = 50257, kP = 1024, kT = 64;

// The checkpoint of bench_model.cpp (bench_util.h writes it): random F32 model.safetensors and
// GPT-2 tokenizer files.
const fs::path& checkpoint() {
  static attnviz::bench::BenchFolder f = [] {
    attnviz::bench::BenchFolder ck("attr_gpt2_small");
    std::ofstream(ck.dir / "config.json") << nlohmann::json{{"model_type", "gpt2"},
                                                            {"n_layer", kL},
                                                            {"n_head", kH},
                                                            {"n_embd", kD},
                                                            {"n_positions", kP},
                                                            {"vocab_size", kV},
                                                            {"activation_function", "gelu_new"}}
                                                 .dump();
    attnviz::bench::writeByteLevelVocab(ck.dir, kV);
    using Shapes = attnviz::bench::TensorShapes;
    Shapes shapes = {{"wte.weight", {kV, kD}}, {"wpe.weight", {kP, kD}}};
    for (int l = 0; l < kL; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      for (const auto& [n, s] : Shapes{{"ln_1.weight", {kD}},
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
    attnviz::bench::writeRandomSafetensors(ck.dir / "model.safetensors", shapes, "transformer.");
    return ck;
  }();
  return f.dir;
}

std::vector<int> ids() {
  std::vector<int> v(kT);
  for (int t = 0; t < kT; ++t) v[t] = (t * 7919) % kV;
  return v;
}

void counters(benchmark::State& state, double layerPasses) {
  state.counters["heads/s"] =
      benchmark::Counter(kL * kH, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["layers"] = layerPasses;
}

void AttributionSweep_T64(benchmark::State& state) {
  const auto m = attnviz::Model::open(checkpoint().string());
  const attnviz::ForwardResult clean = m->forward(ids());
  for (auto _ : state) {
    const attnviz::AblationSweep s = attnviz::ablationSweep(*m, clean, attnviz::AblationKind::Zero);
    benchmark::DoNotOptimize(s.delta.values.data());
  }
  counters(state, kH * kL * (kL + 1) / 2.0);
}

void SweepByRerunFrom_T64(benchmark::State& state) {
  const auto m = attnviz::Model::open(checkpoint().string());
  const attnviz::ForwardResult clean = m->forward(ids());
  for (auto _ : state) {
    attnviz::ForwardResult work = clean;
    for (int l = 0; l < kL; ++l) {
      work.layers[l].residualIn = clean.layers[l].residualIn;
      for (int h = 0; h < kH; ++h) {
        attnviz::Interventions iv;
        iv.ablate(l, h, m->config());
        m->rerunFrom(work, l, iv);
        benchmark::DoNotOptimize(work.logits.data());
      }
    }
  }
  counters(state, kH * kL * (kL + 1) / 2.0);
}

void SweepByFullPasses_T64(benchmark::State& state) {
  const auto m = attnviz::Model::open(checkpoint().string());
  const std::vector<int> in = ids();
  for (auto _ : state) {
    for (int l = 0; l < kL; ++l)
      for (int h = 0; h < kH; ++h) {
        attnviz::Interventions iv;
        iv.ablate(l, h, m->config());
        benchmark::DoNotOptimize(m->forward(in, iv).logits.data());
      }
  }
  counters(state, double(kH) * kL * kL);
}

void AttributionFirstRow_T64(benchmark::State& state) {
  const auto m = attnviz::Model::open(checkpoint().string());
  // What the model view keeps (app/gui/model_io.cpp): thumbnails and the last logits row.
  const attnviz::ForwardResult view = m->forward(ids(), {}, attnviz::Capture::view(64));
  int firstRow = -1;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<bool> cancel{false};
    double seconds = 0;
    attnviz::AttributionControl control;
    control.cancel = &cancel;
    control.row = [&](int row, const std::vector<float>&) {
      if (cancel) return;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      firstRow = row;
      cancel = true;  // the rest of the sweep is not what this measures
    };
    const attnviz::ForwardResult pass = m->forward(view.ids, view.interventions);
    benchmark::DoNotOptimize(
        attnviz::ablationSweep(*m, pass, attnviz::AblationKind::Zero, {}, control).delta.values.data());
    state.SetIterationTime(seconds);
  }
  state.counters["first_row"] = firstRow;
}

}  // namespace

BENCHMARK(AttributionFirstRow_T64)->Unit(benchmark::kMillisecond)->UseManualTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(AttributionSweep_T64)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK(SweepByRerunFrom_T64)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK(SweepByFullPasses_T64)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
