// Encoders (bert, roberta, distilbert) through the real binary against encoder_reference.py's
// float64 torch reference: random-init folders generated at test time (never committed), every
// layer's attention weights, the last hidden states and the masked-LM logits, a pair input with
// token types 0/1, `fill`'s top-k, a folder without the head, and bad folders.
#include "model_test_util.h"
#include "reference_script.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace attnviz;
using namespace attnviz::testing;

namespace {

using Generated = ReferenceScript;

const Generated& generated() {
  static Generated g("encoder_reference.py");
  return g;
}

std::string idList(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// `attnviz model` on a case's input (its text and pair, or its ids), the three outputs against
// the reference: weights within 1e-5, hidden states and logits within 1e-4 of their scale.
void checkCase(const std::string& name) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok) << "encoder_reference.py failed";
  const nlohmann::json& c = g.find(name);
  ASSERT_FALSE(c.is_null()) << name;
  TempDir out;
  std::vector<std::string> args = {"model", "--model", g.path(c["folder"]).string()};
  if (c.contains("text")) {
    args.insert(args.end(), {"--text", c["text"].get<std::string>()});
    if (c.contains("text_pair")) args.insert(args.end(), {"--text-pair", c["text_pair"]});
  } else {
    args.insert(args.end(), {"--ids", idList(c["ids"].get<std::vector<int>>())});
  }
  const fs::path w = out.path / "w.npy", h = out.path / "h.npy", z = out.path / "z.npy";
  args.insert(args.end(),
              {"--weights", w.string(), "--hidden", h.string(), "--logits", z.string()});
  const CliRun run = runBinary(args, out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const NpyArray gw = readNpy(w.string()), gh = readNpy(h.string()), gz = readNpy(z.string());
  const NpyArray rw = readNpy(g.path(name + "_weights.npy").string());
  const NpyArray rh = readNpy(g.path(name + "_hidden.npy").string());
  const NpyArray rz = readNpy(g.path(name + "_logits.npy").string());
  EXPECT_EQ(gw.shape, rw.shape);
  EXPECT_EQ(gh.shape, rh.shape);
  EXPECT_EQ(gz.shape, rz.shape);
  expectClose(gw.data, rw, 1e-5, 0, name + " weights");
  expectClose(gh.data, rh, 0, 1e-4, name + " hidden");
  expectClose(gz.data, rz, 0, 1e-4, name + " logits");
}

// `attnviz fill --top-k 3` gives the reference's most likely ids at each mask, in order.
void checkFill(const std::string& name) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find(name);
  TempDir out;
  std::vector<std::string> args = {
      "fill",    "--model", g.path(c["folder"]).string(), "--text", c["text"].get<std::string>(),
      "--top-k", "3"};
  if (c.contains("text_pair")) args.insert(args.end(), {"--text-pair", c["text_pair"]});
  const CliRun run = runBinary(args, out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::ostringstream want;
  std::istringstream got(run.out);
  std::string line;
  for (const auto& f : c["fill"]) {
    for (std::size_t i = 0; i < f["ids"].size(); ++i) {
      ASSERT_TRUE(std::getline(got, line)) << run.out;
      int pos = -1, id = -1;
      double p = -1;
      ASSERT_EQ(std::sscanf(line.c_str(), "%d\t%d\t%lf", &pos, &id, &p), 3) << line;
      EXPECT_EQ(pos, f["position"].get<int>()) << line;
      EXPECT_EQ(id, f["ids"][i].get<int>()) << line;
      EXPECT_NEAR(p, f["probs"][i].get<double>(), 1e-5) << line;
    }
  }
  EXPECT_FALSE(std::getline(got, line)) << "more lines than the masks' top-k: " << run.out;
}

}  // namespace

