// The session model without a display: which stage re-runs what (counted at the engine), and
// each stage's matrix against the naive reference in tests/reference.h.
#include "reference.h"

#include "attnviz/session/session.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

// Every thread this process creates goes through here (the executable's definition interposes
// on the C library's), so a test can count them. Not under AddressSanitizer, which intercepts
// pthread_create itself.
#if !defined(__SANITIZE_ADDRESS__)
#define ATTNVIZ_COUNT_THREADS 1
std::atomic<int> gThreadsCreated{0};
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Create real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  gThreadsCreated.fetch_add(1);
  return real(thread, attr, start, arg);
}
#endif

namespace attnviz {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Forwards to the CPU engine and counts the calls: setInputs is the only GEMM of S.
struct CountingEngine : AttentionEngine {
  std::unique_ptr<AttentionEngine> inner = makeCpuEngine();
  int setInputsCalls = 0, softmaxCalls = 0, outputCalls = 0;
  std::string name() const override { return "counting " + inner->name(); }
  void setInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v) override {
    ++setInputsCalls;
    inner->setInputs(q, k, v);
  }
  void softmax(const AttentionParams& p, const std::vector<int>& heads) override {
    ++softmaxCalls;
    inner->softmax(p, heads);
  }
  void output(const std::vector<int>& heads) override {
    ++outputCalls;
    inner->output(heads);
  }
  const AttentionResult& result(unsigned stages) override { return inner->result(stages); }
  Dims dims() const override { return inner->dims(); }
};

struct Fixture {
  CountingEngine* engine;
  std::unique_ptr<Session> session;
  Fixture() {
    auto e = std::make_unique<CountingEngine>();
    engine = e.get();
    session = std::make_unique<Session>(std::move(e));
  }
};

Scene smallScene() {
  Scene s = defaultScene();
  s.queryText = "the cat sat on the mat and the dog sat too";
  s.heads = 3;
  s.mode = Mode::Causal;
  return s;
}

// The reference on the session's own inputs (Q, K, V as the scene built them).
ref::Result reference(const Session& s, const AttentionParams& p) {
  return ref::attention(s.inputs().q, s.inputs().k, s.inputs().v, p);
}

TEST(Session, TemperatureAndMaskChangesRunNoGemm) {
  Fixture f;
  Session& s = *f.session;
  s.setScene(smallScene());
  s.update();
  ASSERT_EQ(f.engine->setInputsCalls, 1);
  const int softmaxBefore = f.engine->softmaxCalls;
  const auto gen = s.requested();

  s.setTemperature(0.3f);
  s.update();
  EXPECT_EQ(f.engine->setInputsCalls, 1) << "a temperature step must not recompute S";
  EXPECT_GT(f.engine->softmaxCalls, softmaxBefore);
  EXPECT_EQ(s.requested().inputs, gen.inputs);
  EXPECT_GT(s.requested().params, gen.params);
  EXPECT_FLOAT_EQ(s.params().temperature, 0.3f);

  s.editScene().params.mask.window = 3;
  s.touchMask();
  s.update();
  s.editScene().params.mask.alibi = true;
  s.touchMask();
  s.update();
  s.paintCell(5, 2, false);
  s.update();
  EXPECT_EQ(f.engine->setInputsCalls, 1) << "a mask change must not recompute S";
  EXPECT_EQ(s.params().mask.window, 3);
  EXPECT_TRUE(s.params().mask.alibi);

  // A view change runs no softmax either.
  const int softmaxNow = f.engine->softmaxCalls;
  View v = s.view();
  v.stage = ViewStage::Logits;
  s.setView(v);
  s.update();
  EXPECT_EQ(f.engine->softmaxCalls, softmaxNow);
  EXPECT_EQ(f.engine->setInputsCalls, 1);

  // Text does.
  s.editScene().queryText += " again";
  s.touchInputs();
  s.update();
  EXPECT_EQ(f.engine->setInputsCalls, 2);
}

TEST(Session, GenerationsFollowTheStages) {
  Fixture f;
  Session& s = *f.session;
  s.setScene(smallScene());
  s.update();
  auto g0 = s.requested();
  EXPECT_EQ(s.computed().inputs, g0.inputs);
  EXPECT_EQ(s.computed().params, g0.params);
  EXPECT_EQ(s.computed().view, g0.view);

  View v = s.view();
  s.setView(v);  // unchanged: nothing to do
  EXPECT_EQ(s.requested().view, g0.view);
  v.head = 2;
  s.setView(v);
  auto g1 = s.requested();
  EXPECT_EQ(g1.inputs, g0.inputs);
  EXPECT_EQ(g1.params, g0.params);
  EXPECT_GT(g1.view, g0.view);

  s.touchTemperature();
  auto g2 = s.requested();
  EXPECT_EQ(g2.inputs, g1.inputs);
  EXPECT_GT(g2.params, g1.params);
  EXPECT_GT(g2.view, g1.view);

  s.touchInputs();
  auto g3 = s.requested();
  EXPECT_GT(g3.inputs, g2.inputs);
  EXPECT_GT(g3.params, g2.params);
  s.update();
  EXPECT_EQ(s.computed().inputs, s.requested().inputs);
  EXPECT_EQ(s.computed().view, s.requested().view);
}

// Extended kinds: softcap 2 (the Capped stage and every later one start from c tanh(s / c)),
// chunk, documents and an expression (its meaning written here for the reference).
class SessionStages : public ::testing::TestWithParam<bool> {};

