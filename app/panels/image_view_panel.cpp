// attnviz panel: the image view of an image model (ViT, DeiT, DINOv2, CLIP's and SigLIP's vision
// towers): the image as the model sees it with one token's attention row (or the rollout's) over
// its patches, upsampled and blended exactly as the overlay figure (attnviz export --overlay)
// blends it, a colour bar, the controls, and a tooltip per patch. The model runs on a worker.
#include "cli/cli.h"
#include "gui/heatmap_renderer.h"
#include "attnviz/render/colormap.h"
#include "panels/panels.h"

#include "attnviz/formats/fileio.h"
#include "attnviz/formats/scene.h"
#include "attnviz/model/model.h"
#include "attnviz/model/model_names.h"

#include <imgui.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

namespace attnviz::gui {

namespace {

app::OverlayChoice choiceOf(const AppState& s) {
  const ImageViewState& v = s.image;
  app::OverlayChoice c;
  c.layer = v.layer, c.head = v.head, c.headAverage = v.headAverage && !v.rollout;
  c.token = v.token, c.rollout = v.rollout, c.opacity = double(v.opacity);
  c.rolloutOptions = v.rolloutOptions;
  c.colormap = s.view.weightColormap;
  return c;
}

std::string fileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// Checks the view's layer, head and token against the pass (UsageError naming the option).
void checkChoice(const ImageViewState& v) {
  const VisionConfig& c = v.pass->model.config();
  if (v.layer < 0 || v.layer >= c.layers)
    throw UsageError("--layer " + std::to_string(v.layer) + ": out of range, the model has " +
                     std::to_string(c.layers) + " layers");
  if (v.head < 0 || v.head >= c.heads)
    throw UsageError("--head " + std::to_string(v.head) + ": out of range, the model has " +
                     std::to_string(c.heads) + " heads");
  if (v.token == app::kProbeOverlayToken && !c.hasProbe)
    throw UsageError("--token probe: " + v.model + " (" + c.family +
                     ") has no pooling probe (SigLIP's head)");
  if (v.token != kDefaultOverlayToken && v.token != app::kProbeOverlayToken &&
      (v.token < 0 || v.token >= v.pass->result.tokens))
    throw UsageError("--token " + std::to_string(v.token) + ": out of range, the image gives " +
                     std::to_string(v.pass->result.tokens) + " tokens");
}

// Adopts the worker's result (or error); `strict`: throw instead of reporting.
void adopt(AppState& s, bool strict) {
  ImageViewState& v = s.image;
  try {
    v.pass = v.job.get();
    v.job = {};
    v.passSeconds = nowSeconds() - (v.jobInfo ? v.jobInfo->startedAt : nowSeconds());
    v.error.clear();
    if (strict) {
      checkChoice(v);
    } else {  // a new image keeps the view's choice where it still fits
      const VisionConfig& c = v.pass->model.config();
      v.layer = std::clamp(v.layer, 0, c.layers - 1);
      v.head = std::clamp(v.head, 0, c.heads - 1);
      if (v.token >= v.pass->result.tokens ||
          (v.token == app::kProbeOverlayToken && !c.hasProbe))
        v.token = kDefaultOverlayToken;
    }
    v.drawnFor = {};
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    v.job = {};
    v.pass.reset();
    v.error = e.what();
    if (strict) throw InputError(e.what());
    reportError(s, e.what());
  }
}

// The map of the view's choice, recomputed when the choice changes, and the picture it blends.
void redraw(AppState& s, RgbaImage& tex) {
  ImageViewState& v = s.image;
  const ImageViewState::Key want{v.pass.get(),
                                 v.layer,
                                 v.head,
                                 v.token,
                                 v.headAverage,
                                 v.rollout,
                                 v.rolloutOptions.maxHeads,
                                 v.rolloutOptions.discard,
                                 v.opacity,
                                 s.view.weightColormap};
  if (want == v.drawnFor && tex.tex.id()) return;
  const app::VisionPass& p = *v.pass;
  const PatchMap m = app::overlayChoiceMap(p, choiceOf(s));
  v.map = m.values;
  v.mapToken = m.token;
  double top = 0;
  for (double x : v.map)
    if (std::isfinite(x)) top = std::max(top, x);
  v.mapMax = top > 0 ? top : 1.0;
  // The figure's own steps (overlay_figure.h): what is seen here is what the export writes.
  const RgbImage& img = p.pre.seen;
  const std::vector<double> up = upsampleBilinear(v.map, m.gridH, m.gridW, img.width, img.height);
  const std::vector<std::uint8_t> rgb =
      blendOverlay(img, up, v.mapMax, s.view.weightColormap, double(v.opacity));
  std::vector<std::uint8_t> rgba(std::size_t(img.width) * img.height * 4, 255);
  for (std::size_t k = 0, n = std::size_t(img.width) * img.height; k < n; ++k)
    for (int c = 0; c < 3; ++c) rgba[k * 4 + c] = rgb[k * 3 + c];
  tex.set(rgba, img.width, img.height);
  v.drawnFor = want;
}

// The text boxes' ablations and hidden patches, checked against the model, as the next pass's.
void applyInterventionText(AppState& s) {
  ImageViewState& v = s.image;
  try {
    app::VisionInterventions iv;
    const std::string a = v.ablateText, m = v.maskText;
    const auto blank = [](const std::string& t) {
      return t.find_first_not_of(" \t") == std::string::npos;
    };
    std::string aa, mm;
    for (char ch : a) if (ch != ' ') aa += ch;
    for (char ch : m) if (ch != ' ') mm += ch;
    if (!blank(aa)) iv.ablate = parseLayerHeadList({aa});
    if (!blank(mm)) iv.maskPatches = parsePatchList(mm);
    iv.temperature = v.interventions.temperature;  // the slider's, already > 0
    if (v.pass) {
      const VisionConfig& c = v.pass->model.config();
      for (auto [l, h] : iv.ablate)
        if (l >= c.layers || h >= c.heads)
          throw UsageError("--ablate " + std::to_string(l) + ":" + std::to_string(h) +
                           ": the model has " + std::to_string(c.layers) + " layers of " +
                           std::to_string(c.heads) + " heads");
      const int N = v.pass->result.gridH * v.pass->result.gridW;
      for (int i : iv.maskPatches)
        if (i >= N)
          throw UsageError("--mask-patches: patch " + std::to_string(i) + " is outside 0.." +
                           std::to_string(N - 1));
    }
    v.interventionError.clear();
    v.interventions = iv;
    if (!v.imagePath.empty() && !v.job.valid()) openImageFile(s, v.imagePath);
  } catch (const std::exception& e) {
    v.interventionError = e.what();
  }
}

void drawControls(AppState& s) {
  ImageViewState& v = s.image;
  const float sc = s.ui.uiScale;
  ImGui::TextWrapped("Model: %s", fileName(v.modelDir).c_str());
  if (v.pass) {
    const VisionConfig& c = v.pass->model.config();
    const VisionResult& r = v.pass->result;
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s \xc2\xb7 %d layers \xc2\xb7 %d heads \xc2\xb7 %d tokens (%d x %d patches)",
                       c.family.c_str(), c.layers, c.heads, r.tokens, r.gridH, r.gridW);
    ImGui::PopStyleColor();
  }
  ImGui::TextWrapped("Image: %s", v.imagePath.empty() ? "(none)" : fileName(v.imagePath).c_str());
  if (!v.notes.empty() && ImGui::CollapsingHeader("Notes", ImGuiTreeNodeFlags_DefaultOpen)) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", v.notes.c_str());
    ImGui::PopStyleColor();
  }
  if (ImGui::Button("Open image\xe2\x80\xa6  (Ctrl+O)", ImVec2(-1, 0))) s.ui.requestOpenDialog = true;
  if (!v.pass) return;
  const VisionConfig& c = v.pass->model.config();
  const VisionResult& r = v.pass->result;
  ImGui::Separator();
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderInt("##layer", &v.layer, 0, c.layers - 1, "layer %d");
  ImGui::BeginDisabled(v.headAverage || v.rollout);
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderInt("##head", &v.head, 0, c.heads - 1, "head %d");
  ImGui::EndDisabled();
  ImGui::BeginDisabled(v.rollout);
  ImGui::Checkbox("average of the heads", &v.headAverage);
  ImGui::EndDisabled();
  ImGui::BeginDisabled(v.token == app::kProbeOverlayToken);
  ImGui::Checkbox("Rollout (+ I, rows renormalised)", &v.rollout);
  ImGui::EndDisabled();
  if (v.rollout) {
    int fuse = v.rolloutOptions.maxHeads ? 1 : 0;
    ImGui::TextDisabled("heads:");
    ImGui::SameLine();
    ImGui::RadioButton("mean", &fuse, 0);
    ImGui::SameLine();
    ImGui::RadioButton("max", &fuse, 1);
    v.rolloutOptions.maxHeads = fuse == 1;
    float discard = float(v.rolloutOptions.discard);
    ImGui::SetNextItemWidth(-1);
    if (ImGui::SliderFloat("##discard", &discard, 0.0f, 0.9f, "discard lowest %.2f"))
      v.rolloutOptions.discard = std::round(double(discard) * 100) / 100;
  }
  // The query token: CLS (or the patch queries' mean), DIST, the registers, or a clicked patch.
  const int P = c.prefixTokens();
  std::string current = v.token == kDefaultOverlayToken
                            ? (c.hasCls ? "CLS" : "mean of the patch queries")
                        : v.token == app::kProbeOverlayToken ? "probe (pooling head)"
                                                             : r.labels[std::size_t(v.token)];
  ImGui::SetNextItemWidth(-1);
  if (ImGui::BeginCombo("##token", ("token: " + current).c_str())) {
    if (ImGui::Selectable(c.hasCls ? "CLS" : "mean of the patch queries",
                          v.token == kDefaultOverlayToken || (c.hasCls && v.token == 0)))
      v.token = kDefaultOverlayToken;
    for (int t = c.hasCls ? 1 : 0; t < P; ++t)
      if (ImGui::Selectable(r.labels[std::size_t(t)].c_str(), v.token == t)) v.token = t;
    if (c.hasProbe && ImGui::Selectable("probe (pooling head)", v.token == app::kProbeOverlayToken)) {
      v.token = app::kProbeOverlayToken;
      v.rollout = false;
    }
    ImGui::TextDisabled("a patch: click it on the image");
    ImGui::EndCombo();
  }
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderFloat("##opacity", &v.opacity, 0.0f, 1.0f, "opacity %.2f");
  ImGui::Checkbox("patch grid", &v.showGrid);
  // Beside the image: the tokens x tokens matrix, the layers x heads grid, the token norms.
  ImGui::Separator();
  ImGui::TextDisabled("beside the image");
  ImGui::RadioButton("tokens \xc3\x97 tokens", &v.side, 0);
  ImGui::RadioButton("layers \xc3\x97 heads", &v.side, 1);
  ImGui::RadioButton("token norms", &v.side, 2);
  if (v.side == 2) {
    ImGui::SetNextItemWidth(-1);
    ImGui::SliderFloat("##threshold", &v.normThreshold, 1.0f, 10.0f, "mark > %.1f x median");
  }
  // Interventions: heads ablated, patches hidden from every query's keys; the pass runs again.
  ImGui::Separator();
  ImGui::TextDisabled("interventions (the pass runs again)");
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##ablate", "ablate heads L:H, e.g. 0:1,1:3", v.ablateText,
                           sizeof v.ablateText);
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##mask", "hide patches, e.g. 3,7", v.maskText, sizeof v.maskText);
  // The temperature: every site's scores (and SigLIP's probe's) divided by it. Logarithmic, so
  // 1 sits in the middle; the pass runs again when the slider is let go (or a typed value is
  // entered), not on every step of a drag.
  float tau = float(v.interventions.temperature);
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderFloat("##temperature", &tau, 0.05f, 20.0f, "\xcf\x84 = %.3g",
                         ImGuiSliderFlags_Logarithmic))
    if (tau > 0.0f && std::isfinite(tau))
      v.interventions.temperature = app::temperatureOfFloat(tau);
  if (ImGui::IsItemDeactivatedAfterEdit()) applyInterventionText(s);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("temperature: L = s / \xcf\x84 in every layer (ctrl+click to type)");
  if (ImGui::Button("Run with these", ImVec2(-1, 0))) applyInterventionText(s);
  if (!v.interventionError.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(230, 90, 90, 255));
    ImGui::TextWrapped("%s", v.interventionError.c_str());
    ImGui::PopStyleColor();
  }
  if (!v.pass->interventions.empty())
    ImGui::TextWrapped("this pass: %s", app::interventionsText(v.pass->interventions).c_str());
  ImGui::Spacing();
  if (ImGui::Button("Export figure\xe2\x80\xa6  (Ctrl+S)", ImVec2(-1, 0)))
    s.exporter.requestOpen = true;
  ImGui::Spacing();
  ImGui::TextDisabled("took %.2f s (%s)", v.passSeconds, s.backend.backend.c_str());
  (void)sc;
}

