// attnviz GPU tests: the same seeded inputs through the CPU engine and the GPU engine.
// NMSE <= 1e-7 and max abs error <= 1e-5 on the weights and the outputs; masked weights must
// be exactly 0 on the GPU (checked against the reference mask rule, not the CPU); row stats agree.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <utility>
#include <vector>

#include "gpu_test_util.h"

namespace attnviz {
namespace {

using gputest::withinParity;

constexpr float kInf = std::numeric_limits<float>::infinity();

using MaskSetup = std::function<void(MaskSpec&, int H, int Tq, int Tk)>;

struct Case {
  std::string name;
  int H, Tq, Tk, dk, dv;
  AttentionParams params;
  MaskSetup setup;         // builds the mask when the test runs (custom matrices can be large)
  ref::ExprRef expr = {};  // what the mask's expression means, for the masked-cell check

  AttentionParams build(int Tq_, int Tk_) const {
    AttentionParams p = params;
    if (setup) setup(p.mask, H, Tq_, Tk_);
    return p;
  }
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " (H " << c.H << ", T_q " << c.Tq << ", T_k " << c.Tk << ", d_k " << c.dk
      << ", d_v " << c.dv << ", mask " << describeMask(c.build(1, 1).mask) << ", tau "
      << c.params.temperature << ")";
}

Tensor3 seeded(int H, int rows, int cols, std::uint32_t seed) {
  return ref::randomTensor(H, rows, cols, seed);
}

// A bool mask with some zero rows (fully masked) and a random pattern elsewhere.
Tensor3 allowMask(int heads, int Tq, int Tk, std::uint32_t seed) {
  Tensor3 m(heads, Tq, Tk);
  std::mt19937 gen(seed);
  std::bernoulli_distribution keep(0.6);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < Tq; ++i)
      for (int j = 0; j < Tk; ++j) m.at(h, i, j) = (i % 5 == 3) ? 0.0f : (keep(gen) ? 1.0f : 0.0f);
  return m;
}

// A float bias with -inf sprinkled in, and one row entirely -inf.
Tensor3 biasMask(int heads, int Tq, int Tk, std::uint32_t seed) {
  Tensor3 m(heads, Tq, Tk);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::bernoulli_distribution blocked(0.2);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < Tq; ++i)
      for (int j = 0; j < Tk; ++j) m.at(h, i, j) = (i == Tq / 2 || blocked(gen)) ? -kInf : n(gen);
  return m;
}

// Document ids in runs of random length (1..20), seeded.
std::vector<int> docRuns(int Tk, std::uint32_t seed) {
  std::vector<int> d(static_cast<std::size_t>(Tk));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> len(1, 20);
  int doc = 0, left = len(gen);
  for (int j = 0; j < Tk; ++j) {
    if (left-- == 0) ++doc, left = len(gen) - 1;
    d[std::size_t(j)] = doc;
  }
  return d;
}

