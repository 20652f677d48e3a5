#include "attnviz/render/streamed_export.h"

#include "attnviz/engine/streaming.h"
#include "attnviz/engine/engine_detail.h"

#include <cstdlib>

namespace attnviz {

bool exportShouldStream(const Dims& d, const ExportOptions& opt, std::size_t budgetBytes) {
  if (opt.stage != ExportStage::Weights || opt.bare || opt.cell > 0) return false;
  const double bytes = 12.0 * double(d.H) * double(d.Tq) * double(d.Tk);
  return bytes > double(budgetBytes);
}

std::size_t exportStreamBudget() {
  if (const char* env = std::getenv("ATTNVIZ_EXPORT_STREAM_ABOVE_MB")) {
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return std::size_t(mb) << 20;
  }
  return std::size_t{512} << 20;
}

Image renderStreamedExport(const Tensor3& q, const Tensor3& k, const Tensor3& v,
                           const AttentionParams& p, ExportData labels, const ExportOptions& opt,
                           const std::function<void(int, double)>& progress) {
  const Dims d = detail::validateStreamInputs(q, k, &v);
  validateParams(p, d.H, d.Tq, d.Tk);
  labels.weights = nullptr;
  labels.logits = nullptr;
  labels.streamedDims = d;
  labels.streamedAnyMasked = false;
  for (int h = 0; h < d.H && !labels.streamedAnyMasked; ++h)
    if (opt.head < 0 || opt.head == h)
      labels.streamedAnyMasked = maskHidesAnyCell(p.mask, h, d.Tq, d.Tk);
  labels.pooled = [&](int head, int poolQ, int poolK) {
    StreamOptions so;
    if (progress) so.progress = [&](double f) { progress(head, f); };
    return streamPooledWeights(q, k, head, p, poolQ, poolK, so, /*withMean=*/false);
  };
  return renderExport(labels, opt);
}

}  // namespace attnviz
