// safetensors reading and writing: a file written by an independent Python writer
// (safetensors_py.py, numpy only) with numpy's float32 values as the reference, every refusal
// (each naming the file, the tensor where there is one, and the problem), and the writer read
// back by Python.
#include "attnviz/formats/fileio.h"
#include "attnviz/formats/npy.h"
#include "attnviz/formats/safetensors.h"
#include "run_binary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <stdlib.h>

namespace attnviz {
namespace {

namespace fs = std::filesystem;
using attnviz::testing::shellQuote;
using attnviz::testing::slurp;

const std::string kScript = std::string(ATTNVIZ_TEST_DATA_DIR) + "/formats/safetensors_py.py";

// A safetensors file assembled by hand: the header text as given (no validation), then `data`.
std::string stFile(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  return out + json + data;
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    // Unique per process: other checkouts run these tests at the same time.
    std::string tmpl = (fs::temp_directory_path() / "attnviz_st_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  void python(const std::string& mode, const std::string& arg, const std::string& out = "") {
    std::string cmd =
        ATTNVIZ_PYTHON " " + shellQuote(kScript) + " " + mode + " " + shellQuote(arg);
    if (!out.empty()) cmd += " >" + shellQuote(out);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  // The message names the file, says the problem (one of `words`) and is one line.
  void expectRefused(const std::string& bytes, std::initializer_list<const char*> words) {
    const std::string path = write("bad.safetensors", bytes);
    try {
      SafetensorsFile::open(path);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "message does not start with the file: " << msg;
      bool any = false;
      for (const char* w : words) any = any || msg.find(w) != std::string::npos;
      EXPECT_TRUE(any) << "message does not say the problem: " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  fs::path dir;
};

template <class Got, class Want>
void expectSameFloats(const Got& got, const Want& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << "[" << i << "]";
    } else {
      std::uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want[i], 4);
      EXPECT_EQ(a, b) << what << "[" << i << "] = " << got[i] << ", numpy " << want[i];
    }
  }
}

TEST_F(Safetensors, PythonWrittenFileListsEveryTensorWithItsDtypeShapeAndMetadata) {
  python("write", dir.string());
  const SafetensorsFile f = SafetensorsFile::open((dir / "good.safetensors").string());
  ASSERT_EQ(f.tensors().size(), 8u);
  // Listed in data order, whatever the JSON order.
  std::vector<std::string> names;
  for (const StTensorInfo& t : f.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "half", "bf", "dbl", "ints", "empty", "scalar",
                                             "model.layers.0.w"}));
  EXPECT_EQ(f.at("half").dtype, StDtype::F16);
  EXPECT_EQ(f.at("bf").dtype, StDtype::BF16);
  EXPECT_EQ(f.at("ints").dtype, StDtype::I64);
  EXPECT_EQ(f.at("model.layers.0.w").shape, (std::vector<std::int64_t>{3, 5, 7}));
  EXPECT_EQ(f.at("model.layers.0.w").byteSize(), 3u * 5 * 7 * 2);
  EXPECT_EQ(f.at("empty").elementCount(), 0u);
  EXPECT_TRUE(f.at("scalar").shape.empty());
  EXPECT_EQ(f.at("scalar").elementCount(), 1u);
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("tokens"), "[\"h\u00e9llo\", \"w\u00f6rld\"]");
}

TEST_F(Safetensors, Float16BFloat16AndFloat64ConvertExactlyAsNumpyDoes) {
  python("write", dir.string());
  const SafetensorsFile f = SafetensorsFile::open((dir / "good.safetensors").string());
  for (const char* name : {"a", "half", "bf", "dbl", "model.layers.0.w"}) {
    const NpyArray want = readNpy((dir / (std::string(name) + ".npy")).string());
    expectSameFloats(f.toFloat32(f.at(name)), want.data, name);
  }
  EXPECT_EQ(f.toFloat32(f.at("scalar")), FloatBuffer{4.5f});
  EXPECT_TRUE(f.toFloat32(f.at("empty")).empty());
}

TEST_F(Safetensors, ZeroCopyViewsPointIntoTheFileBytes) {
  python("write", dir.string());
  const std::string path = (dir / "good.safetensors").string();
  const std::string raw = slurp(path);
  const SafetensorsFile f = SafetensorsFile::open(path);
  const StTensorInfo& a = f.at("a");
  const auto bytes = f.bytes(a);
  ASSERT_EQ(bytes.size(), 24u);
  std::uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(std::memcmp(bytes.data(), raw.data() + 8 + n + a.begin, 24), 0);
  const auto view = f.f32View(a);
  ASSERT_EQ(view.size(), 6u);  // the data section is 8-aligned and "a" starts it
  EXPECT_EQ(std::vector<float>(view.begin(), view.end()), f.toFloat32(a));
  EXPECT_TRUE(f.f32View(f.at("half")).empty());  // not F32
}

