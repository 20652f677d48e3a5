// GGUF reader: maps the file, validates every count, length, type, shape and byte span against
// the file before anything is used, then hands out views into the mapping.
//
// Facts from ggml's own reader (ggml/src/gguf.cpp) that this one follows: versions 2 and 3
// (1 had 32-bit counts); general.alignment is a uint32 and a power of two (default 32); a tensor
// has at most 4 dimensions, each >= 0, and its row (ne[0]) is a whole number of blocks; the data
// section starts at the first multiple of the alignment after the tensor infos. Where ggml is
// stricter than the format (it wants tensors packed in order, refuses arrays of arrays) this
// reader accepts what the format allows and checks what makes a view safe: offsets aligned, in
// bounds and not overlapping.
#include "attnviz/formats/gguf.h"

#include "attnviz/engine/ggml_kernels.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attnviz {

namespace {

// What a container reserves for a count read from the header: never more than this many
// entries up front (a corrupt count in a large file would otherwise ask for gigabytes before a
// single entry is read); the rest grows as entries really arrive.
std::size_t reserveHint(std::uint64_t n) { return std::size_t(std::min<std::uint64_t>(n, 4096)); }

constexpr std::uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
// Arrays of arrays nest at most this deep (the format sets no bound; a bound keeps recursion
// finite on hostile input).
constexpr int kMaxArrayDepth = 16;
// Array elements over the whole file: each becomes a GgufValue (~100 bytes), so a bound keeps a
// hostile file from turning a few hundred MB of u8s into tens of GB. Real vocabularies hold
// about 4 values per token (tokens, scores, types, merges) for at most a few 100k tokens.
constexpr std::uint64_t kMaxArrayValues = std::uint64_t{1} << 25;
// The least bytes a tensor info and a metadata pair can take: name length, n_dims, type, offset;
// key length, value type, a one-byte value.
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr std::uint64_t kMinKvBytes = 8 + 4 + 1;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw InputError(name + ": " + what);
}

const char* valueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
      return "uint8";
    case GgufValueType::I8:
      return "int8";
    case GgufValueType::U16:
      return "uint16";
    case GgufValueType::I16:
      return "int16";
    case GgufValueType::U32:
      return "uint32";
    case GgufValueType::I32:
      return "int32";
    case GgufValueType::F32:
      return "float32";
    case GgufValueType::Bool:
      return "bool";
    case GgufValueType::String:
      return "string";
    case GgufValueType::Array:
      return "array";
    case GgufValueType::U64:
      return "uint64";
    case GgufValueType::I64:
      return "int64";
    case GgufValueType::F64:
      return "float64";
  }
  return "?";
}

std::string describe(const GgufValue& v) {
  if (v.type != GgufValueType::Array) return valueTypeName(v.type);
  return std::string("array of ") + valueTypeName(v.arrayType);
}

// Bytes one value of a type takes at least (strings: their length; arrays: type and count).
std::uint64_t minValueBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool:
      return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
      return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
      return 8;
    case GgufValueType::String:
      return 8;
    case GgufValueType::Array:
      return 12;
  }
  return 1;
}

bool knownValueType(std::uint32_t t) { return t <= std::uint32_t(GgufValueType::F64); }

