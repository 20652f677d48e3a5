// GGUF reading: every good fixture (manifest.json) with its layout and values, the kitchen-sink
// metadata (every value type, arrays of arrays) against kitchen_sink.json, every malformed file
// refused with the expected words and the file's name, every truncation refused, hand-made
// edge cases, and the real files in ../shared/testdata.
#include "attnviz/formats/gguf.h"
#include "attnviz/engine/ggml_kernels.h"
#include "attnviz/engine/tensor.h"
#include "gguf_fixtures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

namespace attnviz {
namespace {

using namespace attnviz::testing;
using nlohmann::json;

std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// ------------------------------------------------------------------------- good fixtures

TEST(GgufFixtures, EveryManifestFileOpensWithItsLayoutAndValues) {
  for (const json& entry : manifest()["files"]) {
    const std::string rel = entry["file"];
    SCOPED_TRACE(rel);
    const auto f = GgufFile::open(fixture(rel));
    EXPECT_EQ(f->version(), entry["version"].get<std::uint32_t>());
    EXPECT_EQ(f->alignment(), entry["alignment"].get<std::size_t>());
    ASSERT_EQ(f->tensors().size(), entry["tensors"].size());
    std::size_t k = 0;
    for (const json& e : entry["tensors"]) {
      const GgufTensor& t = f->tensors()[k++];  // file order
      EXPECT_EQ(t.name, e["name"].get<std::string>());
      EXPECT_EQ(t.type, e["type_id"].get<std::uint32_t>());
      EXPECT_EQ(ggmlTypeName(t.type), e["type"].get<std::string>());
      EXPECT_EQ(t.ne, e["ne"].get<std::vector<std::int64_t>>());
      EXPECT_EQ(t.offset, e["offset"].get<std::uint64_t>());
      EXPECT_EQ(t.bytes, e["nbytes"].get<std::size_t>());
      EXPECT_EQ(f->findTensor(t.name), &t);
      const std::vector<float> want = expectedValues(e["expected"]);
      EXPECT_EQ(firstBitDifference(f->dequantize(t), want), -1) << t.name;
    }
  }
}

TEST(GgufFixtures, Version2FileReadsLikeVersion3) {
  const auto f = GgufFile::open(fixture("v2.gguf"));
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->getInt("fixture.count"), 3);
  EXPECT_EQ(f->getString("general.name"), "version 2");
  EXPECT_EQ(f->tensors().size(), 2u);
}

TEST(GgufFixtures, Alignment64PutsEveryTensorOn64ByteBoundaries) {
  const auto f = GgufFile::open(fixture("align64.gguf"));
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->getInt("general.alignment"), 64);
  const unsigned char* base = f->tensors()[0].data - f->tensors()[0].offset;
  for (const GgufTensor& t : f->tensors()) {
    EXPECT_EQ(t.offset % 64, 0u) << t.name;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 64, 0u) << t.name;
    EXPECT_EQ(t.data, base + t.offset);
  }
  const GgufTensor* v = f->findTensor("f16_7");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->ne, std::vector<std::int64_t>{7});
  EXPECT_EQ(v->rows(), 1);
  EXPECT_EQ(v->count(), 7);
}

// kitchen_sink.json describes each value: {"type": "uint8" ..., "value": ...} or
// {"type": "array", "element_type": ..., "value": [items]} with items themselves such objects
// when the elements are arrays.
GgufValueType typeFromJson(const std::string& s) {
  static const std::pair<const char*, GgufValueType> names[] = {
      {"uint8", GgufValueType::U8},      {"int8", GgufValueType::I8},
      {"uint16", GgufValueType::U16},    {"int16", GgufValueType::I16},
      {"uint32", GgufValueType::U32},    {"int32", GgufValueType::I32},
      {"float32", GgufValueType::F32},   {"bool", GgufValueType::Bool},
      {"string", GgufValueType::String}, {"array", GgufValueType::Array},
      {"uint64", GgufValueType::U64},    {"int64", GgufValueType::I64},
      {"float64", GgufValueType::F64}};
  for (const auto& [n, t] : names)
    if (s == n) return t;
  throw std::runtime_error("unknown json type " + s);
}

