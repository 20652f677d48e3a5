// attnviz session: an encoder's pair, special tokens and blocks (encoder_view.h).
#include "attnviz/session/encoder_view.h"

#include "attnviz/model/tokenizers/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

namespace attnviz {

namespace {
constexpr const char* kSliceKeys[] = {"all", "a-a", "b-b", "a-b", "b-a"};
constexpr const char* kSliceLabels[] = {"All", "A\xE2\x86\x92" "A", "B\xE2\x86\x92" "B",
                                        "A\xE2\x86\x92" "B", "B\xE2\x86\x92" "A"};
constexpr const char* kSpecialKeys[] = {"show", "grey", "hide"};

bool readJson(const std::string& path, nlohmann::json& out) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  out = nlohmann::json::parse(ss.str(), nullptr, false);
  return !out.is_discarded();
}
}  // namespace

const char* pairSliceKey(PairSlice s) { return kSliceKeys[int(s)]; }
const char* pairSliceLabel(PairSlice s) { return kSliceLabels[int(s)]; }
std::optional<PairSlice> pairSliceFromKey(const std::string& key) {
  for (int i = 0; i < kPairSliceCount; ++i)
    if (key == kSliceKeys[i]) return PairSlice(i);
  return std::nullopt;
}

const char* specialTokensKey(SpecialTokens s) { return kSpecialKeys[int(s)]; }
std::optional<SpecialTokens> specialTokensFromKey(const std::string& key) {
  for (int i = 0; i < 3; ++i)
    if (key == kSpecialKeys[i]) return SpecialTokens(i);
  return std::nullopt;
}

TokenSegments tokenSegments(const Tokenizer& tok, const std::vector<int>& ids,
                            const std::vector<int>& typeIds, bool pair) {
  TokenSegments s;
  s.pair = pair;
  const int T = int(ids.size());
  s.segment.assign(std::size_t(T), 0);
  s.special.assign(std::size_t(T), 0);
  const std::optional<int> mask = tok.mask(), unk = tok.unk();
  for (int t = 0; t < T; ++t) {
    if (pair && t < int(typeIds.size())) s.segment[std::size_t(t)] = typeIds[std::size_t(t)] != 0;
    // The mask token and the unknown token stand for text: they are never hidden.
    const int id = ids[std::size_t(t)];
    s.special[std::size_t(t)] = tok.isSpecial(id) && id != mask && id != unk;
  }
  return s;
}

BlockView blockFor(const TokenSegments& seg, PairSlice slice, SpecialTokens specials) {
  BlockView b;
  if (!seg.pair) slice = PairSlice::All;
  const bool hide = specials == SpecialTokens::Hide;
  if (slice == PairSlice::All && !hide) return b;
  int rowSeg = -1, colSeg = -1;  // -1: either text
  switch (slice) {
    case PairSlice::All: break;
    case PairSlice::AtoA: rowSeg = 0, colSeg = 0; break;
    case PairSlice::BtoB: rowSeg = 1, colSeg = 1; break;
    case PairSlice::AtoB: rowSeg = 0, colSeg = 1; break;
    case PairSlice::BtoA: rowSeg = 1, colSeg = 0; break;
  }
  b.on = true;
  b.renormalise = hide;
  if (slice != PairSlice::All) b.label = pairSliceLabel(slice);
  if (hide)
    b.label += std::string(b.label.empty() ? "" : " \xC2\xB7 ") +
               "special tokens hidden, rows renormalised";
  for (int t = 0; t < seg.size(); ++t) {
    if (hide && seg.special[std::size_t(t)]) continue;
    const int g = seg.segment[std::size_t(t)];
    if (rowSeg < 0 || g == rowSeg) b.rows.push_back(t);
    if (colSeg < 0 || g == colSeg) b.cols.push_back(t);
  }
  return b;
}

void cutBlock(const float* m, int Tq, int Tk, const BlockView& b, bool renormalise,
              std::vector<float>& out) {
  const int R = int(b.rows.size()), C = int(b.cols.size());
  out.assign(std::size_t(R) * C, 0.0f);
  for (int a = 0; a < R; ++a) {
    const int i = b.rows[std::size_t(a)];
    if (i < 0 || i >= Tq) continue;
    const float* row = m + std::size_t(i) * Tk;
    float* o = out.data() + std::size_t(a) * C;
    double sum = 0;
    for (int c = 0; c < C; ++c) {
      const int j = b.cols[std::size_t(c)];
      o[c] = j >= 0 && j < Tk ? row[j] : 0.0f;
      if (std::isfinite(o[c])) sum += o[c];
    }
    if (renormalise && sum > 0)
      for (int c = 0; c < C; ++c)
        if (std::isfinite(o[c])) o[c] = float(double(o[c]) / sum);
  }
}

std::string vocabularyKind(const std::string& k) {
  if (k.find("WordPiece") != std::string::npos || k.find("GGUF bert") != std::string::npos)
    return "WordPiece";
  if (k.find("Unigram") != std::string::npos) return "Unigram";
  if (k.find("SentencePiece") != std::string::npos || k.find(".spm") != std::string::npos)
    return "SentencePiece";
  if (k.find("BPE") != std::string::npos) return "BPE";
  return k;
}

std::string sentenceTransformersPooling(const std::string& dir) {
  nlohmann::json modules;
  if (!readJson(dir + "/modules.json", modules) || !modules.is_array()) return "";
  for (const nlohmann::json& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) continue;
    const std::string type = m["type"].get<std::string>();
    if (type.find("Pooling") == std::string::npos) continue;
    const std::string path = m.contains("path") && m["path"].is_string()
                                 ? m["path"].get<std::string>()
                                 : std::string("1_Pooling");
    nlohmann::json c;
    if (!readJson(dir + "/" + path + "/config.json", c) || !c.is_object()) return "";
    auto on = [&](const char* key) { return c.contains(key) && c[key].is_boolean() && c[key].get<bool>(); };
    if (on("pooling_mode_cls_token")) return "cls";
    if (on("pooling_mode_mean_tokens")) return "mean";
    if (on("pooling_mode_max_tokens")) return "max";
    if (on("pooling_mode_mean_sqrt_len_tokens")) return "mean (sqrt len)";
    if (on("pooling_mode_weightedmean_tokens")) return "weighted mean";
    if (on("pooling_mode_lasttoken")) return "last token";
    return "";
  }
  return "";
}

}  // namespace attnviz
