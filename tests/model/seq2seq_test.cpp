// Encoder-decoders (bart) through the real binary and the library against
// seq2seq_reference.py's float64 torch reference: random-init folders generated at test time
// (never committed), the encoder's self-attention, the decoder's causal self-attention and its
// cross-attention over the source (every attention site of the model), the logits; interventions
// and attribution addressed by site; bad folders.
#include "model_test_util.h"
#include "reference_script.h"

#include "attnviz/model/attribution.h"
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/sentencepiece.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

using namespace attnviz;
using namespace attnviz::testing;

namespace {

using Generated = ReferenceScript;

const Generated& generated() {
  static Generated g("seq2seq_reference.py");
  return g;
}

std::string idList(const std::vector<int>& ids, const char* sep = ",") {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : sep) + std::to_string(id);
  return s;
}

// `attnviz model` on a case: every site's weights within 1e-5, the logits within 1e-4 of scale.
// byText: the source and target as text (the tokenizer's <s> ... </s> template, the decoder's
// start id and the target without its EOS), else as ids.
void checkCase(const std::string& name, bool byText) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok) << "seq2seq_reference.py failed";
  const nlohmann::json& c = g.find(name);
  ASSERT_FALSE(c.is_null()) << name;
  TempDir out;
  std::vector<std::string> args = {"model", "--model", c["folder"].get<std::string>()};
  if (byText) {
    args.insert(args.end(), {"--text", c.value("source_text", "the cat sat on the mat."),
                             "--target", c.value("target_text", "a dog ran")});
  } else {
    args.insert(args.end(), {"--ids", idList(c["source"].get<std::vector<int>>()), "--target-ids",
                             idList(c["target"].get<std::vector<int>>())});
  }
  const fs::path e = out.path / "e.npy", d = out.path / "d.npy", x = out.path / "x.npy",
                 z = out.path / "z.npy";
  args.insert(args.end(), {"--weights", e.string(), "--decoder-weights", d.string(),
                           "--cross-weights", x.string(), "--logits", z.string()});
  const CliRun run = runBinary(args, out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  for (const auto& [file, what, tol] :
       {std::tuple{e, "enc", 1e-5}, std::tuple{d, "dec", 1e-5}, std::tuple{x, "cross", 1e-5}}) {
    const NpyArray got = readNpy(file.string());
    const NpyArray want = readNpy(g.path(name + "_" + what + ".npy").string());
    EXPECT_EQ(got.shape, want.shape) << what;
    expectClose(got.data, want, tol, 0, name + " " + what + " weights");
  }
  const NpyArray gz = readNpy(z.string());
  const NpyArray rz = readNpy(g.path(name + "_logits.npy").string());
  EXPECT_EQ(gz.shape, rz.shape);
  expectClose(gz.data, rz, 0, 1e-4, name + " logits");
}

std::vector<int> ids(const nlohmann::json& c, const char* key) {
  return c[key].get<std::vector<int>>();
}

}  // namespace

TEST(Seq2Seq, BartMatchesTorchAtEverySite) { checkCase("bart_a", false); }
TEST(Seq2Seq, BartWithScaledEmbeddingsAndReluMatchesTorch) { checkCase("bart_b", false); }
TEST(Seq2Seq, TextAndTargetTextGiveTheReferenceIds) { checkCase("bart_a", true); }
TEST(Seq2Seq, MarianMatchesTorchAtEverySite) { checkCase("marian", false); }
// T5: relative position buckets (bidirectional in the encoder, causal in the decoder, none in
// the cross sites; the 39-token source reaches the logarithmic buckets and the last one), RMS
// norms, no score scaling; v1.0 ReLU with the tied head's d^-1/2, v1.1 gated GELU untied with a
// deeper decoder; spiece.model's ids with </s> appended.
TEST(Seq2Seq, T5MatchesTorchAtEverySite) { checkCase("t5_v10", false); }
TEST(Seq2Seq, T5v11MatchesTorchAtEverySite) { checkCase("t5_v11", false); }
TEST(Seq2Seq, T5TextsThroughSpiece) { checkCase("t5_v11", true); }

