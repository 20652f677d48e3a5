// The model: weights as typed views filled from a name/shape table per family, and the one
// forward pass of every family.
#include "attnviz/model/model.h"

#include "attnviz/engine/engine.h"
#include "attnviz/engine/engine_detail.h"
#include "attnviz/engine/parallel.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/formats/safetensors.h"

#include <malloc.h>
#include <unistd.h>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

namespace attnviz {

// ---------------------------------------------------------------------------------------------
// Interventions

LayerIntervention& Interventions::layer(int l, int nLayer) {
  if (l < 0 || l >= nLayer) {
    throw InputError("layer " + std::to_string(l) + " is outside the model (layers 0.." +
                     std::to_string(nLayer - 1) + ")");
  }
  if (static_cast<int>(layers.size()) < nLayer) layers.resize(nLayer);
  return layers[l];
}

const LayerIntervention* Interventions::find(int l) const {
  return l >= 0 && l < static_cast<int>(layers.size()) ? &layers[l] : nullptr;
}

void Interventions::ablate(int l, int h, const ModelConfig& c) {
  if (l < 0 || l >= c.nLayer || h < 0 || h >= c.nHead) {
    throw InputError("--ablate " + std::to_string(l) + ":" + std::to_string(h) +
                     " is outside the model (layers 0.." + std::to_string(c.nLayer - 1) +
                     ", heads 0.." + std::to_string(c.nHead - 1) + ")");
  }
  auto& heads = layer(l, c.nLayer).ablatedHeads;
  if (std::find(heads.begin(), heads.end(), h) == heads.end()) heads.push_back(h);
}

void Interventions::setAll(const MaskSpec& mask, float temperature, int nLayer) {
  for (int l = 0; l < nLayer; ++l) {
    layer(l, nLayer).mask = mask;
    layers[l].temperature = temperature;
  }
}

AttentionParams layerAttentionParams(const ModelConfig& c, const Interventions& iv, int layer,
                                     int T) {
  return layerAttentionParams(c, iv, layer, T, T);
}

AttentionParams layerAttentionParams(const ModelConfig& c, const Interventions& iv, int layer,
                                     int Tq, int Tk) {
  AttentionParams p;
  const LayerIntervention* li = iv.find(layer);
  if (li) {
    p.mask = li->mask;
    p.temperature = li->temperature;
  }
  const int W = c.windowOf(layer);
  MaskSpec& m = p.mask;
  if (m.customKind != MaskSpec::Custom::None && (m.custom.rows != Tq || m.custom.cols != Tk)) {
    throw InputError("the painted mask of layer " + std::to_string(layer) + " is " +
                     std::to_string(m.custom.rows) + " x " + std::to_string(m.custom.cols) +
                     "; this pass needs " + std::to_string(Tq) + " x " + std::to_string(Tk));
  }
  if (m.prefix == 0 && m.sink == 0) {
    // No OR-term in the intervention: model AND intervention is one spec (two windows, each the
    // last W keys, AND to the narrower).
    m.causal = true;
    if (W > 0) m.window = m.window > 0 ? std::min(m.window, W) : W;
    return p;
  }
  // The intervention's prefix or sink would let a query see keys the model's own mask hides:
  // the model's mask (causal, its window) becomes an AND-term of the custom matrix.
  const int H = m.customKind == MaskSpec::Custom::None ? 1 : m.custom.heads;
  if (m.customKind == MaskSpec::Custom::None) {
    m.customKind = MaskSpec::Custom::Allow;
    m.custom = Tensor3(1, Tq, Tk, 1.0f);
  }
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < Tq; ++i) {
      const int pi = queryPosition(i, Tq, Tk);
      for (int j = 0; j < Tk; ++j) {
        const bool allowed = j <= pi && (W == 0 || j > pi - W);
        if (allowed) continue;
        m.custom.at(h, i, j) = m.customKind == MaskSpec::Custom::Allow
                                   ? 0.0f
                                   : -std::numeric_limits<float>::infinity();
      }
    }
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// What a pass keeps

bool LayerSet::has(int layer) const {
  return all || std::find(only.begin(), only.end(), layer) != only.end();
}

Capture Capture::view(int thumbnail) {
  Capture c;
  c.weights = c.qkv = c.headOut = LayerSet::none();
  c.thumbnail = thumbnail;
  c.allLogits = false;
  return c;
}

LayerActivations& LayerList::operator[](std::size_t l) {
  std::shared_ptr<LayerActivations>& p = layers_[l];
  if (p.use_count() > 1) p = std::make_shared<LayerActivations>(*p);  // shared: copy first
  return *p;
}

void LayerList::resize(std::size_t n) {
  const std::size_t old = layers_.size();
  layers_.resize(n);
  for (std::size_t l = old; l < n; ++l) layers_[l] = std::make_shared<LayerActivations>();
}

std::size_t LayerActivations::bytes() const {
  const auto m = [](const MatrixRM& x) { return std::size_t(x.size()) * sizeof(float); };
  const auto t = [](const Tensor3& x) { return x.size() * sizeof(float); };
  return m(residualIn) + t(q) + t(k) + t(v) + t(weights) + t(headOut) + t(thumb) +
         rows.size() * sizeof(RowStats);
}

std::size_t ForwardResult::bytes() const {
  std::size_t n = std::size_t(residualOut.size() + logits.size()) * sizeof(float);
  for (const LayerActivations& a : layers) n += a.bytes();
  return n;
}

// ---------------------------------------------------------------------------------------------
// Weights

namespace {

// A matrix as the file stores it: `rows` rows of `cols` values of `type`, `rowBytes` apart (a
// GGUF tensor of any readable type, or a safetensors F32/F16/BF16 tensor in nn.Linear's [out, in]
// layout). Decode's matrix-vector products read these (formats::matVec); a layer kept as stored
// is converted from these into the pass's scratch.
struct StoredMatrix {
  GgmlType type = GgmlType::F32;
  const unsigned char* data = nullptr;
  std::size_t rowBytes = 0;
  int rows = 0, cols = 0;
  explicit operator bool() const { return data != nullptr; }
  // Rows r0 .. r0 + n - 1 (a slice of a fused matrix).
  StoredMatrix rowSlice(int r0, int n) const {
    StoredMatrix s = *this;
    s.data = data + std::size_t(r0) * rowBytes;
    s.rows = n;
    return s;
  }
};

}  // namespace

struct Model::Weights {
  std::vector<SafetensorsFile> files;
  std::unique_ptr<GgufFile> gguf;
  std::vector<FloatBuffer> owned;  // converted tensors
  const float *embed = nullptr, *positions = nullptr, *normFW = nullptr, *normFB = nullptr;
  LinearView head;  // [V, d] out-major; w is null when the head is kept as stored
  StoredMatrix embedStored, headStored;
  struct Layer {
    const float *norm1W = nullptr, *norm1B = nullptr, *norm2W = nullptr, *norm2B = nullptr;
    const float *qkvW = nullptr, *qkvB = nullptr;  // GPT-2's fused c_attn (q, k, v slice it)
    LinearView q, k, v, o, up, gate, down;
    // The same matrices as stored, when they are [out, in] rows (every family's GGUF, LLaMA-family
    // folders): what decode reads.
    StoredMatrix qS, kS, vS, oS, upS, gateS, downS;
    // Kept as stored (over the memory budget): each matrix's float32 slot in this struct (a byte
    // offset) and its place in the pass's scratch; the views above are rebuilt on a copy.
    struct Lazy {
      StoredMatrix src;
      std::size_t offset = 0;  // floats into the scratch
      std::ptrdiff_t slot = 0;  // byte offset of the `const float*` within Layer
    };
    std::vector<Lazy> lazy;
    std::size_t lazyFloats = 0;
  };
  std::vector<Layer> layers;
  std::size_t convertedBytes = 0;  // float32 bytes held in `owned`
  std::size_t scratchFloats = 0;   // the largest layer kept as stored
  bool kept = false;               // matrices kept as stored (over the budget)
  bool conv1dInMajor = false;      // GPT-2 folder: Conv1D [in, out] matrices
};

Model::Model() = default;
Model::~Model() = default;

namespace {

std::string shapeText(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// One stored tensor, wherever it lives.
struct Found {
  std::string name;                   // as stored
  std::vector<std::int64_t> shape;    // row-major (outermost first)
  std::string dtype;                  // "F32", "BF16", "Q4_K", ...
  const StTensorInfo* st = nullptr;
  const SafetensorsFile* stFile = nullptr;
  const GgufTensor* gg = nullptr;
};

// A tensor the family table asks for: its name in the HF layout, its shape, and where it goes.
struct Want {
  Want(std::string n, std::vector<std::int64_t> s, const float** p)
      : name(std::move(n)), shape(std::move(s)), slot(p) {}
  std::string name;
  std::vector<std::int64_t> shape;
  const float** slot;
  bool optional = false;
  int layer = -1;                  // the layer this matrix belongs to (-1: embeddings, head, ...)
  StoredMatrix* stored = nullptr;  // where decode's [out, in] view of it goes, if anywhere
  Found found;
};

// HF names -> llama.cpp's GGUF names.
std::string ggufName(const std::string& hf, const std::string& family) {
  static const std::vector<std::pair<std::string, std::string>> llamaLayer = {
      {"self_attn.q_proj.", "attn_q."},          {"self_attn.k_proj.", "attn_k."},
      {"self_attn.v_proj.", "attn_v."},          {"self_attn.o_proj.", "attn_output."},
      {"mlp.gate_proj.", "ffn_gate."},           {"mlp.up_proj.", "ffn_up."},
      {"mlp.down_proj.", "ffn_down."},           {"input_layernorm.", "attn_norm."},
      {"post_attention_layernorm.", "ffn_norm."}};
  static const std::vector<std::pair<std::string, std::string>> gpt2Layer = {
      {"ln_1.", "attn_norm."},         {"attn.c_attn.", "attn_qkv."}, {"attn.c_proj.", "attn_output."},
      {"ln_2.", "ffn_norm."},          {"mlp.c_fc.", "ffn_up."},      {"mlp.c_proj.", "ffn_down."}};
  if (family == "gpt2") {
    if (hf == "wte.weight") return "token_embd.weight";
    if (hf == "wpe.weight") return "position_embd.weight";
    if (hf.rfind("ln_f.", 0) == 0) return "output_norm." + hf.substr(5);
    if (hf == "lm_head.weight") return "output.weight";
    if (hf.rfind("h.", 0) == 0) {
      const std::size_t dot = hf.find('.', 2);
      const std::string rest = hf.substr(dot + 1);
      for (const auto& [a, b] : gpt2Layer) {
        if (rest.rfind(a, 0) == 0) return "blk." + hf.substr(2, dot - 2) + "." + b + rest.substr(a.size());
      }
    }
    return hf;
  }
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string p = "model.layers.";
  if (hf.rfind(p, 0) == 0) {
    const std::size_t dot = hf.find('.', p.size());
    const std::string rest = hf.substr(dot + 1);
    for (const auto& [a, b] : llamaLayer) {
      if (rest.rfind(a, 0) == 0) {
        return "blk." + hf.substr(p.size(), dot - p.size()) + "." + b + rest.substr(a.size());
      }
    }
  }
  return hf;
}

LinearView outIn(const float* W, const float* b, int in, int out) {
  LinearView v;
  v.w = W, v.b = b, v.in = in, v.out = out, v.ld = in, v.inMajor = false;
  return v;
}

// A layer's linear views from its float32 pointers: at load, and again on the copy a pass makes
// of a layer kept as stored, once the pass's scratch holds it (a null pointer: not yet there).
void layerViews(Model::Weights::Layer& L, const ModelConfig& c, bool conv1dInMajor) {
  const int d = c.nEmbd, I = c.nInner, dq = c.nHead * c.headSize, dkv = c.nKvHead * c.headSize;
  if (c.family != "gpt2") {
    L.q = outIn(L.q.w, L.q.b, d, dq);
    L.k = outIn(L.k.w, L.k.b, d, dkv);
    L.v = outIn(L.v.w, L.v.b, d, dkv);
    L.o = outIn(L.o.w, L.o.b, dq, d);
    L.gate = outIn(L.gate.w, L.gate.b, d, I);
    L.up = outIn(L.up.w, L.up.b, d, I);
    L.down = outIn(L.down.w, L.down.b, I, d);
    return;
  }
  const float* qkv = L.qkvW;
  const float* b = L.qkvB;
  // Part `part` of c_attn: [d, 3d] rows, a column slice with row stride 3d; or [3d, d] rows, a
  // row slice.
  auto slice = [&](int part) -> const float* {
    if (!qkv) return nullptr;
    return conv1dInMajor ? qkv + part * d : qkv + std::size_t(part) * d * d;
  };
  if (conv1dInMajor) {
    for (int part = 0; part < 3; ++part) {
      LinearView& v = part == 0 ? L.q : part == 1 ? L.k : L.v;
      v.w = slice(part), v.b = b + part * d, v.in = d, v.out = d;
      v.ld = 3 * d, v.inMajor = true;
    }
    auto inOut = [&](LinearView& v, int in, int out) {
      v.in = in, v.out = out, v.ld = out, v.inMajor = true;
    };
    inOut(L.o, d, d);
    inOut(L.up, d, I);
    inOut(L.down, I, d);
  } else {
    L.q = outIn(slice(0), b, d, d);
    L.k = outIn(slice(1), b + d, d, d);
    L.v = outIn(slice(2), b + 2 * d, d, d);
    L.o = outIn(L.o.w, L.o.b, d, d);
    L.up = outIn(L.up.w, L.up.b, d, I);
    L.down = outIn(L.down.w, L.down.b, I, d);
  }
}

// Rows [r0, r0 + n) of a stored matrix as float32 into out, split over the CPU threads.
void convertRows(const StoredMatrix& s, int r0, int n, float* out) {
  const int chunk = 64;
  detail::parallelFor((n + chunk - 1) / chunk, [&](int t) {
    const int a = t * chunk, b = std::min(n, a + chunk);
    for (int r = a; r < b; ++r) {
      dequantizeRow(s.type, s.data + std::size_t(r0 + r) * s.rowBytes,
                    out + std::size_t(r) * s.cols, s.cols);
    }
  });
}

// The token's embedding row (mapped, converted, or dequantized from the stored rows).
void embedRow(const Model::Weights& w, int d, int id, float* out) {
  if (w.embed) {
    std::copy_n(w.embed + std::size_t(id) * d, d, out);
  } else {
    dequantizeRow(w.embedStored.type, w.embedStored.data + std::size_t(id) * w.embedStored.rowBytes,
                  out, d);
  }
}

// logits [T, V] = f [T, d] times the head. A head kept as stored is converted a task's rows at a
// time, in the same tasks as linear()'s [out, in] branch (so the products, and the logits, are
// bit for bit those of the converted head).
void unembed(const Model::Weights& w, const MatrixRM& f, MatrixRM& logits) {
  if (w.head.w) {
    linear(f, w.head, logits);
    return;
  }
  const StoredMatrix& s = w.headStored;
  const int n = s.rows, d = s.cols;
  logits.resize(f.rows(), n);
  const int chunk = n >= 4096 ? 1024 : std::max(64, (n + cpuThreads() - 1) / cpuThreads());
  const int tasks = (n + chunk - 1) / chunk;
  detail::parallelFor(tasks, [&](int t) {
    const int r0 = t * chunk, nr = std::min(n, r0 + chunk) - r0;
    if (nr <= 0) return;
    thread_local FloatBuffer rows;
    if (rows.size() < std::size_t(nr) * d) rows = FloatBuffer(std::size_t(nr) * d);
    for (int r = 0; r < nr; ++r) {
      dequantizeRow(s.type, s.data + std::size_t(r0 + r) * s.rowBytes, rows.data() + std::size_t(r) * d,
                    d);
    }
    const ConstMapRM W(rows.data(), nr, d);
    logits.middleCols(r0, nr).noalias() = f * W.transpose();
  });
}

}  // namespace

std::int64_t defaultMemoryBudget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::int64_t(4) << 30;
  return std::int64_t(pages) * page / 4;
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
    report(0.02, "reading the tokenizer");
    m->tokenizer_ = loadFolderTokenizer(m->files_.dir, m->config_.vocabSize);
    // The vocab's JSON DOM was freed in many small pieces: give them back to the system, so
    // that the peak while the pass runs is the mapped file plus the activations.
    ::malloc_trim(0);
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
  const std::string wpath = m->files_.weights;
  const bool gpt2 = c.family == "gpt2";
  auto find = [&](const std::string& hf) -> const Found* {
    std::vector<std::string> names;
    if (isGguf) {
      names = {ggufName(hf, c.family)};
    } else if (gpt2) {
      names = {"transformer." + hf, hf};
    } else {
      names = {hf};
      if (hf.rfind("model.", 0) == 0) names.push_back(hf.substr(6));
    }
    for (const std::string& n : names) {
      auto it = stored.find(n);
      if (it != stored.end()) return &it->second;
    }
    return nullptr;
  };
  auto missing = [&](const std::string& hf, const std::string& why) {
    const std::string name = isGguf ? ggufName(hf, c.family) : hf;
    return InputError(wpath + ": missing tensor '" + name + "'" + why);
  };

