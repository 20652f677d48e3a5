// The app's watched translation of an encoder-decoder (Seq2SeqSource's step jobs: the encoder
// once, the pass's K and V as the caches, one decode step a token) on seq2seq_reference.py's
// random-init BART, Marian and T5 folders and the shipped kjv-t5-align: the tokens are those
// `attnviz generate --print-ids` prints for the same source (with ablations and masked source
// positions too), and the rows the steps appended to the pass shown (every decoder self and cross
// site, with and without the interventions) are those of a full pass over the same ids. Then the
// source's jobs: a stale pass or step is refused, a cancelled pass leaves the view as it was. The
// weights the app draws (its dump through the session's weights engine) are the pass's, bit for
// bit.
#include "model_test_util.h"
#include "reference_script.h"

#include "attnviz/engine/engine.h"
#include "attnviz/model/model.h"
#include "attnviz/session/dump_source.h"
#include "attnviz/session/seq2seq_source.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <sstream>

using namespace attnviz;
using namespace attnviz::testing;

namespace {

const ReferenceScript& generated() {
  static ReferenceScript g("seq2seq_reference.py");
  return g;
}

std::vector<int> parseIds(const std::string& line) {
  std::vector<int> ids;
  std::istringstream in(line);
  for (int id; in >> id;) ids.push_back(id);
  return ids;
}

// `attnviz generate --model DIR --text SRC -n N --print-ids` with `extra` options.
std::vector<int> cliGenerate(const std::string& dir, const std::string& source, int n,
                             const std::vector<std::string>& extra = {}) {
  TempDir out;
  std::vector<std::string> args = {"generate", "--model", dir,          "--text",
                                   source,     "-n",      std::to_string(n), "--print-ids"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliRun run = runBinary(args, out.path);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  return parseIds(run.out);
}

// Up to n tokens of watched translation as the app runs them: a step job a token, computed
// apart and adopted. Returns the ids (an EOS that ends it last).
std::vector<int> translate(Seq2SeqSource& q, int n) {
  std::vector<int> ids;
  for (int k = 0; k < n; ++k) {
    Seq2SeqSource::Job j = q.stepJob();
    Seq2SeqSource::runJob(q.model(), j);
    const int id = j.id;
    const bool eos = j.eos;
    EXPECT_TRUE(q.adopt(std::move(j)));
    ids.push_back(id);
    if (eos) break;
  }
  return ids;
}

// Every decoder site's weights of `got` (a pass grown by decode steps) against a full pass over
// its ids with `iv`, within 2e-5 (a step's matrix-vector products sum in another order than the
// pass's GEMMs: the shipped T5's sharp rows differ by 1.15e-5 with the baseline kernels); the
// last logits row within 1e-4.
void expectFullPass(const Model& m, const Seq2SeqSource& q, const ForwardResult& got,
                    const Interventions& iv, const std::string& what) {
  Capture cap = Capture::view(0);
  cap.weights = LayerSet::every();
  const ForwardResult full = m.forwardSeq2Seq(q.sourceIds(), q.decoderIds(), iv, cap);
  ASSERT_EQ(got.ids, q.decoderIds()) << what;
  for (const SiteId& s : q.sites()) {
    const Tensor3& a = got.site(s).weights;
    const Tensor3& b = full.site(s).weights;
    ASSERT_EQ(a.heads, b.heads) << what;
    ASSERT_EQ(a.rows, b.rows) << what << " " << seq2seqSiteName(s);
    ASSERT_EQ(a.cols, b.cols) << what << " " << seq2seqSiteName(s);
    float err = 0;
    for (std::size_t k = 0; k < a.size(); ++k) err = std::max(err, std::abs(a.data[k] - b.data[k]));
    EXPECT_LT(err, 2e-5) << what << " " << seq2seqSiteName(s);
  }
  const int V = m.config().vocabSize;
  ASSERT_EQ(int(got.logits.cols()), V);
  float err = 0;
  for (int v = 0; v < V; ++v)
    err = std::max(err, std::abs(got.logits(got.logits.rows() - 1, v) -
                                 full.logits(full.logits.rows() - 1, v)));
  EXPECT_LT(err, 1e-4) << what << " logits";
}

struct Case {
  std::string name, dir, source;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const ReferenceScript& g = generated();
  if (!g.ok) return out;
  for (const char* name : {"bart_a", "bart_b", "marian", "t5_v10", "t5_v11"}) {
    const nlohmann::json& c = g.find(name);
    if (c.is_null()) continue;
    out.push_back({name, c["folder"].get<std::string>(),
                   c.value("source_text", std::string("the cat sat on the mat."))});
  }
  out.push_back({"kjv-t5-align", std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-t5-align",
                 "In the beginning God created the heaven and the earth."});
  return out;
}

}  // namespace

TEST(Seq2SeqTranslate, StepsAreGenerateAndTheirRowsAFullPass) {
  ASSERT_TRUE(generated().ok) << "seq2seq_reference.py failed";
  const int n = 12;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::shared_ptr<const Model> m = Model::open(c.dir);
    Seq2SeqSource q(m);
    q.setTexts(c.source, "");
    const std::vector<int> got = translate(q, n);
    EXPECT_EQ(got, cliGenerate(c.dir, c.source, n));
    // The target grew by the tokens before any EOS; the pass shown is a full pass over it.
    const bool eos = !got.empty() && q.endsTarget(got.back());
    EXPECT_EQ(q.decoderIds().size(), 1 + got.size() - (eos ? 1 : 0));
    expectFullPass(*m, q, q.pass(), {}, "plain");
    // The dump the app draws holds the grown pass's weights bit for bit (an underflowed 0 on an
    // allowed key aside: the least normal float, so it is not hatched as masked).
    const Dump d = q.dump();
    ASSERT_EQ(d.layers.size(), q.sites().size());
    for (std::size_t i = 0; i < q.sites().size(); ++i) {
      const Tensor3& a = d.layers[i].weights;
      const Tensor3& b = q.pass().site(q.sites()[i]).weights;
      ASSERT_TRUE(a.sameShape(b));
      int differ = 0;
      for (std::size_t k = 0; k < a.size(); ++k)
        differ += a.data[k] != b.data[k] && b.data[k] != 0.0f;
      EXPECT_EQ(differ, 0) << d.layers[i].name;
    }
  }
}

