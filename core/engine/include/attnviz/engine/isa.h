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

// The rows of B for gemmABtRows: float32 in memory (f32, ld floats a row), or made on demand by
// fill: values [k0, k0 + kc) of row r as float32 into out, k0 a multiple of kGemmChunk and kc =
// min(kGemmChunk, k - k0) (a stored layer's blocks: every block size divides kGemmChunk).
constexpr int kGemmChunk = 256;
struct GemmRows {
  const float* f32 = nullptr;
  long ld = 0;
  void (*fill)(const void* ctx, int r, int k0, int kc, float* out) = nullptr;
  const void* ctx = nullptr;
};
// C[m, n] = A[m, k] B[n, k]^T (C += with `accumulate`) over the CPU threads, B's rows from
// `rows`: the linear layers' product, whether their weights are float32 or kept as stored. Each
// value of C is the same sum in the same order for either source of the same rows.
void gemmABtRows(int m, int n, int k, const float* A, long lda, const GemmRows& rows, float* C,
                 long ldc, bool accumulate = false);

namespace detail {
// The kernels of one level, for tests that run every level a CPU supports side by side.
struct GemmKernels {
  void (*abt)(int, int, int, const float*, long, const float*, long, float*, long, bool);
  void (*ab)(int, int, int, const float*, long, const float*, long, float*, long, bool);
  // The softmax's exponentials: e[i] = exp((z[i] - mx) / tau) minus the least normal float,
  // floored at 0, so that a masked key (z = -inf) gives exactly 0 (engine_detail.h, expOfGap).
  void (*expShifted)(const float* z, float* e, int n, float mx, float tau);
  // gemmABtRows's pieces: the rows of A per packed panel; packA's panels [p0, p1) of A into
  // `out` (k * mr floats each); the product for B's rows [r0, r0 + n) with A packed (C at column
  // r0), and the same for m <= 4 with A as it is (a dot product per value).
  int (*mr)();
  void (*packA)(int m, int k, const float* A, long lda, float* out, int p0, int p1);
  void (*abtRowsPacked)(int m, int n, int k, const float* Ap, const GemmRows& rows, int r0,
                        float* C, long ldc, bool accumulate);
  void (*abtRowsDot)(int m, int n, int k, const float* A, long lda, const GemmRows& rows, int r0,
                     float* C, long ldc, bool accumulate);
};
// gemmABtRows at a given level (tests run each level side by side).
void gemmABtRowsAt(Isa isa, int m, int n, int k, const float* A, long lda, const GemmRows& rows,
                   float* C, long ldc, bool accumulate = false);
const GemmKernels& gemmKernels(Isa isa);
}  // namespace detail

}  // namespace attnviz
