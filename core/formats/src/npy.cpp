// .npy format: magic "\x93NUMPY", version (1.0: uint16 header length; 2.0/3.0: uint32), then a
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded to a
// multiple of 16 (64) bytes, then the raw data.
#include "attnviz/formats/npy.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/formats/safetensors.h"

#include <cmath>
#include <cstdint>
#include <cctype>
#include <cstring>
#include <limits>
#include <sstream>
#include <string_view>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attnviz {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw InputError(name + ": " + what);
}

// Returns the text of the value for `key` in the header dict, up to the next top-level comma.
std::string headerValue(const std::string& header, const std::string& key,
                        const std::string& name) {
  const std::string quoted1 = "'" + key + "'", quoted2 = "\"" + key + "\"";
  std::size_t at = header.find(quoted1);
  if (at == std::string::npos) at = header.find(quoted2);
  if (at == std::string::npos) fail(name, "not a valid .npy header (no '" + key + "' field)");
  std::size_t colon = header.find(':', at + quoted1.size());
  if (colon == std::string::npos) fail(name, "not a valid .npy header (bad '" + key + "' field)");
  std::size_t start = colon + 1;
  while (start < header.size() && header[start] == ' ') ++start;
  if (start >= header.size()) fail(name, "not a valid .npy header (empty '" + key + "' field)");
  std::size_t end = start;
  if (header[start] == '(') {
    end = header.find(')', start);
    if (end == std::string::npos) fail(name, "not a valid .npy header (unclosed shape)");
    return header.substr(start, end - start + 1);
  }
  if (header[start] == '\'' || header[start] == '"') {
    end = header.find(header[start], start + 1);
    if (end == std::string::npos) fail(name, "not a valid .npy header (unclosed string)");
    return header.substr(start + 1, end - start - 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  std::string v = header.substr(start, end - start);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

std::vector<long long> parseShape(const std::string& text, const std::string& name) {
  std::vector<long long> shape;
  std::size_t i = 1;  // after '('
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size() || text[i] == ')') break;
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      fail(name, "not a valid .npy header (bad shape " + text + ")");
    }
    long long v = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      v = v * 10 + (text[i] - '0');
      if (v > (1LL << 40)) fail(name, "shape " + text + " is too large");
      ++i;
    }
    shape.push_back(v);
  }
  return shape;
}