  // The last layer must exist before a table for n_layer layers is built (a config that claims
  // millions of layers fails here, not in an allocation).
  const std::string last = gpt2 ? "h." + std::to_string(c.nLayer - 1) + ".ln_1.weight"
                                : "model.layers." + std::to_string(c.nLayer - 1) +
                                      ".input_layernorm.weight";
  if (!find(last)) {
    throw missing(last, " (the model has " + std::to_string(c.nLayer) + " layers)");
  }

  // The family table: every tensor with its shape in the HF layout.
  const std::int64_t d = c.nEmbd, V = c.vocabSize, I = c.nInner, dh = c.headSize;
  const std::int64_t dq = c.nHead * dh, dkv = c.nKvHead * dh;
  std::vector<Want> want;
  // GPT-2's Conv1D weights are stored [in, out] in HF folders and [out, in] in GGUF files.
  const bool conv1dInMajor = gpt2 && !isGguf;
  auto conv = [&](std::int64_t in, std::int64_t out) {
    return conv1dInMajor ? std::vector<std::int64_t>{in, out} : std::vector<std::int64_t>{out, in};
  };
  w->layers.resize(c.nLayer);
  if (gpt2) {
    want.push_back({"wte.weight", {V, d}, &w->embed});
    want.push_back({"wpe.weight", {c.nPositions, d}, &w->positions});
    want.push_back({"ln_f.weight", {d}, &w->normFW});
    want.push_back({"ln_f.bias", {d}, &w->normFB});
    for (int l = 0; l < c.nLayer; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      Weights::Layer& L = w->layers[l];
      const std::vector<Want> layer = {
          {p + "ln_1.weight", {d}, &L.norm1W},         {p + "ln_1.bias", {d}, &L.norm1B},
          {p + "attn.c_attn.weight", conv(d, 3 * d), &L.qkvW},
          {p + "attn.c_attn.bias", {3 * d}, &L.qkvB},
          {p + "attn.c_proj.weight", conv(d, d), &L.o.w},
          {p + "attn.c_proj.bias", {d}, &L.o.b},      {p + "ln_2.weight", {d}, &L.norm2W},
          {p + "ln_2.bias", {d}, &L.norm2B},          {p + "mlp.c_fc.weight", conv(d, I), &L.up.w},
          {p + "mlp.c_fc.bias", {I}, &L.up.b},        {p + "mlp.c_proj.weight", conv(I, d), &L.down.w},
          {p + "mlp.c_proj.bias", {d}, &L.down.b}};
      for (Want e : layer) {
        e.layer = l;
        // GGUF's [out, in] matrices: c_attn's rows are q, k and v (sliced below).
        if (!conv1dInMajor) {
          if (e.slot == &L.qkvW) e.stored = &L.qS;
          if (e.slot == &L.o.w) e.stored = &L.oS;
          if (e.slot == &L.up.w) e.stored = &L.upS;
          if (e.slot == &L.down.w) e.stored = &L.downS;
        }
        want.push_back(std::move(e));
      }
    }
  } else {
    want.push_back({"model.embed_tokens.weight", {V, d}, &w->embed});
    want.push_back({"model.norm.weight", {d}, &w->normFW});
    for (int l = 0; l < c.nLayer; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      Weights::Layer& L = w->layers[l];
      const std::size_t first = want.size();
      want.push_back({p + "input_layernorm.weight", {d}, &L.norm1W});
      want.push_back({p + "post_attention_layernorm.weight", {d}, &L.norm2W});
      want.push_back({p + "self_attn.q_proj.weight", {dq, d}, &L.q.w});
      want.push_back({p + "self_attn.k_proj.weight", {dkv, d}, &L.k.w});
      want.push_back({p + "self_attn.v_proj.weight", {dkv, d}, &L.v.w});
      want.push_back({p + "self_attn.o_proj.weight", {d, dq}, &L.o.w});
      if (c.qkvBias) {
        want.push_back({p + "self_attn.q_proj.bias", {dq}, &L.q.b});
        want.push_back({p + "self_attn.k_proj.bias", {dkv}, &L.k.b});
        want.push_back({p + "self_attn.v_proj.bias", {dkv}, &L.v.b});
      }
      if (c.outBias) want.push_back({p + "self_attn.o_proj.bias", {d}, &L.o.b});
      want.push_back({p + "mlp.gate_proj.weight", {I, d}, &L.gate.w});
      want.push_back({p + "mlp.up_proj.weight", {I, d}, &L.up.w});
      want.push_back({p + "mlp.down_proj.weight", {d, I}, &L.down.w});
      if (c.mlpBias) {
        want.push_back({p + "mlp.gate_proj.bias", {I}, &L.gate.b});
        want.push_back({p + "mlp.up_proj.bias", {I}, &L.up.b});
        want.push_back({p + "mlp.down_proj.bias", {d}, &L.down.b});
      }
      for (std::size_t n = first; n < want.size(); ++n) {
        Want& e = want[n];
        e.layer = l;
        const std::pair<const float* const*, StoredMatrix*> views[] = {
            {&L.q.w, &L.qS},  {&L.k.w, &L.kS},       {&L.v.w, &L.vS},      {&L.o.w, &L.oS},
            {&L.up.w, &L.upS}, {&L.gate.w, &L.gateS}, {&L.down.w, &L.downS}};
        for (const auto& [slot, stored] : views)
          if (e.slot == slot) e.stored = stored;
      }
    }
  }
  want.front().stored = &w->embedStored;  // wte / embed_tokens
  // lm_head.weight when the file has one (untied), else the embedding (tied).
  const float* lm = nullptr;
  const Found* lmFound = find("lm_head.weight");
  if (lmFound) {
    want.push_back({"lm_head.weight", {V, d}, &lm});
    want.back().stored = &w->headStored;
  } else if (!c.tiedHead && !isGguf) {
    throw missing("lm_head.weight", " (config.json says tie_word_embeddings false)");
  }

