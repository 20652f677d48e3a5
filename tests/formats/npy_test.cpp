// .npy reading and writing: round trips, files written by NumPy, and every refusal, each of which
// must name the file and the problem.
#include "attnviz/formats/fileio.h"
#include "attnviz/formats/npy.h"
#include "check.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>

namespace attnviz {
namespace {

namespace fs = std::filesystem;

// An independent .npy encoder: magic, version, little-endian header length, a dict header
// padded with spaces to a multiple of 64 bytes and ended by '\n', then the raw bytes.
std::string npy(const std::string& descr, bool fortran, const std::string& shape,
                const std::string& raw, int major = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  const std::size_t pre = 6 + 2 + (major == 1 ? 2 : 4);
  std::size_t total = pre + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  dict.append(total - pre - dict.size() - 1, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  const std::uint32_t len = std::uint32_t(dict.size());
  out += char(len & 0xff);
  out += char((len >> 8) & 0xff);
  if (major != 1) {
    out += char((len >> 16) & 0xff);
    out += char((len >> 24) & 0xff);
  }
  return out + dict + raw;
}

template <class T>
std::string rawOf(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<float> iota(int n, float scale = 0.5f) {
  std::vector<float> v(n);
  for (int x = 0; x < n; ++x) v[x] = scale * float(x) - 3.0f;
  return v;
}

class NpyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("attnviz_npy_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // The message names the file and contains one of the words describing the problem.
  void expectRefused(const std::string& path, std::initializer_list<const char*> words,
                     bool asTensor = true) {
    try {
      if (asTensor)
        loadTensorNpy(path);
      else
        readNpy(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      std::string lower = msg;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      EXPECT_NE(msg.find(fs::path(path).filename().string()), std::string::npos)
          << "message does not name the file: " << msg;
      bool any = false;
      for (const char* w : words) any = any || lower.find(w) != std::string::npos;
      EXPECT_TRUE(any) << "message does not say the problem: " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
    }
  }
  fs::path dir;
};

TEST_F(NpyFiles, Float32TwoDimensionalLoadsAsOneHead) {
  const std::vector<float> v = iota(12);
  const Tensor3 t = loadTensorNpy(write("a.npy", npy("<f4", false, "(3, 4)", rawOf(v))));
  EXPECT_EQ(t.heads, 1);
  EXPECT_EQ(t.rows, 3);
  EXPECT_EQ(t.cols, 4);
  EXPECT_EQ(t.data, v);
}

TEST_F(NpyFiles, Float64ThreeDimensionalLoadsConvertedToFloat32) {
  std::vector<double> v(2 * 3 * 5);
  for (std::size_t x = 0; x < v.size(); ++x) v[x] = 0.1 * double(x) - 1.0;
  const Tensor3 t = loadTensorNpy(write("b.npy", npy("<f8", false, "(2, 3, 5)", rawOf(v))));
  ASSERT_TRUE(t.sameShape(Tensor3(2, 3, 5)));
  for (std::size_t x = 0; x < v.size(); ++x) EXPECT_EQ(t.data[x], float(v[x]));
}

TEST_F(NpyFiles, VersionTwoHeaderIsAccepted) {
  const std::vector<float> v = iota(6);
  const Tensor3 t = loadTensorNpy(write("v2.npy", npy("<f4", false, "(1, 2, 3)", rawOf(v), 2)));
  EXPECT_TRUE(t.sameShape(Tensor3(1, 2, 3)));
  EXPECT_EQ(t.data, v);
}

TEST_F(NpyFiles, SavedFileRoundTripsThreeDimensional) {
  const Tensor3 t = ref::randomTensor(3, 4, 5, 9);
  const std::string p = (dir / "rt.npy").string();
  saveNpy(p, t);
  const Tensor3 back = loadTensorNpy(p);
  EXPECT_TRUE(back.sameShape(t));
  EXPECT_EQ(back.data, t.data);
}

// A [L, H, T, T] array written from L separate buffers: the file holds them one after the other,
// as a single buffer of the same values would (read back with the loader, checked value by
// value against the parts); parts that do not fill the shape are refused, and nothing is written.
TEST_F(NpyFiles, SavedPartsAreWrittenInOrderAsOneArray) {
  const Tensor3 a = ref::randomTensor(2, 3, 3, 11), b = ref::randomTensor(2, 3, 3, 12);
  const std::string p = (dir / "parts.npy").string();
  saveNpy(p, {2, 2, 3, 3}, {std::span<const float>(a.data.data(), a.size()),
                            std::span<const float>(b.data.data(), b.size())});
  const NpyArray raw = readNpy(p);
  EXPECT_EQ(raw.shape, (std::vector<long long>{2, 2, 3, 3}));
  ASSERT_EQ(raw.data.size(), a.size() + b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(raw.data[i], a.data[i]) << i;
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(raw.data[a.size() + i], b.data[i]) << i;
  const std::string q = (dir / "short.npy").string();
  EXPECT_THROW(saveNpy(q, {3, 2, 3, 3}, {std::span<const float>(a.data.data(), a.size())}),
               InputError);
  EXPECT_FALSE(fs::exists(q));
}

TEST_F(NpyFiles, SavedFileRoundTripsTwoDimensional) {
  const Tensor3 t = ref::randomTensor(1, 7, 2, 10);
  const std::string p = (dir / "rt2.npy").string();
  saveNpy(p, t, true);
  const NpyArray raw = readNpy(p);
  EXPECT_EQ(raw.shape, (std::vector<long long>{7, 2}));
  EXPECT_EQ(raw.data, t.data);
}

TEST_F(NpyFiles, WrittenBytesAreALittleEndianFloat32CorderNpy) {
  Tensor3 t(2, 3, 4);
  const std::vector<float> values = iota(24);
  t.data.assign(values.begin(), values.end());
  const std::string b = npyBytes(t);
  ASSERT_GE(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
  const std::size_t hlen = std::uint8_t(b[8]) | (std::uint8_t(b[9]) << 8);
  ASSERT_EQ(b[6], 1);
  const std::string header = b.substr(10, hlen);
  EXPECT_EQ((10 + hlen) % 64, 0u) << "header not padded to 64 bytes";
  EXPECT_NE(header.find("'<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("False"), std::string::npos) << header;
  EXPECT_NE(header.find("(2, 3, 4)"), std::string::npos) << header;
  EXPECT_EQ(header.back(), '\n');
  ASSERT_EQ(b.size(), 10 + hlen + 24 * 4);
  std::vector<float> back(24);
  std::memcpy(back.data(), b.data() + 10 + hlen, 24 * 4);
  EXPECT_EQ(back, t.data);
}

TEST_F(NpyFiles, FilesWrittenByNumPyLoad) {
  // The fixtures were written by numpy.save (see tests/fixtures/README.md).
  const Tensor3 q = loadTensorNpy(std::string(ATTNVIZ_TEST_DATA_DIR) + "/fixtures/causal/q.npy");
  EXPECT_TRUE(q.sameShape(Tensor3(3, 9, 16)));
  const Tensor3 d = loadTensorNpy(std::string(ATTNVIZ_TEST_DATA_DIR) + "/fixtures/decode/q.npy");
  EXPECT_TRUE(d.sameShape(Tensor3(4, 1, 16)));
}

TEST_F(NpyFiles, BoolAndUint8MaskFilesLoadAsAllowMasks) {
  const std::string bytes = std::string("\x01\x00\x02\x01\x00\x01", 6);
  for (const char* descr : {"|b1", "|u1"}) {
    const MaskFile m = loadMaskNpy(write(std::string("m") + (descr[1] == 'b' ? "b" : "u") + ".npy",
                                         npy(descr, false, "(2, 3)", bytes)));
    EXPECT_TRUE(m.isBool);
    ASSERT_TRUE(m.values.sameShape(Tensor3(1, 2, 3)));
    EXPECT_EQ(m.values.data, (std::vector<float>{1, 0, 1, 1, 0, 1}));
  }
}

TEST_F(NpyFiles, FloatMaskFileLoadsAsBiasKeepingNegativeInfinity) {
  std::vector<float> v = iota(8);
  v[3] = -std::numeric_limits<float>::infinity();
  const MaskFile m = loadMaskNpy(write("bias.npy", npy("<f4", false, "(2, 2, 2)", rawOf(v))));
  EXPECT_FALSE(m.isBool);
  EXPECT_TRUE(m.values.sameShape(Tensor3(2, 2, 2)));
  EXPECT_EQ(m.values.data, v);
}

TEST_F(NpyFiles, FortranOrderIsRefused) {
  expectRefused(write("fortran.npy", npy("<f4", true, "(3, 4)", rawOf(iota(12)))), {"fortran"});
}

TEST_F(NpyFiles, BigEndianIsRefused) {
  expectRefused(write("big.npy", npy(">f4", false, "(3, 4)", rawOf(iota(12)))), {"endian", ">f4"});
}

TEST_F(NpyFiles, IntegerDtypeIsRefused) {
  std::vector<std::int32_t> v(12, 1);
  expectRefused(write("int.npy", npy("<i4", false, "(3, 4)", rawOf(v))),
                {"dtype", "<i4", "integer", "type"});
}

TEST_F(NpyFiles, BoolDtypeIsRefusedForQKV) {
  expectRefused(write("boolq.npy", npy("|b1", false, "(2, 2)", std::string(4, '\x01'))),
                {"dtype", "|b1", "bool", "type"});
}

TEST_F(NpyFiles, TruncatedDataIsRefused) {
  std::string raw = rawOf(iota(12));
  raw.resize(raw.size() - 5);
  expectRefused(write("short.npy", npy("<f4", false, "(3, 4)", raw)),
                {"truncat", "short", "expected", "size", "bytes"});
}

TEST_F(NpyFiles, TrailingBytesAreRefused) {
  std::string raw = rawOf(iota(12)) + "junk";
  expectRefused(write("long.npy", npy("<f4", false, "(3, 4)", raw)),
                {"trailing", "size", "bytes", "expected", "extra"});
}

TEST_F(NpyFiles, TruncatedHeaderIsRefused) {
  const std::string full = npy("<f4", false, "(3, 4)", rawOf(iota(12)));
  expectRefused(write("hdr.npy", full.substr(0, 30)), {"header", "truncat", "short"});
}

TEST_F(NpyFiles, FileShorterThanThePreambleIsRefused) {
  expectRefused(write("tiny.npy", "\x93NUM"), {"header", "truncat", "short", "magic", "not a"});
}

TEST_F(NpyFiles, EmptyFileIsRefused) {
  expectRefused(write("empty.npy", ""), {"empty", "header", "truncat", "short", "magic", "not a"});
}

TEST_F(NpyFiles, OneDimensionalArrayIsRefusedAsATensor) {
  expectRefused(write("one.npy", npy("<f4", false, "(12,)", rawOf(iota(12)))),
                {"dimension", "ndim", "2-d", "shape", "3-d"});
}

TEST_F(NpyFiles, FourDimensionalArrayIsRefusedAsATensor) {
  expectRefused(write("four.npy", npy("<f4", false, "(1, 2, 2, 3)", rawOf(iota(12)))),
                {"dimension", "ndim", "2-d", "shape", "3-d"});
}

TEST_F(NpyFiles, BadMagicIsRefused) {
  std::string b = npy("<f4", false, "(3, 4)", rawOf(iota(12)));
  b[1] = 'X';
  expectRefused(write("magic.npy", b), {"magic", "not a .npy", "not an npy", "not a npy"});
}

TEST_F(NpyFiles, UnknownVersionIsRefused) {
  std::string b = npy("<f4", false, "(3, 4)", rawOf(iota(12)));
  b[6] = 9;
  expectRefused(write("ver.npy", b), {"version"});
}

TEST_F(NpyFiles, HeaderLengthBeyondTheFileIsRefused) {
  std::string b = npy("<f4", false, "(3, 4)", rawOf(iota(12)));
  b[8] = '\xff';
  b[9] = '\x7f';
  expectRefused(write("hlen.npy", b), {"header", "truncat", "short"});
}

TEST_F(NpyFiles, NegativeOrAbsurdShapeIsRefused) {
  expectRefused(write("neg.npy", npy("<f4", false, "(-3, 4)", rawOf(iota(12)))),
                {"shape", "dimension", "negative"});
  expectRefused(write("huge.npy", npy("<f4", false, "(4000000000, 4000000000)", rawOf(iota(12)))),
                {"shape", "large", "limit", "size", "truncat", "too", "bytes"});
}

TEST_F(NpyFiles, NaNInATensorFileIsReportedWithItsIndex) {
  std::vector<float> v = iota(12);
  v[7] = std::numeric_limits<float>::quiet_NaN();
  expectRefused(write("nan.npy", npy("<f4", false, "(3, 4)", rawOf(v))), {"nan", "finite"});
}

TEST_F(NpyFiles, InfinityInATensorFileIsReported) {
  std::vector<double> v(6, 1.0);
  v[2] = std::numeric_limits<double>::infinity();
  expectRefused(write("inf.npy", npy("<f8", false, "(2, 3)", rawOf(v))), {"inf", "finite"});
}

TEST_F(NpyFiles, MissingFileIsRefusedNamingIt) {
  expectRefused((dir / "nope.npy").string(), {"open", "no such", "not found", "exist"});
}

TEST_F(NpyFiles, ParseNpyMessageStartsWithTheGivenName) {
  try {
    parseNpy("garbage", "the-name", false);
    FAIL() << "accepted garbage";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("the-name", 0), 0u) << e.what();
  }
}

TEST_F(NpyFiles, AtomicWriteReplacesAnExistingFileAndLeavesNoTempFile) {
  const std::string p = write("out.bin", "old contents");
  writeFileAtomic(p, "new");
  EXPECT_EQ(testing::slurp(p), "new");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(NpyFiles, AtomicWriteIntoAMissingFolderFailsNamingThePath) {
  const std::string p = (dir / "no" / "such" / "x.npy").string();
  try {
    writeFileAtomic(p, "x");
    FAIL() << "wrote into a missing folder";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.npy"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnviz
