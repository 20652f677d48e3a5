// attnviz model tests: fixture folders, copies of them to break, and .npy comparisons.
#pragma once

#include "run_binary.h"
#include "temp_dir.h"

#include "attnviz/formats/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
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

}  // namespace attnviz::testing
