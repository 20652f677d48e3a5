#include "attnviz/engine/mask.h"

#include "attnviz/engine/mask_expr.h"
#include "attnviz/engine/text_parse.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace attnviz {

namespace {

int parseCount(const std::string& text, const std::string& kind, int minimum) {
  const std::string value = text.substr(kind.size() + 1);
  std::size_t used = 0;
  long n = 0;
  try {
    n = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || n < minimum || n > std::numeric_limits<int>::max()) {
    throw UsageError("--mask " + text + ": expected " + kind +
                     ":N with N an integer >= " + std::to_string(minimum));
  }
  return static_cast<int>(n);
}

bool startsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// floor(a / b) for b > 0, also for negative a (a query position before the keys).
int floorDiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The document of a position: -1 (none) outside the key sequence.
int docOf(const std::vector<int>& docs, int pos) {
  return pos >= 0 && pos < static_cast<int>(docs.size()) ? docs[std::size_t(pos)] : -1;
}

}  // namespace

void parseMaskOption(const std::string& text, MaskSpec& spec) {
  if (text == "causal") {
    spec.causal = true;
  } else if (startsWith(text, "window:")) {
    spec.window = parseCount(text, "window", 1);
  } else if (startsWith(text, "prefix:")) {
    spec.prefix = parseCount(text, "prefix", 0);
  } else if (startsWith(text, "sink:")) {
    spec.sink = parseCount(text, "sink", 0);
  } else if (startsWith(text, "pad:")) {
    spec.pad = parseCount(text, "pad", 0);
  } else if (startsWith(text, "chunk:")) {
    spec.chunk = parseCount(text, "chunk", 1);
  } else if (startsWith(text, "doc:")) {
    try {
      spec.docs = parseDocIds(text.substr(4));
    } catch (const UsageError& e) {
      throw UsageError("--mask doc: " + std::string(e.what()));
    }
  } else {
    throw UsageError("--mask " + text +
                     ": expected causal, window:W, prefix:P, sink:S, pad:N, chunk:C or "
                     "doc:ID,ID,...");
  }
}

std::vector<int> parseDocIds(const std::string& text) {
  std::vector<int> ids;
  std::string bad;
  if (!parseIntList(text, std::numeric_limits<int>::max(), ids, bad)) {
    throw UsageError("expected document ids as integers >= 0 separated by commas, got '" + bad +
                     "' at id " + std::to_string(ids.size()));
  }
  return ids;
}

std::vector<int> resizeDocIds(const std::vector<int>& docs, int Tk) {
  std::vector<int> out(docs.begin(), docs.begin() + std::min<std::size_t>(
                                                        docs.size(), std::size_t(std::max(Tk, 0))));
  while (static_cast<int>(out.size()) < Tk) out.push_back(out.empty() ? 0 : out.back());
  return out;
}

std::vector<int> toggleDocBoundary(const std::vector<int>& docs, int Tk, int j) {
  const std::vector<int> d = resizeDocIds(docs, Tk);
  std::vector<int> out(d.size());
  int id = 0;
  for (int x = 0; x < Tk; ++x) {
    const bool boundary = x > 0 && d[std::size_t(x)] != d[std::size_t(x - 1)];
    if (x > 0 && (boundary != (x == j))) ++id;
    out[std::size_t(x)] = id;
  }
  return out;
}

std::string formatDocIds(const std::vector<int>& docs) {
  std::string s;
  for (std::size_t n = 0; n < docs.size(); ++n) s += (n ? "," : "") + std::to_string(docs[n]);
  return s;
}

