// tokenizer.json with a Unigram model (T5, Flan-T5, mT5 as Hugging Face writes them): a small
// SentencePiece Unigram model trained at test time, converted to tokenizer.json as transformers'
// converter does (unigram_reference.py: vocab with scores, the Precompiled normalizer with the
// model's charsmap, Metaspace, TemplateProcessing with </s>), against python3-sentencepiece on
// the spiece.model and @huggingface/tokenizers (unigram_reference.mjs) on the tokenizer.json.
//
// The npm port's Precompiled normalizer is not the model's charsmap but NFKC plus a fixed list
// of characters made spaces (U+200B..U+200F among them); SentencePiece's nmt_nfkc map (and the
// Rust library, which reads the map) keeps the zero-width joiner in an emoji sequence. Texts with
// U+200B..U+200F are therefore compared with python3-sentencepiece only.
#include "tokenizer_test_util.h"

#include "run_binary.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>

namespace attnviz::testing {
namespace {

using json = nlohmann::json;

struct UniReference {
  fs::path dir;
  json spm, hf;
  std::string error;
};

const UniReference& uniReference() {
  static UniReference r = [] {
    UniReference u;
    const std::string key = slurp(testDir() / "unigram_reference.py") +
                            slurp(testDir() / "unigram_reference.mjs") +
                            slurp(testDir() / "corpus.json");
    u.dir = cachedReference("unigram", key, [&](const fs::path& out) -> std::string {
      const std::string corpus = shellQuote((testDir() / "corpus.json").string());
      ShellRun run = runShell(ATTNVIZ_PYTHON " " +
                              shellQuote((testDir() / "unigram_reference.py").string()) + " " +
                              shellQuote(out.string()) + " " + corpus);
      if (run.rc != 0) {
        return "unigram_reference.py failed (it needs Debian's python3-sentencepiece and "
               "python3-protobuf): " + run.out;
      }
      if (!fs::exists(npmModules() / "@huggingface" / "tokenizers")) {
        return "@huggingface/tokenizers is not installed in " + npmModules().string() +
               " (./dev installs it)";
      }
      run = runShell("node " + shellQuote((testDir() / "unigram_reference.mjs").string()) + " " +
                     shellQuote(npmModules().string()) + " " + shellQuote(out.string()) + " " +
                     corpus);
      if (run.rc != 0) return "unigram_reference.mjs failed: " + run.out;
      spit(out / "reference.json", "{}");
      return "";
    }, u.error);
    if (u.error.empty()) {
      u.spm = json::parse(slurp(u.dir / "spm.json"));
      u.hf = json::parse(slurp(u.dir / "hf.json"));
    }
    return u;
  }();
  return r;
}

#define REQUIRE_UNI_REFERENCE(r)                                              \
  do {                                                                       \
    if (!(r).error.empty()) {                                                \
      if (underCi()) FAIL() << (r).error;                                    \
      GTEST_SKIP() << (r).error;                                             \
    }                                                                        \
  } while (0)

std::vector<std::string> corpus() {
  return json::parse(slurp(testDir() / "corpus.json")).get<std::vector<std::string>>();
}

bool hasAny(const std::string& t, std::initializer_list<const char*> chars) {
  for (const char* c : chars) {
    if (t.find(c) != std::string::npos) return true;
  }
  return false;
}

// U+200B..U+200F, which the npm port's Precompiled makes spaces (see the top of the file).
bool npmPortDiffers(const std::string& t) {
  return hasAny(t, {"\u200b", "\u200c", "\u200d", "\u200e", "\u200f"});
}

// Where the tokenizers library (which attnviz follows) and SentencePiece part:
//   - WhitespaceSplit (Flan's layout) splits at every White_Space character (Rust's
//     char::is_whitespace); U+0085, which the nmt_nfkc map keeps, is one. SentencePiece (and the
//     npm port's \s) do not split there;
//   - Precompiled looks a grapheme cluster of 6 bytes or more up one character at a time, so a
//     Hangul syllable written as conjoining jamo (U+1100..U+11FF, 3 bytes each) stays jamo;
//     SentencePiece's longest-prefix match composes it.
bool splitsAtNel(const std::string& t) { return hasAny(t, {"\u0085"}); }
bool hasConjoiningJamo(const std::string& t) {
  for (std::size_t i = 0; i + 2 < t.size(); ++i) {
    const auto b0 = static_cast<unsigned char>(t[i]), b1 = static_cast<unsigned char>(t[i + 1]);
    if (b0 == 0xE1 && b1 >= 0x84 && b1 <= 0x87) return true;  // U+1100..U+11FF
  }
  return false;
}

void expectMatches(const Tokenizer& tok, const json* spm, const json* hf, const std::string& what,
                   const std::function<bool(const std::string&)>& libraryDiffers = nullptr) {
  const std::vector<std::string> texts = corpus();
  int compared = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (libraryDiffers && libraryDiffers(texts[i])) continue;
    const std::vector<int> ids = tok.encode(texts[i], true);
    if (spm) {
      EXPECT_EQ(joinIds(ids), joinIds((*spm)[i].get<std::vector<int>>()))
          << what << " vs python3-sentencepiece, text " << i << ": " << json(texts[i]).dump();
    }
    if (hf && !npmPortDiffers(texts[i])) {
      ++compared;
      EXPECT_EQ(joinIds(ids), joinIds((*hf)["special"][i].get<std::vector<int>>()))
          << what << " vs @huggingface/tokenizers, text " << i << ": " << json(texts[i]).dump();
      EXPECT_EQ(joinIds(tok.encode(texts[i], false)),
                joinIds((*hf)["plain"][i].get<std::vector<int>>()))
          << what << " (no special tokens), text " << i << ": " << json(texts[i]).dump();
    }
  }
  if (hf) EXPECT_GT(compared, 40);
}

// T5 v1.1's folder: tokenizer.json (Unigram) beside spiece.model; tokenizer.json is the one read.
TEST(UnigramJson, T5FolderMatchesSentencePieceAndHuggingFace) {
  const UniReference& r = uniReference();
  REQUIRE_UNI_REFERENCE(r);
  const auto tok = loadFolderTokenizer((r.dir / "t5").string(), 32128);
  EXPECT_EQ(tok->kind(), "tokenizer.json: Unigram");
  EXPECT_EQ(tok->eos(), 1);
  EXPECT_EQ(tok->unk(), 2);
  expectMatches(*tok, &r.spm["t5"], &r.hf["t5"], "t5");
  // The sentinels are the added tokens after the pieces, <extra_id_0> last.
  const std::vector<int> s = tok->encode("<extra_id_0>", false);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0], tok->size() - 1);
  EXPECT_TRUE(tok->isSpecial(s[0]));
  // T5's pair template: A </s> B </s>.
  const PairEncoding p = tok->encodePair("the sun", "a dog", true);
  std::vector<int> want = tok->encode("the sun", true);
  const std::vector<int> b = tok->encode("a dog", true);
  want.insert(want.end(), b.begin(), b.end());
  EXPECT_EQ(p.ids, want);
  EXPECT_EQ(tok->decode(tok->encode("the sun was warm", false)), "the sun was warm");
}

