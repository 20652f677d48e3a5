// attnviz core tests: comparisons of engine results with the double reference (tests/reference.h).
#pragma once

#include "attnviz/engine/engine.h"
#include "reference.h"
#include "run_binary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace attnviz::testing {

// Float32 attention against the double reference: abs 1e-5 + rel 1e-4, the tests' tolerance.
inline constexpr double kAbs = 1e-5;
inline constexpr double kRel = 1e-4;

// Compares every stage: scaled scores, weights (exact zeros where masked), output, row stats.
inline void expectMatchesReference(const AttentionResult& got, const ref::Result& want) {
  ASSERT_EQ(got.weights.heads, want.H);
  ASSERT_EQ(got.weights.rows, want.Tq);
  ASSERT_EQ(got.weights.cols, want.Tk);
  ASSERT_EQ(got.output.heads, want.H);
  ASSERT_EQ(got.output.rows, want.Tq);
  ASSERT_EQ(got.output.cols, want.dv);
  ASSERT_EQ(got.rows.size(), std::size_t(want.H) * want.Tq);
  int bad = 0;
  for (int h = 0; h < want.H; ++h) {
    for (int i = 0; i < want.Tq; ++i) {
      for (int j = 0; j < want.Tk && bad < 10; ++j) {
        const std::size_t idx = (std::size_t(h) * want.Tq + i) * want.Tk + j;
        if (!got.scaled.empty()) {
          if (!ref::close(got.scaled.data[idx], want.scaled[idx], kAbs, kRel)) {
            ++bad;
            ADD_FAILURE() << "scaled[" << h << "," << i << "," << j
                          << "] = " << got.scaled.data[idx] << ", reference " << want.scaled[idx];
          }
        }
        const float a = got.weights.data[idx];
        if (std::isinf(want.logits[idx])) {
          if (a != 0.0f) {
            ++bad;
            ADD_FAILURE() << "masked weight[" << h << "," << i << "," << j << "] = " << a
                          << ", must be exactly 0";
          }
        } else if (!ref::close(a, want.weights[idx], kAbs, kRel)) {
          ++bad;
          ADD_FAILURE() << "weight[" << h << "," << i << "," << j << "] = " << a << ", reference "
                        << want.weights[idx];
        }
      }
      for (int c = 0; c < want.dv && bad < 10; ++c) {
        const std::size_t idx = (std::size_t(h) * want.Tq + i) * want.dv + c;
        if (!ref::close(got.output.data[idx], want.output[idx], kAbs, kRel)) {
          ++bad;
          ADD_FAILURE() << "output[" << h << "," << i << "," << c << "] = " << got.output.data[idx]
                        << ", reference " << want.output[idx];
        }
      }
      const RowStats& rs = got.row(h, i);
      const ref::Row& rr = want.row(h, i);
      EXPECT_EQ(rs.fullyMasked, rr.fullyMasked) << "row " << h << "," << i;
      EXPECT_NEAR(rs.sum, rr.sum, 1e-5) << "row " << h << "," << i;
      EXPECT_NEAR(rs.max, rr.max, kAbs + kRel * rr.max) << "row " << h << "," << i;
      EXPECT_NEAR(rs.entropy, rr.entropy, 1e-4) << "row " << h << "," << i;
      if (rr.fullyMasked) {
        EXPECT_EQ(rs.argmax, -1) << "row " << h << "," << i;
      } else if (rs.argmax != rr.argmax) {
        // Accept another key only when its reference weight ties the maximum.
        ASSERT_GE(rs.argmax, 0);
        ASSERT_LT(rs.argmax, want.Tk);
        EXPECT_NEAR(want.w(h, i, rs.argmax), rr.max, 1e-6)
            << "row " << h << "," << i << " argmax " << rs.argmax << ", reference " << rr.argmax;
      }
    }
  }
}

// Runs the CPU engine on (q, k, v, p) and compares with the reference.
inline void expectEngineMatchesReference(const Tensor3& q, const Tensor3& k, const Tensor3& v,
                                         const AttentionParams& p) {
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  const AttentionResult& got = engine->result();
  expectMatchesReference(got, ref::attention(q, k, v, p));
}

}  // namespace attnviz::testing
