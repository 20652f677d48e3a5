// GGUF model files through the real binary: llama, qwen2 and gpt2 checkpoints converted by
// tools/gguf/hf_to_gguf.py to F32, F16, Q8_0, Q4_0, Q4_K and Q6_K (make_gguf_model_cases.py, run
// here into a temp folder) against the float64 torch reference on the values each file holds;
// their tokenizers against the HF folders'; llama.cpp's stories260K against its HF conversion;
// bad GGUF files refused with one line; a vocab-only GGUF serves tokenize and not model.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

namespace attnviz::testing {
namespace {

constexpr double kWeightsAbs = 1e-5;
constexpr double kLogitsRel = 1e-4;

// Runs make_gguf_model_cases.py into `out` (with `flags`) and returns its cases.json.
nlohmann::json makeCases(const fs::path& out, const std::string& flags = "") {
  const std::string cmd = "/usr/bin/python3 " +
                          shellQuote((modelDir() / "make_gguf_model_cases.py").string()) + " " +
                          shellQuote(out.string()) + (flags.empty() ? "" : " " + flags) +
                          " >/dev/null";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  if (rc != 0) return nullptr;
  return nlohmann::json::parse(slurp((out / "cases.json").string()));
}

std::string joinIds(const std::vector<int>& ids, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

CliRun tokenize(const fs::path& model, const std::string& text, const fs::path& tmp,
                bool noSpecial = false) {
  std::vector<std::string> args{"tokenize", "--model", model.string(), "--text", text};
  if (noSpecial) args.push_back("--no-special");
  return runBinary(args, tmp);
}

// Exit 1 and one line on stderr that names `file` and contains `problem`; nothing on stdout.
void expectRefused(const CliRun& r, const std::string& file, const std::string& problem) {
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << "want \"" << problem << "\" in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

fs::path stories260K() { return sharedTestdata() / "stories260K" / "stories260K.gguf"; }

// FAIL under CI (which must have ../shared/testdata), skip elsewhere.
#define REQUIRE_SHARED_FILE(path)                                                        \
  do {                                                                                   \
    if (!fs::exists(path)) {                                                             \
      const char* ci = std::getenv("CI");                                                \
      if (ci && std::string(ci) == "true") FAIL() << (path) << " is missing (CI must have " \
                                                  "../shared/testdata)";                 \
      GTEST_SKIP() << (path) << " is missing";                                           \
    }                                                                                    \
  } while (0)

// Every file of every type: `attnviz model --weights --logits` equals the reference on the
// file's dequantized values; Model::open names the type; `attnviz tokenize` on the GGUF equals
// `attnviz tokenize` on the HF folder it came from, and the ids the script's tokenizer made.
TEST(GgufModelFiles, EveryTypeMatchesTheReferenceOnItsOwnValues) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path);
  ASSERT_FALSE(cases.is_null());
  ASSERT_EQ(cases["models"].size(), 3u);
  int files = 0;
  for (const auto& m : cases["models"]) {
    const std::vector<int> ids = m["ids"].get<std::vector<int>>();
    const std::string text = m["text"].get<std::string>();
    const fs::path hf = tmp.path / m["hf"].get<std::string>();
    const CliRun hfTok = tokenize(hf, text, tmp.path);
    ASSERT_EQ(hfTok.exitCode, 0) << hfTok.err;
    EXPECT_EQ(hfTok.out, joinIds(ids, " ") + "\n") << hf;
    const CliRun hfTokPlain = tokenize(hf, text, tmp.path, true);
    for (const auto& f : m["files"]) {
      const fs::path file = tmp.path / f["file"].get<std::string>();
      const std::string type = f["type"].get<std::string>();
      SCOPED_TRACE(file.filename().string());
      ++files;
      // The forward pass through the CLI.
      const std::string w = (tmp.path / "w.npy").string(), z = (tmp.path / "z.npy").string();
      const CliRun run = runBinary({"model", "--model", file.string(), "--ids", joinIds(ids, ","),
                                    "--weights", w, "--logits", z},
                                   tmp.path);
      ASSERT_EQ(run.exitCode, 0) << run.err;
      const NpyArray weights = readNpy(w), logits = readNpy(z);
      const NpyArray wantW = readNpy((tmp.path / f["weights"].get<std::string>()).string());
      const NpyArray wantZ = readNpy((tmp.path / f["logits"].get<std::string>()).string());
      EXPECT_EQ(weights.shape, wantW.shape);
      EXPECT_EQ(logits.shape, wantZ.shape);
      expectClose(weights.data, wantW, kWeightsAbs, 0, file.filename().string() + " weights");
      expectClose(logits.data, wantZ, 0, kLogitsRel, file.filename().string() + " logits");
      // How the weights are held names the file's type.
      const auto model = Model::open(file.string());
      const std::string desc = model->weightsDescription();
      EXPECT_NE(desc.find(type), std::string::npos) << desc;
      EXPECT_EQ(desc.find("mixed"), std::string::npos) << desc;
      if (type == "F32") {
        EXPECT_EQ(desc, "F32 (mapped)");
      }
      EXPECT_EQ(model->config().family, m["arch"].get<std::string>());
      // The tokenizer from the GGUF's metadata.
      const CliRun tok = tokenize(file, text, tmp.path);
      ASSERT_EQ(tok.exitCode, 0) << tok.err;
      EXPECT_EQ(tok.out, hfTok.out);
      const CliRun tokPlain = tokenize(file, text, tmp.path, true);
      EXPECT_EQ(tokPlain.exitCode, 0) << tokPlain.err;
      EXPECT_EQ(tokPlain.out, hfTokPlain.out);
    }
  }
  EXPECT_EQ(files, 18);
}

// Llama 3.1's rope_scaling "llama3" travels in GGUF as rope_freqs.weight (one divisor per
// frequency, as hf_to_gguf.py and llama.cpp write it): the GGUF of the llama3_bf16_sharded fixture
// computes what its HF folder computes.
TEST(GgufModelFiles, Llama3RopeFreqsAreApplied) {
  const fs::path dir = fixture("llama") / "llama3_bf16_sharded";
  TempDir tmp;
  const fs::path gguf = tmp.path / "llama3.gguf";
  const std::string cmd = "/usr/bin/python3 " +
                          shellQuote((fs::path(ATTNVIZ_SOURCE_DIR) / "tools" / "gguf" /
                                      "hf_to_gguf.py").string()) +
                          " " + shellQuote(dir.string()) + " " + shellQuote(gguf.string()) +
                          " --type F32 >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json cases = nlohmann::json::parse(slurp((dir / "cases.json").string()));
  const std::string w = (tmp.path / "w.npy").string(), z = (tmp.path / "z.npy").string();
  const CliRun run = runBinary({"model", "--model", gguf.string(), "--ids",
                                joinIds(cases["ids"].get<std::vector<int>>(), ","), "--weights",
                                w, "--logits", z},
                               tmp.path);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  // BF16 values stored as F32: the same numbers, so the fixture's reference applies.
  expectClose(readNpy(w).data, readNpy((dir / "plain_weights.npy").string()), kWeightsAbs, 0,
              "llama3 GGUF weights");
  expectClose(readNpy(z).data, readNpy((dir / "plain_logits.npy").string()), 0, kLogitsRel,
              "llama3 GGUF logits");
}

// Broken GGUF model files: exit 1, one line naming the file and the problem, before anything
// runs. The byte-level breaks are made here; the structural ones by the script with gguf_file.py.
TEST(GgufModelFiles, BadFilesExitOneNamingTheFile) {
  TempDir tmp;
  const nlohmann::json cases = makeCases(tmp.path, "--bad-only");
  ASSERT_FALSE(cases.is_null());
  const fs::path good = tmp.path / "llama_F32.gguf";
  auto run = [&](const fs::path& file) {
    return runBinary({"model", "--model", file.string(), "--ids", "1,2,3"}, tmp.path);
  };
  {
    const CliRun ok = run(good);
    ASSERT_EQ(ok.exitCode, 0) << ok.err;
  }
  const std::string bytes = slurp(good.string());
  auto variant = [&](const std::string& name, const std::string& data) {
    const fs::path p = tmp.path / name;
    std::ofstream(p, std::ios::binary) << data;
    return p;
  };
  {
    std::string b = bytes;
    b.replace(0, 4, "GGUX");
    const fs::path p = variant("bad_magic.gguf", b);
    expectRefused(run(p), p.string(), "GGUF");
  }
  {
    std::string b = bytes;
    const std::uint32_t v = 7;
    b.replace(4, 4, reinterpret_cast<const char*>(&v), 4);
    const fs::path p = variant("bad_version.gguf", b);
    expectRefused(run(p), p.string(), "version 7");
  }
  {
    // Cut inside the metadata (the tokenizer's token array starts well before byte 2000).
    const fs::path p = variant("truncated_metadata.gguf", bytes.substr(0, 2000));
    expectRefused(run(p), p.string(), "tokenizer.ggml.tokens");
  }
  ASSERT_EQ(cases["bad"].size(), 5u);
  for (const auto& c : cases["bad"]) {
    const fs::path p = tmp.path / c["file"].get<std::string>();
    SCOPED_TRACE(c["name"].get<std::string>());
    expectRefused(run(p), p.string(), c["expect"].get<std::string>());
  }
}

// llama.cpp's stories260K (a real trained model, Meta's interleaved RoPE pairs): its per-layer
// attention equals that of its HF conversion (q/k rows permuted to rotate-half), and greedy
// decoding from BOS starts its known story.
TEST(GgufStories260K, AttentionEqualsItsHfConversion) {
  REQUIRE_SHARED_FILE(stories260K());
  TempDir tmp;
  const fs::path folder = tmp.path / "stories260K";
  const std::string cmd = "/usr/bin/python3 " +
                          shellQuote((modelDir() / "stories260k_to_hf.py").string()) + " " +
                          shellQuote(stories260K().string()) + " " + shellQuote(folder.string()) +
                          " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string ids = "1,403,407,261,378,432,383,286,261,376,298,315,421";
  const std::string wg = (tmp.path / "wg.npy").string(), wh = (tmp.path / "wh.npy").string(),
                    zg = (tmp.path / "zg.npy").string(), zh = (tmp.path / "zh.npy").string();
  const CliRun g = runBinary({"model", "--model", stories260K().string(), "--ids", ids,
                              "--weights", wg, "--logits", zg},
                             tmp.path);
  ASSERT_EQ(g.exitCode, 0) << g.err;
  const CliRun h = runBinary(
      {"model", "--model", folder.string(), "--ids", ids, "--weights", wh, "--logits", zh},
      tmp.path);
  ASSERT_EQ(h.exitCode, 0) << h.err;
  const NpyArray a = readNpy(wg), b = readNpy(wh);
  EXPECT_EQ(a.shape, (std::vector<long long>{5, 8, 13, 13}));
  EXPECT_EQ(a.shape, b.shape);
  expectClose(a.data, b, kWeightsAbs, 0, "stories260K GGUF vs HF weights");
  expectClose(readNpy(zg).data, readNpy(zh), 0, kLogitsRel, "stories260K GGUF vs HF logits");
  // Same tokenizer both ways.
  EXPECT_EQ(tokenize(stories260K(), "Once upon a time", tmp.path).out, "1 403 407 261 378\n");
  EXPECT_EQ(tokenize(folder, "Once upon a time", tmp.path).out, "1 403 407 261 378\n");
}

TEST(GgufStories260K, TopOneFollowsTheStory) {
  REQUIRE_SHARED_FILE(stories260K());
  TempDir tmp;
  auto top1 = [&](const std::string& ids) {
    const CliRun run = runBinary(
        {"model", "--model", stories260K().string(), "--ids", ids, "--top-k", "1"}, tmp.path);
    EXPECT_EQ(run.exitCode, 0) << run.err;
    EXPECT_EQ(lineCount(run.out), 1) << run.out;
    int id = -1;
    EXPECT_EQ(std::sscanf(run.out.c_str(), "%d", &id), 1) << run.out;
    return id;
  };
  EXPECT_EQ(top1("1"), 403);
  // Further on, where RoPE matters: " Once upon a time" -> ",".
  EXPECT_EQ(top1("1,403,407,261,378"), 432);
  EXPECT_EQ(Model::open(stories260K().string())->weightsDescription(), "F32 (mapped)");
}

// A vocab-only GGUF (no tensors): `tokenize` works (llama.cpp's first test string, as its .out
// file says, without BOS under --no-special and with BOS 1 otherwise); `model` refuses it.
TEST(GgufVocabOnly, ServesTokenizeAndIsRefusedByModel) {
  const fs::path vocab = sharedTestdata() / "llama.cpp-vocab" / "ggml-vocab-llama-spm.gguf";
  REQUIRE_SHARED_FILE(vocab);
  TempDir tmp;
  // String 11 of the .inp file, "Hello world": 15043 3186 in the .out file.
  const CliRun plain = tokenize(vocab, "Hello world", tmp.path, true);
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  EXPECT_EQ(plain.out, "15043 3186\n");
  EXPECT_EQ(tokenize(vocab, "Hello world", tmp.path).out, "1 15043 3186\n");
  const CliRun model = runBinary({"model", "--model", vocab.string(), "--ids", "1,2"}, tmp.path);
  // Not just "missing tensor ...": the message says what the file is and what it serves.
  expectRefused(model, vocab.string(), "vocab-only");
}

}  // namespace
}  // namespace attnviz::testing
