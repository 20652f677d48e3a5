// The linear layers' GEMM (gemmABtRows, attnviz/engine/isa.h) at every instruction-set level this
// machine runs: against a double-precision loop, with B's rows float32 and made on demand from
// stored GGUF blocks (F16, Q8_0, Q4_K, Q6_K), the blocks decoded here from ggml's block formulas
// in double; and the same numbers bit for bit whichever way the same rows arrive.
#include "attnviz/engine/isa.h"
#include "attnviz/formats/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

using attnviz::GgmlType;
using attnviz::Isa;

std::vector<float> randomFloats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

double halfToDouble(const unsigned char* p) {
  const unsigned h = unsigned(p[0]) | (unsigned(p[1]) << 8);
  const int e = int((h >> 10) & 31), f = int(h & 1023);
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(double(f), -24);
  return s * std::ldexp(double(1024 + f), e - 25);
}

// A random normal half: sign, exponent in [lo, hi] (biased), any mantissa.
void putHalf(unsigned char* p, std::mt19937& gen, int lo, int hi) {
  const unsigned e = unsigned(lo) + unsigned(gen() % unsigned(hi - lo + 1));
  const unsigned h = ((gen() & 1u) << 15) | (e << 10) | (gen() & 1023u);
  p[0] = static_cast<unsigned char>(h & 255), p[1] = static_cast<unsigned char>(h >> 8);
}

// Random stored rows of a type: random codes, random halves for the values and scales.
struct Stored {
  GgmlType type;
  int rows, cols;
  std::size_t rowBytes;
  std::vector<unsigned char> bytes;
};

Stored makeStored(GgmlType type, int rows, int cols, unsigned seed) {
  Stored s{type, rows, cols, attnviz::ggmlRowBytes(type, cols), {}};
  s.bytes.resize(s.rowBytes * std::size_t(rows));
  std::mt19937 gen(seed);
  for (auto& b : s.bytes) b = static_cast<unsigned char>(gen());
  const std::size_t n = s.bytes.size();
  switch (type) {
    case GgmlType::F16:
      for (std::size_t i = 0; i < n; i += 2) putHalf(&s.bytes[i], gen, 5, 20);
      break;
    case GgmlType::Q8_0:
      for (std::size_t b = 0; b < n; b += 34) putHalf(&s.bytes[b], gen, 1, 10);
      break;
    case GgmlType::Q4_K:
      for (std::size_t b = 0; b < n; b += 144) putHalf(&s.bytes[b], gen, 1, 10), putHalf(&s.bytes[b + 2], gen, 1, 10);
      break;
    case GgmlType::Q6_K:
      for (std::size_t b = 0; b < n; b += 210) putHalf(&s.bytes[b + 208], gen, 1, 10);
      break;
    default:
      break;
  }
  return s;
}

// ggml's formulas (ggml-quants.c, dequantize_row_*), in double.
std::vector<double> decodeRow(const Stored& s, int r) {
  const unsigned char* p = s.bytes.data() + std::size_t(r) * s.rowBytes;
  std::vector<double> y(std::size_t(s.cols));
  if (s.type == GgmlType::F16) {
    for (int i = 0; i < s.cols; ++i) y[std::size_t(i)] = halfToDouble(p + 2 * i);
  } else if (s.type == GgmlType::Q8_0) {
    for (int b = 0; b < s.cols / 32; ++b, p += 34) {
      const double d = halfToDouble(p);
      for (int i = 0; i < 32; ++i) y[std::size_t(32 * b + i)] = d * double(static_cast<signed char>(p[2 + i]));
    }
  } else if (s.type == GgmlType::Q4_K) {
    for (int b = 0; b < s.cols / 256; ++b, p += 144) {
      const double d = halfToDouble(p), dmin = halfToDouble(p + 2);
      const unsigned char* q = p + 4;  // scales[12]
      const unsigned char* qs = p + 16;
      auto scaleMin = [&](int j, int& sc, int& m) {
        if (j < 4) {
          sc = q[j] & 63, m = q[j + 4] & 63;
        } else {
          sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
          m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
      };
      for (int c = 0; c < 4; ++c) {
        int sc1, m1, sc2, m2;
        scaleMin(2 * c, sc1, m1);
        scaleMin(2 * c + 1, sc2, m2);
        for (int l = 0; l < 32; ++l) {
          y[std::size_t(256 * b + 64 * c + l)] = d * sc1 * (qs[32 * c + l] & 0xF) - dmin * m1;
          y[std::size_t(256 * b + 64 * c + 32 + l)] = d * sc2 * (qs[32 * c + l] >> 4) - dmin * m2;
        }
      }
    }
  } else if (s.type == GgmlType::Q6_K) {
    for (int b = 0; b < s.cols / 256; ++b, p += 210) {
      const unsigned char* ql = p;
      const unsigned char* qh = p + 128;
      const signed char* sc = reinterpret_cast<const signed char*>(p + 192);
      const double d = halfToDouble(p + 208);
      for (int n = 0; n < 2; ++n) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = int((ql[64 * n + l] & 0xF) | (((qh[32 * n + l] >> 0) & 3) << 4)) - 32;
          const int q2 = int((ql[64 * n + l + 32] & 0xF) | (((qh[32 * n + l] >> 2) & 3) << 4)) - 32;
          const int q3 = int((ql[64 * n + l] >> 4) | (((qh[32 * n + l] >> 4) & 3) << 4)) - 32;
          const int q4 = int((ql[64 * n + l + 32] >> 4) | (((qh[32 * n + l] >> 6) & 3) << 4)) - 32;
          const std::size_t o = std::size_t(256 * b + 128 * n + l);
          y[o] = d * sc[8 * n + is] * q1;
          y[o + 32] = d * sc[8 * n + is + 2] * q2;
          y[o + 64] = d * sc[8 * n + is + 4] * q3;
          y[o + 96] = d * sc[8 * n + is + 6] * q4;
        }
      }
    }
  }
  return y;
}