std::string quotedName(const std::string& s) {
  std::string out = "'";
  for (char c : s.size() > 80 ? s.substr(0, 80) + "..." : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "'";
}

// A cursor over the header bytes. `where` names what is being read for the messages (set per
// metadata key and per tensor, not per value).
class Cursor {
 public:
  Cursor(const unsigned char* data, std::size_t size, const std::string& name)
      : p_(data), size_(size), name_(name) {}

  std::size_t pos() const { return pos_; }
  std::size_t left() const { return size_ - pos_; }
  std::string where = "the header";

  template <class T>
  T get() {
    if (sizeof(T) > left()) truncated();
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string str() {
    const auto n = get<std::uint64_t>();
    if (n > left()) {
      fail(name_, where + ": string length " + std::to_string(n) +
                      " runs past the end of the file (" + std::to_string(left()) + " bytes left)");
    }
    std::string s(reinterpret_cast<const char*>(p_ + pos_), std::size_t(n));
    pos_ += std::size_t(n);
    return s;
  }

  [[noreturn]] void truncated() const {
    fail(name_,
         "truncated: the file ends inside " + where + " (" + std::to_string(size_) + " bytes)");
  }

 private:
  const unsigned char* p_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const std::string& name_;
};

struct ValueReader {
  Cursor& c;
  const std::string& name;
  std::uint64_t arrayValues = 0;

  GgufValue read(std::uint32_t rawType, int depth) {
    if (!knownValueType(rawType)) {
      fail(name, c.where + ": unknown value type " + std::to_string(rawType));
    }
    GgufValue v;
    v.type = GgufValueType(rawType);
    switch (v.type) {
      case GgufValueType::U8:
        setU(v, c.get<std::uint8_t>());
        break;
      case GgufValueType::I8:
        setI(v, c.get<std::int8_t>());
        break;
      case GgufValueType::U16:
        setU(v, c.get<std::uint16_t>());
        break;
      case GgufValueType::I16:
        setI(v, c.get<std::int16_t>());
        break;
      case GgufValueType::U32:
        setU(v, c.get<std::uint32_t>());
        break;
      case GgufValueType::I32:
        setI(v, c.get<std::int32_t>());
        break;
      case GgufValueType::U64:
        setU(v, c.get<std::uint64_t>());
        break;
      case GgufValueType::I64:
        setI(v, c.get<std::int64_t>());
        break;
      case GgufValueType::F32:
        v.f = c.get<float>();
        break;
      case GgufValueType::F64:
        v.f = c.get<double>();
        break;
      case GgufValueType::Bool: {
        const auto b = c.get<std::uint8_t>();
        if (b > 1) fail(name, c.where + ": bool value " + std::to_string(b) + " (must be 0 or 1)");
        setU(v, b);
        break;
      }
      case GgufValueType::String:
        v.s = c.str();
        break;
      case GgufValueType::Array:
        readArray(v, depth + 1);
        break;
    }
    return v;
  }

  void readArray(GgufValue& v, int depth) {
    if (depth > kMaxArrayDepth) {
      fail(name, c.where + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
    }
    const auto et = c.get<std::uint32_t>();
    if (!knownValueType(et)) {
      fail(name, c.where + ": unknown value type " + std::to_string(et) + " for array elements");
    }
    v.arrayType = GgufValueType(et);
    const auto n = c.get<std::uint64_t>();
    if (n > c.left() / minValueBytes(v.arrayType)) {
      fail(name, c.where + ": array of " + std::to_string(n) + " " + valueTypeName(v.arrayType) +
                     " values runs past the end of the file (" + std::to_string(c.left()) +
                     " bytes left)");
    }
    arrayValues += n;
    if (arrayValues > kMaxArrayValues) {
      fail(name, c.where + ": the metadata arrays hold more than " +
                     std::to_string(kMaxArrayValues) + " values");
    }
    v.items.reserve(reserveHint(n));
    for (std::uint64_t k = 0; k < n; ++k) {
      if (v.arrayType == GgufValueType::Array) {
        GgufValue inner;
        inner.type = GgufValueType::Array;
        readArray(inner, depth + 1);
        v.items.push_back(std::move(inner));
      } else {
        v.items.push_back(read(et, depth));
      }
    }
  }

  static void setU(GgufValue& v, std::uint64_t u) {
    v.u = u;
    v.i = std::int64_t(u);  // wraps above INT64_MAX: u holds the value
  }
  static void setI(GgufValue& v, std::int64_t i) {
    v.i = i;
    v.u = std::uint64_t(i);  // the same bits
  }
};

std::string shapeText(const std::vector<std::int64_t>& ne) {
  std::string s = "[";
  for (std::size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

bool isSignedInt(GgufValueType t) {
  return t == GgufValueType::I8 || t == GgufValueType::I16 || t == GgufValueType::I32 ||
         t == GgufValueType::I64;
}

}  // namespace

// ---------------------------------------------------------------------------------- values

bool GgufValue::isInteger() const {
  switch (type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::U16:
    case GgufValueType::I16:
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::Bool:
      return true;
    default:
      return false;
  }
}

std::int64_t GgufTensor::count() const {
  std::int64_t n = 1;
  for (std::int64_t d : ne) n *= d;  // validated not to overflow
  return n;
}

std::int64_t GgufTensor::rows() const {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < ne.size(); ++i) n *= ne[i];
  return n;
}

std::size_t GgufTensor::rowBytes() const {
  return ne.empty() ? 0 : ggmlRowBytes(GgmlType(type), ne[0]);
}

// --------------------------------------------------------------------------------- mapping

struct GgufFile::Mapping {
  void* map = nullptr;
  std::size_t mapSize = 0;
  std::string owned;  // fromBytes
  ~Mapping() {
    if (map) ::munmap(map, mapSize);
  }
};

GgufFile::~GgufFile() = default;

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->map_ = std::make_unique<Mapping>();
  const std::size_t size = std::size_t(st.st_size);
  const unsigned char* data = nullptr;
  if (size > 0) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      fail(path, "cannot map (" + why + ")");
    }
    f->map_->map = m;
    f->map_->mapSize = size;
    data = static_cast<const unsigned char*>(m);
  }
  ::close(fd);
  f->parse(data, size);
  return f;
}

