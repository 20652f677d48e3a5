// The extended mask kinds: chunk:C, doc:<ids>, --mask-expr, --softcap, and the block-sparsity
// counts. Each is checked against tests/reference.h (plain loops in double, written from
// docs/design/conventions.md) or against a naive loop written here, never against the engine's
// own output.
#include "attnviz/engine/blocks.h"
#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "attnviz/engine/mask_expr.h"
#include "attnviz/formats/scene.h"
#include "check.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace attnviz {
namespace {

// Document ids in runs of random length 1..maxRun, seeded.
std::vector<int> docRuns(int Tk, std::uint32_t seed, int maxRun = 6) {
  std::vector<int> d;
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> len(1, maxRun);
  int doc = 0;
  while (int(d.size()) < Tk) {
    const int n = len(gen);
    for (int t = 0; t < n && int(d.size()) < Tk; ++t) d.push_back(doc);
    ++doc;
  }
  return d;
}

struct Shape {
  int H, Tq, Tk;
};
// Square, cross (T_q < T_k: bottom-right aligned), and more queries than keys (positions < 0).
const Shape kShapes[] = {{2, 13, 13}, {3, 5, 17}, {2, 17, 6}, {1, 1, 9}};

void expectEngineMatches(const AttentionParams& p, const Shape& s, const ref::ExprRef& expr = {},
                         std::uint32_t seed = 7) {
  const Tensor3 q = ref::randomTensor(s.H, s.Tq, 8, seed, 1.5f);
  const Tensor3 k = ref::randomTensor(s.H, s.Tk, 8, seed + 1, 1.5f);
  const Tensor3 v = ref::randomTensor(s.H, s.Tk, 5, seed + 2);
  auto engine = makeCpuEngine();
  engine->run(q, k, v, p);
  testing::expectMatchesReference(engine->result(), ref::attention(q, k, v, p, expr));
  // The logits (what --scores writes) too.
  const Tensor3 logits = computeLogits(engine->result().scaled, p);
  const ref::Result want = ref::attention(q, k, v, p, expr);
  for (std::size_t x = 0; x < logits.size(); ++x) {
    ASSERT_TRUE(ref::close(logits.data[x], want.logits[x]))
        << x << ": " << logits.data[x] << " vs " << want.logits[x];
  }
}

// --- each kind against the reference, alone and with the others ------------------------------

TEST(MaskKinds, ChunkAloneAndWithCausalWindowPrefixPad) {
  for (const Shape& s : kShapes) {
    for (int C : {1, 3, 4, 50}) {
      AttentionParams p;
      p.mask.chunk = C;
      expectEngineMatches(p, s);
      p.mask.causal = true;
      expectEngineMatches(p, s);
      p.mask.window = 2;
      p.mask.prefix = 2;
      expectEngineMatches(p, s);
      p.mask.pad = 3;
      p.mask.sink = 1;
      expectEngineMatches(p, s);
    }
  }
}

TEST(MaskKinds, ChunkIsFloorDivisionOfPositions) {
  // A naive loop written here: Llama 4's chunked causal mask at T = 10, C = 4.
  MaskSpec m;
  m.chunk = 4;
  m.causal = true;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) {
      const bool want = j <= i && (i / 4) == (j / 4);
      EXPECT_EQ(maskAllowed(m, 0, i, j, 10, 10), want) << i << "," << j;
    }
}

TEST(MaskKinds, DocumentsAloneAndWithCausalWindowPrefixPad) {
  for (const Shape& s : kShapes) {
    AttentionParams p;
    p.mask.docs = docRuns(s.Tk, 11u + std::uint32_t(s.Tk));
    expectEngineMatches(p, s);
    p.mask.causal = true;
    expectEngineMatches(p, s);
    p.mask.window = 3;
    p.mask.prefix = 2;
    expectEngineMatches(p, s);
    p.mask.pad = 2;
    p.mask.chunk = 5;
    expectEngineMatches(p, s);
  }
}

TEST(MaskKinds, DocumentCausalIsBlockDiagonal) {
  // Packed sequence "a a a | b b | c c c c": each token sees its own document's earlier tokens.
  MaskSpec m;
  m.docs = {0, 0, 0, 1, 1, 2, 2, 2, 2};
  m.causal = true;
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 9; ++j)
      EXPECT_EQ(maskAllowed(m, 0, i, j, 9, 9), j <= i && m.docs[i] == m.docs[j]) << i << "," << j;
}

