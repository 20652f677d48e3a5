// attnviz core: the safetensors format (Hugging Face), read through a memory map and written
// atomically.
//
// File layout: an unsigned 64-bit little-endian N, then N bytes of JSON, then the data section.
// The JSON is an object: each key is a tensor name mapped to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// with the offsets relative to the start of the data section, plus an optional "__metadata__"
// object whose values are all strings. Tensor data is little-endian and C order.
//
// open() validates everything before anything is used: the header length against the file size,
// the JSON, each dtype, shape x element size == end - begin, every span inside the data section
// and no two spans overlapping, and __metadata__ as a string map. Any problem throws InputError
// "<file>: <problem>" (naming the tensor where there is one).
#pragma once

#include "attnviz/engine/half.h"  // halfToFloat, bfloat16ToFloat: the element conversions
#include "attnviz/engine/tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attnviz {

// Every dtype the format defines. Those with a known element size validate and can be viewed as
// bytes; only F64, F32, F16 and BF16 convert to float32 (the others are known but unsupported).
// clang-format off
enum class StDtype {
  F64, F32, F16, BF16,                                          // convertible
  I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2  // known, not convertible
};
// clang-format on

const char* stDtypeName(StDtype d);  // "F32", ...
std::size_t stDtypeSize(StDtype d);  // bytes per element
bool stDtypeConvertible(StDtype d);  // F64, F32, F16, BF16

// One tensor's header entry.
struct StTensorInfo {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<std::int64_t> shape;  // C order; may be empty (a scalar) or hold zeros
  std::size_t begin = 0;            // byte span [begin, end) relative to the data section
  std::size_t end = 0;

  std::size_t elementCount() const;  // product of shape (1 for a scalar)
  std::size_t byteSize() const { return end - begin; }
  std::string shapeString() const;  // "[2, 3]"
};

// An opened, validated file. Cheap to copy: copies share the mapping, which lives as long as
// any copy or any view taken from it through bytes().
class SafetensorsFile {
 public:
  SafetensorsFile() = default;

  // Maps `path` read-only and validates it. Throws InputError "<path>: <problem>".
  static SafetensorsFile open(const std::string& path);

  // Validates bytes held in memory (tests, fuzzing, an entry inside an archive); `name` is what
  // errors say in place of a file name.
  static SafetensorsFile fromBytes(std::string bytes, const std::string& name);

  const std::string& name() const { return name_; }  // the path, or the name given

  // Tensors in the order of their data offsets.
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }

  // The tensor called `name`, or nullptr.
  const StTensorInfo* find(const std::string& tensorName) const;

  // The tensor called `name`; throws InputError "<file>: no tensor '<name>'".
  const StTensorInfo& at(const std::string& tensorName) const;

  // __metadata__ (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Zero-copy view of a tensor's raw little-endian bytes, valid while this object (or a copy)
  // lives. The start is only as aligned as the file makes it (files written by the Python
  // package and by saveSafetensors put the data section on an 8-byte boundary).
  std::span<const std::byte> bytes(const StTensorInfo& t) const;

  // Zero-copy float view of an F32 tensor when its data is 4-byte aligned; empty otherwise.
  std::span<const float> f32View(const StTensorInfo& t) const;

  // The tensor's values as float32, in C order (F16 and BF16 exactly, subnormals, infinities
  // and NaN included; F64 rounded to nearest). Throws InputError naming the tensor when its
  // dtype is not convertible. The second form writes elementCount() floats to `out`.
  FloatBuffer toFloat32(const StTensorInfo& t) const;
  void toFloat32(const StTensorInfo& t, float* out) const;
  // Drops the tensor's bytes from memory once they have been converted (dropMappedPages); they
  // are read again from the file if touched. Does nothing for bytes held in memory (fromBytes).
  void releasePages(const StTensorInfo& t) const;

 private:
  struct Storage;
  std::shared_ptr<const Storage> storage_;
  std::string name_;
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
  std::size_t dataOffset_ = 0;  // 8 + N

  void parse();
};

// A tensor to write: raw little-endian bytes of `dtype`, shape product x element size of them.
struct StWriteTensor {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<std::int64_t> shape;
  std::string data;

  // A float32 tensor from values in C order.
  static StWriteTensor f32(std::string name, std::vector<std::int64_t> shape,
                           std::span<const float> values);
};

// The file's bytes: header padded with spaces so the data section starts on an 8-byte boundary,
// tensors in the order given. Throws InputError on a size mismatch or a duplicate name.
std::string safetensorsBytes(const std::vector<StWriteTensor>& tensors,
                             const std::map<std::string, std::string>& metadata = {});

// Writes atomically (temp file beside `path`, then rename). Throws InputError naming the path.
void saveSafetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                     const std::map<std::string, std::string>& metadata = {});

}  // namespace attnviz
