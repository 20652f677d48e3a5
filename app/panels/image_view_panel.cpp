// attnviz panel: the image view of an image model (ViT, DeiT, DINOv2, CLIP's and SigLIP's vision
// towers): the image as the model sees it with one token's attention row (or the rollout's) over
// its patches, upsampled and blended exactly as the overlay figure (attnviz export --overlay)
// blends it, a colour bar, the controls, and a tooltip per patch. The model runs on a worker.
#include "cli/cli.h"
#include "gui/heatmap_renderer.h"
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
#include <string>

namespace attnviz::gui {

namespace {

app::OverlayChoice choiceOf(const AppState& s) {
  const ImageViewState& v = s.image;
  app::OverlayChoice c;
  c.layer = v.layer, c.head = v.head, c.headAverage = v.headAverage && !v.rollout;
  c.token = v.token, c.rollout = v.rollout, c.opacity = double(v.opacity);
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
  if (v.token != kDefaultOverlayToken && (v.token < 0 || v.token >= v.pass->result.tokens))
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
      if (v.token >= v.pass->result.tokens) v.token = kDefaultOverlayToken;
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
  const ImageViewState::Key want{v.pass.get(), v.layer,   v.head,         v.token,
                                 v.headAverage, v.rollout, v.opacity,      s.view.weightColormap};
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
  ImGui::Checkbox("Rollout (heads averaged, + I)", &v.rollout);
  // The query token: CLS (or the patch queries' mean), DIST, the registers, or a clicked patch.
  const int P = c.prefixTokens();
  std::string current = v.token == kDefaultOverlayToken
                            ? (c.hasCls ? "CLS" : "mean of the patch queries")
                            : r.labels[std::size_t(v.token)];
  ImGui::SetNextItemWidth(-1);
  if (ImGui::BeginCombo("##token", ("token: " + current).c_str())) {
    if (ImGui::Selectable(c.hasCls ? "CLS" : "mean of the patch queries",
                          v.token == kDefaultOverlayToken || (c.hasCls && v.token == 0)))
      v.token = kDefaultOverlayToken;
    for (int t = c.hasCls ? 1 : 0; t < P; ++t)
      if (ImGui::Selectable(r.labels[std::size_t(t)].c_str(), v.token == t)) v.token = t;
    ImGui::TextDisabled("a patch: click it on the image");
    ImGui::EndCombo();
  }
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderFloat("##opacity", &v.opacity, 0.0f, 1.0f, "opacity %.2f");
  ImGui::Checkbox("patch grid", &v.showGrid);
  ImGui::Spacing();
  if (ImGui::Button("Export figure\xe2\x80\xa6  (Ctrl+S)", ImVec2(-1, 0)))
    s.exporter.requestOpen = true;
  ImGui::Spacing();
  ImGui::TextDisabled("took %.2f s (%s)", v.passSeconds, s.backend.backend.c_str());
  (void)sc;
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
  v.job = std::async(std::launch::async, [dir = v.modelDir, image, info] {
    try {
      auto p = std::make_shared<const app::VisionPass>(
          app::runVisionPass(dir, image, [&](const char* what) {
            std::lock_guard<std::mutex> lock(info->m);
            info->step = what;
            wakeFrameLoop();
          }));
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
  const std::string title =
      v.rollout ? "rollout to layer " + std::to_string(v.layer) + " (heads averaged, + I)"
                : "layer " + std::to_string(v.layer) + dot +
                      (v.headAverage ? std::string("heads averaged")
                                     : "head " + std::to_string(v.head));
  ImGui::Text("%s%stoken %s", title.c_str(), dot.c_str(), v.mapToken.c_str());
  // The image at the largest scale that fits beside the colour bar.
  const ImVec2 room = ImGui::GetContentRegionAvail();
  const float barW = 14 * sc, barGap = 12 * sc, tickW = ImGui::CalcTextSize("0.0000").x + 8 * sc;
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
  std::printf(
      "image-view: layer=%d head=%d average=%d token=%d label=%s rollout=%d opacity=%.3f "
      "tokens=%d grid=%dx%d max=%.9g",
      v.layer, v.head, int(v.headAverage), v.token, v.mapToken.c_str(), int(v.rollout),
      double(v.opacity), v.pass->result.tokens, v.pass->result.gridH, v.pass->result.gridW,
      v.mapMax);
  if (v.hoverRow >= 0)
    std::printf(" hover=%d,%d weight=%.9g", v.hoverRow, v.hoverCol, v.hoverWeight);
  std::printf("\n");
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
  openImageModel(s, sc.model, sc.image);
  ImageViewState& v = s.image;
  const app::OverlayChoice& c = sc.choice;
  v.layer = c.layer, v.head = c.head, v.headAverage = c.headAverage, v.token = c.token;
  v.rollout = c.rollout, v.opacity = float(c.opacity);
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
  writeFileAtomic(path, app::imageSceneJson(sc));
}

}  // namespace attnviz::gui
