// Image transformers: ViT, DeiT, DINOv2 and CLIP's and SigLIP's vision towers from a Hugging Face
// folder, on preprocessed pixels. The pass runs in double precision: the patch embedding is a
// matrix product over the flattened patches (the convolution's kernel equals its stride), then
// pre-norm encoder blocks where every token sees every other, then the final LayerNorm and the
// classification head.
#include "attnviz/model/vision.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/safetensors.h"

#include <Eigen/Dense>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace attnviz {

namespace fs = std::filesystem;
using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXd;

namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool isImageFamily(const std::string& t) {
  return t == "vit" || t == "deit" || t == "dinov2" || t == "dinov2_with_registers" ||
         t == "clip" || t == "clip_vision_model" || t == "siglip" || t == "siglip_vision_model";
}

struct Linear {
  Mat w;  // [out, in]
  Vec b;  // [out] (zero when the layer has no bias)
  Mat apply(const Mat& x) const {
    Mat y = x * w.transpose();
    y.rowwise() += b.transpose();
    return y;
  }
};

struct Norm {
  Vec g, b;
  double eps = 1e-12;
  Mat apply(const Mat& x) const {
    Mat y(x.rows(), x.cols());
    for (Eigen::Index t = 0; t < x.rows(); ++t) {
      const double mean = x.row(t).mean();
      const double var = (x.row(t).array() - mean).square().mean();
      const double inv = 1.0 / std::sqrt(var + eps);
      for (Eigen::Index i = 0; i < x.cols(); ++i) y(t, i) = (x(t, i) - mean) * inv * g(i) + b(i);
    }
    return y;
  }
};

struct Block {
  Norm norm1, norm2;
  Linear q, k, v, o, fc1, fc2;
  Vec scale1, scale2;  // DINOv2's layer scale (empty otherwise)
};

