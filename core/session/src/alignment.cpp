// attnviz session: cross attention as a word alignment and its AER (alignment.h).
#include "attnviz/session/alignment.h"

#include "attnviz/model/tokenizers/tokenizer.h"
#include "attnviz/session/seq2seq_source.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <sstream>

namespace attnviz {

namespace {

// A token that belongs to no word: a control token (</s>, <s>, <pad>), not <unk>.
bool noWord(const Tokenizer& tok, int id) {
  const std::optional<int> unk = tok.unk();
  return tok.isSpecial(id) && !(unk && *unk == id);
}

// Reads a non-negative decimal index filling all of `t`; false otherwise.
bool readIndex(const std::string& t, int& out) {
  if (t.empty() || t.size() > 9) return false;
  for (char c : t)
    if (c < '0' || c > '9') return false;
  out = std::atoi(t.c_str());
  return true;
}

}  // namespace

AlignUnits alignUnits(const Tokenizer& tok, const std::vector<int>& ids, bool words) {
  AlignUnits u;
  u.unitOf.assign(ids.size(), -1);
  if (!words) {
    for (std::size_t k = 0; k < ids.size(); ++k) {
      u.unitOf[k] = int(k);
      u.labels.push_back(tok.label(ids[k]));
    }
    return u;
  }
  std::vector<std::string> bytes;  // each word's text
  bool open = false;               // a word is open for the next piece to join
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (noWord(tok, ids[k])) {
      open = false;
      continue;
    }
    std::string b = tok.pieceBytes(ids[k]);
    const bool starts = !b.empty() && b[0] == ' ';
    if (!open || starts) {
      bytes.emplace_back();
      open = true;
    }
    bytes.back() += b;
    u.unitOf[k] = int(bytes.size()) - 1;
  }
  for (std::string& b : bytes) {
    if (!b.empty() && b[0] == ' ') b.erase(0, 1);
    u.labels.push_back(b.empty() ? tokenLabelOf(" ") : tokenLabelOf(b));
  }
  return u;
}

AlignmentStrips alignmentStrips(const Seq2SeqSource& q, bool words) {
  const Tokenizer& tok = q.model().tokenizer();
  AlignmentStrips s;
  s.source = alignUnits(tok, q.sourceIds(), words);
  const std::vector<int>& dec = q.decoderIds();
  s.target = alignUnits(tok, std::vector<int>(dec.begin() + std::min<std::size_t>(1, dec.size()),
                                              dec.end()),
                        words);
  return s;
}