TEST_P(SessionStages, EveryStageMatchesTheReference) {
  const bool extendedKinds = GetParam();
  Fixture f;
  Session& s = *f.session;
  Scene sc = smallScene();
  sc.params.temperature = 0.7f;
  sc.params.mask.alibi = true;
  sc.params.mask.window = 4;
  sc.params.mask.sink = 1;
  ref::ExprRef expr;
  if (extendedKinds) {
    sc.params.mask.window = 0;
    sc.params.mask.softcap = 2.0f;
    sc.params.mask.chunk = 6;
    sc.params.mask.docs = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
    sc.params.mask.expr = "(q - k) % 3 != 1";
    expr = [](int, int i, int j, int Tq, int Tk) { return (((i + Tk - Tq) - j) % 3 + 3) % 3 != 1; };
  }
  s.setScene(sc);
  s.update();
  const AttentionParams p = effectiveParams(sc);
  ASSERT_TRUE(p.mask.causal);
  const ref::Result r = ref::attention(s.inputs().q, s.inputs().k, s.inputs().v, p, expr);
  const int dk = s.inputs().q.cols;
  const int Tq = s.tq(), Tk = s.tk();
  for (int h = 0; h < s.heads(); ++h) {
    for (int st = 0; st < kStageCount; ++st) {
      View v;
      v.head = h;
      v.stage = ViewStage(st);
      s.setView(v);
      s.update();
      const DisplayMatrix& d = s.display();
      ASSERT_EQ(d.rows, Tq);
      ASSERT_EQ(d.cols, v.stage == ViewStage::Output ? r.dv : Tk);
      for (int i = 0; i < d.rows; ++i) {
        for (int j = 0; j < d.cols; ++j) {
          const double got = d.values[std::size_t(i) * d.cols + j];
          const bool keys = v.stage != ViewStage::Output;  // columns are keys, not value dims
          const std::size_t k = (std::size_t(h) * Tq + i) * Tk + j;
          const bool masked = keys && r.l(h, i, j) == -ref::kInf;
          double want = 0;
          switch (v.stage) {
            case ViewStage::RawScores:
              want = r.scaled[k] * std::sqrt(double(dk));
              break;
            case ViewStage::Scaled:
              want = r.scaled[k];
              break;
            case ViewStage::Capped:  // c tanh(s / c); the scene has no cap, so s itself
              want = p.mask.softcap > 0 ? p.mask.softcap * std::tanh(r.scaled[k] / p.mask.softcap)
                                        : r.scaled[k];
              break;
            case ViewStage::Biased:
              want = masked ? -ref::kInf : r.logits[k] * p.temperature;
              break;
            case ViewStage::Logits:
              want = r.logits[k];
              break;
            case ViewStage::Weights:
            // A model's own stages: a synthetic scene has no source for them, so the weights.
            case ViewStage::ValueWeighted:
            case ViewStage::Rollout:
              want = masked ? -ref::kInf : r.w(h, i, j);
              break;
            case ViewStage::Output:
              want = r.o(h, i, j);
              break;
          }
          ASSERT_TRUE(ref::close(got, want, 1e-4, 1e-4))
              << "stage " << stageKey(v.stage) << " head " << h << " cell (" << i << ", " << j
              << "): " << got << " vs " << want;
        }
      }
    }
  }
  // The tooltip agrees with the same formula.
  View v;
  v.head = 1;
  s.setView(v);
  s.update();
  const CellInfo ci = s.cellInfo(Tq - 1, 0);
  EXPECT_TRUE(ref::close(ci.logit, r.l(1, Tq - 1, 0), 1e-4, 1e-4));
  EXPECT_TRUE(ref::close(ci.weight, r.w(1, Tq - 1, 0), 1e-5, 1e-4));
  EXPECT_NEAR(ci.rowSum, 1.0, 1e-5);
  // And the logits of every head (export, compute --scores).
  const Tensor3 L = s.logits();
  for (std::size_t k = 0; k < L.size(); ++k)
    ASSERT_TRUE(ref::close(L.data[k], r.logits[k], 1e-4, 1e-4)) << k;
}

INSTANTIATE_TEST_SUITE_P(Session, SessionStages, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("SoftcapChunkDocsExpr")
                                             : std::string("WindowSinkAlibi");
                         });

TEST(Session, WrongAxisGivesColumnsThatSumToOne) {
  Fixture f;
  Session& s = *f.session;
  Scene sc = smallScene();
  sc.params.temperature = 1.5f;
  s.setScene(sc);
  View v;
  v.head = 1;
  v.wrongAxis = true;
  s.setView(v);
  s.update();
  const AttentionParams p = effectiveParams(sc);
  const ref::Result r = reference(s, p);
  const int Tq = s.tq(), Tk = s.tk();
  const DisplayMatrix& d = s.display();
  for (int j = 0; j < Tk; ++j) {
    // softmax over i of L_ij, in double, from the reference logits.
    double mx = -ref::kInf;
    for (int i = 0; i < Tq; ++i) mx = std::max(mx, r.l(1, i, j));
    double z = 0, colSum = 0;
    for (int i = 0; i < Tq; ++i)
      if (r.l(1, i, j) != -ref::kInf) z += std::exp(r.l(1, i, j) - mx);
    for (int i = 0; i < Tq; ++i) {
      const float got = d.values[std::size_t(i) * Tk + j];
      if (r.l(1, i, j) == -ref::kInf) {
        EXPECT_EQ(got, kNegInf) << i << "," << j;
        continue;
      }
      const double want = std::exp(r.l(1, i, j) - mx) / z;
      EXPECT_TRUE(ref::close(got, want, 1e-5, 1e-4))
          << i << "," << j << ": " << got << " vs " << want;
      colSum += got;
    }
    EXPECT_NEAR(colSum, 1.0, 1e-5) << "column " << j;
  }
  // Causal: column 0 sees every query, so its rows do not sum to 1 (the point of the lesson).
  EXPECT_GT(std::fabs(d.rowSums[0] - 1.0f), 0.1f);
}

