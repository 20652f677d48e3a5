// Attention dumps: the safetensors and .npz loaders share one validation (buildDump) over the
// tensors and the metadata they found.
#include "attnviz/engine/text_parse.h"
#include "attnviz/formats/dump.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/formats/npy.h"
#include "attnviz/formats/safetensors.h"
#include "attnviz/engine/engine_detail.h"
#include "attnviz/engine/parallel.h"

#include <nlohmann/json.hpp>
#include <zip.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

namespace attnviz {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// The metadata entry of an .npz holds token lists; anything past this is not metadata.
constexpr std::size_t kMaxMetadataBytes = std::size_t{64} << 20;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw InputError(name + ": " + what);
}

struct RawTensor {
  std::vector<long long> shape;
  FloatBuffer data;
};

// What a container holds before validation.
struct RawDump {
  std::map<std::string, RawTensor> tensors;  // only attn.*, q.*, k.*, v.*
  std::map<std::string, std::string> metadata;
  bool hasMetadata = false;
};

bool isDumpTensorName(const std::string& n) {
  return n.rfind("attn.", 0) == 0 || n.rfind("q.", 0) == 0 || n.rfind("k.", 0) == 0 ||
         n.rfind("v.", 0) == 0;
}

std::string shapeString(const std::vector<long long>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// "12" -> 12; -1 for anything that is not a plain decimal index ("01", "1a", "").
int parseIndex(const std::string& s) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return -1;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::vector<std::string> stringList(const std::string& file, const std::string& key,
                                    const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    fail(file, "metadata '" + key + "' is not a JSON list of strings");
  }
  std::vector<std::string> out;
  out.reserve(j.size());
  for (const nlohmann::json& e : j) {
    if (!e.is_string()) fail(file, "metadata '" + key + "' holds a value that is not a string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// A [H, R, C] tensor from a 2-D (one head), 3-D, or 4-D with a leading batch of 1.
Tensor3 toTensor3(RawTensor&& r, const std::string& file, const std::string& tensor) {
  std::vector<long long> s = r.shape;
  if (s.size() == 4 && s[0] == 1) s.erase(s.begin());
  if (s.size() == 2) s.insert(s.begin(), 1);
  if (s.size() != 3) {
    fail(file, tensor + ": expected [H, T_q, T_k] (3-D), got shape " + shapeString(r.shape));
  }
  for (long long d : s) {
    if (d < 1 || d > std::numeric_limits<int>::max()) {
      fail(file, tensor + ": shape " + shapeString(r.shape) + " has an empty or too large axis");
    }
  }
  checkedElementCount(s[0], s[1], s[2], file + ": " + tensor);
  Tensor3 t;
  t.heads = int(s[0]), t.rows = int(s[1]), t.cols = int(s[2]);
  t.data = std::move(r.data);
  return t;
}

std::string indexString(const Tensor3& t, std::size_t n) {
  const std::size_t h = n / t.headStride(), i = (n % t.headStride()) / t.cols, j = n % t.cols;
  std::ostringstream s;
  s << "[" << h << ", " << i << ", " << j << "]";
  return s.str();
}

void checkFinite(const Tensor3& t, const std::string& file, const std::string& tensor) {
  for (std::size_t n = 0; n < t.data.size(); ++n) {
    if (!std::isfinite(t.data[n])) {
      fail(file,
           tensor + ": " + (std::isnan(t.data[n]) ? "NaN" : "Inf") + " at " + indexString(t, n));
    }
  }
}

void checkWeights(const Tensor3& w, const std::string& file, const std::string& tensor) {
  for (std::size_t n = 0; n < w.data.size(); ++n) {
    const float a = w.data[n];
    if (std::isnan(a)) fail(file, tensor + ": NaN weight at " + indexString(w, n));
    if (a < 0.0f)
      fail(file, tensor + ": negative weight " + std::to_string(a) + " at " + indexString(w, n));
    if (std::isinf(a)) fail(file, tensor + ": infinite weight at " + indexString(w, n));
  }
  for (int h = 0; h < w.heads; ++h) {
    for (int i = 0; i < w.rows; ++i) {
      const float* row = w.head(h) + std::size_t(i) * w.cols;
      double sum = 0.0;
      for (int j = 0; j < w.cols; ++j) sum += row[j];
      if (sum != 0.0 && std::fabs(sum - 1.0) > kDumpRowSumTolerance) {
        std::ostringstream s;
        s << tensor << ": row [" << h << ", " << i << "] sums to " << sum
          << " (each row must sum to 1 within 1e-3, or be all 0 where fully masked)";
        fail(file, s.str());
      }
    }
  }
}

Dump buildDump(RawDump&& raw, const std::string& file) {
  if (!raw.hasMetadata) {
    fail(file,
         "missing metadata (a dump needs format_version and tokens; see docs/dumps.md)");
  }
  const auto meta = [&](const char* key) -> const std::string* {
    const auto it = raw.metadata.find(key);
    return it == raw.metadata.end() ? nullptr : &it->second;
  };
  Dump d;
  const std::string* version = meta("format_version");
  if (!version) fail(file, "missing metadata 'format_version'");
  d.formatVersion = parseIndex(*version);
  if (d.formatVersion < 1) fail(file, "metadata 'format_version' is not a version number");
  if (d.formatVersion > kDumpFormatVersion) {
    fail(file, "dump format version " + *version + " is newer than this attnviz reads (" +
                   std::to_string(kDumpFormatVersion) + ")");
  }
  const std::string* tokens = meta("tokens");
  if (!tokens) fail(file, "missing metadata 'tokens'");
  d.tokens = stringList(file, "tokens", *tokens);
  if (const std::string* k = meta("key_tokens")) d.keyTokens = stringList(file, "key_tokens", *k);
  if (const std::string* m = meta("model")) d.model = *m;

  // attn.0 .. attn.(L-1), no gaps.
  std::map<int, std::string> attn;
  for (const auto& [name, t] : raw.tensors) {
    const auto dot = name.find('.');
    const int idx = parseIndex(name.substr(dot + 1));
    if (idx < 0) fail(file, "tensor '" + name + "': expected <kind>.<layer index>, e.g. attn.0");
    if (name.compare(0, dot, "attn") == 0) attn[idx] = name;
  }
  if (attn.empty()) fail(file, "no attention tensors (attn.0, attn.1, ...)");
  const int L = int(attn.size());
  if (attn.rbegin()->first != L - 1) {
    for (int l = 0; l < L; ++l) {
      if (!attn.count(l))
        fail(file, "attn." + std::to_string(l) + " is missing (layers run to attn." +
                       std::to_string(attn.rbegin()->first) + ")");
    }
  }
  for (const auto& [name, t] : raw.tensors) {
    const int idx = parseIndex(name.substr(name.find('.') + 1));
    if (idx >= L) fail(file, "tensor '" + name + "' has no attn." + std::to_string(idx));
  }

  std::vector<std::string> names, axes;
  if (const std::string* n = meta("layer_names")) {
    names = stringList(file, "layer_names", *n);
    if (int(names.size()) != L) {
      fail(file, "metadata 'layer_names' has " + std::to_string(names.size()) + " names for " +
                     std::to_string(L) + " layers");
    }
  }
  if (const std::string* a = meta("layer_axes")) {
    axes = stringList(file, "layer_axes", *a);
    if (int(axes.size()) != L) {
      fail(file, "metadata 'layer_axes' has " + std::to_string(axes.size()) + " entries for " +
                     std::to_string(L) + " layers");
    }
  }

  const long long nq = static_cast<long long>(d.tokens.size());
  const long long nk = static_cast<long long>(d.keyTokens.size());
  for (int l = 0; l < L; ++l) {
    const std::string tname = "attn." + std::to_string(l);
    DumpLayer layer;
    layer.name = names.empty() ? std::to_string(l) : names[l];
    layer.weights = toTensor3(std::move(raw.tensors[tname]), file, tname);
    const Tensor3& w = layer.weights;
    const auto fits = [&](DumpAxes a) {
      switch (a) {
        case DumpAxes::Self:
          return w.cols == nq && w.rows <= w.cols;
        case DumpAxes::Cross:
          return nk > 0 && w.rows == nq && w.cols == nk;
        case DumpAxes::KeySelf:
          return nk > 0 && w.cols == nk && w.rows <= w.cols;
      }
      return false;
    };
    const std::string fitText = " does not fit the tokens (" + std::to_string(nq) + " tokens, " +
                                std::to_string(nk) + " key tokens)";
    if (!axes.empty()) {
      if (axes[l] == "self") {
        layer.axes = DumpAxes::Self;
      } else if (axes[l] == "cross") {
        layer.axes = DumpAxes::Cross;
      } else if (axes[l] == "key_self") {
        layer.axes = DumpAxes::KeySelf;
      } else {
        fail(file, "metadata 'layer_axes': '" + axes[l] + "' for " + tname +
                       " is not self, cross or key_self");
      }
      if (!fits(layer.axes)) {
        fail(file, tname + ": shape " + w.shapeString() + " (" + axes[l] + ")" + fitText);
      }
    } else if (fits(DumpAxes::Self)) {
      layer.axes = DumpAxes::Self;
    } else if (fits(DumpAxes::Cross)) {
      layer.axes = DumpAxes::Cross;
    } else if (fits(DumpAxes::KeySelf)) {
      layer.axes = DumpAxes::KeySelf;
    } else {
      fail(file, tname + ": shape " + w.shapeString() + fitText);
    }
    const std::vector<std::string>& qt = layer.axes == DumpAxes::KeySelf ? d.keyTokens : d.tokens;
    const std::vector<std::string>& kt = layer.axes == DumpAxes::Self ? d.tokens : d.keyTokens;
    layer.keyTokens = kt;
    if (layer.axes == DumpAxes::Cross) {
      layer.queryTokens = qt;
    } else {
      layer.queryTokens.assign(kt.end() - w.rows, kt.end());  // the last T_q positions
    }
    checkWeights(w, file, tname);

    // Optional Q, K, V.
    Tensor3* slots[3] = {&layer.q, &layer.k, &layer.v};
    const char* kinds[3] = {"q.", "k.", "v."};
    for (int s = 0; s < 3; ++s) {
      const std::string n = kinds[s] + std::to_string(l);
      const auto it = raw.tensors.find(n);
      if (it == raw.tensors.end()) continue;
      Tensor3 t = toTensor3(std::move(it->second), file, n);
      const int wantRows = s == 0 ? w.rows : w.cols;
      if (t.heads != w.heads || t.rows != wantRows) {
        fail(file, n + ": shape " + t.shapeString() + " does not match " + tname + " " +
                       w.shapeString() + " (expected [" + std::to_string(w.heads) + ", " +
                       std::to_string(wantRows) + ", d])");
      }
      checkFinite(t, file, n);
      *slots[s] = std::move(t);
    }
    if (!layer.q.empty() && !layer.k.empty() && layer.q.cols != layer.k.cols) {
      fail(file, "q." + std::to_string(l) + " and k." + std::to_string(l) +
                     " have different head sizes (" + std::to_string(layer.q.cols) + ", " +
                     std::to_string(layer.k.cols) + ")");
    }
    d.layers.push_back(std::move(layer));
  }
  return d;
}

RawDump rawFromSafetensors(const SafetensorsFile& f) {
  RawDump raw;
  raw.metadata = f.metadata();
  raw.hasMetadata = !f.metadata().empty();
  for (const StTensorInfo& t : f.tensors()) {
    if (!isDumpTensorName(t.name)) continue;
    RawTensor r;
    r.shape.assign(t.shape.begin(), t.shape.end());
    r.data = f.toFloat32(t);
    raw.tensors[t.name] = std::move(r);
  }
  return raw;
}

// --- .npz through libzip ---------------------------------------------------------------------

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

// Reads up to `n` bytes (fewer only at the end of the entry); throws on a read error.
std::size_t readSome(zip_file_t* zf, char* out, std::size_t n, const std::string& where) {
  std::size_t got = 0;
  while (got < n) {
    const zip_int64_t r = zip_fread(zf, out + got, n - got);
    if (r < 0) {
      fail(where, std::string("corrupt or truncated data (") + zip_file_strerror(zf) + ")");
    }
    if (r == 0) break;
    got += std::size_t(r);
  }
  return got;
}

// Bytes per element of a .npy dtype the dump reader takes, 0 if not.
std::size_t npyItemSize(const std::string& descr) {
  if (descr == "<f2") return 2;
  if (descr == "<f4") return 4;
  if (descr == "<f8") return 8;
  if (descr == "|u1" || descr == "|i1" || descr == "|b1") return 1;
  if (descr.size() > 2 && (descr.rfind("<U", 0) == 0 || descr.rfind("|S", 0) == 0)) {
    const int n = parseIndex(descr.substr(2));
    if (n < 1) return 0;
    return std::size_t(n) * (descr[1] == 'U' ? 4 : 1);
  }
  return 0;
}

// UTF-32LE code units to UTF-8, dropping trailing NULs (numpy pads fixed-width strings).
std::string utf32ToUtf8(const char* p, std::size_t units, const std::string& where) {
  std::string out;
  std::size_t n = units;
  while (n > 0) {
    std::uint32_t c;
    std::memcpy(&c, p + 4 * (n - 1), 4);
    if (c != 0) break;
    --n;
  }
  for (std::size_t u = 0; u < n; ++u) {
    std::uint32_t c;
    std::memcpy(&c, p + 4 * u, 4);
    if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) fail(where, "metadata is not valid text");
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xc0 | (c >> 6)), out += char(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += char(0xe0 | (c >> 12)), out += char(0x80 | ((c >> 6) & 0x3f)),
          out += char(0x80 | (c & 0x3f));
    } else {
      out += char(0xf0 | (c >> 18)), out += char(0x80 | ((c >> 12) & 0x3f)),
          out += char(0x80 | ((c >> 6) & 0x3f)), out += char(0x80 | (c & 0x3f));
    }
  }
  return out;
}

void parseNpzMetadata(const std::string& bytes, const NpyHeader& h, const std::string& where,
                      RawDump& raw) {
  const char* p = bytes.data() + h.dataOffset;
  const std::size_t n = bytes.size() - h.dataOffset;
  std::string text;
  if (h.descr.rfind("<U", 0) == 0) {
    text = utf32ToUtf8(p, n / 4, where);
  } else {
    text.assign(p, n);
    while (!text.empty() && text.back() == '\0') text.pop_back();
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    fail(where, "metadata is not a JSON object (save it as np.array(json.dumps(meta)))");
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    raw.metadata[it.key()] =
        it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  }
  raw.hasMetadata = true;
}

RawDump rawFromNpz(const std::string& bytes, const std::string& name) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  if (!src) fail(name, "cannot read the archive");
  std::unique_ptr<zip_t, ZipCloser> za(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err));
  if (!za) {
    zip_source_free(src);
    const std::string why = zip_error_strerror(&err);
    zip_error_fini(&err);
    fail(name, "not a valid .npz (zip archive: " + why + "; truncated?)");
  }
  zip_error_fini(&err);

  RawDump raw;
  const zip_int64_t entries = zip_get_num_entries(za.get(), 0);
  std::size_t total = 0;  // bytes inflated so far
  for (zip_int64_t e = 0; e < entries; ++e) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za.get(), zip_uint64_t(e), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE)) {
      fail(name, "entry " + std::to_string(e) + " cannot be read");
    }
    std::string entry = st.name;
    if (entry.size() < 5 || entry.compare(entry.size() - 4, 4, ".npy") != 0) continue;
    const std::string tensor = entry.substr(0, entry.size() - 4);
    const bool isMeta = tensor == "__metadata__";
    if (!isMeta && !isDumpTensorName(tensor)) continue;
    const std::string where = name + ": " + tensor;

    std::unique_ptr<zip_file_t, ZipFileCloser> zf(zip_fopen_index(za.get(), zip_uint64_t(e), 0));
    if (!zf) fail(where, std::string("cannot open the entry (") + zip_strerror(za.get()) + ")");
    // The .npy header first (a bounded read), so the declared size can be checked against the
    // shape before anything large is inflated.
    const std::size_t declared = std::size_t(st.size);
    std::string buf(std::min<std::size_t>(declared, 4096), '\0');
    buf.resize(readSome(zf.get(), buf.data(), buf.size(), where));
    if (buf.size() < 12)
      fail(where, "entry is cut short (" + std::to_string(buf.size()) + " bytes)");
    const auto byte = [&](int i) { return std::uint32_t(std::uint8_t(buf[i])); };
    const bool v1 = buf[6] == 1;
    const std::size_t headerEnd =
        v1 ? std::size_t(byte(8) | byte(9) << 8) + 10
           : std::size_t(byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24) + 12;
    if (headerEnd > (1u << 20)) fail(where, ".npy header too long");
    if (headerEnd > buf.size() && headerEnd <= declared) {
      const std::size_t have = buf.size();
      buf.resize(headerEnd);
      buf.resize(have + readSome(zf.get(), buf.data() + have, headerEnd - have, where));
    }
    const NpyHeader h = parseNpyHeader(buf, where);
    if (h.fortranOrder) fail(where, "Fortran-order arrays are not supported");
    const std::size_t item = npyItemSize(h.descr);
    if (item == 0) {
      fail(where, "unsupported dtype '" + h.descr +
                      (isMeta ? "' (save the metadata as np.array(json.dumps(meta)))"
                              : "' (expected float16, float32 or float64)"));
    }
    if (!isMeta && item == 1) fail(where, "unsupported dtype '" + h.descr + "' for weights");
    unsigned long long count = 1;
    for (long long d : h.shape) {
      if (d != 0 && count > Tensor3::kMaxElements / std::size_t(d))
        fail(where, "shape " + h.shapeText + " is too large");
      count *= std::size_t(d);
    }
    const unsigned long long need = h.dataOffset + count * item;
    if (isMeta && need > kMaxMetadataBytes) fail(where, "metadata is larger than 64 MB");
    if (need != declared) {
      fail(where, "the archive declares " + std::to_string(declared) + " bytes but shape " +
                      h.shapeText + " needs " + std::to_string(need) +
                      " (a corrupt file or a zip bomb); nothing was inflated");
    }
    total += need;
    if (total > Tensor3::kMaxElements * 4) fail(name, "the arrays add up to more than 8 GiB");
    const std::size_t have = buf.size();
    buf.resize(need);
    const std::size_t got = have + readSome(zf.get(), buf.data() + have, need - have, where);
    if (got != need) {
      fail(where,
           "entry is cut short: " + std::to_string(got) + " of " + std::to_string(need) + " bytes");
    }
    char extra;
    if (readSome(zf.get(), &extra, 1, where) != 0)
      fail(where, "entry holds more data than it declares");

    if (isMeta) {
      parseNpzMetadata(buf, h, where, raw);
    } else {
      NpyArray a = parseNpy(buf, where, false);
      RawTensor r;
      r.shape = a.shape;
      r.data = std::move(a.data);
      raw.tensors[tensor] = std::move(r);
    }
  }
  return raw;
}