  // Validate everything first.
  std::set<std::string> dtypes;
  std::map<std::string, int> quantCounts;
  long long params = 0;
  for (Want& e : want) {
    const Found* f = find(e.name);
    if (!f) {
      if (e.optional) continue;
      throw missing(e.name, "");
    }
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
  if (isGguf && !lmFound && !c.tiedHead) {
    throw missing("lm_head.weight", "");
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
  std::size_t copyBytes = 0;  // float32 copies of everything not mapped
  for (const Want& e : want) {
    if (!e.found.name.empty() && !mapped(e.found) && elements(e.found) > 0)
      copyBytes += elements(e.found) * sizeof(float);
  }
  const std::int64_t budget = maxMemory < 0 ? defaultMemoryBudget() : maxMemory;
  const bool keepStored = copyBytes > std::size_t(budget);
  bool converted = false, kept = false;
  for (std::size_t n = 0; n < want.size(); ++n) {
    Want& e = want[n];
    if (e.found.name.empty()) continue;
    const Found& f = e.found;
    const StoredMatrix st = storedOf(f);
    if (e.stored) *e.stored = st;
    bool keep = false;
    if (const float* p = mapped(f); p || elements(f) == 0) {
      *e.slot = p;
    } else if (keepStored && st && e.slot != &w->positions) {
      // Matrices only (norms and biases are small and always float32); the embedding and an
      // untied head are read through embedStored / headStored.
      keep = kept = true;
      if (e.layer >= 0) {
        Weights::Layer& L = w->layers[e.layer];
        L.lazy.push_back({st, L.lazyFloats,
                          reinterpret_cast<const char*>(e.slot) -
                              reinterpret_cast<const char*>(&L)});
        L.lazyFloats += elements(f);
      }
    } else if (f.st) {
      w->owned.push_back(f.stFile->toFloat32(*f.st));
      *e.slot = w->owned.back().data();
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
      *e.slot = w->owned.back().data();
      converted = true;
      w->gguf->releasePages(t);
    }
    if (*e.slot && !mapped(f)) w->convertedBytes += elements(f) * sizeof(float);
    report(0.1 + 0.9 * double(n + 1) / double(want.size()),
           (keep ? "keeping " : *e.slot == mapped(f) ? "mapping " : "converting ") + f.name);
  }
  if (!lmFound) w->headStored = w->embedStored;  // tied
  w->kept = kept;
  w->conv1dInMajor = conv1dInMajor;
  for (Weights::Layer& L : w->layers) {
    w->scratchFloats = std::max(w->scratchFloats, L.lazyFloats);
    if (gpt2 && L.qS) {  // c_attn's [3d, d] rows: q, k, v
      const StoredMatrix qkv = L.qS;
      L.qS = qkv.rowSlice(0, int(d)), L.kS = qkv.rowSlice(int(d), int(d));
      L.vS = qkv.rowSlice(int(2 * d), int(d));
    }
  }

  // Linear views.
  for (Weights::Layer& L : w->layers) layerViews(L, c, conv1dInMajor);
  w->head = outIn(lm ? lm : w->embed, nullptr, int(d), int(V));

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
bool Model::keptAsStored() const { return w_->kept; }

// ---------------------------------------------------------------------------------------------
// The pass, one function per operation

void matmulInOut(const MatrixRM& x, const float* W, const float* bias, int k, int n, MatrixRM& out) {
  LinearView v;
  v.w = W, v.b = bias, v.in = k, v.out = n, v.ld = n, v.inMajor = true;
  linear(x, v, out);
}

void matmulOutIn(const MatrixRM& x, const float* E, int V, int d, MatrixRM& out) {
  LinearView v;
  v.w = E, v.in = d, v.out = V, v.ld = d, v.inMajor = false;
  linear(x, v, out);
}

void linear(const MatrixRM& x, const LinearView& W, MatrixRM& out) {
  const int n = W.out, k = W.in;
  out.resize(x.rows(), n);
  using Strided = Eigen::Map<const MatrixRM, 0, Eigen::OuterStride<>>;
  if (W.inMajor) {
    const Strided Wm(W.w, k, n, Eigen::OuterStride<>(W.ld));
    const int tasks = std::max(1, std::min(cpuThreads(), n / 64));
    const int chunk = ((n + tasks - 1) / tasks + 15) / 16 * 16;
    detail::parallelFor(tasks, [&](int t) {
      const int c0 = t * chunk, nc = std::min(n, c0 + chunk) - c0;
      if (nc <= 0) return;
      out.middleCols(c0, nc).noalias() = x * Wm.middleCols(c0, nc);
    });
  } else {
    const Strided Wm(W.w, n, k, Eigen::OuterStride<>(W.ld));
    // Blocks of output rows of W, claimed dynamically: GEMM packing buffers stay small (a vocab
    // is tens of thousands wide) and uneven thread speeds balance out.
    const int chunk = n >= 4096 ? 1024 : std::max(64, (n + cpuThreads() - 1) / cpuThreads());
    const int tasks = (n + chunk - 1) / chunk;
    detail::parallelFor(tasks, [&](int t) {
      const int r0 = t * chunk, nr = std::min(n, r0 + chunk) - r0;
      if (nr <= 0) return;
      out.middleCols(r0, nr).noalias() = x * Wm.middleRows(r0, nr).transpose();
    });
  }
  if (W.b) out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(W.b, n);
}

namespace {

// out[T, d] = (x - mean) / sqrt(var + eps) * w + b, per row (biased variance, as torch); or
// RMSNorm: x / sqrt(mean(x^2) + eps) * w.
void normForward(NormKind kind, const MatrixRM& x, const float* w, const float* b, float eps,
                 MatrixRM& out) {
  const int d = static_cast<int>(x.cols());
  out.resize(x.rows(), d);
  const Eigen::Map<const Eigen::ArrayXf> W(w, d);
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const Eigen::ArrayXf row = x.row(t).transpose().array();
    if (kind == NormKind::RMSNorm) {
      const float ms = row.square().mean();
      out.row(t) = (row * (1.0f / std::sqrt(ms + eps)) * W).matrix().transpose();
    } else {
      const float mean = row.mean();
      const Eigen::ArrayXf centred = row - mean;
      const float var = centred.square().mean();
      Eigen::ArrayXf y = (centred / std::sqrt(var + eps)) * W;
      if (b) y += Eigen::Map<const Eigen::ArrayXf>(b, d);
      out.row(t) = y.matrix().transpose();
    }
  }
}

// In place, element-wise.
void activationForward(MatrixRM& h, Activation act) {
  auto a = h.array();
  switch (act) {
    case Activation::GeluTanh: {
      const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
      a = 0.5f * a * (1.0f + (k * (a + 0.044715f * a.cube())).tanh());
      break;
    }
    case Activation::GeluErf:
      a = 0.5f * a * (1.0f + (a * static_cast<float>(M_SQRT1_2)).erf());
      break;
    case Activation::Relu:
      a = a.max(0.0f);
      break;
    case Activation::Silu:
      a = a / (1.0f + (-a).exp());
      break;
  }
}

// x [T, n*dh] -> [n, T, dh] (head h is columns h*dh..).
void splitHeads(const MatrixRM& x, int n, int dh, Tensor3& out) {
  const int T = static_cast<int>(x.rows());
  out = Tensor3::uninit(n, T, dh);  // every element is copied in below
  for (int h = 0; h < n; ++h) out.mat(h) = x.block(0, h * dh, T, dh);
}

// Each head's weights [H, T, T] max-pooled in blocks of s x s, s = ceil(T / side) (see
// LayerActivations::thumb).
Tensor3 poolThumb(const Tensor3& w, int side) {
  const int T = std::max(w.rows, w.cols), s = std::max(1, (T + side - 1) / side);
  const int nr = (w.rows + s - 1) / s, nc = (w.cols + s - 1) / s;
  Tensor3 out(w.heads, nr, nc);
  detail::parallelFor(w.heads, [&](int h) {
    for (int i = 0; i < w.rows; ++i) {
      const float* row = w.head(h) + std::size_t(i) * w.cols;
      float* dst = out.head(h) + std::size_t(i / s) * nc;
      for (int b = 0; b < nc; ++b) {
        const int j0 = b * s, n = std::min(w.cols, j0 + s) - j0;
        dst[b] = std::max(dst[b], Eigen::Map<const Eigen::ArrayXf>(row + j0, n).maxCoeff());
      }
    }
  });
  return out;
}

// O [H, T, d_h] -> [T, d], with the layer's ablations and patches applied (zeroed heads, heads
// replaced by their mean over the positions, patched heads); `kept` (when not null) receives the
// heads' outputs as they enter W_o.
void mergeHeads(const Tensor3& o, const LayerIntervention* li, MatrixRM& out, Tensor3* kept) {
  const int H = o.heads, T = o.rows, dh = o.cols;
  out.resize(T, H * dh);
  auto has = [](const std::vector<int>& v, int h) {
    return std::find(v.begin(), v.end(), h) != v.end();
  };
  for (int h = 0; h < H; ++h) {
    auto dst = out.block(0, h * dh, T, dh);
    const MatrixRM* patch = nullptr;
    if (li) {
      for (const auto& [ph, m] : li->patchedHeads)
        if (ph == h) patch = &m;
    }
    if (li && has(li->ablatedHeads, h)) {
      dst.setZero();
    } else if (patch) {
      if (patch->rows() != T || patch->cols() != dh) {
        throw InputError("a patch for head " + std::to_string(h) + " is " +
                         std::to_string(patch->rows()) + " x " + std::to_string(patch->cols()) +
                         "; the head's output is " + std::to_string(T) + " x " +
                         std::to_string(dh));
      }
      dst = *patch;
    } else if (li && has(li->meanAblatedHeads, h)) {
      const Eigen::RowVectorXf mean = o.mat(h).colwise().mean();
      dst = mean.replicate(T, 1);
    } else {
      dst = o.mat(h);
    }
  }
  if (kept) {
    *kept = Tensor3::uninit(H, T, dh);
    for (int h = 0; h < H; ++h) kept->mat(h) = out.block(0, h * dh, T, dh);
  }
}

}  // namespace

void applyRope(const ModelConfig& c, MatrixRM& x, int pos0, bool inverse) {
  if (c.positions != PositionKind::Rope) return;
  const std::vector<double> inv = c.ropeInvFreq();
  const int pairs = static_cast<int>(inv.size()), half = c.ropeDim / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    float* row = x.row(t).data();
    const float pos = float(pos0 + t);
    for (int i = 0; i < pairs; ++i) {
      // As HF computes the angle: float32 position times float32 frequency.
      const float angle = pos * float(inv[i]);
      const float cs = std::cos(angle), sn = sign * std::sin(angle);
      float& a = c.ropeStyle == RopeStyle::HalfSplit ? row[i] : row[2 * i];
      float& b = c.ropeStyle == RopeStyle::HalfSplit ? row[i + half] : row[2 * i + 1];
      const float a0 = a, b0 = b;
      a = a0 * cs - b0 * sn;
      b = b0 * cs + a0 * sn;
    }
  }
}

std::vector<int> Model::encode(const std::string& text) const {
  std::vector<int> ids = tokenizer_->encode(text, true);
  if (ids.empty()) throw InputError("the text is empty: nothing to run");
  if (static_cast<int>(ids.size()) > config_.nPositions) {
    const std::string key = !files_.gguf.empty()         ? config_.family + ".context_length"
                            : config_.family == "gpt2" ? "n_positions"
                                                       : "max_position_embeddings";
    throw InputError("the text is " + std::to_string(ids.size()) + " tokens, more than the " +
                     std::to_string(config_.nPositions) + " positions (" + key + ") of " +
                     (files_.gguf.empty() ? files_.config : files_.gguf) + "; shorten it");
  }
  return ids;
}

void Model::checkIds(const std::vector<int>& ids) const {
  if (ids.empty()) throw InputError("no token ids: nothing to run");
  if (static_cast<int>(ids.size()) > config_.nPositions) {
    throw InputError(std::to_string(ids.size()) + " tokens are more than the " +
                     std::to_string(config_.nPositions) + " positions of the model's context");
  }
  for (int id : ids) {
    if (id < 0 || id >= config_.vocabSize) {
      throw InputError("token id " + std::to_string(id) + " is outside the vocab (0.." +
                       std::to_string(config_.vocabSize - 1) + ")");
    }
  }
}

// Buffers one pass reuses from layer to layer: no allocation churn between the layers, so the
// heap does not fragment around the activations that are kept.
struct Model::Workspace {
  std::unique_ptr<AttentionEngine> engine = makeCpuEngine();
  MatrixRM a, qm, km, vm, merged, proj, m, hidden, gate, out;
  Tensor3 q, kvK, kvV;
  // A decode step: one row, and every [out, in] matrix read as stored (matrix-vector products on
  // the blocks).
  bool decode = false;
  // The layer a pass runs when the model keeps its matrices as stored: converted into the one
  // scratch the pass reuses from layer to layer.
  FloatBuffer scratch;
  Weights::Layer converted;