// ---- The side panel: tokens x tokens, layers x heads, token norms ----

double g_normLow = 0;  // the lowest patch norm the norms map's colours start from

const char* sideName(int side) { return side == 1 ? "grid" : side == 2 ? "norms" : "tokens"; }

// The layer's matrix the tokens x tokens view shows: the head's, or the heads' mean.
std::vector<double> layerMatrix(const ImageViewState& v) {
  const app::VisionPass& p = *v.pass;
  const VisionConfig& c = p.model.config();
  const std::size_t T = std::size_t(p.result.tokens);
  std::vector<double> m(T * T, 0.0);
  for (int h = 0; h < c.heads; ++h) {
    if (!v.headAverage && h != v.head) continue;
    const float* w = p.result.weights.data() + (std::size_t(v.layer) * c.heads + h) * T * T;
    for (std::size_t k = 0; k < T * T; ++k) m[k] += double(w[k]);
  }
  if (v.headAverage)
    for (double& x : m) x /= double(c.heads);
  return m;
}

// The norm of every token's residual stream after the view's layer (L2, in double).
std::vector<double> tokenNorms(const app::VisionPass& p, int layer) {
  const VisionConfig& c = p.model.config();
  const std::size_t T = std::size_t(p.result.tokens), d = std::size_t(c.hidden);
  if (p.result.residual.size() != std::size_t(c.layers + 1) * T * d)
    throw InputError("the image model's pass kept no residual stream");
  std::vector<double> n(T, 0.0);
  const float* x = p.result.residual.data() + std::size_t(layer + 1) * T * d;
  for (std::size_t t = 0; t < T; ++t) {
    double ss = 0;
    for (std::size_t i = 0; i < d; ++i) ss += double(x[t * d + i]) * double(x[t * d + i]);
    n[t] = std::sqrt(ss);
  }
  return n;
}

