// attnviz core: attention masks, ALiBi and the parameters of the softmax stage.
//
// The combination rule (DESIGN.md), with p_i = i + (T_k - T_q) the position of query i:
//   allowed(i,j) = [ (causal(i,j) AND window(i,j)) OR prefix(j) OR sink(j) ] AND NOT pad(j) AND
//   custom(i,j)
// A disabled term takes its neutral value: true for causal, window, custom; false for prefix, sink,
// pad.
#pragma once

#include "attnviz/tensor.h"

#include <string>
#include <vector>

namespace attnviz {

struct MaskSpec {
  bool causal = false;  // j <= p_i
  int window = 0;       // W >= 1: p_i - W < j <= p_i; 0 = off
  int prefix = 0;       // P >= 1: j < P visible to every query; 0 = off
  int sink = 0;         // S >= 1: j < S visible to every query; 0 = off
  int pad = 0;          // N >= 1: the last N keys are padding, never attended; 0 = off
  bool alibi = false;   // b_h(i,j) = -m_h * |p_i - j|

  enum class Custom { None, Allow, Bias };
  // Allow: nonzero means "may attend" (torch SDPA meaning). Bias: additive, -inf allowed.
  Custom customKind = Custom::None;
  Tensor3 custom;  // [1 or H, T_q, T_k]; one shared matrix when heads == 1

  bool any() const {
    return causal || window > 0 || prefix > 0 || sink > 0 || pad > 0 || alibi ||
           customKind != Custom::None;
  }
};

// Temperature tau > 0 divides the biased scores: L = (S + b) / tau.
struct AttentionParams {
  MaskSpec mask;
  float temperature = 1.0f;
};

// Position of query i when the queries are the last T_q positions of the key sequence.
inline int queryPosition(int i, int Tq, int Tk) { return i + (Tk - Tq); }

// Parses one --mask value: causal | window:W | prefix:P | sink:S | pad:N. Throws UsageError.
void parseMaskOption(const std::string& text, MaskSpec& spec);

// Human-readable summary such as "causal + window:4 + ALiBi", or "none".
std::string describeMask(const MaskSpec& spec);

// Throws InputError when tau is not finite and > 0, a parameter is negative, or the custom
// matrix does not have shape [1 or H, T_q, T_k].
void validateParams(const AttentionParams& p, int H, int Tq, int Tk);

// ALiBi slopes m_h for H heads: 2^(-8(h+1)/H) for H a power of two; otherwise the paper's
// interleaving (the slopes of the nearest lower power of two, then every other slope of twice it).
std::vector<float> alibiSlopes(int H);

// The combination rule for one cell (the slow path, used by tooltips and the reference).
bool maskAllowed(const MaskSpec& m, int h, int i, int j, int Tq, int Tk);

// Additive bias b_ij for one cell (ALiBi plus a float custom matrix); 0 when none.
float maskBias(const MaskSpec& m, const std::vector<float>& slopes, int h, int i, int j, int Tq,
               int Tk);

}  // namespace attnviz