TEST(Encoders, BertMatchesTorch) { checkCase("bert_single"); }
TEST(Encoders, BertPairWithTokenTypesMatchesTorch) { checkCase("bert_pair"); }
// RoBERTa: positions from pad + 1, its pair template <s> A </s></s> B </s> (tokenizer.json's
// RobertaProcessing), one token type.
TEST(Encoders, RobertaPairMatchesTorch) { checkCase("roberta_pair"); }
TEST(Encoders, DistilbertMatchesTorch) { checkCase("distilbert_single"); }
// ModernBERT: pre-norm without biases, no norm before layer 0's attention, fused Wqkv, GeGLU,
// RoPE with the global and local bases, local layers that see |i - j| <= 2 (T = 14 here).
TEST(Encoders, ModernbertMatchesTorch) { checkCase("modernbert"); }
// With attention_bias, mlp_bias, norm_bias and classifier_bias true: the biases of Wqkv, Wo, the
// MLP's Wi and Wo, every LayerNorm and the head's dense layer.
TEST(Encoders, ModernbertWithEveryBiasMatchesTorch) { checkCase("modernbert_bias"); }

// `model --residual`: the stream after the embeddings (their norm included) and after each
// layer, [L + 1, T, d], against the reference's, within 1e-4 of its scale.
TEST(Encoders, ResidualStreamMatchesTorch) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("modernbert");
  TempDir out;
  const fs::path r = out.path / "r.npy";
  const CliRun run = runBinary({"model", "--model", g.path(c["folder"]).string(), "--ids",
                                idList(c["ids"].get<std::vector<int>>()), "--residual",
                                r.string()},
                               out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const NpyArray got = readNpy(r.string());
  const NpyArray want = readNpy(g.path("modernbert_residual.npy").string());
  EXPECT_EQ(got.shape, want.shape);
  expectClose(got.data, want, 0, 1e-4, "residual stream");
}

TEST(Encoders, FillGivesTheReferenceTopK) {
  checkFill("bert_single");
  checkFill("bert_pair");
  checkFill("distilbert_single");
  checkFill("roberta_pair");
}

TEST(Encoders, PairTokenTypesAreOneAfterTheFirstSep) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const auto model = Model::open(g.path("bert_mlm").string());
  const nlohmann::json& c = g.find("bert_pair");
  const PairEncoding p = model->tokenizer().encodePair(c["text"].get<std::string>(),
                                                       c["text_pair"].get<std::string>());
  EXPECT_EQ(p.ids, c["ids"].get<std::vector<int>>());
  EXPECT_EQ(p.typeIds, c["types"].get<std::vector<int>>());
  // The pair's types change the pass (type 1 rows differ from type 0).
  const ForwardResult zeros = model->forward(p.ids);
  const ForwardResult typed = model->forward(p.ids, {}, {}, p.typeIds);
  EXPECT_GT((zeros.residualOut - typed.residualOut).cwiseAbs().maxCoeff(), 1e-3);
  EXPECT_THROW(model->forward(p.ids, {}, {}, std::vector<int>(p.ids.size(), 2)), InputError);
  EXPECT_THROW(model->forward(p.ids, {}, {}, std::vector<int>{0, 1}), InputError);
}

TEST(Encoders, IdsRunWithTokenTypesZero) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bert_single");
  TempDir out;
  const fs::path a = out.path / "a.npy", b = out.path / "b.npy";
  const std::string folder = g.path("bert_mlm").string();
  ASSERT_EQ(
      runBinary({"model", "--model", folder, "--text", c["text"], "--hidden", a.string()}, out.path)
          .exitCode,
      0);
  ASSERT_EQ(runBinary({"model", "--model", folder, "--ids",
                       idList(c["ids"].get<std::vector<int>>()), "--hidden", b.string()},
                      out.path)
                .exitCode,
            0);
  expectClose(readNpy(a.string()).data, readNpy(b.string()), 0, 1e-6, "--ids vs --text");
}

TEST(Encoders, BertModelWithoutHeadRefusesLogitsButWritesHidden) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bert_single");
  TempDir out;
  const std::string folder = g.path("bert_base").string();
  const fs::path z = out.path / "z.npy", h = out.path / "h.npy";
  CliRun run = runBinary({"model", "--model", folder, "--text", c["text"], "--logits", z.string()},
                         out.path);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("cls.predictions.transform.dense.weight"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(z));
  run = runBinary({"fill", "--model", folder, "--text", c["text"]}, out.path);
  EXPECT_EQ(run.exitCode, 1) << run.err;
  run = runBinary({"model", "--model", folder, "--text", c["text"], "--hidden", h.string()},
                  out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  // BertModel's names (no "bert." prefix) hold the same weights: the same hidden states.
  expectClose(readNpy(h.string()).data, readNpy(g.path("bert_single_hidden.npy").string()), 0, 1e-4,
              "BertModel hidden");
}

