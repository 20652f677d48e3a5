#include "attnviz/model/model.h"

#include "attnviz/engine/engine.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/formats/safetensors.h"

#include "attnviz/engine/parallel.h"

#include <malloc.h>
#include <nlohmann/json.hpp>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

namespace attnviz {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// config.json

namespace {

int requireInt(const nlohmann::json& j, const std::string& path, const char* key,
               const char* fallback = nullptr) {
  const nlohmann::json* v = nullptr;
  if (j.contains(key)) {
    v = &j[key];
  } else if (fallback && j.contains(fallback)) {
    v = &j[fallback];
  }
  if (!v) throw InputError(path + ": missing \"" + key + "\"");
  if (!v->is_number_integer() || v->get<long long>() < 1 || v->get<long long>() > (1 << 24)) {
    throw InputError(path + ": \"" + key + "\" must be an integer between 1 and 16777216");
  }
  return v->get<int>();
}

bool flag(const nlohmann::json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

}  // namespace

Gpt2Config loadGpt2Config(const std::string& path) { return parseGpt2Config(readFile(path), path); }

Gpt2Config parseGpt2Config(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InputError(path + ": expected a JSON object");
  if (j.contains("model_type") && j["model_type"] != "gpt2") {
    throw InputError(path + ": model_type is " + j["model_type"].dump() +
                     "; attnviz runs GPT-2-family models (model_type \"gpt2\")");
  }
  Gpt2Config c;
  c.nLayer = requireInt(j, path, "n_layer");
  c.nHead = requireInt(j, path, "n_head");
  c.nEmbd = requireInt(j, path, "n_embd");
  c.nPositions = requireInt(j, path, "n_positions", "n_ctx");
  c.vocabSize = requireInt(j, path, "vocab_size");
  if (c.nEmbd % c.nHead != 0) {
    throw InputError(path + ": n_embd " + std::to_string(c.nEmbd) + " is not divisible by n_head " +
                     std::to_string(c.nHead));
  }
  c.nInner = 4 * c.nEmbd;
  if (j.contains("n_inner") && !j["n_inner"].is_null()) c.nInner = requireInt(j, path, "n_inner");
  if (j.contains("layer_norm_epsilon")) {
    const auto& eps = j["layer_norm_epsilon"];
    if (!eps.is_number() || !(eps.get<double>() > 0 && eps.get<double>() < 1)) {
      throw InputError(path + ": \"layer_norm_epsilon\" must be a number between 0 and 1");
    }
    c.layerNormEps = j["layer_norm_epsilon"].get<float>();
  }
  if (j.contains("activation_function")) {
    if (!j["activation_function"].is_string()) {
      throw InputError(path + ": \"activation_function\" must be a string");
    }
    c.activationName = j["activation_function"].get<std::string>();
  }
  const std::string& a = c.activationName;
  if (a == "gelu_new" || a == "gelu_fast" || a == "gelu_pytorch_tanh") {
    c.activation = Gpt2Activation::GeluTanh;
  } else if (a == "gelu") {
    c.activation = Gpt2Activation::GeluErf;
  } else if (a == "relu") {
    c.activation = Gpt2Activation::Relu;
  } else {
    throw InputError(path + ": activation_function \"" + a +
                     "\" is not supported (gelu_new, gelu, gelu_fast, gelu_pytorch_tanh, relu)");
  }
  if (!flag(j, "scale_attn_weights", true)) {
    throw InputError(path + ": scale_attn_weights false (unscaled attention) is not supported");
  }
  if (flag(j, "scale_attn_by_inverse_layer_idx", false)) {
    throw InputError(path + ": scale_attn_by_inverse_layer_idx is not supported");
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// The folder

ModelFiles locateModelFiles(const std::string& dirArg, bool needWeights) {
  fs::path dir(dirArg);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(dirArg + ": not a folder (a model folder holds config.json, " +
                     "model.safetensors, vocab.json and merges.txt)");
  }
  // The Hugging Face cache: models--NAME/{refs/main, snapshots/<hash>/ -> ../../blobs/...}.
  if (!fs::exists(dir / "config.json", ec) && fs::is_directory(dir / "snapshots", ec)) {
    fs::path snap;
    const std::string ref =
        fs::exists(dir / "refs" / "main", ec) ? readFile((dir / "refs" / "main").string()) : "";
    const std::string hash = ref.substr(0, ref.find_first_of("\r\n"));
    if (!hash.empty() && fs::is_directory(dir / "snapshots" / hash, ec)) {
      snap = dir / "snapshots" / hash;
    } else {
      int count = 0;
      for (const auto& e : fs::directory_iterator(dir / "snapshots", ec)) {
        if (e.is_directory()) snap = e.path(), ++count;
      }
      if (count != 1) {
        throw InputError(dirArg + ": a Hugging Face cache folder with " + std::to_string(count) +
                         " snapshots and no refs/main; pass one snapshots/<hash> folder");
      }
    }
    dir = snap;
  }
  ModelFiles f;
  f.dir = dir.string();
  f.config = (dir / "config.json").string();
  f.vocab = (dir / "vocab.json").string();
  f.merges = (dir / "merges.txt").string();
  f.weights = (dir / "model.safetensors").string();
  std::vector<std::string> need{f.config, f.vocab, f.merges};
  if (needWeights) {
    // exists() follows symlinks, so a dangling cache link counts as missing.
    if (!fs::exists(f.weights, ec)) {
      if (fs::exists(dir / "pytorch_model.bin", ec)) {
        throw InputError((dir / "pytorch_model.bin").string() +
                         ": attnviz reads model.safetensors, not PyTorch pickles; convert it with "
                         "python3 -c \"from transformers import AutoModelForCausalLM as M; "
                         "M.from_pretrained('" +
                         f.dir + "').save_pretrained('" + f.dir + "', safe_serialization=True)\"");
      }
      if (fs::exists(dir / "model.safetensors.index.json", ec)) {
        throw InputError((dir / "model.safetensors.index.json").string() +
                         ": sharded checkpoints are not supported; one model.safetensors is");
      }
    }
    need.push_back(f.weights);
  }
  for (const std::string& p : need) {
    if (!fs::exists(p, ec)) throw InputError(p + ": missing (not in the model folder)");
  }
  return f;
}

Gpt2Tokenizer loadModelTokenizer(const std::string& dir) {
  const ModelFiles f = locateModelFiles(dir, false);
  const Gpt2Config c = loadGpt2Config(f.config);
  return Gpt2Tokenizer::load(f.vocab, f.merges, c.vocabSize);
}

// ---------------------------------------------------------------------------------------------
// Interventions

LayerIntervention& Interventions::layer(int l, int nLayer) {
  if (static_cast<int>(layers.size()) < nLayer) layers.resize(nLayer);
  return layers.at(l);
}

const LayerIntervention* Interventions::find(int l) const {
  return l >= 0 && l < static_cast<int>(layers.size()) ? &layers[l] : nullptr;
}

void Interventions::ablate(int l, int h, const Gpt2Config& c) {
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

// ---------------------------------------------------------------------------------------------
// Weights

struct Gpt2Model::Weights {
  SafetensorsFile file;
  std::vector<FloatBuffer> owned;  // converted F16/BF16 (or unaligned F32) tensors
  const float *wte = nullptr, *wpe = nullptr, *lnfW = nullptr, *lnfB = nullptr, *lm = nullptr;
  struct Layer {
    const float *ln1W, *ln1B, *attnW, *attnB, *projW, *projB;
    const float *ln2W, *ln2B, *fcW, *fcB, *mlpW, *mlpB;
  };
  std::vector<Layer> layers;
};

Gpt2Model::Gpt2Model() = default;
Gpt2Model::~Gpt2Model() = default;

namespace {

struct Expected {
  std::string name;  // without the "transformer." prefix
  std::vector<std::int64_t> shape;
  const float** slot;
  const StTensorInfo* info = nullptr;
};

std::string shapeText(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

std::unique_ptr<Gpt2Model> Gpt2Model::open(const std::string& dir, const Progress& progress) {
  auto report = [&](double f, const std::string& what) {
    if (progress) progress(f, what);
  };
  std::unique_ptr<Gpt2Model> m(new Gpt2Model());
  report(0.0, "reading config.json");
  m->files_ = locateModelFiles(dir, true);
  m->config_ = loadGpt2Config(m->files_.config);
  const Gpt2Config& c = m->config_;
  report(0.02, "reading vocab.json and merges.txt");
  m->tokenizer_ = Gpt2Tokenizer::load(m->files_.vocab, m->files_.merges, c.vocabSize);
  // The vocab's JSON DOM was freed in many small pieces: give them back to the system, so that
  // the peak while the pass runs is the mapped file plus the activations.
  ::malloc_trim(0);
  report(0.1, "validating model.safetensors");
  auto w = std::make_unique<Weights>();
  w->file = SafetensorsFile::open(m->files_.weights);
  const std::string& wpath = m->files_.weights;

  // The last layer must exist before a table for n_layer layers is built (a config that claims
  // millions of layers fails here, not in an allocation).
  const std::string last = "h." + std::to_string(c.nLayer - 1) + ".ln_1.weight";
  if (!w->file.find(last) && !w->file.find("transformer." + last)) {
    throw InputError(wpath + ": missing tensor '" + last + "' (config.json says n_layer " +
                     std::to_string(c.nLayer) + ")");
  }
  const std::int64_t d = c.nEmbd, V = c.vocabSize, P = c.nPositions, I = c.nInner;
  std::vector<Expected> want = {{"wte.weight", {V, d}, &w->wte},
                                {"wpe.weight", {P, d}, &w->wpe},
                                {"ln_f.weight", {d}, &w->lnfW},
                                {"ln_f.bias", {d}, &w->lnfB}};
  w->layers.resize(c.nLayer);
  for (int l = 0; l < c.nLayer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    Weights::Layer& L = w->layers[l];
    const std::vector<Expected> layer = {{p + "ln_1.weight", {d}, &L.ln1W},
                                         {p + "ln_1.bias", {d}, &L.ln1B},
                                         {p + "attn.c_attn.weight", {d, 3 * d}, &L.attnW},
                                         {p + "attn.c_attn.bias", {3 * d}, &L.attnB},
                                         {p + "attn.c_proj.weight", {d, d}, &L.projW},
                                         {p + "attn.c_proj.bias", {d}, &L.projB},
                                         {p + "ln_2.weight", {d}, &L.ln2W},
                                         {p + "ln_2.bias", {d}, &L.ln2B},
                                         {p + "mlp.c_fc.weight", {d, I}, &L.fcW},
                                         {p + "mlp.c_fc.bias", {I}, &L.fcB},
                                         {p + "mlp.c_proj.weight", {I, d}, &L.mlpW},
                                         {p + "mlp.c_proj.bias", {d}, &L.mlpB}};
    want.insert(want.end(), layer.begin(), layer.end());
  }
  // lm_head.weight when the file has one (untied), else the embedding (tied).
  const StTensorInfo* lm = w->file.find("lm_head.weight");
  if (!lm) lm = w->file.find("transformer.lm_head.weight");
  if (lm) want.push_back({"lm_head.weight", {V, d}, &w->lm, lm});

  // Validate everything first.
  std::string dtypes;
  for (Expected& e : want) {
    if (!e.info) e.info = w->file.find("transformer." + e.name);
    if (!e.info) e.info = w->file.find(e.name);
    if (!e.info) {
      throw InputError(wpath + ": missing tensor '" + e.name + "' (with or without the " +
                       "'transformer.' prefix)");
    }
    if (!stDtypeConvertible(e.info->dtype)) {
      throw InputError(wpath + ": tensor '" + e.info->name + "' has dtype " +
                       stDtypeName(e.info->dtype) + "; expected F32, F16 or BF16");
    }
    if (e.info->shape != e.shape) {
      throw InputError(wpath + ": tensor '" + e.info->name + "' has shape " +
                       e.info->shapeString() + ", expected " + shapeText(e.shape) +
                       " from config.json");
    }
    const std::string dt = stDtypeName(e.info->dtype);
    if (dtypes.find(dt) == std::string::npos) dtypes += (dtypes.empty() ? "" : "+") + dt;
  }

  // Then map (F32, aligned) or convert.
  bool converted = false;
  for (std::size_t n = 0; n < want.size(); ++n) {
    Expected& e = want[n];
    const std::span<const float> view = w->file.f32View(*e.info);
    if (!view.empty() || e.info->elementCount() == 0) {
      *e.slot = view.data();
    } else {
      w->owned.push_back(w->file.toFloat32(*e.info));
      *e.slot = w->owned.back().data();
      converted = true;
    }
    report(0.1 + 0.9 * double(n + 1) / double(want.size()),
           converted ? "converting " + e.info->name : "mapping " + e.info->name);
  }
  if (!w->lm) w->lm = w->wte;
  m->weightsDescription_ = dtypes + (converted ? " (converted to F32)" : " (mapped)");
  m->w_ = std::move(w);
  report(1.0, "ready");
  return m;
}

// ---------------------------------------------------------------------------------------------
// The pass, one function per operation

void gpt2Matmul(const MatrixRM& x, const float* W, const float* bias, int k, int n, MatrixRM& out) {
  out.resize(x.rows(), n);
  const ConstMapRM Wm(W, k, n);
  const int tasks = std::max(1, std::min(cpuThreads(), n / 64));
  const int chunk = ((n + tasks - 1) / tasks + 15) / 16 * 16;
  detail::parallelFor(tasks, [&](int t) {
    const int c0 = t * chunk, nc = std::min(n, c0 + chunk) - c0;
    if (nc <= 0) return;
    out.middleCols(c0, nc).noalias() = x * Wm.middleCols(c0, nc);
    if (bias) {
      out.middleCols(c0, nc).rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias + c0, nc);
    }
  });
}

void gpt2MatmulTransposed(const MatrixRM& x, const float* E, int V, int d, MatrixRM& out) {
  out.resize(x.rows(), V);
  const ConstMapRM Em(E, V, d);
  // Blocks of 1024 vocab rows, claimed dynamically: GEMM packing buffers stay small (the vocab is
  // tens of thousands wide) and uneven thread speeds balance out.
  const int chunk = 1024, tasks = (V + chunk - 1) / chunk;
  detail::parallelFor(tasks, [&](int t) {
    const int r0 = t * chunk, nr = std::min(V, r0 + chunk) - r0;
    if (nr <= 0) return;
    out.middleCols(r0, nr).noalias() = x * Em.middleRows(r0, nr).transpose();
  });
}

namespace {

// out[T, d] = (x - mean) / sqrt(var + eps) * w + b, per row (biased variance, as torch).
void layernormForward(const MatrixRM& x, const float* w, const float* b, float eps, MatrixRM& out) {
  const int d = static_cast<int>(x.cols());
  out.resize(x.rows(), d);
  const Eigen::Map<const Eigen::ArrayXf> W(w, d), B(b, d);
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const Eigen::ArrayXf row = x.row(t).transpose().array();
    const float mean = row.mean();
    const Eigen::ArrayXf centred = row - mean;
    const float var = centred.square().mean();
    out.row(t) = ((centred / std::sqrt(var + eps)) * W + B).matrix().transpose();
  }
}

// In place, element-wise.
void activationForward(MatrixRM& h, Gpt2Activation act) {
  auto a = h.array();
  switch (act) {
    case Gpt2Activation::GeluTanh: {
      const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
      a = 0.5f * a * (1.0f + (k * (a + 0.044715f * a.cube())).tanh());
      break;
    }
    case Gpt2Activation::GeluErf:
      a = 0.5f * a * (1.0f + (a * static_cast<float>(M_SQRT1_2)).erf());
      break;
    case Gpt2Activation::Relu:
      a = a.max(0.0f);
      break;
  }
}

// qkv [T, 3d] -> Q, K, V [H, T, d_h] (head h is columns h*d_h.. of each third).
void splitHeads(const MatrixRM& qkv, int H, int dh, Tensor3& q, Tensor3& k, Tensor3& v) {
  const int T = static_cast<int>(qkv.rows()), d = H * dh;
  // every element is copied in below
  q = Tensor3::uninit(H, T, dh), k = Tensor3::uninit(H, T, dh), v = Tensor3::uninit(H, T, dh);
  for (int h = 0; h < H; ++h) {
    q.mat(h) = qkv.block(0, h * dh, T, dh);
    k.mat(h) = qkv.block(0, d + h * dh, T, dh);
    v.mat(h) = qkv.block(0, 2 * d + h * dh, T, dh);
  }
}

// O [H, T, d_h] -> [T, d], with the ablated heads' columns zero.
void mergeHeads(const Tensor3& o, const std::vector<int>& ablated, MatrixRM& out) {
  const int H = o.heads, T = o.rows, dh = o.cols;
  out.resize(T, H * dh);
  for (int h = 0; h < H; ++h) {
    const bool off = std::find(ablated.begin(), ablated.end(), h) != ablated.end();
    if (off) {
      out.block(0, h * dh, T, dh).setZero();
    } else {
      out.block(0, h * dh, T, dh) = o.mat(h);
    }
  }
}

}  // namespace

std::vector<int> Gpt2Model::encode(const std::string& text) const {
  std::vector<int> ids = tokenizer_.encode(text);
  if (ids.empty()) throw InputError("--text is empty: nothing to run");
  if (static_cast<int>(ids.size()) > config_.nPositions) {
    throw InputError("the text is " + std::to_string(ids.size()) + " tokens, more than the " +
                     std::to_string(config_.nPositions) + " positions (n_positions) of " +
                     files_.config + "; shorten it");
  }
  return ids;
}

void Gpt2Model::checkIds(const std::vector<int>& ids) const {
  if (ids.empty()) throw InputError("no token ids: nothing to run");
  if (static_cast<int>(ids.size()) > config_.nPositions) {
    throw InputError(std::to_string(ids.size()) + " tokens are more than the " +
                     std::to_string(config_.nPositions) + " positions (n_positions) of " +
                     files_.config);
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
struct Gpt2Model::Workspace {
  std::unique_ptr<AttentionEngine> engine = makeCpuEngine();
  MatrixRM a, qkv, merged, proj, m, hidden, out;
};

ForwardResult Gpt2Model::forward(const std::vector<int>& ids, const Interventions& iv) const {
  checkIds(ids);
  const int T = static_cast<int>(ids.size()), d = config_.nEmbd;
  ForwardResult r;
  r.ids = ids;
  r.layers.resize(config_.nLayer);
  // x = wte[ids] + wpe[0..T)
  MatrixRM& x = config_.nLayer > 0 ? r.layers[0].residualIn : r.residualOut;
  x.resize(T, d);
  const ConstMapRM wte(w_->wte, config_.vocabSize, d), wpe(w_->wpe, config_.nPositions, d);
  for (int t = 0; t < T; ++t) x.row(t) = wte.row(ids[t]) + wpe.row(t);
  rerunFrom(r, 0, iv);
  return r;
}

void Gpt2Model::rerunFrom(ForwardResult& r, int fromLayer, const Interventions& iv) const {
  if (fromLayer < 0 || fromLayer > config_.nLayer ||
      static_cast<int>(r.layers.size()) != config_.nLayer) {
    throw InputError("rerunFrom: layer " + std::to_string(fromLayer) + " is outside the model");
  }
  for (std::size_t l = 0; l < iv.layers.size(); ++l) {
    for (int h : iv.layers[l].ablatedHeads) {
      if (h < 0 || h >= config_.nHead || l >= std::size_t(config_.nLayer)) {
        throw InputError("ablation " + std::to_string(l) + ":" + std::to_string(h) +
                         " is outside the model");
      }
    }
  }
  r.interventions = iv;
  {
    Workspace ws;  // freed before the logits, the largest buffer, are allocated
    for (int l = fromLayer; l < config_.nLayer; ++l) runLayer(r, l, iv, ws);
  }
  // The workspace now lies as free holes between kept activations: hand its pages back, so the
  // peak is the mapped file plus what the result holds.
  ::malloc_trim(0);
  finish(r);
}

void Gpt2Model::runLayer(ForwardResult& r, int l, const Interventions& iv, Workspace& ws) const {
  const Weights::Layer& W = w_->layers[l];
  const Gpt2Config& c = config_;
  const int d = c.nEmbd, H = c.nHead, dh = c.headDim();
  LayerActivations& act = r.layers[l];
  const MatrixRM& x = act.residualIn;
  const int T = static_cast<int>(x.rows());
  MatrixRM& next = l + 1 < c.nLayer ? r.layers[l + 1].residualIn : r.residualOut;

  // Attention block.
  layernormForward(x, W.ln1W, W.ln1B, c.layerNormEps, ws.a);
  gpt2Matmul(ws.a, W.attnW, W.attnB, d, 3 * d, ws.qkv);
  splitHeads(ws.qkv, H, dh, act.q, act.k, act.v);
  AttentionParams p;
  static const LayerIntervention kNone;
  const LayerIntervention* li = iv.find(l);
  if (!li) li = &kNone;
  p.mask = li->mask;
  p.mask.causal = true;
  p.temperature = li->temperature;
  validateParams(p, H, T, T);
  ws.engine->run(act.q, act.k, act.v, p);
  const AttentionResult& res = ws.engine->result(kStageWeights | kStageOutput | kStageRows);
  act.weights = res.weights;
  act.rows = res.rows;
  mergeHeads(res.output, li->ablatedHeads, ws.merged);
  gpt2Matmul(ws.merged, W.projW, W.projB, d, d, ws.proj);
  next = x + ws.proj;

  // MLP block.
  layernormForward(next, W.ln2W, W.ln2B, c.layerNormEps, ws.m);
  gpt2Matmul(ws.m, W.fcW, W.fcB, d, c.nInner, ws.hidden);
  activationForward(ws.hidden, c.activation);
  gpt2Matmul(ws.hidden, W.mlpW, W.mlpB, c.nInner, d, ws.out);
  next += ws.out;
}

void Gpt2Model::finish(ForwardResult& r) const {
  MatrixRM f;
  layernormForward(r.residualOut, w_->lnfW, w_->lnfB, config_.layerNormEps, f);
  gpt2MatmulTransposed(f, w_->lm, config_.vocabSize, config_.nEmbd, r.logits);
}

std::vector<TokenProb> Gpt2Model::topK(const ForwardResult& r, int k, int pos) {
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

}  // namespace attnviz