double medianOf(std::vector<double> x) {
  if (x.empty()) return 0;
  const std::size_t k = x.size() / 2;
  std::nth_element(x.begin(), x.begin() + std::ptrdiff_t(k), x.end());
  const double hi = x[k];
  if (x.size() % 2) return hi;
  return 0.5 * (hi + *std::max_element(x.begin(), x.begin() + std::ptrdiff_t(k)));
}

// The token whose row the grid's thumbnails show (the probe has no per-layer row: CLS's, or
// the patch queries' mean).
int gridToken(const ImageViewState& v) {
  return v.token == app::kProbeOverlayToken ? kDefaultOverlayToken : v.token;
}

void colourInto(std::vector<std::uint8_t>& rgba, std::size_t at, ColormapId cm, double t) {
  const ColormapTable& tab = colormapTable(cm);
  const int k = std::clamp(int(std::lround(std::clamp(t, 0.0, 1.0) * 255)), 0, 255);
  rgba[at * 4 + 0] = tab[std::size_t(k)].r;
  rgba[at * 4 + 1] = tab[std::size_t(k)].g;
  rgba[at * 4 + 2] = tab[std::size_t(k)].b;
  rgba[at * 4 + 3] = 255;
}

// Redraws the side texture when what it shows changes. Tokens: T x T, each cell the weight over
// the matrix's largest. Grid: L x H thumbnails of gh x gw, a pixel between them, each over its
// own largest value. Norms: the patches' norms, 4 x 4 pixels a patch, over the largest patch norm,
// a marked patch (norm > threshold x the median of all tokens' norms) with a white border.
void redrawSide(AppState& s, RgbaImage& tex) {
  ImageViewState& v = s.image;
  const ImageViewState::SideKey want{v.pass.get(), v.side,        v.layer,
                                     v.head,       v.token,       v.headAverage,
                                     v.normThreshold, s.view.weightColormap};
  if (want == v.sideDrawnFor && tex.tex.id()) return;
  const app::VisionPass& p = *v.pass;
  const VisionConfig& c = p.model.config();
  const int T = p.result.tokens, gh = p.result.gridH, gw = p.result.gridW, P = c.prefixTokens();
  const ColormapId cm = s.view.weightColormap;
  std::vector<std::uint8_t> rgba;
  if (v.side == 0) {
    v.sideValues = layerMatrix(v);
    double top = 0;
    for (double x : v.sideValues) top = std::max(top, x);
    v.sideMax = top > 0 ? top : 1;
    rgba.assign(std::size_t(T) * T * 4, 255);
    for (std::size_t k = 0; k < std::size_t(T) * T; ++k)
      colourInto(rgba, k, cm, v.sideValues[k] / v.sideMax);
    tex.set(rgba, T, T);
  } else if (v.side == 1) {
    const int W = c.heads * (gw + 1) - 1, H = c.layers * (gh + 1) - 1;
    rgba.assign(std::size_t(W) * H * 4, 0);
    for (std::size_t k = 0; k < std::size_t(W) * H; ++k) rgba[k * 4 + 3] = 255;
    v.sideValues.assign(std::size_t(c.layers) * c.heads, 0.0);  // each thumbnail's largest
    for (int l = 0; l < c.layers; ++l)
      for (int h = 0; h < c.heads; ++h) {
        const PatchMap m = overlayPatchMap(p.result, c, l, h, gridToken(v), false);
        double top = 0;
        for (double x : m.values) top = std::max(top, x);
        v.sideValues[std::size_t(l) * c.heads + h] = top;
        for (int r = 0; r < gh; ++r)
          for (int q = 0; q < gw; ++q)
            colourInto(rgba, std::size_t(l * (gh + 1) + r) * W + std::size_t(h * (gw + 1) + q), cm,
                       top > 0 ? m.values[std::size_t(r) * gw + q] / top : 0);
      }
    tex.set(rgba, W, H);
  } else {
    v.sideValues = tokenNorms(p, v.layer);
    v.normMedian = medianOf(v.sideValues);
    v.highNorm.clear();
    for (int t = 0; t < T; ++t)
      if (v.sideValues[std::size_t(t)] > double(v.normThreshold) * v.normMedian)
        v.highNorm.push_back(t);
    double top = 0, low = std::numeric_limits<double>::infinity();
    for (int t = P; t < T; ++t) {
      top = std::max(top, v.sideValues[std::size_t(t)]);
      low = std::min(low, v.sideValues[std::size_t(t)]);
    }
    v.sideMax = top > 0 ? top : 1;
    g_normLow = top > low ? low : 0;  // the colours run from the lowest patch norm to the largest
    const int k = 4, W = gw * k, H = gh * k;
    rgba.assign(std::size_t(W) * H * 4, 255);
    for (int t = P; t < T; ++t) {
      const int r = (t - P) / gw, q = (t - P) % gw;
      const bool marked = std::binary_search(v.highNorm.begin(), v.highNorm.end(), t);
      for (int y = 0; y < k; ++y)
        for (int x = 0; x < k; ++x) {
          const std::size_t at = std::size_t(r * k + y) * W + std::size_t(q * k + x);
          if (marked && (x == 0 || y == 0 || x == k - 1 || y == k - 1)) {
            rgba[at * 4 + 0] = rgba[at * 4 + 1] = rgba[at * 4 + 2] = 255;
          } else {
            colourInto(rgba, at, cm,
                       (v.sideValues[std::size_t(t)] - g_normLow) / (v.sideMax - g_normLow));
          }
        }
    }
    tex.set(rgba, W, H);
  }
  v.sideDrawnFor = want;
}