bool hostIsLittleEndian() {
  const std::uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

template <typename T>
T readLE(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

NpyHeader parseNpyHeader(std::string_view bytes, const std::string& name) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0) {
    fail(name, "not a .npy file (bad magic)");
  }
  const int major = b[6];
  std::size_t headerLen = 0, offset = 0;
  if (major == 1) {
    headerLen = readLE<std::uint16_t>(b + 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(name, "truncated .npy header");
    headerLen = readLE<std::uint32_t>(b + 8);
    offset = 12;
  } else {
    fail(name, "unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < offset + headerLen) fail(name, "truncated .npy header");
  const std::string header(bytes.substr(offset, headerLen));
  NpyHeader h;
  h.dataOffset = offset + headerLen;
  h.descr = headerValue(header, "descr", name);
  h.fortranOrder = headerValue(header, "fortran_order", name) != "False";
  h.shapeText = headerValue(header, "shape", name);
  h.shape = parseShape(h.shapeText, name);
  return h;
}

NpyArray parseNpy(const std::string& bytes, const std::string& name, bool allowBool) {
  return parseNpyView(bytes, name, allowBool);
}

NpyArray parseNpyView(std::string_view bytes, const std::string& name, bool allowBool) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  const NpyHeader h = parseNpyHeader(bytes, name);
  const std::size_t dataOffset = h.dataOffset;
  const std::string& descr = h.descr;
  const std::string& shapeText = h.shapeText;
  if (h.fortranOrder) {
    fail(name,
         "Fortran-order arrays are not supported (save with C order, e.g. np.ascontiguousarray)");
  }
  NpyArray out;
  out.shape = h.shape;

  int itemSize = 0;
  enum { F2, F4, F8, B1 } type;
  if (descr == "<f2") {
    type = F2, itemSize = 2;
  } else if (descr == "<f4") {
    type = F4, itemSize = 4;
  } else if (descr == "<f8") {
    type = F8, itemSize = 8;
  } else if (allowBool && (descr == "|b1" || descr == "|u1")) {
    type = B1, itemSize = 1;
  } else if (descr == ">f2" || descr == ">f4" || descr == ">f8") {
    fail(name,
         "big-endian data (" + descr + ") is not supported; use little-endian float32/float64");
  } else {
    fail(name, "unsupported dtype '" + descr + "'; expected float16, float32 or float64" +
                   std::string(allowBool ? ", bool or uint8" : ""));
  }
  out.kind = type == B1 ? NpyKind::Bool : NpyKind::Float;

  unsigned long long count = 1;
  for (long long d : out.shape) {
    if (d != 0 && count > (static_cast<unsigned long long>(Tensor3::kMaxElements) / d)) {
      fail(name, "shape " + shapeText + " is too large");
    }
    count *= static_cast<unsigned long long>(d);
  }
  if (count > Tensor3::kMaxElements) fail(name, "shape " + shapeText + " is too large");
  const unsigned long long need = count * itemSize;
  const unsigned long long have = bytes.size() - dataOffset;
  if (have < need) {
    fail(name, "truncated data: shape " + shapeText + " needs " + std::to_string(need) +
                   " bytes, file has " + std::to_string(have));
  }
  if (have > need) {
    fail(name, "file has " + std::to_string(have - need) + " bytes past the end of the data");
  }
  // Appended into reserved capacity: no zero-fill before the real values.
  out.data.clear();
  out.data.reserve(count);
  const unsigned char* p = b + dataOffset;
  if (type == F4 && hostIsLittleEndian() && reinterpret_cast<std::uintptr_t>(p) % 4 == 0) {
    // The common case, float32 as stored: one bulk copy (the data offset is 16-byte aligned).
    const float* f = reinterpret_cast<const float*>(p);
    out.data.assign(f, f + count);
    return out;
  }
  for (unsigned long long n = 0; n < count; ++n) {
    switch (type) {
      case F2:
        out.data.push_back(halfToFloat(readLE<std::uint16_t>(p + 2 * n)));
        break;
      case F4:
        out.data.push_back(readLE<float>(p + 4 * n));
        break;
      case F8:
        out.data.push_back(static_cast<float>(readLE<double>(p + 8 * n)));
        break;
      case B1:
        out.data.push_back(p[n] != 0 ? 1.0f : 0.0f);
        break;
    }
  }
  return out;
}

NpyArray readNpy(const std::string& path, bool allowBool) {
  // Parsed straight from a read-only mapping of the file: no copy of the bytes in between.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* map = ::mmap(nullptr, std::size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map != MAP_FAILED) {
      struct Unmap {
        void* p;
        std::size_t n;
        ~Unmap() { ::munmap(p, n); }
      } unmap{map, std::size_t(st.st_size)};
      return parseNpyView(std::string_view(static_cast<const char*>(map), unmap.n), path,
                          allowBool);
    }
  } else if (fd >= 0) {
    ::close(fd);
  }
  return parseNpy(readFile(path), path, allowBool);  // anything else: read it, or say why not
}

namespace {

Tensor3 toTensor3(NpyArray&& a, const std::string& path) {
  Tensor3 t;
  if (a.shape.size() == 2) {
    t.heads = 1, t.rows = static_cast<int>(a.shape[0]), t.cols = static_cast<int>(a.shape[1]);
  } else if (a.shape.size() == 3) {
    t.heads = static_cast<int>(a.shape[0]), t.rows = static_cast<int>(a.shape[1]),
    t.cols = static_cast<int>(a.shape[2]);
  } else {
    fail(path, "expected a 2-D [T, d] or 3-D [H, T, d] array, got " +
                   std::to_string(a.shape.size()) + "-D");
  }
  if (a.data.empty()) fail(path, "array is empty");
  t.data = std::move(a.data);
  return t;
}

}  // namespace

