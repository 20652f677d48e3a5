#include "attnviz/formats/safetensors.h"

#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attnviz {

namespace {

// The format's own cap on the header (the reference implementation refuses larger ones).
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

struct DtypeRow {
  StDtype dtype;
  const char* name;
  std::size_t size;
};
constexpr std::array<DtypeRow, 15> kDtypes = {{
    {StDtype::F64, "F64", 8},
    {StDtype::F32, "F32", 4},
    {StDtype::F16, "F16", 2},
    {StDtype::BF16, "BF16", 2},
    {StDtype::I64, "I64", 8},
    {StDtype::I32, "I32", 4},
    {StDtype::I16, "I16", 2},
    {StDtype::I8, "I8", 1},
    {StDtype::U64, "U64", 8},
    {StDtype::U32, "U32", 4},
    {StDtype::U16, "U16", 2},
    {StDtype::U8, "U8", 1},
    {StDtype::BOOL, "BOOL", 1},
    {StDtype::F8_E4M3, "F8_E4M3", 1},
    {StDtype::F8_E5M2, "F8_E5M2", 1},
}};

const DtypeRow& row(StDtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.dtype == d) return r;
  return kDtypes[1];
}

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw InputError(name + ": " + what);
}

std::string shapeText(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// 65536 entries: every half-precision bit pattern, converted once.
const std::vector<float>& halfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (std::uint32_t b = 0; b < 65536; ++b) t[b] = halfToFloat(std::uint16_t(b));
    return t;
  }();
  return table;
}

}  // namespace

const char* stDtypeName(StDtype d) { return row(d).name; }
std::size_t stDtypeSize(StDtype d) { return row(d).size; }
bool stDtypeConvertible(StDtype d) {
  return d == StDtype::F64 || d == StDtype::F32 || d == StDtype::F16 || d == StDtype::BF16;
}

std::size_t StTensorInfo::elementCount() const {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= std::size_t(d);  // validated not to overflow at open()
  return n;
}

std::string StTensorInfo::shapeString() const { return shapeText(shape); }