TEST(Seq2SeqTranslate, WithAblationsAndMaskedSourceTheStepsAreGenerates) {
  ASSERT_TRUE(generated().ok) << "seq2seq_reference.py failed";
  const int n = 10;
  bool changed = false;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::shared_ptr<const Model> m = Model::open(c.dir);
    Seq2SeqSource q(m);
    q.setAblated(SiteId{0, 0, 1}, 0, true);  // cross:0:0
    q.setAblated(SiteId{1, 0, 0}, 1, true);  // enc:0:1
    q.setTexts(c.source, "");
    q.setMaskedSource({1, 2});
    const std::vector<int> got = translate(q, n);
    EXPECT_EQ(got, cliGenerate(c.dir, c.source, n,
                               {"--ablate", "cross:0:0", "--ablate", "enc:0:1", "--mask-source",
                                "1,2"}));
    Interventions iv;
    iv.at(SiteId{0, 0, 1}, m->config()).ablatedHeads = {0};
    iv.at(SiteId{1, 0, 0}, m->config()).ablatedHeads = {1};
    hideSourcePositions(iv, m->config(), {1, 2});
    expectFullPass(*m, q, q.pass(), iv, "interventions");
    // The "before" lists' pass (no interventions) grew with the same tokens.
    expectFullPass(*m, q, q.baselinePass(), {}, "baseline");
    changed = changed || got != cliGenerate(c.dir, c.source, n);
  }
  EXPECT_TRUE(changed) << "the interventions changed no translation";
}

// appendTarget (one decode step a token): a full pass over the ids; a bad id is refused and the
// pass kept.
TEST(Seq2SeqTranslate, AppendedTokensAreAFullPassAndBadIdsAreRefused) {
  const std::string dir = std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-t5-align";
  std::shared_ptr<const Model> m = Model::open(dir);
  Seq2SeqSource q(m);
  q.setTexts("In the beginning God created the heaven and the earth.", "");
  for (int k = 0; k < 4; ++k) q.appendTarget(q.greedyNext());
  const std::vector<int> stepped = q.decoderIds();
  expectFullPass(*m, q, q.pass(), {}, "appended");
  // Past the model's positions: refused, the pass kept.
  Seq2SeqSource p(m);
  p.setTexts("In the beginning", "");
  std::vector<int> ids = p.decoderIds();
  EXPECT_NO_THROW(p.appendTarget(5));
  EXPECT_THROW(p.appendTarget(m->config().vocabSize), InputError);  // outside the vocab
  EXPECT_EQ(p.decoderIds().size(), ids.size() + 1);
  EXPECT_EQ(stepped.size(), 5u);
}

