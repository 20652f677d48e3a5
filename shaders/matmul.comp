// attnviz: tiled matrix product for the attention GEMMs, one output tile per workgroup.
//
//   C[M, N] = scale * A[M, K] * B       with B = [N, K] read transposed when B_TRANSPOSED
//                                         (scores: S = Q K^T / sqrt(d_k)), else B = [K, N]
//                                         (output: O = A V).
// Each workgroup stages a BM x BK slab of A and a BK x BN slab of B in shared memory and each
// of its 16 x 16 invocations accumulates a TM x TN block of C in registers. Sizes need not be
// multiples of the tile: loads outside the matrix read 0 and stores outside are skipped.
// The host prepends `#version 430 core` and, for the scores, `#define B_TRANSPOSED 1`.
// Offsets are in floats from the start of each bound range (ranges start at aligned offsets).

// The host may predefine the tile shape (e.g. smaller workgroups for a CPU rasterizer);
// BM = WG_Y * TM and BN = WG_X * TN must hold.
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef WG_X
#define WG_X 16
#endif
#ifndef WG_Y
#define WG_Y 16
#endif
#ifndef BK
#define BK 16
#endif
#define BM (WG_Y * TM)
#define BN (WG_X * TN)

layout(local_size_x = WG_X, local_size_y = WG_Y) in;

layout(std430, binding = 0) readonly buffer MatA { float a[]; };
layout(std430, binding = 1) readonly buffer MatB { float b[]; };
layout(std430, binding = 2) writeonly buffer MatC { float c[]; };

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

void main() {
  const int tx = int(gl_LocalInvocationID.x);
  const int ty = int(gl_LocalInvocationID.y);
  const int tid = ty * WG_X + tx;
  const int row0 = int(gl_WorkGroupID.y) * BM;
  const int col0 = int(gl_WorkGroupID.x) * BN;

  float acc[TM][TN];
  for (int m = 0; m < TM; ++m)
    for (int n = 0; n < TN; ++n) acc[m][n] = 0.0;

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
      float ra[TM], rb[TN];
      for (int m = 0; m < TM; ++m) ra[m] = tileA[kk][ty + m * WG_Y];
      for (int n = 0; n < TN; ++n) rb[n] = tileB[kk][tx + n * WG_X];
      for (int m = 0; m < TM; ++m)
        for (int n = 0; n < TN; ++n) acc[m][n] += ra[m] * rb[n];
    }
    barrier();
  }

  for (int m = 0; m < TM; ++m) {
    const int gr = row0 + ty + m * WG_Y;
    if (gr >= uM) continue;
    for (int n = 0; n < TN; ++n) {
      const int gc = col0 + tx + n * WG_X;
      if (gc < uN) c[uCOff + gr * uN + gc] = acc[m][n] * uScale;
    }
  }
}
