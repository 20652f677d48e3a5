// attnviz model: run a model checkpoint on a text and write or print what it computed.
#include "cli/cli.h"
#include "cli/model_options.h"

#include "attnviz/engine/mask.h"
#include "attnviz/formats/npy.h"

#include <chrono>
#include <cstdio>

namespace attnviz::app {

int runModel(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pixels" || a == "--image" || a.rfind("--pixels=", 0) == 0 ||
        a.rfind("--image=", 0) == 0 ||
        (a == "--model" && i + 1 < argc && isVisionModelArg(argv[i + 1])))
      return runVisionModel(argc, argv);
  }
  CLI::App app{"Run a model on a text: a Hugging Face folder (GPT-2, Llama, Mistral, Qwen2, Qwen3, "
               "Gemma 2, Gemma 3, Phi-3, OLMo 2, BERT, RoBERTa, DistilBERT, ModernBERT, T5, "
               "BART, Marian) or a .gguf file", "model"};
  ModelCliOptions o;
  AttentionCliOptions attention;
  int layer = -1, topK = 0;
  std::string weights, logits, hidden, decoderWeights, crossWeights, residual, positionBias,
      decoderPositionBias;
  addModelOptions(app, o, true);
  addTextPairOption(app, o);
  addTargetOptions(app, o);
  addMaskSourceOption(app, o);
  addAttentionOptions(app, attention);
  addRopeOffOption(app, o);
  addResidualEditOption(app, o);
  app.add_option("--layer", layer, "only this layer's weights: [H, T, T] instead of [L, H, T, T]");
  app.add_option("--weights", weights, "write the attention weights (float32 .npy)");
  app.add_option("--logits", logits,
                 "write the logits [T, V] (float32 .npy; encoders: the masked-LM head's)");
  app.add_option("--hidden", hidden, "write the last hidden states [T, d] (float32 .npy)");
  app.add_option("--residual", residual,
                 "write the residual stream [L + 1, T, d]: after the embeddings and after each "
                 "layer, before the final norm (float32 .npy; encoder-decoders: the decoder's)");
  app.add_option("--decoder-weights", decoderWeights,
                 "encoder-decoders: the decoder's self-attention [L_dec, H, T_tgt, T_tgt] "
                 "(--weights: the encoder's [L_enc, H, T_src, T_src])");
  app.add_option("--cross-weights", crossWeights,
                 "encoder-decoders: the cross-attention [L_dec, H, T_tgt, T_src] (rows: target "
                 "positions, columns: source positions)");
  app.add_option("--position-bias", positionBias,
                 "T5: the relative position bias added to the encoder's self-attention scores "
                 "[H, T_src, T_src] (float32 .npy; the same for every layer of the stack)");
  app.add_option("--decoder-position-bias", decoderPositionBias,
                 "T5: the decoder's (causal buckets) [H, T_tgt, T_tgt]");
  app.add_option("--top-k", topK, "print the N most likely next tokens: id, probability, piece");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("model", [&] {
    if (app.count("--top-k") && topK < 1)
      throw UsageError("--top-k: expected a number >= 1, got " + std::to_string(topK));
    const auto t0 = std::chrono::steady_clock::now();
    // The pass keeps only what is written: the weights asked for (one layer's or every
    // layer's), all logits rows for --logits, else the last one (--top-k).
    o.capture = Capture::view(0);
    if (!weights.empty() || !decoderWeights.empty() || !crossWeights.empty())
      o.capture.weights = layer >= 0 ? LayerSet::just(layer) : LayerSet::every();
    o.capture.allLogits = !logits.empty();
    ModelRun run = runModelFromOptions(o, attention, app);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const Model& m = *run.model;
    const ModelConfig& c = m.config();
    const ForwardResult& r = run.result;
    if (app.count("--layer")) checkLayer(layer, c);
    const long long T = static_cast<long long>(r.ids.size());
    if (!c.causal && topK > 0) {
      throw UsageError("--top-k: " + c.family + " is an encoder (no next token); use attnviz fill");
    }
    if (!logits.empty()) requireMlmHead(m, "--logits cannot be written");

    if ((!decoderWeights.empty() || !crossWeights.empty()) && !c.encoderDecoder()) {
      throw UsageError("--decoder-weights/--cross-weights: " + c.family +
                       " is not an encoder-decoder (use --weights)");
    }
    if (!positionBias.empty() || !decoderPositionBias.empty()) {
      const char* opt = !positionBias.empty() ? "--position-bias" : "--decoder-position-bias";
      if (c.positions != PositionKind::Relative || !c.encoderDecoder())
        throw UsageError(std::string(opt) + ": " + c.family +
                         " has no relative position bias (T5's encoder-decoders have)");
      if (!positionBias.empty()) {
        const int S = int(r.encoder->ids.size());
        saveNpy(positionBias, m.positionBias(1, S, S));
      }
      if (!decoderPositionBias.empty()) saveNpy(decoderPositionBias, m.positionBias(0, int(T), int(T)));
    }
    if (c.encoderDecoder()) {
      if (app.count("--layer")) throw UsageError("--layer: not for encoder-decoders (yet)");
      // Every layer's weights of one site of a stack: [L, H, T_q, T_k].
      auto write = [&](const std::string& path, const LayerList& layers, int site) {
        std::vector<float> all;
        std::vector<long long> shape{static_cast<long long>(layers.size()), c.nHead, 0, 0};
        for (const LayerActivations& a : layers) {
          const Tensor3& w = a.site(site).weights;
          shape[2] = w.rows, shape[3] = w.cols;
          all.insert(all.end(), w.data.begin(), w.data.end());
        }
        saveNpy(path, shape, all.data());
      };
      if (!weights.empty()) write(weights, r.stackLayers(1), 0);
      if (!decoderWeights.empty()) write(decoderWeights, r.layers, 0);
      if (!crossWeights.empty()) write(crossWeights, r.layers, 1);
    } else if (!weights.empty()) {
      if (layer >= 0) {
        saveNpy(weights, r.layers[layer].site().weights);
      } else {
        // Each layer's buffer written in turn: no gathered copy of every layer's weights.
        std::vector<std::span<const float>> parts;
        for (const LayerActivations& a : r.layers)
          parts.emplace_back(a.site().weights.data.data(), a.site().weights.data.size());
        saveNpy(weights, {c.nLayer, c.nHead, T, T}, parts);
      }
    }
    if (!logits.empty()) saveNpy(logits, {T, c.vocabSize}, r.logits.data());
    if (!hidden.empty()) {
      const MatrixRM h = m.lastHidden(r.residualOut);
      saveNpy(hidden, {T, c.nEmbd}, h.data());
    }
    if (!residual.empty()) {  // every pass keeps each layer's incoming stream
      std::vector<float> all;
      all.reserve(std::size_t(c.nLayer + 1) * std::size_t(T) * std::size_t(c.nEmbd));
      auto add = [&](const MatrixRM& x) { all.insert(all.end(), x.data(), x.data() + x.size()); };
      for (const LayerActivations& a : r.layers) add(a.residualIn);
      add(r.residualOut);
      saveNpy(residual, {c.nLayer + 1, T, c.nEmbd}, all.data());
    }

    const bool quiet = !weights.empty() || !logits.empty() || !hidden.empty() || topK > 0 ||
                       !decoderWeights.empty() || !crossWeights.empty() || !residual.empty() ||
                       !positionBias.empty() || !decoderPositionBias.empty();
    if (!quiet) {
      std::printf("model: %s (%d layers x %d heads, d=%d, vocab %d, %s)\n", m.files().dir.c_str(),
                  c.nLayer, c.nHead, c.nEmbd, c.vocabSize, m.weightsDescription().c_str());
      std::printf("%s\n", c.describe().c_str());
      if (!c.note.empty()) std::printf("note: %s\n", c.note.c_str());
      std::printf("tokens: %lld  forward pass: %.1f ms (load included)\n", T, ms);
      if (!c.causal) return 0;  // an encoder: no next token
      std::printf("next token after '%s':\n", m.tokenizer().printable(r.ids.back()).c_str());
    }
    for (const TokenProb& t : Model::topK(r, quiet ? topK : 5)) {
      const std::string piece = m.tokenizer().printable(t.id);
      std::printf("%d\t%.6f\t%s\n", t.id, double(t.prob), piece.c_str());
    }
    endWithoutTeardown(run);
    return 0;
  });
}

}  // namespace attnviz::app
