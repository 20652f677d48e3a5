// attnviz panel: PNG, SVG or PDF export (Ctrl+S) through the session's export path, the one
// `attnviz export` takes, with a confirmation that names the file written.
#include "panels/panels.h"

#include "attnviz/render/raster.h"
#include "attnviz/session/model_grid.h"
#include "attnviz/render/vector_figure.h"

#include <imgui.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace attnviz::gui {

namespace {

const char* const kFormatExt[] = {".png", ".svg", ".pdf"};
const char* const kStageSuffix[] = {"_weights", "_logits", "_value-weighted", "_rollout"};

// The layers x heads figure is offered while a model's pass is shown (not its FlashAttention
// walkthrough).
bool gridAvailable(const AppState& s) {
  return s.model.open() && s.model.source->ready() && !s.flash.active;
}

// The format a path asks for by its extension (any case): 1 SVG, 2 PDF, else 0 PNG.
int formatOfPath(const std::string& path) { return int(figureFormatOfPath(path)); }

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += char(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
    if (out.size() >= 40) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "attnviz" : out;
}

std::string defaultExportName(const AppState& s) {
  const ExportState& e = s.exporter;
  std::string name = slug(s.sceneData().title);
  char tau[32];
  std::snprintf(tau, sizeof tau, "_tau%g", s.session.params().temperature);
  if (s.image.active) {  // the image view: image, layer, head or rollout
    const ImageViewState& v = s.image;
    return slug(std::filesystem::path(v.imagePath).stem().string()) + "_layer" +
           std::to_string(v.layer) +
           (v.rollout       ? std::string("_rollout")
            : v.headAverage ? std::string("_heads-averaged")
                            : "_head" + std::to_string(v.head)) +
           kFormatExt[std::clamp(e.format, 0, 2)];
  }
  if (e.grid && gridAvailable(s))
    return name + "_layers-x-heads" + tau + kFormatExt[std::clamp(e.format, 0, 2)];
  name += e.allHeads && !s.flash.active ? "_all-heads" : "_head" + std::to_string(s.view.head);
  if (s.flash.active)
    name += "_flash" + std::to_string(s.flash.blockRows) + "x" + std::to_string(s.flash.blockKeys) +
            "_step" + std::to_string(s.flash.step);
  else
    name += kStageSuffix[std::clamp(e.stage, 0, 3)];
  return name + tau + kFormatExt[std::clamp(e.format, 0, 2)];
}

}  // namespace

ExportRequest exportRequest(const AppState& s) {
  const ExportState& e = s.exporter;
  ExportRequest r;
  r.stage = e.stage == 1   ? ExportStage::Scores
            : e.stage == 2 ? ExportStage::ValueWeighted
            : e.stage == 3 ? ExportStage::Rollout
                           : ExportStage::Weights;
  r.head = e.allHeads ? -1 : s.view.head;
  r.cell = e.cell;
  // The FlashAttention stage draws weights whatever the stage its session shows.
  r.colormap = e.stage != 1 || s.flash.active ? e.colormap : ColormapId::Diverging;
  r.labels = e.labels;
  return r;
}

std::string exportPng(AppState& s, const std::string& path) {
  // The session's one export path, the same as `attnviz export --scene` of the saved scene; the
  // FlashAttention stage exports its step as drawn (the same call as the CLI's --flash-step).
  // The extension picks the format, written by the same writers as --png, --svg and --pdf.
  const int format = formatOfPath(path);
  ExportRequest r = exportRequest(s);
  r.vector = format != 0;
  Image img;
  if (s.image.active) {
    // The image view's overlay figure, as `attnviz export --overlay` draws it (the same call).
    img = imageViewFigure(s, r.vector);
  } else if (s.exporter.grid && gridAvailable(s)) {
    // The model's pass as `export --grid` draws it: the same thumbnails, the same call.
    const ModelSource& src = *s.model.source;
    ModelGridOptions go;
    go.colormap = s.exporter.colormap;
    go.vector = r.vector;
    img = renderModelGrid(src.model(), src.pass(), src.interventions(), src.name(), go);
  } else {
    img = s.flash.active ? flashImage(s, r) : s.session.exportImage(r);
  }
  writeFigure(path, img, FigureFormat(format));
  s.exporter.lastHeatX = img.heatX, s.exporter.lastHeatY = img.heatY;
  s.exporter.lastCellPx = img.cellPx;
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).string();
  notify(s,
         "Exported " + std::to_string(img.width) + "\xc3\x97" + std::to_string(img.height) +
             (format == 0 ? " PNG" : format == 1 ? " SVG" : " PDF") + " to " + abs,
         10);
  return abs;
}

