// Generation with a KV cache (generate.h).
#include "attnviz/model/generate.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace attnviz {

std::vector<int> Generation::ids() const {
  std::vector<int> out;
  for (const GeneratedToken& t : tokens) out.push_back(t.id);
  return out;
}

const char* Generation::stopReason() const {
  switch (stop) {
    case Stop::Eos:
      return "end of text (EOS)";
    case Stop::Context:
      return "the model's context is full";
    case Stop::Cancelled:
      return "stopped";
    default:
      return "the requested number of tokens";
  }
}

namespace {

std::vector<TokenProb> softmaxTop(const std::vector<float>& logits, int k) {
  const int V = int(logits.size());
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float z : logits) sum += std::exp(double(z) - mx);
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  k = std::min(k, V);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<TokenProb> out;
  for (int i = 0; i < k; ++i) {
    out.push_back({order[i], float(std::exp(double(logits[order[i]]) - mx) / sum)});
  }
  return out;
}

}  // namespace

int sampleToken(const std::vector<float>& logits, float temperature, int topK,
                std::uint64_t& rngState) {
  const int V = int(logits.size());
  if (!(temperature > 0.0f)) {
    return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  const int k = topK > 0 ? std::min(topK, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const double mx = logits[order[0]] / double(temperature);
  std::vector<double> p(k);
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += p[i] = std::exp(logits[order[i]] / double(temperature) - mx);
  std::mt19937_64 rng(rngState);
  const double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  rngState = rng();
  double acc = 0.0;
  for (int i = 0; i < k; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[k - 1];
}

Generation generate(const Model& model, const std::vector<int>& prompt, const Interventions& iv,
                    const GenerateOptions& opts,
                    const std::function<bool(const GeneratedToken&)>& onToken) {
  if (opts.maxNew < 0) throw UsageError("-n must be >= 0");
  if (opts.sampleTemperature < 0 || !std::isfinite(opts.sampleTemperature)) {
    throw UsageError("--sample-temperature must be a finite number >= 0");
  }
  Generation g;
  g.prompt = prompt;
  const ModelConfig& c = model.config();
  // Refused before the prompt runs: what cannot apply to a decode step.
  checkDecodeInterventions(iv);
  // The prompt's pass keeps K and V (the cache's) and the last logits row, nothing else: no Q.
  KvCache cache;
  std::vector<float> logits;
  std::optional<StreamingCache> streaming;
  if (opts.cache.streaming) {
    if (c.encoderDecoder())
      throw InputError(c.family + " is an encoder-decoder: a StreamingLLM cache is a decoder's");
    if (prompt.empty()) throw InputError("the prompt is empty");
    streaming.emplace(model, opts.cache);
    for (int id : prompt) logits = streaming->step(id, iv).logits;
  } else {
    const Capture cap = Capture::kvCache();
    if (c.encoderDecoder() != !opts.source.empty()) {
      throw InputError(c.encoderDecoder() ? c.family + " is an encoder-decoder: it needs a source"
                                          : "a source is for encoder-decoders");
    }
    const ForwardResult r = c.encoderDecoder() ? model.forwardSeq2Seq(opts.source, prompt, iv, cap)
                                               : model.forward(prompt, iv, cap);
    g.promptBytes = r.bytes();
    cache = model.cacheFrom(r);
    logits.assign(r.logits.row(r.logits.rows() - 1).data(),
                  r.logits.row(r.logits.rows() - 1).data() + r.logits.cols());
  }
  std::vector<Tensor3> rows;  // the attention rows of the token that produced `logits`
  std::uint64_t rng = opts.seed * 0x9E3779B97F4A7C15ull + 1;
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<int> tokEos = model.tokenizer().eos();
  for (int n = 0; n < opts.maxNew; ++n) {
    const bool full = streaming ? streaming->full() : cache.length() >= c.nPositions;
    if (full) {
      g.stop = Generation::Stop::Context;
      break;
    }
    GeneratedToken t;
    // An encoder-decoder never generates its pad token (as Hugging Face's generation bans it).
    if (c.encoderDecoder() && c.padId && *c.padId < int(logits.size()))
      logits[std::size_t(*c.padId)] = -std::numeric_limits<float>::infinity();
    t.id = sampleToken(logits, opts.sampleTemperature, opts.topK, rng);
    t.candidates = softmaxTop(logits, 10);
    {
      const double mx = *std::max_element(logits.begin(), logits.end());
      double sum = 0.0;
      for (float z : logits) sum += std::exp(double(z) - mx);
      t.prob = float(std::exp(double(logits[t.id]) - mx) / sum);
    }
    const bool isEos = opts.stopAtEos && ((tokEos && t.id == *tokEos) || c.isEos(t.id));
    if (!isEos) {
      DecodeStep step = streaming ? streaming->step(t.id, iv, opts.rows)
                                  : model.decodeStep(cache, t.id, iv, opts.rows);
      logits = std::move(step.logits);
      t.rows = std::move(step.rows);
      t.crossRows = std::move(step.crossRows);
    }
    g.tokens.push_back(std::move(t));
    if (onToken && !onToken(g.tokens.back())) {
      g.stop = Generation::Stop::Cancelled;
      break;
    }
    if (isEos) {
      g.stop = Generation::Stop::Eos;
      break;
    }
  }
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

}  // namespace attnviz
