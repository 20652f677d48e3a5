// attnviz core: dense tensors and the error types every layer shares.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <memory>
#include <type_traits>
#include <utility>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnviz {

// std::allocator, except that a value-less construct default-initialises: resize(n) on a vector
// of floats leaves the new elements unwritten (no zero-fill of a buffer about to be
// overwritten); resize(n, v), assign(n, v) and the rest still write their values.
// Asks the kernel to back [p, p + bytes) with transparent huge pages where it can (Linux, from
// 8 MiB): a first touch then faults once per 2 MiB instead of once per 4 KiB page.
void adviseHugePages(void* p, std::size_t bytes) noexcept;
// Called once, first thing in main: the heap's next 64 MiB on transparent huge pages (where
// the system allows them), freed blocks under 32 MiB kept for reuse. The pass's many mid-sized
// buffers (weights captures, per-layer activations, the tokenizer's tables) then fault once per
// 2 MiB instead of once per 4 KiB, which on our VMs was a fifth of a small model's run.
void prepareHeap() noexcept;
// The free bytes at the top of the heap that prepareHeap added (64 MiB, else 0): a caller
// deciding whether to trim counts only what lies free beyond them.
std::size_t heapKeptFree() noexcept;
// malloc_trim(0): every free page back to the system; then, after prepareHeap, the heap grown
// and advised again (the advice went with the trimmed top).
void trimHeap() noexcept;

template <class T>
struct NoInitAllocator : std::allocator<T> {
  using value_type = T;
  T* allocate(std::size_t n) {
    T* p = std::allocator<T>::allocate(n);
    adviseHugePages(p, n * sizeof(T));
    return p;
  }
  NoInitAllocator() noexcept = default;
  template <class U>
  NoInitAllocator(const NoInitAllocator<U>&) noexcept {}
  template <class U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T, class U>
bool operator==(const NoInitAllocator<T>&, const NoInitAllocator<U>&) noexcept {
  return true;
}

// Tensor storage: float32, contiguous, not zero-filled when only sized (see Tensor3::uninit).
using FloatBuffer = std::vector<float, NoInitAllocator<float>>;

// Element-wise equality with a plain vector of floats (tests compare against references).
inline bool operator==(const FloatBuffer& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}
inline bool operator==(const std::vector<float>& a, const FloatBuffer& b) { return b == a; }

// Row-major everywhere: what crosses to GL buffers, .npy files and PNGs is never transposed.
using MatrixRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapRM = Eigen::Map<MatrixRM>;
using ConstMapRM = Eigen::Map<const MatrixRM>;

// m.resize(rows, cols), and when that allocated a new buffer of 8 MiB or more, the huge-page
// advice FloatBuffer gives its own (a pass's [T, V] logits: 26 MB at GPT-2 small, T = 128,
// first written in 7 ms instead of 70 on our VMs).
inline void resizeFresh(MatrixRM& m, Eigen::Index rows, Eigen::Index cols) {
  const float* before = m.data();
  m.resize(rows, cols);
  if (m.data() != before) adviseHugePages(m.data(), std::size_t(m.size()) * sizeof(float));
}

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
  FloatBuffer data;

  Tensor3() = default;
  // Every element `fill`. Throws InputError when the element count is negative or beyond
  // kMaxElements.
  Tensor3(int heads, int rows, int cols, float fill = 0.0f);
  // The shape with the elements not written (for a buffer the caller overwrites in full), with
  // FloatBuffer's huge-page advice from 8 MiB. Throws as above.
  static Tensor3 uninit(int heads, int rows, int cols);

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
