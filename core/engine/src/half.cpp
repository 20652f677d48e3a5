#include "attnviz/engine/half.h"

#include <cstdint>
#include <cstring>

namespace attnviz {

float halfToFloat(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {  // infinity or NaN: keep the payload
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // signed zero
    bits = sign;
  } else {        // subnormal half (mant * 2^-24): a normal float after shifting the leading 1 up
    int e = 113;  // 127 - 14
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (std::uint32_t(e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bfloat16ToFloat(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace attnviz