TEST(Session, PaintedCellsAreMaskData) {
  Fixture f;
  Session& s = *f.session;
  Scene sc = smallScene();
  sc.mode = Mode::Self;
  s.setScene(sc);
  s.update();
  const int Tq = s.tq(), Tk = s.tk();
  s.paintCell(3, 1, false);
  s.paintCell(3, 4, false);
  s.paintCell(3, 4, true);  // cleared again
  s.paintCell(0, 0, false);
  s.update();
  const MaskSpec& m = s.scene().params.mask;
  ASSERT_EQ(m.customKind, MaskSpec::Custom::Allow);
  ASSERT_EQ(m.custom.rows, Tq);
  ASSERT_EQ(m.custom.cols, Tk);
  EXPECT_EQ(m.custom.at(0, 3, 1), 0.0f);
  EXPECT_EQ(m.custom.at(0, 3, 4), 1.0f);
  EXPECT_EQ(m.custom.at(0, 0, 0), 0.0f);

  // The weights are those of a scene whose custom mask blocks exactly those cells.
  AttentionParams p;
  p.mask.customKind = MaskSpec::Custom::Allow;
  p.mask.custom = Tensor3(1, Tq, Tk, 1.0f);
  p.mask.custom.at(0, 3, 1) = 0;
  p.mask.custom.at(0, 0, 0) = 0;
  const ref::Result r = reference(s, p);
  const DisplayMatrix& d = s.display();
  for (int i = 0; i < Tq; ++i)
    for (int j = 0; j < Tk; ++j) {
      const double want = r.l(0, i, j) == -ref::kInf ? -ref::kInf : r.w(0, i, j);
      ASSERT_TRUE(ref::close(d.values[std::size_t(i) * Tk + j], want, 1e-5, 1e-4)) << i << j;
    }
  EXPECT_EQ(d.values[3 * Tk + 1], kNegInf);

  // Saved with the scene, as its custom mask; a session on the reloaded scene agrees.
  const Scene back = sceneFromJson(sceneToJson(s.scene()), "saved.json");
  ASSERT_EQ(back.params.mask.customKind, MaskSpec::Custom::Allow);
  EXPECT_EQ(back.params.mask.custom.data, m.custom.data);
  Fixture g;
  g.session->setScene(back);
  g.session->update();
  EXPECT_EQ(g.session->display().values, d.values);
  EXPECT_NE(g.session->describe().find("custom"), std::string::npos) << g.session->describe();
}

TEST(Session, OldScenesWithViewPaintedConvertToMaskData) {
  const std::string old = R"({"title": "old", "query_text": "a b c d", "mode": "self",
    "heads": 2, "view": {"head": 1, "painted": {"rows": 4, "cols": 4,
    "blocked": [[1, 2], [3, 0], [9, 9]]}}})";
  const Scene sc = sceneFromJson(old, "old.json");
  const MaskSpec& m = sc.params.mask;
  ASSERT_EQ(m.customKind, MaskSpec::Custom::Allow);
  ASSERT_EQ(m.custom.rows, 4);
  ASSERT_EQ(m.custom.cols, 4);
  int blocked = 0;
  for (float x : m.custom.data) blocked += x == 0.0f;
  EXPECT_EQ(blocked, 2);
  EXPECT_EQ(m.custom.at(0, 1, 2), 0.0f);
  EXPECT_EQ(m.custom.at(0, 3, 0), 0.0f);
  EXPECT_EQ(sc.extraJson.find("painted"), std::string::npos) << sc.extraJson;
  EXPECT_NE(sc.extraJson.find("\"head\""), std::string::npos) << sc.extraJson;
}

TEST(Session, DecodeStepChangesTheKeys) {
  Fixture f;
  Session& s = *f.session;
  Scene sc = smallScene();
  sc.mode = Mode::Decode;
  sc.decodeStep = 5;
  s.setScene(sc);
  s.update();
  EXPECT_EQ(s.tq(), 1);
  EXPECT_EQ(s.tk(), 5);
  EXPECT_EQ(s.display().cols, 5);
  s.editScene().decodeStep = 8;
  s.touchInputs();
  s.update();
  EXPECT_EQ(f.engine->setInputsCalls, 2);
  EXPECT_EQ(s.tk(), 8);
  ASSERT_EQ(s.display().cols, 8);
  // The single query sees the whole KV cache: its row sums to 1 over 8 keys.
  const ref::Result r = reference(s, effectiveParams(s.scene()));
  for (int j = 0; j < 8; ++j)
    EXPECT_TRUE(ref::close(s.display().values[j], r.w(0, 0, j), 1e-5, 1e-4)) << j;
  EXPECT_NEAR(s.display().rowSums[0], 1.0f, 1e-5f);
}

TEST(Session, TensorSourceAndExportDescription) {
  Fixture f;
  Session& s = *f.session;
  const Tensor3 q = ref::randomTensor(2, 5, 8, 1), k = ref::randomTensor(2, 7, 8, 2),
                v = ref::randomTensor(2, 7, 4, 3);
  s.setTensors(q, k, v);
  s.editScene().params.mask.causal = true;
  s.editScene().params.temperature = 2;
  s.touchMask();
  s.computeAllHeads();
  EXPECT_EQ(s.describe(), "mask: causal \xC2\xB7 \xCF\x84 = 2");
  // A model layer names itself before the mask; new tensors drop the old name.
  s.setSourceLabel("gpt2 \xC2\xB7 layer 3");
  EXPECT_EQ(s.describe(), "gpt2 \xC2\xB7 layer 3 \xC2\xB7 mask: causal \xC2\xB7 \xCF\x84 = 2");
  s.setTensors(q, k, v);
  EXPECT_EQ(s.describe(), "mask: causal \xC2\xB7 \xCF\x84 = 2");
  AttentionParams p;
  p.mask.causal = true;
  p.temperature = 2;
  const ref::Result r = ref::attention(q, k, v, p);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 7; ++j)
        ASSERT_TRUE(ref::close(s.result().weights.at(h, i, j), r.w(h, i, j), 1e-5, 1e-4));
  const Image img = s.exportImage(ExportRequest{});
  EXPECT_GT(img.width, 0);
}

