#include "cli/options.h"

#include "attnviz/engine/mask_expr.h"
#include "attnviz/formats/npy.h"

#include <cmath>
#include <future>
#include <cstdio>
#include <limits>
#include <new>

namespace attnviz::app {

void addAttentionOptions(CLI::App& app, AttentionCliOptions& o) {
  app.add_option("--mask", o.masks,
                 "causal | window:W | prefix:P | sink:S | pad:N | chunk:C | doc:0,0,1,1,... "
                 "(repeatable; combined as in docs/design/conventions.md)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--mask-expr", o.maskExpr,
                 "mask_mod expression over q k i h Tq Tk doc_q doc_k; nonzero = may attend "
                 "(e.g. 'k <= q && q - k < 128')");
  app.add_option("--softcap", o.softcap, "logit softcap c > 0: s -> c tanh(s / c) (Gemma 2)");
  app.add_option("--mask-file", o.maskFile,
                 ".npy [T_q,T_k] or [H,T_q,T_k]: bool/uint8 = may attend, float = additive bias");
  app.add_flag("--alibi", o.alibi, "add ALiBi biases");
  app.add_option("--temperature", o.temperature, "softmax temperature tau > 0");
  app.add_option("--backend", o.backend, "cpu | gpu | auto");
}

namespace {

// The mask terms the options give that need no input file: --mask values, the expression
// (it must compile), --softcap (a number > 0). Throws UsageError.
AttentionParams maskTermsFromOptions(const AttentionCliOptions& o) {
  AttentionParams p;
  for (const std::string& m : o.masks) parseMaskOption(m, p.mask);
  if (!o.maskExpr.empty()) {
    try {
      MaskExpr e(o.maskExpr);
    } catch (const UsageError& e) {
      throw UsageError("--mask-expr '" + o.maskExpr + "': " + e.what());
    }
    p.mask.expr = o.maskExpr;
  }
  if (!o.softcap.empty()) {
    std::size_t used = 0;
    double c = 0.0;
    try {
      c = std::stod(o.softcap, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != o.softcap.size() || !std::isfinite(c) || c <= 0.0 || c > 3.0e38) {
      throw UsageError("--softcap " + o.softcap + ": expected a finite number c > 0");
    }
    p.mask.softcap = static_cast<float>(c);
  }
  return p;
}

}  // namespace

void checkAttentionOptions(const AttentionCliOptions& o) {
  // Range-checked as a double before it becomes a float (beyond FLT_MAX that is undefined).
  const bool fits = o.temperature > 0.0 &&
                    o.temperature <= double(std::numeric_limits<float>::max()) &&
                    static_cast<float>(o.temperature) > 0.0f;
  if (!fits) {
    char got[64];
    std::snprintf(got, sizeof got, "%g", o.temperature);
    throw UsageError(std::string("--temperature: expected a finite number > 0, got ") + got);
  }
  maskTermsFromOptions(o);
  if (o.backend != "cpu" && o.backend != "gpu" && o.backend != "auto")
    throw UsageError("--backend: expected cpu, gpu or auto, got '" + o.backend + "'");
}

void addBlocksOption(CLI::App& app, std::string& blocks) {
  app.add_option("--blocks", blocks,
                 "block sparsity for tiles of B x B (or BrxBc): prints the empty / partial / full "
                 "tile counts and the work of a tiled kernel relative to dense");
}

std::vector<BlockSparsity> classifyEveryHead(const AttentionParams& p, int H, int Tq, int Tk,
                                             BlockSize size) {
  std::vector<BlockSparsity> out;
  for (int h = 0; h < H; ++h) out.push_back(classifyBlocks(p.mask, H, h, Tq, Tk, size));
  return out;
}

void printBlockCounts(const std::vector<BlockSparsity>& perHead) {
  bool same = true;
  for (const BlockSparsity& b : perHead) same = same && b.kinds == perHead.front().kinds;
  if (same && !perHead.empty()) {
    std::printf("%s%s\n", perHead.size() > 1 ? "every head: " : "",
                describeBlocks(perHead.front()).c_str());
    return;
  }
  for (std::size_t h = 0; h < perHead.size(); ++h)
    std::printf("head %zu: %s\n", h, describeBlocks(perHead[h]).c_str());
}

AttentionParams buildParams(const AttentionCliOptions& o, int H, int Tq, int Tk) {
  checkAttentionOptions(o);
  AttentionParams p = maskTermsFromOptions(o);
  p.mask.alibi = o.alibi;
  p.temperature = static_cast<float>(o.temperature);
  if (!o.maskFile.empty()) {
    MaskFile f = loadMaskNpy(o.maskFile);
    const Tensor3& c = f.values;
    if ((c.heads != 1 && c.heads != H) || c.rows != Tq || c.cols != Tk) {
      throw InputError(o.maskFile + ": mask has shape " + c.shapeString() + ", expected [" +
                       std::to_string(Tq) + ", " + std::to_string(Tk) + "] or [" +
                       std::to_string(H) + ", " + std::to_string(Tq) + ", " + std::to_string(Tk) +
                       "]");
    }
    p.mask.customKind = f.isBool ? MaskSpec::Custom::Allow : MaskSpec::Custom::Bias;
    p.mask.custom = std::move(f.values);
  }
  validateParams(p, H, Tq, Tk);
  return p;
}

QkvTensors loadQkvNpy(const std::string& q, const std::string& k, const std::string& v) {
  auto kf = std::async(std::launch::async, [&] { return loadTensorNpy(k); });
  auto vf = std::async(std::launch::async, [&] { return loadTensorNpy(v); });
  // Taken in order Q, K, V: the first bad file's error is the one that leaves, and a future
  // from std::async waits for its thread in its destructor, so none outlives this call.
  QkvTensors t;
  t.q = loadTensorNpy(q, &t.ndim);
  t.k = kf.get();
  t.v = vf.get();
  return t;
}

int parseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "attnviz %s: %s (see --help)\n", app.get_name().c_str(), e.what());
    return 2;
  }
  return -1;
}

int guarded(const char* command, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attnviz %s: %s\n", command, e.what());
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "attnviz %s: %s\n", command, e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "attnviz %s: out of memory for this input size\n", command);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnviz %s: %s\n", command, e.what());
    return 1;
  }
}

}  // namespace attnviz::app