TEST(MaskKinds, SoftcapMatchesReferenceWithBiasMaskAndTemperature) {
  for (const Shape& s : kShapes) {
    for (float c : {0.5f, 2.0f, 30.0f}) {
      AttentionParams p;
      p.mask.softcap = c;
      expectEngineMatches(p, s);
      p.mask.causal = true;
      p.mask.alibi = true;
      p.mask.pad = 1;
      p.temperature = 0.4f;
      expectEngineMatches(p, s);
    }
  }
}

TEST(MaskKinds, SoftcapBoundsEveryLogitByCOverTau) {
  // Huge scores saturate: |L| <= c / tau, and the largest scores tie near c.
  const Tensor3 q = ref::randomTensor(1, 9, 8, 3, 40.0f);
  const Tensor3 k = ref::randomTensor(1, 9, 8, 4, 40.0f);
  const Tensor3 v = ref::randomTensor(1, 9, 4, 5);
  auto engine = makeCpuEngine();
  AttentionParams p;
  p.mask.softcap = 5.0f;
  p.temperature = 0.5f;
  engine->run(q, k, v, p);
  const Tensor3 L = computeLogits(engine->result().scaled, p);
  float maxScaled = 0.0f;
  for (float x : engine->result().scaled.data) maxScaled = std::max(maxScaled, std::fabs(x));
  EXPECT_GT(maxScaled, 50.0f);  // the test means something: scores far past the cap
  for (float l : L.data) EXPECT_LE(std::fabs(l), 5.0f / 0.5f + 1e-4f);
}

// --- expressions ------------------------------------------------------------------------------

// Expression text and the built-in mask it mimics.
struct Mimic {
  const char* text;
  MaskSpec builtin;
};

std::vector<Mimic> mimics(int Tk, const std::vector<int>& docs) {
  std::vector<Mimic> out;
  auto spec = [](auto fill) {
    MaskSpec m;
    fill(m);
    return m;
  };
  out.push_back({"k <= q", spec([](MaskSpec& m) { m.causal = true; })});
  out.push_back({"!(k > q)", spec([](MaskSpec& m) { m.causal = true; })});
  out.push_back({"k <= q && q - k < 3", spec([](MaskSpec& m) { m.window = 3; })});
  out.push_back({"k <= q || k < 4", spec([](MaskSpec& m) {
                   m.causal = true;
                   m.prefix = 4;
                 })});
  out.push_back({"k < 2 || (k <= q && q - k < 3)", spec([](MaskSpec& m) {
                   m.window = 3;
                   m.sink = 2;
                 })});
  out.push_back({"k < Tk - 3", spec([](MaskSpec& m) { m.pad = 3; })});
  out.push_back({"k // 4 == q // 4", spec([](MaskSpec& m) { m.chunk = 4; })});
  out.push_back({"floor(k / 4) == floor(q / 4) && k <= q", spec([](MaskSpec& m) {
                   m.chunk = 4;
                   m.causal = true;
                 })});
  out.push_back({"doc_q == doc_k", spec([&](MaskSpec& m) { m.docs = docs; })});
  out.push_back({"doc_q == doc_k && k <= q", spec([&](MaskSpec& m) {
                   m.docs = docs;
                   m.causal = true;
                 })});
  (void)Tk;
  return out;
}

TEST(MaskExpr, EqualsTheBuiltInKindsItMimicsCellForCell) {
  for (const Shape& s : kShapes) {
    const std::vector<int> docs = docRuns(s.Tk, 99);
    for (const Mimic& mm : mimics(s.Tk, docs)) {
      // The expression's own cells (docs feed doc_q/doc_k) against the reference rule.
      const MaskExpr e(mm.text);
      std::vector<std::uint8_t> cells(std::size_t(s.Tq) * s.Tk);
      e.evaluate(0, s.Tq, s.Tk, docs, cells.data());
      for (int i = 0; i < s.Tq; ++i)
        for (int j = 0; j < s.Tk; ++j)
          ASSERT_EQ(cells[std::size_t(i) * s.Tk + j] != 0,
                    ref::allowed(mm.builtin, 0, i, j, s.Tq, s.Tk))
              << mm.text << " at (" << i << ", " << j << "), T_q " << s.Tq << ", T_k " << s.Tk;
      // And through the engine: identical weights, bit for bit (the same -inf cells).
      MaskSpec exprSpec;
      exprSpec.expr = mm.text;
      if (!mm.builtin.docs.empty()) exprSpec.docs = docs;
      AttentionParams a, b;
      a.mask = exprSpec;
      b.mask = mm.builtin;
      const Tensor3 q = ref::randomTensor(s.H, s.Tq, 8, 1), k = ref::randomTensor(s.H, s.Tk, 8, 2),
                    v = ref::randomTensor(s.H, s.Tk, 4, 3);
      auto ea = makeCpuEngine(), eb = makeCpuEngine();
      ea->run(q, k, v, a);
      eb->run(q, k, v, b);
      EXPECT_EQ(ea->result().weights.data, eb->result().weights.data) << mm.text;
    }
  }
}