void GgufFile::releasePages(const GgufTensor& t) const {
  if (map_ && map_->map) dropMappedPages(t.data, t.bytes);
}

std::unique_ptr<GgufFile> GgufFile::fromBytes(const void* data, std::size_t size,
                                              const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->map_ = std::make_unique<Mapping>();
  if (size > 0) f->map_->owned.assign(static_cast<const char*>(data), size);
  f->parse(reinterpret_cast<const unsigned char*>(f->map_->owned.data()), size);
  return f;
}

// ----------------------------------------------------------------------------------- parse

void GgufFile::parse(const unsigned char* data, std::size_t size) {
  const std::string& name = path_;
  size_ = size;
  static const unsigned char kMagic[4] = {'G', 'G', 'U', 'F'};
  const std::size_t magicBytes = std::min<std::size_t>(size, 4);
  if (magicBytes > 0 && std::memcmp(data, kMagic, magicBytes) != 0) {
    fail(name, "not a GGUF file (bad magic)");
  }
  if (size < 4) {
    fail(name, "truncated: " + std::to_string(size) + " bytes, too short for a GGUF header");
  }
  Cursor c(data + 4, size - 4, name);
  c.where = "the header";
  version_ = c.get<std::uint32_t>();
  if (version_ == 1) {
    fail(name, "GGUF version 1 is not supported (it predates 64-bit counts; re-convert the model)");
  }
  if (version_ != 2 && version_ != 3) {
    fail(name, "unsupported GGUF version " + std::to_string(version_) +
                   " (attnviz reads versions 2 and 3)");
  }
  const auto nTensors = c.get<std::uint64_t>();
  const auto nKv = c.get<std::uint64_t>();
  if (nTensors > c.left() / kMinTensorInfoBytes) {
    fail(name, "tensor count " + std::to_string(nTensors) + " is more than the file's " +
                   std::to_string(size) + " bytes could hold");
  }
  if (nKv > c.left() / kMinKvBytes) {
    fail(name, "metadata count " + std::to_string(nKv) + " is more than the file's " +
                   std::to_string(size) + " bytes could hold");
  }

  // Metadata.
  ValueReader values{c, name};
  kv_.reserve(reserveHint(nKv));
  std::unordered_set<std::string> keys;
  keys.reserve(reserveHint(nKv));
  for (std::uint64_t i = 0; i < nKv; ++i) {
    c.where = "metadata key " + std::to_string(i);
    std::string key = c.str();
    if (key.empty()) fail(name, "metadata key " + std::to_string(i) + " is empty");
    c.where = "metadata value " + quotedName(key);
    if (!keys.insert(key).second) fail(name, "duplicate metadata key " + quotedName(key));
    const auto type = c.get<std::uint32_t>();
    GgufValue v = values.read(type, 0);
    kv_.emplace_back(std::move(key), std::move(v));
  }

  alignment_ = kDefaultAlignment;
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufValueType::U32) {
      fail(name, "general.alignment must be a uint32, not " + describe(*a));
    }
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      fail(name, "general.alignment " + std::to_string(a->u) + " is not a power of two");
    }
    alignment_ = std::size_t(a->u);
  }

  // Tensor infos.
  tensors_.reserve(reserveHint(nTensors));
  std::unordered_set<std::string> names;
  names.reserve(reserveHint(nTensors));
  for (std::uint64_t i = 0; i < nTensors; ++i) {
    c.where = "tensor info " + std::to_string(i);
    GgufTensor t;
    t.name = c.str();
    const std::string tn = "tensor " + quotedName(t.name);
    c.where = tn;
    if (!names.insert(t.name).second) fail(name, "duplicate tensor name " + quotedName(t.name));
    const auto nDims = c.get<std::uint32_t>();
    if (nDims > std::uint32_t(kMaxDims)) {
      fail(name, tn + " has " + std::to_string(nDims) + " dimensions (ggml allows at most " +
                     std::to_string(kMaxDims) + ")");
    }
    // ggml treats 0 dimensions as a scalar: ne = [1].
    // The product of the non-zero dimensions must fit an int64, so that count() and rows()
    // (which skips ne[0]) never overflow, even for an empty tensor.
    std::int64_t product = 1;
    bool overflow = false, empty = false;
    for (std::uint32_t d = 0; d < nDims; ++d) {
      const auto u = c.get<std::uint64_t>();
      if (u > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
        fail(name, tn + ": dimension " + std::to_string(d) + " is " + std::to_string(u) +
                       " (negative as ggml reads it)");
      }
      const auto e = std::int64_t(u);
      empty = empty || e == 0;
      if (e != 0 && product > std::numeric_limits<std::int64_t>::max() / e) overflow = true;
      if (e != 0 && !overflow) product *= e;
      t.ne.push_back(e);
    }
    const std::int64_t count = empty ? 0 : product;
    if (t.ne.empty()) t.ne.push_back(1);
    t.type = c.get<std::uint32_t>();
    t.offset = c.get<std::uint64_t>();
    if (overflow) {
      fail(name, tn + ": shape " + shapeText(t.ne) + " has more elements than an int64 holds");
    }
    const std::string typeName = ggmlTypeName(t.type);
    int blockValues = 0, blockBytes = 0;
    if (!ggmlTypeKnown(t.type)) {
      fail(name, tn + ": unknown tensor type " + std::to_string(t.type));
    }
    if (!ggmlTypeLayout(t.type, blockValues, blockBytes)) {
      fail(name, tn + ": tensor type " + typeName + " (" + std::to_string(t.type) +
                     ") is no longer defined by ggml");
    }
    if (t.ne[0] % blockValues != 0) {
      fail(name, tn + ": a row of " + std::to_string(t.ne[0]) +
                     " values is not a whole number of " + typeName + " blocks of " +
                     std::to_string(blockValues));
    }
    // A row's bytes fit a size_t even when another axis is 0 (rowBytes() of an empty tensor).
    if (std::uint64_t(t.ne[0]) / std::uint64_t(blockValues) >
        std::numeric_limits<std::size_t>::max() / std::uint64_t(blockBytes)) {
      fail(name, tn + ": a row of " + std::to_string(t.ne[0]) + " " + typeName +
                     " values does not fit in memory");
    }
    const std::uint64_t blocks = std::uint64_t(count) / std::uint64_t(blockValues);
    if (blocks > std::uint64_t(size) / std::uint64_t(blockBytes)) {
      fail(name, tn + ": " + typeName + " data of shape " + shapeText(t.ne) +
                     " runs past the end of the file (" + std::to_string(size) + " bytes)");
    }
    t.bytes = std::size_t(blocks * std::uint64_t(blockBytes));
    if (t.offset % alignment_ != 0) {
      fail(name, tn + ": offset " + std::to_string(t.offset) + " is not aligned to " +
                     std::to_string(alignment_) + " bytes");
    }
    tensors_.push_back(std::move(t));
  }

  // The data section: the first multiple of the alignment after the infos.
  const std::uint64_t infoEnd = 4 + std::uint64_t(c.pos());
  const std::uint64_t dataStart = (infoEnd + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && dataStart > size) {
    fail(name, "truncated: the data section would start at byte " + std::to_string(dataStart) +
                   ", past the end of the file (" + std::to_string(size) + " bytes)");
  }
  dataOffset_ = std::size_t(dataStart);
  const std::uint64_t dataSize = dataStart <= size ? size - dataStart : 0;
  for (GgufTensor& t : tensors_) {
    if (t.offset > dataSize || t.bytes > dataSize - t.offset) {
      fail(name, "tensor " + quotedName(t.name) + ": its data (" + std::to_string(t.bytes) +
                     " bytes at offset " + std::to_string(t.offset) +
                     ") runs past the end of the file (data section of " +
                     std::to_string(dataSize) + " bytes)");
    }
    t.data = data + dataStart + t.offset;
  }
  // No two tensors share a byte (empty tensors own none).
  std::vector<const GgufTensor*> order;
  order.reserve(tensors_.size());
  for (const GgufTensor& t : tensors_)
    if (t.bytes > 0) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const GgufTensor& a = *order[i - 1];
    const GgufTensor& b = *order[i];
    if (a.offset + a.bytes > b.offset) {
      fail(name, "tensors " + quotedName(a.name) + " and " + quotedName(b.name) + " overlap (bytes " +
                     std::to_string(a.offset) + "+" + std::to_string(a.bytes) + " and " +
                     std::to_string(b.offset) + "+" + std::to_string(b.bytes) +
                     " of the data section)");
    }
  }
}