const ExprGrid* exprGrid(const MaskSpec& m, int H, int Tq, int Tk) {
  if (m.expr.empty()) return nullptr;
  const ExprGrid* g = m.exprCache.get();
  if (g && g->text == m.expr && g->Tq == Tq && g->Tk == Tk && (g->heads == 1 || g->heads >= H) &&
      (!g->usesDocs || g->docs == m.docs)) {
    return g;
  }
  const MaskExpr e(m.expr);
  auto grid = std::make_shared<ExprGrid>();
  grid->text = m.expr;
  grid->heads = e.usesHead() ? std::max(H, 1) : 1;
  grid->Tq = Tq;
  grid->Tk = Tk;
  grid->usesDocs = e.usesDocs();
  if (grid->usesDocs) grid->docs = m.docs;
  grid->allowed.resize(std::size_t(grid->heads) * Tq * Tk);
  for (int h = 0; h < grid->heads; ++h) {
    e.evaluate(h, Tq, Tk, m.docs, grid->allowed.data() + std::size_t(h) * Tq * Tk);
  }
  m.exprCache = std::move(grid);
  return m.exprCache.get();
}

std::string describeMask(const MaskSpec& m) {
  std::ostringstream out;
  const char* sep = "";
  auto add = [&](const std::string& s) {
    out << sep << s;
    sep = " + ";
  };
  if (m.causal) add("causal");
  if (m.window > 0) add("window:" + std::to_string(m.window));
  if (m.prefix > 0) add("prefix:" + std::to_string(m.prefix));
  if (m.sink > 0) add("sink:" + std::to_string(m.sink));
  if (m.pad > 0) add("pad:" + std::to_string(m.pad));
  if (m.chunk > 0) add("chunk:" + std::to_string(m.chunk));
  if (!m.docs.empty()) {
    int n = 0;
    for (std::size_t k = 0; k < m.docs.size(); ++k) n += k == 0 || m.docs[k] != m.docs[k - 1];
    add("doc (" + std::to_string(n) + (n == 1 ? " run)" : " runs)"));
  }
  if (!m.expr.empty()) add("expr: " + m.expr);
  if (m.softcap > 0.0f) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "softcap %g", double(m.softcap));
    add(buf);
  }
  if (m.alibi) add("ALiBi");
  if (m.customKind == MaskSpec::Custom::Allow) add("custom mask");
  if (m.customKind == MaskSpec::Custom::Bias) add("custom bias");
  const std::string s = out.str();
  return s.empty() ? "none" : s;
}

void validateParams(const AttentionParams& p, int H, int Tq, int Tk) {
  if (!std::isfinite(p.temperature) || p.temperature <= 0.0f) {
    std::ostringstream s;
    s << "temperature must be a finite number > 0, got " << p.temperature;
    throw InputError(s.str());
  }
  const MaskSpec& m = p.mask;
  if (m.window < 0 || m.prefix < 0 || m.sink < 0 || m.pad < 0 || m.chunk < 0) {
    throw InputError("mask parameters must be >= 0");
  }
  if (!std::isfinite(m.softcap) || m.softcap < 0.0f) {
    throw UsageError("softcap must be a finite number > 0 (0 = off)");
  }
  if (!m.docs.empty() && static_cast<int>(m.docs.size()) != Tk) {
    throw UsageError("--mask doc: " + std::to_string(m.docs.size()) +
                     " document ids given, but there are " + std::to_string(Tk) +
                     " key positions (one id per key)");
  }
  if (!m.expr.empty()) {
    try {
      exprGrid(m, H, Tq, Tk);
    } catch (const UsageError& e) {
      throw UsageError("--mask-expr '" + m.expr + "': " + e.what());
    }
  }
  if (m.customKind != MaskSpec::Custom::None) {
    const Tensor3& c = m.custom;
    if ((c.heads != 1 && c.heads != H) || c.rows != Tq || c.cols != Tk) {
      throw InputError("custom mask has shape " + c.shapeString() + ", expected [1 or " +
                       std::to_string(H) + ", " + std::to_string(Tq) + ", " + std::to_string(Tk) +
                       "]");
    }
    if (m.customKind == MaskSpec::Custom::Bias) {
      for (float v : c.data) {
        if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
          throw InputError("custom bias contains NaN or +inf (only finite values and -inf)");
        }
      }
    }
  }
}