void exportOptionsFromView(AppState& s) {
  s.exporter.colormap = s.view.weightColormap;
  // A model's own stages (value-weighted, rollout) export as themselves, as `export --scene`
  // does; the other stages of the pipeline before the softmax export the logits.
  const ViewStage v = s.view.stage;
  s.exporter.stage = v == ViewStage::Weights          ? 0
                     : v == ViewStage::ValueWeighted ? (s.session.stageAvailable(v) ? 2 : 0)
                     : v == ViewStage::Rollout       ? (s.session.stageAvailable(v) ? 3 : 0)
                                                     : 1;
  s.exporter.grid = false;
}

bool drawExportPopup(AppState& s) {
  ExportState& e = s.exporter;
  if (e.requestOpen) {
    e.requestOpen = false;
    exportOptionsFromView(s);
    e.pathEdited = false;
    ImGui::OpenPopup("Export figure");
  }
  bool exported = false;
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing,
                          ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal("Export figure", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    const bool gridOk = gridAvailable(s);
    if (gridOk) ImGui::Checkbox("layers \xc3\x97 heads grid (every layer's weights)", &e.grid);
    if (s.image.active) {
      ImGui::Text("The image view's overlay figure, as shown (attnviz export --overlay)");
    } else if (s.flash.active) {
      ImGui::Text("FlashAttention step %d, as shown (head %d, %d x %d tiles)", s.flash.step,
                  s.view.head, s.flash.blockRows, s.flash.blockKeys);
    } else if (!(gridOk && e.grid)) {
      int heads = e.allHeads ? 1 : 0;
      ImGui::RadioButton("current head", &heads, 0);
      ImGui::SameLine();
      ImGui::RadioButton("all heads", &heads, 1);
      e.allHeads = heads == 1;
      ImGui::RadioButton("weights", &e.stage, 0);
      ImGui::SameLine();
      ImGui::RadioButton("scores (logits)", &e.stage, 1);
      // A model's own stages, while the view shows them (their data is computed when shown).
      if (s.session.stageAvailable(ViewStage::ValueWeighted)) {
        ImGui::SameLine();
        ImGui::RadioButton("value-weighted", &e.stage, 2);
      }
      if (s.session.stageAvailable(ViewStage::Rollout)) {
        ImGui::SameLine();
        ImGui::RadioButton("rollout", &e.stage, 3);
      }
      if ((e.stage == 2 && !s.session.stageAvailable(ViewStage::ValueWeighted)) ||
          (e.stage == 3 && !s.session.stageAvailable(ViewStage::Rollout)))
        e.stage = 0;
    }
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
    ImGui::SliderInt("cell px (0 = auto)", &e.cell, 0, 64);
    int cm = int(e.colormap);
    const char* names[] = {"viridis", "magma", "gray", "diverging"};
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
    if (ImGui::Combo("colormap", &cm, names, 4)) e.colormap = ColormapId(cm);
    ImGui::Checkbox("token labels and titles", &e.labels);
    // The format: a choice here renames the file; a typed extension chooses it.
    int format = e.pathEdited ? formatOfPath(e.path) : e.format;
    bool formatChanged = false;
    for (int f = 0; f < 3; ++f) {
      if (f > 0) ImGui::SameLine();
      formatChanged |= ImGui::RadioButton(f == 0 ? "PNG" : f == 1 ? "SVG" : "PDF", &format, f);
    }
    if (formatChanged && e.pathEdited) {
      const std::string renamed =
          std::filesystem::path(e.path).replace_extension(kFormatExt[format]).string();
      std::snprintf(e.path, sizeof e.path, "%s", renamed.c_str());
    }
    e.format = format;
    if (!e.pathEdited) std::snprintf(e.path, sizeof e.path, "%s", defaultExportName(s).c_str());
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 26);
    if (ImGui::InputText("file", e.path, sizeof e.path)) e.pathEdited = true;
    {
      std::error_code ec;
      ImGui::TextDisabled("writes %s", std::filesystem::absolute(e.path, ec).string().c_str());
    }
    if (ImGui::Button("Export", ImVec2(120 * s.ui.uiScale, 0)) ||
        ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter))) {
      try {
        exportPng(s, e.path);
        exported = true;
        ImGui::CloseCurrentPopup();
      } catch (const std::exception& ex) {
        reportError(s, std::string("Export failed: ") + ex.what());
        ImGui::CloseCurrentPopup();
      }
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(120 * s.ui.uiScale, 0)) ||
        ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))
      ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  return exported;
}

}  // namespace attnviz::gui