// The registers' own rows (the layer's head, or the heads' mean) over the patches, one
// thumbnail each in one texture: where each register reads from.
void drawRegisterRows(AppState& s, float width) {
  ImageViewState& v = s.image;
  const app::VisionPass& p = *v.pass;
  const VisionConfig& c = p.model.config();
  if (c.registers == 0) return;
  const int gh = p.result.gridH, gw = p.result.gridW;
  const int first = (c.hasCls ? 1 : 0) + c.distTokens;
  RgbaImage& tex = s.renderer->image("image-registers");
  const int W = c.registers * (gw + 1) - 1, H = gh;
  std::vector<std::uint8_t> rgba(std::size_t(W) * H * 4, 0);
  for (std::size_t k = 0; k < std::size_t(W) * H; ++k) rgba[k * 4 + 3] = 255;
  std::vector<double> tops;
  for (int g = 0; g < c.registers; ++g) {
    app::OverlayChoice oc;
    oc.layer = v.layer, oc.head = v.head, oc.headAverage = v.headAverage, oc.token = first + g;
    const PatchMap m = app::overlayChoiceMap(p, oc);
    double top = 0;
    for (double x : m.values) top = std::max(top, x);
    tops.push_back(top);
    for (int r = 0; r < gh; ++r)
      for (int q = 0; q < gw; ++q)
        colourInto(rgba, std::size_t(r) * W + std::size_t(g * (gw + 1) + q), s.view.weightColormap,
                   top > 0 ? m.values[std::size_t(r) * gw + q] / top : 0);
  }
  tex.set(rgba, W, H);
  ImGui::TextDisabled("the registers' rows (layer %d, %s), each over its largest:", v.layer,
                      v.headAverage ? "heads averaged" : ("head " + std::to_string(v.head)).c_str());
  const float scale = std::min(width / float(W), 96.0f * s.ui.uiScale / float(H));
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##registers", ImVec2(W * scale, H * scale));
  ImGui::GetWindowDrawList()->AddImage(tex.imguiId(), o, ImVec2(o.x + W * scale, o.y + H * scale));
  if (ImGui::IsItemHovered()) {
    const int g = std::clamp(int((ImGui::GetIO().MousePos.x - o.x) / scale) / (gw + 1), 0,
                             c.registers - 1);
    ImGui::SetTooltip("%s: largest weight %.4g  (click: its row over the image)",
                      p.result.labels[std::size_t(first + g)].c_str(), tops[std::size_t(g)]);
    if (ImGui::IsItemClicked(ImGuiMouseButton_Left)) v.token = first + g;
  }
}