bool looksLikeZip(const std::string& bytes) {
  return bytes.rfind("PK\x03\x04", 0) == 0 || bytes.rfind("PK\x05\x06", 0) == 0;
}

std::string lowerExt(const std::string& path) {
  const auto dot = path.rfind('.');
  std::string e = dot == std::string::npos ? "" : path.substr(dot);
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e;
}

}  // namespace

const char* dumpAxesName(DumpAxes a) {
  switch (a) {
    case DumpAxes::Self:
      return "self";
    case DumpAxes::Cross:
      return "cross";
    case DumpAxes::KeySelf:
      return "key_self";
  }
  return "self";
}

bool isDumpPath(const std::string& path) {
  const std::string e = lowerExt(path);
  return e == ".safetensors" || e == ".npz";
}

Dump parseDumpSafetensors(std::string bytes, const std::string& name) {
  const SafetensorsFile f = SafetensorsFile::fromBytes(std::move(bytes), name);
  return buildDump(rawFromSafetensors(f), name);
}

Dump parseDumpNpz(const std::string& bytes, const std::string& name) {
  return buildDump(rawFromNpz(bytes, name), name);
}

Dump loadDump(const std::string& path) {
  // Peek at the magic: a zip is an .npz whatever its name; anything else must be safetensors.
  std::string head;
  {
    const std::string ext = lowerExt(path);
    if (ext == ".npz") return parseDumpNpz(readFile(path), path);
    if (ext == ".safetensors")
      return buildDump(rawFromSafetensors(SafetensorsFile::open(path)), path);
  }
  head = readFile(path);
  if (looksLikeZip(head)) return parseDumpNpz(head, path);
  return parseDumpSafetensors(std::move(head), path);
}

