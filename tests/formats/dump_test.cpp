// Attention dumps: files written by numpy alone (dump_py.py) in every container (safetensors,
// np.savez, np.savez_compressed) load with numpy's values; every bad dump is refused naming the
// tensor and the problem; and re-normalising a dump under temperature, masks and bias equals the
// softmax recomputed from the logits (the engine and the double reference) to 1e-5.
#include "attnviz/formats/dump.h"
#include "attnviz/engine/engine.h"
#include "attnviz/formats/npy.h"
#include "reference.h"
#include "run_binary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include <stdlib.h>
#include <unistd.h>

namespace attnviz {
namespace {

namespace fs = std::filesystem;
using attnviz::testing::shellQuote;

// One folder of Python-written dumps for the whole suite (numpy takes a second to start).
class DumpFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "attnviz_dump_XXXXXX").string();
    ok = ::mkdtemp(tmpl.data()) != nullptr;
    dir = tmpl;
    if (!ok) return;
    const std::string cmd = ATTNVIZ_PYTHON " " +
                            shellQuote(std::string(ATTNVIZ_TEST_DATA_DIR) + "/formats/dump_py.py") +
                            " write " + shellQuote(dir.string());
    ok = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { fs::remove_all(dir); }
  void SetUp() override { ASSERT_TRUE(ok) << "dump_py.py failed"; }
  static std::string path(const std::string& name) { return (dir / name).string(); }
  static FloatBuffer npy(const std::string& name) { return readNpy(path(name)).data; }