TEST(Session, ASliderStepStartsNoThread) {
#if ATTNVIZ_COUNT_THREADS
  // The counter sees a thread being created (so the assertion below can fail).
  const int probe = gThreadsCreated.load();
  std::thread([] {}).join();
  ASSERT_EQ(gThreadsCreated.load(), probe + 1);

  Fixture f;
  Session& s = *f.session;
  Scene sc = smallScene();
  sc.queryText.clear();
  for (int t = 0; t < 300; ++t) sc.queryText += "tok" + std::to_string(t % 17) + " ";
  s.setScene(sc);
  s.update();
  s.computeAllHeads();  // the pool, if any, is started by now
  const int before = gThreadsCreated.load();
  for (int k = 0; k < 20; ++k) {
    s.setTemperature(0.1f + 0.1f * float(k));
    s.update();
    s.editScene().params.mask.window = 5 + k;
    s.touchMask();
    s.computeAllHeads();
  }
  EXPECT_EQ(gThreadsCreated.load(), before) << "slider steps created threads";
#else
  GTEST_SKIP() << "thread creation is not counted under AddressSanitizer";
#endif
}

TEST(Session, ABadMaskIsReportedOnceAndTheLastResultsStay) {
  Fixture f;
  Session& s = *f.session;
  s.setScene(smallScene());
  s.update();
  const std::vector<float> shown = s.display().values;
  s.editScene().params.mask.customKind = MaskSpec::Custom::Allow;
  s.editScene().params.mask.custom = Tensor3(1, 2, 2, 1.0f);  // wrong shape
  s.touchMask();
  EXPECT_THROW(s.update(), InputError);
  EXPECT_NO_THROW(s.update());  // not retried until changed again
  EXPECT_EQ(s.display().values, shown);
}


// ---- pooled mode (long contexts) ----------------------------------------------------------------

// A scene of n tokens, causal, 2 heads.
Scene longScene(int n) {
  Scene sc = smallScene();
  sc.heads = 2;
  sc.queryText.clear();
  for (int t = 0; t < n; ++t) sc.queryText += "tok" + std::to_string(t % 23) + " ";
  return sc;
}

// The reference weights of head h over the region of `t`, max-pooled (mean when `mean`) by a
// naive loop; -1 marks a pixel whose cells are all masked (max only).
std::vector<double> pooledReference(const ref::Result& r, int h, const PooledWeights& t,
                                    bool mean) {
  std::vector<double> out(std::size_t(t.width) * t.height, 0.0);
  for (int y = 0; y < t.height; ++y)
    for (int x = 0; x < t.width; ++x) {
      double best = -1, sum = 0;
      int cells = 0;
      for (int i = t.r0 + y * t.poolQ; i < std::min(t.r1, t.r0 + (y + 1) * t.poolQ); ++i)
        for (int j = t.c0 + x * t.poolK; j < std::min(t.c1, t.c0 + (x + 1) * t.poolK); ++j) {
          ++cells;
          sum += r.w(h, i, j);
          if (r.l(h, i, j) != -ref::kInf) best = std::max(best, r.w(h, i, j));
        }
      out[std::size_t(y) * t.width + x] = mean ? sum / cells : best;
    }
  return out;
}

void expectTileMatches(const PooledTile& tile, const ref::Result& r, int h, bool mean) {
  const std::vector<double> want = pooledReference(r, h, tile.w, mean);
  int bad = 0;
  for (std::size_t n = 0; n < want.size() && bad < 5; ++n) {
    const double got = mean ? tile.w.mean[n] : (tile.w.masked[n] ? -1.0 : tile.w.max[n]);
    if (!ref::close(got, want[n], 1e-6, 1e-4)) {
      ++bad;
      ADD_FAILURE() << "pixel " << n << " of the tile at pool " << tile.pool() << ": " << got
                    << ", reference " << want[n];
    }
  }
}

// ---- many heads over the memory budget: only the shown head is materialised -------------------

// Auto policy with a budget that 4 heads of T x T pass and one head does not: headsStreamed().
struct StreamedHeads {
  Fixture f;
  ref::ExprRef expr = [](int h, int i, int j, int Tq, int Tk) {
    return h != 2 || j != (i + Tk - Tq) - 1;  // head 2 never sees the previous token
  };
  StreamedHeads(int T, bool alibi) {
    PooledPolicy policy;
    policy.mode = PooledPolicy::Mode::Auto;
    policy.maxBytes = std::size_t(4) * T * T * 8 - 1;  // every head's S and A: one byte too many
    f.session->setPooledPolicy(policy);
    Scene sc = longScene(T);
    sc.heads = 4;
    sc.params.mask.alibi = alibi;
    sc.params.mask.expr = "h != 2 || k != q - 1";
    sc.params.temperature = 0.7f;
    f.session->setScene(sc);
  }
  ref::Result reference() const {
    return ref::attention(f.session->inputs().q, f.session->inputs().k, f.session->inputs().v,
                          f.session->params(), expr);
  }
};

void expectShownHeadIs(const Session& s, const ref::Result& r, int h) {
  const DisplayMatrix& d = s.display();
  ASSERT_EQ(d.rows, r.Tq);
  ASSERT_EQ(d.cols, r.Tk);
  int bad = 0;
  for (int i = 0; i < r.Tq && bad < 5; ++i)
    for (int j = 0; j < r.Tk && bad < 5; ++j) {
      const float got = d.values[std::size_t(i) * d.cols + j];
      const bool masked = r.l(h, i, j) == -ref::kInf;
      if (masked ? got != kNegInf : !ref::close(got, r.w(h, i, j), 1e-6, 1e-4)) {
        ++bad;
        ADD_FAILURE() << "head " << h << " cell " << i << "," << j << ": " << got
                      << ", reference " << (masked ? -ref::kInf : r.w(h, i, j));
      }
    }
}