  // The layer's float32 views: the model's own, or the layer converted into the scratch.
  const Weights::Layer& weights(const Weights& w, int l, const ModelConfig& c) {
    const Weights::Layer& L = w.layers[l];
    if (L.lazy.empty()) return L;
    if (scratch.size() < w.scratchFloats) scratch = FloatBuffer(w.scratchFloats);
    converted = L;
    for (const Weights::Layer::Lazy& z : L.lazy) {
      convertRows(z.src, 0, z.src.rows, scratch.data() + z.offset);
      *reinterpret_cast<const float**>(reinterpret_cast<char*>(&converted) + z.slot) =
          scratch.data() + z.offset;
    }
    layerViews(converted, c, w.conv1dInMajor);
    return converted;
  }

  // out = x W (+ b): a matrix-vector product on the stored rows in a decode step, else linear().
  void lin(const MatrixRM& x, const LinearView& f, const StoredMatrix& s, MatrixRM& out) {
    if (decode && s && x.rows() == 1) {
      out.resize(1, s.rows);
      matVec(s.type, s.data, s.rows, s.cols, x.data(), out.data());
      if (f.b) out.row(0) += Eigen::Map<const Eigen::RowVectorXf>(f.b, s.rows);
      return;
    }
    linear(x, f, out);
  }