// The buckets against hand-worked cases (32 buckets, max distance 128, as T5's defaults): exact
// below 8 (bidirectional: 16 a side, the keys after the query in the upper half) or 16 (causal),
// then log-spaced, the last bucket from the max distance on.
TEST(Seq2Seq, T5RelativeBuckets) {
  EXPECT_EQ(relativeBucket(5, 5, true, 32, 128), 0);
  EXPECT_EQ(relativeBucket(6, 5, true, 32, 128), 17);   // one after: 16 + 1
  EXPECT_EQ(relativeBucket(4, 5, true, 32, 128), 1);    // one before
  EXPECT_EQ(relativeBucket(0, 7, true, 32, 128), 7);    // 7 < 8: exact
  // 8 + floor(log(n / 8) / log(16) * 8): n = 8 -> 8, 16 -> 10, 64 -> 14, 127 -> 15, 500 -> 15
  EXPECT_EQ(relativeBucket(0, 8, true, 32, 128), 8);
  EXPECT_EQ(relativeBucket(0, 16, true, 32, 128), 10);
  EXPECT_EQ(relativeBucket(0, 64, true, 32, 128), 14);
  EXPECT_EQ(relativeBucket(0, 500, true, 32, 128), 15);
  EXPECT_EQ(relativeBucket(500, 0, true, 32, 128), 31);
  // Causal: keys after the query share bucket 0; 16 + floor(log(n / 16) / log(8) * 16).
  EXPECT_EQ(relativeBucket(9, 5, false, 32, 128), 0);
  EXPECT_EQ(relativeBucket(0, 15, false, 32, 128), 15);
  EXPECT_EQ(relativeBucket(0, 32, false, 32, 128), 21);
  EXPECT_EQ(relativeBucket(0, 1000, false, 32, 128), 31);
}
// A max distance at or below the exact buckets (num_buckets / 2 for the decoder's causal ones)
// leaves the log-spaced range empty or reversed: the bucket is still inside the table (the last
// one), never a division by zero or a negative index.
TEST(Seq2Seq, T5RelativeBucketsStayInsideTheTableForAnyMaxDistance) {
  for (int md : {1, 4, 8, 15, 16}) {
    for (int n : {0, 15, 16, 17, 100, 1000, 100000}) {
      for (bool bidi : {true, false}) {
        const int b = relativeBucket(0, n, bidi, 32, md);
        EXPECT_GE(b, 0) << "max distance " << md << ", n " << n;
        EXPECT_LT(b, 32) << "max distance " << md << ", n " << n;
        const int after = relativeBucket(n, 0, bidi, 32, md);
        EXPECT_GE(after, 0) << "max distance " << md << ", n " << n;
        EXPECT_LT(after, 32) << "max distance " << md << ", n " << n;
      }
    }
  }
}

// The loader refuses such a config in one line naming the key (the test cases have 8 buckets:
// 4 exact causal ones).
TEST(Seq2Seq, T5MaxDistanceAtOrBelowTheExactBucketsIsRefused) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const fs::path folder = g.find("t5_v10")["folder"].get<std::string>();
  TempDir tmp;
  for (int md : {4, 3, 1}) {
    const fs::path d = editedCopy(folder, tmp.path / ("md" + std::to_string(md)),
                                  [&](nlohmann::json& j) {
                                    j["relative_attention_max_distance"] = md;
                                  });
    const CliRun r = runBinary({"model", "--model", d.string(), "--ids", "5,6,7,8,9,10,11,12,1",
                                "--target-ids", "0,3,4,5,6,7,8"},
                               tmp.path);
    expectOneLineRefusal(r, d / "config.json",
                         "relative_attention_max_distance " + std::to_string(md) + " must exceed 4");
  }
}

// pad_token_id and decoder_start_token_id: one rule for T5, BART and Marian. Absent takes the
// family's default; a value that is not a token id of the vocabulary is refused naming the key
// and vocab_size (T5 used to fall back to 0 in silence).
TEST(Seq2Seq, TokenIdsOutsideTheVocabularyAreRefusedNamingTheKey) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  TempDir tmp;
  for (const char* name : {"t5_v10", "bart_b", "marian"}) {
    const nlohmann::json& c = g.find(name);
    ASSERT_FALSE(c.is_null()) << name;
    const fs::path folder = c["folder"].get<std::string>();
    nlohmann::json cfg;
    {
      std::ifstream in(folder / "config.json");
      cfg = nlohmann::json::parse(in);
    }
    const long long vocab = cfg["vocab_size"].get<long long>();
    const std::string vs = "(vocab_size " + std::to_string(vocab) + ")";
    int n = 0;
    for (const char* key : {"pad_token_id", "decoder_start_token_id"}) {
      for (const nlohmann::json& bad :
           {nlohmann::json(vocab), nlohmann::json(-1), nlohmann::json(2147483647LL),
            nlohmann::json("0")}) {
        SCOPED_TRACE(std::string(name) + " " + key + " " + bad.dump());
        const fs::path d = editedCopy(folder, tmp.path / (std::string(name) + std::to_string(n++)),
                                      [&](nlohmann::json& j) { j[key] = bad; });
        const CliRun r = runBinary({"model", "--model", d.string(), "--ids", idList(ids(c, "source")),
                                    "--target-ids", idList(ids(c, "target"))},
                                   tmp.path);
        expectOneLineRefusal(r, d / "config.json",
                             std::string(key) + " " + bad.dump() + " is not a token id " + vs);
      }
    }
  }
}

