// attnviz core: mask expressions, in the spirit of FlexAttention's mask_mod, parsed and evaluated
// by muParser (Debian's libmuparser).
//
// The variables are those of docs/design/conventions.md, all whole numbers:
//   q      the query's position p_i = i + (T_k - T_q)
//   k      the key index j
//   i      the query row
//   h      the head
//   Tq Tk  the numbers of queries and keys
//   doc_q  the document id at position p_i, doc_k the one at j (both 0 when no ids are set;
//          -1 for a query position before the keys, when T_q > T_k)
// A cell may attend when the expression is nonzero (NaN counts as zero).
//
// Operators: muParser's own (+ - * / ^, == != < <= > >=, && ||, c ? a : b, abs, min, max, ...)
// and, defined here for the way mask_mod code is written, % (the remainder with the sign of the
// divisor, as in Python), // (floor division), ! (not), and the functions floor and ceil.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

// The variable names, in the order of docs/design/conventions.md.
const std::vector<std::string>& maskExprVariables();

// Working examples for the GUI's presets menu: {label, expression}. In order: sliding window,
// prefix-LM, chunked causal, document-causal, dilated, global tokens plus a window, and the
// even-distance pattern (q - k) % 2 == 0.
struct MaskExprPreset {
  const char* label;
  const char* text;
};
const std::vector<MaskExprPreset>& maskExprPresets();

class MaskExpr {
 public:
  // Compiles `text`. Throws UsageError with the problem ("unknown variable 'x' ...", or muParser's
  // message for a syntax error, with the position).
  explicit MaskExpr(const std::string& text);
  ~MaskExpr();
  MaskExpr(MaskExpr&&) noexcept;
  MaskExpr& operator=(MaskExpr&&) noexcept;

  const std::string& text() const { return text_; }
  bool usesHead() const { return usesHead_; }
  bool usesDocs() const { return usesDocs_; }  // reads doc_q or doc_k

  // out[i * Tk + j] = 1 where the expression is nonzero for head h, else 0. `docs` holds T_k ids
  // or is empty (every position in document 0). Splits the rows over cpuThreads().
  void evaluate(int h, int Tq, int Tk, const std::vector<int>& docs, std::uint8_t* out) const;

  // One cell (slow: compiles a parser per call).
  bool at(int h, int i, int j, int Tq, int Tk, const std::vector<int>& docs) const;

 private:
  std::string text_;
  bool usesHead_ = false;
  bool usesDocs_ = false;
};

}  // namespace attnviz