  // The same for several matrices of one input: in a decode step one parallel loop over them all
  // (q, k and v; up and gate), else lin() on each in turn.
  struct Out {
    const LinearView* f;
    const StoredMatrix* s;
    MatrixRM* out;
  };
  void lins(const MatrixRM& x, std::initializer_list<Out> outs) {
    bool batch = decode && x.rows() == 1;
    for (const Out& o : outs) batch = batch && *o.s;
    if (!batch) {
      for (const Out& o : outs) lin(x, *o.f, *o.s, *o.out);
      return;
    }
    MatVecJob jobs[4];
    int n = 0;
    for (const Out& o : outs) {
      o.out->resize(1, o.s->rows);
      jobs[n++] = {o.s->type, o.s->data, o.s->rows, o.s->cols, x.data(), o.out->data()};
    }
    matVecBatch(jobs, n);
    for (const Out& o : outs)
      if (o.f->b) o.out->row(0) += Eigen::Map<const Eigen::RowVectorXf>(o.f->b, o.s->rows);
  }

  // qm, km, vm = the layer's projections of norm_1(x), rows at positions pos0.., q and k rotated
  // per head when `rope`.
  void project(const ModelConfig& c, const Weights::Layer& W, const MatrixRM& x, int pos0,
               bool rope) {
    normForward(c.norm, x, W.norm1W, W.norm1B, c.layerNormEps, a);
    lins(a, {{&W.q, &W.qS, &qm}, {&W.k, &W.kS, &km}, {&W.v, &W.vS, &vm}});
    if (!rope || c.positions != PositionKind::Rope) return;
    // Each head's slice rotates on its own: rotate per head through a [T, dh] copy.
    const int T = static_cast<int>(x.rows()), dh = c.headSize;
    auto rotate = [&](MatrixRM& mat, int heads) {
      MatrixRM head(T, dh);
      for (int h = 0; h < heads; ++h) {
        head = mat.block(0, h * dh, T, dh);
        applyRope(c, head, pos0);
        mat.block(0, h * dh, T, dh) = head;
      }
    };
    rotate(qm, c.nHead);
    rotate(km, c.nKvHead);
  }

