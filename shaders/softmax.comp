// attnviz: bias, mask, temperature and a numerically stable softmax, one workgroup per query row.
//
//   L_ij = (cap(S_ij) + b_ij) / tau, exactly -inf where masked      (docs/design/conventions.md)
// with cap(s) = c tanh(s / c) when a softcap c is set, else s.
//   A_ij = exp(L_ij - max_j L) / sum_j exp(L_ij - max_j L)
// computed as the CPU engine does: z = S + b, then exp((z - max z) / tau), so that a tiny tau
// stays finite (the top key gets exp(0), the others exp(-gap / tau), possibly 0).
// Pass 1 writes z into A and reduces the row max (ties -> lowest key) in shared memory; pass 2
// turns A into exp((z - max) / tau) and reduces its sum and the entropy's dot product; pass 3
// normalizes. Each invocation touches only its own columns (j = lid, lid + WG, ...)
// across the passes, so A needs no barrier between them. A row whose max is -inf is fully
// masked: its weights are zeros and its stats say so.
//
// The host prepends `#version 430 core` and `#define WG <power of two>`.
// Row stats: 4 floats per row {sum, max weight, argmax (int bits, -1 fully masked), entropy}.
// Offsets are in floats from the start of each bound range.

layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Scaled { float s[]; };    // rows of [T_q, T_k]
layout(std430, binding = 1) buffer Weights { float w[]; };            // rows of [T_q, T_k]
layout(std430, binding = 2) readonly buffer Custom { float cm[]; };   // rows of [T_q, T_k]
layout(std430, binding = 3) writeonly buffer Rows { float rs[]; };    // 4 per row
layout(std430, binding = 4) readonly buffer Docs { int docs[]; };     // a document id per key
layout(std430, binding = 5) readonly buffer Expr { float em[]; };     // rows of [T_q, T_k], 0/1

layout(location = 0) uniform int uTq;
layout(location = 1) uniform int uTk;
layout(location = 2) uniform int uRow0;  // query index of workgroup 0 within the head
layout(location = 3) uniform int uSOff;
layout(location = 4) uniform int uWOff;
layout(location = 5) uniform int uCOff;
layout(location = 6) uniform int uROff;
layout(location = 7) uniform float uInvTau;  // 1 / tau, when finite
layout(location = 16) uniform float uTau;
layout(location = 17) uniform int uDivide;   // 1 when 1 / tau overflows: divide by tau instead
layout(location = 8) uniform int uCausal;     // 0 / 1
layout(location = 9) uniform int uWindow;     // 0 = off
layout(location = 10) uniform int uPrefix;    // 0 = off
layout(location = 11) uniform int uSink;      // 0 = off
layout(location = 12) uniform int uPad;       // 0 = off
layout(location = 13) uniform int uAlibi;     // 0 / 1
layout(location = 14) uniform float uSlope;   // this head's ALiBi slope m_h
layout(location = 15) uniform int uCustom;    // 0 none, 1 allow (nonzero = may attend), 2 bias
layout(location = 18) uniform int uChunk;     // C, 0 = off: floor(j / C) == floor(p / C)
layout(location = 19) uniform float uSoftcap; // c, 0 = off
layout(location = 20) uniform int uDoc;       // 0 / 1: docs[p] == docs[j]
layout(location = 21) uniform int uExpr;      // 0 / 1: the expression's grid, em != 0
layout(location = 22) uniform int uEOff;

shared float redF[WG];
shared float redG[WG];
shared int redI[WG];

const float kNegInf = uintBitsToFloat(0xff800000u);

