#include "attnviz/engine/tensor.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#if defined(__linux__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#endif

namespace attnviz {

void adviseHugePages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
  if (bytes < (std::size_t(8) << 20)) return;
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1), hi = (a + bytes) & ~(kHuge - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

namespace {
std::size_t gHeapKept = 0;
}

#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(__GLIBC__)
#define ATTNVIZ_HEAP_ADVICE 1
#else
#define ATTNVIZ_HEAP_ADVICE 0
#endif
#if ATTNVIZ_HEAP_ADVICE
std::size_t heapKeptFree() noexcept { return gHeapKept; }

namespace {

// Grows the heap by kHeap bytes of addresses (nothing is backed until touched) and advises the
// new part; true when it did. A block 1 MiB larger than all the heap's free bytes (fordblks)
// fits nowhere in it, so it grows it. madvise changes flags only, never contents, so a thread
// allocating meanwhile loses nothing.
constexpr std::size_t kHeap = std::size_t(64) << 20;
bool growAdvisedHeap() noexcept {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  const std::size_t probeBytes =
      std::min(::mallinfo2().fordblks + (std::size_t(1) << 20), (std::size_t(32) << 20) - 4096);
  const auto before = reinterpret_cast<std::uintptr_t>(::sbrk(0));
  ::mallopt(M_TOP_PAD, int(kHeap));
  void* volatile probe = std::malloc(probeBytes);  // volatile: not elided
  const auto end = reinterpret_cast<std::uintptr_t>(::sbrk(0));
  ::mallopt(M_TOP_PAD, 128 << 10);  // glibc's default again
  std::free(probe);
  if (before == std::uintptr_t(-1) || end == std::uintptr_t(-1) || end < before + kHeap)
    return false;
  const std::uintptr_t lo = (before + kHuge - 1) & ~(kHuge - 1), hi = end & ~(kHuge - 1);
  return hi > lo && ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0;
}

}  // namespace
#endif

void prepareHeap() noexcept {
#if ATTNVIZ_HEAP_ADVICE
  if (const char* off = std::getenv("ATTNVIZ_PLAIN_HEAP"); off && *off && *off != '0') return;
  {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!f || !std::getline(f, line) || line.find("[never]") != std::string::npos) return;
  }
  // Blocks under 32 MiB come from the heap and are reused there; larger ones are mappings of
  // their own (FloatBuffer advises those), returned when freed.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, int(kHeap + (std::size_t(64) << 20)));
  if (growAdvisedHeap()) gHeapKept = kHeap;
#endif
}

void trimHeap() noexcept {
#if ATTNVIZ_HEAP_ADVICE
  ::malloc_trim(0);
  if (gHeapKept != 0 && !growAdvisedHeap()) gHeapKept = 0;
#elif defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

std::size_t checkedElementCount(long long h, long long r, long long c, const std::string& what) {
  if (h < 0 || r < 0 || c < 0) {
    throw InputError(what + ": negative dimension in shape [" + std::to_string(h) + ", " +
                     std::to_string(r) + ", " + std::to_string(c) + "]");
  }
  const auto limit = static_cast<unsigned long long>(Tensor3::kMaxElements);
  unsigned long long n = static_cast<unsigned long long>(h);
  for (long long d : {r, c}) {
    if (d != 0 && n > limit / static_cast<unsigned long long>(d)) {
      n = limit + 1;
      break;
    }
    n *= static_cast<unsigned long long>(d);
  }
  if (n > limit || r > std::numeric_limits<int>::max() || c > std::numeric_limits<int>::max() ||
      h > std::numeric_limits<int>::max()) {
    throw InputError(what + ": shape [" + std::to_string(h) + ", " + std::to_string(r) + ", " +
                     std::to_string(c) + "] is too large (limit " + std::to_string(limit) +
                     " elements)");
  }
  return static_cast<std::size_t>(n);
}

Tensor3::Tensor3(int h, int r, int c, float fill) : heads(h), rows(r), cols(c) {
  const std::size_t n = checkedElementCount(h, r, c, "tensor");
  data.assign(n, fill);
}

Tensor3 Tensor3::uninit(int h, int r, int c) {
  Tensor3 t;
  const std::size_t n = checkedElementCount(h, r, c, "tensor");
  t.data.resize(n);  // default-initialised: nothing written
  t.heads = h, t.rows = r, t.cols = c;
  return t;
}

std::string Tensor3::shapeString() const {
  return "[" + std::to_string(heads) + ", " + std::to_string(rows) + ", " + std::to_string(cols) +
         "]";
}

}  // namespace attnviz
