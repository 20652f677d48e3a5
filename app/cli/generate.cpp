// attnviz generate: continue a text with a KV cache (generate.h), greedy or sampled, with the
// interventions in every step; the text streams to stdout as tokens come.
#include "cli/cli.h"
#include "cli/model_options.h"

#include "attnviz/engine/ggml_kernels.h"  // setFastActivations
#include "attnviz/model/generate.h"

#include <unistd.h>

#include <cstdio>

namespace attnviz::app {

int runGenerate(int argc, char** argv) {
  CLI::App app{"Continue a text with a model (KV cache: each new token is one step over the "
               "cache); interventions apply at every step",
               "generate"};
  ModelCliOptions o;
  AttentionCliOptions attention;
  int n = -1, topK = 0;
  float sampleTemperature = 0.0f;
  std::uint64_t seed = 0;
  bool printIds = false, verbose = false;
  addModelOptions(app, o, true);
  addAttentionOptions(app, attention);
  addRopeOffOption(app, o);
  addMaskSourceOption(app, o);
  app.add_option("-n", n, "tokens to append (fewer at EOS or the end of the context)")->required();
  app.add_option("--sample-temperature", sampleTemperature,
                 "0 (the default) is greedy; otherwise sample from softmax(logits / T)");
  app.add_option("--top-k", topK, "sample only from the K most likely tokens");
  app.add_option("--seed", seed, "the sampler's seed");
  app.add_flag("--print-ids", printIds,
               "print the generated ids on one line instead of the text (an EOS that ends the "
               "generation is printed last)");
  app.add_flag("--verbose", verbose, "tokens per second and why it stopped, on stderr");
  int sinks = -1, window = -1;
  app.add_option("--kv-sinks", sinks,
                 "StreamingLLM's cache (decoders): keep the first S tokens for good (needs "
                 "--kv-window); the text can then run past the context");
  app.add_option("--kv-window", window,
                 "StreamingLLM's cache: and the last W tokens (needs --kv-sinks); positions are "
                 "cache positions, as for attnviz score");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("generate", [&] {
    if (n < 0) throw UsageError("-n: expected a number >= 0, got " + std::to_string(n));
    if (topK < 0) throw UsageError("--top-k: expected a number >= 0, got " + std::to_string(topK));
    if (!(sampleTemperature >= 0.0f) || !std::isfinite(sampleTemperature)) {
      throw UsageError("--sample-temperature: expected a number >= 0");
    }
    if ((sinks >= 0) != (window >= 0))
      throw UsageError("--kv-sinks and --kv-window go together (StreamingLLM's cache)");
    if (sinks >= 0 && window < 1)
      throw UsageError("--kv-window: expected a number >= 1, got " + std::to_string(window));
    o.prepareOnly = true;
    o.pastContext = sinks >= 0;  // a prompt past the context runs through the cache
    o.startWithoutTarget = true;  // an encoder-decoder's decoder starts at its start id
    ModelRun run = runModelFromOptions(o, attention, app);
    const Model& m = *run.model;
    if (!m.config().causal) {
      throw UsageError("generate: " + m.config().family +
                       " is an encoder (no next token to generate); use attnviz fill");
    }
    Interventions iv = cliInterventions(m, run.ids, run.ablations, attention, run.ropeOff);
    run.addSiteAblations(iv);
    GenerateOptions opts;
    opts.maxNew = n;
    opts.sampleTemperature = sampleTemperature;
    opts.topK = topK;
    opts.seed = seed;
    opts.rows = LayerSet::none();  // the command prints tokens, never attention rows
    opts.cache = {sinks >= 0, std::max(0, sinks), std::max(0, window)};
    // An encoder-decoder: --text is the source, the decoder starts at its start id.
    if (m.config().encoderDecoder()) opts.source = run.ids;
    const std::vector<int>& prompt = m.config().encoderDecoder() ? run.targetIds : run.ids;
    const Tokenizer& tok = m.tokenizer();
    const std::optional<int> eos = tok.eos();
    const Generation g = generate(m, prompt, iv, opts, [&](const GeneratedToken& t) {
      if (!printIds && !((eos && t.id == *eos) || m.config().isEos(t.id))) {
        const std::string bytes = tok.contains(t.id) ? tok.pieceBytes(t.id) : "";
        std::fwrite(bytes.data(), 1, bytes.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    });
    if (printIds) {
      std::string line;
      for (int id : g.ids()) line += (line.empty() ? "" : " ") + std::to_string(id);
      std::printf("%s\n", line.c_str());
    } else {
      std::printf("\n");
    }
    if (verbose) {
      const double tps = g.seconds > 0 ? double(g.tokens.size()) / g.seconds : 0.0;
      std::fprintf(stderr, "attnviz: %zu tokens in %.3f s (%.1f tokens/s); stopped: %s%s\n",
                   g.tokens.size(), g.seconds, tps, g.stopReason(),
                   !fastActivations() ? ""
                   : fastActivationKernel(GgmlType::Q8_0)
                       ? "; fast activations (x rounded to 8 bits)"
                       : "; fast activations asked for, but this CPU level has no 8-bit kernels: "
                         "exact");
    }
    return 0;
  });
}

}  // namespace attnviz::app
