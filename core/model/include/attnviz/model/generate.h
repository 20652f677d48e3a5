// attnviz model: generation with a KV cache. The prompt runs once (a full pass, whose K and V
// fill the cache); each new token is one decode step over the cache, never a re-run.
#pragma once

#include "attnviz/model/model.h"
#include "attnviz/model/score.h"  // KvPolicy

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attnviz {

struct GenerateOptions {
  int maxNew = 16;                // N: tokens to append (fewer at EOS or the context's end)
  float sampleTemperature = 0.0f; // 0 = greedy; else sample from softmax(logits / T)
  int topK = 0;                   // sampling: only the k most likely (0 = all)
  std::uint64_t seed = 0;         // the sampler's generator
  bool stopAtEos = true;          // at any end id: the tokenizer's EOS and every id the config
                                  // and generation_config.json (or GGUF) name
  // The layers whose attention rows each token keeps (GeneratedToken::rows; the others stay
  // empty). The Generate panel asks for the layer it shows; `attnviz generate` for none.
  LayerSet rows = LayerSet::every();
  // An encoder-decoder's source ids: the encoder runs on them once, and the prompt is the
  // decoder's prefix (its start id). Empty for other models.
  std::vector<int> source;
  // StreamingLLM's cache (decoders): the prompt and every new token run one step at a time over
  // the first S and the last W tokens, at cache positions (StreamingCache, score.h), so the text
  // can run past the context; each row is then over the cache's S + W + 1 slots, not the text.
  KvPolicy cache;
};

// One generated token: its id, the distribution it was drawn from (softmax of the logits at the
// sampling temperature, 1 for greedy, restricted to top-k) and per layer its attention row over
// the cache [H, 1, T_k].
struct GeneratedToken {
  int id = 0;
  float prob = 0.0f;                  // its probability under softmax(logits) (temperature 1)
  std::vector<TokenProb> candidates;  // the 10 most likely under softmax(logits)
  std::vector<Tensor3> rows;
  std::vector<Tensor3> crossRows;  // encoder-decoders: per layer the row over the source
};

struct Generation {
  std::vector<int> prompt;
  std::vector<GeneratedToken> tokens;
  enum class Stop { Count, Eos, Context, Cancelled } stop = Stop::Count;
  double seconds = 0.0;  // decode steps only (the prompt's pass excluded)
  // Bytes the prompt's pass kept (ForwardResult::bytes: every layer's residual stream, K and V,
  // the last logits row; no Q); 0 under a StreamingLLM cache, which steps the prompt.
  std::size_t promptBytes = 0;
  std::vector<int> ids() const;  // the generated ids
  const char* stopReason() const;
};

// Appends up to opts.maxNew tokens to `prompt` (which runs as given). `onToken` is called after
// each token (return false to stop: Stop::Cancelled). Interventions apply to the prompt's pass and
// every step. Throws InputError for bad ids or interventions.
Generation generate(const Model& model, const std::vector<int>& prompt, const Interventions& iv,
                    const GenerateOptions& opts,
                    const std::function<bool(const GeneratedToken&)>& onToken = {});

// The next token from one row of logits: greedy (the largest; the lowest id on ties) at
// temperature 0, else a draw from softmax(logits / T) over the top-k with `rng`.
int sampleToken(const std::vector<float>& logits, float temperature, int topK,
                std::uint64_t& rngState);

}  // namespace attnviz