TEST(SessionStreamedHeads, OnlyTheShownHeadIsMaterialisedAndSwitchingShowsTheRightHead) {
  for (bool alibi : {false, true}) {
    SCOPED_TRACE(alibi ? "ALiBi" : "no ALiBi");
    StreamedHeads t(300, alibi);
    Session& s = *t.f.session;
    s.update();
    ASSERT_TRUE(s.headsStreamed());
    EXPECT_EQ(s.heads(), 4);
    EXPECT_EQ(t.f.engine->dims().H, 1) << "the engine holds the shown head only";
    const ref::Result r = t.reference();
    // Every head in turn, and back: the heatmap shows that head (ALiBi's slope and the
    // expression's h are those of the head, not of a one-head engine).
    for (int h : {0, 2, 1, 3, 2, 0}) {
      s.setView({h, false, ViewStage::Weights, false, false});
      s.update();
      EXPECT_EQ(t.f.engine->dims().H, 1);
      expectShownHeadIs(s, r, h);
      // The row statistics and the tooltip read the shown head too.
      EXPECT_NEAR(s.result().row(h, 150).max, r.row(h, 150).max, 1e-5);
      const CellInfo ci = s.cellInfo(150, 149);
      EXPECT_EQ(ci.masked, r.l(h, 150, 149) == -ref::kInf) << "head " << h;
    }
    // A temperature step re-runs the shown head (no other), still right.
    s.setTemperature(1.3f);
    s.update();
    expectShownHeadIs(s, t.reference(), 0);
  }
}

TEST(SessionStreamedHeads, ThumbnailsAndOutputsOfEveryHeadEqualTheFullComputation) {
  StreamedHeads t(600, true);
  Session& s = *t.f.session;
  s.update();
  ASSERT_TRUE(s.headsStreamed());
  EXPECT_FALSE(s.allHeadsFresh());
  EXPECT_EQ(s.thumbnailPool(), 3);  // ceil(600 / 256)
  while (s.refreshStaleHeads(0.0)) {
  }
  ASSERT_TRUE(s.allHeadsFresh());
  EXPECT_EQ(t.f.engine->dims().H, 1) << "the other heads ran one at a time";
  const ref::Result r = t.reference();
  for (int h = 0; h < 4; ++h) {
    const auto th = s.headThumbnail(h);
    ASSERT_TRUE(th) << "head " << h;
    // The naive reference's weights, max-pooled over the same 3 x 3 blocks.
    PooledWeights grid = *th;
    const std::vector<double> want = pooledReference(r, h, grid, false);
    ASSERT_EQ(want.size(), th->max.size());
    int bad = 0;
    for (std::size_t n = 0; n < want.size() && bad < 5; ++n) {
      const double expect = std::max(0.0, want[n]);  // an all-masked block pools to 0
      if (!ref::close(th->max[n], expect, 1e-6, 1e-4)) {
        ++bad;
        ADD_FAILURE() << "head " << h << " pixel " << n << ": " << th->max[n] << ", reference "
                      << expect;
      }
    }
    for (int i = 0; i < r.Tq; i += 37)
      for (int c = 0; c < r.dv; ++c)
        ASSERT_TRUE(ref::close(s.result().output.at(h, i, c), r.o(h, i, c), 1e-5, 1e-4))
            << "output of head " << h << " row " << i;
  }
  // The head average, computed head by head.
  s.setView({0, true, ViewStage::Weights, false, false});
  s.update();
  const DisplayMatrix& d = s.display();
  for (int i = 0; i < r.Tq; i += 13)
    for (int j = 0; j < r.Tk; j += 7) {
      double mean = 0;
      bool anyAllowed = false;
      for (int h = 0; h < 4; ++h) {
        mean += r.w(h, i, j) / 4;
        anyAllowed |= r.l(h, i, j) != -ref::kInf;
      }
      const float got = d.values[std::size_t(i) * d.cols + j];
      if (got == kNegInf) {
        EXPECT_FALSE(r.l(0, i, j) != -ref::kInf) << i << "," << j;
      } else {
        EXPECT_TRUE(ref::close(got, mean, 1e-6, 1e-4)) << i << "," << j << ": " << got << " vs "
                                                       << mean << (anyAllowed ? "" : " (masked)");
      }
    }
}

TEST(SessionStreamedHeads, ExportsDrawWhatTheMaterialisedSessionDraws) {
  StreamedHeads t(300, true);
  Session& s = *t.f.session;
  s.update();
  ASSERT_TRUE(s.headsStreamed());
  Session full(makeCpuEngine());  // policy Off: every head materialised
  full.setScene(s.scene());
  full.update();
  ASSERT_FALSE(full.headsStreamed());
  for (ExportStage stage : {ExportStage::Weights, ExportStage::Scores})
    for (int head : {-1, 2})
      for (bool bare : {false, true}) {
        if (bare && head < 0) continue;
        ExportRequest rq;
        rq.stage = stage;
        rq.head = head;
        rq.bare = bare;
        if (bare) rq.cell = 2;
        const Image a = s.exportImage(rq), b = full.exportImage(rq);
        ASSERT_EQ(a.width, b.width);
        ASSERT_EQ(a.height, b.height);
        std::size_t differ = 0;
        for (std::size_t n = 0; n < a.rgba.size(); ++n) differ += a.rgba[n] != b.rgba[n];
        EXPECT_EQ(differ, 0u) << "stage " << int(stage) << " head " << head << " bare " << bare;
      }
}

