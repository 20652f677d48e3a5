// attnviz GPU tests: getting a context, and comparing two backends the way ggml's
// test-backend-ops does (normalized mean squared error plus a max-abs bound).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "attnviz/engine/engine.h"
#include "attnviz/gpu/gpu_engine.h"
#include "reference.h"

namespace attnviz::gputest {

inline constexpr double kMaxNmse = 1e-7;
inline constexpr double kMaxAbs = 1e-5;

inline bool gpuRequired() {
  const char* e = std::getenv("ATTNVIZ_REQUIRE_GPU");
  return e && std::string(e) == "1";
}

// Builds a headless engine into `out`, or records why not in `why`.
inline void tryMakeEngine(std::unique_ptr<GpuEngine>& out, std::string& why) {
  try {
    out = makeGpuEngineHeadless();
  } catch (const std::exception& e) {
    why = e.what();
  }
}

}  // namespace attnviz::gputest

// Declares `var` as a headless GPU engine. Without a context the test FAILS when
// ATTNVIZ_REQUIRE_GPU=1 (CI) and is skipped otherwise, with the reason either way.
#define ATTNVIZ_GPU_ENGINE_OR_SKIP(var)                                \
  std::unique_ptr<::attnviz::GpuEngine> var;                           \
  do {                                                                 \
    std::string why_;                                                  \
    ::attnviz::gputest::tryMakeEngine(var, why_);                      \
    if (!var) {                                                        \
      if (::attnviz::gputest::gpuRequired()) {                         \
        FAIL() << "no GPU engine and ATTNVIZ_REQUIRE_GPU=1: " << why_; \
      }                                                                \
      GTEST_SKIP() << "no GPU engine: " << why_;                       \
    }                                                                  \
  } while (0)

namespace attnviz::gputest {

struct Error {
  double nmse = 0.0;
  double maxAbs = 0.0;
  std::size_t worst = 0;
};

// NMSE = sum (got - want)^2 / sum want^2 (0 when both are all zeros), and the largest |got-want|.
inline Error compare(const Tensor3& got, const Tensor3& want) {
  Error e;
  double num = 0.0, den = 0.0;
  for (std::size_t n = 0; n < want.size(); ++n) {
    const double d = double(got.data[n]) - double(want.data[n]);
    num += d * d;
    den += double(want.data[n]) * double(want.data[n]);
    if (!(std::fabs(d) <= e.maxAbs)) {  // NaN counts as the worst
      e.maxAbs = std::isnan(d) ? INFINITY : std::fabs(d);
      e.worst = n;
    }
  }
  e.nmse = den > 0.0 ? num / den : (num > 0.0 ? INFINITY : 0.0);
  return e;
}

inline ::testing::AssertionResult withinParity(const char* what, const Tensor3& got,
                                               const Tensor3& want) {
  if (!got.sameShape(want)) {
    return ::testing::AssertionFailure()
           << what << ": shape " << got.shapeString() << " vs CPU " << want.shapeString();
  }
  const Error e = compare(got, want);
  if (e.nmse <= kMaxNmse && e.maxAbs <= kMaxAbs) return ::testing::AssertionSuccess();
  const std::size_t plane = std::size_t(want.rows) * want.cols;
  return ::testing::AssertionFailure()
         << what << ": NMSE " << e.nmse << " (max " << kMaxNmse << "), max abs " << e.maxAbs
         << " (max " << kMaxAbs << ") at [" << e.worst / plane << ", "
         << (e.worst % plane) / want.cols << ", " << e.worst % want.cols << "]: GPU "
         << got.data[e.worst] << ", CPU " << want.data[e.worst];
}

}  // namespace attnviz::gputest