namespace {

// The position-bias view's numbers: `attnviz model --position-bias/--decoder-position-bias` on
// both T5 cases equal the reference's table at the bucket of j - i ([H, T, T], the encoder's
// buckets bidirectional over the 39-token source, the decoder's causal), and Model's buckets over
// distances to three times the max distance equal the reference's t5_bucket.
void checkPositionBias(const std::string& name) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok) << "seq2seq_reference.py failed";
  const nlohmann::json& c = g.find(name);
  ASSERT_FALSE(c.is_null()) << name;
  TempDir out;
  const fs::path e = out.path / "eb.npy", d = out.path / "db.npy";
  const CliRun run = runBinary({"model", "--model", c["folder"].get<std::string>(), "--ids",
                                idList(ids(c, "source")), "--target-ids", idList(ids(c, "target")),
                                "--position-bias", e.string(), "--decoder-position-bias",
                                d.string()},
                               out.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  for (const auto& [file, what] : {std::pair{e, "enc_bias"}, std::pair{d, "dec_bias"}}) {
    const NpyArray got = readNpy(file.string());
    const NpyArray want = readNpy(g.path(name + "_" + what + ".npy").string());
    EXPECT_EQ(got.shape, want.shape) << what;
    expectClose(got.data, want, 1e-6, 0, name + " " + what);
  }
  const std::unique_ptr<Model> m = Model::open(c["folder"].get<std::string>());
  const nlohmann::json& b = c["buckets"];
  const std::vector<int> dist = b["distances"].get<std::vector<int>>();
  const std::vector<int> bidi = b["bidirectional"].get<std::vector<int>>();
  const std::vector<int> causal = b["causal"].get<std::vector<int>>();
  ASSERT_EQ(dist.size(), bidi.size());
  const int i = 1000;  // the query's position; the key's is i + distance
  for (std::size_t n = 0; n < dist.size(); ++n) {
    EXPECT_EQ(m->positionBucket(1, i, i + dist[n]), bidi[n]) << "encoder, j - i = " << dist[n];
    EXPECT_EQ(m->positionBucket(0, i, i + dist[n]), causal[n]) << "decoder, j - i = " << dist[n];
  }
  // A bucket's value is the bias matrix's at a cell of that bucket.
  const Tensor3 enc = m->positionBias(1, 5, 5);
  for (int h = 0; h < enc.heads; ++h)
    EXPECT_EQ(enc.at(h, 4, 0), m->bucketBias(1, m->positionBucket(1, 4, 0), h));
}

}  // namespace

TEST(Seq2Seq, T5PositionBiasIsTheTableAtEachCellsBucket) { checkPositionBias("t5_v10"); }
TEST(Seq2Seq, T5v11PositionBiasIsTheTableAtEachCellsBucket) { checkPositionBias("t5_v11"); }

// Models without a relative bias: the options are refused in one line, nothing written.
TEST(Seq2Seq, PositionBiasOfAModelWithoutOneIsAUsageError) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bart_a");
  TempDir out;
  const fs::path e = out.path / "eb.npy";
  const CliRun run = runBinary({"model", "--model", c["folder"].get<std::string>(), "--ids",
                                idList(ids(c, "source")), "--target-ids", idList(ids(c, "target")),
                                "--position-bias", e.string()},
                               out.path);
  EXPECT_EQ(run.exitCode, 2) << run.err;
  EXPECT_NE(run.err.find("--position-bias: bart has no relative position bias"), std::string::npos)
      << run.err;
  EXPECT_FALSE(fs::exists(e));
  const std::unique_ptr<Model> m = Model::open(c["folder"].get<std::string>());
  EXPECT_TRUE(m->positionBias(1, 3, 3).empty());
  EXPECT_EQ(m->positionBucket(1, 0, 2), -1);
}

