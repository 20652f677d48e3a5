#include "cli_common.h"

#include "attnviz/npy.h"

#include <cmath>
#include <limits>
#include <cstdio>
#include <new>

namespace attnviz::app {

void addAttentionOptions(CLI::App& app, AttentionCliOptions& o) {
  app.add_option(
         "--mask", o.masks,
         "causal | window:W | prefix:P | sink:S | pad:N (repeatable; combined as in DESIGN.md)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--mask-file", o.maskFile,
                 ".npy [T_q,T_k] or [H,T_q,T_k]: bool/uint8 = may attend, float = additive bias");
  app.add_flag("--alibi", o.alibi, "add ALiBi biases");
  app.add_option("--temperature", o.temperature, "softmax temperature tau > 0");
  app.add_option("--backend", o.backend, "cpu | gpu | auto");
}

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
  MaskSpec scratch;
  for (const std::string& m : o.masks) parseMaskOption(m, scratch);
  if (o.backend != "cpu" && o.backend != "gpu" && o.backend != "auto")
    throw UsageError("--backend: expected cpu, gpu or auto, got '" + o.backend + "'");
}

AttentionParams buildParams(const AttentionCliOptions& o, int H, int Tq, int Tk) {
  checkAttentionOptions(o);
  AttentionParams p;
  for (const std::string& m : o.masks) parseMaskOption(m, p.mask);
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
