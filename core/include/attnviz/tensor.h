// attnviz core: dense tensors and the error types every layer shares.
#pragma once

#include <Eigen/Core>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnviz {

// Row-major everywhere: what crosses to GL buffers, .npy files and PNGs is never transposed.
using MatrixRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapRM = Eigen::Map<MatrixRM>;
using ConstMapRM = Eigen::Map<const MatrixRM>;

// Bad usage (unknown option, malformed option value): the command line exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input (malformed file, wrong shape, NaN, size beyond limits): the command line exits 1.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stack of `heads` row-major matrices stored contiguously: [heads, rows, cols].
// Q is [H, T_q, d_k], K is [H, T_k, d_k], V is [H, T_k, d_v], scores and weights [H, T_q, T_k].
struct Tensor3 {
  int heads = 0;
  int rows = 0;
  int cols = 0;
  std::vector<float> data;

  Tensor3() = default;
  // Throws InputError when the element count is negative or beyond kMaxElements.
  Tensor3(int heads, int rows, int cols, float fill = 0.0f);

  // 2^31 floats (8 GiB): anything larger is refused with a clear message, never a bad_alloc.
  static constexpr std::size_t kMaxElements = std::size_t{1} << 31;

  std::size_t size() const { return data.size(); }
  bool empty() const { return data.empty(); }
  std::size_t headStride() const { return std::size_t(rows) * std::size_t(cols); }

  float* head(int h) { return data.data() + std::size_t(h) * headStride(); }
  const float* head(int h) const { return data.data() + std::size_t(h) * headStride(); }
  MapRM mat(int h) { return MapRM(head(h), rows, cols); }
  ConstMapRM mat(int h) const { return ConstMapRM(head(h), rows, cols); }

  float& at(int h, int r, int c) { return data[(std::size_t(h) * rows + r) * cols + c]; }
  float at(int h, int r, int c) const { return data[(std::size_t(h) * rows + r) * cols + c]; }

  bool sameShape(const Tensor3& o) const {
    return heads == o.heads && rows == o.rows && cols == o.cols;
  }
  std::string shapeString() const;  // "[H, rows, cols]"
};

// Checked element count for a [h, r, c] tensor; throws InputError naming `what` when too large.
std::size_t checkedElementCount(long long h, long long r, long long c, const std::string& what);

}  // namespace attnviz
