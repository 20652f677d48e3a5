// Interventions (what the pass changes, layer by layer) and the attention parameters of a layer:
// the family's own mask AND the intervention's.
#include "model_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnviz {

namespace {

// The model's own mask (causal or not, window W) ANDed into the intervention's custom matrix.
void andModelMask(MaskSpec& m, const ModelConfig& c, int layer, int Tq, int Tk, int W,
                  bool causal) {
  (void)c, (void)layer;
  const int H = m.customKind == MaskSpec::Custom::None ? 1 : m.custom.heads;
  if (m.customKind == MaskSpec::Custom::None) {
    m.customKind = MaskSpec::Custom::Allow;
    m.custom = Tensor3(1, Tq, Tk, 1.0f);
  }
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < Tq; ++i) {
      const int pi = queryPosition(i, Tq, Tk);
      for (int j = 0; j < Tk; ++j) {
        const bool allowed = causal ? j <= pi && (W == 0 || j > pi - W)
                                    : W == 0 || std::abs(pi - j) <= W / 2;
        if (allowed) continue;
        m.custom.at(h, i, j) = m.customKind == MaskSpec::Custom::Allow
                                   ? 0.0f
                                   : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

}  // namespace

LayerIntervention& Interventions::layer(int l, int nLayer) {
  if (l < 0 || l >= nLayer) {
    throw InputError("layer " + std::to_string(l) + " is outside the model (layers 0.." +
                     std::to_string(nLayer - 1) + ")");
  }
  if (static_cast<int>(layers.size()) < nLayer) layers.resize(nLayer);
  return layers[l];
}

const LayerIntervention* Interventions::find(int l) const {
  return l >= 0 && l < static_cast<int>(layers.size()) ? &layers[l] : nullptr;
}

LayerIntervention& Interventions::at(const SiteId& s, const ModelConfig& c) {
  if (!c.hasSite(s)) {
    throw InputError("site " + c.siteName(s) + " (stack " + std::to_string(s.stack) +
                     ", layer " + std::to_string(s.layer) + ", site " + std::to_string(s.site) +
                     ") is outside the model");
  }
  if (s.stack == 0 && s.site == 0) return layer(s.layer, c.nLayer);
  for (auto& [id, li] : others)
    if (id == s) return li;
  others.emplace_back(s, LayerIntervention{});
  return others.back().second;
}

const LayerIntervention* Interventions::find(const SiteId& s) const {
  if (s.stack == 0 && s.site == 0) return find(s.layer);
  for (const auto& [id, li] : others)
    if (id == s) return &li;
  return nullptr;
}

std::vector<std::pair<SiteId, const LayerIntervention*>> Interventions::entries() const {
  std::vector<std::pair<SiteId, const LayerIntervention*>> out;
  for (std::size_t l = 0; l < layers.size(); ++l)
    out.push_back({SiteId{0, static_cast<int>(l), 0}, &layers[l]});
  for (const auto& [id, li] : others) out.push_back({id, &li});
  return out;
}

void Interventions::ablate(int l, int h, const ModelConfig& c) {
  if (l < 0 || l >= c.nLayer || h < 0 || h >= c.nHead) {
    throw InputError("--ablate " + std::to_string(l) + ":" + std::to_string(h) +
                     " is outside the model (layers 0.." + std::to_string(c.nLayer - 1) +
                     ", heads 0.." + std::to_string(c.nHead - 1) + ")");
  }
  auto& heads = layer(l, c.nLayer).ablatedHeads;
  if (std::find(heads.begin(), heads.end(), h) == heads.end()) heads.push_back(h);
}

void Interventions::setAll(const MaskSpec& mask, float temperature, int nLayer) {
  for (int l = 0; l < nLayer; ++l) {
    layer(l, nLayer).mask = mask;
    layers[l].temperature = temperature;
  }
}

AttentionParams layerAttentionParams(const ModelConfig& c, const Interventions& iv, int layer,
                                     int T) {
  return layerAttentionParams(c, iv, layer, T, T);
}

AttentionParams layerAttentionParams(const ModelConfig& c, const Interventions& iv, int layer,
                                     int Tq, int Tk) {
  return siteAttentionParams(c, iv, SiteId{0, layer, 0}, Tq, Tk);
}

AttentionParams siteAttentionParams(const ModelConfig& c, const Interventions& iv,
                                    const SiteId& site, int Tq, int Tk) {
  AttentionParams p;
  const int layer = site.layer;
  const LayerIntervention* li = iv.find(site);
  if (li) {
    p.mask = li->mask;
    p.temperature = li->temperature;
  }
  const int W = site.stack == 0 ? c.windowOf(layer) : 0;
  MaskSpec& m = p.mask;
  if (m.customKind != MaskSpec::Custom::None && (m.custom.rows != Tq || m.custom.cols != Tk)) {
    throw InputError("the painted mask of " + c.siteName(site) + " is " +
                     std::to_string(m.custom.rows) + " x " + std::to_string(m.custom.cols) +
                     "; this pass needs " + std::to_string(Tq) + " x " + std::to_string(Tk));
  }
  // The family's softcap, unless the intervention sets its own.
  if (m.softcap == 0.0f) m.softcap = c.attnSoftcap;
  const std::vector<SiteKind> kinds = c.sitesOf(site.layer, site.stack);
  const bool cross = site.site >= 0 && site.site < static_cast<int>(kinds.size()) &&
                     kinds[site.site] == SiteKind::Cross;
  if (cross) return p;  // a query reads every encoder position: no mask of the model's own
  if (!c.causal || site.stack == 1) {
    // A bidirectional site: the model's own mask is its window alone (centred on the query, as
    // ModernBERT's local layers: |p_i - j| <= W / 2), an AND-term of the intervention's.
    if (W > 0) andModelMask(m, c, layer, Tq, Tk, W, false);
    return p;
  }
  if (m.prefix == 0 && m.sink == 0) {
    // No OR-term in the intervention: model AND intervention is one spec (two windows, each the
    // last W keys, AND to the narrower).
    m.causal = true;
    if (W > 0) m.window = m.window > 0 ? std::min(m.window, W) : W;
    return p;
  }
  // The intervention's prefix or sink would let a query see keys the model's own mask hides:
  // the model's mask (causal, its window) becomes an AND-term of the custom matrix.
  andModelMask(m, c, layer, Tq, Tk, W, true);
  return p;
}


void checkDecodeInterventions(const Interventions& iv) {
  for (const auto& [site, entry] : iv.entries()) {
    const LayerIntervention& li = *entry;
    const std::string where =
        (site.stack == 0 && site.site == 0 ? "layer " + std::to_string(site.layer)
                                           : "stack " + std::to_string(site.stack) + " layer " +
                                                 std::to_string(site.layer) + " site " +
                                                 std::to_string(site.site)) +
        ": ";
    if (!li.meanAblatedHeads.empty()) {
      throw InputError(where + "mean ablation is refused in generation (a decode step's one "
                       "row is its own mean); use a zero ablation");
    }
    if (!li.residualEdits.empty()) {
      throw InputError(where + "residual-stream edits are refused in generation (a mean is over "
                       "a pass's positions); clear them to generate");
    }
    if (!li.patchedHeads.empty()) {
      throw InputError(where + "activation patching is refused in generation (a patch is one "
                       "run's [T, d_h] output; a decode step has a single row)");
    }
    const MaskSpec& m = li.mask;
    if (m.pad > 0) {
      throw InputError(where + "the mask pad:" + std::to_string(m.pad) +
                       " counts from the end of the keys, which moves as tokens are generated; "
                       "it is refused in generation");
    }
    if (!m.docs.empty()) {
      throw InputError(where + "a document mask gives one id per position of the prompt; it is "
                       "refused in generation");
    }
    if (m.customKind != MaskSpec::Custom::None) {
      throw InputError(where + "a painted mask is a [T, T] matrix of the prompt; it is refused in "
                       "generation");
    }
  }
}

}  // namespace attnviz
