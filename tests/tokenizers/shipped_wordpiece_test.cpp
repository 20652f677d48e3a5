// The shipped BERT's own WordPiece vocabulary (assets/models/kjv-wp-bert, learned by
// tools/train/wp_tokenizer.py): attnviz's tokenizer.json reading against @huggingface/tokenizers
// (shipped_wordpiece_reference.mjs) on wordpiece_corpus.json and held-out verses, each text
// alone and in pairs with their token type ids ([CLS] A [SEP] B [SEP], types 0 then 1).
#include "tokenizer_test_util.h"

#include "run_shell.h"

#include "attnviz/model/tokenizers/tokenizer.h"

#include <nlohmann/json.hpp>

namespace attnviz::testing {
namespace {

using json = nlohmann::json;

TEST(ShippedWordPiece, MatchesHuggingFaceTokenizersAloneAndInPairs) {
  if (!fs::exists(npmModules() / "@huggingface/tokenizers" / "package.json")) {
    if (underCi()) FAIL() << "@huggingface/tokenizers is missing (./dev test installs it)";
    GTEST_SKIP() << "@huggingface/tokenizers is missing: npm install --prefix " ATTNVIZ_NPM_DIR
                    " @huggingface/tokenizers@0.2.0";
  }
  const fs::path model = fs::path(ATTNVIZ_SOURCE_DIR) / "assets" / "models" / "kjv-wp-bert";
  auto texts = json::parse(slurp(testDir() / "wordpiece_corpus.json")).get<std::vector<std::string>>();
  // Held-out verses (Hebrews-Revelation: the model never trained on them).
  for (const char* v :
       {"Now faith is the substance of things hoped for, the evidence of things not seen.",
        "For by it the elders obtained a good report.",
        "Jesus Christ the same yesterday, and to day, and for ever.",
        "He that loveth not knoweth not God; for God is love.",
        "Behold, I stand at the door, and knock: if any man hear my voice, and open the door, I "
        "will come in to him, and will sup with him, and he with me.",
        "The grace of our Lord Jesus Christ be with you all. Amen."})
    texts.push_back(v);
  TempDir tmp;
  spit(tmp.path / "texts.json", json(texts).dump());
  const ShellRun run = runShell(
      "node " + shellQuote((testDir() / "shipped_wordpiece_reference.mjs").string()) + " " +
      shellQuote(npmModules().string()) + " " + shellQuote(model.string()) + " " +
      shellQuote((tmp.path / "texts.json").string()) + " " +
      shellQuote((tmp.path / "out.json").string()));
  ASSERT_EQ(run.rc, 0) << run.out;
  const json ref = json::parse(slurp(tmp.path / "out.json"));
  const auto tok = loadFolderTokenizer(model.string(), 3000);
  ASSERT_EQ(ref["single"].size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(joinIds(tok->encode(texts[i], true)),
              joinIds(ref["single"][i].get<std::vector<int>>()))
        << "entry " << i << ": " << texts[i];
  for (std::size_t i = 0; i + 1 < texts.size(); ++i) {
    const PairEncoding got = tok->encodePair(texts[i], texts[i + 1], true);
    EXPECT_EQ(joinIds(got.ids), joinIds(ref["pair"][i]["ids"].get<std::vector<int>>()))
        << "pair " << i;
    EXPECT_EQ(joinIds(got.typeIds), joinIds(ref["pair"][i]["types"].get<std::vector<int>>()))
        << "pair " << i;
  }
}

}  // namespace
}  // namespace attnviz::testing