// Marian's two SentencePiece models over one vocab.json: the source and the target text through
// the model equal the ids python3-sentencepiece gives.
// T5's sentinels (<extra_id_0> .. <extra_id_99>, its span-corruption masks) follow the
// SentencePiece pieces in reverse: <extra_id_k> is pieces + 99 - k (transformers' T5Tokenizer),
// cut out of the text before the pieces are encoded. The ids of the parts are
// python3-sentencepiece's on the shipped model's spiece.model (1550 pieces, </s> = 1):
// 'i will ' [14, 68], ' him ' [35], ' the end' [6, 714]. Without room in vocab_size (the shipped
// model's own 1550) there are none.
TEST(Seq2Seq, T5SentinelsFollowThePiecesInReverse) {
  const std::string spiece =
      std::string(ATTNVIZ_SOURCE_DIR) + "/assets/models/kjv-t5-align/spiece.model";
  const auto t = loadT5SentencePieceTokenizer(spiece, 1650);
  EXPECT_EQ(t->size(), 1650);
  EXPECT_EQ(t->encode("i will <extra_id_0> him <extra_id_99> the end", true),
            (std::vector<int>{14, 68, 1649, 35, 1550, 6, 714, 1}));
  EXPECT_EQ(t->pieceBytes(1649), "<extra_id_0>");
  EXPECT_EQ(t->pieceBytes(1600), "<extra_id_49>");
  EXPECT_TRUE(t->isSpecial(1550));
  EXPECT_FALSE(t->isSpecial(14));
  const auto none = loadT5SentencePieceTokenizer(spiece, 1550);
  EXPECT_EQ(none->size(), 1550);
  for (int id : none->encode("i will <extra_id_0> him", true)) EXPECT_LT(id, 1550);
}

// A GGUF t5 file the fuzzer made (tests/fuzz/corpus/model/t5_empty_piece_crash.gguf, kept as a
// seed): its vocabulary rebuilt as a SentencePiece model makes libsentencepiece's trie builder
// throw ("zero-length key"), which escaped the loader and terminated the process. It is a bad
// file, said in one line naming it.
TEST(Seq2Seq, ASentencePieceModelLibsentencepieceThrowsOnIsAnInputError) {
  const std::string path = std::string(ATTNVIZ_SOURCE_DIR) +
                           "/tests/fuzz/corpus/model/t5_empty_piece_crash.gguf";
  try {
    Model::open(path);
    ADD_FAILURE() << "the fuzzed file opened";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a usable SentencePiece model"), std::string::npos)
        << e.what();
  }
}

TEST(Seq2Seq, MarianTextsThroughBothSentencePieceModels) { checkCase("marian", true); }

TEST(Seq2Seq, MarianTokenizeMatchesSentencePiece) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("marian");
  TempDir out;
  const std::string folder = c["folder"].get<std::string>();
  const CliRun src = runBinary(
      {"tokenize", "--model", folder, "--text", c["source_text"].get<std::string>()}, out.path);
  ASSERT_EQ(src.exitCode, 0) << src.err;
  EXPECT_EQ(src.out, idList(ids(c, "source"), " ") + "\n");
  const CliRun tgt = runBinary({"tokenize", "--model", folder, "--text",
                                c["target_text"].get<std::string>(), "--target"},
                               out.path);
  ASSERT_EQ(tgt.exitCode, 0) << tgt.err;
  EXPECT_EQ(tgt.out, idList(ids(c, "target_ids"), " ") + "\n");
}