Alignment parsePharaoh(const std::string& text, int nSource, int nTarget) {
  Alignment a;
  std::istringstream in(text);
  for (std::string pair; in >> pair;) {
    const std::size_t dash = pair.find('-');
    int s = -1, t = -1;
    if (dash == std::string::npos || !readIndex(pair.substr(0, dash), s) ||
        !readIndex(pair.substr(dash + 1), t))
      throw InputError("gold alignment: bad pair '" + pair +
                       "' (expected SOURCE-TARGET, two indices from 0, as in 0-2)");
    auto past = [&](const char* side, int i, int n) {
      throw InputError("gold alignment: pair '" + pair + "': " + side + " index " +
                       std::to_string(i) + " is past the " + std::to_string(n) + " " + side +
                       (n == 1 ? " unit" : " units") + " shown (0-" + std::to_string(n - 1) + ")");
    };
    if (nSource >= 0 && s >= nSource) past("source", s, nSource);
    if (nTarget >= 0 && t >= nTarget) past("target", t, nTarget);
    a.push_back({s, t});
  }
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

std::string pharaohText(const Alignment& a) {
  std::string out;
  for (const AlignLink& l : a)
    out += (out.empty() ? "" : " ") + std::to_string(l.source) + "-" + std::to_string(l.target);
  return out;
}

Eigen::MatrixXd unitWeights(const Tensor3& w, int head, const AlignmentStrips& strips,
                            bool shift) {
  const int nt = int(strips.target.unitOf.size()), ns = int(strips.source.unitOf.size());
  if (w.rows != nt + 1 || w.cols != ns)
    throw InputError("alignment: a cross site of " + w.shapeString() + " does not fit " +
                     std::to_string(nt) + " target tokens (+ the start row) and " +
                     std::to_string(ns) + " source tokens");
  if (head < -1 || head >= w.heads)
    throw InputError("alignment: head " + std::to_string(head) + " is out of range (" +
                     std::to_string(w.heads) + " heads)");
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(strips.target.count(), strips.source.count());
  std::vector<int> pieces(strips.target.count(), 0);
  const int h0 = head < 0 ? 0 : head, h1 = head < 0 ? w.heads : head + 1;
  for (int t = 0; t < nt; ++t) {
    const int tu = strips.target.unitOf[t];
    if (tu < 0) continue;
    ++pieces[tu];
    const int row = shift ? t : t + 1;
    for (int h = h0; h < h1; ++h)
      for (int j = 0; j < ns; ++j)
        if (const int su = strips.source.unitOf[j]; su >= 0) out(tu, su) += w.at(h, row, j);
  }
  for (int tu = 0; tu < out.rows(); ++tu)
    if (pieces[tu] > 0) out.row(tu) /= double(pieces[tu]) * (h1 - h0);
  return out;
}

Alignment predictAlignment(const Eigen::MatrixXd& uw, const AlignOptions& o) {
  Alignment a;
  for (int t = 0; t < uw.rows(); ++t) {
    if (o.rule == AlignRule::Argmax) {
      if (uw.cols() == 0) continue;
      int best = 0;
      for (int s = 1; s < uw.cols(); ++s)
        if (uw(t, s) > uw(t, best)) best = s;
      a.push_back({best, t});
    } else {
      for (int s = 0; s < uw.cols(); ++s)
        if (uw(t, s) >= double(o.threshold)) a.push_back({s, t});
    }
  }
  std::sort(a.begin(), a.end());
  return a;
}

double AerCounts::aer() const {
  if (predicted + gold == 0) return 0.0;
  return 1.0 - 2.0 * double(both) / double(predicted + gold);
}

AerCounts& AerCounts::operator+=(const AerCounts& o) {
  both += o.both;
  predicted += o.predicted;
  gold += o.gold;
  return *this;
}

AerCounts aerCounts(const Alignment& predicted, const Alignment& gold) {
  AerCounts c;
  c.predicted = (long long)predicted.size();
  c.gold = (long long)gold.size();
  Alignment p = predicted, g = gold;
  std::sort(p.begin(), p.end());
  std::sort(g.begin(), g.end());
  Alignment both;
  std::set_intersection(p.begin(), p.end(), g.begin(), g.end(), std::back_inserter(both));
  c.both = (long long)both.size();
  return c;
}

void AerMap::findBest() {
  bestLayer = bestHead = -1;
  double best = 0;
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < heads; ++h)
      if (bestLayer < 0 || aer(l, h) < best) best = aer(l, h), bestLayer = l, bestHead = h;
}

AerMap& AerMap::operator+=(const AerMap& o) {
  if (counts.empty()) return *this = o;
  if (o.layers != layers || o.heads != heads)
    throw InputError("alignment: AER maps of different shapes cannot be pooled");
  for (std::size_t k = 0; k < counts.size(); ++k) counts[k] += o.counts[k];
  findBest();
  return *this;
}

AerMap aerMap(const Dump& d, const AlignmentStrips& strips, const Alignment& gold,
              const AlignOptions& o) {
  AerMap m;
  for (std::size_t i = 0; i < d.layers.size(); ++i)
    if (d.layers[i].isCross()) m.sites.push_back(int(i));
  m.layers = int(m.sites.size());
  m.heads = m.layers > 0 ? d.layers[m.sites[0]].weights.heads : 0;
  for (int site : m.sites)
    for (int h = 0; h < m.heads; ++h)
      m.counts.push_back(
          aerCounts(predictAlignment(unitWeights(d.layers[site].weights, h, strips, o.shift), o),
                    gold));
  m.findBest();
  return m;
}

}  // namespace attnviz
