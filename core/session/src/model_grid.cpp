// The layers x heads figure of a model's pass: the pass's thumbnails, labelled by site.
#include "attnviz/session/model_grid.h"

#include "attnviz/render/grid_figure.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace attnviz {

namespace {

// Max-pools a site's weights [H, T, T_k] as the pass's thumbnails are pooled: blocks of s x s,
// s = ceil(max(T, T_k) / kModelGridThumbnail), each its largest weight.
Tensor3 poolLikeThumbnails(const Tensor3& w, int& step) {
  step = std::max(1, (std::max(w.rows, w.cols) + kModelGridThumbnail - 1) / kModelGridThumbnail);
  if (step == 1) return w;
  const int nq = (w.rows + step - 1) / step, nk = (w.cols + step - 1) / step;
  Tensor3 out(w.heads, nq, nk);
  for (int h = 0; h < w.heads; ++h)
    for (int i = 0; i < w.rows; ++i)
      for (int j = 0; j < w.cols; ++j) {
        float& o = out.at(h, i / step, j / step);
        o = std::max(o, w.at(h, i, j));
      }
  return out;
}

}  // namespace

Image renderModelGrid(const Model& m, const ForwardResult& pass, const Interventions& iv,
                      const std::string& name, const ModelGridOptions& o) {
  const ModelConfig& c = m.config();
  HeadGridFigure f;
  std::vector<std::unique_ptr<Tensor3>> pooled;  // rows pooled here (the pass kept weights)
  const bool mixed = !c.layerWindows.empty();
  bool anyLocal = false;
  for (const SiteId& id : c.sites()) {
    const SiteActivations& sa = pass.site(id);
    if (!sa.thumb.empty()) {
      // The pass pooled T x T_k weights in blocks of ceil(max(T, T_k) / kModelGridThumbnail).
      const LayerList& layers = pass.stackLayers(id.stack);
      const long Tq = id.layer < long(layers.size()) ? long(layers[std::size_t(id.layer)].residualIn.rows()) : 0;
      const LayerList& enc = pass.stackLayers(1);
      const long Tk = sa.kind == SiteKind::Cross && !enc.empty() ? long(enc[0].residualIn.rows()) : Tq;
      f.rows.push_back(&sa.thumb);
      f.rowPool.push_back(int(std::max(1L, (std::max(Tq, Tk) + kModelGridThumbnail - 1) /
                                                kModelGridThumbnail)));
    } else if (!sa.weights.empty()) {
      int step = 1;
      pooled.push_back(std::make_unique<Tensor3>(poolLikeThumbnails(sa.weights, step)));
      f.rows.push_back(pooled.back().get());
      f.rowPool.push_back(step);
    } else {
      throw InputError("the pass kept no weights or thumbnails of " + c.siteName(id) +
                       " to draw the layers x heads figure");
    }
    std::string label = c.siteName(id);
    const bool local = mixed && id.stack == 0 && c.windowOf(id.layer) > 0;
    if (local) {
      label += " local";
      anyLocal = true;
    }
    f.rowLabels.push_back(label);
    std::vector<char> ablated(std::size_t(c.nHead), 0);
    if (const LayerIntervention* li = iv.find(id))
      for (int h : li->ablatedHeads)
        if (h >= 0 && h < c.nHead) ablated[std::size_t(h)] = 1;
    f.ablated.push_back(std::move(ablated));
  }
  f.kvGroup = c.kvGroup();
  f.colormap = o.colormap;
  f.fontPath = o.fontPath;
  f.panelPx = o.panelPx;
  f.vector = o.vector;
  const int T = static_cast<int>(pass.ids.size());
  f.title = o.title.empty() ? "Attention weights \xC2\xB7 every layer \xC3\x97 head \xC2\xB7 " +
                                  name + " \xC2\xB7 " + std::to_string(T) + " tokens"
                            : o.title;
  f.captions.push_back("rows: attention sites (queries down, keys across in each panel); "
                       "columns: query heads");
  if (anyLocal) {
    int w = 0;
    for (int l = 0; l < c.nLayer; ++l) w = std::max(w, c.windowOf(l));
    f.captions.push_back("local: a sliding-window layer (each query sees its last " +
                         std::to_string(w) + " keys); the others are global");
  }
  return renderHeadGrid(f);
}

}  // namespace attnviz
