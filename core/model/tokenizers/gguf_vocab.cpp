#include "attnviz/model/tokenizers/gguf_vocab.h"

#include "tokenizer_internal.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/model/tokenizers/sentencepiece.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <queue>
#include <unordered_map>

namespace attnviz {

namespace {

const std::string kMeta = "\xE2\x96\x81";  // U+2581

// ---- Pre-tokenizer regexes: llama.cpp's table (src/llama-vocab.cpp, llm_tokenizer_bpe) ---------
//
// Each tokenizer.ggml.pre name maps to the regexes llama.cpp runs for it, in its order; each regex
// splits every piece in turn, keeping the text between matches ("Isolated"). The patterns are in
// Hugging Face's dialect (Oniguruma), which tok::Regex compiles with ICU. Translation rules:
//   - Where llama.cpp rewrote a tokenizer.json pattern for std::regex (case-expanded contractions
//     "'[sS]", letter classes spelt "((?=[\p{L}])([^a-z]))", possessive quantifiers made greedy)
//     and quotes the original in a comment, the original is used: ICU runs it as Oniguruma does
//     (ICU has (?i:...), \p{Lu}-style classes inside [...], and possessive quantifiers ?+ ++ *+).
//   - Where llama.cpp gives only its own spelling, that spelling is used as it stands.
//   - Literal character ranges that Unicode normalization could change are written as \x{...}
//     escapes (see kDeepseekLlmLetters and kAfmoeScripts).
//   - Where llama.cpp replaces a regex by hand-written code (Kimi-K2's "\p{Han}+", AFMoE's
//     "\p{AFMoE_digits}"), the pattern that code stands for is used (see each).

// GPT-2's pattern as llama.cpp writes it (without the final "|\s+": what that alternative would
// match is kept anyway, as text between matches).
const char* const kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3's tokenizer.json pattern (llama.cpp quotes it and runs a case-expanded copy).
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's tokenizer.json pattern (quoted by llama.cpp likewise; Grok-2's is the same).
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's with llama.cpp's own case-expanded contractions (laguna: no original quoted).
const char* const kQwen2Expanded =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 3.5's tokenizer.json pattern (marks join letters).
const char* const kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Jais 2's tokenizer.json pattern: Llama 3's with runs of spaces cut in powers of two.
const char* const kJais2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
const char* const kMinicpm5 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kSeedCoder =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's without the contractions (Turkish apostrophe suffixes stay on their word).
const char* const kUfakzeka =
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kExaoneMoe =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";
// Bailing MoE's tokenizer.json pattern. llama.cpp made its possessive quantifiers ("?+", "++")
// greedy for std::regex; ICU has possessive quantifiers, so they stay as written.
const char* const kBailingMoe =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
const char* const kPoro = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Granite multilingual embedding (97M): llama.cpp's own spelling of GPT-4o's pattern with marks
// counted as letters (no original quoted).
const char* const kGraniteEmbMulti =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kYoutuScripts = "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+";
const char* const kYoutu =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Digits in groups of three from the right ("1234567" -> "1", "234", "567"): Tiny Aya's
// tokenizer.json pattern. llama.cpp runs the same hand-written splitter for it and for AFMoE's
// "\p{AFMoE_digits}", so this pattern stands for both.
const char* const kDigitsByThree = R"(\d{1,3}(?=(?:\d{3})*\b))";
const char* const kTinyAya =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Kimi-K2: llama.cpp's "\p{Han}+" only selects its hand-written splitter for the pattern of
// Kimi's tokenization_kimi.py, which is used here as written. Its classes
// "[\p{Lu}...\p{M}&&[^\p{Han}]]" are Oniguruma's intersection of everything before "&&" with
// [^\p{Han}]; ICU has "&&" with the same reading (checked: ICU's "[\p{Lu}\p{Ll}&&[^A]]" leaves
// out 'A' as well as keeping 'a'), and the Kimi-K2 test would see Han letters joining Latin ones.
const char* const kKimiK2 =
    R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek V3 (and Hunyuan dense, JoyAI, HY v4, Spark 2.5, AFMoE): ASCII punctuation followed by
// ASCII letters, letters with their marks, punctuation and symbols.
const char* const kCjkKana = "[一-龥぀-ゟ゠-ヿ]+";
const char* const kDeepseek3 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kSpark25 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)";
// AFMoE's CJK and Southeast Asian blocks, one range per block: CJK Unified Ideographs, Extension
// A, CJK Compatibility Ideographs, Hiragana, Katakana, halfwidth Katakana, Kangxi Radicals, Thai,
// Lao, Khmer, Myanmar, Myanmar Extended-A and -B, Hangul Syllables, Hangul Jamo. Escaped because
// U+F900 (the Compatibility block's first character) is changed to U+8C48 by Unicode
// normalization, which would silently narrow the range if the source text were normalized.
const char* const kAfmoeScripts =
    R"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{F900}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{0E00}-\x{0E7F}\x{0E80}-\x{0EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)";