// The sites of an encoder-decoder: stack 1 (the encoder) first, then each decoder layer's self
// and cross sites, named for the grid; the pass holds each, with the cross weights T_tgt x T_src.
TEST(Seq2Seq, EverySiteIsAddressedByStackLayerAndSite) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bart_a");
  const auto m = Model::open(c["folder"].get<std::string>());
  const ModelConfig& cfg = m->config();
  const std::vector<SiteId> sites = cfg.sites();
  ASSERT_EQ(sites.size(), 2u + 2u * 2u);
  EXPECT_EQ(cfg.siteName(sites[0]), "enc L0");
  EXPECT_EQ(cfg.siteName(sites[2]), "L0 self");
  EXPECT_EQ(cfg.siteName(sites[3]), "L0 cross");
  const std::vector<int> src = ids(c, "source"), tgt = ids(c, "target");
  const ForwardResult r = m->forwardSeq2Seq(src, tgt);
  const SiteActivations& cross = r.site({0, 1, 1});
  EXPECT_EQ(cross.kind, SiteKind::Cross);
  EXPECT_EQ(cross.weights.rows, int(tgt.size()));
  EXPECT_EQ(cross.weights.cols, int(src.size()));
  EXPECT_EQ(r.site({1, 1, 0}).weights.cols, int(src.size()));
  EXPECT_THROW(r.site({1, 2, 0}), InputError);
  // A decoder given one text is refused, naming what it needs.
  EXPECT_THROW(m->forward(src), InputError);
}

// Interventions by site: ablating a cross head changes the logits exactly as a re-run does, and
// an intervention in the encoder reaches the decoder (the encoder runs again).
TEST(Seq2Seq, InterventionsAtCrossAndEncoderSitesReachTheLogits) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bart_a");
  const auto m = Model::open(c["folder"].get<std::string>());
  const ModelConfig& cfg = m->config();
  const std::vector<int> src = ids(c, "source"), tgt = ids(c, "target");
  const ForwardResult clean = m->forwardSeq2Seq(src, tgt);
  for (const SiteId site : {SiteId{0, 1, 1}, SiteId{1, 0, 0}}) {
    Interventions iv;
    iv.at(site, cfg).ablatedHeads.push_back(2);
    const ForwardResult full = m->forwardSeq2Seq(src, tgt, iv);
    EXPECT_GT((full.logits - clean.logits).cwiseAbs().maxCoeff(), 1e-3) << cfg.siteName(site);
    // The ablated head's output is zero at that site, and only there.
    EXPECT_EQ(full.site(site).headOut.mat(2).cwiseAbs().maxCoeff(), 0.0f);
    ForwardResult rerun = clean;
    m->rerunFrom(rerun, site.stack == 1 ? 0 : site.layer, iv);
    EXPECT_LT((rerun.logits - full.logits).cwiseAbs().maxCoeff(), 1e-6) << cfg.siteName(site);
    EXPECT_LT((rerun.site({0, 0, 1}).weights.mat(0) - full.site({0, 0, 1}).weights.mat(0))
                  .cwiseAbs()
                  .maxCoeff(),
              1e-6);
  }
  Interventions bad;
  EXPECT_THROW(bad.at(SiteId{1, 0, 1}, cfg), InputError);  // encoder layers have one site
}

// Attribution rows are sites: an ablation sweep of an encoder-decoder has one row per site, and
// each entry equals the log-probability change of that head's own ablated pass.
TEST(Seq2Seq, AblationSweepHasARowPerSite) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bart_b");
  const auto m = Model::open(c["folder"].get<std::string>());
  const ModelConfig& cfg = m->config();
  const std::vector<int> src = ids(c, "source"), tgt = ids(c, "target");
  const ForwardResult clean = m->forwardSeq2Seq(src, tgt, {}, Capture::attribution());
  const AblationSweep sweep = ablationSweep(*m, clean, AblationKind::Zero);
  ASSERT_EQ(sweep.delta.rows, int(cfg.sites().size()));
  ASSERT_EQ(sweep.delta.sites, cfg.sites());
  const int T = int(tgt.size()), V = cfg.vocabSize;
  for (int row = 0; row < sweep.delta.rows; ++row) {
    for (int h = 0; h < cfg.nHead; ++h) {
      Interventions iv;
      iv.at(sweep.delta.sites[std::size_t(row)], cfg).ablatedHeads.push_back(h);
      const ForwardResult r = m->forwardSeq2Seq(src, tgt, iv);
      const double want = logProbOf(r.logits.row(T - 1).data(), V, sweep.target) - sweep.logProb;
      EXPECT_NEAR(sweep.delta.at(row, h), want, 1e-5) << cfg.siteName(sweep.delta.sites[row]);
    }
  }
}