void drawSide(AppState& s) {
  ImageViewState& v = s.image;
  const app::VisionPass& p = *v.pass;
  const VisionConfig& c = p.model.config();
  const float sc = s.ui.uiScale;
  const int T = p.result.tokens, gh = p.result.gridH, gw = p.result.gridW, P = c.prefixTokens();
  RgbaImage& tex = s.renderer->image("image-side");
  redrawSide(s, tex);
  v.sideGeometry.valid = false;
  v.sideHoverRow = v.sideHoverCol = -1;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const std::string heads =
      v.headAverage ? std::string("heads averaged") : "head " + std::to_string(v.head);
  const int selected = v.token == kDefaultOverlayToken || v.token == app::kProbeOverlayToken
                           ? (c.hasCls ? 0 : -1)
                           : v.token;
  if (v.side == 0) {
    ImGui::Text("tokens \xc3\x97 tokens \xc2\xb7 layer %d \xc2\xb7 %s", v.layer, heads.c_str());
    ImGui::TextDisabled("rows: queries, columns: keys; colour: weight / %.4g", v.sideMax);
    const ImVec2 room = ImGui::GetContentRegionAvail();
    const float labelW = ImGui::CalcTextSize("REG00").x + 6 * sc;
    const float side = std::max(16.0f, std::min(room.x - labelW, room.y - 4 * sc));
    const float cell = side / float(T);
    const ImVec2 o(ImGui::GetCursorScreenPos().x + labelW, ImGui::GetCursorScreenPos().y);
    ImGui::SetCursorScreenPos(o);
    ImGui::InvisibleButton("##tokens", ImVec2(side, side));
    const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
    dl->AddImage(tex.imguiId(), o, ImVec2(o.x + side, o.y + side));
    v.sideGeometry = {true, o.x, o.y, cell, cell};
    // The prefix tokens' labels on the rows, where a row is tall enough to read.
    if (cell >= ImGui::GetTextLineHeight() * 0.6f)
      for (int t = 0; t < P; ++t)
        dl->AddText(ImVec2(o.x - labelW, o.y + (t + 0.5f) * cell - ImGui::GetTextLineHeight() * 0.5f),
                    text, p.result.labels[std::size_t(t)].c_str());
    else if (P > 0)
      dl->AddText(ImVec2(o.x - labelW, o.y), text, c.hasCls ? "CLS" : p.result.labels[0].c_str());
    if (selected >= 0)
      dl->AddRect(ImVec2(o.x, o.y + selected * cell), ImVec2(o.x + side, o.y + (selected + 1) * cell),
                  IM_COL32(255, 60, 60, 255), 0, 0, std::max(1.0f, 1.5f * sc));
    if (hovered) {
      const ImVec2 m = ImGui::GetIO().MousePos;
      const int q = std::clamp(int((m.y - o.y) / cell), 0, T - 1);
      const int k = std::clamp(int((m.x - o.x) / cell), 0, T - 1);
      v.sideHoverRow = q, v.sideHoverCol = k;
      v.sideHoverValue = v.sideValues[std::size_t(q) * T + k];
      ImGui::BeginTooltip();
      ImGui::Text("query %s (%d) \xe2\x86\x92 key %s (%d)", p.result.labels[std::size_t(q)].c_str(),
                  q, p.result.labels[std::size_t(k)].c_str(), k);
      ImGui::Text("weight %.6g", v.sideHoverValue);
      ImGui::TextDisabled("click: this query's row over the image");
      ImGui::EndTooltip();
      if (clicked) v.token = (q == 0 && c.hasCls) ? kDefaultOverlayToken : q;
    }
  } else if (v.side == 1) {
    const std::string who = v.token == app::kProbeOverlayToken || v.token == kDefaultOverlayToken
                                ? (c.hasCls ? "CLS" : "the patch queries' mean")
                                : p.result.labels[std::size_t(v.token)];
    ImGui::Text("layers \xc3\x97 heads \xc2\xb7 the row of %s", who.c_str());
    ImGui::TextDisabled("each thumbnail over its own largest weight; click: that layer and head");
    const int W = c.heads * (gw + 1) - 1, H = c.layers * (gh + 1) - 1;
    const ImVec2 room = ImGui::GetContentRegionAvail();
    const float labelW = ImGui::CalcTextSize("L00").x + 6 * sc, labelH = ImGui::GetTextLineHeight();
    const float scale =
        std::max(0.05f, std::min((room.x - labelW) / float(W), (room.y - labelH - 4 * sc) / float(H)));
    const ImVec2 o(ImGui::GetCursorScreenPos().x + labelW, ImGui::GetCursorScreenPos().y + labelH);
    ImGui::SetCursorScreenPos(o);
    ImGui::InvisibleButton("##grid", ImVec2(W * scale, H * scale));
    const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
    dl->AddImage(tex.imguiId(), o, ImVec2(o.x + W * scale, o.y + H * scale));
    const float tw = (gw + 1) * scale, th = (gh + 1) * scale;
    v.sideGeometry = {true, o.x, o.y, tw, th};
    // Labels: at most 16 a side, so the vertices do not grow with the model.
    const int stepL = std::max(1, (c.layers + 15) / 16), stepH = std::max(1, (c.heads + 15) / 16);
    char buf[16];
    for (int l = 0; l < c.layers; l += stepL) {
      std::snprintf(buf, sizeof buf, "L%d", l);
      dl->AddText(ImVec2(o.x - labelW, o.y + l * th + 0.5f * (th - labelH)), text, buf);
    }
    for (int h = 0; h < c.heads; h += stepH) {
      std::snprintf(buf, sizeof buf, "H%d", h);
      dl->AddText(ImVec2(o.x + h * tw + 2, o.y - labelH), text, buf);
    }
    if (!v.rollout && v.token != app::kProbeOverlayToken)
      for (int h = 0; h < c.heads; ++h) {
        if (!v.headAverage && h != v.head) continue;
        dl->AddRect(ImVec2(o.x + h * tw - 1, o.y + v.layer * th - 1),
                    ImVec2(o.x + h * tw + gw * scale + 1, o.y + v.layer * th + gh * scale + 1),
                    IM_COL32(255, 60, 60, 255), 0, 0, std::max(1.0f, 1.5f * sc));
        if (v.headAverage) break;  // one outline: the layer's row of thumbnails
      }
    if (hovered) {
      const ImVec2 m = ImGui::GetIO().MousePos;
      const int l = std::clamp(int((m.y - o.y) / th), 0, c.layers - 1);
      const int h = std::clamp(int((m.x - o.x) / tw), 0, c.heads - 1);
      v.sideHoverRow = l, v.sideHoverCol = h;
      v.sideHoverValue = v.sideValues[std::size_t(l) * c.heads + h];
      ImGui::SetTooltip("layer %d \xc2\xb7 head %d: the row of %s, largest weight %.6g", l, h,
                        who.c_str(), v.sideHoverValue);
      if (clicked) {
        v.layer = l, v.head = h, v.headAverage = false, v.rollout = false;
        if (v.token == app::kProbeOverlayToken) v.token = kDefaultOverlayToken;
      }
    }
  } else {
    ImGui::Text("token norms after layer %d (|x|, the residual stream)", v.layer);
    ImGui::TextDisabled("colour: %.4g to %.4g; median %.4g; marked (white): > %.1f x the median",
                        g_normLow, v.sideMax, v.normMedian, double(v.normThreshold));
    const ImVec2 room = ImGui::GetContentRegionAvail();
    const float listH = 7 * ImGui::GetTextLineHeightWithSpacing() +
                        (c.registers ? 120 * sc : 0);
    const float scale = std::max(0.05f, std::min(room.x / float(gw), (room.y - listH) / float(gh)));
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##norms", ImVec2(gw * scale, gh * scale));
    const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
    dl->AddImage(tex.imguiId(), o, ImVec2(o.x + gw * scale, o.y + gh * scale));
    v.sideGeometry = {true, o.x, o.y, scale, scale};
    if (hovered) {
      const ImVec2 m = ImGui::GetIO().MousePos;
      const int r = std::clamp(int((m.y - o.y) / scale), 0, gh - 1);
      const int q = std::clamp(int((m.x - o.x) / scale), 0, gw - 1);
      v.sideHoverRow = r, v.sideHoverCol = q;
      v.sideHoverValue = v.sideValues[std::size_t(P + r * gw + q)];
      ImGui::SetTooltip("patch (%d, %d) \xc2\xb7 token %d: norm %.6g (%.2f x the median)", r, q,
                        P + r * gw + q, v.sideHoverValue,
                        v.normMedian > 0 ? v.sideHoverValue / v.normMedian : 0.0);
      if (clicked) v.token = P + r * gw + q;
    }
    // The prefix tokens' norms, and how many tokens are marked.
    for (int t = 0; t < P; ++t) {
      const double n = v.sideValues[std::size_t(t)];
      ImGui::Text("%-5s %10.4g  (%.2f x median)%s", p.result.labels[std::size_t(t)].c_str(), n,
                  v.normMedian > 0 ? n / v.normMedian : 0.0,
                  n > double(v.normThreshold) * v.normMedian ? "  high" : "");
    }
    int patches = 0;
    for (int t : v.highNorm) patches += t >= P ? 1 : 0;
    ImGui::Text("marked: %d of %d patches, %d of %d other tokens", patches, gh * gw,
                int(v.highNorm.size()) - patches, P);
    drawRegisterRows(s, ImGui::GetContentRegionAvail().x);
  }
}

}  // namespace