// DeepSeek LLM's letters: DeepSeek's tokenizer.json lists the cased letters (Lu, Ll, Lt) of the
// scripts it covers as literal ranges. Three range ends and three single letters in that list
// are characters that Unicode normalization (NFC) replaces by another code point, and the copy
// this table was first taken from had been normalized:
//   U+1F7D -> U+03CE, U+1FD3 -> U+0390, U+1FDB -> U+038A   ranges that then ran backwards,
//                                                           which ICU refuses
//                                                           (U_REGEX_INVALID_RANGE);
//   U+1FBE -> U+03B9, U+2126 -> U+03A9                      letters already in the class;
//   U+212A -> U+004B ('K')                                  "K-ℭ" became U+004B..U+212D, which
//                                                           would take in digits' neighbours,
//                                                           punctuation, spaces and much more.
// The restored class lies wholly within Lu/Ll/Lt (checked against the Unicode data), as the
// original does. It is written with escapes so that no normalization can change it again.
const char* const kDeepseekLlmLetters =
    R"(\s?[\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})"
    R"(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386})"
    R"(\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F})"
    R"(\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA})"
    R"(\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
    R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";

// BPE over raw UTF-8 with spaces as U+2581 (llama.cpp's Gemma 4 style) or whitespace-split
// words: tokenized differently from byte-level BPE, not supported.
const char* const kNotByteLevel =
    "runs BPE over raw UTF-8 rather than GPT-2's byte alphabet, which attnviz does not support";

struct PreTokenizerRow {
  std::vector<std::string> names;
  std::vector<std::string> regexes;
  bool ignoreMerges = false;
  bool addBos = false;  // llama.cpp's default for add_bos_token
  std::string unsupported;

  PreTokenizerRow(std::vector<std::string> n, std::vector<std::string> r, bool ignore = false,
                  bool bos = false, std::string why = {})
      : names(std::move(n)), regexes(std::move(r)), ignoreMerges(ignore), addBos(bos),
        unsupported(std::move(why)) {}
};

const std::vector<PreTokenizerRow>& preTokenizerTable() {
  static const std::vector<PreTokenizerRow> table = {
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano"},
       {kLlama3}, true, true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}},
      {{"jais-2"}, {kJais2}},
      {{"minicpm5"}, {R"(\p{N}{1,3})", kMinicpm5}, true},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLlmLetters, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$",
        "[一-龥ࠀ-一가-퟿]+", R"(\p{N}+)"}},
      {{"deepseek-coder"},
       {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"}},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {R"(\p{N}{1,3})", kCjkKana, kDeepseek3}},
      {{"spark2_5"}, {R"(\p{N}{1,3})", kCjkKana, kSpark25, R"(\p{N})"}},
      {{"youtu"}, {kYoutuScripts, kYoutu}, true},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
        "mellum2"},
       {R"(\p{N})", kGpt2}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
        "jina-v1-en", "jina-v2-code", "roberta-bpe", "a.x-4.0", "mellum", "modern-bert", "mpt",
        "olmo", "jais", "exaone4", "trillion", "granite-docling"},
       {kGpt2}},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan",
        "solar-open", "grok-2"},
       {kQwen2}},
      {{"qwen35"}, {kQwen35}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}},
      {{"viking"}, {kPoro, R"(\p{N})"}},
      {{"tekken"}, {kTekken}, true, true},
      {{"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
        R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
       false, true},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}},
      {{"granite-embed-multi-97m"}, {kGraniteEmbMulti}, true},
      {{"tiny_aya", "cohere2moe"}, {kDigitsByThree, kTinyAya}},
      {{"kimi-k2"}, {kKimiK2}},
      // SuperBPE: digit runs, then each run cut where a multiple of three digits is left (the
      // second pattern matches only the empty string at those places).
      {{"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailingMoe}},
      {{"seed-coder"}, {kSeedCoder}},
      {{"ufakzeka"}, {kUfakzeka}},
      {{"afmoe"}, {kDigitsByThree, kAfmoeScripts, kDeepseek3}},
      {{"laguna"}, {"[^\\n]+|[\\n]+", kQwen2Expanded}},
      {{"exaone-moe"}, {kExaoneMoe}},
      {{"gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"}, {}, false, false,
       kNotByteLevel},
  };
  return table;
}