std::string shapeText(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Torch's cubic convolution weights (A = -0.75) for a fractional offset t.
void cubicWeights(double t, double w[4]) {
  const double A = -0.75;
  auto near = [&](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto far = [&](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// Bicubic resize of [C, inH, inW] to [C, outH, outW], align_corners=False, no antialiasing:
// each output sample reads the 4 x 4 input samples around its source point, indices clamped at
// the border, as torch's upsample_bicubic2d does when given an output size.
Mat bicubicResize(const Mat& src /* [C, inH*inW] */, int inH, int inW, int outH, int outW) {
  const double sh = double(inH) / outH, sw = double(inW) / outW;
  Mat out(src.rows(), Eigen::Index(outH) * outW);
  for (int oy = 0; oy < outH; ++oy) {
    const double ry = sh * (oy + 0.5) - 0.5;
    const int y0 = int(std::floor(ry));
    double wy[4];
    cubicWeights(ry - y0, wy);
    for (int ox = 0; ox < outW; ++ox) {
      const double rx = sw * (ox + 0.5) - 0.5;
      const int x0 = int(std::floor(rx));
      double wx[4];
      cubicWeights(rx - x0, wx);
      for (Eigen::Index c = 0; c < src.rows(); ++c) {
        double acc = 0;
        for (int a = 0; a < 4; ++a) {
          const int yy = std::clamp(y0 - 1 + a, 0, inH - 1);
          double row = 0;
          for (int b = 0; b < 4; ++b) {
            const int xx = std::clamp(x0 - 1 + b, 0, inW - 1);
            row += wx[b] * src(c, Eigen::Index(yy) * inW + xx);
          }
          acc += wy[a] * row;
        }
        out(c, Eigen::Index(oy) * outW + ox) = acc;
      }
    }
  }
  return out;
}

// One axis of torch's antialiased bicubic resize (align_corners=False, a = -0.5): output i
// averages the inputs within the filter's support around its source centre, the support
// widened by the scale when shrinking, the weights normalised to sum 1 (no index clamping).
Mat aaAxisWeights(int in, int out) {
  const double scale = double(in) / out;
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
  auto filter = [](double x) {
    const double a = -0.5;
    x = std::fabs(x);
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
  };
  Mat w = Mat::Zero(out, in);
  for (int i = 0; i < out; ++i) {
    const double center = scale * (i + 0.5);
    const int lo = std::max(int(center - support + 0.5), 0);
    const int hi = std::min(int(center + support + 0.5), in);
    double total = 0;
    for (int j = lo; j < hi; ++j) total += w(i, j) = filter((j - center + 0.5) * inv);
    if (total != 0)
      for (int j = lo; j < hi; ++j) w(i, j) /= total;
  }
  return w;
}

// Antialiased bicubic resize of [C, inH*inW] to [C, outH*outW]: rows along the width first,
// then along the height.
Mat bicubicResizeAntialiased(const Mat& src, int inH, int inW, int outH, int outW) {
  const Mat wx = aaAxisWeights(inW, outW), wy = aaAxisWeights(inH, outH);
  Mat out(src.rows(), Eigen::Index(outH) * outW);
  for (Eigen::Index c = 0; c < src.rows(); ++c) {
    const Mat img = Eigen::Map<const Mat>(src.row(c).data(), inH, inW);
    Mat wide =
        (img * wx.transpose()).cast<float>().cast<double>();  // torch keeps float32 between passes
    const Mat res = wy * wide;
    out.row(c) = Eigen::Map<const Eigen::RowVectorXd>(res.data(), res.size());
  }
  return out;
}

}  // namespace

struct VisionModel::Impl {
  std::string weightsPath;
  Mat patchW;  // [d, C*p*p]
  Vec patchB;
  Vec cls, dist;
  Mat registers;  // [R, d]
  Mat positions;  // [1 + dist + N, d] (CLS, DIST, then the patches)
  std::vector<Block> blocks;
  Norm final, pre;
  bool hasPre = false, finalOnHidden = true, hasProbe = false;
  Vec probe;  // SigLIP's pooling query
  Linear probeQ, probeK;
  enum class Head { None, Cls, ClsAndDist, ClsAndMean } head = Head::None;
  Linear classifier, distClassifier;
};

bool VisionModel::isVisionFolder(const std::string& dir) {
  std::error_code ec;
  const fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::is_regular_file(cfg, ec)) return false;
  try {
    const auto j = nlohmann::json::parse(readAll(cfg.string()));
    return j.is_object() && j.contains("model_type") && j["model_type"].is_string() &&
           isImageFamily(j["model_type"].get<std::string>());
  } catch (...) {
    return false;
  }
}

VisionModel VisionModel::load(const std::string& dir) {
  const std::string cfgPath = (fs::path(dir) / "config.json").string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(readAll(cfgPath));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(cfgPath + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw InputError(cfgPath + ": not a JSON object");
  VisionModel m;
  VisionConfig& c = m.cfg_;
  c.family = j.value("model_type", std::string());
  if (!isImageFamily(c.family))
    throw InputError(cfgPath + ": model_type '" + c.family +
                     "' is not an image family attnviz runs");
  // CLIPModel and SiglipModel keep the vision tower's keys in vision_config; others at the top.
  const bool siglip = c.family == "siglip" || c.family == "siglip_vision_model";
  const bool clip = c.family == "clip" || c.family == "clip_vision_model" || siglip;
  const bool nested = c.family == "clip" || c.family == "siglip";
  if (nested && !(j.contains("vision_config") && j["vision_config"].is_object()))
    throw InputError(cfgPath + ": model_type " + c.family + " without a vision_config object");
  const nlohmann::json& cj = nested ? j["vision_config"] : j;
  auto intKey = [&](const char* key, int def, bool required) {
    if (!cj.contains(key)) {
      if (required) throw InputError(cfgPath + ": " + key + " is missing");
      return def;
    }
    const auto& v = cj[key];
    if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[0] == v[1])
      return v[0].get<int>();
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1 << 20))
      throw InputError(cfgPath + ": " + key + " must be a positive integer");
    return v.get<int>();
  };
  const bool dino = c.family == "dinov2" || c.family == "dinov2_with_registers";
  c.hidden = intKey("hidden_size", 768, false);
  c.layers = intKey("num_hidden_layers", 12, false);
  c.heads = intKey("num_attention_heads", 12, false);
  c.imageSize = intKey("image_size", dino ? 518 : 224, false);
  c.patchSize = intKey("patch_size", dino ? 14 : clip ? 32 : 16, false);
  c.channels = intKey("num_channels", 3, false);
  if (dino) {
    double ratio = 4;
    if (j.contains("mlp_ratio")) {
      if (!j["mlp_ratio"].is_number() || j["mlp_ratio"].get<double>() <= 0)
        throw InputError(cfgPath + ": mlp_ratio must be a positive number");
      ratio = j["mlp_ratio"].get<double>();
    }
    c.intermediate = int(c.hidden * ratio);
    if (j.value("use_swiglu_ffn", false))
      throw InputError(cfgPath + ": use_swiglu_ffn (the SwiGLU MLP) is not supported yet");
    c.layerScale = true;
    if (c.family == "dinov2_with_registers") c.registers = intKey("num_register_tokens", 4, false);
    c.interpolatePositions = true;
  } else {
    c.intermediate = intKey("intermediate_size", 3072, false);
  }
  if (c.hidden % c.heads != 0)
    throw InputError(cfgPath + ": hidden_size " + std::to_string(c.hidden) +
                     " is not a multiple of num_attention_heads " + std::to_string(c.heads));
  if (c.imageSize < c.patchSize)
    throw InputError(cfgPath + ": image_size is smaller than patch_size");
  c.eps = dino || siglip ? 1e-6 : clip ? 1e-5 : 1e-12;
  if (cj.contains("layer_norm_eps")) {
    if (!cj["layer_norm_eps"].is_number() || cj["layer_norm_eps"].get<double>() < 0)
      throw InputError(cfgPath + ": layer_norm_eps must be a number >= 0");
    c.eps = cj["layer_norm_eps"].get<double>();
  }
  c.qkvBias = clip ? true : cj.value("qkv_bias", true);
  const std::string act = cj.contains("hidden_act") && cj["hidden_act"].is_string()
                              ? cj["hidden_act"].get<std::string>()
                          : siglip ? "gelu_pytorch_tanh"
                          : clip   ? "quick_gelu"
                                   : "gelu";
  c.tanhGelu = act == "gelu_pytorch_tanh" || act == "gelu_new";
  if (act != "gelu" && act != "quick_gelu" && !c.tanhGelu)
    throw InputError(cfgPath + ": hidden_act '" + act +
                     "' is not supported (gelu, quick_gelu, gelu_pytorch_tanh)");
  c.quickGelu = act == "quick_gelu";
  c.distTokens = c.family == "deit" ? 1 : 0;
  c.hasCls = !siglip;
  if (j.contains("id2label") && j["id2label"].is_object()) {
    for (auto it = j["id2label"].begin(); it != j["id2label"].end(); ++it) {
      try {
        c.id2label[std::stoi(it.key())] =
            it.value().is_string() ? it.value().get<std::string>() : "";
      } catch (...) {
      }
    }
  }

  auto impl = std::make_shared<Impl>();
  const std::string wPath = (fs::path(dir) / "model.safetensors").string();
  std::error_code ec;
  if (!fs::is_regular_file(wPath, ec))
    throw InputError(dir +
                     ": no model.safetensors (sharded image checkpoints are not supported yet)");
  const SafetensorsFile st = SafetensorsFile::open(wPath);
  impl->weightsPath = wPath;

  // ViTForImageClassification saves the encoder under "vit.", DeiT's heads under "deit.", DINOv2's
  // under "dinov2."; the bare models have no prefix.
  std::string prefix;
  if (clip) {
    prefix = "vision_model.";
  } else if (!st.find("embeddings.cls_token")) {
    prefix = c.family + ".";
    if (!st.find(prefix + "embeddings.cls_token"))
      throw InputError(wPath + ": no tensor 'embeddings.cls_token' (nor '" + prefix +
                       "embeddings.cls_token')");
  }
  auto get = [&](const std::string& name, std::vector<std::int64_t> shape) {
    const StTensorInfo* t = st.find(name);
    if (!t) throw InputError(wPath + ": no tensor '" + name + "'");
    if (t->shape != shape)
      throw InputError(wPath + ": tensor '" + name + "' has shape " + shapeText(t->shape) +
                       ", expected " + shapeText(shape));
    const FloatBuffer f = st.toFloat32(*t);
    std::vector<double> v(t->elementCount());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = f[i];
    return v;
  };
  auto vec = [&](const std::string& name, std::int64_t n) {
    const auto v = get(name, {n});
    return Vec(Eigen::Map<const Vec>(v.data(), n));
  };
  auto mat = [&](const std::string& name, std::int64_t r, std::int64_t cc,
                 std::vector<std::int64_t> shape = {}) {
    const auto v = get(name, shape.empty() ? std::vector<std::int64_t>{r, cc} : shape);
    return Mat(Eigen::Map<const Mat>(v.data(), r, cc));
  };
  auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in, bool bias) {
    Linear l;
    l.w = mat(name + ".weight", out, in);
    l.b = bias ? vec(name + ".bias", out) : Vec::Zero(out);
    return l;
  };
  auto norm = [&](const std::string& name) {
    Norm n;
    n.g = vec(name + ".weight", c.hidden);
    n.b = vec(name + ".bias", c.hidden);
    n.eps = c.eps;
    return n;
  };
  const std::int64_t d = c.hidden, p = c.patchSize, C = c.channels;
  const std::int64_t grid = c.imageSize / c.patchSize, N = grid * grid;
  const std::string e = prefix + "embeddings.";
  if (clip) {
    // CLIP: a class embedding [d], the patch convolution without bias, positions [N + 1, d], a
    // LayerNorm before the encoder (pre_layrnorm, so spelled); last_hidden_state is the encoder's
    // output (post_layernorm is applied to the pooled CLS only).
    impl->patchW = mat(e + "patch_embedding.weight", d, C * p * p, {d, C, p, p});
    // SigLIP: no class token, a patch bias, positions [N, d], no LayerNorm before the encoder;
    // last_hidden_state is after post_layernorm; the pooling head's probe attends over it.
    impl->patchB = siglip ? vec(e + "patch_embedding.bias", d) : Vec::Zero(d);
    if (!siglip) {
      impl->cls = vec(e + "class_embedding", d);
      impl->pre = norm(prefix + "pre_layrnorm");
      impl->hasPre = true;
    }
    impl->positions = mat(e + "position_embedding.weight", (siglip ? 0 : 1) + N, d);
    for (int l = 0; l < c.layers; ++l) {
      const std::string b = prefix + "encoder.layers." + std::to_string(l) + ".";
      Block blk;
      blk.q = linear(b + "self_attn.q_proj", d, d, true);
      blk.k = linear(b + "self_attn.k_proj", d, d, true);
      blk.v = linear(b + "self_attn.v_proj", d, d, true);
      blk.o = linear(b + "self_attn.out_proj", d, d, true);
      blk.norm1 = norm(b + "layer_norm1");
      blk.norm2 = norm(b + "layer_norm2");
      blk.fc1 = linear(b + "mlp.fc1", c.intermediate, d, true);
      blk.fc2 = linear(b + "mlp.fc2", d, c.intermediate, true);
      impl->blocks.push_back(std::move(blk));
    }
    impl->final = norm(prefix + "post_layernorm");  // CLIP: the pooled output's only
    impl->finalOnHidden = siglip;
    if (siglip && st.find(prefix + "head.probe")) {
      const std::string h = prefix + "head.";
      impl->probe = mat(h + "probe", 1, d, {1, 1, d}).row(0).transpose();
      const Mat inW = mat(h + "attention.in_proj_weight", 3 * d, d);
      const Vec inB = vec(h + "attention.in_proj_bias", 3 * d);
      impl->probeQ.w = inW.topRows(d);
      impl->probeQ.b = inB.head(d);
      impl->probeK.w = inW.middleRows(d, d);
      impl->probeK.b = inB.segment(d, d);
      impl->hasProbe = true;
      c.hasProbe = true;
    }
    m.impl_ = std::move(impl);
    return m;
  }
  impl->patchW = mat(e + "patch_embeddings.projection.weight", d, C * p * p, {d, C, p, p});
  impl->patchB = vec(e + "patch_embeddings.projection.bias", d);
  impl->cls = mat(e + "cls_token", 1, d, {1, 1, d}).row(0).transpose();
  if (c.registers)
    impl->registers = mat(e + "register_tokens", c.registers, d, {1, c.registers, d});
  if (c.distTokens) impl->dist = mat(e + "distillation_token", 1, d, {1, 1, d}).row(0).transpose();
  const std::int64_t P = 1 + c.distTokens + N;
  impl->positions = mat(e + "position_embeddings", P, d, {1, P, d});
  for (int l = 0; l < c.layers; ++l) {
    const std::string b = prefix + "encoder.layer." + std::to_string(l) + ".";
    Block blk;
    blk.q = linear(b + "attention.attention.query", d, d, c.qkvBias);
    blk.k = linear(b + "attention.attention.key", d, d, c.qkvBias);
    blk.v = linear(b + "attention.attention.value", d, d, c.qkvBias);
    blk.o = linear(b + "attention.output.dense", d, d, true);
    if (dino) {
      blk.norm1 = norm(b + "norm1");
      blk.norm2 = norm(b + "norm2");
      blk.fc1 = linear(b + "mlp.fc1", c.intermediate, d, true);
      blk.fc2 = linear(b + "mlp.fc2", d, c.intermediate, true);
      blk.scale1 = vec(b + "layer_scale1.lambda1", d);
      blk.scale2 = vec(b + "layer_scale2.lambda1", d);
    } else {
      blk.norm1 = norm(b + "layernorm_before");
      blk.norm2 = norm(b + "layernorm_after");
      blk.fc1 = linear(b + "intermediate.dense", c.intermediate, d, true);
      blk.fc2 = linear(b + "output.dense", d, c.intermediate, true);
    }
    impl->blocks.push_back(std::move(blk));
  }
  impl->final = norm(prefix + "layernorm");

  auto headRows = [&](const std::string& name) -> std::int64_t {
    const StTensorInfo* t = st.find(name + ".weight");
    if (!t || t->shape.size() != 2 || t->shape[0] < 1)
      throw InputError(wPath + ": tensor '" + name + ".weight' is missing or not [num_labels, in]");
    return t->shape[0];
  };
  if (c.family == "deit" && st.find("cls_classifier.weight")) {
    const std::int64_t n = headRows("cls_classifier");
    impl->classifier = linear("cls_classifier", n, d, true);
    impl->distClassifier = linear("distillation_classifier", n, d, true);
    impl->head = Impl::Head::ClsAndDist;
    c.numLabels = int(n);
  } else if (st.find("classifier.weight")) {
    const std::int64_t n = headRows("classifier");
    impl->classifier = linear("classifier", n, dino ? 2 * d : d, true);
    impl->head = dino ? Impl::Head::ClsAndMean : Impl::Head::Cls;
    c.numLabels = int(n);
  }
  m.impl_ = std::move(impl);
  return m;
}

