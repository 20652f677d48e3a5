// attnviz session: the layers x heads figure of a model's pass (the app's model view as a
// figure), for `attnviz export --grid` and the app's Export dialog alike, so both write the same
// bytes for the same pass.
#pragma once

#include "attnviz/model/model.h"
#include "attnviz/render/colormap.h"
#include "attnviz/render/raster.h"

#include <string>

namespace attnviz {

// The thumbnails a pass keeps for the model view (Capture::view): every site's weights
// max-pooled to at most this many cells a side. The figure pools them further, by whole factors,
// so the app's pass and the command line's give the same cells.
constexpr int kModelGridThumbnail = 128;

struct ModelGridOptions {
  ColormapId colormap = ColormapId::Viridis;
  std::string title;      // empty: "Attention weights · every layer × head · <name> · T tokens"
  std::string fontPath;   // empty: the export's font
  int panelPx = 0;        // 0: from the number of panels (HeadGridFigure::panelPx)
  bool vector = false;    // also record the SVG and PDF
};

// Every attention site of `pass` (Capture::view(kModelGridThumbnail)'s thumbnails, or its full
// weights pooled the same way) as a row of one panel per head; local (windowed) layers of a
// family that mixes local and global layers say so in their label, heads ablated in `iv` get a
// red frame. `name` is the model's name for the title. Throws InputError when the pass kept
// neither thumbnails nor weights of a site; what renderHeadGrid throws.
Image renderModelGrid(const Model& m, const ForwardResult& pass, const Interventions& iv,
                      const std::string& name, const ModelGridOptions& o);

}  // namespace attnviz
