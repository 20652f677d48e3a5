// attnviz model: the head finder (`attnviz heads`, docs/head-finder.md). Over a corpus of
// sequences it scores every attention head of a decoder or an encoder with seven metrics, keeps
// a few example sequences per head by HeadVis's interval sampling, and writes or reads the tree
// HeadVis reads (config.json, scatter_data.json, heads/L{l}H{h}.json).
//
// A run is streamed: HeadFinder::beginSequence, then addLayer once per layer with that layer's
// weights [H, T, T] as the pass computes them (PassProgress::onWeights), then endSequence. Only
// running sums, the warm-up values and the kept sequences' sparse rows are held.
#pragma once

#include "attnviz/engine/tensor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

// The metrics, in the order config.json lists them (HeadVis's six, then attnviz's own).
const std::vector<std::string>& headMetricNames();
// One line describing a metric (config.json's metric_descriptions).
std::string headMetricDescription(const std::string& metric);

// The documents of a corpus, in order: a `.jsonl` file (the string field `field` of each
// line's object), a folder of `.txt` files (sorted by name, one document each), or any other
// text file (documents separated by one or more blank lines). Documents that are empty or only
// whitespace are left out. Throws InputError "<file>: <problem>" (a malformed .jsonl line names
// its line number).
std::vector<std::string> readCorpusDocuments(const std::string& path, const std::string& field);
// The corpus's name in the tree (dataset_name): the file's or folder's base name.
std::string corpusName(const std::string& path);

struct HeadFinderSettings {
  int intervals = 5;             // K
  int samples = 3;               // kept by reservoir sampling in each interval below the top
  int topSamples = 10;           // kept in the top interval (largest max activation)
  int sparseTopk = 8;            // largest weights kept per query row
  double sparseThreshold = 0.005;
  double inductionThreshold = 0.01;
  std::uint64_t seed = 0;
};

// HeadVis's warm-up length for a run that counts n sequences: max(1, min(2000, max(50, n / 10))).
int headFinderWarmup(long long n);
// Index k = 1 .. K - 1 of the sorted warm-up values that is interval boundary k:
// min(round(k W / K), W - 1), rounded half to even (Python's round).
int boundaryIndex(int k, int W, int K);

// One kept sequence of one head.
struct KeptSequence {
  int sequenceId = 0;
  int interval = 0;  // 0-based (the tree writes it 1-based)
  double maxActivation = 0.0;
  int seqLen = 0;
  std::shared_ptr<const std::vector<int>> ids;
  std::vector<long long> indices;  // query * T + key, ordered by (query, key)
  std::vector<double> values;      // rounded to 4 decimals
};

// What a run found for one head.
struct HeadResult {
  int layer = 0, head = 0;
  std::vector<double> metrics;      // headMetricNames() order; NaN when undefined
  double meanMaxActivation = 0.0;   // NaN with no sequence
  std::vector<double> boundaries;   // the K - 1 interval boundaries
  std::vector<long long> histogram; // 50 bins of the sequences' max activations
  std::vector<KeptSequence> kept;   // by interval, lowest first; the top one largest first
};

class HeadFinder {
 public:
  // `expected` is N, the number of sequences the run will count (it fixes the warm-up).
  HeadFinder(int layers, int heads, const HeadFinderSettings& s, long long expected);
  ~HeadFinder();
  HeadFinder(const HeadFinder&) = delete;
  HeadFinder& operator=(const HeadFinder&) = delete;

  // A new counted sequence (at least 2 ids); its id is the number of sequences begun before.
  void beginSequence(const std::vector<int>& ids);
  // Layer `layer`'s weights [H, T, T] on the current sequence (each layer once).
  void addLayer(int layer, const Tensor3& weights);
  // Ends the current sequence (every layer must have been added).
  void endSequence();

  long long sequences() const;
  int warmup() const;
  // The results, one per head in layer then head order (boundaries set from the warm-up values
  // seen when the corpus ended inside it).
  std::vector<HeadResult> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What the tree's config.json says beside the results.
struct HeadTreeInfo {
  std::string modelName, datasetName;
  int layers = 0, heads = 0, intervals = 5;
  std::string pipelineConfigJson = "{}";  // attnviz's settings (a JSON object, free form)
};

// Writes the tree into `dir` through a temporary folder beside it, renamed into place when
// complete (an existing tree at `dir` is replaced). `piece` gives each id's text (as
// `tokenize --pieces` prints it). Throws InputError naming the path on failure.
void writeHeadTree(const std::string& dir, const HeadTreeInfo& info,
                   const std::vector<HeadResult>& results,
                   const std::function<std::string(int)>& piece);

// One head's value of a metric (NaN when undefined).
struct HeadScore {
  int layer = 0, head = 0;
  double value = 0.0;
};
// The metrics a tree's config.json lists (else those its scatter_data.json holds). Throws
// InputError naming the file when a tree file is missing or malformed.
std::vector<std::string> treeMetrics(const std::string& dir);
// Every head's value of `metric` from the tree's scatter_data.json, in the file's order.
// Throws InputError naming the file when it is missing or malformed.
std::vector<HeadScore> readTreeScores(const std::string& dir, const std::string& metric);
// Largest first, undefined (NaN) last; equal values keep their order.
void rankHeadScores(std::vector<HeadScore>& scores);
// "layer<TAB>head<TAB>value" lines (6 decimals; "nan" when undefined).
std::string headScoreLines(const std::vector<HeadScore>& scores);

}  // namespace attnviz