// Deferred: an ablation is recorded at once and the pass goes stale; a job made before the
// change is refused; the job made after is taken; a step made while stale is refused too.
TEST(Seq2SeqTranslate, StaleJobsAreRefusedAndACancelledPassKeepsTheView) {
  const std::string dir = std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-t5-align";
  std::shared_ptr<const Model> m = Model::open(dir);
  Seq2SeqSource q(m);
  q.setTexts("In the beginning God created the heaven and the earth.", "");
  q.setDeferPasses(true);
  Seq2SeqSource::Job early = q.passJob(q.sourceText(), q.targetText());
  Seq2SeqSource::Job step = q.stepJob();
  const std::uint64_t v = q.interventionsVersion();
  q.setAblated(SiteId{0, 1, 1}, 2, true);
  EXPECT_TRUE(q.ablated(SiteId{0, 1, 1}, 2));
  EXPECT_NE(q.interventionsVersion(), v);
  EXPECT_TRUE(q.stale());
  Seq2SeqSource::runJob(*m, early);
  EXPECT_FALSE(q.adopt(std::move(early)));
  Seq2SeqSource::runJob(*m, step);
  EXPECT_FALSE(q.adopt(std::move(step)));
  EXPECT_TRUE(q.stale());
  // The pass with the ablation, on a worker's PassProgress: it plans and counts both passes.
  Seq2SeqSource::Job j = q.passJob(q.sourceText(), q.targetText());
  PassProgress progress;
  {
    PassProgress::Scope scope(&progress);
    Seq2SeqSource::runJob(*m, j);
  }
  const ModelConfig& c = m->config();
  EXPECT_EQ(progress.layersPlanned.load(), 2 * (c.nEncoderLayer + c.nLayer));
  EXPECT_EQ(progress.layersDone.load(), progress.layersPlanned.load());
  EXPECT_TRUE(q.adopt(std::move(j)));
  EXPECT_FALSE(q.stale());
  const std::vector<TokenProb> after = q.topK(3);
  // Cancelled half way: PassCancelled, nothing adopted; revertInterventions restores the head.
  q.setAblated(SiteId{0, 1, 1}, 2, false);
  Seq2SeqSource::Job c2 = q.passJob(q.sourceText(), q.targetText());
  PassProgress cancel;
  cancel.onLayer = [&](int) {
    if (cancel.layersDone.load() >= 2) cancel.cancel = true;
  };
  {
    PassProgress::Scope scope(&cancel);
    EXPECT_THROW(Seq2SeqSource::runJob(*m, c2), PassCancelled);
  }
  q.revertInterventions();
  EXPECT_TRUE(q.ablated(SiteId{0, 1, 1}, 2));
  EXPECT_FALSE(q.stale());
  ASSERT_EQ(q.topK(3).size(), after.size());
  for (std::size_t k = 0; k < after.size(); ++k) EXPECT_EQ(q.topK(3)[k].id, after[k].id);
}


// What the app draws for each site (the source's dump through DumpSource's weights engine and the
// session's view matrix, at tau = 1 with no mask of the session's own): the pass's weights bit for
// bit, after a translation grew the pass too; an underflowed 0 on an allowed key is drawn as the
// least normal float (not hatched as masked).
TEST(Seq2SeqTranslate, TheAppDrawsThePassWeightsBitForBit) {
  const std::string dir = std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-t5-align";
  std::shared_ptr<const Model> m = Model::open(dir);
  Seq2SeqSource q(m);
  q.setTexts("In the beginning God created the heaven and the earth.", "");
  for (int round = 0; round < 2; ++round) {
    if (round == 1) translate(q, 5);
    DumpSource src(q.dump());
    Session session(makeCpuEngine());
    for (std::size_t i = 0; i < q.sites().size(); ++i) {
      src.showLayer(session, int(i));
      const Tensor3& w = q.pass().site(q.sites()[i]).weights;
      for (int h = 0; h < w.heads; ++h) {
        View v;
        v.head = h;
        session.setView(v);
        session.update();
        const std::vector<float>& got = session.display().values;
        ASSERT_EQ(got.size(), std::size_t(w.rows) * w.cols);
        int differ = 0;
        for (std::size_t k = 0; k < got.size(); ++k) {
          const float want = w.head(h)[k];
          differ += want != 0.0f ? got[k] != want : !(got[k] <= std::numeric_limits<float>::min());
        }
        EXPECT_EQ(differ, 0) << "round " << round << " " << seq2seqSiteName(q.sites()[i])
                             << " head " << h;
      }
    }
  }
}