AttentionParams params(float tau = 1.0f) {
  AttentionParams p;
  p.temperature = tau;
  return p;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](std::string name, int H, int Tq, int Tk, int dk, int dv, AttentionParams p,
                 MaskSetup setup = {}, ref::ExprRef expr = {}) {
    c.push_back(
        {std::move(name), H, Tq, Tk, dk, dv, std::move(p), std::move(setup), std::move(expr)});
  };
  // Sizes that are not multiples of the 64-wide tiles or the 256-wide softmax workgroup.
  for (int T : {1, 7, 33, 129}) {
    for (int d : {16, 64, 128}) {
      add("Plain_H1_T" + std::to_string(T) + "_d" + std::to_string(d), 1, T, T, d, d, params());
    }
  }
  add("Plain_H12_T33_d64", 12, 33, 33, 64, 64, params());
  add("Plain_H12_T129_d128", 12, 129, 129, 128, 128, params());
  add("Plain_H1_T1000_d64", 1, 1000, 1000, 64, 64, params());
  add("Plain_H12_T1000_d16", 12, 1000, 1000, 16, 16, params());
  add("Plain_H12_T1000_d128", 12, 1000, 1000, 128, 128, params());
  add("DkDiffersFromDv_H3_T129_dk128_dv16", 3, 129, 129, 128, 16, params());

  // T_q != T_k: bottom-right alignment of the causal mask.
  {
    AttentionParams p = params();
    p.mask.causal = true;
    add("CausalCross_H1_Tq7_Tk33_d64", 1, 7, 33, 64, 64, p);
    add("CausalDecode_H12_Tq1_Tk129_d64", 12, 1, 129, 64, 64, p);
    add("CausalMoreQueriesThanKeys_H1_Tq129_Tk7_d16", 1, 129, 7, 16, 16, p);  // masked rows
    add("CausalCross_H1_Tq33_Tk1000_d128", 1, 33, 1000, 128, 128, p);
    add("Causal_H1_T1000_d64", 1, 1000, 1000, 64, 64, p);
    add("CausalMoreQueriesThanKeys_H12_Tq1000_Tk129_d64", 12, 1000, 129, 64, 64, p);
  }

  // Each mask kind alone (H = 12, T = 129).
  auto maskCase = [&](const std::string& name, auto setup, int H = 12, int Tq = 129, int Tk = 129,
                      int d = 64) { add(name, H, Tq, Tk, d, d, params(), setup); };
  maskCase("Causal", [](MaskSpec& m, int, int, int) { m.causal = true; });
  maskCase("Window4", [](MaskSpec& m, int, int, int) { m.window = 4; });
  maskCase("Prefix5", [](MaskSpec& m, int, int, int) { m.prefix = 5; });
  maskCase("Sink3", [](MaskSpec& m, int, int, int) { m.sink = 3; });
  maskCase("Pad10", [](MaskSpec& m, int, int, int) { m.pad = 10; });
  maskCase("PadAllKeys_FullyMasked", [](MaskSpec& m, int, int, int Tk) { m.pad = Tk; });
  maskCase("Alibi_H12", [](MaskSpec& m, int, int, int) { m.alibi = true; });
  maskCase(
      "Alibi_H8", [](MaskSpec& m, int, int, int) { m.alibi = true; }, 8);
  maskCase("CustomAllowShared", [](MaskSpec& m, int, int Tq, int Tk) {
    m.customKind = MaskSpec::Custom::Allow;
    m.custom = allowMask(1, Tq, Tk, 11);
  });
  maskCase("CustomAllowPerHead", [](MaskSpec& m, int H, int Tq, int Tk) {
    m.customKind = MaskSpec::Custom::Allow;
    m.custom = allowMask(H, Tq, Tk, 12);
  });
  maskCase("CustomBiasShared", [](MaskSpec& m, int, int Tq, int Tk) {
    m.customKind = MaskSpec::Custom::Bias;
    m.custom = biasMask(1, Tq, Tk, 13);
  });
  maskCase(
      "CustomBiasPerHead_CrossTq33Tk129",
      [](MaskSpec& m, int H, int Tq, int Tk) {
        m.customKind = MaskSpec::Custom::Bias;
        m.custom = biasMask(H, Tq, Tk, 14);
      },
      12, 33, 129);

  // Combinations.
  maskCase("CausalWindowSink", [](MaskSpec& m, int, int, int) {
    m.causal = true;
    m.window = 8;
    m.sink = 2;
  });
  maskCase("CausalPrefixPad", [](MaskSpec& m, int, int, int) {
    m.causal = true;
    m.prefix = 20;
    m.pad = 7;
  });
  maskCase("WindowPadAlibiCustomBias", [](MaskSpec& m, int, int Tq, int Tk) {
    m.window = 16;
    m.pad = 3;
    m.alibi = true;
    m.customKind = MaskSpec::Custom::Bias;
    m.custom = biasMask(1, Tq, Tk, 15);
  });
  maskCase(
      "EverythingCross_Tq33_Tk129",
      [](MaskSpec& m, int H, int Tq, int Tk) {
        m.causal = true;
        m.window = 9;
        m.prefix = 4;
        m.sink = 2;
        m.pad = 5;
        m.alibi = true;
        m.customKind = MaskSpec::Custom::Allow;
        m.custom = allowMask(H, Tq, Tk, 16);
      },
      12, 33, 129);
  maskCase(
      "CausalAlibi_T1000",
      [](MaskSpec& m, int, int, int) {
        m.causal = true;
        m.alibi = true;
      },
      1, 1000, 1000, 64);
  maskCase(
      "CausalWindowAlibiCustomAllow_H12_T1000",
      [](MaskSpec& m, int H, int Tq, int Tk) {
        m.causal = true;
        m.window = 100;
        m.alibi = true;
        m.customKind = MaskSpec::Custom::Allow;
        m.custom = allowMask(H, Tq, Tk, 17);
      },
      12, 1000, 1000, 64);
  maskCase(
      "WindowSinkPad_T1000_d128",
      [](MaskSpec& m, int, int, int) {
        m.window = 64;
        m.sink = 4;
        m.pad = 100;
      },
      1, 1000, 1000, 128);

  // Extended kinds: chunk, documents, expressions, softcap; alone, across T_q != T_k (query
  // positions before the keys when T_q > T_k), and combined with the others.
  maskCase("Chunk16", [](MaskSpec& m, int, int, int) { m.chunk = 16; });
  maskCase(
      "ChunkCausal7_Cross_Tq33_Tk129",
      [](MaskSpec& m, int, int, int) {
        m.chunk = 7;
        m.causal = true;
      },
      12, 33, 129);
  maskCase(
      "Chunk5_MoreQueriesThanKeys_Tq129_Tk33", [](MaskSpec& m, int, int, int) { m.chunk = 5; }, 3,
      129, 33);
  maskCase("DocRuns", [](MaskSpec& m, int, int, int Tk) { m.docs = docRuns(Tk, 21); });
  maskCase(
      "DocCausalPad_Cross_Tq33_Tk129",
      [](MaskSpec& m, int, int, int Tk) {
        m.docs = docRuns(Tk, 22);
        m.causal = true;
        m.pad = 6;
      },
      12, 33, 129);
  maskCase(
      "Doc_MoreQueriesThanKeys_Tq129_Tk33",
      [](MaskSpec& m, int, int, int Tk) { m.docs = docRuns(Tk, 23); }, 3, 129, 33);
  add(
      "ExprEvenDistance_H12_T129_d64", 12, 129, 129, 64, 64, params(),
      [](MaskSpec& m, int, int, int) { m.expr = "(q - k) % 2 == 0"; },
      [](int, int i, int j, int Tq, int Tk) { return ((i + Tk - Tq) - j) % 2 == 0; });
  add(
      "ExprPerHeadWindow_H12_T129_d64", 12, 129, 129, 64, 64, params(),
      [](MaskSpec& m, int, int, int) { m.expr = "k <= q && q - k < 4 * (h + 1)"; },
      [](int h, int i, int j, int Tq, int Tk) {
        const int p = i + Tk - Tq;
        return j <= p && p - j < 4 * (h + 1);
      });
  add(
      "ExprDocCausal_Cross_H4_Tq33_Tk129_d64", 4, 33, 129, 64, 64, params(),
      [](MaskSpec& m, int, int, int Tk) {
        m.docs = docRuns(Tk, 24);
        m.expr = "doc_q % 2 == 0 && doc_k <= doc_q && k <= q";
      },
      [](int, int i, int j, int Tq, int Tk) {
        const std::vector<int> d = docRuns(Tk, 24);
        const int p = i + Tk - Tq;
        return d[std::size_t(p)] % 2 == 0 && d[std::size_t(j)] <= d[std::size_t(p)] && j <= p;
      });
  add(
      "ExprGlobalPlusWindow_H1_T1000_d64", 1, 1000, 1000, 64, 64, params(),
      [](MaskSpec& m, int, int, int) { m.expr = "k < 4 || q < 4 || abs(q - k) < 32"; },
      [](int, int i, int j, int, int) { return j < 4 || i < 4 || std::abs(i - j) < 32; });
  maskCase("Softcap5", [](MaskSpec& m, int, int, int) { m.softcap = 5.0f; });
  maskCase("SoftcapHalfCausalAlibi", [](MaskSpec& m, int, int, int) {
    m.softcap = 0.5f;
    m.causal = true;
    m.alibi = true;
  });
  {
    AttentionParams p = params(0.1f);
    p.mask.softcap = 2.0f;
    p.mask.causal = true;
    add("SoftcapTau0_1_H12_T129_d64", 12, 129, 129, 64, 64, p);
  }
  add(
      "EveryNewKind_Cross_H12_Tq33_Tk129_d64", 12, 33, 129, 64, 64, params(),
      [](MaskSpec& m, int, int, int Tk) {
        m.causal = true;
        m.window = 40;
        m.prefix = 3;
        m.pad = 4;
        m.chunk = 32;
        m.docs = docRuns(Tk, 25);
        m.expr = "k % 3 != 1";
        m.softcap = 3.0f;
        m.alibi = true;
      },
      [](int, int, int j, int, int) { return j % 3 != 1; });

  // Temperature.
  const std::pair<float, const char*> taus[] = {{0.1f, "0_1"}, {1.0f, "1"}, {10.0f, "10"}};
  for (const auto& [tau, label] : taus) {
    AttentionParams p = params(tau);
    p.mask.causal = true;
    add(std::string("CausalTau") + label + "_H12_T129_d64", 12, 129, 129, 64, 64, p);
    add(std::string("PlainTau") + label + "_H1_T1000_d16", 1, 1000, 1000, 16, 16, params(tau));
  }
  return c;
}

