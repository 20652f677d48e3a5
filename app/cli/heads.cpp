// attnviz heads: the head finder (docs/head-finder.md). Scores every attention head of a
// decoder or an encoder over a corpus, writes HeadVis's tree, and ranks the heads of a tree.
#include "cli/cli.h"
#include "cli/model_options.h"  // addFastActivationsOption
#include "cli/options.h"
#include "cli/progress.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/model/head_finder.h"
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/chat_template.h"
#include "attnviz/session/model_source.h"  // modelName

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

namespace attnviz::app {

namespace {

namespace fs = std::filesystem;

// model_type values of image models (DESIGN's image families): the head finder reads text.
const std::set<std::string>& imageModelTypes() {
  static const std::set<std::string> t{"vit",    "deit",   "clip",   "clip_vision_model",
                                       "siglip", "siglip_vision_model", "dinov2",
                                       "dinov2_with_registers"};
  return t;
}

// Refuses encoder-decoders and image models in one line, before the weights are read.
void refuseOtherKinds(const std::string& dir) {
  const ModelFiles files = locateModelFiles(dir, false);
  if (!files.gguf.empty() || files.config.empty()) return;  // checked after opening
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(readFile(files.config));
  } catch (const nlohmann::json::exception&) {
    return;  // Model::open names the problem
  }
  if (!j.is_object()) return;
  const std::string type = j.value("model_type", std::string());
  if (imageModelTypes().count(type))
    throw InputError(files.config + ": " + type +
                     " is an image model; the head finder reads text (decoders and encoders)");
  const ModelConfig c = loadModelConfig(files.config);
  if (c.encoderDecoder())
    throw InputError(files.config + ": " + c.family +
                     " is an encoder-decoder; the head finder reads decoders and encoders");
}

void checkMetric(const std::string& metric, const std::vector<std::string>& known,
                 const std::string& where) {
  if (std::find(known.begin(), known.end(), metric) != known.end()) return;
  std::string list;
  for (const std::string& m : known) list += (list.empty() ? "" : ", ") + m;
  throw UsageError("--top " + metric + ": not a metric" + where + " (" + list + ")");
}

}  // namespace

