// Marian's tokenizer: two SentencePiece models (source.spm for the encoder's text, target.spm
// for the decoder's) whose pieces are looked up in one vocab.json; the EOS id after each text.
#include "attnviz/model/tokenizers/marian.h"

#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include <unordered_map>

namespace attnviz {

namespace {

const std::string kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's space

class MarianTokenizer final : public Tokenizer {
 public:
  MarianTokenizer(const MarianFiles& f, int vocabSize);

  std::vector<int> encode(std::string_view text, bool addSpecial) const override {
    return encodeWith(source_, sourceName_, text, addSpecial);
  }
  std::vector<int> encodeTarget(std::string_view text, bool addSpecial) const override {
    return encodeWith(target_, targetName_, text, addSpecial);
  }
  std::string pieceBytes(int id) const override;
  std::string decode(const std::vector<int>& ids) const override;
  int size() const override { return static_cast<int>(pieces_.size()); }
  std::optional<int> eos() const override { return eos_; }
  std::optional<int> unk() const override { return unk_; }
  bool isSpecial(int id) const override {
    return id == eos_ || id == unk_ || (pad_ && id == *pad_);
  }
  std::string kind() const override {
    return "Marian: SentencePiece (source.spm, target.spm) over vocab.json";
  }

 private:
  std::vector<int> encodeWith(const sentencepiece::SentencePieceProcessor& sp,
                              const std::string& name, std::string_view text,
                              bool addSpecial) const;

  sentencepiece::SentencePieceProcessor source_, target_;
  std::string sourceName_, targetName_;
  std::unordered_map<std::string, int> ids_;
  std::vector<std::string> pieces_;  // by id
  tok::LiteralMatcher specials_;     // </s>, <unk>, <pad> and language codes >>xx<<
  int eos_ = 0, unk_ = 1;
  std::optional<int> pad_;
};

MarianTokenizer::MarianTokenizer(const MarianFiles& f, int vocabSize)
    : sourceName_(f.sourceName), targetName_(f.targetName) {
  tok::loadSentencePieceModel(source_, f.source, f.sourceName);
  tok::loadSentencePieceModel(target_, f.target, f.targetName);
  const std::string& vocab = f.vocabName;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f.vocab);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(vocab + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || j.empty()) throw InputError(vocab + ": expected an object {piece: id}");
  int maxId = -1;
  for (const auto& [piece, id] : j.items()) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= (1 << 24))
      throw InputError(vocab + ": the id of '" + piece + "' is not an integer in 0..16777215");
    maxId = std::max(maxId, id.get<int>());
  }
  if (vocabSize > 0 && maxId >= vocabSize) {
    throw InputError(vocab + ": id " + std::to_string(maxId) + " does not fit vocab_size " +
                     std::to_string(vocabSize) + " of config.json");
  }
  pieces_.assign(std::size_t(maxId) + 1, std::string());
  for (const auto& [piece, id] : j.items()) {
    const int i = id.get<int>();
    if (!pieces_[std::size_t(i)].empty())
      throw InputError(vocab + ": id " + std::to_string(i) + " is given to two pieces");
    pieces_[std::size_t(i)] = piece;
    ids_[piece] = i;
  }
  auto need = [&](const char* piece) {
    const auto it = ids_.find(piece);
    if (it == ids_.end()) throw InputError(vocab + ": no '" + std::string(piece) + "' piece");
    return it->second;
  };
  eos_ = need("</s>");
  unk_ = need("<unk>");
  if (const auto it = ids_.find("<pad>"); it != ids_.end()) pad_ = it->second;
  for (const auto& [piece, id] : ids_) {
    const bool code = piece.size() > 4 && piece.rfind(">>", 0) == 0 &&
                      piece.compare(piece.size() - 2, 2, "<<") == 0;
    if (code || id == eos_ || id == unk_ || (pad_ && id == *pad_)) specials_.add(piece, id);
  }
}

std::vector<int> MarianTokenizer::encodeWith(const sentencepiece::SentencePieceProcessor& sp,
                                             const std::string& name, std::string_view text,
                                             bool addSpecial) const {
  std::vector<int> ids;
  auto encodePart = [&](std::size_t a, std::size_t b) {
    if (b <= a) return;
    std::vector<std::string> pieces;
    const auto st = sp.Encode(std::string_view(text.data() + a, b - a), &pieces);
    if (!st.ok()) throw InputError(name + ": cannot encode the text (" + st.ToString() + ")");
    for (const std::string& p : pieces) {
      const auto it = ids_.find(p);
      ids.push_back(it == ids_.end() ? unk_ : it->second);
    }
  };
  tok::splitAtLiterals(text, specials_, parseSpecial(), ids, encodePart);
  if (addSpecial) ids.push_back(eos_);
  return ids;
}

std::string MarianTokenizer::pieceBytes(int id) const {
  if (!contains(id) || pieces_[std::size_t(id)].empty())
    throw InputError("token id " + std::to_string(id) + " is not in the vocabulary");
  std::string s = pieces_[std::size_t(id)];
  for (std::size_t at; (at = s.find(kMeta)) != std::string::npos;) s.replace(at, kMeta.size(), " ");
  return s;
}

std::string MarianTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids)
    if (!isSpecial(id)) out += pieceBytes(id);
  if (!out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> marianFromBytes(const MarianFiles& files, int vocabSize) {
  return std::make_unique<MarianTokenizer>(files, vocabSize);
}

std::unique_ptr<Tokenizer> loadMarianTokenizer(const std::string& source,
                                               const std::string& target,
                                               const std::string& vocab, int vocabSize) {
  return marianFromBytes({readFile(source), readFile(target), readFile(vocab), source, target,
                          vocab},
                         vocabSize);
}

}  // namespace attnviz
