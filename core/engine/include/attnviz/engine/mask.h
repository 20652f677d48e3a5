// attnviz core: attention masks, ALiBi and the parameters of the softmax stage.
//
// The combination rule (docs/design/conventions.md), with p_i = i + (T_k - T_q) the position of
// query i:
//   allowed(i,j) = [ (causal(i,j) AND window(i,j)) OR prefix(j) OR sink(j) ] AND NOT pad(j) AND
//   custom(i,j) AND chunk(i,j) AND doc(i,j) AND expr(i,j)
// A disabled term takes its neutral value: true for causal, window, custom, chunk, doc and expr;
// false for prefix, sink, pad. Softcap is not a mask: the scaled score s becomes c tanh(s / c)
// before the bias, the mask and tau.
#pragma once

#include "attnviz/engine/tensor.h"

#include <cmath>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnviz {

struct ExprGrid;

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

  int chunk = 0;          // C >= 1: floor(j / C) == floor(p_i / C) (Llama 4); 0 = off
  std::vector<int> docs;  // a document id per key position (length T_k): doc(p_i) == doc(j)
  std::string expr;       // a mask_mod expression (see mask_expr.h); nonzero = may attend
  float softcap = 0.0f;   // c > 0: s -> c tanh(s / c) before bias, mask and tau; 0 = off

  // The expression's evaluated cells, filled by exprGrid() and shared by copies of this spec.
  mutable std::shared_ptr<const ExprGrid> exprCache;

  bool any() const {
    return causal || window > 0 || prefix > 0 || sink > 0 || pad > 0 || alibi ||
           customKind != Custom::None || chunk > 0 || !docs.empty() || !expr.empty() ||
           softcap > 0.0f;
  }
};

// An expression evaluated over every cell of [heads, T_q, T_k]: 1 = may attend. `heads` is 1
// when the expression does not read h (one grid serves every head).
struct ExprGrid {
  std::string text;
  int heads = 0, Tq = 0, Tk = 0;
  bool usesDocs = false;
  std::vector<int> docs;  // the ids it was evaluated with (when it reads them)
  std::vector<std::uint8_t> allowed;
  const std::uint8_t* row(int h, int i) const {
    return allowed.data() + (std::size_t(heads == 1 ? 0 : h) * Tq + i) * Tk;
  }
};

// The grid of m.expr for heads [0, H), evaluated once and cached in m.exprCache until the text,
// the shape or the document ids change; nullptr when m.expr is empty. Throws UsageError when the
// expression does not compile. Not thread-safe on one spec: engines call it before their loops.
const ExprGrid* exprGrid(const MaskSpec& m, int H, int Tq, int Tk);

// Whether cell j of query row i in head h may attend, for a whole row: out[j] = 0 or 1 (the
// combination rule; `grid` is exprGrid(m, ...), or nullptr when m.expr is empty).
void allowedRow(const MaskSpec& m, const ExprGrid* grid, int h, int i, int Tq, int Tk,
                std::uint8_t* out);

// Softcap applied to one scaled score: c tanh(s / c), or s when c <= 0.
inline float softcapScore(float s, float c) { return c > 0.0f ? c * std::tanh(s / c) : s; }

// Temperature tau > 0 divides the biased scores: L = (S + b) / tau.
struct AttentionParams {
  MaskSpec mask;
  float temperature = 1.0f;
};

// Position of query i when the queries are the last T_q positions of the key sequence.
inline int queryPosition(int i, int Tq, int Tk) { return i + (Tk - Tq); }

// Parses one --mask value: causal | window:W | prefix:P | sink:S | pad:N | chunk:C |
// doc:0,0,1,1,... Throws UsageError.
void parseMaskOption(const std::string& text, MaskSpec& spec);

// Parses a document-id list "0,0,1,1,2" (integers, commas, optional spaces). Throws UsageError.
std::vector<int> parseDocIds(const std::string& text);

// Document ids edited as boundaries (the GUI's clicks on the key axis): adds a boundary before
// key j (1 <= j < T_k) when there is none, removes it when there is. The result numbers the runs
// 0, 1, 2, ... (an id reused by two separate runs becomes two documents). Empty docs start as one
// document of T_k positions.
std::vector<int> toggleDocBoundary(const std::vector<int>& docs, int Tk, int j);

// Fits ids to T_k positions (when the text changes): cut, or extended with the last id.
std::vector<int> resizeDocIds(const std::vector<int>& docs, int Tk);

// "0,0,1,1,2": the inverse of parseDocIds.
std::string formatDocIds(const std::vector<int>& docs);

// Human-readable summary such as "causal + window:4 + ALiBi", or "none".
std::string describeMask(const MaskSpec& spec);

// Throws InputError when tau is not finite and > 0, a parameter is negative, or the custom
// matrix does not have shape [1 or H, T_q, T_k]; UsageError when the document ids do not number
// T_k, the softcap is not finite and >= 0, or the expression does not compile.
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