TEST(MaskExpr, RemainderHeadAndConditionalAgainstNaiveLoops) {
  struct Case {
    const char* text;
    ref::ExprRef want;
  };
  const Case cases[] = {
      {"(q - k) % 2 == 0",
       [](int, int i, int j, int Tq, int Tk) {
         const int d = (i + Tk - Tq) - j;
         return ((d % 2) + 2) % 2 == 0;
       }},
      {"(k - q) % 3 == 1",
       [](int, int i, int j, int Tq, int Tk) {  // Python's sign rule
         const int d = j - (i + Tk - Tq);
         return ((d % 3) + 3) % 3 == 1;
       }},
      {"h % 2 == 0 ? k <= q : k >= q",
       [](int h, int i, int j, int Tq, int Tk) {
         const int p = i + Tk - Tq;
         return h % 2 == 0 ? j <= p : j >= p;
       }},
      {"i == 0 || k < 2 || abs(q - k) <= 1",
       [](int, int i, int j, int Tq, int Tk) {
         return i == 0 || j < 2 || std::abs((i + Tk - Tq) - j) <= 1;
       }},
      {"k / 0", [](int, int, int j, int, int) { return j != 0; }},  // inf: nonzero; 0/0 NaN: no
  };
  for (const Shape& s : kShapes) {
    for (const Case& c : cases) {
      AttentionParams p;
      p.mask.expr = c.text;
      expectEngineMatches(p, s, c.want);
      // Combined with causal, window, prefix and pad.
      p.mask.causal = true;
      p.mask.window = 4;
      p.mask.prefix = 1;
      p.mask.pad = 1;
      expectEngineMatches(p, s, c.want);
    }
  }
}

TEST(MaskExpr, EveryKindTogetherMatchesTheReference) {
  for (const Shape& s : kShapes) {
    AttentionParams p;
    p.mask.causal = true;
    p.mask.window = 6;
    p.mask.prefix = 2;
    p.mask.sink = 1;
    p.mask.pad = 1;
    p.mask.alibi = true;
    p.mask.chunk = 8;
    p.mask.docs = docRuns(s.Tk, 5, 9);
    p.mask.expr = "k % 4 != 3";
    p.mask.softcap = 1.5f;
    p.temperature = 0.8f;
    expectEngineMatches(p, s, [](int, int, int j, int, int) { return j % 4 != 3; });
  }
}

TEST(MaskExpr, RejectsUnknownVariablesAndSyntaxErrors) {
  try {
    MaskExpr e("q >= kk");
    FAIL() << "accepted an unknown variable";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown variable 'kk'"), std::string::npos) << e.what();
  }
  for (const char* bad : {"q >=", "(q - k", "q k", "", "   ", "q >= k)"}) {
    EXPECT_THROW(MaskExpr e(bad), UsageError) << "'" << bad << "'";
  }
  EXPECT_NO_THROW(MaskExpr e("q>=k && doc_q==doc_k && i>=0 && h>=0 && Tq>0 && Tk>0"));
}

TEST(MaskExpr, GridIsReevaluatedWhenTextOrDocumentsChange) {
  MaskSpec m;
  m.expr = "k <= q";
  EXPECT_TRUE(maskAllowed(m, 0, 3, 2, 5, 5));
  m.expr = "k > q";  // a copy keeps the old cache pointer: it must not be trusted
  EXPECT_FALSE(maskAllowed(m, 0, 3, 2, 5, 5));
  m.expr = "doc_q == doc_k";
  m.docs = {0, 0, 1, 1, 1};
  EXPECT_FALSE(maskAllowed(m, 0, 1, 2, 5, 5));
  m.docs = {0, 0, 0, 1, 1};
  EXPECT_TRUE(maskAllowed(m, 0, 1, 2, 5, 5));
}

// --- block sparsity ---------------------------------------------------------------------------