TEST(Encoders, BadFoldersExitOneNamingConfigJson) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  TempDir out;
  for (const char* bad : {"bad_position_type", "bad_heads"}) {
    const CliRun run =
        runBinary({"model", "--model", g.path(bad).string(), "--text", "the cat"}, out.path);
    EXPECT_EQ(run.exitCode, 1) << bad << ": " << run.err;
    EXPECT_NE(run.err.find("config.json"), std::string::npos) << bad << ": " << run.err;
    EXPECT_EQ(lineCount(run.err), 1) << run.err;
  }
}

// RoBERTa's positions start at pad_token_id + 1: a pad id at INT_MAX is refused in one line,
// checked before the + 1 can wrap (which once made the offset negative and passed the check).
TEST(Encoders, RobertaPadIdAtIntMaxIsRefused) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  TempDir out;
  for (long long pad : {2147483647LL, 2147483646LL, -1LL}) {
    const fs::path d = editedCopy(g.path("roberta_mlm"), out.path / ("pad" + std::to_string(pad)),
                                  [&](nlohmann::json& j) { j["pad_token_id"] = pad; });
    const CliRun run = runBinary({"model", "--model", d.string(), "--ids", "0,5,6,2"}, out.path);
    expectOneLineRefusal(run, d / "config.json",
                         "pad_token_id " + std::to_string(pad) + " leaves no positions");
  }
}

TEST(Encoders, UsageErrors) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  TempDir out;
  const std::string folder = g.path("bert_mlm").string();
  // No mask token in the text; a pair with --ids; a decoder-only option on an encoder.
  EXPECT_EQ(runBinary({"fill", "--model", folder, "--text", "the cat"}, out.path).exitCode, 2);
  EXPECT_EQ(runBinary({"model", "--model", folder, "--ids", "2,3", "--text-pair", "a"}, out.path)
                .exitCode,
            2);
  EXPECT_EQ(runBinary({"model", "--model", folder, "--text", "the cat", "--top-k", "2"}, out.path)
                .exitCode,
            2);
  EXPECT_EQ(runBinary({"fill", "--model", folder, "--text", "the [MASK]", "--top-k", "0"}, out.path)
                .exitCode,
            2);
  // Commands that read next-token predictions refuse an encoder.
  EXPECT_EQ(
      runBinary({"generate", "--model", folder, "--text", "the cat", "-n", "2"}, out.path).exitCode,
      2);
  EXPECT_EQ(
      runBinary({"attribute", "--model", folder, "--text", "the cat", "--ablate-sweep", "zero"},
                out.path)
          .exitCode,
      2);
}

TEST(Encoders, HiddenWorksForDecodersToo) {
  TempDir out;
  const fs::path h = out.path / "h.npy";
  const fs::path shipped = ATTNVIZ_SHIPPED_MODEL_DIR;
  if (!fs::exists(shipped / "config.json")) GTEST_SKIP() << shipped << " is missing";
  const CliRun run = runBinary(
      {"model", "--model", shipped.string(), "--text", "In the beginning", "--hidden", h.string()},
      out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const auto model = Model::open(shipped.string());
  const ForwardResult r = model->forward(model->encode("In the beginning"));
  const MatrixRM want = model->lastHidden(r.residualOut);
  const NpyArray got = readNpy(h.string());
  ASSERT_EQ(got.shape, (std::vector<long long>{want.rows(), want.cols()}));
  // The last hidden states are what the head reads: the head times them gives the logits.
  for (Eigen::Index i = 0; i < want.size(); ++i) ASSERT_FLOAT_EQ(got.data[i], want.data()[i]);
}
