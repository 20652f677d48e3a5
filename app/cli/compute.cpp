// attnviz compute: attention on per-head Q, K, V from .npy files.
#include "cli/backend.h"
#include "cli/cli.h"
#include "cli/options.h"

#include "attnviz/formats/npy.h"
#include "attnviz/session/session.h"
#include "attnviz/engine/streaming.h"

#include <chrono>
#include <cstdio>
#include <memory>

namespace attnviz::app {

namespace {

void printSummary(const AttentionResult& r, const std::string& backend, double ms) {
  const Dims& d = r.dims;
  std::printf("backend: %s\n", backend.c_str());
  std::printf("Q [%d, %d, %d] . K^T -> S [%d, %d, %d]; A . V -> O [%d, %d, %d]  (%.3f ms)\n", d.H,
              d.Tq, d.dk, d.H, d.Tq, d.Tk, d.H, d.Tq, d.dv, ms);
  const int rows = std::min(d.Tq, 4), cols = std::min(d.Tk, 8);
  std::printf("head 0, first %d rows of A (query rows, key columns):\n", rows);
  for (int i = 0; i < rows; ++i) {
    std::printf("  row %d:", i);
    for (int j = 0; j < cols; ++j) std::printf(" %.4f", r.weights.at(0, i, j));
    if (cols < d.Tk) std::printf(" ...");
    const RowStats& st = r.row(0, i);
    std::printf("  | sum %.6f%s\n", st.sum, st.fullyMasked ? " (fully masked)" : "");
  }
}

}  // namespace

int runCompute(int argc, char** argv) {
  CLI::App app{"Multi-head attention on Q, K, V from .npy files", "compute"};
  std::string q, k, v, scores, weights, out, blocks;
  AttentionCliOptions opts;
  app.add_option("--q", q, "queries [T_q, d_k] or [H, T_q, d_k]")->required();
  app.add_option("--k", k, "keys [T_k, d_k] or [H, T_k, d_k]")->required();
  app.add_option("--v", v, "values [T_k, d_v] or [H, T_k, d_v]")->required();
  addAttentionOptions(app, opts);
  app.add_option("--scores", scores, "write the logits L (-inf where masked)");
  app.add_option("--weights", weights, "write the weights A");
  app.add_option("--out", out, "write the output O");
  addBlocksOption(app, blocks);
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("compute", [&] {
    // Bad usage is refused before any file is read.
    checkAttentionOptions(opts);
    const BlockSize blockSize = blocks.empty() ? BlockSize{} : parseBlockSize(blocks);
    QkvTensors in = loadQkvNpy(q, k, v);
    const int ndim = in.ndim;
    Tensor3 Q = std::move(in.q), K = std::move(in.k), V = std::move(in.v);
    const auto noteMasked = [](int n) {
      if (n > 0)
        std::fprintf(
            stderr,
            "attnviz compute: note: %d fully masked row(s): their weights and outputs are 0\n", n);
    };
    // Only the output asked for, on the CPU: stream it (FlashAttention's online softmax, tile
    // by tile), never allocating S or A.
    const bool onlyOutput = !out.empty() && scores.empty() && weights.empty();
    std::string note;
    std::unique_ptr<AttentionEngine> engine;
    if (!onlyOutput) validateInputs(Q, K, V);  // bad input before any backend starts
    if (!onlyOutput || opts.backend != "cpu") {
      engine = createHeadlessEngine(opts.backend, note);
      if (!note.empty()) std::fprintf(stderr, "attnviz compute: %s\n", note.c_str());
    }
    if (onlyOutput && (!engine || engine->name().rfind("CPU", 0) == 0)) {
      const AttentionParams params = buildParams(opts, Q.heads, Q.rows, K.rows);
      int masked = 0;
      const Tensor3 O = streamOutput(Q, K, V, params, {}, &masked);
      noteMasked(masked);
      saveNpy(out, O, ndim == 2 && O.heads == 1);  // 2-D inputs give 2-D outputs
      return 0;
    }
    const Dims d = validateInputs(Q, K, V);
    AttentionParams params = buildParams(opts, d.H, d.Tq, d.Tk);
    Session session(std::move(engine));
    session.editScene().params = std::move(params);
    session.setTensors(std::move(Q), std::move(K), std::move(V));
    const auto t0 = std::chrono::steady_clock::now();
    session.computeAllHeads();
    const AttentionResult& r = session.result();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    noteMasked(r.fullyMaskedRows());
    // 2-D inputs give 2-D outputs; 3-D inputs keep the head axis.
    const bool as2d = ndim == 2 && d.H == 1;
    if (!scores.empty()) saveNpy(scores, session.logits(), as2d);
    if (!weights.empty()) saveNpy(weights, r.weights, as2d);
    if (!out.empty()) saveNpy(out, r.output, as2d);
    if (scores.empty() && weights.empty() && out.empty())
      printSummary(r, session.engine().name(), ms);
    if (!blocks.empty())
      printBlockCounts(classifyEveryHead(session.params(), d.H, d.Tq, d.Tk, blockSize));
    return 0;
  });
}

}  // namespace attnviz::app
