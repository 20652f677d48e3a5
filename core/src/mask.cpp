#include "attnviz/mask.h"

#include <cmath>
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
  } else {
    throw UsageError("--mask " + text + ": expected causal, window:W, prefix:P, sink:S or pad:N");
  }
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
  if (m.window < 0 || m.prefix < 0 || m.sink < 0 || m.pad < 0) {
    throw InputError("mask parameters must be >= 0");
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

bool maskAllowed(const MaskSpec& m, int h, int i, int j, int Tq, int Tk) {
  const int p = queryPosition(i, Tq, Tk);
  const bool causal = !m.causal || j <= p;
  const bool window = m.window <= 0 || (j > p - m.window && j <= p);
  const bool prefix = m.prefix > 0 && j < m.prefix;
  const bool sink = m.sink > 0 && j < m.sink;
  const bool pad = m.pad > 0 && j >= Tk - m.pad;
  bool custom = true;
  if (m.customKind != MaskSpec::Custom::None) {
    const int ch = m.custom.heads == 1 ? 0 : h;
    const float v = m.custom.at(ch, i, j);
    custom = m.customKind == MaskSpec::Custom::Allow ? v != 0.0f
                                                     : v != -std::numeric_limits<float>::infinity();
  }
  return ((causal && window) || prefix || sink) && !pad && custom;
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
