// attnviz benchmarks: inputs shared by the benchmark files.
#pragma once

#include "attnviz/engine/tensor.h"

#include <random>

namespace attnviz::bench {

// [H, rows, cols] of standard normal floats, the same for the same seed.
inline Tensor3 randomTensor(int H, int rows, int cols, unsigned seed) {
  Tensor3 t = Tensor3::uninit(H, rows, cols);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& x : t.data) x = n(gen);
  return t;
}

}  // namespace attnviz::bench