const PreTokenizerRow* preTokenizerFor(const std::string& pre) {
  const std::string name = pre.empty() ? std::string("default") : pre;
  for (const PreTokenizerRow& row : preTokenizerTable()) {
    if (std::find(row.names.begin(), row.names.end(), name) != row.names.end()) return &row;
  }
  return nullptr;
}

// ---- The vocabulary common to every kind -------------------------------------------------------

class GgufTokenizer : public Tokenizer {
 public:
  GgufTokenizer(const GgufVocab& v, const std::string& name, const GgufTokenizerOptions& o);

  std::vector<int> encode(std::string_view text, bool addSpecial) const override;
  PairEncoding encodePair(std::string_view a, std::string_view b, bool addSpecial) const override;
  std::optional<int> mask() const override { return mask_; }
  std::string pieceBytes(int id) const override;
  std::string decode(const std::vector<int>& ids) const override;
  int size() const override { return static_cast<int>(tokens_.size()); }
  std::optional<int> bos() const override { return bos_; }
  std::optional<int> eos() const override { return eos_; }
  std::optional<int> unk() const override { return unk_; }
  bool isSpecial(int id) const override {
    return contains(id) && (type(id) == GgufTokenType::Control || type(id) == GgufTokenType::Unknown);
  }
  std::string kind() const override { return kindName_; }

 private:
  enum class Kind { Spm, Bpe, Wpm } kind_ = Kind::Spm;
  std::string name_, kindName_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<int> types_;
  std::unordered_map<std::string, int> ids_;
  std::optional<int> bos_, eos_, unk_, sep_, mask_;
  bool addBos_ = false, addEos_ = false, addSpacePrefix_ = true;
  int byteIds_[256];
  // Special pieces cut out of the text: longest first, with llama.cpp's lstrip/rstrip.
  struct Special {
    int id;
    bool lstrip, rstrip;
    bool control;  // control or unknown: matched only when parsing special tokens
  };
  std::vector<Special> specials_;
  // gpt2
  std::vector<tok::Regex> regexes_;
  tok::MergeTable merges_;
  bool ignoreMerges_ = false;

  GgufTokenType type(int id) const {
    return types_.empty() ? GgufTokenType::Normal : static_cast<GgufTokenType>(types_[id]);
  }
  const int* find(std::string_view piece) const {
    const auto it = ids_.find(std::string(piece));
    return it == ids_.end() ? nullptr : &it->second;
  }
  void byteTokens(std::string_view chr, std::vector<int>& out) const;
  void spm(const std::string& text, std::vector<int>& out) const;
  void bpe(std::string_view text, std::vector<int>& out) const;
  void wpm(std::string_view text, std::vector<int>& out) const;
};

