// attnviz core: the instruction-set level of the hot kernels (isa.h), and the GEMM dispatch.
#include "attnviz/engine/isa.h"

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

}  // namespace attnviz
