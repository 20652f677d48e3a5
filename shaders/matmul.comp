// attnviz: tiled matrix product for the attention GEMMs, one output tile per workgroup.
//
//   C[M, N] = scale * A[M, K] * B       with B = [N, K] read transposed when B_TRANSPOSED
//                                         (scores: S = Q K^T / sqrt(d_k)), else B = [K, N]
//                                         (output: O = A V).
// Each workgroup stages a BM x BK slab of A and a BK x BN slab of B in shared memory; each of
// its WG_X x WG_Y invocations accumulates an 8 x 8 block of C in sixteen vec4 registers (named,
// not an array: a CPU rasterizer would spill an indexed array to memory), so BM = 8 WG_Y and
// BN = 8 WG_X. An invocation's rows are ty + m WG_Y and its columns tx + n WG_X (m, n < 8), so
// neighbouring invocations read neighbouring shared-memory words. Sizes need not be multiples
// of the tile: loads outside the matrix read 0 and stores outside are skipped.
// The host prepends `#version 430 core`, the shape (WG_X, WG_Y, BK) and, for the scores,
// `#define B_TRANSPOSED 1` and `#define CHECK_FINITE 1` (a flag per head when Q K^T overflows
// float32, which the CPU engine refuses too).
// Offsets are in floats from the start of each bound range (ranges start at aligned offsets).

#ifndef WG_X
#define WG_X 8
#endif
#ifndef WG_Y
#define WG_Y 8
#endif
#ifndef BK
#define BK 16
#endif
#define BM (WG_Y * 8)
#define BN (WG_X * 8)

layout(local_size_x = WG_X, local_size_y = WG_Y) in;

layout(std430, binding = 0) readonly buffer MatA { float a[]; };
layout(std430, binding = 1) readonly buffer MatB { float b[]; };
layout(std430, binding = 2) writeonly buffer MatC { float c[]; };
#ifdef CHECK_FINITE
// Set to 1 when any element written is not finite (finite inputs can overflow float32).
layout(std430, binding = 3) buffer Overflow { uint overflowed[]; };
layout(location = 7) uniform int uFlag;  // index into overflowed[] (the head)
#endif

layout(location = 0) uniform int uM;
layout(location = 1) uniform int uN;
layout(location = 2) uniform int uK;
layout(location = 3) uniform float uScale;
layout(location = 4) uniform int uAOff;
layout(location = 5) uniform int uBOff;
layout(location = 6) uniform int uCOff;

// k-major tiles: the inner loop reads a column of each, so the +1 padding spreads the banks.
shared float tileA[BK][BM + 1];
shared float tileB[BK][BN + 1];

// Row gr of this invocation's block: columns gc0 + n WG_X, n = 0..3 from lo and 4..7 from hi.
void storeRow(int gr, int gc0, vec4 lo, vec4 hi) {
  if (gr >= uM) return;
  lo *= uScale;
  hi *= uScale;
#ifdef CHECK_FINITE
  if (any(isinf(lo)) || any(isnan(lo)) || any(isinf(hi)) || any(isnan(hi))) {
    atomicOr(overflowed[uFlag], 1u);
  }
#endif
  const int base = uCOff + gr * uN;
  const float v[8] = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
  for (int n = 0; n < 8; ++n) {
    const int gc = gc0 + n * WG_X;
    if (gc < uN) c[base + gc] = v[n];
  }
}

