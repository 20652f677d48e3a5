#include "attnviz/model/tokenizers/sentencepiece.h"

#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include <filesystem>
#include <optional>

namespace attnviz {

namespace {

const std::string kMeta = "\xE2\x96\x81";

class SpTokenizer final : public Tokenizer {
 public:
  SpTokenizer(const std::string& bytes, const std::string& configText, const std::string& name,
              const std::string& configName, int vocabSize, bool appendEos = false,
              bool t5Sentinels = false);

  std::vector<int> encode(std::string_view text, bool addSpecial) const override;
  std::string pieceBytes(int id) const override;
  std::string decode(const std::vector<int>& ids) const override;
  int size() const override { return sp_.GetPieceSize() + extras_; }
  std::optional<int> bos() const override { return bos_; }
  std::optional<int> eos() const override { return eos_; }
  std::optional<int> unk() const override { return unk_; }
  bool isSpecial(int id) const override {
    return contains(id) && (id >= sp_.GetPieceSize() || sp_.IsControl(id) || sp_.IsUnknown(id));
  }
  std::string kind() const override { return kind_; }
  std::string kind_ = "SentencePiece (tokenizer.model)";

 private:
  sentencepiece::SentencePieceProcessor sp_;
  std::string name_;
  tok::LiteralMatcher specials_;
  std::optional<int> bos_, eos_, unk_;
  bool addBos_ = false, addEos_ = false, dummyPrefix_ = true;
  // T5's sentinels after the model's pieces: <extra_id_k> is id pieces + extras - 1 - k.
  int extras_ = 0;
};

std::string sentinel(int k) { return "<extra_id_" + std::to_string(k) + ">"; }

std::optional<int> idOrNone(int id) { return id >= 0 ? std::optional<int>(id) : std::nullopt; }

SpTokenizer::SpTokenizer(const std::string& bytes, const std::string& configText,
                         const std::string& name, const std::string& configName, int vocabSize,
                         bool appendEos, bool t5Sentinels)
    : name_(name) {
  tok::loadSentencePieceModel(sp_, bytes, name);
  const int n = sp_.GetPieceSize();
  if (vocabSize > 0 && n > vocabSize) {
    throw InputError(name + ": " + std::to_string(n) + " pieces do not fit vocab_size " +
                     std::to_string(vocabSize) +
                     " of config.json (the tokenizer belongs to another model)");
  }
  for (int id = 0; id < n; ++id) {
    if (sp_.IsControl(id) || sp_.IsUnknown(id)) specials_.add(sp_.IdToPiece(id), id);
  }
  // T5's tokenizer puts 100 sentinels (<extra_id_0> .. <extra_id_99>, the span-corruption
  // masks) after the model's pieces, in reverse: <extra_id_0> is the last id. They are there
  // when the model's vocabulary has room for them (t5-small: 32000 pieces, vocab_size 32128).
  if (t5Sentinels && vocabSize >= n + 100) {
    extras_ = 100;
    for (int k = 0; k < extras_; ++k) specials_.add(sentinel(k), n + extras_ - 1 - k);
  }
  bos_ = idOrNone(sp_.bos_id());
  eos_ = idOrNone(sp_.eos_id());
  unk_ = idOrNone(sp_.unk_id());
  addBos_ = bos_.has_value();
  addEos_ = appendEos && eos_.has_value();
  {
    std::vector<int> ids;
    std::string joined;
    if (sp_.Encode(std::string("x"), &ids).ok()) {
      for (int id : ids) joined += sp_.IdToPiece(id);
    }
    dummyPrefix_ = joined.starts_with(kMeta);
  }
  if (configText.empty()) return;
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(configText);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(configName + ": not valid JSON (" + e.what() + ")");
  }
  if (!cfg.is_object()) throw InputError(configName + ": expected a JSON object");
  auto pieceId = [&](const char* key) -> std::optional<int> {
    if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    const nlohmann::json& v = cfg[key];
    std::string piece;
    if (v.is_string()) {
      piece = v.get<std::string>();
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      piece = v["content"].get<std::string>();
    } else {
      throw InputError(configName + ": " + key + " is neither a string nor {\"content\": ...}");
    }
    const int id = sp_.PieceToId(piece);
    if (id >= 0 && id < n && sp_.IdToPiece(id) == piece) return id;
    return std::nullopt;
  };
  if (const auto id = pieceId("bos_token")) bos_ = id;
  if (const auto id = pieceId("eos_token")) eos_ = id;
  auto flag = [&](const char* key, bool& out, const std::optional<int>& token, const char* tname) {
    if (!cfg.contains(key) || cfg[key].is_null()) return;
    if (!cfg[key].is_boolean()) throw InputError(configName + ": " + key + " is not a boolean");
    out = cfg[key].get<bool>();
    if (out && !token) {
      throw InputError(configName + ": " + key + " is true but the model has no " + tname);
    }
  };
  flag("add_bos_token", addBos_, bos_, "BOS piece");
  flag("add_eos_token", addEos_, eos_, "EOS piece");
}

std::vector<int> SpTokenizer::encode(std::string_view text, bool addSpecial) const {
  std::vector<int> ids;
  if (addSpecial && addBos_) ids.push_back(*bos_);
  auto encodePart = [&](std::size_t a, std::size_t b) {
    if (b <= a) return;
    std::vector<int> part;
    const auto st = sp_.Encode(std::string_view(text.data() + a, b - a), &part);
    if (!st.ok()) throw InputError(name_ + ": cannot encode the text (" + st.ToString() + ")");
    ids.insert(ids.end(), part.begin(), part.end());
  };
  // The matched pieces are all control or unknown ones: none when special parsing is off.
  tok::splitAtLiterals(text, specials_, parseSpecial(), ids, encodePart);
  if (addSpecial && addEos_) ids.push_back(*eos_);
  return ids;
}

std::string SpTokenizer::pieceBytes(int id) const {
  if (!contains(id)) throw InputError("token id " + std::to_string(id) + " is not in the vocab");
  if (id >= sp_.GetPieceSize()) return sentinel(sp_.GetPieceSize() + extras_ - 1 - id);
  const std::string& piece = sp_.IdToPiece(id);
  if (sp_.IsControl(id) || sp_.IsUnknown(id)) return piece;
  if (sp_.IsByte(id) && piece.size() == 6) {
    return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
  }
  std::string out;
  for (std::size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kMeta.size(), kMeta) == 0) {
      out.push_back(' ');
      i += kMeta.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

std::string SpTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  bool prevSpecial = true;
  for (int id : ids) {
    std::string bytes = pieceBytes(id);
    const bool special = isSpecial(id);
    if (!special && prevSpecial && dummyPrefix_ && !bytes.empty() && bytes[0] == ' ') {
      bytes.erase(0, 1);
    }
    prevSpecial = special;
    out += bytes;
  }
  return out;
}

}  // namespace