  // Refused with exit-1 semantics (InputError), one line naming the file and containing every
  // one of `words` (the tensor and the problem).
  static void expectRefused(const std::string& name, std::initializer_list<const char*> words) {
    try {
      loadDump(path(name));
      ADD_FAILURE() << name << " was accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path(name) + ": ", 0), 0u) << msg;
      for (const char* w : words)
        EXPECT_NE(msg.find(w), std::string::npos) << "no '" << w << "' in: " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  static inline fs::path dir;
  static inline bool ok = false;
};

TEST_F(DumpFiles, SelfAttentionLoadsTheSameFromSafetensorsSavezAndSavezCompressed) {
  for (const char* file : {"self.safetensors", "self.npz", "self_c.npz"}) {
    SCOPED_TRACE(file);
    const Dump d = loadDump(path(file));
    EXPECT_EQ(d.formatVersion, 1);
    EXPECT_EQ(d.model, "numpy-test");
    EXPECT_EQ(d.tokens, (std::vector<std::string>{"The", "caf\u00e9", "is", "open", "."}));
    ASSERT_EQ(d.layers.size(), 2u);
    EXPECT_EQ(d.layers[0].name, "block.0");
    EXPECT_EQ(d.layers[1].name, "block.1");
    for (const DumpLayer& l : d.layers) {
      EXPECT_EQ(l.axes, DumpAxes::Self);
      EXPECT_TRUE(l.weights.sameShape(Tensor3(3, 5, 5)));
      EXPECT_EQ(l.queryTokens, d.tokens);
      EXPECT_EQ(l.keyTokens, d.tokens);
      EXPECT_FALSE(l.hasQkv());
    }
    EXPECT_EQ(d.layers[0].weights.data, npy("self.0.npy"));
    // The safetensors file stores layer 1 as F16; the .npz files as float32 and float64.
    EXPECT_EQ(d.layers[1].weights.data,
              npy(std::string(file) == "self.safetensors" ? "self.1.f16.npy" : "self.1.npy"));
  }
}

TEST_F(DumpFiles, EncoderDecoderHasKeySelfSelfAndCrossLayersWithTheirTokens) {
  for (const char* file : {"encdec.safetensors", "encdec.npz"}) {
    SCOPED_TRACE(file);
    const Dump d = loadDump(path(file));
    ASSERT_EQ(d.layers.size(), 3u);
    const std::vector<std::string> src = {"ein", "kleiner", "Test", "</s>"},
                                   tgt = {"a", "small", "test"};
    EXPECT_EQ(d.layers[0].axes, DumpAxes::KeySelf);
    EXPECT_EQ(d.layers[0].queryTokens, src);
    EXPECT_EQ(d.layers[0].keyTokens, src);
    EXPECT_EQ(d.layers[1].axes, DumpAxes::Self);
    EXPECT_EQ(d.layers[1].queryTokens, tgt);
    EXPECT_TRUE(d.layers[1].hasQkv());
    EXPECT_TRUE(d.layers[1].q.sameShape(Tensor3(2, 3, 8)));
    EXPECT_EQ(d.layers[2].axes, DumpAxes::Cross);
    EXPECT_TRUE(d.layers[2].isCross());
    EXPECT_EQ(d.layers[2].name, "decoder.0.cross");
    EXPECT_EQ(d.layers[2].queryTokens, tgt);
    EXPECT_EQ(d.layers[2].keyTokens, src);
    EXPECT_TRUE(d.layers[2].weights.sameShape(Tensor3(2, 3, 4)));
    for (int l = 0; l < 3; ++l) {
      EXPECT_EQ(d.layers[l].weights.data, npy("encdec." + std::to_string(l) + ".npy")) << l;
    }
  }
}

TEST_F(DumpFiles, SavedDumpLoadsBackIdentically) {
  const Dump d = loadDump(path("encdec.npz"));
  saveDump(path("resaved.safetensors"), d);
  const Dump e = loadDump(path("resaved.safetensors"));
  EXPECT_EQ(e.tokens, d.tokens);
  EXPECT_EQ(e.keyTokens, d.keyTokens);
  EXPECT_EQ(e.model, d.model);
  ASSERT_EQ(e.layers.size(), d.layers.size());
  for (std::size_t l = 0; l < d.layers.size(); ++l) {
    EXPECT_EQ(e.layers[l].name, d.layers[l].name);
    EXPECT_EQ(e.layers[l].axes, d.layers[l].axes);
    EXPECT_EQ(e.layers[l].weights.data, d.layers[l].weights.data);
    EXPECT_EQ(e.layers[l].q.data, d.layers[l].q.data);
  }
}

TEST_F(DumpFiles, BadDumpsAreRefusedNamingTheTensorAndTheProblem) {
  expectRefused("bad_shape.safetensors", {"attn.0", "[3, 4, 4]", "does not fit the tokens"});
  expectRefused("bad_negative.safetensors", {"attn.1", "negative", "[2, 3, 1]"});
  expectRefused("bad_nan.npz", {"attn.0", "NaN", "[0, 4, 2]"});
  expectRefused("bad_rowsum.safetensors", {"attn.0", "row [1, 3]", "sums to 0.99"});
  expectRefused("bad_nometa.npz", {"missing metadata"});
  expectRefused("bad_notokens.safetensors", {"missing metadata 'tokens'"});
  expectRefused("bad_gap.safetensors", {"attn.1 is missing"});
  expectRefused("bad_qshape.safetensors", {"q.0", "[3, 4, 8]"});
  expectRefused("bad_bomb.npz", {"attn.0", "zip bomb", "nothing was inflated"});
  expectRefused("bad_forged.npz", {"attn.0", "more data than it declares"});
  expectRefused("bad_truncated.npz", {"truncated"});
}

TEST(DumpRenormalize, NoChangeGivesTheWeightsBack) {
  Tensor3 w(1, 2, 3);
  w.data = {0.2f, 0.3f, 0.5f, 0.0f, 1.0f, 0.0f};
  const AttentionResult r = renormalizeWeights(w, AttentionParams{});
  for (std::size_t n = 0; n < w.data.size(); ++n) EXPECT_NEAR(r.weights.data[n], w.data[n], 1e-7);
  EXPECT_EQ(r.row(0, 1).argmax, 1);
}

TEST(DumpRenormalize, SoftcapIsRefusedBecauseTheWeightsDoNotFixTheScores) {
  Tensor3 w(1, 2, 3);
  w.data = {0.2f, 0.3f, 0.5f, 0.0f, 1.0f, 0.0f};
  AttentionParams p;
  p.mask.softcap = 5.0f;
  EXPECT_THROW(renormalizeWeights(w, p), UsageError);
}

TEST(DumpRenormalize, ZeroWeightsStayMaskedAndAFullyMaskedRowIsZerosAndFlagged) {
  Tensor3 w(1, 2, 3);
  w.data = {0.5f, 0.0f, 0.5f, 0.2f, 0.8f, 0.0f};
  AttentionParams p;
  p.temperature = 5.0f;
  p.mask.pad = 2;  // keys 1 and 2 are padding: row 1 keeps only key 0
  const AttentionResult r = renormalizeWeights(w, p);
  EXPECT_FLOAT_EQ(r.weights.at(0, 0, 0), 1.0f);
  EXPECT_EQ(r.weights.at(0, 0, 1), 0.0f);
  EXPECT_FLOAT_EQ(r.weights.at(0, 1, 0), 1.0f);
  Tensor3 z(1, 1, 3);
  z.data = {0.0f, 0.0f, 1.0f};
  const AttentionResult rz = renormalizeWeights(z, p);  // the only nonzero key is padding
  EXPECT_TRUE(rz.row(0, 0).fullyMasked);
  for (float a : rz.weights.data) EXPECT_EQ(a, 0.0f);
}

// The exact claim: with A = softmax(S) from Q and K, re-normalising A under tau, masks and bias
// equals softmax((S + b) / tau) with the mask, recomputed from the logits.
TEST(DumpRenormalize, EqualsSoftmaxRecomputedFromLogitsUnderTemperatureMasksAndBias) {
  struct Case {
    const char* what;
    int H, Tq, Tk;
    AttentionParams p;
  };
  std::vector<Case> cases;
  const auto add = [&](const char* what, int H, int Tq, int Tk, auto&& set) {
    Case c{what, H, Tq, Tk, {}};
    set(c.p);
    cases.push_back(c);
  };
  add("tau 0.5", 3, 9, 9, [](AttentionParams& p) { p.temperature = 0.5f; });
  add("tau 3", 3, 9, 9, [](AttentionParams& p) { p.temperature = 3.0f; });
  add("causal", 2, 7, 7, [](AttentionParams& p) { p.mask.causal = true; });
  add("window + sink, tau 2", 2, 11, 11, [](AttentionParams& p) {
    p.mask.causal = true, p.mask.window = 3, p.mask.sink = 1, p.temperature = 2.0f;
  });
  add("decode rows, causal", 4, 3, 10, [](AttentionParams& p) { p.mask.causal = true; });
  add("cross, pad 2, tau 0.7", 2, 5, 8,
      [](AttentionParams& p) { p.mask.pad = 2, p.temperature = 0.7f; });
  add("alibi + causal", 4, 8, 8,
      [](AttentionParams& p) { p.mask.alibi = true, p.mask.causal = true; });
  add("float bias, tau 1.5", 2, 6, 6, [](AttentionParams& p) {
    p.mask.customKind = MaskSpec::Custom::Bias;
    p.mask.custom = ref::randomTensor(1, 6, 6, 99, 1.0f);
    p.mask.custom.at(0, 2, 4) = -std::numeric_limits<float>::infinity();
    p.temperature = 1.5f;
  });
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Tensor3 q = ref::randomTensor(c.H, c.Tq, 16, 1, 0.6f),
                  k = ref::randomTensor(c.H, c.Tk, 16, 2, 0.6f),
                  v = ref::randomTensor(c.H, c.Tk, 4, 3);
    auto engine = makeCpuEngine();
    engine->run(q, k, v, AttentionParams{});
    const Tensor3 dumped = engine->result().weights;  // what a dump holds: plain softmax(S)
    const AttentionResult got = renormalizeWeights(dumped, c.p);
    const ref::Result want = ref::attention(q, k, v, c.p);
    engine->run(q, k, v, c.p);
    const Tensor3& engineWeights = engine->result().weights;
    int bad = 0;
    for (int h = 0; h < c.H; ++h) {
      for (int i = 0; i < c.Tq; ++i) {
        const ref::Row& wr = want.rows[std::size_t(h) * c.Tq + i];
        EXPECT_EQ(got.row(h, i).fullyMasked, wr.fullyMasked);
        EXPECT_EQ(got.row(h, i).argmax, wr.argmax);
        EXPECT_NEAR(got.row(h, i).entropy, wr.entropy, 1e-4);
        EXPECT_NEAR(got.row(h, i).sum, wr.sum, 1e-5);
        for (int j = 0; j < c.Tk && bad < 5; ++j) {
          const double g = got.weights.at(h, i, j);
          if (std::fabs(g - want.w(h, i, j)) > 1e-5 ||
              std::fabs(g - engineWeights.at(h, i, j)) > 1e-5) {
            ++bad;
            ADD_FAILURE() << "[" << h << "," << i << "," << j << "] renormalised " << g
                          << ", from logits " << want.w(h, i, j) << " (engine "
                          << engineWeights.at(h, i, j) << ")";
          }
          if (want.w(h, i, j) == 0.0) {
            EXPECT_EQ(g, 0.0) << "masked entry is not exactly 0";
          }
        }
      }
    }
  }
}

TEST(DumpRenormalize, OneHeadFromCachedLogWeightsEqualsTheWholeComputation) {
  auto engine = makeCpuEngine();
  const Tensor3 q = ref::randomTensor(4, 12, 8, 5), k = ref::randomTensor(4, 12, 8, 6),
                v = ref::randomTensor(4, 12, 8, 7);
  engine->run(q, k, v, AttentionParams{});
  const Tensor3 w = engine->result().weights;
  AttentionParams p;
  p.temperature = 0.8f;
  p.mask.alibi = true;  // per-head slopes: the head index must be the real one
  const AttentionResult all = renormalizeWeights(w, p);
  const Tensor3 logA = logWeights(w);
  AttentionResult one;
  renormalizeFromLog(w, logA, p, one, {2});
  ASSERT_TRUE(one.weights.sameShape(w));
  for (int i = 0; i < 12; ++i) {
    for (int j = 0; j < 12; ++j) {
      EXPECT_EQ(one.weights.at(2, i, j), all.weights.at(2, i, j));
      EXPECT_EQ(one.weights.at(1, i, j), 0.0f);  // not asked for
    }
  }
}

}  // namespace
}  // namespace attnviz