Tensor3 loadTensorNpy(const std::string& path, int* ndim) {
  NpyArray a = readNpy(path, false);
  if (ndim) *ndim = static_cast<int>(a.shape.size());
  Tensor3 t = toTensor3(std::move(a), path);
  if (Eigen::Map<const Eigen::ArrayXf>(t.data.data(), Eigen::Index(t.data.size())).allFinite())
    return t;  // the common case, vectorised; otherwise find the first bad value for the message
  for (std::size_t n = 0; n < t.data.size(); ++n) {
    if (!std::isfinite(t.data[n])) {
      const std::size_t h = n / t.headStride(), r = (n % t.headStride()) / t.cols, c = n % t.cols;
      std::ostringstream s;
      s << (std::isnan(t.data[n]) ? "NaN" : "Inf") << " at [" << h << ", " << r << ", " << c << "]";
      fail(path, s.str());
    }
  }
  return t;
}

MaskFile loadMaskNpy(const std::string& path) {
  NpyArray a = readNpy(path, true);
  MaskFile m;
  m.isBool = a.kind == NpyKind::Bool;
  m.values = toTensor3(std::move(a), path);
  for (float v : m.values.data) {
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
      fail(path, "mask contains NaN or +inf (a float mask may hold finite values and -inf)");
    }
  }
  return m;
}

namespace {

// The .npy header (magic, version 1.0, length, dict padded to 64 bytes) of a float32 array.
std::string npyShapeHeader(const std::vector<long long>& shape) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict << (i ? ", " : "") << shape[i];
  dict << (shape.size() == 1 ? ",), }" : "), }");
  std::string header = dict.str();
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  const auto len = static_cast<std::uint16_t>(header.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  out += header;
  return out;
}

// The header of a float32 tensor, 2-D when as2d (one head only).
std::string npyHeader(const Tensor3& t, bool as2d) {
  if (as2d && t.heads != 1)
    throw InputError("cannot write a " + t.shapeString() + " tensor as 2-D");
  if (as2d) return npyShapeHeader({t.rows, t.cols});
  return npyShapeHeader({t.heads, t.rows, t.cols});
}

}  // namespace

std::string npyBytes(const std::vector<long long>& shape, const float* data) {
  std::size_t count = 1;
  for (long long d : shape) count *= static_cast<std::size_t>(d);
  std::string out = npyShapeHeader(shape);
  out.append(reinterpret_cast<const char*>(data), count * sizeof(float));
  return out;
}

std::string npyBytes(const Tensor3& t, bool as2d) {
  std::string out = npyHeader(t, as2d);
  out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  return out;
}

void saveNpy(const std::string& path, const std::vector<long long>& shape, const float* data) {
  std::size_t count = 1;
  for (long long d : shape) count *= static_cast<std::size_t>(d);
  writeFileAtomic(path, npyShapeHeader(shape), data, count * sizeof(float));
}

void saveNpy(const std::string& path, const std::vector<long long>& shape,
             const std::vector<std::span<const float>>& parts) {
  std::size_t count = 1, have = 0;
  for (long long d : shape) count *= static_cast<std::size_t>(d);
  std::vector<FilePart> bytes;
  for (const std::span<const float>& p : parts) {
    bytes.push_back({p.data(), p.size() * sizeof(float)});
    have += p.size();
  }
  if (have != count)
    throw InputError(path + ": " + std::to_string(have) + " values for a shape of " +
                     std::to_string(count));
  writeFileAtomic(path, npyShapeHeader(shape), bytes);
}

void saveNpy(const std::string& path, const Tensor3& t, bool as2d) {
  writeFileAtomic(path, npyHeader(t, as2d), t.data.data(), t.data.size() * sizeof(float));
}

}  // namespace attnviz
