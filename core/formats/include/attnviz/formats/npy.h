// attnviz core: NumPy .npy reading and writing.
#pragma once

#include "attnviz/engine/tensor.h"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz {

enum class NpyKind { Float, Bool };  // Bool covers |b1 and |u1 (nonzero = true)

struct NpyArray {
  std::vector<long long> shape;
  NpyKind kind = NpyKind::Float;
  FloatBuffer data;  // converted to float32 (bool/uint8 become 0 or 1)
};

// The header of .npy bytes (version 1.0, 2.0 or 3.0); `bytes` needs to hold only the header.
// Throws InputError whose message starts with `name`.
struct NpyHeader {
  std::string descr;  // e.g. "<f4", "|u1", "<U12"
  bool fortranOrder = false;
  std::vector<long long> shape;  // each entry in [0, 2^40]
  std::string shapeText;         // as written, e.g. "(2, 3)"
  std::size_t dataOffset = 0;    // where the data starts
};
NpyHeader parseNpyHeader(std::string_view bytes, const std::string& name);

// Parses .npy bytes (version 1.0, 2.0 or 3.0). Accepts little-endian float16/32/64 and, when
// allowBool, bool/uint8; C order only. Throws InputError whose message starts with `name`.
NpyArray parseNpy(const std::string& bytes, const std::string& name, bool allowBool);
NpyArray parseNpyView(std::string_view bytes, const std::string& name, bool allowBool);

// Reads a file (through a read-only mapping where it can) and parses it.
NpyArray readNpy(const std::string& path, bool allowBool = false);

// A float tensor from a 2-D ([T, d] -> one head) or 3-D ([H, T, d]) file. Rejects NaN/Inf,
// naming the file and the first bad index.
// When ndim is given it receives the file's rank (2 or 3).
Tensor3 loadTensorNpy(const std::string& path, int* ndim = nullptr);

// A mask file: bool/uint8 -> Allow, float -> Bias; 2-D or 3-D. `custom` gets [1 or H, T_q, T_k].
struct MaskFile {
  bool isBool = false;
  Tensor3 values;
};
MaskFile loadMaskNpy(const std::string& path);

// Serialises as float32 .npy; as2d drops the head axis (requires heads == 1).
std::string npyBytes(const Tensor3& t, bool as2d = false);

// Writes atomically (temp file in the same folder, then rename). Throws InputError.
void saveNpy(const std::string& path, const Tensor3& t, bool as2d = false);

// Any rank: float32 C-order data of the shape's element count.
std::string npyBytes(const std::vector<long long>& shape, const float* data);
void saveNpy(const std::string& path, const std::vector<long long>& shape, const float* data);
// The same with the data in parts, written one after the other (e.g. a pass's layers, each its
// own buffer, as one [L, H, T, T] array) without gathering them first. Throws InputError when the
// parts do not hold the shape's element count.
void saveNpy(const std::string& path, const std::vector<long long>& shape,
             const std::vector<std::span<const float>>& parts);

}  // namespace attnviz
