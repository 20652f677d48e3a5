// attnviz score: each token's negative log-likelihood under a model, with the whole context or
// with StreamingLLM's cache (--kv-sinks S --kv-window W), as float32 .npy and its mean.
#include "cli/cli.h"
#include "cli/model_options.h"

#include "attnviz/formats/npy.h"
#include "attnviz/model/score.h"

#include <cstdio>
#include <numeric>

namespace attnviz::app {

int runScore(int argc, char** argv) {
  CLI::App app{"Score a text with a model: each token's negative log-likelihood (natural log) "
               "given the tokens before it, and their mean",
               "score"};
  ModelCliOptions o;
  AttentionCliOptions attention;
  std::string out;
  int sinks = -1, window = -1;
  addModelOptions(app, o, true);
  addResidualEditOption(app, o);
  app.add_option("--kv-sinks", sinks,
                 "StreamingLLM's cache: keep the first S tokens (the attention sinks); 0 is a "
                 "plain window (needs --kv-window)");
  app.add_option("--kv-window", window,
                 "StreamingLLM's cache: and the last W tokens before the query (needs "
                 "--kv-sinks); positions are cache positions");
  app.add_option("--out", out, "write the [T - 1] float32 NLLs (.npy): entry t is "
                               "-log p(token t+1 | tokens <= t)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("score", [&] {
    if ((sinks >= 0) != (window >= 0))
      throw UsageError("--kv-sinks and --kv-window go together (StreamingLLM's cache)");
    if (sinks >= 0 && window < 1)
      throw UsageError("--kv-window: expected a number >= 1, got " + std::to_string(window));
    o.prepareOnly = true;
    o.pastContext = sinks >= 0;  // the cache scores past the context, from --text as from --ids
    ModelRun run = runModelFromOptions(o, attention, app);
    KvPolicy p;
    p.streaming = sinks >= 0;
    p.sinks = std::max(0, sinks);
    p.window = std::max(0, window);
    // The interventions run inside the pass (--ablate L:H, --residual-edit L:P:D:zero|mean).
    Interventions iv = cliInterventions(*run.model, run.ids, run.ablations, attention);
    for (const auto& [l, e] : run.residualEdits) {
      if (e.position >= int(run.ids.size()))
        throw UsageError("--residual-edit: position " + std::to_string(e.position) +
                         " is past the text's " + std::to_string(run.ids.size()) + " tokens");
      iv.layer(l, run.model->config().nLayer).residualEdits.push_back(e);
    }
    const std::vector<float> nll = tokenNll(*run.model, run.ids, p, iv);
    if (!out.empty()) saveNpy(out, {static_cast<long long>(nll.size())}, nll.data());
    const double mean = std::accumulate(nll.begin(), nll.end(), 0.0) / double(nll.size());
    std::printf("mean NLL %.9g nats over %zu tokens (perplexity %.6g)%s\n", mean, nll.size(),
                std::exp(mean),
                p.streaming ? (", cache: " + std::to_string(p.sinks) + " sinks + window " +
                               std::to_string(p.window))
                                  .c_str()
                            : "");
    return 0;
  });
}

}  // namespace attnviz::app