void expectScalar(const GgufValue& v, GgufValueType type, const json& j, const std::string& where) {
  switch (type) {
    case GgufValueType::U8:
    case GgufValueType::U16:
    case GgufValueType::U32:
    case GgufValueType::U64:
      EXPECT_EQ(v.u, j.get<std::uint64_t>()) << where;
      EXPECT_TRUE(v.isInteger()) << where;
      break;
    case GgufValueType::I8:
    case GgufValueType::I16:
    case GgufValueType::I32:
    case GgufValueType::I64:
      EXPECT_EQ(v.i, j.get<std::int64_t>()) << where;
      break;
    case GgufValueType::F32:
    case GgufValueType::F64: {
      const double want = j.get<double>();
      EXPECT_EQ(std::memcmp(&v.f, &want, 8), 0) << where << ": " << v.f << " vs " << want;
      break;
    }
    case GgufValueType::Bool:
      EXPECT_EQ(v.i != 0, j.get<bool>()) << where;
      break;
    case GgufValueType::String:
      EXPECT_EQ(v.s, j.get<std::string>()) << where;
      break;
    case GgufValueType::Array:
      ADD_FAILURE() << where << ": not a scalar";
  }
}

void expectValue(const GgufValue& v, const json& j, const std::string& where) {
  const GgufValueType type = typeFromJson(j["type"]);
  ASSERT_EQ(int(v.type), int(type)) << where;
  if (type != GgufValueType::Array) {
    expectScalar(v, type, j["value"], where);
    return;
  }
  const GgufValueType et = typeFromJson(j["element_type"]);
  EXPECT_EQ(int(v.arrayType), int(et)) << where;
  ASSERT_EQ(v.items.size(), j["value"].size()) << where;
  for (std::size_t k = 0; k < v.items.size(); ++k) {
    const std::string w = where + "[" + std::to_string(k) + "]";
    if (et == GgufValueType::Array) {
      expectValue(v.items[k], j["value"][k], w);
    } else {
      EXPECT_EQ(int(v.items[k].type), int(et)) << w;
      expectScalar(v.items[k], et, j["value"][k], w);
    }
  }
}

TEST(GgufFixtures, KitchenSinkMetadataEqualsItsJsonDescription) {
  const json doc = readJson(fixture("kitchen_sink.json"));
  const auto f = GgufFile::open(fixture("kitchen_sink.gguf"));
  const auto& kv = f->metadata();
  ASSERT_EQ(kv.size(), doc["keys"].size());
  for (std::size_t i = 0; i < kv.size(); ++i) {
    const std::string key = doc["keys"][i];
    EXPECT_EQ(kv[i].first, key) << "file order";
    expectValue(kv[i].second, doc["metadata"][key], key);
    EXPECT_EQ(f->find(key), &kv[i].second);
  }
  EXPECT_EQ(f->find("sink.absent"), nullptr);
}