  // x += MLP(norm_2(x)).
  void mlp(const ModelConfig& c, const Weights::Layer& W, MatrixRM& x) {
    normForward(c.norm, x, W.norm2W, W.norm2B, c.layerNormEps, m);
    if (c.mlp == MlpKind::Gated) {
      lins(m, {{&W.up, &W.upS, &hidden}, {&W.gate, &W.gateS, &gate}});
      activationForward(gate, c.activation);
      hidden.array() *= gate.array();
    } else {
      lin(m, W.up, W.upS, hidden);
      activationForward(hidden, c.activation);
    }
    lin(hidden, W.down, W.downS, out);
    x += out;
  }
};

ForwardResult Model::forward(const std::vector<int>& ids, const Interventions& iv,
                             const Capture& capture) const {
  checkIds(ids);
  const int T = static_cast<int>(ids.size()), d = config_.nEmbd;
  ForwardResult r;
  r.ids = ids;
  r.capture = capture;
  r.layers.resize(config_.nLayer);
  MatrixRM& x = config_.nLayer > 0 ? r.layers[0].residualIn : r.residualOut;
  x.resize(T, d);
  for (int t = 0; t < T; ++t) embedRow(*w_, d, ids[t], x.row(t).data());
  if (config_.positions == PositionKind::Learned) {
    const ConstMapRM pos(w_->positions, config_.nPositions, d);
    for (int t = 0; t < T; ++t) x.row(t) += pos.row(t);
  }
  rerunFrom(r, 0, iv);
  return r;
}

void Model::checkRerun(const ForwardResult& r, int fromLayer, const Interventions& iv) const {
  if (fromLayer < 0 || fromLayer > config_.nLayer ||
      static_cast<int>(r.layers.size()) != config_.nLayer) {
    throw InputError("rerunFrom: layer " + std::to_string(fromLayer) + " is outside the model");
  }
  if (iv.layers.size() > std::size_t(config_.nLayer)) {
    throw InputError("interventions for " + std::to_string(iv.layers.size()) +
                     " layers; the model has " + std::to_string(config_.nLayer));
  }
  for (std::size_t l = 0; l < iv.layers.size(); ++l) {
    std::vector<int> heads = iv.layers[l].ablatedHeads;
    heads.insert(heads.end(), iv.layers[l].meanAblatedHeads.begin(),
                 iv.layers[l].meanAblatedHeads.end());
    for (const auto& p : iv.layers[l].patchedHeads) heads.push_back(p.first);
    for (int h : heads) {
      if (h < 0 || h >= config_.nHead) {
        throw InputError("ablation " + std::to_string(l) + ":" + std::to_string(h) +
                         " is outside the model");
      }
    }
  }
}

void Model::rerunFrom(ForwardResult& r, int fromLayer, const Interventions& iv) const {
  checkRerun(r, fromLayer, iv);
  r.interventions = iv;
  runLayers(r, fromLayer, iv);  // its workspace is freed before the logits are allocated
  // The workspace now lies as free holes between kept activations: hand its pages back, so the
  // peak is the mapped file plus what the result holds.
  ::malloc_trim(0);
  finish(r);
}

void Model::runLayers(ForwardResult& r, int fromLayer, const Interventions& iv) const {
  if (fromLayer >= config_.nLayer) return;
  // Layers below fromLayer stay as they are (shared with any copy of r); the ones re-run are new
  // objects, so a pass that shares them keeps its own.
  MatrixRM x = std::as_const(r.layers)[fromLayer].residualIn;
  Workspace ws;
  for (int l = fromLayer; l < config_.nLayer; ++l) {
    auto act = std::make_shared<LayerActivations>();
    act->residualIn = std::move(x);
    runLayer(*act, l, iv, r.capture, ws, x);
    r.layers.set(l, std::move(act));
  }
  r.residualOut = std::move(x);
}

void Model::runLayer(LayerActivations& act, int l, const Interventions& iv, const Capture& cap,
                     Workspace& ws, MatrixRM& next) const {
  const Weights::Layer& W = ws.weights(*w_, l, config_);
  const ModelConfig& c = config_;
  const int H = c.nHead, dh = c.headSize;
  const MatrixRM& x = act.residualIn;
  const int T = static_cast<int>(x.rows());
  const LayerIntervention* li = iv.find(l);

  // Attention block: each query head reads its group's K/V head where it is (no repeated copy).
  ws.project(c, W, x, 0, !(li && li->ropeOff));
  splitHeads(ws.qm, H, dh, ws.q);
  splitHeads(ws.km, c.nKvHead, dh, ws.kvK);
  splitHeads(ws.vm, c.nKvHead, dh, ws.kvV);
  const AttentionParams p = layerAttentionParams(c, iv, l, T);
  validateParams(p, H, T, T);
  ws.engine->runGrouped(ws.q, ws.kvK, ws.kvV, c.kvGroup(), p);
  const AttentionResult& res = ws.engine->result(kStageWeights | kStageOutput | kStageRows);
  if (cap.weights.has(l)) {
    act.weights = res.weights;
    act.rows = res.rows;
  }
  if (cap.thumbnail > 0) act.thumb = poolThumb(res.weights, cap.thumbnail);
  mergeHeads(res.output, li, ws.merged, cap.headOut.has(l) ? &act.headOut : nullptr);
  if (cap.qkv.has(l)) {  // the workspace's buffers are handed over (new ones next layer)
    act.q = std::move(ws.q);
    act.k = std::move(ws.kvK);
    act.v = std::move(ws.kvV);
  }
  linear(ws.merged, W.o, ws.proj);
  next = x + ws.proj;
  ws.mlp(c, W, next);  // MLP block
}

void Model::layerQkv(const ForwardResult& r, int layer, Tensor3& q, Tensor3& k,
                     Tensor3& v) const {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.nLayer || static_cast<int>(r.layers.size()) != c.nLayer) {
    throw InputError("layer " + std::to_string(layer) + " is outside the model");
  }
  const LayerActivations& a = r.layers[layer];
  if (!a.q.empty()) {
    q = a.q, k = a.k, v = a.v;
    return;
  }
  Workspace ws;
  const LayerIntervention* li = r.interventions.find(layer);
  ws.project(c, ws.weights(*w_, layer, c), a.residualIn, 0, !(li && li->ropeOff));
  splitHeads(ws.qm, c.nHead, c.headSize, q);
  splitHeads(ws.km, c.nKvHead, c.headSize, k);
  splitHeads(ws.vm, c.nKvHead, c.headSize, v);
}

void Model::finish(ForwardResult& r) const {
  MatrixRM f;
  if (r.capture.allLogits || r.residualOut.rows() == 0) {
    normForward(config_.norm, r.residualOut, w_->normFW, w_->normFB, config_.layerNormEps, f);
  } else {
    const MatrixRM last = r.residualOut.bottomRows(1);
    normForward(config_.norm, last, w_->normFW, w_->normFB, config_.layerNormEps, f);
  }
  unembed(*w_, f, r.logits);
}

KvCache Model::cacheFrom(const ForwardResult& r) const {
  KvCache cache;
  const int dh = config_.headSize, KV = config_.nKvHead;
  for (int l = 0; l < config_.nLayer; ++l) {
    Tensor3 q, ak, av;  // one per KV head: kept by the pass, or recomputed from its stream
    layerQkv(r, l, q, ak, av);
    const int T = ak.rows;
    MatrixRM k(T, KV * dh), v(T, KV * dh);
    for (int g = 0; g < KV; ++g) {
      k.block(0, g * dh, T, dh) = ak.mat(g);
      v.block(0, g * dh, T, dh) = av.mat(g);
    }
    cache.k.push_back(std::move(k));
    cache.v.push_back(std::move(v));
  }
  return cache;
}

namespace {

// One query over the cache: for query head h (KV head g = h / group), s_j = (q_h . k_j) / sqrt(d_h)
// read in place from the cache's rows j < Tk, then the engine's own row logits and softmax
// (engine_detail.h: the mask, ALiBi, temperature as a full pass applies them), then
// o_h = sum_j a_j v_j. No [H, T_k, d_h] copy of the cache per step. weights [H, 1, Tk], out
// [H, 1, dh].
void decodeAttention(const MatrixRM& q, const MatrixRM& K, const MatrixRM& V, int Tk, int group,
                     int dh, const AttentionParams& p, Tensor3& weights, Tensor3& out) {
  using Strided = Eigen::Map<const MatrixRM, 0, Eigen::OuterStride<>>;
  const int H = weights.heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  const std::vector<float> slopes = alibiSlopes(H);
  detail::parallelFor(H, [&](int h) {
    const int g = h / group;
    const Strided Kg(K.data() + g * dh, Tk, dh, Eigen::OuterStride<>(K.cols()));
    const Strided Vg(V.data() + g * dh, Tk, dh, Eigen::OuterStride<>(V.cols()));
    thread_local std::vector<float, Eigen::aligned_allocator<float>> z, scratch;
    z.resize(std::size_t(Tk));
    scratch.resize(std::size_t(Tk));
    Eigen::Map<Eigen::VectorXf> s(z.data(), Tk);
    s.noalias() = scale * (Kg * q.block(0, h * dh, 1, dh).transpose());
    if (!std::isfinite((s.array() * 0.0f).sum())) detail::throwScoresOverflow(h);
    detail::rowLogits(z.data(), z.data(), p, slopes[h], h, 0, 1, Tk, 0, Tk);
    detail::rowSoftmax(z.data(), scratch.data(), weights.head(h), Tk, p.temperature);
    const Eigen::Map<const Eigen::RowVectorXf> a(weights.head(h), Tk);
    Eigen::Map<Eigen::RowVectorXf>(out.head(h), dh).noalias() = a * Vg;
  });
}

}  // namespace

DecodeStep Model::decodeStep(KvCache& cache, int id, const Interventions& iv) const {
  const ModelConfig& c = config_;
  const int pos = cache.length(), d = c.nEmbd, H = c.nHead, KV = c.nKvHead, dh = c.headSize;
  if (pos >= c.nPositions) {
    throw InputError("the context is full (" + std::to_string(c.nPositions) + " positions)");
  }
  if (id < 0 || id >= c.vocabSize) {
    throw InputError("token id " + std::to_string(id) + " is outside the vocab (0.." +
                     std::to_string(c.vocabSize - 1) + ")");
  }
  if (cache.k.empty()) cache.k.resize(c.nLayer), cache.v.resize(c.nLayer);
  if (cache.rows < 0) cache.rows = pos;  // from here on the matrices may hold spare rows
  const int Tk = pos + 1, group = c.kvGroup();
  MatrixRM x(1, d);
  embedRow(*w_, d, id, x.row(0).data());
  if (c.positions == PositionKind::Learned) {
    x.row(0) += ConstMapRM(w_->positions, c.nPositions, d).row(pos);
  }
  DecodeStep step;
  step.rows.resize(c.nLayer);
  Workspace ws;
  ws.decode = true;
  for (int l = 0; l < c.nLayer; ++l) {
    // Every matrix read as stored, unless one of a layer kept as stored has no [out, in] rows (a
    // GPT-2 folder's Conv1D): then the layer is converted as a full pass converts it.
    const Weights::Layer& S = w_->layers[l];
    const bool inPlace = S.qS && S.kS && S.vS && S.oS && S.upS && S.downS &&
                         (c.mlp != MlpKind::Gated || S.gateS);
    const Weights::Layer& W = inPlace ? S : ws.weights(*w_, l, c);
    const LayerIntervention* li = iv.find(l);
    ws.project(c, W, x, pos, !(li && li->ropeOff));
    MatrixRM& K = cache.k[l];
    MatrixRM& V = cache.v[l];
    if (K.rows() < Tk) {  // room for more rows than this one: no copy of the cache every step
      const int rows = std::min(c.nPositions, std::max(Tk, std::max(64, 2 * int(K.rows()))));
      K.conservativeResize(rows, KV * dh);
      V.conservativeResize(rows, KV * dh);
    }
    K.row(pos) = ws.km.row(0);
    V.row(pos) = ws.vm.row(0);
    const AttentionParams p = layerAttentionParams(c, iv, l, 1, Tk);
    validateParams(p, H, 1, Tk);
    step.rows[l] = Tensor3::uninit(H, 1, Tk);
    Tensor3 o = Tensor3::uninit(H, 1, dh);
    decodeAttention(ws.qm, K, V, Tk, group, dh, p, step.rows[l], o);
    mergeHeads(o, li, ws.merged, nullptr);
    ws.lin(ws.merged, W.o, W.oS, ws.proj);
    x += ws.proj;
    ws.mlp(c, W, x);
  }
  cache.rows = Tk;
  MatrixRM f;
  normForward(c.norm, x, w_->normFW, w_->normFB, c.layerNormEps, f);
  step.logits.resize(std::size_t(c.vocabSize));
  if (const StoredMatrix& h = w_->headStored) {
    matVec(h.type, h.data, h.rows, h.cols, f.data(), step.logits.data());
  } else {
    MatrixRM logits;
    unembed(*w_, f, logits);
    std::copy_n(logits.data(), logits.size(), step.logits.data());
  }
  return step;
}

std::vector<TokenProb> Model::topK(const ForwardResult& r, int k, int pos) {
  const int T = static_cast<int>(r.logits.rows()), V = static_cast<int>(r.logits.cols());
  if (T == 0) return {};
  if (pos < 0) pos = T - 1;
  const auto row = r.logits.row(std::min(pos, T - 1));
  const double mx = row.maxCoeff();
  double sum = 0.0;
  for (int v = 0; v < V; ++v) sum += std::exp(double(row(v)) - mx);
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  k = std::clamp(k, 0, V);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return row(a) > row(b) || (row(a) == row(b) && a < b); });
  std::vector<TokenProb> out;
  for (int i = 0; i < k; ++i) {
    out.push_back({order[i], static_cast<float>(std::exp(double(row(order[i])) - mx) / sum)});
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// For attribution (attribution.h)

MatrixRM Model::unembedResidual(const MatrixRM& x) const {
  if (x.cols() != config_.nEmbd) {
    throw InputError("unembedResidual: rows of " + std::to_string(x.cols()) +
                     " values; the model's width is " + std::to_string(config_.nEmbd));
  }
  MatrixRM f, logits;
  normForward(config_.norm, x, w_->normFW, w_->normFB, config_.layerNormEps, f);
  unembed(*w_, f, logits);
  return logits;
}

MatrixRM Model::headToResidual(int layer, int head, const MatrixRM& o) const {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.nLayer || head < 0 || head >= c.nHead) {
    throw InputError("head " + std::to_string(layer) + ":" + std::to_string(head) +
                     " is outside the model");
  }
  if (o.cols() != c.headSize) {
    throw InputError("headToResidual: rows of " + std::to_string(o.cols()) +
                     " values; the head size is " + std::to_string(c.headSize));
  }
  // A layer kept as stored: this layer converted for the call.
  std::optional<Workspace> ws;
  if (!w_->layers[layer].lazy.empty()) ws.emplace();
  const LinearView& W = ws ? ws->weights(*w_, layer, c).o : w_->layers[layer].o;
  LinearView s = W;
  s.b = nullptr;
  s.in = c.headSize;
  // [in, out] rows: the head's rows; [out, in] rows: the head's columns (same row stride).
  s.w = W.inMajor ? W.w + long(head) * c.headSize * W.ld : W.w + long(head) * c.headSize;
  MatrixRM out;
  linear(o, s, out);
  return out;
}

