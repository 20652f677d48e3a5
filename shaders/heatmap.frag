// attnviz heatmap: colours one screen pixel of the attention matrix.
//
// uValues is one level of a max pyramid of the [rows, cols] matrix (row 0 = query 0): level L
// holds the max over 2^L x 2^L blocks of cells, and the renderer binds the smallest level whose
// blocks are at least one pixel wide, so when a pixel covers several cells the value shown is
// the max over them (and at most one block around them): a single strong key is never
// averaged away. -inf marks a masked cell; max() lets
// any allowed cell win over masked ones, so a block is masked only when all of it is.
// uColormap is the 256-texel table shared with the colour bar and the PNG export, read with
// index round(clamp(t, 0, 1) * 255) exactly like attnviz::colormapIndex().
// The #version line is prepended at run time.
in vec2 vUnused;
out vec4 fragColor;

uniform sampler2D uValues;
uniform sampler2D uColormap;
uniform ivec2 uSize;           // (cols, rows) of the matrix
uniform int uLevel;            // pyramid level bound to uValues: one texel = 2^uLevel cells
uniform vec2 uOrigin;          // matrix coordinates (col, row) of the target's top-left corner
uniform float uCellsPerPixel;  // cells covered by one pixel along each axis
uniform float uTargetHeight;   // pixels, to count rows from the top
uniform float uLo, uHi;        // value range mapped to t = 0 and t = 1
uniform int uScale;            // 0 linear, 1 log, 2 gamma
uniform float uGamma, uLogFloor;
uniform vec4 uMasked, uHatch, uNonFinite, uBackground;
uniform float uGridAlpha;      // > 0: outline cells (only when they are large)

// The same mapping as attnviz::mapValue (core/src/colormap.cpp): normalise to [lo, hi], clamp,
// then apply the scale to the normalised value.
float mapValue(float v) {
  float span = uHi - uLo;
  float lin = span > 0.0 ? (v - uLo) / span : 0.5;
  lin = clamp(lin, 0.0, 1.0);
  if (uScale == 2) return pow(lin, uGamma);
  if (uScale == 1) {
    float f = max(uLogFloor, 1e-12);
    float x = max(lin, f);
    return clamp((log(x) - log(f)) / -log(f), 0.0, 1.0);
  }
  return lin;
}

bool isMasked(float v) { return isinf(v) && v < 0.0; }

float fetchMax(vec2 c0, vec2 c1) {
  // Texels of the bound level that the cell range [c0, c1) touches: at most 2 per axis,
  // because a texel spans at least what a pixel covers.
  ivec2 lvlSize = textureSize(uValues, 0);
  ivec2 t0 = clamp(ivec2(floor(c0)) >> uLevel, ivec2(0), lvlSize - 1);
  ivec2 t1 = clamp(ivec2(ceil(c1) - 1.0) >> uLevel, ivec2(0), lvlSize - 1);
  float m = -1.0 / 0.0;
  bool nan = false;
  for (int y = t0.y; y <= min(t1.y, t0.y + 1); ++y) {
    for (int x = t0.x; x <= min(t1.x, t0.x + 1); ++x) {
      float v = texelFetch(uValues, ivec2(x, y), 0).r;
      if (isnan(v)) nan = true;
      m = max(m, v);
    }
  }
  return nan ? (0.0 / 0.0) : m;
}

void main() {
  vec2 px = vec2(gl_FragCoord.x - 0.5, uTargetHeight - gl_FragCoord.y - 0.5);  // from the top
  vec2 c0 = uOrigin + px * uCellsPerPixel;
  vec2 c1 = c0 + vec2(uCellsPerPixel);
  vec2 centre = uOrigin + (px + 0.5) * uCellsPerPixel;
  if (centre.x < 0.0 || centre.y < 0.0 || centre.x >= float(uSize.x) || centre.y >= float(uSize.y)) {
    fragColor = uBackground;
    return;
  }
  float v;
  if (uCellsPerPixel <= 1.0) {
    v = texelFetch(uValues, ivec2(floor(centre)), 0).r;
  } else {
    v = fetchMax(max(c0, vec2(0.0)), min(c1, vec2(uSize)));
  }
  vec4 colour;
  if (isnan(v) || (isinf(v) && v > 0.0)) {
    colour = uNonFinite;
  } else if (isMasked(v)) {
    // Diagonal hatch in screen space: masked never looks like a zero weight.
    colour = mod(floor((gl_FragCoord.x + gl_FragCoord.y) / 4.0), 2.0) < 1.0 ? uMasked : uHatch;
  } else {
    float t = mapValue(v);
    int idx = int(round(clamp(t, 0.0, 1.0) * 255.0));
    colour = texelFetch(uColormap, ivec2(idx, 0), 0);
  }
  if (uGridAlpha > 0.0) {
    vec2 cellPx = 1.0 / vec2(uCellsPerPixel);
    vec2 f = fract(centre) * cellPx;  // pixels from the cell's top-left edge
    if (f.x < 1.0 || f.y < 1.0) colour.rgb = mix(colour.rgb, uBackground.rgb, uGridAlpha);
  }
  fragColor = vec4(colour.rgb, 1.0);
}
