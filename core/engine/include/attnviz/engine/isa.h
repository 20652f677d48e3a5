// attnviz core: which instruction set the hot kernels run on, picked once at start-up.
//
// The kernels that take a pass's time (the float32 products of the linear layers and the LM
// head; ggml's block dequantization and dot products, core/formats) are compiled three times,
// for x86-64's baseline (SSE2), x86-64-v3 (AVX2, FMA, F16C) and x86-64-v4 (AVX-512 F/BW/DQ/VL),
// whatever the rest of the build targets: the portable package runs AVX-512 code on a CPU that
// has it. The fastest level the CPU (and the OS, for its register state) supports is taken,
// unless ATTNVIZ_ISA=baseline|avx2|avx512 asks for one (tests force each in turn). A level the
// CPU lacks is refused: the variable is ignored with one line on stderr. Other CPUs than x86-64
// have the baseline build only.
#pragma once

#include <string>
#include <vector>

namespace attnviz {

enum class Isa { Baseline = 0, Avx2 = 1, Avx512 = 2 };

// The level in use (decided on the first call, then fixed for the process).
Isa activeIsa();
// "baseline", "avx2" or "avx512".
const char* isaName(Isa isa);
// The levels this CPU can run, from baseline up.
std::vector<Isa> supportedIsas();
// `wanted`, or the best level below it that this CPU runs (every level table is indexed by it).
Isa usableIsa(Isa wanted);
// One line for --version and the status bar: "avx512 (ATTNVIZ_ISA: avx2; CPU: avx512)".
std::string isaDescription();

// C[m, n] = A[m, k] B[n, k]^T: row-major float32, leading dimensions in floats (B is a linear
// layer's [out, in] rows, or the keys of attention scores). `accumulate`: C += instead.
void gemmABt(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
             long ldc, bool accumulate = false);
// C[m, n] = A[m, k] B[k, n] (B stored [in, out], as GPT-2's Conv1D; or attention's values).
void gemmAB(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
            long ldc, bool accumulate = false);

// The rows of a linear layer's B ([n, k]): float32 in memory (f32, ld floats apart), or produced
// on demand, `fill` writing row row0 + r's values [k0, k0 + kc) to out (a layer kept in its
// stored blocks, converted as the product packs it).
struct GemmRows {
  const float* f32 = nullptr;
  long ld = 0;
  void (*fill)(const void* ctx, int row, int k0, int kc, float* out) = nullptr;
  // Optional: start loading what fill will read for those values (the products call it a panel
  // of rows ahead: stored rows are pages apart, and the hardware prefetchers stop at a page).
  void (*prefetch)(const void* ctx, int row, int k0, int kc) = nullptr;
  const void* ctx = nullptr;
  int row0 = 0;
  // Rows [j0, ...) of these.
  GemmRows from(int j0) const {
    GemmRows r = *this;
    if (f32) r.f32 = f32 + long(j0) * ld;
    r.row0 = row0 + j0;
    return r;
  }
};

// A linear layer's product, split over the CPU threads (engine/parallel.h): C[m, n] = A[m, k]
// B^T with B's rows as above (linearABt), or A B with B stored [k, n] (linearAB, GPT-2's
// Conv1D). With m >= kPackedMinRows at the AVX2 and AVX-512 levels, the packed kernels of
// gemm_kernels.cpp: every value of C is one chain of fused multiply-adds over k in order (the
// same bits at both levels, for any threads). Otherwise Eigen's products, a block of B at a
// time (B given by `fill` is converted a block at a time first).
constexpr int kPackedMinRows = 16;
// Whether the active level has the packed kernels (AVX2 and AVX-512; not the baseline).
bool packedProducts();
void linearABt(int m, int n, int k, const float* A, long lda, const GemmRows& B, float* C, long ldc);
void linearAB(int m, int n, int k, const float* A, long lda, const float* B, long ldb, float* C,
              long ldc);

namespace detail {
// The kernels of one level, for tests that run every level a CPU supports side by side.
struct GemmKernels {
  void (*abt)(int, int, int, const float*, long, const float*, long, float*, long, bool);
  void (*ab)(int, int, int, const float*, long, const float*, long, float*, long, bool);
  // The softmax's exponentials: e[i] = exp((z[i] - mx) / tau) minus the least normal float,
  // floored at 0, so that a masked key (z = -inf) gives exactly 0 (engine_detail.h, expOfGap).
  void (*expShifted)(const float* z, float* e, int n, float mx, float tau);
  // The packed products (null at the baseline level). packedRows: the rows of A in a panel;
  // packA: panels [panel0, panel1) of A into the packed layout (m rounded up to whole panels
  // times k floats); abtPacked / abPacked: C[m, n] (+)= A B^T / A B on one thread, A packed.
  int (*packedRows)();
  void (*packA)(int m, int k, const float* A, long lda, float* out, int panel0, int panel1);
  void (*abtPacked)(int m, int n, int k, const float* Ap, const GemmRows& B, float* C, long ldc,
                    bool accumulate);
  void (*abPacked)(int m, int n, int k, const float* Ap, const float* B, long ldb, float* C,
                   long ldc, bool accumulate);
};
const GemmKernels& gemmKernels(Isa isa);
}  // namespace detail

}  // namespace attnviz