TEST(SessionStreamedHeads, UnderTheBudgetEveryHeadIsMaterialisedAsBefore) {
  Fixture f;
  PooledPolicy policy;
  policy.mode = PooledPolicy::Mode::Auto;
  policy.maxBytes = std::size_t(4) * 300 * 300 * 8;  // exactly fits
  f.session->setPooledPolicy(policy);
  Scene sc = longScene(300);
  sc.heads = 4;
  f.session->setScene(sc);
  f.session->update();
  EXPECT_FALSE(f.session->headsStreamed());
  EXPECT_EQ(f.engine->dims().H, 4);
  // The GUI's default budget: 12 heads of 4096 x 4096 are over it, of 1024 x 1024 are not.
  const PooledPolicy gui{PooledPolicy::Mode::Auto};
  EXPECT_TRUE(gui.oneHead(12, 4096, 4096));
  EXPECT_FALSE(gui.oneHead(12, 1024, 1024));
  EXPECT_FALSE(gui.oneHead(1, 4096, 4096));
}

// Pooled mode forced on, on a scene of T tokens.
void pooledOn(Session& s, int T) {
  PooledPolicy policy;
  policy.mode = PooledPolicy::Mode::On;
  s.setPooledPolicy(policy);
  s.setScene(longScene(T));
}

TEST(SessionPooled, NeverGivesTheEngineTheInputsAndPoolsTheShownHead) {
  Fixture f;
  Session& s = *f.session;
  pooledOn(s, 700);
  s.setView({1, false, ViewStage::Weights, false, false});
  s.update();
  EXPECT_TRUE(s.pooledMode());
  EXPECT_EQ(f.engine->setInputsCalls, 0) << "pooled mode must not materialise S";
  EXPECT_FALSE(s.hasResult());
  EXPECT_EQ(s.tq(), 700);
  EXPECT_EQ(s.heads(), 2);
  s.pooled().wait();
  s.update();
  const auto coarse = s.pooled().coarse();
  ASSERT_TRUE(coarse);
  EXPECT_EQ(coarse->pool(), 1) << "700 tokens fit the coarse level's 1024 pixels";
  const ref::Result want = reference(s, s.params());
  expectTileMatches(*coarse, want, 1, false);
  EXPECT_TRUE(s.display().pooled);
  EXPECT_EQ(s.display().rows, 700);
  EXPECT_TRUE(s.display().values.empty());
  s.paintCell(3, 5, false);
  EXPECT_EQ(s.scene().params.mask.customKind, MaskSpec::Custom::None);
}

TEST(SessionPooled, ZoomedWindowsRefineOnTheWorkerAndComeBackFromTheCache) {
  Fixture f;
  Session& s = *f.session;
  PooledPolicy policy;
  policy.mode = PooledPolicy::Mode::Auto;
  policy.maxCells = 1000 * 1000;  // 2100 x 2100 pools
  s.setPooledPolicy(policy);
  s.setScene(longScene(2100));
  s.update();
  ASSERT_TRUE(s.pooledMode());
  PooledPyramid& py = s.pooled();
  py.wait();
  ASSERT_TRUE(py.coarse());
  EXPECT_EQ(py.coarse()->pool(), 4);  // ceil(2100 / 4) = 525 <= 1024 < ceil(2100 / 2)
  const ref::Result want = reference(s, s.params());
  expectTileMatches(*py.coarse(), want, 0, false);
  // A window at one cell a pixel: the coarse level stands in, a tile is queued.
  PooledPyramid::Pick p = py.pick(1000, 1300, 250, 777, 1);
  ASSERT_TRUE(p.tile);
  EXPECT_FALSE(p.exact);
  EXPECT_EQ(p.tile->pool(), 4);
  py.wait();
  p = py.pick(1000, 1300, 250, 777, 1);
  ASSERT_TRUE(p.exact);
  EXPECT_EQ(p.tile->pool(), 1);
  EXPECT_TRUE(p.tile->contains(1000, 1300, 250, 777));
  expectTileMatches(*p.tile, want, 0, false);
  const std::uint64_t fine = p.tile->id;
  // Elsewhere at pool 2, then back: the first tile is still there.
  p = py.pick(0, 900, 1200, 2100, 2);
  EXPECT_FALSE(p.exact);
  py.wait();
  p = py.pick(0, 900, 1200, 2100, 2);
  ASSERT_TRUE(p.exact);
  expectTileMatches(*p.tile, want, 0, false);
  p = py.pick(1010, 1290, 260, 700, 1);
  EXPECT_TRUE(p.exact);
  EXPECT_EQ(p.tile->id, fine) << "panning back recomputed the tile";
  EXPECT_FALSE(py.busy());
  // The mean, as a view change: a new source with the mean.
  s.setView({0, false, ViewStage::Weights, false, true});
  s.update();
  py.wait();
  s.update();
  ASSERT_TRUE(py.coarse());
  expectTileMatches(*py.coarse(), want, 0, true);
}

TEST(SessionPooled, ATemperatureStepKeepsTheOldLevelOnScreenUntilTheNewOneIsDone) {
  Fixture f;
  Session& s = *f.session;
  pooledOn(s, 1500);
  s.update();
  s.pooled().wait();
  const auto before = s.pooled().coarse();
  ASSERT_TRUE(before);
  s.setTemperature(0.25f);
  s.update();
  EXPECT_EQ(f.engine->softmaxCalls, 0);
  const PooledPyramid::Pick p = s.pooled().pick(0, 1500, 0, 1500, 8);
  if (!s.pooled().coarse()) {  // still computing: the old level stands in
    EXPECT_EQ(p.tile, before);
    EXPECT_FALSE(p.exact);
  }
  s.pooled().wait();
  s.update();
  ASSERT_TRUE(s.pooled().coarse());
  EXPECT_NE(s.pooled().coarse(), before);
  expectTileMatches(*s.pooled().coarse(), reference(s, s.params()), 0, false);
  // Back under the threshold: the engine takes over again.
  PooledPolicy off;
  off.mode = PooledPolicy::Mode::Off;
  s.setPooledPolicy(off);
  s.update();
  EXPECT_FALSE(s.pooledMode());
  EXPECT_EQ(f.engine->setInputsCalls, 1);
  EXPECT_FALSE(s.display().pooled);
  EXPECT_EQ(s.display().values.size(), std::size_t(1500) * 1500);
}