std::vector<float> alibiSlopes(int H) {
  // Geometric sequence starting at 2^(-8/n) with that same ratio, for n a power of two.
  auto powerOfTwo = [](int n) {
    std::vector<double> s(n);
    const double start = std::pow(2.0, -8.0 / n);
    for (int i = 0; i < n; ++i) s[i] = std::pow(start, i + 1);
    return s;
  };
  std::vector<float> out;
  if (H <= 0) return out;
  int closest = 1;
  while (closest * 2 <= H) closest *= 2;
  std::vector<double> s = powerOfTwo(closest);
  if (closest != H) {
    const std::vector<double> extra = powerOfTwo(2 * closest);
    for (int i = 0; static_cast<int>(s.size()) < H; i += 2) s.push_back(extra[i]);
  }
  for (double v : s) out.push_back(static_cast<float>(v));
  return out;
}

namespace {

// The terms of one query row that do not depend on the key.
struct RowTerms {
  int p = 0;                           // the query's position
  const float* custom = nullptr;       // the custom matrix's row, if any
  const std::uint8_t* expr = nullptr;  // the expression grid's row, if any
  int docQ = 0, chunkQ = 0;
};

RowTerms rowTerms(const MaskSpec& m, const ExprGrid* grid, int h, int i, int Tq, int Tk) {
  RowTerms r;
  r.p = queryPosition(i, Tq, Tk);
  if (m.customKind != MaskSpec::Custom::None) {
    r.custom = m.custom.head(m.custom.heads == 1 ? 0 : h) + std::size_t(i) * Tk;
  }
  if (grid) r.expr = grid->row(h, i);
  if (!m.docs.empty()) r.docQ = docOf(m.docs, r.p);
  if (m.chunk > 0) r.chunkQ = floorDiv(r.p, m.chunk);
  return r;
}

// The combination rule of docs/design/conventions.md for key j.
bool cellAllowed(const MaskSpec& m, const RowTerms& r, int j, int Tk) {
  const int p = r.p;
  const bool causal = !m.causal || j <= p;
  const bool window = m.window <= 0 || (j > p - m.window && j <= p);
  const bool prefix = m.prefix > 0 && j < m.prefix;
  const bool sink = m.sink > 0 && j < m.sink;
  const bool pad = m.pad > 0 && j >= Tk - m.pad;
  bool custom = true;
  if (r.custom) {
    custom = m.customKind == MaskSpec::Custom::Allow
                 ? r.custom[j] != 0.0f
                 : r.custom[j] != -std::numeric_limits<float>::infinity();
  }
  const bool chunk = m.chunk <= 0 || floorDiv(j, m.chunk) == r.chunkQ;
  const bool doc = m.docs.empty() || (r.docQ >= 0 && docOf(m.docs, j) == r.docQ);
  const bool expr = !r.expr || r.expr[j] != 0;
  return ((causal && window) || prefix || sink) && !pad && custom && chunk && doc && expr;
}

}  // namespace

bool maskAllowed(const MaskSpec& m, int h, int i, int j, int Tq, int Tk) {
  const ExprGrid* grid = m.expr.empty() ? nullptr : exprGrid(m, h + 1, Tq, Tk);
  return cellAllowed(m, rowTerms(m, grid, h, i, Tq, Tk), j, Tk);
}

void allowedRow(const MaskSpec& m, const ExprGrid* grid, int h, int i, int Tq, int Tk,
                std::uint8_t* out) {
  const RowTerms r = rowTerms(m, grid, h, i, Tq, Tk);
  for (int j = 0; j < Tk; ++j) out[j] = cellAllowed(m, r, j, Tk) ? 1 : 0;
}

float maskBias(const MaskSpec& m, const std::vector<float>& slopes, int h, int i, int j, int Tq,
               int Tk) {
  float b = 0.0f;
  if (m.alibi) b -= slopes[h] * std::fabs(static_cast<float>(queryPosition(i, Tq, Tk) - j));
  if (m.customKind == MaskSpec::Custom::Bias) {
    const float v = m.custom.at(m.custom.heads == 1 ? 0 : h, i, j);
    if (std::isfinite(v)) b += v;
  }
  return b;
}

}  // namespace attnviz
