// attnviz session: the range checks of the request strings (request.h).
#include "attnviz/session/request.h"

#include "attnviz/session/seq2seq_source.h"  // seq2seqSiteName

namespace attnviz {

namespace {

[[noreturn]] void outOfRange(const std::string& what, const std::string& sizes) {
  throw UsageError(what + ": out of range, " + sizes);
}

std::string count(int n, const char* unit) { return std::to_string(n) + " " + unit; }

}  // namespace

void checkLayerInRange(int layer, const ModelConfig& c, const std::string& what) {
  if (layer < 0 || layer >= c.nLayer)
    outOfRange(what + " " + std::to_string(layer),
               "the model has " + count(c.nLayer, "layers") + " (0.." +
                   std::to_string(c.nLayer - 1) + ")");
}

void checkHeadInRange(int head, const ModelConfig& c, const std::string& what) {
  if (head < 0 || head >= c.nHead)
    outOfRange(what + " " + std::to_string(head),
               "the model has " + count(c.nHead, "heads") + " (0.." +
                   std::to_string(c.nHead - 1) + ")");
}

void checkSiteAblation(const SiteHead& a, const ModelConfig& c, const std::string& what) {
  const std::string named = what + " " + siteAblationText(a);
  const bool otherSite = a.site.stack != 0 || a.site.site != 0;
  if (otherSite && !c.encoderDecoder())
    throw UsageError(named + ": " + c.family + " has one attention site per layer (use L:H)");
  if (c.hasSite(a.site) && a.head >= 0 && a.head < c.nHead) return;
  const std::string who = !c.encoderDecoder() ? "the model" : a.site.stack == 1 ? "the encoder"
                                                                                : "the decoder";
  outOfRange(named, who + " has " + count(c.layersOf(a.site.stack), "layers") + " and " +
                        count(c.nHead, "heads"));
}

void checkSiteInRange(const SiteId& s, const ModelConfig& c, const std::string& what) {
  const std::string named = what + " " + seq2seqSiteName(s);
  if (!c.encoderDecoder())
    throw UsageError(named + ": " + c.family + " is not an encoder-decoder (no sites to choose)");
  if (!c.hasSite(s))
    outOfRange(named, "the encoder has " + count(c.nEncoderLayer, "layers") + " and the decoder " +
                          std::to_string(c.nLayer));
}

void checkHasCrossSites(const ModelConfig& c, const std::string& what) {
  if (!c.encoderDecoder())
    throw UsageError(what + ": " + c.family + " is not an encoder-decoder (no cross sites)");
}

void checkRopeOffLayer(int layer, const ModelConfig& c, const std::string& what) {
  const std::string named = what + " " + std::to_string(layer);
  if (layer < 0 || layer >= c.nLayer) outOfRange(named, "the model has " + count(c.nLayer, "layers"));
  if (c.positions != PositionKind::Rope)
    throw UsageError(named + ": the model has no RoPE (its positions are learned)");
}

void checkResidualEdit(const ResidualEditRequest& e, const ModelConfig& c,
                       const std::string& what) {
  if (e.layer >= c.nLayer || e.edit.dim >= c.nEmbd) {
    const std::string p = e.edit.position < 0 ? "all" : std::to_string(e.edit.position);
    outOfRange(what + " " + std::to_string(e.layer) + ":" + p + ":" + std::to_string(e.edit.dim) +
                   ":" + (e.edit.toMean ? "mean" : "zero"),
               "the model has " + count(c.nLayer, "layers") + " of width " +
                   std::to_string(c.nEmbd));
  }
}

}  // namespace attnviz