// Flan-T5's layout: tokenizer.json alone, WhitespaceSplit + Metaspace(add_prefix_space).
TEST(UnigramJson, FlanFolderWithTokenizerJsonAlone) {
  const UniReference& r = uniReference();
  REQUIRE_UNI_REFERENCE(r);
  ASSERT_FALSE(fs::exists(r.dir / "flan" / "spiece.model"));
  const auto tok = loadFolderTokenizer((r.dir / "flan").string());
  expectMatches(*tok, &r.spm["t5"], &r.hf["flan"], "flan", splitsAtNel);
  // The Rust library's WhitespaceSplit: "c\u0085d" is two words, each with its own "▁".
  const std::vector<int> nel = tok->encode("c\u0085d", false);
  EXPECT_EQ(nel, (std::vector<int>{tok->encode("c", false)[0], tok->encode("d", false)[0]}));
}

// byte_fallback: what no piece covers is its bytes' <0xNN> pieces (python3-sentencepiece).
TEST(UnigramJson, ByteFallbackMatchesSentencePiece) {
  const UniReference& r = uniReference();
  REQUIRE_UNI_REFERENCE(r);
  const auto tok = loadFolderTokenizer((r.dir / "bytes").string());
  EXPECT_EQ(tok->kind(), "tokenizer.json: Unigram, byte fallback");
  expectMatches(*tok, &r.spm["bytes"], nullptr, "bytes", hasConjoiningJamo);
}

