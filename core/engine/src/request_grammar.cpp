// attnviz core: the request strings' grammar (request_grammar.h).
#include "attnviz/engine/request_grammar.h"

#include "attnviz/engine/text_parse.h"

#include <algorithm>
#include <optional>

namespace attnviz {

namespace {

constexpr long kMaxIndex = 1'000'000;  // layers, heads
constexpr long kMaxPosition = 1L << 30;  // positions, dimensions, patches
constexpr long kMaxId = 100'000'000;

// Splits at every ':' (an empty field where two meet or at either end).
std::vector<std::string> fields(const std::string& text) {
  std::vector<std::string> f;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    f.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) return f;
    start = colon + 1;
  }
}

// "L:H" -> (L, H); nullopt unless exactly two indices.
std::optional<std::pair<int, int>> layerHead(const std::string& text) {
  const std::vector<std::string> f = fields(text);
  if (f.size() != 2) return std::nullopt;
  const std::optional<int> l = parseIndex(f[0], kMaxIndex), h = parseIndex(f[1], kMaxIndex);
  if (!l || !h) return std::nullopt;
  return std::make_pair(*l, *h);
}

}  // namespace

SiteHead parseSiteAblation(const std::string& text, const std::string& what) {
  SiteHead a;
  std::string rest = text;
  if (rest.rfind("enc:", 0) == 0) {
    a.site.stack = 1;
    rest = rest.substr(4);
  } else if (rest.rfind("cross:", 0) == 0) {
    a.site.site = 1;
    rest = rest.substr(6);
  }
  const std::optional<std::pair<int, int>> lh = layerHead(rest);
  if (!lh)
    throw UsageError(what + " " + text +
                     ": expected LAYER:HEAD, enc:LAYER:HEAD or cross:LAYER:HEAD, e.g. 3:7");
  a.site.layer = lh->first;
  a.head = lh->second;
  return a;
}

std::string siteAblationText(const SiteHead& a) {
  const std::string prefix = a.site.stack == 1 ? "enc:" : a.site.site == 1 ? "cross:" : "";
  return prefix + std::to_string(a.site.layer) + ":" + std::to_string(a.head);
}

std::pair<int, int> parseLayerHead(const std::string& text, const std::string& what) {
  const std::optional<std::pair<int, int>> lh = layerHead(text);
  if (!lh) throw UsageError(what + " " + text + ": expected LAYER:HEAD, e.g. 3:7");
  return *lh;
}

std::vector<std::pair<int, int>> parseLayerHeadList(const std::vector<std::string>& items,
                                                    const std::string& what) {
  std::vector<std::pair<int, int>> out;
  for (const std::string& item : items) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = item.find(',', start);
      const std::optional<std::pair<int, int>> lh = layerHead(item.substr(start, comma - start));
      if (!lh) throw UsageError(what + " " + item + ": expected LAYER:HEAD, e.g. 3:7");
      if (std::find(out.begin(), out.end(), *lh) == out.end()) out.push_back(*lh);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

std::string layerHeadListText(const std::vector<std::pair<int, int>>& a) {
  std::string s;
  for (auto [l, h] : a) s += (s.empty() ? "" : ",") + std::to_string(l) + ":" + std::to_string(h);
  return s;
}

SiteId parseSiteName(const std::string& text, const std::string& what) {
  const std::vector<std::string> f = fields(text);
  const std::optional<int> l = f.size() >= 2 ? parseIndex(f[1], kMaxIndex) : std::nullopt;
  SiteId s;
  bool ok = l.has_value();
  if (ok && f[0] == "enc" && f.size() == 2) {
    s.stack = 1;
  } else if (ok && f[0] == "dec" && f.size() == 2) {
    s.stack = 0;
  } else if (ok && f[0] == "dec" && f.size() == 3 && (f[2] == "self" || f[2] == "cross")) {
    s.site = f[2] == "cross" ? 1 : 0;
  } else {
    ok = false;
  }
  if (!ok) throw UsageError(what + " " + text + ": expected enc:L, dec:L:self or dec:L:cross");
  s.layer = *l;
  return s;
}

namespace {

// Comma-separated integers in [0, max]: "WHAT: expected NOUN separated by commas, got 'X'".
std::vector<int> intList(const std::string& text, long max, const std::string& what,
                         const char* noun) {
  std::vector<int> out;
  std::string bad;
  if (!parseIntList(text, max, out, bad))
    throw UsageError(what + ": expected " + noun + " separated by commas, got '" + bad + "'");
  return out;
}

}  // namespace

std::vector<int> parseIdList(const std::string& text, const std::string& what) {
  return intList(text, kMaxId, what, "token ids");
}

std::vector<int> parsePositionList(const std::string& text, const std::string& what) {
  return intList(text, kMaxPosition, what, "source positions");
}

std::vector<int> parsePatchList(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::optional<int> i = parseIndex(text.substr(start, comma - start), kMaxPosition);
    if (!i) throw UsageError(what + " " + text + ": expected patch indices, e.g. 3,7");
    if (std::find(out.begin(), out.end(), *i) == out.end()) out.push_back(*i);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int parseLayerArg(const std::string& text, const std::string& what) {
  const std::optional<int> l = parseIndex(text, kMaxIndex);
  if (!l) throw UsageError(what + " " + text + ": expected a layer index (0, 1, ...)");
  return *l;
}

ResidualEditRequest parseResidualEdit(const std::string& text, const std::string& what) {
  const std::vector<std::string> f = fields(text);
  if (f.size() != 4 || (f[3] != "zero" && f[3] != "mean"))
    throw UsageError(what + " " + text +
                     ": expected LAYER:POSITION:DIM:zero|mean, e.g. 1:0:447:mean");
  const std::optional<int> l = parseIndex(f[0], kMaxIndex), d = parseIndex(f[2], kMaxPosition);
  const std::optional<int> p =
      f[1] == "all" ? std::optional<int>(-1) : parseIndex(f[1], kMaxPosition);
  if (!l || !p || !d)
    throw UsageError(what + " " + text + ": layer, position and dimension are indices");
  ResidualEditRequest r;
  r.layer = *l;
  r.edit.position = *p;
  r.edit.dim = *d;
  r.edit.toMean = f[3] == "mean";
  return r;
}

}  // namespace attnviz