void saveDump(const std::string& path, const Dump& dump) {
  // Text that is not UTF-8 is written with U+FFFD in its place rather than refused.
  const auto text = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::vector<StWriteTensor> tensors;
  nlohmann::json names = nlohmann::json::array(), axes = nlohmann::json::array();
  for (std::size_t l = 0; l < dump.layers.size(); ++l) {
    const DumpLayer& layer = dump.layers[l];
    const auto add = [&](const char* kind, const Tensor3& t) {
      if (t.empty()) return;
      tensors.push_back(
          StWriteTensor::f32(kind + std::to_string(l), {t.heads, t.rows, t.cols}, t.data));
    };
    add("attn.", layer.weights);
    add("q.", layer.q);
    add("k.", layer.k);
    add("v.", layer.v);
    names.push_back(layer.name);
    axes.push_back(dumpAxesName(layer.axes));
  }
  std::map<std::string, std::string> meta = {
      {"format_version", std::to_string(kDumpFormatVersion)},
      {"tokens", text(dump.tokens)},
      {"layer_names", text(names)},
      {"layer_axes", axes.dump()},
  };
  if (!dump.keyTokens.empty()) meta["key_tokens"] = text(dump.keyTokens);
  if (!dump.model.empty()) meta["model"] = dump.model;
  saveSafetensors(path, tensors, meta);
}

