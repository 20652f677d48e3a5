// prepareHeap (core/engine/src/tensor.cpp): the heap's next 64 MiB advised onto transparent huge
// pages, so that blocks malloc hands out from it are in a mapping the kernel marks "hg" in
// /proc/self/smaps; FloatBuffer's own advice from 8 MiB, and resizeFresh's for Eigen matrices.
#include "attnviz/engine/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <malloc.h>
#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

bool hugePagesPossible() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return f && std::getline(f, line) && line.find("[never]") == std::string::npos;
}

// The VmFlags line of the mapping of /proc/self/smaps that holds p ("" when none does).
std::string vmFlagsAt(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

// Resident bytes of this process (/proc/self/statm's second field).
std::size_t residentBytes() {
  std::ifstream f("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * std::size_t(::sysconf(_SC_PAGESIZE));
}

bool advised(const void* p) { return vmFlagsAt(p).find(" hg") != std::string::npos; }

// Run by ctest in a process of its own, before any prepareHeap: 40 MiB blocks are mappings of
// their own, advised only where asked.
TEST(Heap, LargeFloatBuffersAndFreshMatricesAreAdvised) {
#if defined(__SANITIZE_ADDRESS__) || !defined(__linux__)
  GTEST_SKIP() << "the sanitizers' allocator maps its own memory";
#else
  if (!hugePagesPossible()) GTEST_SKIP() << "transparent huge pages are off on this system";
  if (attnviz::heapKeptFree() != 0) GTEST_SKIP() << "run after prepareHeap in this process";
  attnviz::FloatBuffer big(std::size_t(40) << 20 >> 2);
  EXPECT_TRUE(advised(big.data() + big.size() / 2)) << vmFlagsAt(big.data());
  attnviz::MatrixRM m;
  attnviz::resizeFresh(m, 1024, 10240);
  EXPECT_TRUE(advised(m.data() + m.size() / 2)) << vmFlagsAt(m.data());
  attnviz::MatrixRM plain(1024, 10240);
  EXPECT_FALSE(advised(plain.data() + plain.size() / 2)) << vmFlagsAt(plain.data());
  // Small ones are left as they are.
  attnviz::FloatBuffer small(std::size_t(4) << 20 >> 2);
  EXPECT_FALSE(advised(small.data() + small.size() / 2)) << vmFlagsAt(small.data());
#endif
}

TEST(Heap, PrepareHeapAdvisesTheHeapsNextBlocks) {
#if defined(__SANITIZE_ADDRESS__) || !defined(__linux__) || !defined(__GLIBC__)
  GTEST_SKIP() << "the sanitizers' allocator (or this system) has no glibc heap to advise";
#else
  // prepareHeap belongs at the start of a process (main calls it first); ctest runs each test in
  // a process of its own. A heap with 31 MiB free already is not grown by it.
  if (::mallinfo2().fordblks > (std::size_t(30) << 20))
    GTEST_SKIP() << "the heap already holds freed blocks: run this test in a process of its own";
  const std::size_t freeBefore = ::mallinfo2().fordblks;
  attnviz::prepareHeap();
  if (!hugePagesPossible()) {
    EXPECT_EQ(attnviz::heapKeptFree(), 0u);
    return;
  }
  EXPECT_EQ(attnviz::heapKeptFree(), std::size_t(64) << 20);
  // Blocks up to the advised size come from the heap (a layer's activations, a head's weights,
  // the logits). The advice starts on the first 2 MiB boundary past the old end of the heap, so
  // a first block of 4 MiB takes what may lie before it; blocks larger than all the heap's free
  // bytes before (which fit nowhere else) are asked about at their middle and end.
  void* volatile first = std::malloc(std::size_t(4) << 20);
  for (std::size_t bytes : {freeBefore + (std::size_t(1) << 20),
                            freeBefore + (std::size_t(3) << 20), std::size_t(40) << 20}) {
    char* block = static_cast<char*>(std::malloc(bytes));
    ASSERT_NE(block, nullptr);
    EXPECT_TRUE(advised(block + bytes / 2)) << bytes << " bytes: " << vmFlagsAt(block);
    EXPECT_TRUE(advised(block + bytes - 1)) << bytes << " bytes: " << vmFlagsAt(block);
    std::free(block);
  }
  std::free(first);
  // A trim gives every free page back (the pass's, when many lie free) and advises the heap's
  // new top again: 24 MiB touched and freed in the heap are no longer resident, and a block made
  // after the trim is advised.
  {
    char* touched = static_cast<char*>(std::malloc(std::size_t(24) << 20));
    ASSERT_NE(touched, nullptr);
    for (std::size_t i = 0; i < (std::size_t(24) << 20); i += 4096) touched[i] = 1;
    std::free(touched);
  }
  const std::size_t residentBefore = residentBytes();
  attnviz::trimHeap();
  const std::size_t residentAfter = residentBytes();
  const auto after = ::mallinfo2();
  EXPECT_EQ(attnviz::heapKeptFree(), std::size_t(64) << 20);
  EXPECT_LT(residentAfter + (std::size_t(16) << 20), residentBefore)
      << "the freed 24 MiB went back to the system";
  // Larger than every free block below the top (fordblks less the top's keepcost).
  const std::size_t bytes = after.fordblks - after.keepcost + (std::size_t(5) << 20);
  char* block = static_cast<char*>(std::malloc(bytes));
  ASSERT_NE(block, nullptr);
  EXPECT_TRUE(advised(block + bytes - 1)) << vmFlagsAt(block);
  std::free(block);
#endif
}

}  // namespace
