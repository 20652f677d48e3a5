// Bad checkpoints and bad input: exit 1 (2 for bad usage) and one line on stderr naming the file
// and the problem; never a crash.
#include "model_test_util.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

namespace attnviz::testing {
namespace {

// A copy of a fixture model in a temp folder, for breaking.
struct BrokenModel {
  TempDir tmp;
  fs::path dir;
  BrokenModel() {
    dir = tmp.path / "model";
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
      fs::copy(fixture("f32_prefix_tied_gelu_new") / f, dir / f);
  }
  fs::path file(const char* f) const { return dir / f; }

  nlohmann::json config() const {
    return nlohmann::json::parse(slurp(file("config.json").string()));
  }
  void setConfig(const nlohmann::json& j) const { std::ofstream(file("config.json")) << j.dump(); }

  // The safetensors header as JSON, and the data section after it.
  nlohmann::json header() const {
    const std::string b = slurp(file("model.safetensors").string());
    std::uint64_t n = 0;
    std::memcpy(&n, b.data(), 8);
    return nlohmann::json::parse(b.substr(8, n));
  }
  void setHeader(const nlohmann::json& h) const {
    const std::string b = slurp(file("model.safetensors").string());
    std::uint64_t n = 0;
    std::memcpy(&n, b.data(), 8);
    std::string text = h.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const std::uint64_t m = text.size();
    std::string out(reinterpret_cast<const char*>(&m), 8);
    out += text + b.substr(8 + n);
    std::ofstream(file("model.safetensors"), std::ios::binary) << out;
  }