GgufTokenizer::GgufTokenizer(const GgufVocab& v, const std::string& name,
                             const GgufTokenizerOptions& o)
    : name_(name) {
  parseSpecial_ = o.parseSpecial;
  std::fill(std::begin(byteIds_), std::end(byteIds_), -1);
  auto fail = [&](const std::string& what) -> void { throw InputError(name + ": " + what); };
  if (v.model == "llama") {
    kind_ = Kind::Spm;
  } else if (v.model == "gpt2") {
    kind_ = Kind::Bpe;
  } else if (v.model == "bert") {
    kind_ = Kind::Wpm;
  } else {
    fail("unsupported tokenizer model '" + v.model + "' (tokenizer.ggml.model)");
  }
  const std::size_t n = v.tokens.size();
  if (n == 0) fail("the vocabulary is empty (tokenizer.ggml.tokens)");
  if (n > (1u << 24)) fail("the vocabulary has " + std::to_string(n) + " tokens, too many");
  if (!v.scores.empty() && v.scores.size() != n) fail("tokenizer.ggml.scores is not one per token");
  if (!v.tokenType.empty() && v.tokenType.size() != n) {
    fail("tokenizer.ggml.token_type is not one per token");
  }
  tokens_ = v.tokens;
  scores_ = v.scores;
  types_ = v.tokenType;
  for (int& t : types_) {
    if (t < 0 || t > 6) t = 0;  // llama.cpp: undefined
  }
  ids_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (tokens_[i].empty()) tokens_[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    if (!ids_.emplace(tokens_[i], static_cast<int>(i)).second) {
      fail("duplicate token '" + tokens_[i] + "' (ids " + std::to_string(ids_[tokens_[i]]) +
           " and " + std::to_string(i) + ")");
    }
  }
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    if (const int* id = find(hex)) byteIds_[b] = *id;
  }

  // Special ids: the file's, else the kind's defaults (when inside the vocabulary).
  auto pick = [&](const std::optional<int>& given, int dflt) -> std::optional<int> {
    if (given && *given >= 0 && static_cast<std::size_t>(*given) < n) return given;
    if (dflt >= 0 && static_cast<std::size_t>(dflt) < n) return dflt;
    return std::nullopt;
  };
  switch (kind_) {
    case Kind::Spm:
      bos_ = pick(v.bos, 1);
      eos_ = pick(v.eos, 2);
      unk_ = pick(v.unk, 0);
      addBos_ = true;
      addSpacePrefix_ = v.addSpacePrefix.value_or(true);
      kindName_ = "GGUF llama (SentencePiece-style BPE over scores)";
      break;
    case Kind::Bpe: {
      const PreTokenizerRow* pre = preTokenizerFor(v.pre);
      if (!pre) fail("unknown pre-tokenizer type '" + v.pre + "' (tokenizer.ggml.pre)");
      if (!pre->unsupported.empty()) {
        fail("pre-tokenizer '" + v.pre + "' (tokenizer.ggml.pre) " + pre->unsupported);
      }
      // llama.cpp defaults both to id 11 (a comma in GPT-2's vocabulary); no id is safer for
      // a model that generates until EOS.
      bos_ = pick(v.bos, -1);
      eos_ = pick(v.eos, -1);
      unk_ = pick(v.unk, -1);
      addBos_ = pre->addBos;
      ignoreMerges_ = pre->ignoreMerges;
      for (const std::string& r : pre->regexes) {
        regexes_.emplace_back(r, name + ": pre-tokenizer '" + v.pre + "'");
      }
      for (std::size_t i = 0; i < v.merges.size(); ++i) {
        const std::string& m = v.merges[i];
        const std::size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) {
          fail("merge " + std::to_string(i) + " ('" + m + "') is not two tokens and a space");
        }
        const int* a = find(std::string_view(m).substr(0, sp));
        const int* b = find(std::string_view(m).substr(sp + 1));
        const int* ab = find(m.substr(0, sp) + m.substr(sp + 1));
        // A merge whose parts or result are not tokens can never apply to tokens: skipped.
        if (a && b && ab) merges_.add(*a, *b, static_cast<int>(i), *ab);
      }
      kindName_ = "GGUF gpt2 (byte-level BPE, pre-tokenizer '" +
              (v.pre.empty() ? std::string("default") : v.pre) + "')";
      break;
    }
    case Kind::Wpm:
      bos_ = pick(v.cls ? v.cls : v.bos, 101);
      eos_ = pick(v.eos, -1);
      unk_ = pick(v.unk, 100);
      sep_ = pick(v.sep, 102);
      addBos_ = true;
      kindName_ = "GGUF bert (WordPiece)";
      break;
  }
  mask_ = pick(v.mask, -1);
  for (const char* name : {"[MASK]", "<mask>"}) {
    if (const int* id = find(name); id && !mask_) mask_ = *id;
  }
  if (v.addBos) addBos_ = *v.addBos;
  if (v.addEos) addEos_ = *v.addEos;
  if (addBos_ && !bos_) fail("add_bos_token is true but the vocabulary has no BOS token");
  if (addEos_ && !eos_) fail("add_eos_token is true but the vocabulary has no EOS token");
  if (kind_ == Kind::Wpm && addBos_ && !sep_) fail("the vocabulary has no [SEP] token");

  // Pieces matched in the text before anything else.
  std::string lowerName = v.name;
  for (char& ch : lowerName) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const bool phi3 = lowerName.find("phi-3") != std::string::npos ||
                    lowerName.find("phi3") != std::string::npos;
  for (std::size_t i = 0; i < n; ++i) {
    const int id = static_cast<int>(i);
    const GgufTokenType t = type(id);
    const bool user = t == GgufTokenType::UserDefined;
    const bool ctrl = t == GgufTokenType::Control || t == GgufTokenType::Unknown;
    if (!user && !ctrl) continue;
    bool rstrip = false;
    if (phi3) {
      rstrip = !(tokens_[i] == "<unk>" || tokens_[i] == "<s>" || tokens_[i] == "<|endoftext|>");
    }
    specials_.push_back({id, false, rstrip, ctrl});
  }
  std::stable_sort(specials_.begin(), specials_.end(), [&](const Special& a, const Special& b) {
    return tokens_[a.id].size() > tokens_[b.id].size();
  });
}