TEST(BlockSparsity, CountsMatchBruteForce) {
  struct Case {
    const char* name;
    MaskSpec m;
    int Tq, Tk;
    ref::ExprRef expr;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, int Tq, int Tk, auto fill, ref::ExprRef expr = {}) {
    MaskSpec m;
    fill(m, Tk);
    cases.push_back({name, m, Tq, Tk, expr});
  };
  add("none", 37, 37, [](MaskSpec&, int) {});
  add("causal", 37, 37, [](MaskSpec& m, int) { m.causal = true; });
  add("causal cross", 20, 53, [](MaskSpec& m, int) { m.causal = true; });
  add("window", 64, 64, [](MaskSpec& m, int) { m.window = 9; });
  add("chunk causal", 50, 50, [](MaskSpec& m, int) {
    m.chunk = 16;
    m.causal = true;
  });
  add("docs", 41, 41, [](MaskSpec& m, int Tk) {
    m.docs = docRuns(Tk, 3, 15);
    m.causal = true;
  });
  add("prefix pad", 33, 33, [](MaskSpec& m, int) {
    m.causal = true;
    m.prefix = 10;
    m.pad = 5;
  });
  add(
      "expr", 40, 40, [](MaskSpec& m, int) { m.expr = "(q - k) % 8 == 0 || k < 3"; },
      [](int, int i, int j, int, int) { return ((i - j) % 8 + 8) % 8 == 0 || j < 3; });
  for (const Case& c : cases) {
    for (const BlockSize bs : {BlockSize{4, 4}, BlockSize{8, 8}, BlockSize{5, 7}, BlockSize{16, 3},
                               BlockSize{128, 128}, BlockSize{1, 1}}) {
      const BlockSparsity b = classifyBlocks(c.m, 1, 0, c.Tq, c.Tk, bs);
      // Brute force: every cell of every tile, by the reference rule.
      long long empty = 0, full = 0, partial = 0;
      const int tr = (c.Tq + bs.rows - 1) / bs.rows, tc = (c.Tk + bs.cols - 1) / bs.cols;
      ASSERT_EQ(b.tileRows, tr);
      ASSERT_EQ(b.tileCols, tc);
      for (int r = 0; r < tr; ++r)
        for (int col = 0; col < tc; ++col) {
          int yes = 0, all = 0;
          for (int i = r * bs.rows; i < std::min(c.Tq, (r + 1) * bs.rows); ++i)
            for (int j = col * bs.cols; j < std::min(c.Tk, (col + 1) * bs.cols); ++j) {
              ++all;
              yes += ref::allowed(c.m, 0, i, j, c.Tq, c.Tk, c.expr);
            }
          const BlockKind want = yes == 0     ? BlockKind::Empty
                                 : yes == all ? BlockKind::Full
                                              : BlockKind::Partial;
          empty += want == BlockKind::Empty;
          full += want == BlockKind::Full;
          partial += want == BlockKind::Partial;
          EXPECT_EQ(int(b.at(r, col)), int(want)) << c.name << " tile (" << r << ", " << col << ")";
        }
      EXPECT_EQ(b.empty, empty) << c.name << " " << bs.rows << "x" << bs.cols;
      EXPECT_EQ(b.full, full) << c.name;
      EXPECT_EQ(b.partial, partial) << c.name;
      EXPECT_DOUBLE_EQ(b.workFraction(), double(full + partial) / double(tr * tc)) << c.name;
    }
  }
}

TEST(BlockSparsity, CausalAt1024In128TilesDoesJustOverHalfTheWork) {
  // 8 x 8 tiles: 28 above the diagonal are empty, 8 on it partial, 28 below full.
  MaskSpec m;
  m.causal = true;
  const BlockSparsity b = classifyBlocks(m, 1, 0, 1024, 1024, BlockSize{});
  EXPECT_EQ(b.empty, 28);
  EXPECT_EQ(b.partial, 8);
  EXPECT_EQ(b.full, 28);
  EXPECT_DOUBLE_EQ(b.workFraction(), 36.0 / 64.0);
  EXPECT_NE(describeBlocks(b).find("28 empty, 8 partial, 28 full"), std::string::npos)
      << describeBlocks(b);
}

TEST(BlockSparsity, ParsesSquareAndRectangularSizes) {
  EXPECT_EQ(parseBlockSize("128").rows, 128);
  EXPECT_EQ(parseBlockSize("128").cols, 128);
  EXPECT_EQ(parseBlockSize("64x32").rows, 64);
  EXPECT_EQ(parseBlockSize("64x32").cols, 32);
  for (const char* bad : {"", "0", "x", "64x", "x64", "-4", "4.5", "8x0", "abc", "8x8x8"})
    EXPECT_THROW(parseBlockSize(bad), UsageError) << "'" << bad << "'";
}

