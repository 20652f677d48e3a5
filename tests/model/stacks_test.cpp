// The model as stacks of blocks: the family table, and the defects found while making the pass
// family-agnostic, each with a check that failed before its fix.
#include "model_test_util.h"

#include "attnviz/model/attribution.h"
#include "attnviz/model/generate.h"
#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace attnviz::testing {
namespace {

fs::path llamaGqa() { return fixture("llama/llama_gqa"); }
// A trained model (a byte-level GPT-2 on the KJV): its heads matter and its greedy text varies.
fs::path trained() { return fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "kjv-byte-2l"; }

// A copy of a fixture folder, for changing its config.
fs::path copyFolder(const fs::path& from, const TempDir& tmp) {
  const fs::path to = tmp.path / "m";
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

void editJson(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = fs::exists(file) ? nlohmann::json::parse(slurp(file.string()))
                                      : nlohmann::json::object();
  edit(j);
  std::ofstream(file) << j.dump();
}

// Mean ablation at position P averages each head over the positions up to P: the sweep read at P
// is the same whether or not tokens follow P (it averaged over all T positions before).
TEST(StacksDefects, MeanAblationAtPIgnoresTheTokensAfterIt) {
  const auto model = Model::open(trained().string());
  const std::vector<int> ids = model->encode("And God said, Let there be light: and there was");
  const int P = 12;
  const std::vector<int> prefix(ids.begin(), ids.begin() + P + 1);
  AttributionTarget at;
  at.position = P;
  const AblationSweep full = ablationSweep(*model, model->forward(ids), AblationKind::Mean, at);
  const AblationSweep cut = ablationSweep(*model, model->forward(prefix), AblationKind::Mean, at);
  ASSERT_EQ(full.target, cut.target);
  ASSERT_EQ(full.delta.values.size(), cut.delta.values.size());
  double worst = 0.0, largest = 0.0;
  for (std::size_t i = 0; i < full.delta.values.size(); ++i) {
    worst = std::max(worst, std::fabs(double(full.delta.values[i]) - cut.delta.values[i]));
    largest = std::max(largest, std::fabs(double(cut.delta.values[i])));
  }
  EXPECT_LT(worst, 1e-5) << "the sweep at P read tokens after P";
  EXPECT_GT(largest, 1e-4) << "mean ablation changed nothing: the check would pass vacuously";
}

// Every EOS id of config.json (a list) and generation_config.json ends generation, not only the
// first.
TEST(StacksDefects, EveryEosIdEndsGeneration) {
  const auto model = Model::open(trained().string());
  const std::vector<int> prompt = model->encode("And God said");
  GenerateOptions opts;
  opts.maxNew = 8;
  opts.stopAtEos = false;
  const Generation g = generate(*model, prompt, {}, opts);
  ASSERT_EQ(g.tokens.size(), 8u);
  // The end id: the first generated token after the first that differs from every one before
  // it; the run must stop right after it.
  std::size_t stopAt = 0;
  for (std::size_t t = 1; t < g.tokens.size() && !stopAt; ++t) {
    bool fresh = true;
    for (std::size_t u = 0; u < t; ++u) fresh = fresh && g.tokens[u].id != g.tokens[t].id;
    if (fresh) stopAt = t;
  }
  ASSERT_GT(stopAt, 0u) << "greedy repeats one token: pick another prompt";
  const int second = g.tokens[stopAt].id;
  std::vector<int> expected;
  for (std::size_t t = 0; t <= stopAt; ++t) expected.push_back(g.tokens[t].id);
  // An id the greedy run never produces, listed first.
  int other = 3;
  for (const auto& t : g.tokens) other = std::max(other, t.id + 1);
  auto check = [&](const char* file, const char* where) {
    TempDir tmp;
    const fs::path dir = copyFolder(trained(), tmp);
    if (fs::exists(dir / "tokenizer_config.json"))
      editJson(dir / "tokenizer_config.json", [](nlohmann::json& j) { j.erase("eos_token"); });
    editJson(dir / file, [&](nlohmann::json& j) { j["eos_token_id"] = {other, second}; });
    const auto m = Model::open(dir.string());
    if (m->tokenizer().eos() && *m->tokenizer().eos() != second &&
        *m->tokenizer().eos() != other) {
      EXPECT_TRUE(m->config().isEos(second)) << where;
    }
    GenerateOptions o = opts;
    o.stopAtEos = true;
    const Generation e = generate(*m, prompt, {}, o);
    EXPECT_EQ(e.stop, Generation::Stop::Eos) << where;
    EXPECT_EQ(e.ids(), expected) << where;
  };
  check("config.json", "config.json's list");
  check("generation_config.json", "generation_config.json");
}

// What cannot apply to a decode step is refused before the prompt runs, with a message: mean
// ablation and patching, and masks that count from the prompt's length.
TEST(StacksDefects, DecodeRefusesLengthDependentInterventionsUpFront) {
  const auto model = Model::open(llamaGqa().string());
  const std::vector<int> prompt{1, 330, 333, 300};
  GenerateOptions opts;
  opts.maxNew = 2;
  auto refused = [&](const Interventions& iv, const std::string& expect) {
    try {
      generate(*model, prompt, iv, opts);
      ADD_FAILURE() << "accepted; expected a refusal naming " << expect;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  Interventions pad;
  pad.layer(0, model->config().nLayer).mask.pad = 1;
  refused(pad, "pad:1");
  Interventions docs;
  docs.layer(1, model->config().nLayer).mask.docs = {0, 0, 1, 1};
  refused(docs, "document mask");
  Interventions mean;
  mean.layer(0, model->config().nLayer).meanAblatedHeads = {1};
  refused(mean, "mean ablation");
  // A zero ablation and a window are fine at every step.
  Interventions ok;
  ok.ablate(0, 1, model->config());
  ok.layer(1, model->config().nLayer).mask.window = 2;
  EXPECT_EQ(generate(*model, prompt, ok, opts).tokens.size(), 2u);
}

// A re-run that throws (a patch of the wrong shape) leaves the result as it was.
TEST(StacksDefects, AFailedRerunChangesNothing) {
  const auto model = Model::open(llamaGqa().string());
  ForwardResult r = model->forward({1, 330, 333, 300});
  const ForwardResult before = r;
  Interventions iv;
  iv.layer(1, model->config().nLayer).patchedHeads.emplace_back(0, MatrixRM::Zero(2, 3));
  iv.layer(0, model->config().nLayer).temperature = 0.5f;
  EXPECT_THROW(model->rerunFrom(r, 0, iv), InputError);
  EXPECT_TRUE(r.interventions.layers.empty());
  for (std::size_t l = 0; l < r.layers.size(); ++l) EXPECT_TRUE(r.layers.shares(before.layers, l));
  EXPECT_TRUE(r.residualOut == before.residualOut);
  EXPECT_THROW(model->rerunLogitsAt(r, 0, iv, 3), InputError);
  for (std::size_t l = 0; l < r.layers.size(); ++l) EXPECT_TRUE(r.layers.shares(before.layers, l));
}

// A label for an id the tokenizer lacks is "#id", never an exception (the GUI's next-token and
// attribution lists build labels for every top-k id).
TEST(StacksDefects, LabelsOfIdsOutsideTheVocabularyDoNotThrow) {
  const auto model = Model::open(llamaGqa().string());
  const Tokenizer& tok = model->tokenizer();
  const int beyond = tok.size() + 5;
  EXPECT_EQ(tok.label(beyond), "#" + std::to_string(beyond));
  EXPECT_EQ(tok.printable(-1), "#-1");
}

// What a pass keeps is asked for: generation's prompt pass keeps no attention weights, and each
// token keeps only the rows asked for.
TEST(StacksCapture, GenerationKeepsOnlyTheRowsAskedFor) {
  const auto model = Model::open(llamaGqa().string());
  GenerateOptions opts;
  opts.maxNew = 3;
  const Generation all = generate(*model, {1, 330, 333}, {}, opts);
  opts.rows = LayerSet::just(1);
  const Generation one = generate(*model, {1, 330, 333}, {}, opts);
  ASSERT_EQ(all.ids(), one.ids());
  for (std::size_t t = 0; t + 1 < one.tokens.size(); ++t) {
    ASSERT_EQ(one.tokens[t].rows.size(), std::size_t(model->config().nLayer));
    EXPECT_TRUE(one.tokens[t].rows[0].empty());
    EXPECT_EQ(one.tokens[t].rows[1].size(), all.tokens[t].rows[1].size());
  }
}

// A gpt2 GGUF whose metadata gives its own head size or KV heads is refused (it would read past
// GPT-2's fused c_attn) by `attnviz model`; the cases come from make_gguf_model_cases.py (run in
// GgufModelFiles.BadFilesExitOneNamingTheFile). Here: the family table names every family it
// reads, and an unknown model_type lists them.
TEST(FamilyTable, UnknownModelTypeListsEveryFamily) {
  try {
    parseModelConfig(R"({"model_type": "no_such_family"})", "config.json");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const char* f : {"gpt2", "llama", "mistral", "qwen2"})
      EXPECT_NE(msg.find(f), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace attnviz::testing