// Every masked cell must be exactly 0 on the GPU: checked against the reference mask rule.
::testing::AssertionResult maskedCellsAreZero(const Tensor3& w, const AttentionParams& p,
                                              const ref::ExprRef& expr) {
  const MaskSpec& m = p.mask;
  for (int h = 0; h < w.heads; ++h)
    for (int i = 0; i < w.rows; ++i)
      for (int j = 0; j < w.cols; ++j) {
        bool masked = !ref::allowed(m, h, i, j, w.rows, w.cols, expr);
        if (m.customKind == MaskSpec::Custom::Bias) {
          masked = masked || m.custom.at(m.custom.heads == 1 ? 0 : h, i, j) == -kInf;
        }
        if (masked && w.at(h, i, j) != 0.0f) {
          return ::testing::AssertionFailure()
                 << "masked weight [" << h << ", " << i << ", " << j << "] = " << w.at(h, i, j);
        }
      }
  return ::testing::AssertionSuccess();
}

void expectRowStatsMatch(const AttentionResult& gpu, const AttentionResult& cpu) {
  ASSERT_EQ(gpu.rows.size(), cpu.rows.size());
  int bad = 0;
  for (std::size_t r = 0; r < cpu.rows.size() && bad < 5; ++r) {
    const RowStats& g = gpu.rows[r];
    const RowStats& c = cpu.rows[r];
    const int h = int(r) / cpu.dims.Tq, i = int(r) % cpu.dims.Tq;
    bool ok = g.fullyMasked == c.fullyMasked && std::fabs(g.sum - c.sum) <= 1e-5f &&
              std::fabs(g.max - c.max) <= 1e-5f && std::fabs(g.entropy - c.entropy) <= 1e-4f;
    // Argmax: equal, or a near-tie whose two weights agree within float noise.
    if (g.argmax != c.argmax) {
      ok = ok && g.argmax >= 0 && c.argmax >= 0 &&
           std::fabs(cpu.weights.at(h, i, g.argmax) - cpu.weights.at(h, i, c.argmax)) <= 1e-6f;
    }
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "row stats [" << h << ", " << i << "]: GPU {sum " << g.sum << ", max "
                    << g.max << ", argmax " << g.argmax << ", entropy " << g.entropy
                    << ", fullyMasked " << g.fullyMasked << "} CPU {sum " << c.sum << ", max "
                    << c.max << ", argmax " << c.argmax << ", entropy " << c.entropy
                    << ", fullyMasked " << c.fullyMasked << "}";
    }
  }
}