bool isImageFilePath(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

void openImageModel(AppState& s, const std::string& model, const std::string& image) {
  const std::string dir = locateModelFiles(resolveModelName(model), false).dir;
  closeSources(s);
  s.image = ImageViewState{};
  s.image.active = true;
  s.image.model = model;
  s.image.modelDir = dir;
  if (!image.empty()) openImageFile(s, image);
}

void openImageFile(AppState& s, const std::string& image) {
  ImageViewState& v = s.image;
  if (v.job.valid()) throw InputError(image + ": another image is still running");
  v.imagePath = image;
  v.error.clear();
  s.session.editScene().title = fileName(v.modelDir) + " \xc2\xb7 " + fileName(image);
  auto info = std::make_shared<ImageViewState::Job>();
  info->startedAt = nowSeconds();
  info->step = "starting";
  v.jobInfo = info;
  std::snprintf(v.ablateText, sizeof v.ablateText, "%s", layerHeadListText(v.interventions.ablate).c_str());
  std::snprintf(v.maskText, sizeof v.maskText, "%s",
                app::maskPatchText(v.interventions.maskPatches).c_str());
  v.job = std::async(std::launch::async, [dir = v.modelDir, image, info, iv = v.interventions] {
    try {
      auto p = std::make_shared<const app::VisionPass>(app::runVisionPass(
          dir, image,
          [&](const char* what) {
            std::lock_guard<std::mutex> lock(info->m);
            info->step = what;
            wakeFrameLoop();
          },
          nullptr, iv));
      wakeFrameLoop();
      return std::shared_ptr<const app::VisionPass>(p);
    } catch (...) {
      wakeFrameLoop();
      throw;
    }
  });
}

void syncImageView(AppState& s) {
  ImageViewState& v = s.image;
  if (v.job.valid() && v.job.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    adopt(s, false);
}

void waitImageView(AppState& s) {
  ImageViewState& v = s.image;
  if (!v.job.valid()) return;
  v.job.wait();
  adopt(s, true);
}

bool drawImageViewPanel(AppState& s) {
  syncImageView(s);
  ImageViewState& v = s.image;
  const float sc = s.ui.uiScale;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float leftW = std::round(std::clamp(avail.x * 0.22f, 240 * sc, 340 * sc));
  ImGui::BeginChild("image-controls", ImVec2(leftW, avail.y), true);
  drawControls(s);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("image-view", ImVec2(0, avail.y), true,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  v.geometry.valid = false;
  v.hoverRow = v.hoverCol = -1;
  if (v.job.valid()) {
    std::string step;
    {
      std::lock_guard<std::mutex> lock(v.jobInfo->m);
      step = v.jobInfo->step;
    }
    ImGui::Text("Running %s on %s: %s\xe2\x80\xa6 %.1f s", fileName(v.modelDir).c_str(),
                fileName(v.imagePath).c_str(), step.c_str(), nowSeconds() - v.jobInfo->startedAt);
    ImGui::EndChild();
    return false;
  }
  if (!v.pass) {
    if (!v.error.empty())
      ImGui::TextWrapped("%s", v.error.c_str());
    ImGui::TextWrapped(
        "%s is an image model: it needs an image. Drop a PNG, JPEG or BMP file on the window, "
        "or open one with File > Open (Ctrl+O).",
        fileName(v.modelDir).c_str());
    ImGui::EndChild();
    return false;
  }
  const app::VisionPass& p = *v.pass;
  const VisionConfig& c = p.model.config();
  RgbaImage& tex = s.renderer->image("image-view");
  try {
    redraw(s, tex);
  } catch (const std::exception& e) {
    ImGui::TextWrapped("%s", e.what());
    ImGui::EndChild();
    return false;
  }
  const std::string dot = " \xc2\xb7 ";
  const std::string heads =
      v.headAverage ? std::string("heads averaged") : "head " + std::to_string(v.head);
  const std::string title =
      v.token == app::kProbeOverlayToken
          ? "pooling probe" + dot + heads
      : v.rollout ? "rollout to layer " + std::to_string(v.layer) + " (" +
                        app::rolloutWords(v.rolloutOptions) + ")"
                  : "layer " + std::to_string(v.layer) + dot + heads;
  ImGui::Text("%s%stoken %s", title.c_str(), dot.c_str(), v.mapToken.c_str());
  // The image on the left, the side panel (tokens x tokens, layers x heads, norms) beside it.
  const ImVec2 whole = ImGui::GetContentRegionAvail();
  const float sideW = std::round(whole.x * 0.42f);
  ImGui::BeginChild("image-main", ImVec2(whole.x - sideW - 8 * sc, whole.y), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  // The image at the largest scale that fits beside the colour bar.
  const ImVec2 room = ImGui::GetContentRegionAvail();
  const float barW = 14 * sc, barGap = 12 * sc, tickW = ImGui::CalcTextSize("0.00000").x + 8 * sc;
  const float w = float(p.pre.seen.width), h = float(p.pre.seen.height);
  const float scale =
      std::max(0.1f, std::min((room.x - barW - barGap - tickW) / w, (room.y - 4 * sc) / h));
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##image", ImVec2(w * scale, h * scale));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddImage(tex.imguiId(), o, ImVec2(o.x + w * scale, o.y + h * scale));
  v.geometry = {true, o.x, o.y, scale};
  const int gh = p.result.gridH, gw = p.result.gridW, ps = c.patchSize;
  if (v.showGrid) {
    const ImU32 line = IM_COL32(255, 255, 255, 70);
    for (int k = 0; k <= gw; ++k)
      dl->AddLine(ImVec2(o.x + k * ps * scale, o.y), ImVec2(o.x + k * ps * scale, o.y + gh * ps * scale), line);
    for (int k = 0; k <= gh; ++k)
      dl->AddLine(ImVec2(o.x, o.y + k * ps * scale), ImVec2(o.x + gw * ps * scale, o.y + k * ps * scale), line);
  }
  // The query patch, outlined.
  const int P = c.prefixTokens();
  if (v.token >= P) {
    const int q = v.token - P, qr = q / gw, qc = q % gw;
    dl->AddRect(ImVec2(o.x + qc * ps * scale, o.y + qr * ps * scale),
                ImVec2(o.x + (qc + 1) * ps * scale, o.y + (qr + 1) * ps * scale),
                IM_COL32(255, 60, 60, 255), 0, 0, 2 * sc);
  }
  if (hovered) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int px = int((m.x - o.x) / scale), py = int((m.y - o.y) / scale);
    const int col = std::clamp(px / ps, 0, gw - 1), row = std::clamp(py / ps, 0, gh - 1);
    v.hoverRow = row, v.hoverCol = col;
    v.hoverWeight = v.map[std::size_t(row) * gw + col];
    dl->AddRect(ImVec2(o.x + col * ps * scale, o.y + row * ps * scale),
                ImVec2(o.x + (col + 1) * ps * scale, o.y + (row + 1) * ps * scale),
                IM_COL32(255, 255, 255, 220), 0, 0, 1.5f * sc);
    ImGui::BeginTooltip();
    ImGui::Text("patch (%d, %d)  \xc2\xb7  token %d", row, col, P + row * gw + col);
    ImGui::Text("%s %.6g  (from %s)", v.rollout ? "rollout" : "weight", v.hoverWeight,
                v.mapToken.c_str());
    ImGui::TextDisabled("click: this patch's own row");
    ImGui::EndTooltip();
    if (clicked) v.token = P + row * gw + col;
  }
  // The colour bar: 0 at the bottom to the map's largest value at the top, as the figure's.
  const float bx = o.x + w * scale + barGap, by = o.y, bh = h * scale;
  const int steps = 64;
  for (int k = 0; k < steps; ++k) {
    const float t0 = float(k) / steps, t1 = float(k + 1) / steps;
    const ImU32 col = colormapU32(s.view.weightColormap, (t0 + t1) * 0.5f);
    dl->AddRectFilled(ImVec2(bx, by + bh * (1 - t1)), ImVec2(bx + barW, by + bh * (1 - t0) + 1), col);
  }
  dl->AddRect(ImVec2(bx, by), ImVec2(bx + barW, by + bh), IM_COL32(160, 160, 160, 255));
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v.mapMax);
  dl->AddText(ImVec2(bx + barW + 4 * sc, by), text, buf);
  dl->AddText(ImVec2(bx + barW + 4 * sc, by + bh - ImGui::GetTextLineHeight()), text, "0");
  addVerticalText(dl, bx + barW + 4 * sc, by + bh * 0.5f + 20 * sc, text,
                  v.rollout ? "rollout" : "weight");
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("image-side", ImVec2(0, whole.y), true,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  {
    ImDrawList* sdl = ImGui::GetWindowDrawList();
    const int before = sdl->VtxBuffer.Size;
    try {
      drawSide(s);
    } catch (const std::exception& e) {
      ImGui::TextWrapped("%s", e.what());
    }
    v.sideVertices = sdl->VtxBuffer.Size - before;
  }
  ImGui::EndChild();
  ImGui::EndChild();
  return false;
}

Image imageViewFigure(const AppState& s, bool vector) {
  const ImageViewState& v = s.image;
  if (!v.pass) throw InputError("the image view has no image to export yet");
  app::OverlayChoice c = choiceOf(s);
  c.colormap = s.exporter.colormap;  // the Export dialog's (from the view's when it opens)
  c.vector = vector;
  return app::renderOverlayChoice(*v.pass, c);
}

void printImageView(const AppState& s) {
  const ImageViewState& v = s.image;
  if (!v.active) return;
  if (!v.pass) {
    std::printf("image-view: model=%s image=%s error=%s\n", v.modelDir.c_str(),
                v.imagePath.empty() ? "-" : v.imagePath.c_str(),
                v.error.empty() ? "-" : v.error.c_str());
    return;
  }
  const app::VisionInterventions& iv = v.pass->interventions;
  std::printf(
      "image-view: layer=%d head=%d average=%d token=%d label=%s rollout=%d opacity=%.3f "
      "tokens=%d grid=%dx%d max=%.9g rollout-heads=%s rollout-discard=%.4g ablate=%s mask=%s "
      "temperature=%g",
      v.layer, v.head, int(v.headAverage), v.token, v.mapToken.c_str(), int(v.rollout),
      double(v.opacity), v.pass->result.tokens, v.pass->result.gridH, v.pass->result.gridW,
      v.mapMax, v.rolloutOptions.maxHeads ? "max" : "mean", v.rolloutOptions.discard,
      iv.ablate.empty() ? "-" : layerHeadListText(iv.ablate).c_str(),
      iv.maskPatches.empty() ? "-" : app::maskPatchText(iv.maskPatches).c_str(), iv.temperature);
  if (v.hoverRow >= 0)
    std::printf(" hover=%d,%d weight=%.9g", v.hoverRow, v.hoverCol, v.hoverWeight);
  std::printf("\n");
  // The side panel: what it shows, its vertices, the hovered cell's value.
  std::printf("image-side: side=%s vertices=%d max=%.9g", sideName(v.side), v.sideVertices,
              v.side == 1 ? 0.0 : v.sideMax);
  if (v.sideHoverRow >= 0)
    std::printf(" hover=%d,%d value=%.9g", v.sideHoverRow, v.sideHoverCol, v.sideHoverValue);
  std::printf("\n");
  if (v.side == 2 && v.sideDrawnFor.side == 2) {
    const VisionConfig& c = v.pass->model.config();
    std::printf("image-norms: layer=%d median=%.9g threshold=%.3g marked=", v.layer, v.normMedian,
                double(v.normThreshold));
    for (std::size_t k = 0; k < v.highNorm.size(); ++k)
      std::printf("%s%d", k ? "," : "", v.highNorm[k]);
    if (v.highNorm.empty()) std::printf("-");
    for (int t = 0; t < c.prefixTokens(); ++t)
      std::printf(" %s=%.9g", v.pass->result.labels[std::size_t(t)].c_str(),
                  v.sideValues[std::size_t(t)]);
    std::printf("\n");
  }
  if (v.geometry.valid)
    std::printf("image-geometry: x0=%.2f y0=%.2f scale=%.5f patch=%d\n", v.geometry.x0,
                v.geometry.y0, v.geometry.scale, v.pass->model.config().patchSize);
}

bool isImageScene(const std::string& path) { return app::isImageSceneFile(path); }

void loadImageScene(AppState& s, const std::string& path) {
  const app::ImageScene sc = app::readImageScene(path);
  if (!app::isVisionModelArg(sc.model))
    throw InputError(path + ": model.path " + sc.model + " is not an image model");
  s.session.setScene(defaultScene());  // the heatmap layout's, behind the image view
  if (!sc.title.empty()) s.session.editScene().title = sc.title;
  openImageModel(s, sc.model, "");
  ImageViewState& v = s.image;
  v.interventions = sc.interventions;
  openImageFile(s, sc.image);
  v.notes = sc.notes;
  const app::OverlayChoice& c = sc.choice;
  v.layer = c.layer, v.head = c.head, v.headAverage = c.headAverage, v.token = c.token;
  v.rollout = c.rollout, v.opacity = float(c.opacity);
  v.rolloutOptions = c.rolloutOptions;
  v.side = sc.side == "grid" ? 1 : sc.side == "norms" ? 2 : 0;
  v.normThreshold = float(sc.normThreshold);
  s.view.weightColormap = c.colormap;
}

void saveImageScene(const AppState& s, const std::string& path) {
  const ImageViewState& v = s.image;
  app::ImageScene sc;
  std::error_code ec;
  sc.model = std::filesystem::absolute(v.modelDir, ec).string();
  sc.image = v.imagePath.empty() ? "" : std::filesystem::absolute(v.imagePath, ec).string();
  if (sc.image.empty()) throw InputError(path + ": the image view has no image to save");
  sc.choice = choiceOf(s);
  sc.choice.headAverage = v.headAverage;
  sc.choice.opacity = std::round(double(v.opacity) * 1e4) / 1e4;  // 0.8, not 0.800000011920929
  sc.interventions = v.pass ? v.pass->interventions : v.interventions;
  sc.side = sideName(v.side);
  sc.notes = v.notes;
  sc.normThreshold = std::round(double(v.normThreshold) * 1e4) / 1e4;
  writeFileAtomic(path, app::imageSceneJson(sc));
}

}  // namespace attnviz::gui