Tensor3 logWeights(const Tensor3& weights) {
  Tensor3 out(weights.heads, weights.rows, weights.cols);
  const std::size_t n = weights.data.size();
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  detail::parallelFor(int((n + kChunk - 1) / kChunk), [&](int c) {
    const std::size_t b = std::size_t(c) * kChunk, e = std::min(n, b + kChunk);
    const auto a = Eigen::Map<const Eigen::ArrayXf>(weights.data.data() + b, Eigen::Index(e - b));
    Eigen::Map<Eigen::ArrayXf>(out.data.data() + b, Eigen::Index(e - b)) =
        (a > 0.0f).select(a.log(), kNegInf);
  });
  return out;
}

void renormalizeFromLog(const Tensor3& weights, const Tensor3& logA, const AttentionParams& params,
                        AttentionResult& out, const std::vector<int>& heads) {
  const int H = weights.heads, Tq = weights.rows, Tk = weights.cols;
  if (!logA.sameShape(weights)) {
    throw InputError("log-weights " + logA.shapeString() + " do not match the weights " +
                     weights.shapeString());
  }
  validateParams(params, H, Tq, Tk);
  // Softcap bends the scores themselves (c tanh(s / c)); the weights fix the scores only up to
  // a constant per row, so the capped weights cannot be recovered from them.
  if (params.mask.softcap > 0.0f)
    throw UsageError("softcap needs the scores (q/k): a dump's weights fix them only up to a "
                     "constant per row");
  if (!out.weights.sameShape(weights)) {
    out.dims = Dims{H, Tq, Tk, 0, 0};
    out.weights = Tensor3(H, Tq, Tk);
    out.rows.assign(std::size_t(H) * Tq, RowStats{});
  }
  out.scaled = Tensor3();
  // No temperature, mask or bias: the weights stay exactly as dumped (a float16 dump's rows may
  // sum to 1 only within its precision).
  const bool identity = params.temperature == 1.0f && !params.mask.any();
  // Bias and mask through the engine's own rule, at tau = 1; tau is applied below after the row
  // maximum is subtracted, so tiny temperatures stay finite.
  AttentionParams unit = params;
  unit.temperature = 1.0f;
  const bool masked = params.mask.any();  // a temperature alone needs no logits pass
  const Tensor3 z = masked ? computeLogits(logA, unit) : Tensor3();
  const Tensor3& zt = masked ? z : logA;
  std::vector<int> list = heads;
  if (list.empty()) {
    for (int h = 0; h < H; ++h) list.push_back(h);
  }
  const float invTau = 1.0f / params.temperature;
  detail::parallelFor(int(list.size()), [&](int t) {
    const int h = list[std::size_t(t)];
    if (h < 0 || h >= H) return;
    Eigen::ArrayXf e(Tk);
    for (int i = 0; i < Tq; ++i) {
      const std::size_t off = (std::size_t(h) * Tq + i) * Tk;
      const Eigen::Map<const Eigen::ArrayXf> zr(zt.data.data() + off, Tk);
      Eigen::Map<Eigen::ArrayXf> a(out.weights.data.data() + off, Tk);
      RowStats& st = out.rows[std::size_t(h) * Tq + i];
      st = RowStats{};
      Eigen::Index arg = 0;
      const float mx = Tk > 0 ? zr.maxCoeff(&arg) : kNegInf;
      if (mx == kNegInf) {
        a.setZero();
        st.fullyMasked = true;
        continue;
      }
      float logSum = 0.0f;
      if (identity) {
        a = Eigen::Map<const Eigen::ArrayXf>(weights.data.data() + off, Tk);
        e = zr - mx;
        logSum = std::log(a.sum()) - mx;
      } else {
        e = std::isfinite(invTau) ? ((zr - mx) * invTau).eval()
                                  : ((zr - mx) / params.temperature).eval();
        a = detail::expOfGap(e);
        const float sum = a.sum();
        a /= sum;
        logSum = std::log(sum);
      }
      // Entropy -sum a log a, with log a = e - log(sum); masked keys (a = 0) add nothing.
      st.entropy = -(a > 0.0f).select(a * (e - logSum), 0.0f).sum();
      st.sum = a.sum();
      st.max = a.maxCoeff();
      st.argmax = int(arg);
    }
  });
}

AttentionResult renormalizeWeights(const Tensor3& weights, const AttentionParams& params,
                                   const std::vector<int>& heads) {
  AttentionResult r;
  const Tensor3 logA = logWeights(weights);
  renormalizeFromLog(weights, logA, params, r, heads);
  r.scaled = std::move(logA);
  return r;
}

}  // namespace attnviz