struct SafetensorsFile::Storage {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  std::string owned;    // fromBytes
  void* map = nullptr;  // open
  std::size_t mapSize = 0;
  ~Storage() {
    if (map) ::munmap(map, mapSize);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  auto storage = std::make_shared<Storage>();
  storage->size = std::size_t(st.st_size);
  if (storage->size > 0) {
    void* m = ::mmap(nullptr, storage->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      fail(path, "cannot map (" + why + ")");
    }
    storage->map = m;
    storage->mapSize = storage->size;
    storage->data = static_cast<const std::byte*>(m);
  }
  ::close(fd);
  SafetensorsFile f;
  f.storage_ = std::move(storage);
  f.name_ = path;
  f.parse();
  return f;
}

void SafetensorsFile::releasePages(const StTensorInfo& t) const {
  if (!storage_ || !storage_->map) return;
  const std::span<const std::byte> b = bytes(t);
  dropMappedPages(b.data(), b.size());
}

SafetensorsFile SafetensorsFile::fromBytes(std::string bytes, const std::string& name) {
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(bytes);
  storage->data = reinterpret_cast<const std::byte*>(storage->owned.data());
  storage->size = storage->owned.size();
  SafetensorsFile f;
  f.storage_ = std::move(storage);
  f.name_ = name;
  f.parse();
  return f;
}

void SafetensorsFile::parse() {
  const std::size_t fileSize = storage_->size;
  if (fileSize < 8) fail(name_, "not a safetensors file (" + std::to_string(fileSize) + " bytes)");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | std::uint64_t(std::to_integer<unsigned>(storage_->data[i]));
  if (n > kMaxHeaderBytes) {
    fail(name_, "not a safetensors file (header length " + std::to_string(n) +
                    " is beyond the format's 100 MB limit)");
  }
  if (n > fileSize - 8) {
    fail(name_, "truncated: header length " + std::to_string(n) + " but the file has only " +
                    std::to_string(fileSize - 8) + " bytes after it");
  }
  const char* text = reinterpret_cast<const char*>(storage_->data + 8);
  if (n == 0 || text[0] != '{') fail(name_, "not a safetensors file (header is not a JSON object)");
  nlohmann::json header;
  std::set<std::string> keys;  // nlohmann keeps the last of duplicate keys; the format forbids them
  std::string duplicate;
  const auto noDuplicates = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& k) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && duplicate.empty() &&
        !keys.insert(k.get<std::string>()).second) {
      duplicate = k.get<std::string>();
    }
    return true;
  };
  try {
    header = nlohmann::json::parse(text, text + n, noDuplicates);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (what.size() > 160) what.resize(160);
    fail(name_, "header is not valid JSON (" + what + ")");
  }
  if (!header.is_object()) fail(name_, "header is not a JSON object");
  if (!duplicate.empty()) fail(name_, "header names '" + duplicate + "' twice");
  dataOffset_ = 8 + std::size_t(n);
  const std::size_t dataSize = fileSize - dataOffset_;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) fail(name_, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          fail(name_, "__metadata__ value '" + m.key() + "' is not a string");
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "': ";
    if (key.empty()) fail(name_, "a tensor has an empty name");
    if (!v.is_object()) fail(name_, where + "entry is not an object");
    StTensorInfo t;
    t.name = key;

    const auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) fail(name_, where + "no dtype string");
    const std::string dname = dt->get<std::string>();
    bool known = false;
    for (const DtypeRow& r : kDtypes) {
      if (dname == r.name) t.dtype = r.dtype, known = true;
    }
    if (!known) fail(name_, where + "unknown dtype '" + dname.substr(0, 32) + "'");

    const auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) fail(name_, where + "no shape array");
    if (sh->size() > 16) fail(name_, where + "shape has " + std::to_string(sh->size()) + " axes");
    std::size_t count = 1;
    bool overflow = false;
    for (const nlohmann::json& d : *sh) {
      if (!d.is_number_unsigned()) {
        fail(name_, where + "shape holds a value that is not a non-negative integer");
      }
      const std::uint64_t u = d.get<std::uint64_t>();
      if (u > std::uint64_t(std::numeric_limits<std::int64_t>::max())) overflow = true;
      t.shape.push_back(std::int64_t(u));
      if (u != 0 && count > std::numeric_limits<std::size_t>::max() / u) overflow = true;
      count = overflow ? count : count * std::size_t(u);
    }
    const std::size_t esize = stDtypeSize(t.dtype);
    if (overflow || count > std::numeric_limits<std::size_t>::max() / esize) {
      fail(name_, where + "shape " + t.shapeString() + " is too large");
    }

    const auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned()) {
      fail(name_, where + "data_offsets is not a pair of non-negative integers");
    }
    const std::uint64_t b = (*off)[0].get<std::uint64_t>(), e = (*off)[1].get<std::uint64_t>();
    if (b > e)
      fail(name_, where + "data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                      "] run backwards");
    if (e > dataSize) {
      fail(name_, where + "data_offsets end " + std::to_string(e) +
                      " is past the end of the data (" + std::to_string(dataSize) +
                      " bytes; truncated file?)");
    }
    t.begin = std::size_t(b), t.end = std::size_t(e);
    if (t.byteSize() != count * esize) {
      fail(name_, where + "shape " + t.shapeString() + " of " + dname + " needs " +
                      std::to_string(count * esize) + " bytes, data_offsets span " +
                      std::to_string(t.byteSize()));
    }
    tensors_.push_back(std::move(t));
  }
  std::stable_sort(tensors_.begin(), tensors_.end(),
                   [](const StTensorInfo& a, const StTensorInfo& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  for (std::size_t i = 1; i < tensors_.size(); ++i) {
    const StTensorInfo &p = tensors_[i - 1], &c = tensors_[i];
    // Empty tensors take no bytes and cannot overlap anything.
    if (c.begin < p.end && c.byteSize() > 0 && p.byteSize() > 0) {
      fail(name_, "tensors '" + p.name + "' and '" + c.name + "' overlap in the data section");
    }
  }
  for (std::size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const StTensorInfo* SafetensorsFile::find(const std::string& tensorName) const {
  const auto it = index_.find(tensorName);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const StTensorInfo& SafetensorsFile::at(const std::string& tensorName) const {
  const StTensorInfo* t = find(tensorName);
  if (!t) fail(name_, "no tensor '" + tensorName + "'");
  return *t;
}

std::span<const std::byte> SafetensorsFile::bytes(const StTensorInfo& t) const {
  if (!storage_ || t.end > storage_->size - dataOffset_) return {};
  return {storage_->data + dataOffset_ + t.begin, t.byteSize()};
}

std::span<const float> SafetensorsFile::f32View(const StTensorInfo& t) const {
  if (t.dtype != StDtype::F32) return {};
  const std::span<const std::byte> b = bytes(t);
  if (b.empty() || reinterpret_cast<std::uintptr_t>(b.data()) % alignof(float) != 0) return {};
  return {reinterpret_cast<const float*>(b.data()), b.size() / 4};
}

FloatBuffer SafetensorsFile::toFloat32(const StTensorInfo& t) const {
  if (!stDtypeConvertible(t.dtype)) {
    fail(name_, "tensor '" + t.name + "': dtype " + stDtypeName(t.dtype) +
                    " is not supported here (expected F32, F16, BF16 or F64)");
  }
  const std::size_t n = t.elementCount();
  if (n > Tensor3::kMaxElements) {
    fail(name_, "tensor '" + t.name + "': " + std::to_string(n) + " elements is too many");
  }
  FloatBuffer out;
  out.resize(n);  // not zero-filled: every element is written next
  toFloat32(t, out.data());
  return out;
}

void SafetensorsFile::toFloat32(const StTensorInfo& t, float* out) const {
  if (!stDtypeConvertible(t.dtype)) {
    fail(name_, "tensor '" + t.name + "': dtype " + stDtypeName(t.dtype) +
                    " is not supported here (expected F32, F16, BF16 or F64)");
  }
  const std::span<const std::byte> b = bytes(t);
  const std::size_t n = t.elementCount();
  const unsigned char* p = reinterpret_cast<const unsigned char*>(b.data());
  switch (t.dtype) {
    case StDtype::F32:
      if (n) std::memcpy(out, p, n * 4);
      break;
    case StDtype::F64:
      for (std::size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = float(d);
      }
      break;
    case StDtype::F16: {
      const std::vector<float>& table = halfTable();
      for (std::size_t i = 0; i < n; ++i) out[i] = table[p[2 * i] | (p[2 * i + 1] << 8)];
      break;
    }
    case StDtype::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        out[i] = bfloat16ToFloat(std::uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
      }
      break;
    default:
      break;
  }
}

StWriteTensor StWriteTensor::f32(std::string name, std::vector<std::int64_t> shape,
                                 std::span<const float> values) {
  StWriteTensor t;
  t.name = std::move(name);
  t.dtype = StDtype::F32;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size_bytes());
  return t;
}

std::string safetensorsBytes(const std::vector<StWriteTensor>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  // nlohmann's ordered_json keeps the tensors in the order written, as readers list them.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  std::size_t offset = 0;
  for (const StWriteTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !seen.insert(t.name).second) {
      throw InputError("safetensors: bad or duplicate tensor name '" + t.name + "'");
    }
    std::size_t count = 1;
    for (std::int64_t d : t.shape) {
      if (d < 0) throw InputError("safetensors: tensor '" + t.name + "' has a negative dimension");
      count *= std::size_t(d);
    }
    if (count * stDtypeSize(t.dtype) != t.data.size()) {
      throw InputError("safetensors: tensor '" + t.name + "' shape " + shapeText(t.shape) +
                       " does not match its " + std::to_string(t.data.size()) + " bytes");
    }
    header[t.name] = {{"dtype", stDtypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  out.reserve(8 + text.size() + offset);
  out += text;
  for (const StWriteTensor& t : tensors) out += t.data;
  return out;
}

void saveSafetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  std::string bytes;
  try {
    bytes = safetensorsBytes(tensors, metadata);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  writeFileAtomic(path, bytes);
}

}  // namespace attnviz