// --------------------------------------------------------------------------------- look-ups

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensor* GgufFile::findTensor(const std::string& name) const {
  for (const GgufTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

[[noreturn]] void wrongType(const std::string& file, const std::string& key, const char* expected,
                            const GgufValue& v) {
  fail(file, key + ": expected " + expected + ", found " + describe(v));
}

// The integer value of v, when it is an integer that fits int64.
bool intValue(const GgufValue& v, std::int64_t& out) {
  if (!v.isInteger()) return false;
  if (!isSignedInt(v.type) && v.u > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
    return false;
  }
  out = v.i;
  return true;
}

bool floatValue(const GgufValue& v, double& out) {
  if (v.type == GgufValueType::F32 || v.type == GgufValueType::F64) {
    out = v.f;
    return true;
  }
  if (!v.isInteger()) return false;
  out = isSignedInt(v.type) ? double(v.i) : double(v.u);
  return true;
}

}  // namespace

std::optional<std::string> GgufFile::getString(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::String) wrongType(path_, key, "a string", *v);
  return v->s;
}

std::optional<std::int64_t> GgufFile::getInt(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  std::int64_t i = 0;
  if (!v->isInteger()) wrongType(path_, key, "an integer", *v);
  if (!intValue(*v, i)) fail(path_, key + ": " + std::to_string(v->u) + " does not fit an int64");
  return i;
}