TEST(SessionPooled, AMaskExpressionIsRefusedWhereItsGridWouldBeHuge) {
  Fixture f;
  Session& s = *f.session;
  PooledPolicy policy;
  policy.mode = PooledPolicy::Mode::Auto;
  s.setPooledPolicy(policy);
  s.setScene(longScene(9000));  // 9000 x 9000 pools, and is past the expression limit
  s.update();
  ASSERT_TRUE(s.pooledMode());
  s.editScene().params.mask.expr = "k <= q";
  s.touchMask();
  try {
    s.update();
    ADD_FAILURE() << "the expression was evaluated over 9000 x 9000 cells";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mask expression"), std::string::npos) << e.what();
  }
  s.editScene().params.mask.expr.clear();
  s.touchMask();
  EXPECT_NO_THROW(s.update());
  s.pooled().wait();
}

TEST(SessionPooled, ASessionStartsOffAndADumpNeverPools) {
  Fixture f;
  Session& s = *f.session;
  EXPECT_EQ(s.pooledPolicy().mode, PooledPolicy::Mode::Off);
  PooledPolicy on;
  on.mode = PooledPolicy::Mode::On;
  s.setPooledPolicy(on);
  // Tensors whose engine holds the weights (a dump) stay materialised even when pooling is on.
  const Tensor3 q = ref::randomTensor(1, 40, 8, 1), k = ref::randomTensor(1, 50, 8, 2),
                v = ref::randomTensor(1, 50, 4, 3);
  s.setTensors(q, k, v, {}, {}, /*mayPool=*/false);
  s.update();
  EXPECT_FALSE(s.pooledMode());
  EXPECT_TRUE(s.hasResult());
  s.setTensors(q, k, v);
  s.update();
  EXPECT_TRUE(s.pooledMode());
  s.pooled().wait();
}

TEST(SessionPooled, ExportStreamsTheSameFigureTheMaterialisedSessionDraws) {
  Fixture pooledF, fullF;
  PooledPolicy on;
  on.mode = PooledPolicy::Mode::On;
  pooledF.session->setPooledPolicy(on);
  for (Fixture* f : {&pooledF, &fullF}) f->session->setScene(longScene(900));
  ExportRequest req;
  req.head = 1;
  const Image a = pooledF.session->exportImage(req);
  const Image b = fullF.session->exportImage(req);
  EXPECT_EQ(pooledF.engine->setInputsCalls, 0);
  ASSERT_EQ(a.width, b.width);
  ASSERT_EQ(a.height, b.height);
  EXPECT_TRUE(a.rgba == b.rgba) << "the streamed figure differs from the materialised one";
  req.bare = true;
  EXPECT_THROW(pooledF.session->exportImage(req), UsageError);
}

// ---- the row inspector in pooled mode: one query row, computed on its own -----------------------

// Row i of head h by a naive double loop over the session's Q, K, V: s = q_i . k_j / sqrt(d),
// softcap c tanh(s / c), ALiBi -m_h |i - j| (m_h = 2^(-8 (h + 1) / H), H a power of two), the
// causal / window / pad mask (T_q = T_k), L = (s + b) / tau, softmax over the allowed keys.
struct NaiveRow {
  std::vector<double> logits, weights, output;  // logits: -inf where masked
  double entropy = 0, max = 0;
  int argmax = -1;
  bool fullyMasked = true;
};

NaiveRow naiveRow(const Session& s, int h, int i) {
  const Tensor3 &q = s.inputs().q, &k = s.inputs().k, &v = s.inputs().v;
  const MaskSpec& m = s.params().mask;
  const double tau = s.params().temperature;
  const int T = k.rows, d = q.cols;
  NaiveRow r;
  r.logits.assign(T, -ref::kInf);
  r.weights.assign(T, 0.0);
  r.output.assign(v.cols, 0.0);
  double mx = -ref::kInf;
  for (int j = 0; j < T; ++j) {
    bool allowed = (!m.causal && m.window <= 0) || j <= i;
    if (m.window > 0 && j <= i - m.window) allowed = false;
    if (m.pad > 0 && j >= T - m.pad) allowed = false;
    if (!allowed) continue;
    double dot = 0;
    for (int c = 0; c < d; ++c) dot += double(q.at(h, i, c)) * double(k.at(h, j, c));
    double z = dot / std::sqrt(double(d));
    if (m.softcap > 0) z = m.softcap * std::tanh(z / m.softcap);
    if (m.alibi) z -= std::pow(2.0, -8.0 * (h + 1) / s.heads()) * std::abs(i - j);
    r.logits[j] = z / tau;
    mx = std::max(mx, r.logits[j]);
  }
  if (mx == -ref::kInf) return r;
  r.fullyMasked = false;
  double sum = 0;
  for (int j = 0; j < T; ++j) sum += r.logits[j] == -ref::kInf ? 0.0 : std::exp(r.logits[j] - mx);
  for (int j = 0; j < T; ++j) {
    if (r.logits[j] == -ref::kInf) continue;
    const double a = std::exp(r.logits[j] - mx) / sum;
    r.weights[j] = a;
    if (a > 0) r.entropy -= a * std::log(a);
    if (a > r.max) r.max = a, r.argmax = j;
    for (int c = 0; c < v.cols; ++c) r.output[c] += a * double(v.at(h, j, c));
  }
  return r;
}