VisionResult VisionModel::run(const std::vector<float>& pixels, int height, int width,
                              const VisionRunOptions& opts, const std::string& name) const {
  const VisionConfig& c = cfg_;
  const Impl& w = *impl_;
  const int p = c.patchSize, d = c.hidden, H = c.heads, hd = d / H;
  if (pixels.size() != std::size_t(c.channels) * height * width)
    throw InputError(name + ": expected " + std::to_string(c.channels) + " channels");
  if (c.interpolatePositions) {
    if (height < p || width < p)
      throw InputError(name + ": the image is " + std::to_string(height) + "x" +
                       std::to_string(width) + ", smaller than one patch (" + std::to_string(p) +
                       ")");
  } else if (height != c.imageSize || width != c.imageSize) {
    throw InputError(name + ": the pixels are " + std::to_string(height) + "x" +
                     std::to_string(width) + "; " + c.family + " takes " +
                     std::to_string(c.imageSize) + "x" + std::to_string(c.imageSize));
  }
  const int gh = height / p, gw = width / p, N = gh * gw;
  const int pre = c.prefixTokens();
  const int T = pre + N;
  for (int i : opts.maskPatches)
    if (i < 0 || i >= N)
      throw UsageError("--mask-patches: patch " + std::to_string(i) + " is outside 0.." +
                       std::to_string(N - 1));
  if (!(opts.temperature > 0.0) || !std::isfinite(opts.temperature))
    throw UsageError("--temperature: expected a number > 0, got " +
                     std::to_string(opts.temperature));
  for (auto [l, h] : opts.ablate)
    if (l < 0 || l >= c.layers || h < 0 || h >= H)
      throw UsageError("--ablate " + std::to_string(l) + ":" + std::to_string(h) +
                       ": the model has " + std::to_string(c.layers) + " layers of " +
                       std::to_string(H) + " heads");

  // Patches flattened as the convolution's weight is: channel, then kernel row, then column.
  Mat patches(N, Eigen::Index(c.channels) * p * p);
  for (int r = 0; r < gh; ++r)
    for (int col = 0; col < gw; ++col)
      for (int ch = 0; ch < c.channels; ++ch)
        for (int y = 0; y < p; ++y)
          for (int x = 0; x < p; ++x)
            patches(r * gw + col, (Eigen::Index(ch) * p + y) * p + x) =
                pixels[(std::size_t(ch) * height + r * p + y) * width + col * p + x];
  Mat patchEmb = patches * w.patchW.transpose();
  patchEmb.rowwise() += w.patchB.transpose();

  // Position embeddings of the patches: as stored, or (DINOv2) resized bicubically to the grid
  // when the grid differs from the stored one or the image is not square.
  const int lead = (c.hasCls ? 1 : 0) +
                   c.distTokens;  // tokens with their own position embedding before the patches
  const int g0 = c.imageSize / p;
  Mat patchPos = w.positions.bottomRows(w.positions.rows() - lead);
  if (c.interpolatePositions && !(N == g0 * g0 && height == width)) {
    Mat chw = patchPos.transpose();  // [d, g0*g0]
    // torch runs this resize in float32
    const Mat f = chw.cast<float>().cast<double>();
    const Mat r = c.registers || c.family == "dinov2_with_registers"
                      ? bicubicResizeAntialiased(f, g0, g0, gh, gw)
                      : bicubicResize(f, g0, g0, gh, gw);
    patchPos = r.cast<float>().cast<double>().transpose();
  }

  Mat x(T, d);
  int row = 0;
  if (c.hasCls) x.row(row++) = w.cls.transpose() + w.positions.row(0);
  if (c.distTokens) x.row(row++) = w.dist.transpose() + w.positions.row(1);
  for (int i = 0; i < c.registers; ++i) x.row(row++) = w.registers.row(i);
  x.bottomRows(N) = patchEmb + patchPos;
  if (w.hasPre) x = w.pre.apply(x);

  VisionResult res;
  res.tokens = T;
  res.gridH = gh;
  res.gridW = gw;
  if (c.hasCls) res.labels.push_back("CLS");
  if (c.distTokens) res.labels.push_back("DIST");
  for (int i = 0; i < c.registers; ++i) res.labels.push_back("REG" + std::to_string(i));
  for (int r = 0; r < gh; ++r)
    for (int col = 0; col < gw; ++col)
      res.labels.push_back("p(" + std::to_string(r) + "," + std::to_string(col) + ")");
  if (opts.weights) res.weights.assign(std::size_t(c.layers) * H * T * T, 0.0f);
  const auto keepResidual = [&](int at) {
    float* dst = res.residual.data() + std::size_t(at) * T * d;
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < d; ++i) dst[std::size_t(t) * d + i] = float(x(t, i));
  };
  if (opts.residual) {
    res.residual.assign(std::size_t(c.layers + 1) * T * d, 0.0f);
    keepResidual(0);
  }

  std::vector<char> hidden(T, 0);
  for (int i : opts.maskPatches) hidden[pre + i] = 1;
  // 1 / sqrt(d_head), and the temperature: L = s / tau, the text models' logit formula.
  const double scale = 1.0 / std::sqrt(double(hd)) / opts.temperature;
  for (int l = 0; l < c.layers; ++l) {
    const Block& b = w.blocks[l];
    const Mat n1 = b.norm1.apply(x);
    const Mat q = b.q.apply(n1), k = b.k.apply(n1), v = b.v.apply(n1);
    Mat ctx = Mat::Zero(T, d);
    for (int h = 0; h < H; ++h) {
      Mat s = q.middleCols(h * hd, hd) * k.middleCols(h * hd, hd).transpose() * scale;
      for (int i = 0; i < T; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int jj = 0; jj < T; ++jj)
          if (!hidden[jj]) mx = std::max(mx, s(i, jj));
        double sum = 0;
        for (int jj = 0; jj < T; ++jj) {
          s(i, jj) = hidden[jj] ? 0.0 : std::exp(s(i, jj) - mx);
          sum += s(i, jj);
        }
        s.row(i) /= sum;
      }
      if (opts.weights) {
        float* dst = res.weights.data() + (std::size_t(l) * H + h) * T * T;
        for (int i = 0; i < T; ++i)
          for (int jj = 0; jj < T; ++jj) dst[std::size_t(i) * T + jj] = float(s(i, jj));
      }
      const bool ablated = std::find(opts.ablate.begin(), opts.ablate.end(),
                                     std::pair<int, int>(l, h)) != opts.ablate.end();
      if (!ablated) ctx.middleCols(h * hd, hd) = s * v.middleCols(h * hd, hd);
    }
    Mat attn = b.o.apply(ctx);
    if (b.scale1.size()) attn = attn.array().rowwise() * b.scale1.transpose().array();
    x += attn;
    Mat mid = b.fc1.apply(b.norm2.apply(x));
    if (c.tanhGelu)
      mid = mid.unaryExpr([](double z) {
        const double k = std::sqrt(2.0 / 3.14159265358979323846);
        return 0.5 * z * (1.0 + std::tanh(k * (z + 0.044715 * z * z * z)));
      });
    else if (c.quickGelu)
      mid = mid.unaryExpr([](double z) { return z / (1.0 + std::exp(-1.702 * z)); });
    else
      mid = mid.unaryExpr([](double z) { return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))); });
    Mat out = b.fc2.apply(mid);
    if (b.scale2.size()) out = out.array().rowwise() * b.scale2.transpose().array();
    x += out;
    if (opts.residual) keepResidual(l + 1);
  }
  const Mat last = w.finalOnHidden ? w.final.apply(x) : x;
  if (opts.probe && w.hasProbe) {
    // The probe's multi-head attention over the last hidden state, hidden patches masked.
    const Mat q = w.probeQ.apply(w.probe.transpose()), k = w.probeK.apply(last);
    res.probe.assign(std::size_t(H) * T, 0.0f);
    for (int h = 0; h < H; ++h) {
      const Eigen::VectorXd s =
          k.middleCols(h * hd, hd) * q.middleCols(h * hd, hd).transpose() * scale;
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int t = 0; t < T; ++t)
        if (!hidden[t]) mx = std::max(mx, s(t));
      std::vector<double> e(T, 0.0);
      for (int t = 0; t < T; ++t)
        if (!hidden[t]) sum += e[t] = std::exp(s(t) - mx);
      for (int t = 0; t < T; ++t) res.probe[std::size_t(h) * T + t] = float(e[t] / sum);
    }
  }
  res.hidden.resize(std::size_t(T) * d);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < d; ++i) res.hidden[std::size_t(t) * d + i] = float(last(t, i));

  if (w.head != Impl::Head::None) {
    Vec z;
    if (w.head == Impl::Head::Cls) {
      z = w.classifier.apply(last.topRows(1)).row(0).transpose();
    } else if (w.head == Impl::Head::ClsAndDist) {
      z = 0.5 * (w.classifier.apply(last.topRows(1)).row(0).transpose() +
                 w.distClassifier.apply(last.middleRows(1, 1)).row(0).transpose());
    } else {
      Mat feat(1, 2 * d);
      feat.leftCols(d) = last.topRows(1);
      feat.rightCols(d) = last.bottomRows(N).colwise().mean();  // registers left out
      z = w.classifier.apply(feat).row(0).transpose();
    }
    res.logits.resize(z.size());
    for (Eigen::Index i = 0; i < z.size(); ++i) res.logits[i] = float(z(i));
  }
  return res;
}

}  // namespace attnviz
