// attnviz attribute: which heads matter for one prediction (attnviz/model/attribution.h). An
// ablation sweep (each head zeroed or mean-ablated in turn) or activation patching from a clean
// text into the corrupted --text; writes the [L, H] matrix (--out), its figure (--png) and prints
// the five heads with the largest |value|.
#include "cli/attribution_report.h"
#include "cli/cli.h"
#include "cli/model_options.h"
#include "cli/progress.h"

#include "attnviz/engine/text_parse.h"
#include "attnviz/formats/npy.h"
#include "attnviz/model/attribution.h"
#include "attnviz/model/tokenizers/chat_template.h"
#include "attnviz/render/attribution_figure.h"
#include "attnviz/render/vector_figure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace attnviz::app {

namespace {

// "--target-id 7" -> 7; anything but a non-negative integer is bad usage.
int parseId(const std::string& option, const std::string& text) {
  const std::optional<int> v = parseIndex(text, 100'000'000);
  if (!v) throw UsageError(option + ": expected a non-negative integer, got '" + text + "'");
  return *v;
}

void checkVocabId(const std::string& option, int id, int vocab) {
  if (id >= vocab) {
    throw UsageError(option + " " + std::to_string(id) + ": outside the vocab (0.." +
                     std::to_string(vocab - 1) + ")");
  }
}

// The five (layer, head) cells with the largest |value|, largest first (ties: lower layer, head).
// An encoder-decoder's rows are sites: the first column names the site ("L0 cross").
void printTop(const ModelConfig& c, const AttributionMatrix& a, const char* valueName) {
  std::vector<int> order(std::size_t(a.rows) * a.cols);
  std::iota(order.begin(), order.end(), 0);
  const auto mag = [&](int i) {
    const float v = a.values[std::size_t(i)];
    return std::isfinite(v) ? std::fabs(v) : -1.0f;
  };
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return mag(x) > mag(y); });
  const bool sites = c.encoderDecoder() && int(a.sites.size()) == a.rows;
  std::printf("%s\thead\t%s\n", sites ? "site" : "layer", valueName);
  for (std::size_t k = 0; k < std::min<std::size_t>(5, order.size()); ++k) {
    const int i = order[k];
    const std::string row = sites ? c.siteName(a.sites[std::size_t(i / a.cols)])
                                  : std::to_string(i / a.cols);
    std::printf("%s\t%d\t%.6f\n", row.c_str(), i % a.cols, double(a.values[std::size_t(i)]));
  }
}

}  // namespace