  CliRun run(std::vector<std::string> extra = {"--ids", "1,2,3"}) const {
    std::vector<std::string> args{"model", "--model", dir.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return runBinary(args, tmp.path);
  }
};

// Exit 1 and one line that names `file` and contains `problem`.
void expectRefused(const CliRun& r, const std::string& file, const std::string& problem) {
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(lineCount(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(ModelErrors, MissingFile) {
  BrokenModel m;
  fs::remove(m.file("merges.txt"));
  expectRefused(m.run(), "merges.txt", "missing");
}

TEST(ModelErrors, TruncatedSafetensors) {
  BrokenModel m;
  fs::resize_file(m.file("model.safetensors"), fs::file_size(m.file("model.safetensors")) / 2);
  expectRefused(m.run(), "model.safetensors", "");
}

TEST(ModelErrors, HeaderLengthBeyondTheFile) {
  BrokenModel m;
  std::string b = slurp(m.file("model.safetensors").string());
  const std::uint64_t huge = b.size() * 4;
  std::memcpy(b.data(), &huge, 8);
  std::ofstream(m.file("model.safetensors"), std::ios::binary) << b;
  expectRefused(m.run(), "model.safetensors", "header");
}

TEST(ModelErrors, OffsetsOutOfRange) {
  BrokenModel m;
  auto h = m.header();
  auto& t = h["transformer.ln_f.bias"];
  const std::size_t len =
      t["data_offsets"][1].get<std::size_t>() - t["data_offsets"][0].get<std::size_t>();
  t["data_offsets"] = {1u << 30, (1u << 30) + len};
  m.setHeader(h);
  expectRefused(m.run(), "model.safetensors", "ln_f.bias");
}

TEST(ModelErrors, MissingTensor) {
  BrokenModel m;
  auto h = m.header();
  h["transformer.h.1.mlp.c_fc.wheight"] = h["transformer.h.1.mlp.c_fc.weight"];
  h.erase("transformer.h.1.mlp.c_fc.weight");
  m.setHeader(h);
  expectRefused(m.run(), "model.safetensors", "missing tensor 'h.1.mlp.c_fc.weight'");
}

TEST(ModelErrors, WrongShape) {
  BrokenModel m;
  auto h = m.header();
  h["transformer.h.0.attn.c_attn.weight"]["shape"] = {48, 16};  // same bytes, transposed
  m.setHeader(h);
  expectRefused(m.run(), "model.safetensors", "h.0.attn.c_attn.weight' has shape [48, 16]");
}

TEST(ModelErrors, UnknownDtype) {
  BrokenModel m;
  auto h = m.header();
  h["transformer.wte.weight"]["dtype"] = "F4X";
  m.setHeader(h);
  expectRefused(m.run(), "model.safetensors", "F4X");
}

TEST(ModelErrors, UnsupportedDtype) {
  BrokenModel m;
  auto h = m.header();
  h["transformer.ln_f.weight"]["dtype"] = "I32";
  m.setHeader(h);
  expectRefused(m.run(), "model.safetensors", "I32");
}

TEST(ModelErrors, EmbeddingNotDivisibleByHeads) {
  BrokenModel m;
  auto c = m.config();
  c["n_head"] = 3;
  m.setConfig(c);
  expectRefused(m.run(), "config.json", "n_embd 16 is not divisible by n_head 3");
}

TEST(ModelErrors, VocabLargerThanVocabSize) {
  BrokenModel m;
  auto c = m.config();
  c["vocab_size"] = 270;
  m.setConfig(c);
  expectRefused(m.run(), "vocab.json", "vocab_size 270");
}

TEST(ModelErrors, MergesFromAnotherVocab) {
  BrokenModel m;
  std::ofstream(m.file("merges.txt"), std::ios::app) << "q z\n";
  expectRefused(m.run(), "merges.txt", "line 26");
}

TEST(ModelErrors, TextLongerThanPositions) {
  BrokenModel m;
  std::string text;
  for (int i = 0; i < 40; ++i) text += " the cat";
  expectRefused(m.run({"--text", text}), "config.json", "n_positions");
}

TEST(ModelErrors, PytorchBinOnlyIsRefusedWithHowToConvert) {
  BrokenModel m;
  fs::rename(m.file("model.safetensors"), m.file("pytorch_model.bin"));
  expectRefused(m.run(), "pytorch_model.bin", "safe_serialization=True");
}

TEST(ModelErrors, BadUsageExitsTwo) {
  BrokenModel m;
  EXPECT_EQ(m.run({"--ids", "1,x"}).exitCode, 2);
  EXPECT_EQ(m.run({"--ids", "1", "--ablate", "9:0"}).exitCode, 2);
  EXPECT_EQ(m.run({"--ids", "1", "--layer", "2", "--weights", "w.npy"}).exitCode, 2);
  EXPECT_EQ(m.run({}).exitCode, 2);
  const CliRun bad = m.run({"--ids", "1,9999"});
  expectRefused(bad, "", "token id 9999 is outside the vocab");
}

TEST(ModelErrors, NoHalfWrittenOutput) {
  BrokenModel m;
  fs::resize_file(m.file("model.safetensors"), 100);
  const fs::path out = m.tmp.path / "w.npy";
  EXPECT_EQ(m.run({"--ids", "1,2", "--weights", out.string()}).exitCode, 1);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace attnviz::testing

namespace attnviz::testing {
namespace {

// A copy of a LLaMA-family fixture folder, for breaking.
struct BrokenLlama {
  TempDir tmp;
  fs::path dir;
  explicit BrokenLlama(const char* name = "llama_gqa") {
    dir = tmp.path / "model";
    fs::copy(fixture("llama") / name, dir, fs::copy_options::recursive);
  }
  fs::path file(const char* f) const { return dir / f; }
  nlohmann::json config() const {
    return nlohmann::json::parse(slurp(file("config.json").string()));
  }
  void setConfig(const nlohmann::json& j) const { std::ofstream(file("config.json")) << j.dump(); }
  CliRun run(std::vector<std::string> extra = {"--ids", "1,2,3"}) const {
    std::vector<std::string> args{"model", "--model", dir.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return runBinary(args, tmp.path);
  }
};

TEST(LlamaErrors, UnknownModelType) {
  BrokenLlama m;
  auto c = m.config();
  c["model_type"] = "mamba";
  m.setConfig(c);
  // One line naming the type and every model_type that opens.
  expectRefused(m.run(), "config.json",
                "model_type \"mamba\" is not supported (gpt2, llama, mistral, qwen2, qwen3, "
                "gemma2, gemma3_text, gemma3, phi3, olmo2, bert, roberta, distilbert, modernbert, "
                "t5, bart, marian)");
}

TEST(LlamaErrors, HeadsNotDivisibleByKvHeads) {
  BrokenLlama m;
  auto c = m.config();
  c["num_key_value_heads"] = 3;
  m.setConfig(c);
  expectRefused(m.run(), "config.json", "not divisible by num_key_value_heads 3");
}

TEST(LlamaErrors, HeadSizeThatDoesNotMatchTheTensors) {
  BrokenLlama m;
  auto c = m.config();
  c["head_dim"] = 16;  // the tensors are 8 x 8 = 64 wide
  m.setConfig(c);
  expectRefused(m.run(), "model.safetensors", "q_proj.weight' has shape");
}

TEST(LlamaErrors, MissingTensor) {
  BrokenLlama m;
  auto c = m.config();
  c["num_hidden_layers"] = 5;  // the file has 2
  m.setConfig(c);
  expectRefused(m.run(), "model.safetensors", "missing tensor 'model.layers.4.");
}

TEST(LlamaErrors, ShardNamedInTheIndexButMissing) {
  BrokenLlama m("llama3_bf16_sharded");
  fs::remove(m.file("model-00002-of-00002.safetensors"));
  expectRefused(m.run(), "model-00002-of-00002.safetensors", "missing (a shard named in");
}

TEST(LlamaErrors, TokenizerJsonOfAnUnknownModelType) {
  BrokenLlama m;
  auto t = nlohmann::json::parse(slurp(m.file("tokenizer.json").string()));
  t["model"]["type"] = "WordLevel";  // (Unigram opens since tokenizer.json's Unigram model)
  std::ofstream(m.file("tokenizer.json")) << t.dump();
  expectRefused(m.run(), "tokenizer.json", "WordLevel");
}

TEST(LlamaErrors, MalformedTokenizerModel) {
  BrokenLlama m;
  fs::remove(m.file("tokenizer.json"));
  std::ofstream(m.file("tokenizer.model"), std::ios::binary) << "this is not a protobuf \x01\x02";
  expectRefused(m.run(), "tokenizer.model", "");
}

TEST(LlamaErrors, UnknownRopeScaling) {
  BrokenLlama m;
  auto c = m.config();
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  m.setConfig(c);
  expectRefused(m.run(), "config.json", "rope_scaling type \"yarn\"");
}

}  // namespace
}  // namespace attnviz::testing
