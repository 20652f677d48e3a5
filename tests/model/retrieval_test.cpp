// Retrieval heads (`attnviz retrieval`, core/model/retrieval.h): the score's bookkeeping on a case
// worked by hand; the needle prompt's spans on the shipped LLaMA-layout model; every head's score,
// the greedy copies and the answer's log-probability under each mask set against the float64
// torch reference (retrieval_reference.py); the refusals.
#include "model_test_util.h"

#include "attnviz/model/model.h"
#include "attnviz/model/retrieval.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <sstream>

namespace attnviz::testing {
namespace {

fs::path shippedLlama() { return fs::path(ATTNVIZ_SOURCE_DIR) / "assets/models/kjv-sp-llama"; }

// Hebrews 1:1-3, held out of the shipped model's training text.
const char* kFiller =
    "God, who at sundry times and in divers manners spake in time past unto the fathers by the "
    "prophets,\nHath in these last days spoken unto us by his Son, whom he hath appointed heir of "
    "all things, by whom also he made the worlds;\nWho being the brightness of his glory, and the "
    "express image of his person, and upholding all things by the word of his power, when he had "
    "by himself purged our sins, sat down on the right hand of the Majesty on high;\n";
const char* kNeedle = "And the name of the servant was Jehoiada.";
const char* kQuestion = "And the name of the servant was";
const char* kAnswer = "Jehoiada.";

TEST(Retrieval, CountsTheHandComputedCase) {
  // ids:       0  1   2   3   4   5   6   7   8   9
  NeedleCase c;
  c.ids = {1, 10, 11, 12, 13, 20, 21, 11, 12, 30};
  c.needleBegin = 1;
  c.needleEnd = 5;
  c.answerBegin = 2;
  c.answer = {11, 12};
  CopyTrace t;  // one layer, three heads
  t.generated = {11, 12};
  t.top = {{2, 7, 3},   // step 0 makes 11: head 0 looks at 11 in the needle (hit); head 1 at an
                        // 11 outside it; head 2 at the needle's 12, not the token made
           {3, 3, 2}};  // step 1 makes 12: heads 0 and 1 look at the needle's 12 (hits)
  std::vector<int> hits(3, 0);
  countRetrievals(c, t, hits);
  EXPECT_EQ(hits, (std::vector<int>{2, 1, 0}));

  // A token made twice counts once (the score is over distinct answer tokens), and a token that
  // is not the answer's counts for nothing even when the head looks at it in the needle.
  t.generated = {11, 11};
  t.top = {{2, 2, 4}, {2, 1, 4}};
  c.answer = {11, 13};
  hits.assign(3, 0);
  countRetrievals(c, t, hits);
  EXPECT_EQ(hits, (std::vector<int>{1, 1, 0}));
}

TEST(Retrieval, TheNeedlePromptsSpansHoldTheNeedleAndTheAnswer) {
  const auto m = Model::open(shippedLlama().string());
  for (double depth : {0.0, 0.3, 0.6, 1.0}) {
    SCOPED_TRACE(depth);
    const NeedleCase c = buildNeedleCase(*m, {kFiller, kNeedle, kQuestion, kAnswer, depth});
    EXPECT_EQ(c.ids, m->encode(c.text));
    // The text is the filler with the needle at a sentence start, then the question.
    const std::size_t at = c.text.find(kNeedle);
    ASSERT_NE(at, std::string::npos);
    EXPECT_TRUE(at == 0 || c.text[at - 1] == '\n' || c.text[at - 1] == ' ');
    EXPECT_NEAR(double(at) / double(std::string(kFiller).size()), depth, 0.35);
    EXPECT_EQ(c.text.substr(c.text.size() - std::string(kQuestion).size()), kQuestion);
    // The needle's tokens decode to the needle; the answer's sit inside them.
    const std::vector<int> span(c.ids.begin() + c.needleBegin, c.ids.begin() + c.needleEnd);
    std::string needle = m->tokenizer().decode(span);
    while (!needle.empty() && (needle.front() == ' ' || needle.front() == '\n')) needle.erase(0, 1);
    EXPECT_EQ(needle, kNeedle);
    ASSERT_GE(c.answerBegin, c.needleBegin);
    ASSERT_LE(c.answerBegin + int(c.answer.size()), c.needleEnd);
    EXPECT_EQ(std::vector<int>(c.ids.begin() + c.answerBegin,
                               c.ids.begin() + c.answerBegin + int(c.answer.size())),
              c.answer);
    const std::string answer = m->tokenizer().decode(c.answer);
    EXPECT_NE(answer.find(kAnswer), std::string::npos) << answer;
  }
}

// The copy's prefix pass keeps what the KV cache needs and no Q: every layer's residual stream
// [T, d] and K, V [H_kv, T, d_h], the final stream [T, d] and the last logits row [V], in
// float32 (the copies themselves are held to the reference below).
TEST(Retrieval, TheCopysPrefixPassKeepsKAndVButNoQ) {
  const auto m = Model::open(shippedLlama().string());
  const ModelConfig& c = m->config();
  const NeedleCase nc = buildNeedleCase(*m, {kFiller, kNeedle, kQuestion, kAnswer, 0.5});
  const CopyTrace t = traceCopy(*m, nc);
  EXPECT_EQ(t.generated.size(), nc.answer.size());
  const std::size_t T = nc.ids.size() - 1, d = std::size_t(c.nEmbd), L = std::size_t(c.nLayer);
  const std::size_t kv = std::size_t(c.nKvHead) * std::size_t(c.headSize);
  EXPECT_EQ(t.prefixBytes,
            sizeof(float) * (L * T * d + L * 2 * T * kv + T * d + std::size_t(c.vocabSize)));
}

std::vector<int> idList(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

TEST(Retrieval, ScoresCopiesAndMaskingMatchTheReferenceOnTheShippedLlama) {
  TempDir dir;
  const CliRun run = runBinary(
      {"retrieval", "--model", shippedLlama().string(), "--filler", kFiller, "--needle", kNeedle,
       "--question", kQuestion, "--answer", kAnswer, "--depths", "0,0.5,1", "--mask-k", "2",
       "--random", "2", "--print-ids", "--out", (dir.path / "score.npy").string()},
      dir.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  // The cases and the mask sets as the command printed them.
  nlohmann::json spec;
  spec["cases"] = nlohmann::json::array();
  std::vector<std::string> maskLines;
  std::istringstream in(run.out);
  std::string line;
  nlohmann::json current;
  while (std::getline(in, line)) {
    if (line.rfind("case depth", 0) == 0) {
      const std::size_t at = line.find("needle at ");
      ASSERT_NE(at, std::string::npos) << line;
      const int b = std::atoi(line.c_str() + at + 10);
      const int e = std::atoi(line.c_str() + line.find("..", at) + 2) + 1;
      current = {{"needle", {b, e}}};
    } else if (line.rfind("ids ", 0) == 0) {
      current["ids"] = idList(line.substr(4));
    } else if (line.rfind("answer-ids ", 0) == 0) {
      current["answer"] = idList(line.substr(11));
      spec["cases"].push_back(current);
    } else if (line.rfind("no mask", 0) == 0 || line.find(" masked (") != std::string::npos) {
      maskLines.push_back(line);
    }
  }
  ASSERT_EQ(spec["cases"].size(), 3u) << run.out;
  ASSERT_EQ(maskLines.size(), 4u) << run.out;  // none, top-2, two random draws
  spec["masks"] = nlohmann::json::array();
  std::vector<double> gotLp;
  std::vector<int> gotCorrect;
  for (const std::string& l : maskLines) {
    nlohmann::json heads = nlohmann::json::array();
    const std::size_t open = l.find('(');
    if (open != std::string::npos) {
      std::istringstream hs(l.substr(open + 1, l.find(')') - open - 1));
      std::string h;
      while (hs >> h) heads.push_back(h);
    }
    spec["masks"].push_back(heads);
    const std::size_t tab = l.find('\t');
    gotLp.push_back(std::strtod(l.c_str() + tab + 1, nullptr));
    gotCorrect.push_back(std::atoi(l.c_str() + l.find('\t', tab + 1) + 1));
  }
  {
    std::ofstream f(dir.path / "cases.json");
    f << spec.dump();
  }
  const std::string cmd = ATTNVIZ_PYTHON " " +
                          shellQuote((modelDir() / "retrieval_reference.py").string()) + " " +
                          shellQuote(shippedLlama().string()) + " " +
                          shellQuote((dir.path / "want.json").string()) + " " +
                          shellQuote((dir.path / "cases.json").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto want = nlohmann::json::parse(slurp((dir.path / "want.json").string()));

  // Every head's score, except where the reference's best key is within 1e-4 of the second.
  const NpyArray got = readNpy((dir.path / "score.npy").string());
  ASSERT_EQ(got.shape, (std::vector<long long>{3, 8}));
  int compared = 0;
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 8; ++h) {
      if (double(want["margin"][l][h]) < 1e-4) continue;
      ++compared;
      EXPECT_NEAR(got.data[std::size_t(l * 8 + h)], double(want["score"][l][h]), 1e-6)
          << "head " << l << ":" << h;
    }
  EXPECT_GE(compared, 12);
  // The copies and the answer's log-probability under each mask set.
  for (std::size_t i = 0; i < maskLines.size(); ++i) {
    SCOPED_TRACE(maskLines[i]);
    EXPECT_NEAR(gotLp[i], double(want["logprob"][i]), 1e-4);
    EXPECT_EQ(gotCorrect[i], int(want["correct"][i]));
  }
  // What the shipped model shows (the preset's figures): it copies the needle at every depth,
  // its retrieval heads are layer 2's induction heads, and masking the top two breaks the copy.
  EXPECT_EQ(gotCorrect[0], 3);
  EXPECT_EQ(gotCorrect[1], 0);
  EXPECT_LT(gotLp[1], gotLp[0] - 5.0);
  EXPECT_GT(got.data[2 * 8 + 0], 0.8f);
}

TEST(Retrieval, RefusalsFollowTheContract) {
  TempDir dir;
  const std::string m = shippedLlama().string();
  auto rc = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"retrieval", "--model", m, "--needle", kNeedle, "--question",
                               kQuestion};
    a.insert(a.end(), extra.begin(), extra.end());
    return runBinary(a, dir.path);
  };
  EXPECT_EQ(rc({"--answer", kAnswer}).exitCode, 2);  // no filler
  EXPECT_EQ(rc({"--filler", kFiller, "--answer", kAnswer, "--depths", "1.5"}).exitCode, 2);
  EXPECT_EQ(rc({"--filler", kFiller, "--answer", kAnswer, "--mask-k", "0"}).exitCode, 2);
  const CliRun absent = rc({"--filler", kFiller, "--answer", "Melchizedek",
                            "--out", (dir.path / "s.npy").string()});
  EXPECT_EQ(absent.exitCode, 1) << absent.err;
  EXPECT_NE(absent.err.find("Melchizedek"), std::string::npos) << absent.err;
  EXPECT_FALSE(fs::exists(dir.path / "s.npy"));
  const CliRun missing = rc({"--filler-file", (dir.path / "nope.txt").string(), "--answer", kAnswer});
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.err.find("nope.txt"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace attnviz::testing