MatrixRM Model::directLogits(const MatrixRM& u, const ForwardResult& r, int pos) const {
  const ModelConfig& c = config_;
  const int T = static_cast<int>(r.residualOut.rows()), d = c.nEmbd;
  if (pos < 0 || pos >= T) {
    throw InputError("position " + std::to_string(pos) + " is outside the " + std::to_string(T) +
                     " tokens");
  }
  if (u.cols() != d || r.residualOut.cols() != d) {
    throw InputError("directLogits: vectors of " + std::to_string(u.cols()) +
                     " values; the model's width is " + std::to_string(d));
  }
  // The norm's denominator at pos, computed as normForward computes it.
  const Eigen::ArrayXf row = r.residualOut.row(pos).transpose().array();
  float denom;
  if (c.norm == NormKind::RMSNorm) {
    denom = std::sqrt(row.square().mean() + c.layerNormEps);
  } else {
    const float mean = row.mean();
    denom = std::sqrt((row - mean).square().mean() + c.layerNormEps);
  }
  const Eigen::Map<const Eigen::RowVectorXf> W(w_->normFW, d);
  MatrixRM scaled(u.rows(), d);
  for (Eigen::Index i = 0; i < u.rows(); ++i) {
    Eigen::RowVectorXf v = u.row(i);
    if (c.norm == NormKind::LayerNorm) v.array() -= v.mean();
    scaled.row(i) = (v.array() / denom * W.array()).matrix();
  }
  MatrixRM out;
  unembed(*w_, scaled, out);  // the head has no bias
  return out;
}

std::vector<float> Model::rerunLogitsAt(ForwardResult& r, int fromLayer, const Interventions& iv,
                                        int pos) const {
  checkRerun(r, fromLayer, iv);
  const MatrixRM& in = config_.nLayer > 0 ? r.layers[0].residualIn : r.residualOut;
  if (pos < 0 || pos >= in.rows()) {
    throw InputError("position " + std::to_string(pos) + " is outside the " +
                     std::to_string(in.rows()) + " tokens");
  }
  r.interventions = iv;
  runLayers(r, fromLayer, iv);
  const MatrixRM x = r.residualOut.row(pos);
  MatrixRM f, logits;
  normForward(config_.norm, x, w_->normFW, w_->normFB, config_.layerNormEps, f);
  unembed(*w_, f, logits);
  return std::vector<float>(logits.data(), logits.data() + logits.size());
}

}  // namespace attnviz
