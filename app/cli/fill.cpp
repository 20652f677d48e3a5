// attnviz fill: an encoder's masked-LM predictions for each mask token of a text.
#include "cli/cli.h"
#include "cli/model_options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace attnviz::app {

int runFill(int argc, char** argv) {
  CLI::App app{
      "Fill the mask tokens of a text with an encoder's masked-LM head (BERT, RoBERTa, "
      "DistilBERT)",
      "fill"};
  ModelCliOptions o;
  int topK = 5;
  addModelOptions(app, o, true);
  addTextPairOption(app, o);
  app.add_option("--top-k", topK, "the N most likely tokens for each mask (default 5)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("fill", [&] {
    if (topK < 1) throw UsageError("--top-k: expected a number >= 1, got " + std::to_string(topK));
    AttentionCliOptions attention;
    o.capture = Capture::view(0);
    o.capture.allLogits = true;
    o.prepareOnly = true;
    ModelRun run = runModelFromOptions(o, attention, app);
    const Model& m = *run.model;
    const ModelConfig& c = m.config();
    if (c.causal) {
      throw UsageError("fill: " + c.family + " is not an encoder (bert, roberta, distilbert)");
    }
    requireMlmHead(m, "fill cannot predict");
    const std::optional<int> mask = m.tokenizer().mask();
    if (!mask) {
      throw InputError(m.files().dir + ": the tokenizer has no mask token ([MASK], <mask>)");
    }
    std::vector<int> positions;
    for (std::size_t t = 0; t < run.ids.size(); ++t)
      if (run.ids[t] == *mask) positions.push_back(int(t));
    if (positions.empty()) {
      throw UsageError("--text has no mask token (write " + m.tokenizer().pieceBytes(*mask) +
                       " where a token should be predicted)");
    }
    runPass(run, run.ids, run.ablations, attention, o.capture);
    const MatrixRM& logits = run.result.logits;
    const int V = int(logits.cols()), k = std::min(topK, V);
    std::string out;
    for (int p : positions) {
      // The softmax over the whole vocabulary, in double.
      const float* row = logits.row(p).data();
      const double mx = *std::max_element(row, row + V);
      double sum = 0;
      for (int v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      std::vector<int> order(static_cast<std::size_t>(V));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      for (int i = 0; i < k; ++i) {
        const int id = order[std::size_t(i)];
        char buf[64];
        std::snprintf(buf, sizeof buf, "%d\t%d\t%.6f\t", p, id,
                      std::exp(double(row[id]) - mx) / sum);
        out += buf + m.tokenizer().printable(id) + "\n";
      }
    }
    std::fputs(out.c_str(), stdout);
    return 0;
  });
}

}  // namespace attnviz::app