TEST(GgufFixtures, KitchenSinkTensorsHaveOneToFourDimensions) {
  const auto f = GgufFile::open(fixture("kitchen_sink.gguf"));
  EXPECT_EQ(f->findTensor("vec")->ne, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(f->findTensor("cube")->ne, (std::vector<std::int64_t>{4, 3, 2}));
  EXPECT_EQ(f->findTensor("cube")->rows(), 6);
  EXPECT_EQ(f->findTensor("hyper")->ne, (std::vector<std::int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(f->findTensor("mat_q8")->ne, (std::vector<std::int64_t>{32, 3}));
  EXPECT_EQ(f->findTensor("mat_q8")->rowBytes(), 34u);
  EXPECT_EQ(f->findTensor("absent"), nullptr);
}

TEST(GgufLookups, TypedGettersConvertWhatFitsAndNameTheKeyOtherwise) {
  const auto f = GgufFile::open(fixture("kitchen_sink.gguf"));
  EXPECT_EQ(f->getInt("sink.u8"), 255);
  EXPECT_EQ(f->getInt("sink.i64"), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(f->getInt("sink.u32"), 4294967295LL);
  EXPECT_EQ(f->getFloat("sink.f32"), -1.5);
  EXPECT_EQ(f->getFloat("sink.i8"), -128.0);
  EXPECT_EQ(f->getFloat("sink.f64"), 3.141592653589793);
  EXPECT_EQ(f->getBool("sink.bool_true"), true);
  EXPECT_EQ(f->getBool("sink.bool_false"), false);
  EXPECT_EQ(f->getString("general.architecture"), "fixture");
  EXPECT_EQ(f->getStringArray("sink.arr_string"),
            (std::vector<std::string>{"a", "", "\xc3\xbc", "two words"}));
  EXPECT_EQ(f->getFloatArray("sink.arr_f32"), (std::vector<float>{0.5f, -2.25f, 0.1f}));
  EXPECT_EQ(f->getIntArray("sink.arr_i32"),
            (std::vector<std::int64_t>{-2147483648LL, 2147483647LL, 0}));
  EXPECT_EQ(f->getIntArray("sink.arr_empty"), std::vector<std::int64_t>{});
  EXPECT_EQ(f->getString("sink.absent"), std::nullopt);
  EXPECT_EQ(f->getInt("sink.absent"), std::nullopt);

  const std::string path = fixture("kitchen_sink.gguf");
  std::string e = errorOf([&] { f->getString("sink.u8"); });
  EXPECT_NE(e.find(path + ": sink.u8: expected a string, found uint8"), std::string::npos) << e;
  e = errorOf([&] { f->getInt("sink.u64"); });  // 2^64 - 1 does not fit
  EXPECT_NE(e.find("sink.u64"), std::string::npos) << e;
  EXPECT_NE(e.find("int64"), std::string::npos) << e;
  e = errorOf([&] { f->getInt("sink.f32"); });
  EXPECT_NE(e.find("expected an integer, found float32"), std::string::npos) << e;
  e = errorOf([&] { f->getStringArray("sink.arr_u8"); });
  EXPECT_NE(e.find("expected an array of strings, found array of uint8"), std::string::npos) << e;
  e = errorOf([&] { f->getIntArray("sink.arr_f64"); });
  EXPECT_NE(e.find("sink.arr_f64"), std::string::npos) << e;
  e = errorOf([&] { f->getIntArray("sink.arr_u64"); });
  EXPECT_NE(e.find("does not fit"), std::string::npos) << e;
  e = errorOf([&] { f->getBool("sink.u8"); });
  EXPECT_NE(e.find("expected a bool"), std::string::npos) << e;
}

// --------------------------------------------------------------------------------- refusals

TEST(GgufRefusals, EveryBadFixtureIsRefusedWithItsWordsAndTheFileName) {
  const json doc = readJson(fixture("bad/expected_errors.json"));
  ASSERT_GE(doc["files"].size(), 19u);
  for (const json& b : doc["files"]) {
    const std::string path = fixture("bad/" + b["file"].get<std::string>());
    SCOPED_TRACE(path);
    std::string msg;
    if (b["stage"] == "parse") {
      msg = errorOf([&] { GgufFile::open(path); });
    } else {
      std::unique_ptr<GgufFile> f;
      ASSERT_NO_THROW(f = GgufFile::open(path)) << "a well-formed file opens";
      ASSERT_FALSE(f->tensors().empty());
      msg = errorOf([&] {
        for (const GgufTensor& t : f->tensors()) f->dequantize(t);
      });
    }
    ASSERT_FALSE(msg.empty()) << "not refused";
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const json& frag : b["fragments"]) {
      EXPECT_NE(lower(msg).find(lower(frag.get<std::string>())), std::string::npos)
          << "'" << frag.get<std::string>() << "' missing from: " << msg;
    }
  }
}

TEST(GgufRefusals, UnreadableTypeNamesTheTensorAndTheType) {
  const std::string path = fixture("bad/iq_type.gguf");
  const auto f = GgufFile::open(path);
  const std::string msg = errorOf([&] { f->dequantize(f->tensors()[0]); });
  EXPECT_NE(msg.find("tensor 't'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("IQ2_XXS"), std::string::npos) << msg;
}

TEST(GgufRefusals, MissingFileSaysCannotOpen) {
  const std::string msg = errorOf([] { GgufFile::open("/nonexistent/x.gguf"); });
  EXPECT_EQ(msg.rfind("/nonexistent/x.gguf: cannot open", 0), 0u) << msg;
}

// Every prefix of a good file either lacks bytes the file needs (refused with InputError naming
// the file) or only drops the padding after the last tensor (and still reads).
TEST(GgufRefusals, EveryTruncationIsRefusedNeverACrash) {
  for (const char* rel : {"kitchen_sink.gguf", "v2.gguf", "align64.gguf", "types/Q4_K.gguf"}) {
    SCOPED_TRACE(rel);
    const std::string bytes = readFile(fixture(rel));
    const auto full = GgufFile::fromBytes(bytes.data(), bytes.size(), rel);
    std::size_t needed = 0;
    for (const GgufTensor& t : full->tensors())
      needed = std::max(needed, full->dataOffset() + std::size_t(t.offset) + t.bytes);
    ASSERT_GT(needed, 0u);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      if (n < needed) {
        const std::string msg = errorOf([&] { GgufFile::fromBytes(bytes.data(), n, rel); });
        EXPECT_EQ(msg.rfind(std::string(rel) + ": ", 0), 0u) << "prefix " << n << ": " << msg;
      } else {
        EXPECT_NO_THROW(GgufFile::fromBytes(bytes.data(), n, rel)) << "prefix " << n;
      }
    }
  }
}

// Any byte of the header overwritten with any of a few values: read or refused, never a crash
// (the fuzzer explores further; this runs in every test pass, sanitizers included).
TEST(GgufRefusals, CorruptedHeaderBytesAreReadOrRefused) {
  const std::string good = readFile(fixture("kitchen_sink.gguf"));
  const auto full = GgufFile::fromBytes(good.data(), good.size(), "ks");
  for (std::size_t pos = 0; pos < full->dataOffset(); ++pos) {
    for (unsigned char v : {0x00, 0x01, 0x7f, 0xff}) {
      std::string bad = good;
      bad[pos] = char(v);
      try {
        const auto f = GgufFile::fromBytes(bad.data(), bad.size(), "ks");
        for (const GgufTensor& t : f->tensors()) {
          int bv = 0, bb = 0;
          if (ggmlTypeInfo(t.type, bv, bb) && t.count() <= (1 << 20)) f->dequantize(t);
        }
      } catch (const InputError&) {
      }
    }
  }
}

// ------------------------------------------------------------------------ hand-made files

// One F32 tensor "t" of ne values at offset 0, with `kvs` metadata pairs already encoded.
std::string oneTensorFile(const GgufBytes& kvs, std::uint64_t nKv, std::size_t alignment = 32,
                          std::uint32_t type = 0, std::vector<std::uint64_t> ne = {8},
                          std::size_t dataBytes = 32) {
  GgufBytes g;
  g.header(3, 1, nKv);
  g.b += kvs.b;
  g.tensor("t", ne, type, 0).pad(alignment).zeros(dataBytes);
  return g.b;
}

std::string refusal(const std::string& bytes) {
  return errorOf([&] { GgufFile::fromBytes(bytes.data(), bytes.size(), "made.gguf"); });
}

TEST(GgufMade, VocabOnlyFileWithoutDataSectionOpens) {
  GgufBytes g;
  g.header(3, 0, 1).kvString("general.architecture", "llama");  // no padding after the metadata
  const auto f = GgufFile::fromBytes(g.b.data(), g.b.size(), "made.gguf");
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->getString("general.architecture"), "llama");
}

TEST(GgufMade, AlignmentIsAPowerOfTwoAsGgmlRequires) {
  for (std::uint32_t a : {1u, 8u, 16u, 64u, 4096u}) {
    GgufBytes kv;
    kv.kvU32("general.alignment", a);
    const std::string bytes = oneTensorFile(kv, 1, a);
    const auto f = GgufFile::fromBytes(bytes.data(), bytes.size(), "made.gguf");
    EXPECT_EQ(f->alignment(), a);
    EXPECT_EQ(f->dataOffset() % a, 0u);
  }
  for (std::uint32_t a : {0u, 3u, 12u, 48u}) {
    GgufBytes kv;
    kv.kvU32("general.alignment", a);
    const std::string msg = refusal(oneTensorFile(kv, 1, 32));
    EXPECT_NE(msg.find("general.alignment " + std::to_string(a) + " is not a power of two"),
              std::string::npos)
        << msg;
  }
  GgufBytes kv;
  kv.str("general.alignment").u32(10).u64(32);  // a uint64: ggml wants a uint32
  const std::string msg = refusal(oneTensorFile(kv, 1));
  EXPECT_NE(msg.find("general.alignment must be a uint32, not uint64"), std::string::npos) << msg;
}

TEST(GgufMade, ZeroDimensionsAreAScalarAndZeroSizedAxesAreEmpty) {
  GgufBytes g;
  g.header(3, 2, 0).tensor("scalar", {}, 0, 0).tensor("empty", {0, 4}, 0, 32).pad(32).zeros(32);
  const auto f = GgufFile::fromBytes(g.b.data(), g.b.size(), "made.gguf");
  const GgufTensor* s = f->findTensor("scalar");
  EXPECT_EQ(s->ne, std::vector<std::int64_t>{1});
  EXPECT_EQ(s->bytes, 4u);
  const GgufTensor* e = f->findTensor("empty");
  EXPECT_EQ(e->count(), 0);
  EXPECT_EQ(e->rows(), 4);
  EXPECT_TRUE(f->dequantize(*e).empty());
  // An empty tensor's other axes still multiply to an int64 (rows()), found by the fuzzer.
  GgufBytes wide;
  wide.header(3, 1, 0).tensor("t", {0, 1ull << 40, 1ull << 40}, 0, 0).pad(32);
  EXPECT_NE(refusal(wide.b).find("tensor 't': shape [0, 1099511627776, 1099511627776] has more "
                                 "elements than an int64 holds"),
            std::string::npos);
  // An empty tensor's row still has to fit a size_t (rowBytes()).
  GgufBytes huge;
  huge.header(3, 1, 0).tensor("t", {1ull << 62, 0}, 27, 0).pad(32);  // I64: 8 bytes a value
  EXPECT_NE(
      refusal(huge.b).find("tensor 't': a row of 4611686018427387904 I64 values does not fit"),
      std::string::npos);
}

TEST(GgufMade, MalformedTensorInfosAreRefusedNamingTheTensor) {
  struct Case {
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
    std::string words;
  };
  const Case cases[] = {
      {{8}, 4, "tensor 't': tensor type Q4_2 (4) is no longer defined by ggml"},
      {{8}, 99, "tensor 't': unknown tensor type 99"},
      {{1ull << 62, 1ull << 62},
       0,
       "tensor 't': shape [4611686018427387904, 4611686018427387904] has more elements than an "
       "int64 holds"},
      {{1ull << 63}, 0, "tensor 't': dimension 0 is 9223372036854775808"},
      {{1ull << 40},
       0,
       "tensor 't': F32 data of shape [1099511627776] runs past the end of the file"},
      {{256}, 16, "tensor 't': its data (66 bytes at offset 0) runs past the end of the file"},
  };
  for (const Case& c : cases) {
    const std::string msg = refusal(oneTensorFile(GgufBytes{}, 0, 32, c.type, c.ne));
    EXPECT_NE(msg.find("made.gguf: " + c.words), std::string::npos) << msg;
  }
  GgufBytes g;
  g.header(3, 2, 0).tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32).pad(32).zeros(64);
  EXPECT_NE(refusal(g.b).find("duplicate tensor name 't'"), std::string::npos);
}

TEST(GgufMade, MalformedMetadataIsRefusedNamingTheKey) {
  GgufBytes deep;  // arrays of arrays nested 20 deep
  deep.str("x").u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  deep.u32(0).u64(0);
  EXPECT_NE(
      refusal(oneTensorFile(deep, 1)).find("metadata value 'x': arrays nested more than 16 deep"),
      std::string::npos);
  GgufBytes badElem;
  badElem.str("x").u32(9).u32(77).u64(0);
  EXPECT_NE(refusal(oneTensorFile(badElem, 1)).find("unknown value type 77 for array elements"),
            std::string::npos);
  GgufBytes longArray;
  longArray.str("x").u32(9).u32(6).u64(1ull << 50);
  EXPECT_NE(refusal(oneTensorFile(longArray, 1))
                .find("array of 1125899906842624 float32 values runs past the end"),
            std::string::npos);
  GgufBytes emptyKey;
  emptyKey.str("").u32(0).u8(1);
  EXPECT_NE(refusal(oneTensorFile(emptyKey, 1)).find("metadata key 0 is empty"), std::string::npos);
  GgufBytes control;
  control.kvU32("a\nb", 1).kvU32("a\nb", 2);
  const std::string msg = refusal(oneTensorFile(control, 2));
  EXPECT_NE(msg.find("duplicate metadata key 'a\\x0ab'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
}

// ------------------------------------------------------------------------------ real files

TEST(GgufRealFiles, Stories260KOpensWithItsHyperparametersAndF32Tensors) {
  const std::string path = kSharedTestdata + "/stories260K/stories260K.gguf";
  ATTNVIZ_REQUIRE_TESTDATA(path);
  const auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->getString("general.architecture"), "llama");
  EXPECT_EQ(f->getInt("llama.block_count"), 5);
  EXPECT_EQ(f->getInt("llama.embedding_length"), 64);
  EXPECT_EQ(f->getInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(f->getInt("llama.attention.head_count"), 8);
  EXPECT_EQ(f->getInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f->getInt("llama.context_length"), 2048);
  EXPECT_EQ(f->getInt("llama.rope.dimension_count"), 8);
  EXPECT_NEAR(*f->getFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
  EXPECT_EQ(f->find("llama.rope.freq_base"), nullptr);
  EXPECT_EQ(f->getString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->getStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(f->getFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f->getIntArray("tokenizer.ggml.token_type")->size(), 512u);
  EXPECT_EQ(f->getInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f->getInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f->getInt("tokenizer.ggml.unknown_token_id"), 0);

  EXPECT_EQ(f->tensors().size(), 48u);
  for (const GgufTensor& t : f->tensors()) EXPECT_EQ(t.type, 0u) << t.name;
  const GgufTensor* emb = f->findTensor("token_embd.weight");
  const GgufTensor* out = f->findTensor("output.weight");
  ASSERT_NE(emb, nullptr);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(emb->ne, (std::vector<std::int64_t>{64, 512}));
  EXPECT_EQ(emb->rows(), 512);
  EXPECT_EQ(std::memcmp(emb->data, out->data, emb->bytes), 0)
      << "output.weight = token_embd.weight";
  EXPECT_EQ(f->findTensor("blk.4.ffn_down.weight")->ne, (std::vector<std::int64_t>{172, 64}));
  // A mapped F32 row is usable in place.
  const std::vector<float> w = f->dequantize(*emb);
  std::vector<float> x(64, 0.5f);
  double ref = 0.0;
  for (int i = 0; i < 64; ++i) ref += double(w[64 * 7 + i]) * 0.5;
  EXPECT_NEAR(dotRow(GgmlType::F32, emb->rowData(7), x.data(), 64), ref, 1e-5);
}

TEST(GgufRealFiles, LlamaCppVocabFilesOpenWithTheirTokenizerKeys) {
  const std::string dir = kSharedTestdata + "/llama.cpp-vocab";
  ATTNVIZ_REQUIRE_TESTDATA(dir);
  struct Row {
    const char* file;
    const char* model;
    const char* pre;
    const char* arch;
  };
  const Row rows[] = {
      {"ggml-vocab-llama-spm.gguf", "llama", "default", "llama"},
      {"ggml-vocab-phi-3.gguf", "llama", "default", "phi3"},
      {"ggml-vocab-gpt-2.gguf", "gpt2", "gpt-2", "gpt2"},
      {"ggml-vocab-mpt.gguf", "gpt2", "mpt", "mpt"},
      {"ggml-vocab-deepseek-coder.gguf", "gpt2", "deepseek-coder", "llama"},
      {"ggml-vocab-bert-bge.gguf", "bert", "bert-bge", "bert"},
  };
  for (const Row& r : rows) {
    const std::string path = dir + "/" + r.file;
    SCOPED_TRACE(path);
    ATTNVIZ_REQUIRE_TESTDATA(path);
    const auto f = GgufFile::open(path);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_TRUE(f->tensors().empty()) << "vocab only";
    EXPECT_EQ(f->getString("general.architecture"), r.arch);
    EXPECT_EQ(f->getString("tokenizer.ggml.model"), r.model);
    EXPECT_EQ(f->getString("tokenizer.ggml.pre"), r.pre);
    const auto tokens = f->getStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.has_value());
    EXPECT_GT(tokens->size(), 30000u);
    EXPECT_EQ(f->getIntArray("tokenizer.ggml.token_type")->size(), tokens->size());
    if (std::string(r.model) == "gpt2") {
      EXPECT_GT(f->getStringArray("tokenizer.ggml.merges")->size(), 30000u);
    }
    if (std::string(r.model) == "llama") {
      EXPECT_EQ(f->getFloatArray("tokenizer.ggml.scores")->size(), tokens->size());
    }
  }
  const auto spm = GgufFile::open(dir + "/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm->getBool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(spm->getInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ((*spm->getStringArray("tokenizer.ggml.tokens"))[1], "<s>");
}

}  // namespace
}  // namespace attnviz