// --- option parsing ---------------------------------------------------------------------------

TEST(MaskKinds, ParsesChunkAndDocumentOptions) {
  MaskSpec m;
  parseMaskOption("chunk:8", m);
  parseMaskOption("doc:0,0, 1,1,2", m);
  EXPECT_EQ(m.chunk, 8);
  EXPECT_EQ(m.docs, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(formatDocIds(m.docs), "0,0,1,1,2");
  for (const char* bad :
       {"chunk:0", "chunk:", "chunk:-2", "doc:", "doc:0,,1", "doc:a", "doc:0,-1", "doc:1.5"}) {
    MaskSpec s;
    EXPECT_THROW(parseMaskOption(bad, s), UsageError) << bad;
  }
}

TEST(MaskKinds, DocumentListOfTheWrongLengthAndBadSoftcapAreUsageErrors) {
  AttentionParams p;
  p.mask.docs = {0, 0, 1};
  EXPECT_THROW(validateParams(p, 1, 4, 4), UsageError);
  EXPECT_NO_THROW(validateParams(p, 1, 2, 3));
  AttentionParams c;
  c.mask.softcap = -1.0f;
  EXPECT_THROW(validateParams(c, 1, 4, 4), UsageError);
  c.mask.softcap = std::nanf("");
  EXPECT_THROW(validateParams(c, 1, 4, 4), UsageError);
}

// --- scenes ------------------------------------------------------------------------------------

TEST(MaskKinds, SceneFilesCarryChunkDocumentsExpressionAndSoftcap) {
  const Scene s = sceneFromJson(
      R"({"query_text": "a b c d", "mask": {"causal": true, "chunk": 2, "docs": [0, 0, 1, 1],
          "expr": "k != 1", "softcap": 7.5}})",
      "s.json");
  const MaskSpec& m = s.params.mask;
  EXPECT_EQ(m.chunk, 2);
  EXPECT_EQ(m.docs, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(m.expr, "k != 1");
  EXPECT_EQ(m.softcap, 7.5f);
  const Scene t = sceneFromJson(sceneToJson(s), "t.json");
  EXPECT_EQ(t.params.mask.chunk, 2);
  EXPECT_EQ(t.params.mask.docs, m.docs);
  EXPECT_EQ(t.params.mask.expr, m.expr);
  EXPECT_EQ(t.params.mask.softcap, 7.5f);
}

TEST(MaskKinds, SceneWithABadExpressionOrSoftcapIsBadInputNamingTheFile) {
  for (const char* text : {R"({"mask": {"expr": "q >= key"}})", R"({"mask": {"expr": "q >="}})",
                           R"({"mask": {"softcap": -1}})", R"({"mask": {"docs": [0, -1]}})",
                           R"({"mask": {"chunk": -3}})"}) {
    try {
      sceneFromJson(text, "bad.json");
      ADD_FAILURE() << text << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    }
  }
}

TEST(MaskExpr, EveryPresetCompilesAndAllowsSomeButNotAllCells) {
  ASSERT_EQ(maskExprPresets().size(), 7u);
  const std::vector<int> docs = docRuns(32, 4);
  for (const MaskExprPreset& p : maskExprPresets()) {
    const MaskExpr e(p.text);
    std::vector<std::uint8_t> cells(32 * 32);
    e.evaluate(0, 32, 32, docs, cells.data());
    int n = 0;
    for (std::uint8_t c : cells) n += c;
    EXPECT_GT(n, 0) << p.label;
    EXPECT_LT(n, 32 * 32) << p.label;
  }
}

TEST(MaskKinds, DocumentBoundariesToggleAndResize) {
  // Naive expectations written out by hand.
  EXPECT_EQ(toggleDocBoundary({}, 5, 2), (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(toggleDocBoundary({0, 0, 1, 1, 1}, 5, 4), (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(toggleDocBoundary({0, 0, 1, 1, 2}, 5, 2), (std::vector<int>{0, 0, 0, 0, 1}));
  EXPECT_EQ(toggleDocBoundary({7, 7, 3, 3}, 4, 0), (std::vector<int>{0, 0, 1, 1}));  // no-op
  EXPECT_EQ(resizeDocIds({0, 1}, 4), (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(resizeDocIds({0, 1, 2}, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(resizeDocIds({}, 3), (std::vector<int>{0, 0, 0}));
}

}  // namespace
}  // namespace attnviz