void GgufTokenizer::byteTokens(std::string_view chr, std::vector<int>& out) const {
  for (char c : chr) {
    const int id = byteIds_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_) {
      out.push_back(*unk_);
    } else {
      throw InputError("the text needs " + tok::describeChar(chr, 0) + ", which " + name_ +
                       " cannot express (no token, no byte token, no unknown token)");
    }
  }
}

void GgufTokenizer::spm(const std::string& text, std::vector<int>& out) const {
  struct Sym {
    std::size_t start, len;
    int prev, next;
  };
  std::vector<Sym> sym;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = static_cast<std::size_t>(tok::decodeUtf8(text, i).len);
    const int k = static_cast<int>(sym.size());
    sym.push_back({i, len, k - 1, i + len < text.size() ? k + 1 : -1});
    i += len;
  }
  if (sym.empty()) return;
  struct Bigram {
    float score;
    int left, right;
    std::size_t size;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto mergeable = [&](int id) {
    const GgufTokenType t = type(id);
    return t == GgufTokenType::Normal || t == GgufTokenType::UserDefined ||
           t == GgufTokenType::Undefined;
  };
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const std::string_view joined(text.data() + sym[l].start, sym[l].len + sym[r].len);
    const int* id = find(joined);
    if (!id || !mergeable(*id)) return;
    queue.push({scores_.empty() ? 0.0f : scores_[*id], l, r, joined.size()});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = sym[b.left];
    Sym& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size || l.next != b.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    consider(l.prev, b.left);
    consider(b.left, l.next);
  }
  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece(text.data() + sym[i].start, sym[i].len);
    if (const int* id = find(piece)) {
      out.push_back(*id);
    } else {
      byteTokens(piece, out);
    }
  }
}

void GgufTokenizer::bpe(std::string_view text, std::vector<int>& out) const {
  using Range = std::pair<std::size_t, std::size_t>;
  std::vector<Range> pieces{{0, text.size()}};
  for (const tok::Regex& re : regexes_) {
    std::vector<Range> next;
    for (const Range& p : pieces) {
      const std::string_view s = text.substr(p.first, p.second - p.first);
      // Empty matches count as cut points (llama.cpp's std::regex split does so; SuperBPE's
      // digit pattern matches only the empty string); empty pieces are dropped.
      for (const Range& r :
           tok::splitAt(s, re.findAll(s, true), tok::SplitBehavior::Isolated, false)) {
        if (r.second > r.first) next.emplace_back(p.first + r.first, p.first + r.second);
      }
    }
    pieces = std::move(next);
  }
  std::vector<int> sym;
  for (const Range& p : pieces) {
    const std::string word = tok::bytesToAlphabet(text.substr(p.first, p.second - p.first));
    if (ignoreMerges_) {
      if (const int* id = find(word)) {
        out.push_back(*id);
        continue;
      }
    }
    sym.clear();
    for (std::size_t i = 0; i < word.size();) {
      const int len = tok::decodeUtf8(word, i).len;
      if (const int* id = find(std::string_view(word).substr(i, len))) {
        sym.push_back(*id);
      } else if (unk_) {
        sym.push_back(*unk_);
      } else {
        // The piece's text is the alphabet spelling of `original`: byte k is character k.
        const std::string_view original = text.substr(p.first, p.second - p.first);
        std::size_t k = 0;
        for (std::size_t j = 0; j < i; j += tok::decodeUtf8(word, j).len) ++k;
        throw InputError("the text needs " +
                         tok::describeChar(original, tok::charStartContaining(original, k)) +
                         ", which " + name_ + " cannot express (a byte of it has no token)");
      }
      i += len;
    }
    tok::bpeMerge(sym, merges_);
    out.insert(out.end(), sym.begin(), sym.end());
  }
}

