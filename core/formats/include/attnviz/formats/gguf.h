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
// "<file>: <problem>".
#pragma once

#include "attnviz/engine/isa.h"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnviz {

// ggml's tensor type ids (the ones attnviz reads, and the names of the rest for messages).
enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

// "Q4_K", "IQ2_XXS", ... or "type 99" for an id ggml does not define.
std::string ggmlTypeName(std::uint32_t type);
// Values per block (1 for F32/F16/BF16, 32 for the legacy quants, 256 for K-quants) and bytes per
// block; false for a type attnviz cannot dequantize (IQ types, Q8_1, unknown ids).
bool ggmlTypeInfo(std::uint32_t type, int& blockValues, int& blockBytes);
// Bytes of n values (n a multiple of the block size).
std::size_t ggmlRowBytes(GgmlType type, std::int64_t n);
// The block layout of every type ggml defines for files, readable or not (IQ types, Q8_1, I8 ...
// included); false for unknown ids and for ids ggml removed (Q4_2, Q4_0_4_4, ...).
bool ggmlTypeLayout(std::uint32_t type, int& blockValues, int& blockBytes);
// Whether ggml has (or had) a type with this id, so ggmlTypeName() gives it a real name.
bool ggmlTypeKnown(std::uint32_t type);

// Dequantizes n values (a multiple of the type's block size) of `type` at src into dst, exactly
// as ggml's block layouts define them (float32 arithmetic in ggml's order).
// src needs no alignment. Throws std::invalid_argument for a type ggmlTypeInfo() refuses or an n
// that is not a whole number of blocks (a caller's bug: GgufFile validated its tensors).
void dequantizeRow(GgmlType type, const void* src, float* dst, std::int64_t n);
// dot(row, x) over n values of a stored row, without expanding it to float32 first (decode's
// matrix-vector products read the blocks as they are stored). Agrees with
// dot(dequantizeRow(row), x) to float32 rounding (~1e-6 of sum |w_i x_i|), not bit for bit: the
// AVX-512 kernels scale each block's sum once. Same preconditions and errors as dequantizeRow.
float dotRow(GgmlType type, const void* row, const float* x, std::int64_t n);
// The same two through the kernels of one instruction-set level (attnviz/engine/isa.h; a level
// this CPU lacks reads as the best it has), for tests that compare the levels.
void dequantizeRowAt(Isa isa, GgmlType type, const void* src, float* dst, std::int64_t n);
float dotRowAt(Isa isa, GgmlType type, const void* row, const float* x, std::int64_t n);
// y[r] = dot(row r, x) for r in [0, nRows): a stored [nRows, n] matrix times x (decode's
// matrix-vector product), checked once for the whole matrix, with dotRow's agreement to float32
// rounding. Rows are split over the CPU threads (engine's thread pool) in chunks of about 64 KB
// of stored bytes; each y[r] is the same whichever thread computes it. Most types take dotRow's
// kernels; the K-quants (Q4_K, Q5_K, Q6_K at AVX2 and AVX-512) take x once in two 16-bit integer
// parts and multiply the codes in integers (ggml_kernels.h, QuantX16), so y[r] differs from
// dotRow in the last bits.
void matVec(GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n, const float* x,
            float* y);
// The same through the kernels of one instruction-set level, for tests that compare the levels.
void matVecAt(Isa isa, GgmlType type, const void* rows, std::int64_t nRows, std::int64_t n,
              const float* x, float* y);
// Several matVec products in one parallel loop (decode's q, k and v; gate and up): one wake-up of
// the thread pool instead of one per matrix, the same y as matVec on each.
struct MatVecJob {
  GgmlType type = GgmlType::F32;
  const void* rows = nullptr;
  std::int64_t nRows = 0, n = 0;
  const float* x = nullptr;
  float* y = nullptr;
};
void matVecBatch(const MatVecJob* jobs, int count);

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
  std::uint32_t type = 0;
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