int runAttribute(int argc, char** argv) {
  CLI::App app{"Which heads matter for one prediction: ablate each head in turn, or patch each "
               "head from a clean text into a corrupted one",
               "attribute"};
  ModelCliOptions o;
  AttentionCliOptions attention;  // no attention options here: the model's own pass
  std::string position, targetId, foilId, sweep, patchFrom, out, png, svg, pdf;
  addModelOptions(app, o, true);
  addTargetOptions(app, o);
  app.add_option("--position", position, "the position P whose prediction is read (default: the last)");
  app.add_option("--target-id", targetId,
                 "the token whose probability or logit is read (default: the clean run's most "
                 "likely next token at P)");
  auto* sweepOpt = app.add_option("--ablate-sweep", sweep,
                                  "zero|mean: ablate each head in turn and write delta[l, h] = "
                                  "log p_ablated(target) - log p(target)");
  auto* patchOpt = app.add_option("--patch-from", patchFrom,
                                  "CLEAN_TEXT: --text is the corrupted run (same token count); "
                                  "write the fraction of logit(target) - logit(foil) that patching "
                                  "each head's output from the clean run restores");
  sweepOpt->excludes(patchOpt);
  app.add_option("--foil-id", foilId,
                 "with --patch-from: the foil (default: the corrupted run's most likely token, "
                 "or its second most likely when that is the target)");
  app.add_option("--out", out, "write the [L, H] values (float32 .npy)");
  app.add_option("--png", png, "write the labelled layers x heads figure");
  app.add_option("--svg", svg, "the same figure as SVG (cells as rects, labels as text)");
  app.add_option("--pdf", pdf, "the same figure as PDF (labels as text in the PNG's font)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("attribute", [&] {
    const bool patch = app.count("--patch-from") > 0;
    if (!patch && !app.count("--ablate-sweep")) {
      throw UsageError("give --ablate-sweep zero|mean or --patch-from CLEAN_TEXT");
    }
    AblationKind kind = AblationKind::Zero;
    if (!patch) {
      if (sweep == "mean") {
        kind = AblationKind::Mean;
      } else if (sweep != "zero") {
        throw UsageError("--ablate-sweep: expected zero or mean, got '" + sweep + "'");
      }
    }
    if (app.count("--foil-id") && !patch) throw UsageError("--foil-id needs --patch-from");
    if ((!png.empty() && (png == svg || png == pdf)) || (!svg.empty() && svg == pdf))
      throw UsageError("--png, --svg and --pdf name the same file; give each its own");
    if (!o.ablate.empty()) {
      throw UsageError("--ablate: attribute ablates every head in turn; it takes no --ablate");
    }
    AttributionTarget at;
    if (app.count("--position")) at.position = parseId("--position", position);
    if (app.count("--target-id")) at.target = parseId("--target-id", targetId);
    if (app.count("--foil-id")) at.foil = parseId("--foil-id", foilId);

    o.prepareOnly = true;
    ModelRun run = runModelFromOptions(o, attention, app);
    const Model& m = *run.model;
    const ModelConfig& c = m.config();
    if (!c.causal) {
      throw UsageError("attribute: " + c.family +
                       " is an encoder (attribution reads next-token predictions)");
    }
    m.checkIds(run.ids);
    // An encoder-decoder's prediction is the decoder's: positions count its (target) tokens.
    const int T = static_cast<int>(c.encoderDecoder() ? run.targetIds.size() : run.ids.size());
    if (patch && c.encoderDecoder()) {
      throw UsageError("--patch-from: patching an encoder-decoder is not supported yet; use "
                       "--ablate-sweep");
    }
    if (at.target >= 0) checkVocabId("--target-id", at.target, c.vocabSize);
    if (at.foil >= 0) checkVocabId("--foil-id", at.foil, c.vocabSize);
    if (at.position >= T) {
      throw UsageError("--position " + std::to_string(at.position) + ": outside the " +
                       std::to_string(T) + " tokens (0.." + std::to_string(T - 1) + ")");
    }

    AttributionReport report;
    {
      ProgressBar bar("attnviz attribute");
      AttributionControl control;
      control.progress = [&](double f) { bar.update("heads", f); };
      if (!patch) {
        const ForwardResult clean =
            c.encoderDecoder()
                ? m.forwardSeq2Seq(run.ids, run.targetIds, {}, Capture::attribution())
                : m.forward(run.ids, {}, Capture::attribution());
        report = reportOf(ablationSweep(m, clean, kind, at, control));
      } else {
        // --chat wraps the clean text as it wraps --text (the same turns, the same template).
        std::vector<int> cleanIds;
        if (o.chat) {
          ChatTurns turns;
          if (app.count("--system")) turns.system = o.system;
          turns.user = patchFrom;
          cleanIds = encodeModelChat(m, turns);
        } else {
          cleanIds = m.encode(patchFrom);
        }
        const ForwardResult corrupt = m.forward(run.ids, {}, Capture::attribution());
        if (cleanIds.size() != run.ids.size()) {
          throw InputError("--patch-from is " + std::to_string(cleanIds.size()) +
                           " tokens and --" + (app.count("--text") ? "text" : "ids") + " is " +
                           std::to_string(run.ids.size()) +
                           "; patching needs the same number of tokens");
        }
        const ForwardResult clean = m.forward(cleanIds, {}, Capture::attribution());
        report = reportOf(patchHeads(m, clean, corrupt, at, control));
      }
    }

    const AttributionMatrix& values = report.values;
    // [L, H]; an encoder-decoder's rows are its sites in pass order (the encoder's layers, then
    // each decoder layer's self and cross sites).
    if (!out.empty()) saveNpy(out, {values.rows, values.cols}, values.values.data());
    if (!png.empty() || !svg.empty() || !pdf.empty()) {
      AttributionFigure fig = attributionFigure(m, report);
      fig.vector = !svg.empty() || !pdf.empty();
      const Image img = renderAttributionFigure(fig);
      if (!png.empty()) writePng(png, img);
      if (!svg.empty()) writeSvg(svg, img);
      if (!pdf.empty()) writePdf(pdf, img);
    }
    std::printf("%s\n",
                attributionHeader(m, c.encoderDecoder() ? run.targetIds : run.ids, report).c_str());
    printTop(c, values, patch ? "fraction" : "delta");
    return 0;
  });
}

}  // namespace attnviz::app