void expectRowMatches(Session& s, int h, int i) {
  SCOPED_TRACE("row " + std::to_string(i) + " of head " + std::to_string(h));
  const std::shared_ptr<const QueryRow> got = s.pooledRow(i);
  ASSERT_TRUE(got);
  const NaiveRow want = naiveRow(s, h, i);
  ASSERT_EQ(got->head, h);
  ASSERT_EQ(got->row, i);
  ASSERT_EQ(got->weights.size(), want.weights.size());
  ASSERT_EQ(got->output.size(), want.output.size());
  EXPECT_EQ(got->stats.fullyMasked, want.fullyMasked);
  int bad = 0, allowed = 0;
  double sum = 0;
  for (std::size_t j = 0; j < want.weights.size(); ++j) {
    const bool masked = want.logits[j] == -ref::kInf;
    allowed += !masked;
    sum += got->weights[j];
    if (masked != (got->logits[j] == kNegInf) ||
        (!masked && !ref::close(got->logits[j], want.logits[j], 1e-5, 1e-4)) ||
        !ref::close(got->weights[j], want.weights[j], 1e-7, 1e-4)) {
      if (++bad <= 5)
        ADD_FAILURE() << "key " << j << ": logit " << got->logits[j] << " weight "
                      << got->weights[j] << ", reference " << want.logits[j] << " "
                      << want.weights[j];
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(got->allowedKeys, allowed);
  for (std::size_t c = 0; c < want.output.size(); ++c)
    EXPECT_TRUE(ref::close(got->output[c], want.output[c], 1e-6, 1e-4))
        << "output " << c << ": " << got->output[c] << ", reference " << want.output[c];
  if (want.fullyMasked) {
    EXPECT_EQ(sum, 0.0);
    EXPECT_EQ(got->stats.sum, 0.0f);
    EXPECT_EQ(got->stats.argmax, -1);
    for (float o : got->output) EXPECT_EQ(o, 0.0f);
    return;
  }
  EXPECT_NEAR(got->stats.sum, 1.0, 1e-5);
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_EQ(got->stats.argmax, want.argmax);
  EXPECT_NEAR(got->stats.max, want.max, 1e-5);
  EXPECT_NEAR(got->stats.entropy, want.entropy, 1e-4 * std::max(1.0, want.entropy));
}

TEST(SessionPooled, TheInspectedRowIsTheNaiveSoftmaxOfItsQueryWithoutTheMatrix) {
  Fixture f;
  Session& s = *f.session;
  pooledOn(s, 1200);
  s.setView({1, false, ViewStage::Weights, false, false});
  s.update();
  ASSERT_TRUE(s.pooledMode());
  EXPECT_FALSE(s.hasResult());
  ASSERT_TRUE(s.params().mask.causal);
  // A causal row, the first and the last.
  expectRowMatches(s, 1, 1000);
  expectRowMatches(s, 1, 0);
  expectRowMatches(s, 1, 1199);
  // Kept while nothing changes; a new row, head or temperature computes again.
  const auto kept = s.pooledRow(1000);
  EXPECT_EQ(s.pooledRow(1000), kept);
  EXPECT_EQ(s.pooledRow(1000), kept);
  s.setTemperature(0.5f);
  s.update();
  EXPECT_NE(s.pooledRow(1000), kept);
  expectRowMatches(s, 1, 1000);
  s.setView({0, false, ViewStage::Weights, false, false});
  s.update();
  expectRowMatches(s, 0, 1000);
  EXPECT_FALSE(s.pooledRow(-1));
  EXPECT_FALSE(s.pooledRow(1200));
  EXPECT_EQ(f.engine->setInputsCalls, 0) << "a row must not materialise S";
}

TEST(SessionPooled, TheInspectedRowFollowsWindowPaddingAlibiSoftcapAndFullyMaskedRows) {
  Fixture f;
  Session& s = *f.session;
  pooledOn(s, 900);
  s.setView({1, false, ViewStage::Weights, false, false});
  // Window 16 and the last 32 keys padded (keys 868..899): rows 883.. see only padding.
  s.editScene().params.mask.window = 16;
  s.editScene().params.mask.pad = 32;
  s.touchMask();
  s.update();
  ASSERT_TRUE(s.pooledMode());
  expectRowMatches(s, 1, 500);  // a window row
  expectRowMatches(s, 1, 860);  // its window partly padded
  expectRowMatches(s, 1, 880);  // three keys left
  expectRowMatches(s, 1, 895);  // fully masked
  ASSERT_EQ(s.tq(), 900);
  const auto masked = s.pooledRow(895);
  ASSERT_TRUE(masked);
  EXPECT_TRUE(masked->stats.fullyMasked);
  EXPECT_EQ(masked->allowedKeys, 0);
  EXPECT_TRUE(s.pooledRow(500)->stats.max > 0.0f);
  // ALiBi, a softcap and a temperature on top.
  s.editScene().params.mask.alibi = true;
  s.editScene().params.mask.softcap = 2.0f;
  s.editScene().params.temperature = 0.7f;
  s.touchMask();
  s.update();
  expectRowMatches(s, 1, 500);
  expectRowMatches(s, 1, 880);
  expectRowMatches(s, 1, 895);
  EXPECT_EQ(f.engine->setInputsCalls, 0);
}

TEST(SessionPooled, NoRowOutsidePooledMode) {
  Fixture f;
  Session& s = *f.session;
  s.setScene(smallScene());
  s.update();
  ASSERT_FALSE(s.pooledMode());
  EXPECT_FALSE(s.pooledRow(2));
}

}  // namespace
}  // namespace attnviz
