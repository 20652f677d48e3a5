// vocab.json + merges.txt edge cases (the GPT-2 reference test is tests/model/tokenizer_test.cpp),
// the shared label/printable helpers, and which tokenizer a folder gets.
#include "tokenizer_test_util.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/gpt2_bpe.h"

namespace attnviz::testing {
namespace {

// A character-level vocabulary (nanoGPT's kind): no single bytes beyond its characters.
const char* kCharVocab = R"({"a": 0, "b": 1, "\u0120": 2, "\u010a": 3, "ab": 4})";
const char* kCharMerges = "#version: 0.2\na b\n";

TEST(Gpt2Vocab, CharacterLevelVocabLoadsAndRefusesOnlyMissingCharacters) {
  const Gpt2Tokenizer tok = Gpt2Tokenizer::fromText(kCharVocab, kCharMerges, "vocab.json",
                                                    "merges.txt");
  EXPECT_EQ(tok.size(), 5);
  EXPECT_EQ(tok.encode("ab a\n"), (std::vector<int>{4, 2, 0, 3}));
  EXPECT_EQ(tok.encode("ab a\n", false), tok.encode("ab a\n", true));
  try {
    tok.encode("a\xC3\xA9");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("U+00E9"), std::string::npos) << what;
    EXPECT_NE(what.find("vocab.json"), std::string::npos) << what;
  }
}

TEST(Gpt2Vocab, HugeIdsAreRefusedBeforeAllocating) {
  EXPECT_THROW(Gpt2Tokenizer::fromText(R"({"a": 2147483646})", "", "vocab.json", "merges.txt"),
               InputError);
  EXPECT_THROW(Gpt2Tokenizer::fromText(R"({"a": 0, "b": 5000})", "", "vocab.json", "merges.txt"),
               InputError);
  // A few holes are fine.
  const Gpt2Tokenizer t = Gpt2Tokenizer::fromText(R"({"a": 0, "b": 7})", "", "v", "m");
  EXPECT_EQ(t.size(), 8);
  EXPECT_TRUE(t.contains(7));
  EXPECT_FALSE(t.contains(3));
  EXPECT_THROW(t.pieceBytes(3), InputError);
}

// vocab.json is read as a stream of events, not a document: every shape a document would refuse
// is refused with the same message, and a key given twice keeps its last id as a JSON object does.
TEST(Gpt2Vocab, MalformedVocabsAreNamedAndRepeatedKeysKeepTheLastId) {
  auto refusal = [](const std::string& vocab) {
    try {
      (void)Gpt2Tokenizer::fromText(vocab, "", "dir/vocab.json", "merges.txt");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  const std::string notMap = "dir/vocab.json: expected a JSON object mapping tokens to ids";
  EXPECT_EQ(refusal("[1, 2]"), notMap);
  EXPECT_EQ(refusal("{}"), notMap);
  EXPECT_EQ(refusal("7"), notMap);
  EXPECT_EQ(refusal(R"("a")"), notMap);
  for (const char* value : {"1.5", "-1", "\"x\"", "null", "true", "[0]", "{\"b\": 0}", "2147483648",
                            "18446744073709551615"}) {
    EXPECT_EQ(refusal(std::string(R"({"a": 0, "b": )") + value + "}"),
              "dir/vocab.json: token 'b' has an id that is not an integer >= 0")
        << value;
  }
  EXPECT_NE(refusal(R"({"a": 0, "b": )").find("dir/vocab.json: not valid JSON ("),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a": 0} x)").find("dir/vocab.json: not valid JSON ("), std::string::npos);
  EXPECT_EQ(refusal(R"({"a": 0, "b": 0})"), "dir/vocab.json: id 0 is given to two tokens");
  EXPECT_EQ(refusal(R"({"a": 0, "b": 4000})"),
            "dir/vocab.json: token id 4000 is far beyond the 2 tokens of the vocabulary");
  // "a" given twice: its last id stands, and id 0 is free for "b".
  const Gpt2Tokenizer t = Gpt2Tokenizer::fromText(R"({"a": 1, "b": 0, "a": 2})", "", "v", "m");
  EXPECT_EQ(t.size(), 3);
  EXPECT_FALSE(t.contains(1));
  EXPECT_EQ(t.pieceBytes(2), "a");
  EXPECT_EQ(t.pieceBytes(0), "b");
  EXPECT_EQ(t.encode("ab", false), (std::vector<int>{2, 0}));
}

TEST(Gpt2Vocab, ThroughTheInterface) {
  const Gpt2Tokenizer gpt2 = Gpt2Tokenizer::fromText(
      R"({"a": 0, "b": 1, "\u0120": 2, "\u010a": 3, "ab": 4, "<|endoftext|>": 5})", kCharMerges,
      "vocab.json", "merges.txt");
  const Tokenizer& tok = gpt2;
  EXPECT_EQ(tok.encode("ab", true), (std::vector<int>{4}));
  EXPECT_EQ(tok.eos(), 5);
  EXPECT_TRUE(tok.isSpecial(5));
  EXPECT_EQ(tok.label(2), "\u2423");
  EXPECT_EQ(tok.label(3), "\u21B5");
  EXPECT_EQ(tok.printable(3), "\\n");
  EXPECT_EQ(tok.decode({4, 2, 0}), "ab a");
  EXPECT_NE(tok.kind().find("GPT-2"), std::string::npos);
}

TEST(TokenLabels, EscapesAsDocumented) {
  EXPECT_EQ(tokenLabelOf(" x"), "\u2423x");
  EXPECT_EQ(tokenLabelOf("\t"), "\u2192");
  EXPECT_EQ(tokenLabelOf("a\x01" "b\xFF"), "a\\x01b\\xFF");
  EXPECT_EQ(tokenPrintableOf("a\r\n\t\x7F"), "a\\r\\n\\t\\x7F");
  EXPECT_EQ(tokenPrintableOf(" caf\xC3\xA9"), " caf\xC3\xA9");
}

TEST(FolderTokenizer, PicksTheFilesInOrderAndNamesMissingOnes) {
  TempDir tmp;
  try {
    loadFolderTokenizer(tmp.path.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer"), std::string::npos) << e.what();
  }
  spit(tmp.path / "vocab.json", kCharVocab);
  try {
    loadFolderTokenizer(tmp.path.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("merges.txt"), std::string::npos) << e.what();
  }
  spit(tmp.path / "merges.txt", kCharMerges);
  EXPECT_NE(loadFolderTokenizer(tmp.path.string())->kind().find("GPT-2"), std::string::npos);
  // tokenizer.json wins over vocab.json; a broken one is an error naming it (no silent fallback).
  spit(tmp.path / "tokenizer.json", "{}");
  try {
    loadFolderTokenizer(tmp.path.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
  spit(tmp.path / "tokenizer.json",
       R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})");
  EXPECT_EQ(loadFolderTokenizer(tmp.path.string())->kind(), "tokenizer.json: BPE");
  // vocab_size bounds the ids.
  EXPECT_THROW(loadFolderTokenizer(tmp.path.string(), 1), InputError);
}

}  // namespace
}  // namespace attnviz::testing
