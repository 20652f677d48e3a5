// attnviz: tiled matrix product for the attention GEMMs, one output tile per workgroup.
//
//   C[M, N] = scale * A[M, K] * B       with B = [N, K] read transposed when B_TRANSPOSED
//                                         (scores: S = Q K^T / sqrt(d_k)), else B = [K, N]
//                                         (output: O = A V).
// Each workgroup stages a BM x BK slab of A and a BK x BN slab of B in shared memory and each
// of its WG_X x WG_Y invocations accumulates a 4 x 4 block of C in four vec4 registers (no
// arrays: a CPU rasterizer would spill indexed arrays to memory). Sizes need not be
// multiples of the tile: loads outside the matrix read 0 and stores outside are skipped.
// The host prepends `#version 430 core` and, for the scores, `#define B_TRANSPOSED 1` and
// `#define CHECK_FINITE 1` (flag per head when Q K^T overflows float32, as the CPU refuses it).
// Offsets are in floats from the start of each bound range (ranges start at aligned offsets).

// The host may predefine the workgroup shape and the k step (e.g. for a CPU rasterizer).
#ifndef WG_X
#define WG_X 16
#endif
#ifndef WG_Y
#define WG_Y 16
#endif
#ifndef BK
#define BK 16
#endif
#define BM (WG_Y * 4)
#define BN (WG_X * 4)

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

// Row gr of this invocation's 4 x 4 block: columns gc0, gc0 + WG_X, gc0 + 2 WG_X, gc0 + 3 WG_X.
void storeRow(int gr, int gc0, vec4 v) {
  if (gr >= uM) return;
  v *= uScale;
#ifdef CHECK_FINITE
  if (any(isinf(v)) || any(isnan(v))) atomicOr(overflowed[uFlag], 1u);
#endif
  const int base = uCOff + gr * uN;
  if (gc0 < uN) c[base + gc0] = v.x;
  if (gc0 + WG_X < uN) c[base + gc0 + WG_X] = v.y;
  if (gc0 + 2 * WG_X < uN) c[base + gc0 + 2 * WG_X] = v.z;
  if (gc0 + 3 * WG_X < uN) c[base + gc0 + 3 * WG_X] = v.w;
}

void main() {
  const int tx = int(gl_LocalInvocationID.x);
  const int ty = int(gl_LocalInvocationID.y);
  const int tid = ty * WG_X + tx;
  const int row0 = int(gl_WorkGroupID.y) * BM;
  const int col0 = int(gl_WorkGroupID.x) * BN;

  // acc_m holds rows ty + m WG_Y, columns tx + n WG_X for n = 0..3 (strided, so that the
  // invocations of a row read consecutive shared-memory words).
  vec4 acc0 = vec4(0.0), acc1 = vec4(0.0), acc2 = vec4(0.0), acc3 = vec4(0.0);

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
      const vec4 rb = vec4(tileB[kk][tx], tileB[kk][tx + WG_X], tileB[kk][tx + 2 * WG_X],
                           tileB[kk][tx + 3 * WG_X]);
      acc0 += ra.x * rb;
      acc1 += ra.y * rb;
      acc2 += ra.z * rb;
      acc3 += ra.w * rb;
    }
    barrier();
  }

  const int gc0 = col0 + tx;
  storeRow(row0 + ty, gc0, acc0);
  storeRow(row0 + ty + WG_Y, gc0, acc1);
  storeRow(row0 + ty + 2 * WG_Y, gc0, acc2);
  storeRow(row0 + ty + 3 * WG_Y, gc0, acc3);
}
