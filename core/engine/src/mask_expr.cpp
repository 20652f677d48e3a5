#include "attnviz/engine/mask_expr.h"

#include "attnviz/engine/engine.h"
#include "attnviz/engine/tensor.h"
#include "attnviz/engine/parallel.h"

#include <muParser.h>

#include <algorithm>
#include <cmath>

namespace attnviz {

namespace {

// a % b with the sign of b (Python's and torch's remainder), so (q - k) % 2 is 0 or 1.
double remainderOp(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b;
  return r;
}
double floorDivOp(double a, double b) { return std::floor(a / b); }
double notOp(double a) { return a == 0.0 ? 1.0 : 0.0; }
double floorFn(double a) { return std::floor(a); }
double ceilFn(double a) { return std::ceil(a); }

// One parser with its own variables: muParser reads variables through pointers, so each thread
// evaluates with its own Cell.
struct Cell {
  double q = 0, k = 0, i = 0, h = 0, Tq = 1, Tk = 1, docQ = 0, docK = 0;
  mu::Parser parser;

  explicit Cell(const std::string& text) {
    parser.DefineOprt("%", remainderOp, mu::prMUL_DIV, mu::oaLEFT, true);
    parser.DefineOprt("//", floorDivOp, mu::prMUL_DIV, mu::oaLEFT, true);
    parser.DefineInfixOprt("!", notOp, mu::prINFIX, true);
    parser.DefineFun("floor", floorFn, true);
    parser.DefineFun("ceil", ceilFn, true);
    double* vars[] = {&q, &k, &i, &h, &Tq, &Tk, &docQ, &docK};
    const auto& names = maskExprVariables();
    for (std::size_t n = 0; n < names.size(); ++n) parser.DefineVar(names[n], vars[n]);
    parser.SetExpr(text);
  }

  bool allowed() const {
    const double v = parser.Eval();
    return v != 0.0 && !std::isnan(v);
  }
};

std::string joinedVariables() {
  std::string s;
  for (const auto& n : maskExprVariables()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Every position is in document 0 when no ids are set; a query position outside the keys
// (T_q > T_k) is in none (-1).
int docAt(const std::vector<int>& docs, int pos) {
  if (docs.empty()) return 0;
  return pos >= 0 && pos < static_cast<int>(docs.size()) ? docs[std::size_t(pos)] : -1;
}

}  // namespace

const std::vector<std::string>& maskExprVariables() {
  static const std::vector<std::string> names = {"q", "k", "i", "h", "Tq", "Tk", "doc_q", "doc_k"};
  return names;
}

const std::vector<MaskExprPreset>& maskExprPresets() {
  static const std::vector<MaskExprPreset> presets = {
      {"Sliding window (W = 8)", "k <= q && q - k < 8"},
      {"Prefix-LM (prefix of 4)", "k <= q || k < 4"},
      {"Chunked causal (C = 8, Llama 4)", "k // 8 == q // 8 && k <= q"},
      {"Document-causal (packed)", "doc_q == doc_k && k <= q"},
      {"Dilated window (every 2nd key, W = 16)", "k <= q && q - k < 16 && (q - k) % 2 == 0"},
      {"Global tokens (2) plus a window (4)", "k < 2 || q < 2 || abs(q - k) < 4"},
      {"Even distance: (q - k) % 2 == 0", "(q - k) % 2 == 0"},
  };
  return presets;
}

MaskExpr::MaskExpr(const std::string& text) : text_(text) {
  const auto blank = [](unsigned char c) { return std::isspace(c) != 0; };
  if (std::all_of(text.begin(), text.end(), blank)) throw UsageError("the expression is empty");
  try {
    Cell cell(text);
    // GetUsedVar lists every name the expression reads, defined or not.
    const auto& known = maskExprVariables();
    for (const auto& [name, ptr] : cell.parser.GetUsedVar()) {
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        throw UsageError("unknown variable '" + name + "' (the variables are " + joinedVariables() +
                         ")");
      }
      if (name == "h") usesHead_ = true;
      if (name == "doc_q" || name == "doc_k") usesDocs_ = true;
    }
    cell.parser.Eval();  // compiles: reports syntax errors
  } catch (const mu::Parser::exception_type& e) {
    throw UsageError("does not parse: " + e.GetMsg());
  }
}

MaskExpr::~MaskExpr() = default;
MaskExpr::MaskExpr(MaskExpr&&) noexcept = default;
MaskExpr& MaskExpr::operator=(MaskExpr&&) noexcept = default;

void MaskExpr::evaluate(int h, int Tq, int Tk, const std::vector<int>& docs,
                        std::uint8_t* out) const {
  if (Tq <= 0 || Tk <= 0) return;
  // A few row blocks per thread; each block compiles its own parser (tens of microseconds).
  const int blocks = std::min(Tq, 4 * cpuThreads());
  const int perBlock = (Tq + blocks - 1) / blocks;
  detail::parallelFor(blocks, [&](int b) {
    const int r0 = b * perBlock, r1 = std::min(Tq, r0 + perBlock);
    if (r0 >= r1) return;
    Cell c(text_);
    c.h = h;
    c.Tq = Tq;
    c.Tk = Tk;
    for (int i = r0; i < r1; ++i) {
      const int p = i + (Tk - Tq);
      c.i = i;
      c.q = p;
      c.docQ = docAt(docs, p);
      std::uint8_t* row = out + std::size_t(i) * Tk;
      for (int j = 0; j < Tk; ++j) {
        c.k = j;
        c.docK = docAt(docs, j);
        row[j] = c.allowed() ? 1 : 0;
      }
    }
  });
}

bool MaskExpr::at(int h, int i, int j, int Tq, int Tk, const std::vector<int>& docs) const {
  Cell c(text_);
  const int p = i + (Tk - Tq);
  c.h = h;
  c.i = i;
  c.q = p;
  c.k = j;
  c.Tq = Tq;
  c.Tk = Tk;
  c.docQ = docAt(docs, p);
  c.docK = docAt(docs, j);
  return c.allowed();
}

}  // namespace attnviz