// The shipped T5 (assets/models/kjv-t5-align) with its spiece.model converted to tokenizer.json
// beside it, as Hugging Face saves a T5 folder: the model opens through tokenizer.json and its
// ids are python3-sentencepiece's, through the tokenizer API and `attnviz tokenize`.
TEST(UnigramJson, ShippedT5OpensThroughTokenizerJson) {
  const fs::path shipped = fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "kjv-t5-align";
  TempDir d;
  const ShellRun conv = runShell(
      ATTNVIZ_PYTHON " " + shellQuote((testDir() / "unigram_reference.py").string()) +
      " --convert " + shellQuote((shipped / "spiece.model").string()) + " " +
      shellQuote(d.path.string()) + " " + shellQuote((testDir() / "corpus.json").string()));
  if (conv.rc != 0) {
    if (underCi()) FAIL() << conv.out;
    GTEST_SKIP() << "unigram_reference.py --convert failed: " << conv.out;
  }
  for (const char* f : {"config.json", "model.safetensors", "spiece.model"}) {
    fs::copy_file(shipped / f, d.path / f);
  }
  const json spm = json::parse(slurp(d.path / "spm.json"));
  const auto m = Model::open(d.path.string());
  EXPECT_EQ(m->tokenizer().kind(), "tokenizer.json: Unigram");
  const std::vector<std::string> texts = corpus();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (hasConjoiningJamo(texts[i])) continue;  // see hasConjoiningJamo
    EXPECT_EQ(joinIds(m->tokenizer().encode(texts[i], true)),
              joinIds(spm[i].get<std::vector<int>>()))
        << "text " << i << ": " << json(texts[i]).dump();
  }
  const CliRun run =
      runBinary({"tokenize", "--model", d.path.string(), "--text", texts[5]}, d.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, joinIds(spm[5].get<std::vector<int>>()) + "\n");
}

// A crafted Unigram tokenizer.json is one line naming the file.
TEST(UnigramJson, MalformedFilesAreInputErrors) {
  const UniReference& r = uniReference();
  REQUIRE_UNI_REFERENCE(r);
  const json good = json::parse(slurp(r.dir / "t5" / "tokenizer.json"));
  auto refused = [&](const std::function<void(json&)>& edit, const std::string& says) {
    json j = good;
    edit(j);
    try {
      tokenizerFromJson(j.dump(), "", "some/tokenizer.json");
      ADD_FAILURE() << "accepted: " << says;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.starts_with("some/tokenizer.json: ")) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  refused([](json& j) { j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "@@@"; },
          "not base64");
  // "/////w==": a trie size of 0xFFFFFFFF in a 4-byte map.
  refused([](json& j) { j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "/////w=="; },
          "does not fit");
  refused([](json& j) { j["model"]["vocab"][3] = json::array({"x"}); }, "not [piece, score]");
  refused([](json& j) { j["model"]["vocab"] = json::array(); }, "empty");
  refused([](json& j) { j["model"]["unk_id"] = 100000; }, "unk_id");
  // Without an unk_id, a character no piece covers is named.
  json j = good;
  j["model"]["unk_id"] = nullptr;
  const auto tok = tokenizerFromJson(j.dump(), "", "some/tokenizer.json");
  EXPECT_THROW(tok->encode("\xE2\x98\x83", false), InputError);
  // A map whose trie points anywhere is read within bounds: random bytes never crash.
  std::string blob;
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    blob.assign(4 + 4 * 64 + 16, '\0');
    for (char& ch : blob) ch = static_cast<char>(rng());
    const std::uint32_t size = 4 * 64;
    std::memcpy(blob.data(), &size, 4);
    static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    for (std::size_t i = 0; i < blob.size(); i += 3) {
      const std::uint32_t v = (std::uint32_t(static_cast<unsigned char>(blob[i])) << 16) |
                              (i + 1 < blob.size() ? std::uint32_t(static_cast<unsigned char>(blob[i + 1])) << 8 : 0) |
                              (i + 2 < blob.size() ? std::uint32_t(static_cast<unsigned char>(blob[i + 2])) : 0);
      b64 += kB64[(v >> 18) & 63];
      b64 += kB64[(v >> 12) & 63];
      b64 += i + 1 < blob.size() ? kB64[(v >> 6) & 63] : '=';
      b64 += i + 2 < blob.size() ? kB64[v & 63] : '=';
    }
    json k = good;
    k["normalizer"]["normalizers"][0]["precompiled_charsmap"] = b64;
    const auto t = tokenizerFromJson(k.dump(), "", "fuzzed/tokenizer.json");
    EXPECT_NO_FATAL_FAILURE(t->encode("Hello w\xC3\xB6rld \xF0\x9F\x98\x80 \xE2\x85\xA7", false));
  }
}

}  // namespace
}  // namespace attnviz::testing