void fillStored(const void* ctx, int r, int k0, int kc, float* out) {
  const Stored& s = *static_cast<const Stored*>(ctx);
  int bv = 0, bb = 0;
  attnviz::ggmlTypeInfo(std::uint32_t(s.type), bv, bb);
  attnviz::dequantizeRow(s.type, s.bytes.data() + std::size_t(r) * s.rowBytes + std::size_t(k0 / bv) * bb,
                         out, kc);
}

// C (+)= A B^T checked against the double loop: |C - sum| <= 1e-6 sum |a b| (+ |C0|), columns past
// n untouched.
void expectProduct(int m, int n, int k, const std::vector<float>& A, int lda,
                   const std::vector<std::vector<double>>& B, const std::vector<float>& C, int ldc,
                   const std::vector<float>& C0, bool accumulate) {
  double worst = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0, a = 0;
      for (int p = 0; p < k; ++p) {
        const double x = double(A[std::size_t(i) * lda + p]) * B[std::size_t(j)][std::size_t(p)];
        s += x, a += std::abs(x);
      }
      const double c0 = accumulate ? C0[std::size_t(i) * ldc + j] : 0.0;
      worst = std::max(worst, std::abs(C[std::size_t(i) * ldc + j] - (s + c0)) / (a + std::abs(c0) + 1e-30));
    }
    for (int j = n; j < ldc; ++j) ASSERT_EQ(C[std::size_t(i) * ldc + j], C0[std::size_t(i) * ldc + j]);
  }
  EXPECT_LT(worst, 1e-6) << m << " x " << n << " x " << k;
}

TEST(GemmRows, EveryLevelMatchesADoubleLoopOnFloatRows) {
  // Row counts on both sides of the dot-product path (m <= 4) and of each level's panel, k across
  // the chunk of 256.
  for (int m : {1, 3, 4, 5, 13, 37}) {
    for (int k : {1, 70, 256, 300, 600}) {
      const int n = 131, lda = k + 3, ldb = k + 5, ldc = n + 9;
      const std::vector<float> A = randomFloats(std::size_t(m) * lda, 1);
      const std::vector<float> Bf = randomFloats(std::size_t(n) * ldb, 2);
      std::vector<std::vector<double>> B(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(k)));
      for (int j = 0; j < n; ++j)
        for (int p = 0; p < k; ++p) B[std::size_t(j)][std::size_t(p)] = Bf[std::size_t(j) * ldb + p];
      attnviz::GemmRows rows;
      rows.f32 = Bf.data(), rows.ld = ldb;
      for (Isa isa : attnviz::supportedIsas()) {
        SCOPED_TRACE(attnviz::isaName(isa));
        for (bool acc : {false, true}) {
          const std::vector<float> C0 = randomFloats(std::size_t(m) * ldc, 3);
          std::vector<float> C = C0;
          attnviz::detail::gemmABtRowsAt(isa, m, n, k, A.data(), lda, rows, C.data(), ldc, acc);
          expectProduct(m, n, k, A, lda, B, C, ldc, C0, acc);
        }
      }
    }
  }
}

TEST(GemmRows, EveryLevelMatchesADoubleLoopOnStoredBlocksAndAgreesWithTheConvertedRows) {
  for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    for (int m : {2, 37}) {
      const int n = 70, k = 768, ldc = n;
      const Stored s = makeStored(type, n, k, 11 + unsigned(type));
      std::vector<std::vector<double>> B(static_cast<std::size_t>(n));
      std::vector<float> converted(std::size_t(n) * k);
      for (int j = 0; j < n; ++j) {
        B[std::size_t(j)] = decodeRow(s, j);
        attnviz::dequantizeRow(type, s.bytes.data() + std::size_t(j) * s.rowBytes,
                               converted.data() + std::size_t(j) * k, k);
        // The library's decoding is ggml's in float32 (checked in tests/formats): here the
        // input, within float32 rounding of the formulas in double.
        for (int p = 0; p < k; ++p) {
          const double want = B[std::size_t(j)][std::size_t(p)];
          ASSERT_NEAR(double(converted[std::size_t(j) * k + p]), want, 1e-7 * std::abs(want) + 1e-30)
              << "row " << j << " value " << p;
        }
      }
      const std::vector<float> A = randomFloats(std::size_t(m) * k, 5);
      attnviz::GemmRows stored, f32;
      stored.fill = &fillStored, stored.ctx = &s;
      f32.f32 = converted.data(), f32.ld = k;
      for (Isa isa : attnviz::supportedIsas()) {
        SCOPED_TRACE(std::string(attnviz::isaName(isa)) + " " + attnviz::ggmlTypeName(std::uint32_t(type)));
        const std::vector<float> C0(std::size_t(m) * ldc, 0.0f);
        std::vector<float> C = C0, D = C0;
        attnviz::detail::gemmABtRowsAt(isa, m, n, k, A.data(), k, stored, C.data(), ldc);
        expectProduct(m, n, k, A, k, B, C, ldc, C0, false);
        attnviz::detail::gemmABtRowsAt(isa, m, n, k, A.data(), k, f32, D.data(), ldc);
        EXPECT_EQ(0, std::memcmp(C.data(), D.data(), C.size() * sizeof(float)));
      }
    }
  }
}

}  // namespace