class GpuParity : public ::testing::TestWithParam<Case> {};

TEST_P(GpuParity, MatchesCpuEngine) {
  const Case& tc = GetParam();
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const std::uint32_t seed = 1000u + std::uint32_t(tc.H * 7 + tc.Tq * 13 + tc.Tk * 17 + tc.dk);
  const Tensor3 q = seeded(tc.H, tc.Tq, tc.dk, seed);
  const Tensor3 k = seeded(tc.H, tc.Tk, tc.dk, seed + 1);
  const Tensor3 v = seeded(tc.H, tc.Tk, tc.dv, seed + 2);

  auto cpu = makeCpuEngine();
  const AttentionParams params = tc.build(tc.Tq, tc.Tk);
  cpu->run(q, k, v, params);
  const AttentionResult& want = cpu->result();
  gpu->run(q, k, v, params);
  const AttentionResult& got = gpu->result();

  EXPECT_TRUE(withinParity("scaled", got.scaled, want.scaled));
  EXPECT_TRUE(withinParity("weights", got.weights, want.weights));
  EXPECT_TRUE(withinParity("output", got.output, want.output));
  EXPECT_TRUE(maskedCellsAreZero(got.weights, params, tc.expr));
  expectRowStatsMatch(got, want);
  EXPECT_EQ(got.fullyMaskedRows(), want.fullyMaskedRows());
}

INSTANTIATE_TEST_SUITE_P(Sweep, GpuParity, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// The GUI changes the expression and the documents between softmax calls on one engine: the
// uploaded grid must follow (a stale grid would keep the first mask).
TEST(GpuParityMasks, ExpressionAndDocumentsChangeBetweenSoftmaxCalls) {
  ATTNVIZ_GPU_ENGINE_OR_SKIP(gpu);
  const Tensor3 q = seeded(3, 40, 16, 71), k = seeded(3, 40, 16, 72), v = seeded(3, 40, 16, 73);
  auto cpu = makeCpuEngine();
  gpu->setInputs(q, k, v);
  cpu->setInputs(q, k, v);
  AttentionParams p;
  const std::vector<std::pair<std::string, std::vector<int>>> steps = {
      {"k <= q", {}},
      {"k >= q", {}},
      {"doc_q == doc_k", docRuns(40, 5)},
      {"doc_q == doc_k", docRuns(40, 6)},
      {"", docRuns(40, 7)},
      {"(q - k) % 3 == 0 && h != 1", {}},
  };
  for (const auto& [text, docs] : steps) {
    p.mask.expr = text;
    p.mask.docs = docs;
    gpu->softmax(p);
    cpu->softmax(p);
    EXPECT_TRUE(withinParity("weights", gpu->result(kStageWeights).weights,
                             cpu->result(kStageWeights).weights))
        << "expr '" << text << "'";
  }
}

}  // namespace
}  // namespace attnviz