void GgufTokenizer::wpm(std::string_view text, std::vector<int>& out) const {
  const std::string norm = tok::bertNormalize(text, tok::BertNormOptions{});
  for (const auto& [a, b] : tok::bertPreTokenize(norm)) {
    const std::string_view word = std::string_view(norm).substr(a, b - a);
    // A continuation is a piece without the mark (a U+2581 written in the text must not reach
    // a word-start piece).
    auto lookup = [&](std::string_view p, bool cont) {
      const int* id = !cont                   ? find(kMeta + std::string(p))
                      : p.starts_with(kMeta) ? nullptr
                                             : find(p);
      return id ? *id : -1;
    };
    const bool ok = tok::wordPiece(word, 100, lookup, out);
    if (!ok) {
      if (!unk_) {
        throw InputError("the text needs the word '" + std::string(word) + "', which " + name_ +
                         " cannot express (no [UNK] token)");
      }
      out.push_back(*unk_);
    }
  }
}

std::vector<int> GgufTokenizer::encode(std::string_view text, bool addSpecial) const {
  // llama.cpp's partition: each special piece, longest first, cuts every text fragment at each
  // of its occurrences.
  struct Frag {
    int id;  // -1: text [a, b)
    std::size_t a, b;
  };
  std::vector<Frag> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  auto isSpace = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  for (const Special& sp : specials_) {
    if (sp.control && !parseSpecial()) continue;
    const std::string& piece = tokens_[sp.id];
    std::vector<Frag> next;
    for (const Frag& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      std::size_t a = f.a;
      const std::size_t b = f.b;
      while (a < b) {
        const std::size_t at = text.substr(0, b).find(piece, a);
        if (at == std::string_view::npos) {
          next.push_back({-1, a, b});
          break;
        }
        std::size_t leftEnd = at;
        if (sp.lstrip) {
          while (leftEnd > a && isSpace(text[leftEnd - 1])) --leftEnd;
        }
        if (leftEnd > a) next.push_back({-1, a, leftEnd});
        next.push_back({sp.id, 0, 0});
        a = at + piece.size();
        if (sp.rstrip) {
          while (a < b && isSpace(text[a])) ++a;
        }
      }
    }
    frags = std::move(next);
  }

  std::vector<int> ids;
  if (addSpecial && addBos_) ids.push_back(*bos_);
  bool prevSpecial = true;
  for (const Frag& f : frags) {
    if (f.id >= 0) {
      ids.push_back(f.id);
      prevSpecial = true;
      continue;
    }
    const std::string_view part = text.substr(f.a, f.b - f.a);
    switch (kind_) {
      case Kind::Spm: {
        std::string s;
        if (addSpacePrefix_ && prevSpecial) s = kMeta;
        for (char ch : part) {
          if (ch == ' ') {
            s += kMeta;
          } else {
            s.push_back(ch);
          }
        }
        spm(s, ids);
        break;
      }
      case Kind::Bpe: bpe(part, ids); break;
      case Kind::Wpm: wpm(part, ids); break;
    }
    prevSpecial = false;
  }
  if (addSpecial) {
    if (kind_ == Kind::Wpm && addBos_) ids.push_back(*sep_);
    if (addEos_) ids.push_back(*eos_);
  }
  return ids;
}

// BERT's pair: [CLS] A [SEP] B [SEP], B [SEP] of type 1 (llama.cpp itself encodes one text).
PairEncoding GgufTokenizer::encodePair(std::string_view a, std::string_view b,
                                       bool addSpecial) const {
  if (kind_ != Kind::Wpm || !bos_ || !sep_) return Tokenizer::encodePair(a, b, addSpecial);
  PairEncoding out;
  auto add = [&](const std::vector<int>& ids, int type) {
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.typeIds.insert(out.typeIds.end(), ids.size(), type);
  };
  if (addSpecial) add({*bos_}, 0);
  add(encode(a, false), 0);
  if (addSpecial) add({*sep_}, 0);
  add(encode(b, false), 1);
  if (addSpecial) add({*sep_}, 1);
  return out;
}

