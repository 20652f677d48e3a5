// The head finder against the plain prompt pass it rides on (docs/head-finder.md, "Speed"): the
// same model, the same sequences, in the same iteration, alternating, so both see the same load.
//   HeadFinder_KjvLlama_T256   the shipped assets/models/kjv-sp-llama (3 layers x 8 heads) over
//                              assets/corpora/kjv-heldout.txt cut at 256 ids, every chapter (56
//                              sequences: the warm-up is 50 of them, the other 6 are sampled), as
//                              `attnviz heads --seq-len 256` runs it
//   HeadFinder_Gpt2Small_T512  a random-init GPT-2 small (12 x 12 heads, d 768, vocab 50257),
//                              3 sequences of 512 random ids (all in the warm-up: the metrics)
// Each iteration times the plain pass (Model::forward with Capture::none(), the weights each
// layer computes handed to nothing) over every sequence, then runHeadFinder over the same
// sequences (the same pass, each layer's weights folded into a HeadFinder, then finish()). The
// iteration's time is the finder's; the counters:
//   pass_tok/s    tokens per second of the plain pass
//   finder_tok/s  tokens per second of the finder
//   overhead_%    100 (finder time / pass time - 1): what the metrics and the sampling add
// Tokenizing the corpus and writing the tree are outside both timings.
#include "bench/bench_util.h"

#include "attnviz/model/head_finder.h"
#include "attnviz/model/model.h"

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Workload {
  std::unique_ptr<attnviz::Model> model;
  std::vector<std::vector<int>> sequences;
  double tokens = 0;
};

const Workload& kjv() {
  static const Workload w = [] {
    Workload k;
    const fs::path src(ATTNVIZ_SOURCE_DIR);
    k.model = attnviz::Model::open((src / "assets" / "models" / "kjv-sp-llama").string());
    const std::string corpus = (src / "assets" / "corpora" / "kjv-heldout.txt").string();
    k.sequences = attnviz::headFinderSequences(
        *k.model, attnviz::readCorpusDocuments(corpus, "text"), corpus, 256, 0, false);
    for (const auto& s : k.sequences) k.tokens += double(s.size());
    return k;
  }();
  return w;
}

// GPT-2 small's shape, random F32 weights (bench_util.h), written at start-up.
constexpr int kL = 12, kD = 768, kV = 50257, kP = 1024;

struct Gpt2 {
  attnviz::bench::BenchFolder folder{"heads_gpt2_small"};
  Workload w;
};

const Workload& gpt2() {
  static Gpt2 g = [] {
    Gpt2 c;
    const fs::path dir = c.folder.dir;
    std::ofstream(dir / "config.json") << nlohmann::json{{"model_type", "gpt2"},
                                                         {"n_layer", kL},
                                                         {"n_head", 12},
                                                         {"n_embd", kD},
                                                         {"n_positions", kP},
                                                         {"vocab_size", kV},
                                                         {"activation_function", "gelu_new"}}
                                                .dump();
    attnviz::bench::writeByteLevelVocab(dir, kV);
    attnviz::bench::TensorShapes shapes = {{"wte.weight", {kV, kD}}, {"wpe.weight", {kP, kD}}};
    for (int l = 0; l < kL; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      for (auto [n, s] : attnviz::bench::TensorShapes{{"ln_1.weight", {kD}},
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
    attnviz::bench::writeRandomSafetensors(dir / "model.safetensors", shapes, "transformer.");
    c.w.model = attnviz::Model::open(dir.string());
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> id(0, kV - 1);
    for (int s = 0; s < 3; ++s) {
      std::vector<int> v(512);
      for (int& x : v) x = id(gen);
      c.w.tokens += double(v.size());
      c.w.sequences.push_back(std::move(v));
    }
    return c;
  }();
  return g.w;
}

void runPair(benchmark::State& state, const Workload& w) {
  using clock = std::chrono::steady_clock;
  double passSeconds = 0, finderSeconds = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    for (const auto& s : w.sequences)
      benchmark::DoNotOptimize(w.model->forward(s, {}, attnviz::Capture::none()).logits.data());
    const auto t1 = clock::now();
    const std::vector<attnviz::HeadResult> r =
        attnviz::runHeadFinder(*w.model, w.sequences, attnviz::HeadFinderSettings{}, nullptr);
    const auto t2 = clock::now();
    benchmark::DoNotOptimize(r.data());
    const double pass = std::chrono::duration<double>(t1 - t0).count();
    const double finder = std::chrono::duration<double>(t2 - t1).count();
    passSeconds += pass;
    finderSeconds += finder;
    state.SetIterationTime(finder);
  }
  const double n = double(state.iterations());
  state.counters["pass_tok/s"] = w.tokens * n / passSeconds;
  state.counters["finder_tok/s"] = w.tokens * n / finderSeconds;
  state.counters["overhead_%"] = 100.0 * (finderSeconds / passSeconds - 1.0);
  state.counters["sequences"] = double(w.sequences.size());
}

void HeadFinder_KjvLlama_T256(benchmark::State& state) { runPair(state, kjv()); }
void HeadFinder_Gpt2Small_T512(benchmark::State& state) { runPair(state, gpt2()); }

}  // namespace

BENCHMARK(HeadFinder_KjvLlama_T256)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(HeadFinder_Gpt2Small_T512)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
