// Shared by the GGUF tests: fixture paths, the manifest, expected values, a byte builder for
// hand-made files, and the rule for the real files in ../shared/testdata.
#pragma once

#include "attnviz/formats/fileio.h"
#include "attnviz/formats/npy.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace attnviz::testing {

inline const std::string kGgufFixtures = ATTNVIZ_GGUF_FIXTURES;
inline const std::string kSharedTestdata = ATTNVIZ_SHARED_TESTDATA;

inline std::string fixture(const std::string& rel) { return kGgufFixtures + "/" + rel; }

inline nlohmann::json readJson(const std::string& path) {
  return nlohmann::json::parse(readFile(path));
}

inline const nlohmann::json& manifest() {
  static const nlohmann::json m = readJson(fixture("manifest.json"));
  return m;
}

// The manifest entry of one fixture file ("types/Q4_0.gguf").
inline const nlohmann::json& manifestFile(const std::string& file) {
  for (const nlohmann::json& f : manifest()["files"])
    if (f["file"] == file) return f;
  throw std::runtime_error("no manifest entry for " + file);
}

// Expected float32 values (bit-exact) of a fixture tensor.
inline std::vector<float> expectedValues(const std::string& npyRel) {
  const NpyArray a = readNpy(fixture(npyRel));
  return std::vector<float>(a.data.begin(), a.data.end());
}

inline bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Index of the first value whose bits differ, or -1.
inline long firstBitDifference(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return long(i);
  return a.size() == b.size() ? -1 : long(std::min(a.size(), b.size()));
}

inline std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline bool ciMode() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// Little-endian GGUF bytes assembled by hand (no validation).
struct GgufBytes {
  std::string b;
  GgufBytes& u8(std::uint8_t v) { return raw(&v, 1); }
  GgufBytes& u32(std::uint32_t v) { return raw(&v, 4); }
  GgufBytes& u64(std::uint64_t v) { return raw(&v, 8); }
  GgufBytes& f32(float v) { return raw(&v, 4); }
  GgufBytes& str(const std::string& s) {
    u64(s.size());
    b += s;
    return *this;
  }
  GgufBytes& raw(const void* p, std::size_t n) {
    b.append(static_cast<const char*>(p), n);
    return *this;
  }
  GgufBytes& header(std::uint32_t version, std::uint64_t tensors, std::uint64_t kvs) {
    b += "GGUF";
    return u32(version).u64(tensors).u64(kvs);
  }
  GgufBytes& kvString(const std::string& key, const std::string& value) {
    return str(key).u32(8).str(value);
  }
  GgufBytes& kvU32(const std::string& key, std::uint32_t value) {
    return str(key).u32(4).u32(value);
  }
  GgufBytes& tensor(const std::string& name, const std::vector<std::uint64_t>& ne,
                    std::uint32_t type, std::uint64_t offset) {
    str(name).u32(std::uint32_t(ne.size()));
    for (std::uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad(std::size_t alignment) {
    while (b.size() % alignment) b += '\0';
    return *this;
  }
  GgufBytes& zeros(std::size_t n) {
    b.append(n, '\0');
    return *this;
  }
};

}  // namespace attnviz::testing

// The real files in ../shared/testdata: a test that needs them fails under CI=true when they are
// missing, and skips with a message otherwise.
#define ATTNVIZ_REQUIRE_TESTDATA(path)                                                            \
  do {                                                                                            \
    if (!std::filesystem::exists(path)) {                                                         \
      if (::attnviz::testing::ciMode()) {                                                         \
        FAIL() << "missing " << (path) << " (CI=true: the shared test data must be present)";     \
      }                                                                                           \
      GTEST_SKIP() << "missing " << (path) << " (the shared test data is not beside this clone)"; \
    }                                                                                             \
  } while (0)
