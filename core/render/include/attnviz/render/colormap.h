// attnviz core: the one colormap table behind the GPU heatmap, the colour bar and PNG export.
#pragma once

#include "attnviz/engine/blocks.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnviz {

struct RGBA8 {
  std::uint8_t r = 0, g = 0, b = 0, a = 255;
  bool operator==(const RGBA8& o) const { return r == o.r && g == o.g && b == o.b && a == o.a; }
  bool operator!=(const RGBA8& o) const { return !(*this == o); }
};

enum class ColormapId { Viridis, Magma, Gray, Diverging };

constexpr int kColormapSize = 256;
using ColormapTable = std::array<RGBA8, kColormapSize>;

// Masked cells (logit -inf) and non-finite values have colours of their own, outside every
// table, so a masked cell never looks like a zero weight.
constexpr RGBA8 kMaskedColor{92, 96, 108, 255};      // slate grey, drawn hatched where possible
constexpr RGBA8 kMaskedHatchColor{62, 65, 75, 255};  // second colour of the hatch
constexpr RGBA8 kNonFiniteColor{255, 0, 255, 255};   // magenta: NaN should never be seen

const ColormapTable& colormapTable(ColormapId id);

// Index used for a normalised value t: round(clamp(t, 0, 1) * 255). The GPU lookup, the colour
// bar and the export all use this exact rule.
int colormapIndex(float t);
RGBA8 colormapLookup(ColormapId id, float t);

// Names: viridis, magma, gray, diverging.
std::optional<ColormapId> colormapFromName(const std::string& name);
const char* colormapName(ColormapId id);
std::vector<std::string> colormapNames();

// How values map to t in [0, 1].
enum class ColorScale { Linear, Log, Gamma };
struct ValueMapping {
  float lo = 0.0f, hi = 1.0f;  // value range; for Diverging the centre is (lo + hi) / 2
  ColorScale scale = ColorScale::Linear;
  float gamma = 0.5f;      // for Gamma: t = lin^gamma
  float logFloor = 1e-4f;  // for Log: values below map to 0
};
float mapValue(const ValueMapping& m, float v);

// Block-sparsity overlay colours (export and GUI): each tile is outlined inside its bounds in its
// kind's colour.
constexpr RGBA8 kBlockEmptyColor{225, 225, 232, 255};   // pale: skipped
constexpr RGBA8 kBlockPartialColor{255, 150, 20, 255};  // orange: computed and masked
constexpr RGBA8 kBlockFullColor{40, 200, 90, 255};      // green: computed, no mask needed
RGBA8 blockColor(BlockKind k);

}  // namespace attnviz
