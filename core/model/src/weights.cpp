// The loader: a model folder or GGUF file checked against its family's row of the table, then
// mapped, converted or kept as stored into the skeleton's slots; the memory budget.
#include "attnviz/engine/parallel.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/formats/safetensors.h"
#include "model_internal.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace attnviz {

namespace {

// Mapped float32 weights up to this many bytes have their page tables filled at open.
constexpr std::size_t kPopulateMaxBytes = std::size_t{1} << 30;

std::string shapeText(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// One stored tensor, wherever it lives.
struct Found {
  std::string name;                 // as stored
  std::vector<std::int64_t> shape;  // row-major (outermost first)
  std::string dtype;                // "F32", "BF16", "Q4_K", ...
  const StTensorInfo* st = nullptr;
  const SafetensorsFile* stFile = nullptr;
  const GgufTensor* gg = nullptr;
};

// A tensor the family's row asks for, resolved for one layer (or the model).
struct Want {
  std::string name;                 // as errors name it (the HF name, or llama.cpp's)
  std::vector<std::string> names;   // where it may be stored
  std::vector<std::int64_t> shape;
  int layer = -1;                   // -1: a model-wide tensor
  int slot = 0;                     // a Slot (layer >= 0) or a Global
  Found found;
};

std::string layerPrefix(const char* pattern, int l) {
  std::string p = pattern;
  const std::size_t at = p.find("{}");
  return at == std::string::npos ? p : p.substr(0, at) + std::to_string(l) + p.substr(at + 2);
}

std::vector<std::string> splitAlternatives(const std::string& s) {
  std::vector<std::string> out;
  std::size_t a = 0;
  for (std::size_t b; (b = s.find('|', a)) != std::string::npos; a = b + 1)
    out.push_back(s.substr(a, b - a));
  out.push_back(s.substr(a));
  return out;
}

LinearView outIn(const float* W, const float* b, int in, int out) {
  LinearView v;
  v.w = W, v.b = b, v.in = in, v.out = out, v.ld = in, v.inMajor = false;
  return v;
}

}  // namespace

void layerViews(Model::Weights::Layer& L, const ModelConfig& c, bool inMajor) {
  const int d = c.nEmbd, I = c.nInner, dh = c.headSize;
  const int dq = c.nHead * dh, dkv = c.nKvHead * dh, dqkv = dq + 2 * dkv;
  // `n` outputs starting at output `first` of matrix w ([in, out] rows: columns; [out, in]:
  // rows), with its bias slice; null stays null (a layer not converted yet).
  auto part = [&](const float* w, const float* b, int in, int out, int first, int n) {
    LinearView v;
    v.in = in, v.out = n, v.inMajor = inMajor;
    v.ld = inMajor ? out : in;
    v.w = w ? (inMajor ? w + first : w + std::size_t(first) * in) : nullptr;
    v.b = b ? b + first : nullptr;
    return v;
  };
  using S = Slot;
  if (L.fusedQkv) {
    L.q = part(L[S::Qkv], L[S::QkvB], d, dqkv, 0, dq);
    L.k = part(L[S::Qkv], L[S::QkvB], d, dqkv, dq, dkv);
    L.v = part(L[S::Qkv], L[S::QkvB], d, dqkv, dq + dkv, dkv);
    const StoredMatrix& s = L.s[int(S::Qkv)];
    if (s) L.qS = s.rowSlice(0, dq), L.kS = s.rowSlice(dq, dkv), L.vS = s.rowSlice(dq + dkv, dkv);
  } else {
    L.q = part(L[S::Q], L[S::QB], d, dq, 0, dq);
    L.k = part(L[S::K], L[S::KB], d, dkv, 0, dkv);
    L.v = part(L[S::V], L[S::VB], d, dkv, 0, dkv);
    L.qS = L.s[int(S::Q)], L.kS = L.s[int(S::K)], L.vS = L.s[int(S::V)];
  }
  L.o = part(L[S::O], L[S::OB], dq, d, 0, d);
  L.oS = L.s[int(S::O)];
  if (L.fusedGateUp) {  // [gate; up] rows
    L.gate = part(L[S::GateUp], L[S::GateUpB], d, 2 * I, 0, I);
    L.up = part(L[S::GateUp], L[S::GateUpB], d, 2 * I, I, I);
    const StoredMatrix& s = L.s[int(S::GateUp)];
    if (s) L.gateS = s.rowSlice(0, I), L.upS = s.rowSlice(I, I);
  } else {
    L.gate = part(L[S::Gate], L[S::GateB], d, I, 0, I);
    L.up = part(L[S::Up], L[S::UpB], d, I, 0, I);
    L.gateS = L.s[int(S::Gate)], L.upS = L.s[int(S::Up)];
  }
  L.down = part(L[S::Down], L[S::DownB], I, d, 0, d);
  L.downS = L.s[int(S::Down)];
  L.xq = part(L[S::XQ], L[S::XQB], d, dq, 0, dq);
  L.xk = part(L[S::XK], L[S::XKB], d, dkv, 0, dkv);
  L.xv = part(L[S::XV], L[S::XVB], d, dkv, 0, dkv);
  L.xo = part(L[S::XO], L[S::XOB], dq, d, 0, d);
  L.xqS = L.s[int(S::XQ)], L.xkS = L.s[int(S::XK)], L.xvS = L.s[int(S::XV)];
  L.xoS = L.s[int(S::XO)];
}

std::int64_t defaultMemoryBudget() {
  // 1 GiB, or a quarter of physical RAM when that is less. Measured on a Llama-3.2-1B-shaped GGUF
  // (docs/performance.md, "Large models"): converting its 4.9 GB of float32 copies at open is never
  // faster than converting each layer into the pass's scratch as it runs (F16, T = 512: 5.6 s
  // against 5.2 s with free memory, 14 s when the kernel must first evict the page cache to find 5
  // GB), and it takes twice the memory (5.2 GB against 2.6 GB). Models up to ~250M parameters still
  // convert once, which the repeated passes of the app (each intervention reruns from its layer)
  // prefer.
  constexpr std::int64_t kCap = std::int64_t(1) << 30;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return kCap;
  return std::min(kCap, std::int64_t(pages) * page / 4);
}

std::int64_t parseMemorySize(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  std::string unit = text.substr(i);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();  // "MB", "GiB"
  if (unit.size() == 2 && unit[1] == 'I') unit.pop_back();
  const std::map<std::string, int> shifts = {{"", 0}, {"K", 10}, {"M", 20}, {"G", 30}, {"T", 40}};
  const auto shift = shifts.find(unit);
  if (i == 0 || i > 15 || shift == shifts.end()) {
    throw InputError("'" + text + "' is not a size: expected bytes, or a number with K, M, G or T "
                     "(e.g. 512M, 4G)");
  }
  return std::stoll(text.substr(0, i)) << shift->second;
}

std::string memorySizeText(std::int64_t bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB"};
  int u = 0;
  double v = double(bytes);
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", v, units[u]);
  return buf;
}

std::string countText(long long n) {
  if (n < 0) return "-" + countText(n == LLONG_MIN ? LLONG_MAX : -n);
  if (n < 1000) return std::to_string(n);
  const char* units[] = {"", " k", " M", " B", " T"};
  int u = 0;
  double v = double(n);
  // Rounded to three digits first: 999,999 is "1 M", not "1e+03 k".
  while (v >= 999.5 && u < 4) v /= 1000.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%s", v, units[u]);
  return buf;
}

std::unique_ptr<Model> Model::open(const std::string& path, const Progress& progress,
                                   std::int64_t maxMemory) {
  auto report = [&](double f, const std::string& what) {
    if (progress) progress(f, what);
  };
  std::unique_ptr<Model> m(new Model());
  auto w = std::make_unique<Weights>();
  report(0.0, "locating the model files");
  m->files_ = locateModelFiles(path, true);
  const bool isGguf = !m->files_.gguf.empty();
  std::map<std::string, Found> stored;  // every tensor by name
  if (isGguf) {
    report(0.01, "validating " + m->files_.gguf);
    w->gguf = GgufFile::open(m->files_.gguf);
    m->config_ = ggufModelConfig(*w->gguf);
    report(0.05, "reading the GGUF tokenizer");
    m->tokenizer_ = loadGgufTokenizer(*w->gguf);
    for (const GgufTensor& t : w->gguf->tensors()) {
      Found f;
      f.name = t.name;
      f.shape.assign(t.ne.rbegin(), t.ne.rend());
      f.dtype = ggmlTypeName(t.type);
      f.gg = &t;
      stored[t.name] = f;
    }
  } else {
    report(0.0, "reading config.json");
    m->config_ = loadModelConfig(m->files_.config);
    const std::string gen = m->files_.dir + "/generation_config.json";
    if (std::filesystem::is_regular_file(gen)) addGenerationConfig(m->config_, readFile(gen));
    report(0.02, "reading the tokenizer");
    m->tokenizer_ = loadFolderTokenizer(m->files_.dir, m->config_.vocabSize);
    // A tokenizer.json's document tree was freed in many small pieces: give them back to the
    // system, so that the peak while the pass runs is the mapped file plus the activations.
    trimHeap();
    for (std::size_t s = 0; s < m->files_.shards.size(); ++s) {
      report(0.05 + 0.05 * double(s) / double(m->files_.shards.size()),
             "validating " + m->files_.shards[s]);
      w->files.push_back(SafetensorsFile::open(m->files_.shards[s]));
    }
    for (const SafetensorsFile& file : w->files) {
      for (const StTensorInfo& t : file.tensors()) {
        Found f;
        f.name = t.name;
        f.shape = t.shape;
        f.dtype = stDtypeName(t.dtype);
        f.st = &t;
        f.stFile = &file;
        if (stored.count(t.name)) {
          throw InputError(file.name() + ": tensor '" + t.name + "' is also in another shard");
        }
        stored[t.name] = f;
      }
    }
  }
  const ModelConfig& c = m->config_;
  const FamilyRow& row = isGguf ? *familyByGgufArch(w->gguf->getString("general.architecture")
                                                        .value_or(""))
                                : *familyByName(c.layout.empty() ? c.family : c.layout);
  const std::string wpath = m->files_.weights;
  // GPT-2's Conv1D weights are stored [in, out] in HF folders and [out, in] in GGUF files.
  const bool conv1dInMajor = !isGguf && row.conv1dFolders;

  // A table entry resolved: the names it may have, its shape in the file's layout. `stack` 1:
  // an encoder-decoder's encoder layer (kept at nLayer + layer).
  auto resolve = [&](const TensorRow& t, int layer, int stack = 0) -> std::optional<Want> {
    const char* base = isGguf ? t.gguf : t.hf;
    if (!base) return std::nullopt;
    Want e;
    e.layer = layer >= 0 && stack == 1 ? c.nLayer + layer : layer, e.slot = t.slot;
    if (isGguf) {
      e.name = (layer >= 0 ? (stack == 1 ? "enc.blk." : row.ggufLayerPrefix) +
                                 std::to_string(layer) + "."
                           : std::string()) +
               base;
      e.names = {e.name};
    } else {
      // "a|b": the tensor is stored under either name (the first is the one errors give).
      const std::string lp =
          layer >= 0 ? layerPrefix(stack == 1 ? row.encoderLayerPrefix : row.layerPrefix, layer)
                     : std::string();
      const std::string pre = row.prefix;
      for (const std::string& alt : splitAlternatives(base)) {
        const std::string n = lp + alt;
        if (e.names.empty()) e.name = n;
        e.names.push_back(n);
        if (n.rfind(pre, 0) == 0) e.names.push_back(row.altPrefix + n.substr(pre.size()));
      }
    }
    e.shape = resolveShape(t.shape, c);
    if (conv1dInMajor && layer >= 0 && e.shape.size() == 2) std::swap(e.shape[0], e.shape[1]);
    return e;
  };
  auto find = [&](const Want& e) -> const Found* {
    for (const std::string& n : e.names) {
      auto it = stored.find(n);
      if (it != stored.end()) return &it->second;
    }
    return nullptr;
  };
  auto missing = [&](const Want& e, const std::string& why) {
    return InputError(wpath + ": missing tensor '" + e.name + "'" + why);
  };

  // The last layer must exist before a table for n_layer layers is built (a config that claims
  // millions of layers fails here, not in an allocation).
  if (const auto last = resolve(row.layer.front(), c.nLayer - 1); last && !find(*last)) {
    throw missing(*last, " (the model has " + std::to_string(c.nLayer) + " layers)");
  }
  if (c.nEncoderLayer > 0) {
    if (row.encoderLayer.empty() || !row.encoderLayerPrefix) {
      throw InputError(wpath + ": the " + c.family + " rows hold no encoder layers");
    }
    if (const auto last = resolve(row.encoderLayer.front(), c.nEncoderLayer - 1, 1);
        last && !find(*last)) {
      throw missing(*last,
                    " (the encoder has " + std::to_string(c.nEncoderLayer) + " layers)");
    }
  }

  std::vector<Want> want;
  bool headFound = false;
  for (const TensorRow& t : row.globals) {
    auto e = resolve(t, -1);
    if (!e) {
      // An encoder's head the file's layout never holds (llama.cpp's bert drops it): missing.
      if (t.optional && w->headMissing.empty() && t.hf) w->headMissing = t.hf;
      continue;
    }
    if (t.slot == int(Global::Head)) {
      // lm_head when the file has one (untied, or tied but saved), else the embedding (tied).
      if (!find(*e)) {
        if (!c.tiedHead && !isGguf) {
          throw missing(*e, " (config.json says tie_word_embeddings false)");
        }
        continue;
      }
      headFound = true;
    } else if (t.when && !t.when(c)) {
      continue;
    } else if (t.optional && !find(*e)) {
      if (w->headMissing.empty()) w->headMissing = e->name;
      continue;
    }
    want.push_back(std::move(*e));
  }
  if (!w->headMissing.empty()) {  // a head with a part missing is no head: none of it is read
    want.erase(std::remove_if(want.begin(), want.end(),
                              [](const Want& e) {
                                return e.slot >= int(Global::HeadDense) &&
                                       e.slot <= int(Global::HeadBias);
                              }),
               want.end());
  }
  w->layers.resize(std::size_t(c.nLayer) + std::size_t(c.nEncoderLayer));
  for (int stack = 0; stack < c.stacks(); ++stack) {
    const std::vector<TensorRow>& table = stack == 1 ? row.encoderLayer : row.layer;
    for (int l = 0; l < c.layersOf(stack); ++l) {
      for (const TensorRow& t : table) {
        if ((t.when && !t.when(c)) || l < t.fromLayer) continue;
        if (auto e = resolve(t, l, stack)) want.push_back(std::move(*e));
      }
      Weights::Layer& L = w->layers[std::size_t(stack == 1 ? c.nLayer + l : l)];
      for (const TensorRow& t : table) {
        if (t.slot == int(Slot::Qkv)) L.fusedQkv = true;
        if (t.slot == int(Slot::GateUp)) L.fusedGateUp = true;
      }
    }
  }

  // Validate everything first.
  std::set<std::string> dtypes;
  std::map<std::string, int> quantCounts;
  long long params = 0;
  for (Want& e : want) {
    const Found* f = find(e);
    if (!f) throw missing(e, "");
    e.found = *f;
    if (f->shape != e.shape) {
      throw InputError(wpath + ": tensor '" + f->name + "' has shape " + shapeText(f->shape) +
                       ", expected " + shapeText(e.shape) + " from " +
                       (isGguf ? std::string("the GGUF metadata") : m->files_.config));
    }
    if (f->st && !stDtypeConvertible(f->st->dtype)) {
      throw InputError(wpath + ": tensor '" + f->name + "' has dtype " + f->dtype +
                       "; expected F32, F16 or BF16");
    }
    if (f->gg) {
      int bv = 0, bb = 0;
      if (!ggmlTypeInfo(f->gg->type, bv, bb)) {
        throw InputError(wpath + ": tensor '" + f->name + "' has type " + f->dtype +
                         ", which attnviz cannot read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, "
                         "Q8_0, Q2_K..Q6_K)");
      }
      if (f->shape.size() == 2) ++quantCounts[f->dtype];
    }
    dtypes.insert(f->dtype);
    std::int64_t n = 1;
    for (auto s : f->shape) n *= s;
    params += n;
  }

  // Then map (F32, aligned), convert to float32 (while the copies fit the memory budget) or keep
  // as stored (past it: each layer is converted into the pass's scratch when it runs).
  auto mapped = [](const Found& f) -> const float* {
    if (f.st) return f.stFile->f32View(*f.st).data();
    const GgufTensor& t = *f.gg;
    return t.type == std::uint32_t(GgmlType::F32) &&
                   reinterpret_cast<std::uintptr_t>(t.data) % alignof(float) == 0
               ? reinterpret_cast<const float*>(t.data)
               : nullptr;
  };
  auto elements = [](const Found& f) {
    std::size_t n = 1;
    for (auto s : f.shape) n *= std::size_t(s);
    return n;
  };
  // A 2-D tensor's rows as stored; empty for a dtype decode cannot read in place (F64...).
  auto storedOf = [](const Found& f) -> StoredMatrix {
    StoredMatrix s;
    if (f.shape.size() != 2) return s;
    if (f.gg) {
      s.type = GgmlType(f.gg->type);
      s.data = f.gg->data;
      s.rowBytes = f.gg->rowBytes();
    } else {
      const StDtype dt = f.st->dtype;
      if (dt != StDtype::F32 && dt != StDtype::F16 && dt != StDtype::BF16) return s;
      s.type = dt == StDtype::F32 ? GgmlType::F32 : dt == StDtype::F16 ? GgmlType::F16 : GgmlType::BF16;
      s.data = reinterpret_cast<const unsigned char*>(f.stFile->bytes(*f.st).data());
      s.rowBytes = f.st->byteSize() / std::size_t(std::max<std::int64_t>(1, f.shape[0]));
    }
    s.rows = int(f.shape[0]), s.cols = int(f.shape[1]);
    return s;
  };
  std::size_t copyBytes = 0, mappedBytes = 0;  // float32 copies of everything not mapped; the rest
  for (const Want& e : want) {
    if (!mapped(e.found) && elements(e.found) > 0) copyBytes += elements(e.found) * sizeof(float);
    else mappedBytes += elements(e.found) * sizeof(float);
  }
  // The float32 tensors read in place get their page tables filled at open, in one call a tensor,
  // when they come to at most 1 GiB: a pass reads every one, and faulting them in 64 KB at a time
  // cost GPT-2 small (124M floats) about 8,000 page faults, a tenth of its pass on our VMs. Only
  // the tensors the model reads (a checkpoint's unused buffers stay out of memory); a larger
  // model faults its layers in as the pass reaches them, so the first layer is not kept waiting.
  // Best effort: kernels before 5.14 refuse the advice, and the faults happen as before.
  const bool populate = mappedBytes <= kPopulateMaxBytes;
  const std::int64_t budget = maxMemory < 0 ? defaultMemoryBudget() : maxMemory;
  const bool keepStored = copyBytes > std::size_t(budget);
  bool converted = false, kept = false;
  for (std::size_t n = 0; n < want.size(); ++n) {
    Want& e = want[n];
    const Found& f = e.found;
    // Conv1D [in, out] matrices are not [out, in] rows: decode converts such a layer instead.
    const StoredMatrix st = conv1dInMajor && e.layer >= 0 ? StoredMatrix() : storedOf(f);
    const float** slot = e.layer >= 0 ? &w->layers[e.layer].p[e.slot] : &w->g[e.slot];
    if (e.layer >= 0) {
      w->layers[e.layer].s[e.slot] = st;
    } else if (e.slot == int(Global::Embed)) {
      w->embedStored = storedOf(f);
    } else if (e.slot == int(Global::Head)) {
      w->headStored = storedOf(f);
    }
    bool keep = false;
    if (const float* p = mapped(f); p || elements(f) == 0) {
      *slot = p;
      if (p && populate) populatePages(p, elements(f) * sizeof(float));
    } else if (const StoredMatrix rows = storedOf(f);
               keepStored && rows &&
                   !(e.layer < 0 && (e.slot == int(Global::Positions) ||
                                     e.slot == int(Global::EncPositions)))) {
      // Matrices only (norms and biases are small and always float32); the embedding and an
      // untied head are read through embedStored / headStored.
      keep = kept = true;
      if (e.layer >= 0) {
        Weights::Layer& L = w->layers[e.layer];
        L.lazy.push_back({rows, L.lazyFloats, Slot(e.slot)});
        L.lazyFloats += elements(f);
      }
    } else if (f.st) {
      w->owned.push_back(f.stFile->toFloat32(*f.st));
      *slot = w->owned.back().data();
      converted = true;
      // The converted bytes leave memory: peak stays near the float32 copy, not copy + file.
      f.stFile->releasePages(*f.st);
    } else {
      // Straight into the kept buffer, a row at a time (no second copy of the tensor), the rows
      // split over the CPU threads.
      const GgufTensor& t = *f.gg;
      const std::int64_t cols = t.ne.empty() ? 1 : t.ne[0], rows = t.count() / cols;
      FloatBuffer buf(static_cast<std::size_t>(t.count()));
      constexpr std::int64_t kRows = 64;
      detail::parallelFor(int((rows + kRows - 1) / kRows), [&](int task) {
        const std::int64_t r0 = task * kRows, r1 = std::min(rows, r0 + kRows);
        for (std::int64_t r = r0; r < r1; ++r)
          dequantizeRow(GgmlType(t.type), t.rowData(r), buf.data() + r * cols, cols);
      });
      w->owned.push_back(std::move(buf));
      *slot = w->owned.back().data();
      converted = true;
      w->gguf->releasePages(t);
    }
    if (*slot && !mapped(f)) w->convertedBytes += elements(f) * sizeof(float);
    report(0.1 + 0.9 * double(n + 1) / double(want.size()),
           (keep ? "keeping " : *slot == mapped(f) ? "mapping " : "converting ") + f.name);
  }
  if (!headFound) {  // tied
    w->headStored = w->embedStored;
    w->g[int(Global::Head)] = w->g[int(Global::Embed)];
  }
  w->kept = kept;
  w->conv1dInMajor = conv1dInMajor;
  for (Weights::Layer& L : w->layers) {
    w->scratchFloats = std::max(w->scratchFloats, L.lazyFloats);
    layerViews(L, c, conv1dInMajor);
  }
  w->head = outIn(w->global(Global::Head), nullptr, c.nEmbd, c.vocabSize);

  std::string dt;
  if (isGguf) {
    dt = ggufFileTypeName(*w->gguf);
    for (const auto& [name, count] : quantCounts)
      if (name != "F32" && name != "F16" && name != "BF16") m->quantization_ = dt;
    std::string mix;
    for (const auto& [name, count] : quantCounts) mix += (mix.empty() ? "" : ", ") + name;
    if (quantCounts.size() > 1) dt += " (mixed: " + mix + ")";
  } else {
    for (const std::string& s : dtypes) dt += (dt.empty() ? "" : "+") + s;
  }
  m->weightsDescription_ =
      dt + (kept      ? ", kept as stored (over the " + memorySizeText(budget) + " budget)"
            : converted ? " (converted to F32)"
                        : " (mapped)");
  m->parameterCount_ = params;
  m->w_ = std::move(w);
  report(1.0, "ready");
  return m;
}

std::size_t Model::convertedBytes() const { return w_->convertedBytes; }
const std::string& Model::headMissing() const { return w_->headMissing; }

Tensor3 Model::positionBias(int stack, int Tq, int Tk) const {
  if (stack < 0 || stack >= config_.stacks() || Tq < 0 || Tk < Tq) return {};
  return attnviz::positionBias(*w_, config_, stack, Tq, Tk);
}

int Model::positionBucket(int stack, int i, int j) const {
  const ModelConfig& c = config_;
  if (c.positions != PositionKind::Relative || stack < 0 || stack >= c.stacks() ||
      !w_->global(stack == 1 ? Global::EncRelBias : Global::RelBias))
    return -1;
  return relativeBucket(j, i, stack == 1 || !c.causal, c.relBuckets, c.relMaxDistance);
}

float Model::bucketBias(int stack, int bucket, int head) const {
  const ModelConfig& c = config_;
  const float* table = stack >= 0 && stack < c.stacks()
                           ? w_->global(stack == 1 ? Global::EncRelBias : Global::RelBias)
                           : nullptr;
  if (c.positions != PositionKind::Relative || !table || bucket < 0 || bucket >= c.relBuckets ||
      head < 0 || head >= c.nHead)
    return 0.0f;
  return table[std::size_t(bucket) * std::size_t(c.nHead) + std::size_t(head)];
}
bool Model::keptAsStored() const { return w_->kept; }

void populatePages(const void* p, std::size_t bytes) {
  static const std::uintptr_t page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(p) + bytes;
  if (p && end > a) ::madvise(reinterpret_cast<void*>(a), end - a, MADV_POPULATE_READ);
}

}  // namespace attnviz
