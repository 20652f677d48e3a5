// attnviz engine: 16-bit floats (IEEE half and bfloat16) to float32, exactly, from their bits. Used
// by the ggml block kernels (block scales, F16 and BF16 rows) and the file readers.
#pragma once

#include <cstdint>

namespace attnviz {

// Exact conversions of one element's bits.
float halfToFloat(std::uint16_t bits);
float bfloat16ToFloat(std::uint16_t bits);

}  // namespace attnviz
