// attnviz core (internal): the table one level of isa/ggml_kernels.cpp exports, one row per ggml
// type id: name, block shape, and (for the types attnviz reads) the block dequantizer and the dot
// product of stored blocks with float32 values.
#pragma once

#include "attnviz/engine/isa.h"
#include "attnviz/formats/gguf.h"

#include <cstdint>

namespace attnviz::detail {

// Each takes nb whole blocks (n values for the float types) at src.
using DequantFn = void (*)(const unsigned char* src, float* y, std::int64_t nb);
using DotFn = float (*)(const unsigned char* src, const float* x, std::int64_t nb);

struct TypeRow {
  const char* name;
  int blockValues;
  int blockBytes;
  DequantFn dequant;
  DotFn dot;
};

constexpr std::uint32_t kGgmlTypeCount = 42;

// Each level's table (kGgmlTypeCount rows); only x86-64 builds have the AVX2 and AVX-512 ones.
extern const TypeRow* const ggmlTypesBaseline;
extern const TypeRow* const ggmlTypesAvx2;
extern const TypeRow* const ggmlTypesAvx512;

// The table of a level (the baseline's where this build lacks it; callers pass a usableIsa()).
const TypeRow* ggmlTypes(Isa isa);

}  // namespace attnviz::detail