void tok::loadSentencePieceModel(sentencepiece::SentencePieceProcessor& sp,
                                 const std::string& bytes, const std::string& name) {
  sentencepiece::util::Status status;
  try {
    status = sp.LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {
    // libsentencepiece throws from inside, e.g. on an empty piece (its trie refuses
    // zero-length keys): still a bad file, said in one line.
    throw InputError(name + ": not a usable SentencePiece model (" + e.what() + ")");
  }
  if (!status.ok()) {
    throw InputError(name + ": not a SentencePiece model (" + status.ToString() + ")");
  }
  if (sp.GetPieceSize() <= 0) throw InputError(name + ": the SentencePiece model has no pieces");
}

std::unique_ptr<Tokenizer> sentencePieceFromBytes(const std::string& modelBytes,
                                                  const std::string& configText,
                                                  const std::string& modelName,
                                                  const std::string& configName, int vocabSize) {
  return std::make_unique<SpTokenizer>(modelBytes, configText, modelName, configName, vocabSize);
}

std::unique_ptr<Tokenizer> t5SentencePieceFromBytes(const std::string& modelBytes,
                                                    const std::string& name, int vocabSize) {
  auto t = std::make_unique<SpTokenizer>(modelBytes, "", name, "tokenizer_config.json", vocabSize,
                                         true, true);
  t->kind_ = "GGUF t5 (SentencePiece Unigram)";
  return t;
}

std::unique_ptr<Tokenizer> loadT5SentencePieceTokenizer(const std::string& modelPath,
                                                        int vocabSize) {
  return std::make_unique<SpTokenizer>(readFile(modelPath), "", modelPath,
                                       "tokenizer_config.json", vocabSize, true, true);
}

std::unique_ptr<Tokenizer> loadSentencePieceTokenizer(const std::string& modelPath,
                                                      const std::string& configPath,
                                                      int vocabSize) {
  const std::string bytes = readFile(modelPath);
  std::string config;
  if (!configPath.empty() && std::filesystem::exists(configPath)) config = readFile(configPath);
  return sentencePieceFromBytes(bytes, config, modelPath,
                                configPath.empty() ? "tokenizer_config.json" : configPath,
                                vocabSize);
}

}  // namespace attnviz
