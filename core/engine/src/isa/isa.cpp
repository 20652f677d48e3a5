// attnviz core: the instruction-set level of the hot kernels (isa.h), and the GEMM dispatch.
#include "attnviz/engine/isa.h"

#include "attnviz/engine/engine.h"
#include "attnviz/engine/parallel.h"
#include "attnviz/engine/tensor.h"

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace attnviz {

namespace detail {
extern const GemmKernels gemmKernelsBaseline;
#if ATTNVIZ_ISA_X86
extern const GemmKernels gemmKernelsAvx2;
extern const GemmKernels gemmKernelsAvx512;
#endif
}  // namespace detail

namespace {

bool cpuHas(Isa isa) {
#if ATTNVIZ_ISA_X86
  // libgcc's checks include the OS's XSAVE state (XCR0) for the AVX and AVX-512 registers.
  __builtin_cpu_init();
  switch (isa) {
    case Isa::Baseline:
      return true;
#if defined(__GNUC__) && !defined(__clang__)
    // Exactly the levels the kernels are compiled for (-march=x86-64-v3 / -v4; GCC 12).
    case Isa::Avx2:
      return __builtin_cpu_supports("x86-64-v3");
    case Isa::Avx512:
      return __builtin_cpu_supports("x86-64-v4");
#else
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx");
    case Isa::Avx512:
      return cpuHas(Isa::Avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
#endif
  }
  return false;
#else
  return isa == Isa::Baseline;
#endif
}

Isa bestIsa() { return usableIsa(Isa::Avx512); }

struct Choice {
  Isa isa = Isa::Baseline;
  std::string asked;  // ATTNVIZ_ISA as given, when set
};

Choice decide() {
  Choice c;
  c.isa = bestIsa();
  const char* env = std::getenv("ATTNVIZ_ISA");
  if (!env || !*env) return c;
  c.asked = env;
  for (Isa i : {Isa::Baseline, Isa::Avx2, Isa::Avx512}) {
    if (c.asked != isaName(i)) continue;
    if (cpuHas(i)) {
      c.isa = i;
    } else {
      std::fprintf(stderr, "attnviz: ATTNVIZ_ISA=%s: this CPU cannot run it; using %s\n", env,
                   isaName(c.isa));
    }
    return c;
  }
  std::fprintf(stderr,
               "attnviz: ATTNVIZ_ISA=%s is not baseline, avx2 or avx512; using %s\n", env,
               isaName(c.isa));
  return c;
}

const Choice& choice() {
  static const Choice c = decide();
  return c;
}

const detail::GemmKernels* gemmTable() {
  static const detail::GemmKernels* t = &detail::gemmKernels(activeIsa());
  return t;
}

}  // namespace

Isa activeIsa() { return choice().isa; }

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
    case Isa::Baseline:
      break;
  }
  return "baseline";
}

std::vector<Isa> supportedIsas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::Baseline, Isa::Avx2, Isa::Avx512})
    if (cpuHas(i)) out.push_back(i);
  return out;
}

std::string isaDescription() {
  std::string s = isaName(activeIsa());
  if (!choice().asked.empty())
    s += std::string(" (ATTNVIZ_ISA=") + choice().asked + "; CPU: " + isaName(bestIsa()) + ")";
  return s;
}

Isa usableIsa(Isa wanted) {
  Isa best = Isa::Baseline;
  for (Isa i : {Isa::Avx2, Isa::Avx512})
    if (i <= wanted && cpuHas(i)) best = i;
  return best;
}

namespace detail {
const GemmKernels& gemmKernels(Isa isa) {
#if ATTNVIZ_ISA_X86
  switch (usableIsa(isa)) {
    case Isa::Avx512:
      return gemmKernelsAvx512;
    case Isa::Avx2:
      return gemmKernelsAvx2;
    case Isa::Baseline:
      break;
  }
#else
  (void)isa;
#endif
  return gemmKernelsBaseline;
}
}  // namespace detail

void gemmABt(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
             long ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  gemmTable()->abt(m, n, k, A, lda, B, ldb, C, ldc, accumulate);
}

void gemmAB(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
            long ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  gemmTable()->ab(m, n, k, A, lda, B, ldb, C, ldc, accumulate);
}

namespace detail {
void expShifted(const float* z, float* e, int n, float mx, float tau) {
  if (n > 0) gemmTable()->expShifted(z, e, n, mx, tau);
}
}  // namespace detail

