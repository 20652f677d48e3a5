// attnviz model tests: fixture folders, copies of them to break, and .npy comparisons.
#pragma once

#include "run_binary.h"
#include "temp_dir.h"

#include "attnviz/formats/npy.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

namespace attnviz::testing {

namespace fs = std::filesystem;

inline fs::path modelDir() { return fs::path(ATTNVIZ_MODEL_DIR); }
inline fs::path fixture(const std::string& name) { return modelDir() / "fixtures" / name; }
// ../shared/testdata beside the source tree (real files nobody here wrote).
inline fs::path sharedTestdata() { return fs::path(ATTNVIZ_SOURCE_DIR).parent_path() / "shared" / "testdata"; }

// Float32 values against a reference: weights within `abs`, or (relative) within rel * the
// reference's largest magnitude.
template <class Floats>  // std::vector<float> or FloatBuffer
void expectClose(const Floats& got, const NpyArray& want, double abs,
                        double relToScale, const std::string& what) {
  ASSERT_EQ(got.size(), want.data.size()) << what;
  double scale = 0.0;
  for (float v : want.data) scale = std::max(scale, double(std::fabs(v)));
  const double tol = relToScale > 0 ? relToScale * scale : abs;
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - double(want.data[i]));
    if (!(e <= worst)) worst = e, at = i;
  }
  EXPECT_LE(worst, tol) << what << ": worst error at flat index " << at << ": " << got[at]
                        << " vs reference " << want.data[at];
}

// A copy of the folder `src` at `dst` with its config.json edited by `edit`.
inline fs::path editedCopy(const fs::path& src, const fs::path& dst,
                           const std::function<void(nlohmann::json&)>& edit) {
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src))
    fs::copy(e.path(), dst / e.path().filename(), fs::copy_options::overwrite_existing);
  nlohmann::json j;
  {
    std::ifstream in(dst / "config.json");
    j = nlohmann::json::parse(in);
  }
  edit(j);
  std::ofstream(dst / "config.json") << j.dump(2);
  return dst;
}

// A refused model: exit 1, one line on stderr naming `file` and saying `problem`, nothing on
// stdout.
inline void expectOneLineRefusal(const CliRun& r, const fs::path& file, const std::string& problem) {
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << "want \"" << problem << "\" in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace attnviz::testing