std::string GgufTokenizer::pieceBytes(int id) const {
  if (!contains(id)) throw InputError("token id " + std::to_string(id) + " is not in the vocab");
  const std::string& t = tokens_[id];
  const GgufTokenType ty = type(id);
  if (ty == GgufTokenType::Control || ty == GgufTokenType::Unknown ||
      ty == GgufTokenType::UserDefined) {
    return t;
  }
  if (ty == GgufTokenType::Byte || (kind_ == Kind::Spm && t.size() == 6 && t.starts_with("<0x"))) {
    for (int b = 0; b < 256; ++b) {
      if (byteIds_[b] == id) return std::string(1, static_cast<char>(b));
    }
  }
  std::string out;
  if (kind_ == Kind::Bpe) {
    if (tok::alphabetToBytes(t, out)) return out;
    return t;
  }
  for (std::size_t i = 0; i < t.size();) {
    if (t.compare(i, kMeta.size(), kMeta) == 0) {
      out.push_back(' ');
      i += kMeta.size();
    } else {
      out.push_back(t[i++]);
    }
  }
  return out;
}

std::string GgufTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  bool prevSpecial = true;
  for (int id : ids) {
    std::string bytes = pieceBytes(id);
    const GgufTokenType t = type(id);
    const bool special = t == GgufTokenType::Control || t == GgufTokenType::Unknown ||
                         t == GgufTokenType::UserDefined;
    const bool drops = kind_ == Kind::Wpm || (kind_ == Kind::Spm && addSpacePrefix_);
    if (drops && !special && prevSpecial && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    prevSpecial = special;
    out += bytes;
  }
  return out;
}

}  // namespace

GgufVocab readGgufVocab(const GgufFile& f) {
  GgufVocab v;
  const auto model = f.getString("tokenizer.ggml.model");
  if (!model) throw InputError(f.path() + ": no tokenizer (tokenizer.ggml.model is missing)");
  v.model = *model;
  v.pre = f.getString("tokenizer.ggml.pre").value_or("");
  v.name = f.getString("general.name").value_or("");
  auto tokens = f.getStringArray("tokenizer.ggml.tokens");
  if (!tokens) throw InputError(f.path() + ": no tokenizer.ggml.tokens");
  v.tokens = std::move(*tokens);
  const std::size_t n = v.tokens.size();
  if (auto scores = f.getFloatArray("tokenizer.ggml.scores")) {
    if (scores->size() < n) {
      throw InputError(f.path() + ": tokenizer.ggml.scores has " + std::to_string(scores->size()) +
                       " entries for " + std::to_string(n) + " tokens");
    }
    scores->resize(n);
    v.scores = std::move(*scores);
  }
  if (const auto types = f.getIntArray("tokenizer.ggml.token_type")) {
    if (types->size() < n) {
      throw InputError(f.path() + ": tokenizer.ggml.token_type has " +
                       std::to_string(types->size()) + " entries for " + std::to_string(n) +
                       " tokens");
    }
    v.tokenType.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t t = (*types)[i];
      v.tokenType.push_back(t >= 0 && t <= 6 ? static_cast<int>(t) : 0);
    }
  }
  if (auto merges = f.getStringArray("tokenizer.ggml.merges")) v.merges = std::move(*merges);
  auto id = [&](const char* key) -> std::optional<int> {
    const auto x = f.getInt(key);
    if (!x || *x < 0 || static_cast<std::uint64_t>(*x) >= n) return std::nullopt;
    return static_cast<int>(*x);
  };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.unk = id("tokenizer.ggml.unknown_token_id");
  v.sep = id("tokenizer.ggml.seperator_token_id");  // llama.cpp's spelling
  v.pad = id("tokenizer.ggml.padding_token_id");
  v.cls = id("tokenizer.ggml.cls_token_id");
  v.mask = id("tokenizer.ggml.mask_token_id");
  v.addBos = f.getBool("tokenizer.ggml.add_bos_token");
  v.addEos = f.getBool("tokenizer.ggml.add_eos_token");
  v.addSpacePrefix = f.getBool("tokenizer.ggml.add_space_prefix");
  v.removeExtraWhitespaces = f.getBool("tokenizer.ggml.remove_extra_whitespaces");
  if (const auto map = f.getIntArray("tokenizer.ggml.precompiled_charsmap")) {
    v.charsmap.reserve(map->size());
    for (std::int64_t b : *map) {
      if (b < -128 || b > 255) {
        throw InputError(f.path() + ": tokenizer.ggml.precompiled_charsmap holds " +
                         std::to_string(b) + ", not a byte");
      }
      v.charsmap.push_back(static_cast<char>(b & 0xFF));
    }
  }
  return v;
}