TEST(Seq2Seq, BadFoldersExitOneNamingTheFile) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bart_b");
  const fs::path folder = c["folder"].get<std::string>();
  TempDir tmp;
  auto copy = [&](const std::string& name) {
    const fs::path d = tmp.path / name;
    fs::create_directories(d);
    for (const auto& f : fs::directory_iterator(folder)) fs::copy(f.path(), d / f.path().filename());
    return d;
  };
  auto run = [&](const fs::path& d, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"model", "--model", d.string(), "--ids", "0,5,6,2",
                                     "--target-ids", "2,0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runBinary(args, tmp.path);
  };
  {  // an encoder layer the config promises and the file lacks
    const fs::path d = copy("deeper");
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(d / "config.json"));
    cfg["encoder_layers"] = 4;
    std::ofstream(d / "config.json") << cfg.dump();
    const CliRun r = run(d);
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_NE(r.err.find("model.encoder.layers.3."), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("model.safetensors"), std::string::npos) << r.err;
  }
  {  // stacks of two shapes
    const fs::path d = copy("shapes");
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(d / "config.json"));
    cfg["encoder_attention_heads"] = 4;
    std::ofstream(d / "config.json") << cfg.dump();
    const CliRun r = run(d);
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
  }
  {  // no target: bad usage, saying what to give
    const CliRun r = runBinary({"model", "--model", folder.string(), "--ids", "0,5,2"}, tmp.path);
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("--target"), std::string::npos) << r.err;
  }
}

// `generate` runs the encoder once and decodes from the start id with both caches (the decoder's
// self K/V and the encoder's cross K/V): greedy ids equal the reference's step-by-step argmax
// over full passes (which never picks the pad token).
TEST(Seq2Seq, GreedyGenerationMatchesTheReference) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  for (const char* name : {"bart_a", "bart_b", "marian", "t5_v10", "t5_v11"}) {
    const nlohmann::json& c = g.find(name);
    std::vector<int> want = ids(c, "greedy");
    want.erase(want.begin());  // the start id is the prompt, not generated
    TempDir out;
    const CliRun run = runBinary({"generate", "--model", c["folder"].get<std::string>(), "--ids",
                                  idList(ids(c, "source")), "-n", std::to_string(want.size()),
                                  "--print-ids"},
                                 out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    std::string line;
    for (int id : want) line += (line.empty() ? "" : " ") + std::to_string(id);
    EXPECT_EQ(run.out, line + "\n") << name;
  }
}

// Each decode step's logits and cross row equal the last row of a full pass over the same ids.
TEST(Seq2Seq, DecodeStepsEqualFullPasses) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bart_a");
  const auto m = Model::open(c["folder"].get<std::string>());
  const std::vector<int> src = ids(c, "source"), all = ids(c, "greedy");
  std::vector<int> tgt = {all[0]};
  KvCache cache = m->cacheFrom(m->forwardSeq2Seq(src, tgt));
  for (std::size_t n = 1; n < all.size(); ++n) {
    const DecodeStep step = m->decodeStep(cache, all[n]);
    tgt.push_back(all[n]);
    const ForwardResult full = m->forwardSeq2Seq(src, tgt);
    const int T = int(tgt.size());
    float err = 0;
    for (int v = 0; v < m->config().vocabSize; ++v)
      err = std::max(err, std::abs(step.logits[std::size_t(v)] - full.logits(T - 1, v)));
    EXPECT_LT(err, 1e-4) << "step " << n;
    const Tensor3& want = full.site({0, 1, 1}).weights;
    const Tensor3& got = step.crossRows[1];
    ASSERT_EQ(got.cols, want.cols);
    for (int h = 0; h < want.heads; ++h)
      for (int j = 0; j < want.cols; ++j)
        EXPECT_NEAR(got.at(h, 0, j), want.at(h, T - 1, j), 1e-5) << "step " << n;
  }
}

// A re-run that throws in the decoder after the encoder ran again leaves the result as it was:
// the encoder's pass too (it is committed with the decoder's layers).
TEST(Seq2Seq, AFailedRerunKeepsTheEncoder) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("bart_a");
  const auto m = Model::open(c["folder"].get<std::string>());
  const ModelConfig& cfg = m->config();
  ForwardResult r = m->forwardSeq2Seq(ids(c, "source"), ids(c, "target"));
  const auto encoder = r.encoder;
  const MatrixRM logits = r.logits;
  Interventions iv;
  iv.at(SiteId{1, 0, 0}, cfg).ablatedHeads.push_back(1);
  LayerIntervention& bad = iv.at(SiteId{0, 1, 0}, cfg);
  bad.mask.customKind = MaskSpec::Custom::Allow;
  bad.mask.custom = Tensor3(1, 2, 2, 1.0f);  // not T x T: the decoder's layer 1 throws
  EXPECT_THROW(m->rerunFrom(r, 0, iv), InputError);
  EXPECT_EQ(r.encoder, encoder);
  EXPECT_EQ(r.logits, logits);
  EXPECT_THROW(m->rerunLogitsAt(r, 0, iv, 1), InputError);
  EXPECT_EQ(r.encoder, encoder);
}

