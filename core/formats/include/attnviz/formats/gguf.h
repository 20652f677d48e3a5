// attnviz formats: GGUF files (llama.cpp, Ollama, LM Studio), versions 2 and 3, little-endian.
//
// Layout: "GGUF", version u32, tensor count u64, metadata count u64, the metadata (key string,
// value type u32, value), the tensor infos (name, n_dims u32, ne[n_dims] u64 with ne[0] the
// fastest-varying axis, type u32, offset u64 relative to the data section), padding to
// general.alignment (default 32), then the data section. Strings are u64 length + bytes.
//
// open() maps the file and validates everything before anything is used: counts and string
// lengths against the file size, value types, dimensions and their product, each tensor's byte
// size for its type, offsets in bounds, aligned and not overlapping. Errors are InputError
// "<file>: <problem>". The tensor types and the kernels over their blocks (dequantization, dot
// products, matrix-vector products) are the engine's: attnviz/engine/ggml_kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnviz {

enum class GgufValueType : std::uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8,
  Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  std::int64_t i = 0;     // every integer type and bool (u64 above INT64_MAX: wrapped; read u)
  std::uint64_t u = 0;    // every unsigned integer type and bool (signed types: i's bits)
  double f = 0.0;         // F32, F64
  std::string s;          // String
  GgufValueType arrayType = GgufValueType::U8;  // Array: the items' type
  std::vector<GgufValue> items;                 // Array (of any type; an inner array is an
                                                // item of type Array with its own arrayType)

  bool isInteger() const;  // U8..I32, U64, I64, Bool
};

struct GgufTensor {
  std::string name;
  std::vector<std::int64_t> ne;  // ne[0] fastest (columns of a matrix); ne[1] rows
  std::uint32_t type = 0;        // ggml's type id (GgmlType, attnviz/engine/ggml_kernels.h)
  std::uint64_t offset = 0;      // within the data section
  std::size_t bytes = 0;
  // Into the mapping; valid while the GgufFile lives. Aligned to the file's general.alignment
  // (the mapping is page-aligned), so F32 data is float-aligned unless a file declares an
  // alignment of 1 or 2 (ggml accepts any power of two); dotRow/dequantizeRow need no alignment.
  const unsigned char* data = nullptr;

  std::int64_t count() const;  // product of ne
  std::int64_t rows() const;   // count / ne[0] (the product of ne[1..]; 1 for a 1-D tensor)
  // A matrix view [rows(), ne[0]]: row r is rowBytes() bytes at rowData(r), whole blocks, ready
  // for dotRow(GgmlType(type), rowData(r), x, ne[0]) or dequantizeRow.
  std::size_t rowBytes() const;
  const unsigned char* rowData(std::int64_t r) const { return data + std::size_t(r) * rowBytes(); }
};

class GgufFile {
 public:
  // Maps and validates. Throws InputError naming `path` and the problem.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // The same over bytes in memory (copied), for tests and the fuzzer; `name` is what errors say.
  static std::unique_ptr<GgufFile> fromBytes(const void* data, std::size_t size,
                                             const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::size_t alignment() const { return alignment_; }
  std::size_t fileSize() const { return size_; }
  // Where the data section starts in the file (tensor offsets count from here).
  std::size_t dataOffset() const { return dataOffset_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  // Typed look-ups: nullopt when absent; InputError "<file>: <key>: expected ..." when present
  // with the wrong type. Integers accept every integer type that holds the value.
  std::optional<std::string> getString(const std::string& key) const;
  std::optional<std::int64_t> getInt(const std::string& key) const;
  std::optional<double> getFloat(const std::string& key) const;  // F32, F64 or an integer
  std::optional<bool> getBool(const std::string& key) const;
  std::optional<std::vector<std::string>> getStringArray(const std::string& key) const;
  std::optional<std::vector<float>> getFloatArray(const std::string& key) const;
  std::optional<std::vector<std::int64_t>> getIntArray(const std::string& key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* findTensor(const std::string& name) const;
  // The tensor as float32, row-major [rows, ne[0]]; throws InputError naming the tensor and its
  // type when the type is one attnviz cannot dequantize.
  std::vector<float> dequantize(const GgufTensor& t) const;
  // Drops the tensor's bytes from memory once they have been converted (dropMappedPages); they
  // are read again from the file if touched. Does nothing for bytes held in memory (fromBytes).
  void releasePages(const GgufTensor& t) const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::string path_;
  std::uint32_t version_ = 0;
  std::size_t alignment_ = 32, size_ = 0, dataOffset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensor> tensors_;
  void parse(const unsigned char* data, std::size_t size);
};

}  // namespace attnviz
