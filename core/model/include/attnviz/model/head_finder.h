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
#include <limits>
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


// ---- Reading a tree back (the GUI's Head finder; core/model/src/head_tree.cpp)

// A tree's config.json and scatter_data.json: every head's metrics.
struct HeadTreeRow {
  int layer = 0, head = 0;
  std::vector<double> values;  // `metrics` order; NaN when null or absent
};
struct HeadTree {
  std::string dir, modelName, datasetName;
  std::string headDataPattern = "L{layer}H{head}.json";
  int layers = 0, heads = 0, intervals = 0;
  std::vector<std::string> metrics;  // config.json's, else the numbers scatter_data.json holds
  std::vector<HeadTreeRow> rows;     // scatter_data.json's order
  std::string pipelineConfigJson = "{}";
};
// Reads DIR/config.json and DIR/scatter_data.json (attnviz's tree or HeadVis's). Throws
// InputError "<file>: <problem>" (one line) when either is missing or malformed.
HeadTree readHeadTree(const std::string& dir);
// DIR/heads/ + head_data_pattern with {layer} and {head} filled in.
std::string headFilePath(const HeadTree& tree, int layer, int head);

// One kept sequence of a head file.
struct HeadTreeSequence {
  int sequenceId = 0;
  int interval = 0;  // as the file writes it (1-based)
  int seqLen = 0;
  double maxActivation = 0.0;
  std::vector<std::string> tokens;  // each id's piece
  std::vector<int> ids;             // attnviz's `token_ids` (empty in HeadVis's trees)
  std::vector<long long> indices;   // query * seqLen + key
  std::vector<double> values;
};
struct HeadTokenWeight {
  std::string token;
  double weight = 0.0;
};
// A head file (heads/L{l}H{h}.json): what the dashboard shows. Fields a tree does not hold are
// left empty (HeadVis's trees may lack the histograms).
struct HeadDashboardData {
  int layer = -1, head = -1;  // attnviz's own fields (-1 when absent)
  std::vector<HeadTreeSequence> sequences;
  std::vector<double> qkEdges, qkValues;      // qk_distance_histogram
  std::vector<double> histEdges, histValues;  // histogram (of max activations)
  std::vector<HeadTokenWeight> topQuery, topKey;
  long long nSamples = -1;                    // statistics.n_samples (-1 when absent)
  double meanMaxActivation = std::numeric_limits<double>::quiet_NaN();
};
// Throws InputError "<file>: <problem>" (one line) when the file is missing or malformed: an
// entry out of range of its sequence (an index >= seqLen², fewer values than indices, ...).
HeadDashboardData readHeadFile(const std::string& path);
// The same from the file's text (`path` only names it in errors); for the fuzz target.
HeadDashboardData parseHeadFile(const std::string& text, const std::string& path);

// Row r's rank (1 = largest) among every head with a defined value of metric m; 0 when its own
// value is undefined. Equal values share the better rank.
int headRank(const HeadTree& tree, std::size_t row, std::size_t metric);
// The heads nearest to row r in metric space: each metric z-scored over the heads (mean 0,
// standard deviation 1; a metric constant over the heads is left out), the Euclidean distance
// over the metrics both heads define. The n nearest, nearest first (ties: tree order), r left out.
struct NearHead {
  std::size_t row = 0;
  double distance = 0.0;
};
std::vector<NearHead> nearestHeads(const HeadTree& tree, std::size_t row, int n);

// ---- A run over a corpus (`attnviz heads` and the GUI's worker)
class Model;
// Each document as `tokenize` does (special tokens added; with `chat` as one user turn in the
// model's chat template), cut to seqLen ids (and the model's context); sequences of fewer than 2
// ids are left out; at most maxSequences (0: all). Throws InputError "<corpus>: document N:
// <problem>", or naming the corpus when no document is long enough.
std::vector<std::vector<int>> headFinderSequences(const Model& model,
                                                  const std::vector<std::string>& docs,
                                                  const std::string& corpus, int seqLen,
                                                  long long maxSequences, bool chat);
// One pass a sequence, the weights folded into a HeadFinder. `progress(done, total)` is called
// before each sequence. Under a PassProgress::Scope whose `cancel` is set, throws PassCancelled.
// `warmup` gets the run's W.
std::vector<HeadResult> runHeadFinder(const Model& model,
                                      const std::vector<std::vector<int>>& sequences,
                                      const HeadFinderSettings& settings,
                                      const std::function<void(long long, long long)>& progress,
                                      int* warmup = nullptr);

}  // namespace attnviz