// The biased score z = S + b of key j for query i (position p), or -inf when masked.
float logit(int base, int j, int p) {
  bool ok = true;
  if (uCausal != 0) ok = j <= p;
  if (uWindow > 0) ok = ok && (p - uWindow < j) && (j <= p);
  if (uPrefix > 0 && j < uPrefix) ok = true;
  if (uSink > 0 && j < uSink) ok = true;
  if (uPad > 0 && j >= uTk - uPad) ok = false;
  float cv = 0.0;
  if (uCustom != 0) cv = cm[uCOff + base + j];
  if (uCustom == 1 && cv == 0.0) ok = false;
  // The and-terms. A query position before the keys (T_q > T_k) has no chunk and no document.
  if (uChunk > 0) ok = ok && p >= 0 && (j / uChunk) == (p / uChunk);
  if (uDoc != 0) ok = ok && p >= 0 && docs[j] == docs[p];
  if (uExpr != 0) ok = ok && em[uEOff + base + j] != 0.0;
  if (!ok) return kNegInf;
  // Same order of operations as the CPU engine: softcap, ALiBi, then the float mask.
  float z = s[uSOff + base + j];
  // tanh is exactly +-1 in float32 past |x| = 9.1; the clamp keeps exp-based tanh finite.
  if (uSoftcap > 0.0) z = uSoftcap * tanh(clamp(z / uSoftcap, -15.0, 15.0));
  if (uAlibi != 0) z -= uSlope * float(abs(p - j));
  if (uCustom == 2) z += cv;
  return z;
}

void main() {
  const int lid = int(gl_LocalInvocationID.x);
  const int local = int(gl_WorkGroupID.x);  // row within this dispatch
  const int i = uRow0 + local;
  const int p = i + (uTk - uTq);
  const int base = local * uTk;
  const int wbase = uWOff + base;

  // Pass 1: biased scores, row max and its first index.
  float m = kNegInf;
  int arg = -1;
  for (int j = lid; j < uTk; j += WG) {
    const float l = logit(base, j, p);
    w[wbase + j] = l;
    if (l > m) {
      m = l;
      arg = j;
    }
  }
  redF[lid] = m;
  redI[lid] = arg;
  barrier();
  for (int stride = WG / 2; stride > 0; stride >>= 1) {
    if (lid < stride) {
      const float om = redF[lid + stride];
      const int oi = redI[lid + stride];
      if (om > redF[lid] || (om == redF[lid] && oi >= 0 && (redI[lid] < 0 || oi < redI[lid]))) {
        redF[lid] = om;
        redI[lid] = oi;
      }
    }
    barrier();
  }
  const float rowMax = redF[0];
  const int rowArg = redI[0];
  barrier();

  if (rowMax == kNegInf) {  // fully masked (uniform across the workgroup)
    for (int j = lid; j < uTk; j += WG) w[wbase + j] = 0.0;
    if (lid == 0) {
      const int r = uROff + 4 * local;
      rs[r + 0] = 0.0;
      rs[r + 1] = 0.0;
      rs[r + 2] = intBitsToFloat(-1);
      rs[r + 3] = 0.0;
    }
    return;
  }

  // Pass 2: t = (z - max) / tau, e = exp(t), its sum, and sum e t for the entropy.
  float sum = 0.0, dot = 0.0;
  for (int j = lid; j < uTk; j += WG) {
    const float z = w[wbase + j];
    const float t = (uDivide != 0) ? (z - rowMax) / uTau : (z - rowMax) * uInvTau;
    float e = 0.0;
    // Masked keys, and gaps that overflow to -inf at a tiny tau, must weigh exactly 0 (a
    // clamped exp need not give 0), and must stay out of the entropy (0 * -inf).
    if (t != kNegInf) {
      e = exp(t);
      dot += e * t;
    }
    w[wbase + j] = e;
    sum += e;
  }
  redF[lid] = sum;
  redG[lid] = dot;
  barrier();
  for (int stride = WG / 2; stride > 0; stride >>= 1) {
    if (lid < stride) {
      redF[lid] += redF[lid + stride];
      redG[lid] += redG[lid + stride];
    }
    barrier();
  }
  const float total = redF[0];
  const float inv = 1.0 / total;
  // -sum a log a = log(total) - sum a t, with a = e / total and t = L - max L.
  const float entropy = max(0.0, log(total) - redG[0] * inv);

  // Pass 3: normalize.
  for (int j = lid; j < uTk; j += WG) w[wbase + j] *= inv;
  if (lid == 0) {
    const int r = uROff + 4 * local;
    rs[r + 0] = total * inv;  // the row's weight sum, as the CPU reports it
    rs[r + 1] = inv;  // exp(0) / total: the weight at the argmax
    rs[r + 2] = intBitsToFloat(rowArg);
    rs[r + 3] = entropy;
  }
}