int runHeads(int argc, char** argv) {
  CLI::App app{
      "Find attention heads by what they do: score every head of a decoder or an encoder over a "
      "corpus (HeadVis's metrics and interval sampling), write the tree HeadVis reads, or rank "
      "the heads of a tree",
      "heads"};
  std::string modelDir, corpus, out, field = "text", tree, top, maxMemory;
  int seqLen = 512, intervals = 5, samples = 3, topSamples = 10, sparseTopk = 8;
  long long sequences = 0;
  double sparseThreshold = 0.005, inductionThreshold = 0.01;
  std::uint64_t seed = 0;
  bool chat = false;
  app.add_option("--model", modelDir, "a decoder or an encoder: folder, .gguf file or name (ORG/NAME, ollama:NAME:TAG)");
  app.add_option("--corpus", corpus,
                 "a .jsonl file (one object a line, text in --field), a folder of .txt files "
                 "(one document each, by name), or a text file (documents separated by blank "
                 "lines)");
  app.add_option("--out", out, "the tree to write (a folder: config.json, scatter_data.json, "
                               "heads/L{l}H{h}.json)");
  app.add_option("--field", field, "the .jsonl field that holds the text (default: text)");
  app.add_option("--seq-len", seqLen,
                 "each document is cut to its first N ids (default 512; at most the model's "
                 "context)");
  app.add_option("--sequences", sequences, "stop after N counted sequences (default: all)");
  app.add_flag("--chat", chat, "wrap each document as one user turn in the model's chat format");
  app.add_option("--intervals", intervals,
                 "K intervals of max activation (default 5)");
  app.add_option("--samples", samples,
                 "sequences kept in each interval below the top by reservoir sampling (default 3)");
  app.add_option("--top-samples", topSamples,
                 "sequences of largest max activation kept in the top interval (default 10)");
  app.add_option("--sparse-topk", sparseTopk,
                 "largest weights kept per query row of a kept sequence (default 8)");
  app.add_option("--sparse-threshold", sparseThreshold,
                 "kept weights are at least this (default 0.005)");
  app.add_option("--induction-threshold", inductionThreshold,
                 "induction weights below this count as 0 (default 0.01)");
  app.add_option("--seed", seed, "seed of the reservoir sampling (default 0)");
  app.add_option("--top", top,
                 "print every head as layer<TAB>head<TAB>value of this metric, largest first");
  app.add_option("--tree", tree, "rank the heads of an existing tree (with --top)");
  app.add_option("--max-memory", maxMemory,
                 "SIZE: budget for float32 copies of F16/BF16/quantized weights (as for model)");
  addFastActivationsOption(app);
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("heads", [&]() -> int {
    // ---- Ranking an existing tree
    if (!tree.empty()) {
      if (!modelDir.empty() || !corpus.empty() || !out.empty())
        throw UsageError("--tree ranks an existing tree: give it with --top alone");
      if (top.empty()) throw UsageError("--tree DIR needs --top METRIC");
      std::vector<std::string> known = treeMetrics(tree);
      checkMetric(top, known, " of " + (fs::path(tree) / "config.json").string());
      std::vector<HeadScore> scores = readTreeScores(tree, top);
      rankHeadScores(scores);
      std::fputs(headScoreLines(scores).c_str(), stdout);
      return 0;
    }

    // ---- A run over a corpus
    if (modelDir.empty() || corpus.empty() || out.empty())
      throw UsageError("give --model MODEL --corpus PATH --out DIR (or --tree DIR --top METRIC)");
    if (!top.empty()) checkMetric(top, headMetricNames(), "");
    if (seqLen < 2) throw UsageError("--seq-len: expected a number >= 2, got " + std::to_string(seqLen));
    if (app.count("--sequences") && sequences < 1)
      throw UsageError("--sequences: expected a number >= 1, got " + std::to_string(sequences));
    if (intervals < 1) throw UsageError("--intervals: expected a number >= 1");
    if (samples < 0) throw UsageError("--samples: expected a number >= 0");
    if (topSamples < 0) throw UsageError("--top-samples: expected a number >= 0");
    if (sparseTopk < 1) throw UsageError("--sparse-topk: expected a number >= 1");
    if (!std::isfinite(sparseThreshold) || sparseThreshold < 0)
      throw UsageError("--sparse-threshold: expected a number >= 0");
    if (!std::isfinite(inductionThreshold) || inductionThreshold < 0)
      throw UsageError("--induction-threshold: expected a number >= 0");
    std::int64_t budget = -1;
    if (!maxMemory.empty()) {
      try {
        budget = parseMemorySize(maxMemory);
      } catch (const InputError& e) {
        throw UsageError(std::string("--max-memory: ") + e.what());
      }
    }

    refuseOtherKinds(modelDir);
    // The corpus is read before the weights: a bad corpus is named before anything loads.
    const std::vector<std::string> docs = readCorpusDocuments(corpus, field);
    const std::unique_ptr<Model> model = Model::open(modelDir, {}, budget);
    const ModelConfig& c = model->config();
    if (c.encoderDecoder())
      throw InputError(model->files().weights + ": " + c.family +
                       " is an encoder-decoder; the head finder reads decoders and encoders");
    // Tokenize: each document as `tokenize` does, cut to --seq-len (and the model's context).
    const int cut = c.nPositions > 0 ? std::min(seqLen, c.nPositions) : seqLen;
    const std::vector<std::vector<int>> seqs = headFinderSequences(
        *model, docs, corpus, seqLen, app.count("--sequences") ? sequences : 0, chat);

    HeadFinderSettings s;
    s.intervals = intervals, s.samples = samples, s.topSamples = topSamples;
    s.sparseTopk = sparseTopk, s.sparseThreshold = sparseThreshold;
    s.inductionThreshold = inductionThreshold, s.seed = seed;
    const long long N = (long long)seqs.size();

    // One pass a sequence; each layer's weights are folded in as the pass computes them.
    ProgressBar bar("attnviz heads");
    int warmup = 0;
    std::vector<HeadResult> results = runHeadFinder(
        *model, seqs, s,
        [&](long long i, long long n) {
          if (i < n)
            bar.update("sequence " + std::to_string(i + 1) + "/" + std::to_string(n), double(i) / double(n));
          else
            bar.update("writing " + out, 1.0);
        },
        &warmup);

    nlohmann::json pc;
    pc["model"] = modelDir;
    pc["family"] = c.family;
    pc["corpus"] = corpus;
    pc["field"] = field;
    pc["seq_len"] = seqLen;
    pc["seq_len_used"] = cut;
    pc["sequences"] = N;
    long long tokens = 0;
    for (const std::vector<int>& q : seqs) tokens += (long long)q.size();
    pc["tokens"] = tokens;
    pc["documents_read"] = docs.size();
    pc["chat"] = chat;
    pc["intervals"] = intervals;
    pc["warmup"] = warmup;
    pc["samples"] = samples;
    pc["top_samples"] = topSamples;
    pc["sparse_topk"] = sparseTopk;
    pc["sparse_threshold"] = sparseThreshold;
    pc["induction_threshold"] = inductionThreshold;
    pc["seed"] = seed;
    pc["tool"] = "attnviz heads";
    HeadTreeInfo info;
    info.modelName = modelName(modelDir);
    info.datasetName = corpusName(corpus);
    info.layers = c.nLayer, info.heads = c.nHead, info.intervals = intervals;
    info.pipelineConfigJson = pc.dump();
    const Tokenizer& tok = model->tokenizer();
    writeHeadTree(out, info, results, [&](int id) { return tok.printable(id); });

    if (!top.empty()) {
      const std::size_t m = std::size_t(
          std::find(headMetricNames().begin(), headMetricNames().end(), top) - headMetricNames().begin());
      std::vector<HeadScore> scores;
      for (const HeadResult& r : results) scores.push_back({r.layer, r.head, r.metrics[m]});
      rankHeadScores(scores);
      std::fputs(headScoreLines(scores).c_str(), stdout);
    }
    return 0;
  });
}

}  // namespace attnviz::app