// A converted tensor's pages can be dropped (the model loader does it after converting BF16, F16
// or a quantized tensor): the mapping then reads the same bytes again from the file, and bytes
// held in memory (fromBytes) are left alone.
TEST_F(Safetensors, ReleasedPagesReadBackTheSameBytes) {
  constexpr int n = 3 * 4096;  // BF16 values: 6 pages of 4 KiB, so whole pages are dropped
  std::string data(std::size_t(n) * 2, '\0');
  for (int i = 0; i < n; ++i) {
    const std::uint16_t v = std::uint16_t(0x3f80 + (i * 37) % 977);  // 1.0 and neighbours
    data[2 * i] = char(v & 0xff), data[2 * i + 1] = char(v >> 8);
  }
  const std::string json = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[" + std::to_string(n) +
                           "],\"data_offsets\":[0," + std::to_string(2 * n) + "]}}";
  const std::string bytes = stFile(json, data);
  const SafetensorsFile mapped = SafetensorsFile::open(write("bf16.safetensors", bytes));
  const SafetensorsFile held = SafetensorsFile::fromBytes(bytes, "held");
  for (const SafetensorsFile* f : {&mapped, &held}) {
    const StTensorInfo& t = f->at("w");
    const FloatBuffer before = f->toFloat32(t);
    f->releasePages(t);
    const std::span<const std::byte> b = f->bytes(t);
    ASSERT_EQ(b.size(), data.size());
    EXPECT_EQ(std::memcmp(b.data(), data.data(), data.size()), 0);
    const FloatBuffer after = f->toFloat32(t);
    ASSERT_EQ(after.size(), before.size());
    EXPECT_EQ(std::memcmp(after.data(), before.data(), after.size() * sizeof(float)), 0);
  }
}

TEST_F(Safetensors, UnsupportedDtypeConversionNamesTheTensor) {
  python("write", dir.string());
  const SafetensorsFile f = SafetensorsFile::open((dir / "good.safetensors").string());
  try {
    f.toFloat32(f.at("ints"));
    ADD_FAILURE() << "I64 converted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'ints'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("I64"), std::string::npos) << e.what();
  }
}

TEST_F(Safetensors, HalfConversionCoversEveryBitPattern) {
  // Independent of the implementation: value = (-1)^s * 2^(e-15) * (1 + m/1024), or the
  // subnormal 2^-14 * m/1024, in double.
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const int s = b >> 15, e = (b >> 10) & 31, m = b & 1023;
    const float got = halfToFloat(std::uint16_t(b));
    if (e == 31) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got) && std::signbit(got) == bool(s)) << b;
      } else {
        EXPECT_TRUE(std::isnan(got)) << b;
      }
      continue;
    }
    const double mag = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, e - 15);
    ASSERT_EQ(double(got), s ? -mag : mag) << "bits " << b;
    ASSERT_EQ(std::signbit(got), bool(s)) << "bits " << b;
  }
}

TEST_F(Safetensors, WriterOutputReadsBackInPythonAndHere) {
  const std::vector<float> w = {1.0f, -2.0f, 0.5f, 3.25f, 0.0f, 7.0f};
  const std::vector<float> x = {0.125f};
  const std::string path = (dir / "w.safetensors").string();
  saveSafetensors(path,
                  {StWriteTensor::f32("attn.0", {1, 2, 3}, w), StWriteTensor::f32("z", {1}, x)},
                  {{"model", "tiny"}, {"tokens", "[\"a\",\"b\"]"}});
  python("read", path, (dir / "py.txt").string());
  EXPECT_EQ(slurp((dir / "py.txt").string()),
            "attn.0 F32 [1, 2, 3] 9.75\n"
            "z F32 [1] 0.125\n"
            "metadata {\"model\": \"tiny\", \"tokens\": \"[\\\"a\\\",\\\"b\\\"]\"}\n"
            "data_start_mod8 0\n");
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.toFloat32(f.at("attn.0")), w);
  EXPECT_EQ(f.metadata().at("model"), "tiny");
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << "temp file left behind";
  }
}

TEST_F(Safetensors, WriterRefusesAShapeThatDoesNotMatchTheBytes) {
  StWriteTensor t = StWriteTensor::f32("a", {2, 2}, std::vector<float>{1, 2, 3});
  EXPECT_THROW(safetensorsBytes({t}), InputError);
  StWriteTensor u = StWriteTensor::f32("a", {1}, std::vector<float>{1});
  EXPECT_THROW(safetensorsBytes({u, u}), InputError);  // duplicate
}

TEST_F(Safetensors, MalformedFilesAreRefusedWithTheProblem) {
  const std::string four(4, '\0'), eight(8, '\0');
  const std::string ok = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  SafetensorsFile::fromBytes(stFile(ok, four), "ok");  // the baseline opens
  expectRefused("", {"not a safetensors file"});
  expectRefused("abc", {"not a safetensors file"});
  expectRefused(stFile(ok, four).substr(0, 20), {"truncated"});
  expectRefused(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + ok, {"100 MB"});
  expectRefused(stFile("[1,2]", ""), {"not a JSON object"});
  expectRefused(stFile("{\"a\":", ""), {"not valid JSON"});
  expectRefused(stFile(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", four),
                {"'a'", "unknown dtype 'F33'"});
  expectRefused(stFile(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", four), {"no dtype"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four),
                {"non-negative"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", four),
                {"non-negative"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four),
                {"tensor 'a'", "needs 8 bytes"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", four),
                {"past the end"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", four),
                {"backwards"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", four),
                {"data_offsets"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],)"
                       R"("data_offsets":[0,4]}})",
                       four),
                {"too large"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})",
                       eight),
                {"overlap"});
  expectRefused(stFile(R"({"__metadata__":{"x":1},"a":{"dtype":"F32","shape":[1],)"
                       R"("data_offsets":[0,4]}})",
                       four),
                {"__metadata__"});
  expectRefused(
      stFile(R"({"__metadata__":[],"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four),
      {"__metadata__"});
  expectRefused(stFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       eight),
                {"twice"});
}

TEST_F(Safetensors, MissingFileAndDirectoryAreRefused) {
  EXPECT_THROW(SafetensorsFile::open((dir / "nope.safetensors").string()), InputError);
  EXPECT_THROW(SafetensorsFile::open(dir.string()), InputError);
}

}  // namespace
}  // namespace attnviz