std::optional<double> GgufFile::getFloat(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  double f = 0.0;
  if (!floatValue(*v, f)) wrongType(path_, key, "a number", *v);
  return f;
}

std::optional<bool> GgufFile::getBool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::Bool) wrongType(path_, key, "a bool", *v);
  return v->i != 0;
}

std::optional<std::vector<std::string>> GgufFile::getStringArray(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::Array || v->arrayType != GgufValueType::String) {
    wrongType(path_, key, "an array of strings", *v);
  }
  std::vector<std::string> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) out.push_back(item.s);
  return out;
}

std::optional<std::vector<float>> GgufFile::getFloatArray(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::Array || v->arrayType == GgufValueType::String ||
      v->arrayType == GgufValueType::Array) {
    wrongType(path_, key, "an array of numbers", *v);
  }
  std::vector<float> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) {
    double f = 0.0;
    floatValue(item, f);
    out.push_back(float(f));
  }
  return out;
}

std::optional<std::vector<std::int64_t>> GgufFile::getIntArray(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::Array || v->arrayType == GgufValueType::F32 ||
      v->arrayType == GgufValueType::F64 || v->arrayType == GgufValueType::String ||
      v->arrayType == GgufValueType::Array) {
    wrongType(path_, key, "an array of integers", *v);
  }
  std::vector<std::int64_t> out;
  out.reserve(v->items.size());
  for (std::size_t k = 0; k < v->items.size(); ++k) {
    std::int64_t i = 0;
    if (!intValue(v->items[k], i)) {
      fail(path_, key + ": item " + std::to_string(k) + " (" + std::to_string(v->items[k].u) +
                      ") does not fit an int64");
    }
    out.push_back(i);
  }
  return out;
}

std::vector<float> GgufFile::dequantize(const GgufTensor& t) const {
  int blockValues = 0, blockBytes = 0;
  if (!ggmlTypeInfo(t.type, blockValues, blockBytes)) {
    fail(path_, "tensor " + quotedName(t.name) + " has type " + ggmlTypeName(t.type) +
                    ", which attnviz cannot dequantize (it reads F32, F16, BF16, Q4_0, Q4_1, "
                    "Q5_0, Q5_1, Q8_0 and Q2_K to Q6_K)");
  }
  const std::int64_t n = t.count();
  if (std::uint64_t(n) > Tensor3::kMaxElements) {
    fail(path_, "tensor " + quotedName(t.name) + " has " + std::to_string(n) +
                    " values, more than attnviz converts at once (" +
                    std::to_string(Tensor3::kMaxElements) + ")");
  }
  std::vector<float> out(static_cast<std::size_t>(n));
  if (n == 0) return out;
  const std::int64_t cols = t.ne[0], rows = t.rows();
  const std::size_t rowBytes = t.rowBytes();
  for (std::int64_t r = 0; r < rows; ++r) {
    dequantizeRow(GgmlType(t.type), t.data + std::size_t(r) * rowBytes,
                  out.data() + std::size_t(r) * std::size_t(cols), cols);
  }
  return out;
}

}  // namespace attnviz