namespace {

// A packed by the level's packA, its panels split over the threads. The buffer is the calling
// thread's and is kept for the next product up to 32 MB (a 1B model's layer at T = 512 needs
// 16 MB); a larger one is freed with the product.
const float* packA(const detail::GemmKernels& t, int m, int k, const float* A, long lda,
                   FloatBuffer& local) {
  constexpr std::size_t kKeepFloats = std::size_t(8) << 20;
  static thread_local FloatBuffer kept;
  const int mr = t.packedRows(), panels = (m + mr - 1) / mr;
  const std::size_t want = std::size_t(panels) * mr * std::size_t(k);
  FloatBuffer& buf = want <= kKeepFloats ? kept : local;
  if (buf.size() < want) buf.resize(want);
  const int tasks = std::max(1, std::min(cpuThreads(), panels / 4));
  detail::parallelFor(tasks, [&](int i) {
    const int p0 = int(long(panels) * i / tasks), p1 = int(long(panels) * (i + 1) / tasks);
    t.packA(m, k, A, lda, buf.data(), p0, p1);
  });
  return buf.data();
}

constexpr int kPackedTaskCols = 256;  // B's rows (C's columns) a task of the packed products

// A packed once, then fn(packed A, j0, columns) for each task's columns [j0, j0 + columns) of C,
// the tasks claimed by the threads.
template <class Fn>
void packedTasks(const detail::GemmKernels& t, int m, int n, int k, const float* A, long lda,
                 Fn&& fn) {
  FloatBuffer local;
  const float* ap = packA(t, m, k, A, lda, local);
  detail::parallelFor((n + kPackedTaskCols - 1) / kPackedTaskCols, [&](int i) {
    const int j0 = i * kPackedTaskCols;
    fn(ap, j0, std::min(kPackedTaskCols, n - j0));
  });
}

}  // namespace

bool packedProducts() { return gemmTable()->packA != nullptr; }

void linearABt(int m, int n, int k, const float* A, long lda, const GemmRows& B, float* C,
               long ldc) {
  if (m <= 0 || n <= 0) return;
  const detail::GemmKernels& t = *gemmTable();
  if (t.packA && m >= kPackedMinRows && k > 0) {
    packedTasks(t, m, n, k, A, lda, [&](const float* ap, int j0, int nc) {
      t.abtPacked(m, nc, k, ap, B.from(j0), C + j0, ldc, false);
    });
    return;
  }
  // Blocks of B's rows, claimed dynamically: packing buffers stay small (a vocab is tens of
  // thousands wide) and uneven thread speeds balance out.
  const int chunk = n >= 4096 ? 1024 : std::max(64, (n + cpuThreads() - 1) / cpuThreads());
  detail::parallelFor((n + chunk - 1) / chunk, [&](int task) {
    const int r0 = task * chunk, nr = std::min(n, r0 + chunk) - r0;
    if (B.f32) {
      t.abt(m, nr, k, A, lda, B.f32 + long(r0) * B.ld, B.ld, C + r0, ldc, false);
      return;
    }
    // Converted into the thread's buffer, kept for the next block (a head of 128256 rows is
    // 126 blocks of 1024).
    static thread_local FloatBuffer rows;
    if (rows.size() < std::size_t(nr) * std::size_t(k)) rows = FloatBuffer(std::size_t(nr) * k);
    for (int r = 0; r < nr; ++r) B.fill(B.ctx, B.row0 + r0 + r, 0, k, rows.data() + long(r) * k);
    t.abt(m, nr, k, A, lda, rows.data(), k, C + r0, ldc, false);
  });
}

void linearAB(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
              long ldc) {
  if (m <= 0 || n <= 0) return;
  const detail::GemmKernels& t = *gemmTable();
  if (t.packA && m >= kPackedMinRows && k > 0) {
    packedTasks(t, m, n, k, A, lda, [&](const float* ap, int j0, int nc) {
      t.abPacked(m, nc, k, ap, B + j0, ldb, C + j0, ldc, false);
    });
    return;
  }
  // Columns split evenly over the threads, each a multiple of 16.
  const int tasks = std::max(1, std::min(cpuThreads(), n / 64));
  const int chunk = ((n + tasks - 1) / tasks + 15) / 16 * 16;
  detail::parallelFor(tasks, [&](int task) {
    const int c0 = task * chunk, nc = std::min(n, c0 + chunk) - c0;
    if (nc > 0) t.ab(m, nc, k, A, lda, B + c0, ldb, C + c0, ldc, false);
  });
}

}  // namespace attnviz
