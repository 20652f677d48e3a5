// attnviz: the attribution's figure and header, shared by `attnviz attribute` and the GUI.
#include "cli/attribution_report.h"

#include <cstdio>

namespace attnviz::app {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string attributionPiece(const Model& m, int id) {
  const Tokenizer& tok = m.tokenizer();
  return tok.contains(id) ? tok.printable(id) : "#" + std::to_string(id);
}

AttributionReport reportOf(const AblationSweep& s) {
  AttributionReport r;
  r.kind = s.kind;
  r.values = s.delta;
  r.position = s.position, r.target = s.target;
  r.logProb = s.logProb;
  return r;
}

AttributionReport reportOf(const PatchingResult& p) {
  AttributionReport r;
  r.patch = true;
  r.values = p.fraction;
  r.position = p.setup.position, r.target = p.setup.target, r.foil = p.setup.foil;
  r.mClean = p.setup.mClean, r.mCorrupt = p.setup.mCorrupt;
  return r;
}

AttributionFigure attributionFigure(const Model& m, const AttributionReport& r) {
  AttributionFigure fig;
  fig.rows = r.values.rows, fig.cols = r.values.cols;
  fig.values = r.values.values;
  // Rows are attention sites: an encoder-decoder's are named ("enc L0", "L0 self", "L0 cross").
  const ModelConfig& c = m.config();
  if (c.encoderDecoder() && int(r.values.sites.size()) == r.values.rows) {
    fig.rowTitle = "site";
    for (const SiteId& s : r.values.sites) fig.rowLabels.push_back(c.siteName(s));
  }
  const std::string target = std::to_string(r.target) + " '" + attributionPiece(m, r.target) + "'";
  if (!r.patch) {
    fig.title = std::string("\xCE\x94 log p(target) with each head ") +
                (r.kind == AblationKind::Zero ? "zero-ablated" : "mean-ablated");
    fig.valueTitle = "\xCE\x94 log p";
    fig.captions.push_back("position " + std::to_string(r.position) + ", target " + target +
                           ", clean log p = " + fmt("%.4f", r.logProb));
  } else {
    fig.title = "Logit difference restored by patching each head from the clean run";
    fig.valueTitle = "fraction";
    fig.captions.push_back("(m_patched - m_corrupt) / (m_clean - m_corrupt), m = logit(" + target +
                           ") - logit(" + std::to_string(r.foil) + " '" +
                           attributionPiece(m, r.foil) + "') at position " +
                           std::to_string(r.position));
    fig.captions.push_back("m_clean = " + fmt("%.4f", r.mClean) +
                           ", m_corrupt = " + fmt("%.4f", r.mCorrupt));
  }
  return fig;
}

std::string attributionHeader(const Model& m, const std::vector<int>& ids,
                              const AttributionReport& r) {
  const ModelConfig& c = m.config();
  const std::string heads =
      c.encoderDecoder()
          ? std::to_string(c.sites().size()) + " sites x " + std::to_string(c.nHead) + " heads"
          : std::to_string(c.nLayer) + " x " + std::to_string(c.nHead) + " heads";
  if (!r.patch)
    return std::string("attribute: ") + ablationKindName(r.kind) + "-ablation sweep of " + heads +
           " at position " + std::to_string(r.position) + " ('" +
           attributionPiece(m, ids[std::size_t(r.position)]) + "'), target " +
           std::to_string(r.target) + " ('" + attributionPiece(m, r.target) +
           "'): log p = " + fmt("%.6f", r.logProb);
  return "attribute: patching " + heads + " at position " + std::to_string(r.position) +
         ", target " + std::to_string(r.target) + " ('" + attributionPiece(m, r.target) +
         "') vs foil " + std::to_string(r.foil) + " ('" + attributionPiece(m, r.foil) +
         "'): m_clean = " + fmt("%.6f", r.mClean) + ", m_corrupt = " + fmt("%.6f", r.mCorrupt);
}

}  // namespace attnviz::app