// Masked source positions (--mask-source 2,5): their columns of every cross site are masked in
// the pass and at every decode step. The cross weights (zero in those columns), the logits and
// greedy generation against the float64 reference run with -inf in those columns.
TEST(Seq2Seq, MaskedSourcePositionsMatchTheReferenceInThePassAndInGeneration) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  bool generationChanged = false;
  for (const char* name : {"t5_v10", "t5_v11"}) {
    const nlohmann::json& c = g.find(name);
    const std::string folder = c["folder"].get<std::string>();
    const std::string mask = idList(ids(c, "masked_source"));
    TempDir out;
    const fs::path x = out.path / "x.npy", z = out.path / "z.npy";
    const CliRun run = runBinary({"model", "--model", folder, "--ids", idList(ids(c, "source")),
                                  "--target-ids", idList(ids(c, "target")), "--mask-source", mask,
                                  "--cross-weights", x.string(), "--logits", z.string()},
                                 out.path);
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const NpyArray gx = readNpy(x.string());
    const NpyArray rx = readNpy(g.path(std::string(name) + "_masked_cross.npy").string());
    ASSERT_EQ(gx.shape, rx.shape);
    expectClose(gx.data, rx, 1e-5, 0, std::string(name) + " masked cross weights");
    const long long S = gx.shape[3];
    for (std::size_t k = 0; k < gx.data.size(); ++k) {
      const long long j = static_cast<long long>(k) % S;
      if (j == 2 || j == 5) {
        ASSERT_EQ(gx.data[k], 0.0f) << name << " column " << j;
      }
    }
    const NpyArray gz = readNpy(z.string());
    const NpyArray rz = readNpy(g.path(std::string(name) + "_masked_logits.npy").string());
    expectClose(gz.data, rz, 0, 1e-4, std::string(name) + " masked logits");

    std::vector<int> want = ids(c, "masked_greedy");
    want.erase(want.begin());
    const CliRun gen = runBinary({"generate", "--model", folder, "--ids", idList(ids(c, "source")),
                                  "--mask-source", mask, "-n", std::to_string(want.size()),
                                  "--print-ids"},
                                 out.path);
    ASSERT_EQ(gen.exitCode, 0) << gen.err;
    std::string line;
    for (int id : want) line += (line.empty() ? "" : " ") + std::to_string(id);
    EXPECT_EQ(gen.out, line + "\n") << name;
    std::vector<int> plain = ids(c, "greedy");
    plain.erase(plain.begin());
    generationChanged = generationChanged || want != plain;
  }
  // (t5_v11's greedy ids change under the mask; t5_v10 stops at once either way.)
  EXPECT_TRUE(generationChanged) << "the mask changed no reference generation";
}

// Bad --mask-source values are usage errors in one line; nothing is written.
TEST(Seq2Seq, BadMaskSourceIsAUsageErrorNamingTheOption) {
  const Generated& g = generated();
  ASSERT_TRUE(g.ok);
  const nlohmann::json& c = g.find("t5_v10");
  const std::vector<int> src = ids(c, "source");
  std::string all;
  for (std::size_t p = 0; p < src.size(); ++p) all += (p ? "," : "") + std::to_string(p);
  TempDir out;
  const fs::path x = out.path / "x.npy";
  for (const auto& [value, says] :
       {std::pair<std::string, std::string>{"99", "--mask-source 99: past the source's"},
        {"2,x", "--mask-source: expected source positions"},
        {all, "--mask-source: every source position masked"}}) {
    const CliRun run = runBinary({"model", "--model", c["folder"].get<std::string>(), "--ids",
                                  idList(src), "--target-ids", idList(ids(c, "target")),
                                  "--mask-source", value, "--cross-weights", x.string()},
                                 out.path);
    EXPECT_EQ(run.exitCode, 2) << value << ": " << run.err;
    EXPECT_NE(run.err.find(says), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(x)) << value;
  }
}
