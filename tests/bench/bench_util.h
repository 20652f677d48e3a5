// attnviz benchmarks: inputs shared by the benchmark files, and the random checkpoints the model
// benchmarks write at start-up (never committed).
#pragma once

#include "attnviz/engine/tensor.h"
#include "attnviz/model/tokenizers/gpt2_bpe.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace attnviz::bench {

// [H, rows, cols] of standard normal floats, the same for the same seed.
inline Tensor3 randomTensor(int H, int rows, int cols, unsigned seed) {
  Tensor3 t = Tensor3::uninit(H, rows, cols);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& x : t.data) x = n(gen);
  return t;
}

// A folder for a benchmark's files: $ATTNVIZ_BENCH_DIR or the temp folder, /attnviz_NAME_PID;
// removed at exit unless ATTNVIZ_BENCH_KEEP is set (e.g. to time `attnviz model` on it with
// /usr/bin/time -v).
struct BenchFolder {
  std::filesystem::path dir;
  explicit BenchFolder(const std::string& name) {
    const char* base = std::getenv("ATTNVIZ_BENCH_DIR");
    dir = std::filesystem::path(base ? base : std::filesystem::temp_directory_path().string()) /
          ("attnviz_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~BenchFolder() {
    std::error_code ec;
    if (!dir.empty() && !std::getenv("ATTNVIZ_BENCH_KEEP")) std::filesystem::remove_all(dir, ec);
  }
  BenchFolder(BenchFolder&& o) noexcept : dir(std::move(o.dir)) { o.dir.clear(); }
  BenchFolder(const BenchFolder&) = delete;
  BenchFolder& operator=(const BenchFolder&) = delete;
};

// GPT-2 tokenizer files for a vocab of `vocabSize` tokens: the 256 byte tokens, two-byte tokens,
// then <|endoftext|> (no merges: the benchmarks feed ids).
inline void writeByteLevelVocab(const std::filesystem::path& dir, int vocabSize) {
  nlohmann::json vocab = nlohmann::json::object();
  std::vector<std::string> alpha;
  for (int b = 0; b < 256; ++b) alpha.push_back(gpt2ByteToUnicode(b));
  int id = 0;
  for (const auto& a : alpha) vocab[a] = id++;
  // Two-byte pieces, then (past 65536 of them: Llama 3's 128256) three-byte ones.
  for (int n = 0; n < vocabSize - 257; ++n) {
    const std::string piece = n < 65536 ? alpha[n / 256] + alpha[n % 256]
                                        : alpha[(n >> 16) & 255] + alpha[(n >> 8) & 255] +
                                              alpha[n & 255];
    vocab[piece] = id++;
  }
  vocab["<|endoftext|>"] = id++;
  std::ofstream(dir / "vocab.json") << vocab.dump();
  std::ofstream(dir / "merges.txt") << "#version: 0.2\n";
}

using TensorShapes = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;

// Streams random F32 tensors to a safetensors file (a few MB of RAM at a time), each named
// prefix + name: norm scales ("ln_*" / "*norm*" weights) N(1, 0.1), everything else N(0, 0.05),
// from one seeded generator in the listed order. Returns the file's size.
inline std::uintmax_t writeRandomSafetensors(const std::filesystem::path& path,
                                             const TensorShapes& shapes,
                                             const std::string& prefix = "") {
  nlohmann::json header = nlohmann::json::object();
  std::size_t offset = 0;
  for (const auto& [name, s] : shapes) {
    std::size_t n = 4;
    for (auto v : s) n *= std::size_t(v);
    header[prefix + name] = {{"dtype", "F32"}, {"shape", s}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  {
    std::ofstream out(path, std::ios::binary);
    const std::uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << text;
    std::mt19937 gen(1);
    std::vector<float> chunk(1 << 20);
    for (const auto& [name, s] : shapes) {
      std::size_t n = 1;
      for (auto v : s) n *= std::size_t(v);
      const bool scale =
          (name.find("ln_") != std::string::npos || name.find("norm") != std::string::npos) &&
          name.ends_with("weight");
      std::normal_distribution<float> dist(scale ? 1.0f : 0.0f, scale ? 0.1f : 0.05f);
      for (std::size_t done = 0; done < n; done += chunk.size()) {
        const std::size_t m = std::min(chunk.size(), n - done);
        for (std::size_t i = 0; i < m; ++i) chunk[i] = dist(gen);
        out.write(reinterpret_cast<const char*>(chunk.data()), std::streamsize(m * 4));
      }
    }
  }
  return std::filesystem::file_size(path);
}

// SmolLM2-135M's shape (LLaMA layout: 30 layers, d 576, 9 query heads over 3 KV heads of 64,
// MLP 1536, vocab 49152, context 2048, RoPE θ 100000, RMSNorm 1e-5, tied head).
struct SmolLm2 {
  static constexpr int kL = 30, kH = 9, kKv = 3, kDh = 64, kD = 576, kI = 1536, kV = 49152,
                       kP = 2048;
};

// Llama-3.2-1B's shape (16 layers, d 2048, 32 query heads over 8 KV heads, head 64, MLP 8192,
// vocab 128256, tied), with a 2048-position context.
struct Llama32_1B {
  static constexpr int kL = 16, kH = 32, kKv = 8, kDh = 64, kD = 2048, kI = 8192, kV = 128256,
                       kP = 2048;
};

// Writes a random-init LLaMA-family folder of shape S into `dir`: config.json, a byte-level
// vocabulary of kV entries (a text of n ASCII bytes is n tokens) and model.safetensors (F32).
// Returns the weights file's size.
template <class S>
inline std::uintmax_t writeLlamaShapedFolder(const std::filesystem::path& dir) {
  std::ofstream(dir / "config.json") << nlohmann::json{
      {"model_type", "llama"},
      {"hidden_size", S::kD},
      {"intermediate_size", S::kI},
      {"num_hidden_layers", S::kL},
      {"num_attention_heads", S::kH},
      {"num_key_value_heads", S::kKv},
      {"hidden_act", "silu"},
      {"max_position_embeddings", S::kP},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 100000.0},
      {"vocab_size", S::kV},
      {"tie_word_embeddings", true},
      {"bos_token_id", 0},
      {"eos_token_id", 0}}.dump();
  writeByteLevelVocab(dir, S::kV);
  TensorShapes shapes = {{"model.embed_tokens.weight", {S::kV, S::kD}},
                         {"model.norm.weight", {S::kD}}};
  for (int l = 0; l < S::kL; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (auto [n, s] : TensorShapes{{"input_layernorm.weight", {S::kD}},
                                    {"post_attention_layernorm.weight", {S::kD}},
                                    {"self_attn.q_proj.weight", {S::kH * S::kDh, S::kD}},
                                    {"self_attn.k_proj.weight", {S::kKv * S::kDh, S::kD}},
                                    {"self_attn.v_proj.weight", {S::kKv * S::kDh, S::kD}},
                                    {"self_attn.o_proj.weight", {S::kD, S::kH * S::kDh}},
                                    {"mlp.gate_proj.weight", {S::kI, S::kD}},
                                    {"mlp.up_proj.weight", {S::kI, S::kD}},
                                    {"mlp.down_proj.weight", {S::kD, S::kI}}})
      shapes.emplace_back(p + n, s);
  }
  return writeRandomSafetensors(dir / "model.safetensors", shapes);
}

// The SmolLM2-135M-shaped folder.
inline std::uintmax_t writeSmolLm2Folder(const std::filesystem::path& dir) {
  return writeLlamaShapedFolder<SmolLm2>(dir);
}

// This process's resident set (VmRSS), in kB.
inline long currentRssKb() {
  std::ifstream s("/proc/self/status");
  std::string key;
  long v = 0;
  while (s >> key) {
    if (key == "VmRSS:") {
      s >> v;
      return v;
    }
  }
  return 0;
}

}  // namespace attnviz::bench