void main() {
  const int tx = int(gl_LocalInvocationID.x);
  const int ty = int(gl_LocalInvocationID.y);
  const int tid = ty * WG_X + tx;
  const int row0 = int(gl_WorkGroupID.y) * BM;
  const int col0 = int(gl_WorkGroupID.x) * BN;

  // Row m of the block: columns 0..3 in pm, 4..7 in qm.
  vec4 p0 = vec4(0.0), p1 = vec4(0.0), p2 = vec4(0.0), p3 = vec4(0.0);
  vec4 p4 = vec4(0.0), p5 = vec4(0.0), p6 = vec4(0.0), p7 = vec4(0.0);
  vec4 q0 = vec4(0.0), q1 = vec4(0.0), q2 = vec4(0.0), q3 = vec4(0.0);
  vec4 q4 = vec4(0.0), q5 = vec4(0.0), q6 = vec4(0.0), q7 = vec4(0.0);

  for (int k0 = 0; k0 < uK; k0 += BK) {
    // A slab: consecutive invocations read consecutive k of one row (row-major A).
    for (int e = tid; e < BM * BK; e += WG_X * WG_Y) {
      const int r = e / BK, kk = e % BK;
      const int gr = row0 + r, gk = k0 + kk;
      tileA[kk][r] = (gr < uM && gk < uK) ? a[uAOff + gr * uK + gk] : 0.0;
    }
#ifdef B_TRANSPOSED
    // B is [N, K]: consecutive invocations read consecutive k of one key row.
    for (int e = tid; e < BN * BK; e += WG_X * WG_Y) {
      const int cc = e / BK, kk = e % BK;
      const int gc = col0 + cc, gk = k0 + kk;
      tileB[kk][cc] = (gc < uN && gk < uK) ? b[uBOff + gc * uK + gk] : 0.0;
    }
#else
    // B is [K, N]: consecutive invocations read consecutive columns of one row.
    for (int e = tid; e < BN * BK; e += WG_X * WG_Y) {
      const int kk = e / BN, cc = e % BN;
      const int gc = col0 + cc, gk = k0 + kk;
      tileB[kk][cc] = (gc < uN && gk < uK) ? b[uBOff + gk * uN + gc] : 0.0;
    }
#endif
    barrier();
    for (int kk = 0; kk < BK; ++kk) {
      const vec4 ra = vec4(tileA[kk][ty], tileA[kk][ty + WG_Y], tileA[kk][ty + 2 * WG_Y],
                           tileA[kk][ty + 3 * WG_Y]);
      const vec4 rc = vec4(tileA[kk][ty + 4 * WG_Y], tileA[kk][ty + 5 * WG_Y],
                           tileA[kk][ty + 6 * WG_Y], tileA[kk][ty + 7 * WG_Y]);
      const vec4 rb = vec4(tileB[kk][tx], tileB[kk][tx + WG_X], tileB[kk][tx + 2 * WG_X],
                           tileB[kk][tx + 3 * WG_X]);
      const vec4 rd = vec4(tileB[kk][tx + 4 * WG_X], tileB[kk][tx + 5 * WG_X],
                           tileB[kk][tx + 6 * WG_X], tileB[kk][tx + 7 * WG_X]);
      p0 += ra.x * rb;  q0 += ra.x * rd;
      p1 += ra.y * rb;  q1 += ra.y * rd;
      p2 += ra.z * rb;  q2 += ra.z * rd;
      p3 += ra.w * rb;  q3 += ra.w * rd;
      p4 += rc.x * rb;  q4 += rc.x * rd;
      p5 += rc.y * rb;  q5 += rc.y * rd;
      p6 += rc.z * rb;  q6 += rc.z * rd;
      p7 += rc.w * rb;  q7 += rc.w * rd;
    }
    barrier();
  }

  const int gr0 = row0 + ty, gc0 = col0 + tx;
  storeRow(gr0, gc0, p0, q0);
  storeRow(gr0 + WG_Y, gc0, p1, q1);
  storeRow(gr0 + 2 * WG_Y, gc0, p2, q2);
  storeRow(gr0 + 3 * WG_Y, gc0, p3, q3);
  storeRow(gr0 + 4 * WG_Y, gc0, p4, q4);
  storeRow(gr0 + 5 * WG_Y, gc0, p5, q5);
  storeRow(gr0 + 6 * WG_Y, gc0, p6, q6);
  storeRow(gr0 + 7 * WG_Y, gc0, p7, q7);
}
