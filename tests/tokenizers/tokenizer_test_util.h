// attnviz tokenizer tests: paths, temp folders, running the references, and the shared testdata
// policy (missing: a failure under CI=true, a skip otherwise).
#pragma once

#include "run_shell.h"
#include "temp_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace attnviz::testing {

namespace fs = std::filesystem;

inline fs::path testDir() { return fs::path(ATTNVIZ_TOKENIZER_TEST_DIR); }
inline fs::path modelTestDir() { return fs::path(ATTNVIZ_MODEL_DIR); }
inline fs::path npmModules() { return fs::path(ATTNVIZ_NPM_DIR) / "node_modules"; }
// ../shared/testdata beside the source tree (real files nobody here wrote).
inline fs::path sharedTestdata() {
  return fs::path(ATTNVIZ_SOURCE_DIR).parent_path() / "shared" / "testdata";
}
inline bool underCi() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// A reference made once per build tree: `make(dir)` fills `dir` (returning "" or an error); the
// result is kept under the build tree, keyed by `key` (the inputs' contents), so each test
// process of a run (gtest_discover_tests runs one per test) reuses it. Written to a temp folder
// and renamed into place, so concurrent test processes never see half a reference.
inline fs::path cachedReference(const std::string& name, const std::string& key,
                                const std::function<std::string(const fs::path&)>& make,
                                std::string& error) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>{}(key));
  const fs::path root = fs::path(ATTNVIZ_TOKENIZER_CACHE_DIR);
  const fs::path dir = root / (name + "-" + hex);
  if (fs::exists(dir / "reference.json")) return dir;
  std::random_device rd;
  const fs::path tmp = root / (name + "-" + hex + ".tmp" + std::to_string(rd()));
  fs::create_directories(tmp);
  error = make(tmp);
  std::error_code ec;
  if (!error.empty()) {
    fs::remove_all(tmp, ec);
    return dir;
  }
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp, ec);  // another process won the race: use its copy
  return dir;
}

inline std::string joinIds(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

}  // namespace attnviz::testing

// Shared test data that is missing: FAIL under CI=true, else skip with the reason.
#define ATTNVIZ_REQUIRE_SHARED(path)                                                        \
  do {                                                                                      \
    if (!std::filesystem::exists(path)) {                                                   \
      if (::attnviz::testing::underCi()) FAIL() << "missing shared test data: " << (path); \
      GTEST_SKIP() << "missing shared test data: " << (path);                               \
    }                                                                                       \
  } while (0)
