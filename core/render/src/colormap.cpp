// Colormap tables built from evenly spaced anchor colours by linear interpolation in sRGB.
// Viridis and magma anchors are the published colours of those maps at t = 0, 1/9, ..., 1.
#include "attnviz/render/colormap.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

namespace attnviz {

namespace {

ColormapTable fromAnchors(std::initializer_list<unsigned> hex) {
  const std::vector<unsigned> a(hex);
  ColormapTable t{};
  const int segments = static_cast<int>(a.size()) - 1;
  for (int i = 0; i < kColormapSize; ++i) {
    const double x = double(i) / (kColormapSize - 1) * segments;
    const int s = std::min(segments - 1, static_cast<int>(x));
    const double f = x - s;
    auto channel = [&](int shift) {
      const double c0 = (a[s] >> shift) & 0xff, c1 = (a[s + 1] >> shift) & 0xff;
      return static_cast<std::uint8_t>(std::lround(c0 + (c1 - c0) * f));
    };
    t[i] = RGBA8{channel(16), channel(8), channel(0), 255};
  }
  return t;
}

}  // namespace

const ColormapTable& colormapTable(ColormapId id) {
  static const ColormapTable viridis =
      fromAnchors({0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e, 0x1f9e89, 0x35b779, 0x6ece58,
                   0xb5de2b, 0xfde725});
  static const ColormapTable magma =
      fromAnchors({0x000004, 0x180f3d, 0x440f76, 0x721f81, 0x9e2f7f, 0xcd4071, 0xf1605d, 0xfd9668,
                   0xfeca8d, 0xfcfdbf});
  static const ColormapTable gray = fromAnchors({0x000000, 0xffffff});
  static const ColormapTable diverging = fromAnchors(
      {0x3b4cc0, 0x6282ea, 0x8db0fe, 0xb8d0f9, 0xdddcdc, 0xf5c4ac, 0xf49a7b, 0xde604d, 0xb40426});
  switch (id) {
    case ColormapId::Viridis:
      return viridis;
    case ColormapId::Magma:
      return magma;
    case ColormapId::Gray:
      return gray;
    case ColormapId::Diverging:
      return diverging;
  }
  return viridis;
}

int colormapIndex(float t) {
  if (!(t > 0.0f)) return 0;  // also NaN
  if (t >= 1.0f) return kColormapSize - 1;
  return static_cast<int>(std::lround(t * (kColormapSize - 1)));
}

RGBA8 colormapLookup(ColormapId id, float t) { return colormapTable(id)[colormapIndex(t)]; }

std::optional<ColormapId> colormapFromName(const std::string& name) {
  if (name == "viridis") return ColormapId::Viridis;
  if (name == "magma") return ColormapId::Magma;
  if (name == "gray" || name == "grey" || name == "grayscale") return ColormapId::Gray;
  if (name == "diverging") return ColormapId::Diverging;
  return std::nullopt;
}

const char* colormapName(ColormapId id) {
  switch (id) {
    case ColormapId::Viridis:
      return "viridis";
    case ColormapId::Magma:
      return "magma";
    case ColormapId::Gray:
      return "gray";
    case ColormapId::Diverging:
      return "diverging";
  }
  return "viridis";
}

std::vector<std::string> colormapNames() { return {"viridis", "magma", "gray", "diverging"}; }

float mapValue(const ValueMapping& m, float v) {
  if (std::isnan(v)) return 0.0f;
  const float span = m.hi - m.lo;
  float lin = span > 0.0f ? (v - m.lo) / span : 0.5f;
  lin = std::clamp(lin, 0.0f, 1.0f);
  switch (m.scale) {
    case ColorScale::Linear:
      return lin;
    case ColorScale::Gamma:
      return std::pow(lin, m.gamma);
    case ColorScale::Log: {
      const float floor = std::max(m.logFloor, 1e-12f);
      const float x = std::max(lin, floor);
      return std::clamp((std::log(x) - std::log(floor)) / -std::log(floor), 0.0f, 1.0f);
    }
  }
  return lin;
}

RGBA8 blockColor(BlockKind k) {
  switch (k) {
    case BlockKind::Empty:
      return kBlockEmptyColor;
    case BlockKind::Full:
      return kBlockFullColor;
    default:
      return kBlockPartialColor;
  }
}

}  // namespace attnviz
