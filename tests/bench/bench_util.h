// attnviz benchmarks: inputs shared by the benchmark files.
#pragma once

#include "attnviz/engine/tensor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
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

// One tensor of a checkpoint the benchmarks write: its stored name and shape.
using TensorShape = std::pair<std::string, std::vector<std::int64_t>>;

// Writes `path` as an F32 safetensors file of the given tensors, streamed (a few MB of RAM at a
// time) from a normal(mean, sd) generator seeded by `seed`: mean 1, sd 0.1 for the tensors
// `isNormWeight` names (norm scales), else mean 0, sd `sd`. Returns the file's size in bytes.
inline std::uint64_t writeRandomSafetensors(const std::string& path,
                                            const std::vector<TensorShape>& shapes, unsigned seed,
                                            const std::function<bool(const std::string&)>& isNormWeight,
                                            float sd = 0.05f) {
  nlohmann::json header = nlohmann::json::object();
  std::size_t offset = 0;
  for (const auto& [name, s] : shapes) {
    std::size_t n = 4;
    for (auto v : s) n *= std::size_t(v);
    header[name] = {{"dtype", "F32"}, {"shape", s}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << text;
  std::mt19937 gen(seed);
  std::vector<float> chunk(1 << 20);
  for (const auto& [name, s] : shapes) {
    std::size_t n = 1;
    for (auto v : s) n *= std::size_t(v);
    const bool norm = isNormWeight(name);
    std::normal_distribution<float> dist(norm ? 1.0f : 0.0f, norm ? 0.1f : sd);
    for (std::size_t done = 0; done < n; done += chunk.size()) {
      const std::size_t m = std::min(chunk.size(), n - done);
      for (std::size_t i = 0; i < m; ++i) chunk[i] = dist(gen);
      out.write(reinterpret_cast<const char*>(chunk.data()), std::streamsize(m * 4));
    }
  }
  out.close();
  return 8 + text.size() + offset;
}

}  // namespace attnviz::bench