std::vector<GgufPreTokenizer> ggufPreTokenizers() {
  std::vector<GgufPreTokenizer> out;
  for (const PreTokenizerRow& row : preTokenizerTable()) {
    for (const std::string& name : row.names) out.push_back({name, row.regexes, row.unsupported});
  }
  return out;
}

namespace {

// A `t5` vocabulary as the SentencePiece model it was converted from (sentencepiece_model.proto:
// ModelProto{pieces = 1 {piece = 1, score = 2, type = 3}, trainer_spec = 2 {model_type = 3
// (UNIGRAM 1), unk_id = 40, bos_id = 41, eos_id = 42, pad_id = 43, unk_piece = 45, bos_piece = 46,
// eos_piece = 47, pad_piece = 48}, normalizer_spec = 3 {name = 1, precompiled_charsmap = 2,
// add_dummy_prefix = 3, remove_extra_whitespaces = 4, escape_whitespaces = 5}}). GGUF's token
// types are SentencePiece's numbers (an undefined one reads as normal).
std::string unigramModelProto(const GgufVocab& v) {
  auto varint = [](std::string& out, std::uint64_t x) {
    while (x >= 0x80) out.push_back(static_cast<char>((x & 0x7F) | 0x80)), x >>= 7;
    out.push_back(static_cast<char>(x));
  };
  auto key = [&](std::string& out, int field, int wire) { varint(out, std::uint64_t(field) << 3 | wire); };
  auto bytes = [&](std::string& out, int field, const std::string& b) {
    key(out, field, 2);
    varint(out, b.size());
    out += b;
  };
  auto number = [&](std::string& out, int field, std::int64_t x) {
    key(out, field, 0);
    varint(out, static_cast<std::uint64_t>(x));  // negative int32: ten bytes, as protobuf writes
  };
  std::string model;
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    std::string piece;
    bytes(piece, 1, v.tokens[i]);
    const float score = v.scores.empty() ? 0.0f : v.scores[i];
    key(piece, 2, 5);
    std::uint32_t bits;
    std::memcpy(&bits, &score, 4);
    for (int b = 0; b < 4; ++b) piece.push_back(static_cast<char>(bits >> (8 * b)));
    const int type = v.tokenType.empty() || v.tokenType[i] == 0 ? 1 : v.tokenType[i];
    number(piece, 3, type);
    bytes(model, 1, piece);
  }
  auto idOf = [&](std::optional<int> id, int type) -> int {
    if (id) return *id;
    for (std::size_t i = 0; i < v.tokenType.size(); ++i)
      if (v.tokenType[i] == type) return int(i);
    return -1;
  };
  std::string trainer;
  number(trainer, 3, 1);
  const int unk = idOf(v.unk, int(GgufTokenType::Unknown));
  const int ids[] = {unk, v.bos ? *v.bos : -1, v.eos ? *v.eos : -1, v.pad ? *v.pad : -1};
  for (int k = 0; k < 4; ++k) number(trainer, 40 + k, ids[k]);
  for (int k = 0; k < 4; ++k)
    if (ids[k] >= 0) bytes(trainer, 45 + k, v.tokens[std::size_t(ids[k])]);
  bytes(model, 2, trainer);
  std::string norm;
  bytes(norm, 1, v.charsmap.empty() ? "identity" : "precompiled");
  if (!v.charsmap.empty()) bytes(norm, 2, v.charsmap);
  number(norm, 3, v.addSpacePrefix.value_or(true));
  number(norm, 4, v.removeExtraWhitespaces.value_or(true));
  number(norm, 5, 1);
  bytes(model, 3, norm);
  return model;
}

}  // namespace

std::unique_ptr<Tokenizer> makeGgufTokenizer(const GgufVocab& vocab, const std::string& name,
                                             const GgufTokenizerOptions& options) {
  if (vocab.model == "t5") return t5SentencePieceFromBytes(unigramModelProto(vocab), name);
  return std::make_unique<GgufTokenizer>(vocab, name, options);
}

std::unique_ptr<Tokenizer> loadGgufTokenizer(const GgufFile& file,
                                             const GgufTokenizerOptions& options) {
  return makeGgufTokenizer(readGgufVocab(file), file.path(), options);
}

std::unique_ptr<Tokenizer> loadGgufTokenizer(const GgufFile& file) {
  return loadGgufTokenizer(file, GgufTokenizerOptions{});
}

}  // namespace attnviz
