// attnviz panel: the extended mask kinds under the Mask panel's classic ones.
// docs/design/conventions.md:
//   allowed = [...] AND chunk AND doc AND expr;  softcap: s -> c tanh(s / c) before bias and mask
// - documents: ids typed as text, or boundaries toggled by clicking the heatmap's key axis;
// - a mask_mod-style expression, applied live while it compiles; an error shows under the field
//   and the mask keeps the last good expression; a presets menu fills in working examples;
// - the softcap c (Gemma 2), on a log slider;
// - block sparsity: tiles of B_r x B_c classified empty / partial / full, the work of a tiled
//   kernel relative to dense, and an overlay on the heatmap.
#include "panels/panels.h"

#include "attnviz/engine/mask_expr.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace attnviz::gui {

namespace {

// The one place that knows where the state keeps the mask and its results.
MaskSpec& editedMask(AppState& s) { return s.session.editScene().params.mask; }
const AttentionParams& shownParams(const AppState& s) { return s.session.params(); }
std::uint64_t weightsVersion(const AppState& s) { return s.session.weightsVersion(); }
bool columnsAreKeys(const AppState& s) { return s.display().columnsAreKeys; }
void maskChanged(AppState& s) { s.session.touchMask(); }

const ImVec4 kErrorText(1.0f, 0.45f, 0.38f, 1.0f);

void copyText(char* dst, std::size_t size, const std::string& src) {
  std::snprintf(dst, size, "%s", src.c_str());
}

// The field follows the mask when something else changed it (a scene was loaded, a preset).
void syncFields(AppState& s) {
  MaskEditorState& e = s.maskEditor;
  const MaskSpec& m = editedMask(s);
  if (m.expr != e.exprApplied) {
    e.exprApplied = m.expr;
    copyText(e.expr, sizeof e.expr, m.expr);
    e.exprError.clear();
  }
  const std::string docs = formatDocIds(m.docs);
  if (docs != e.docsApplied) {
    e.docsApplied = docs;
    copyText(e.docs, sizeof e.docs, docs);
    e.docsError.clear();
  }
}

// Applies the typed expression when it compiles; returns whether the mask changed.
bool applyExpression(AppState& s) {
  MaskEditorState& e = s.maskEditor;
  const std::string text = e.expr;
  const bool blank = text.find_first_not_of(" \t") == std::string::npos;
  try {
    if (!blank) MaskExpr check(text);
  } catch (const UsageError& err) {
    e.exprError = err.what();
    return false;
  }
  e.exprError.clear();
  const std::string next = blank ? "" : text;
  if (next == editedMask(s).expr) return false;
  editedMask(s).expr = next;
  e.exprApplied = next;
  return true;
}

bool documentControls(AppState& s) {
  MaskEditorState& e = s.maskEditor;
  MaskSpec& m = editedMask(s);
  const int Tk = std::max(1, s.tk());
  bool changed = false;
  bool on = !m.docs.empty();
  if (ImGui::Checkbox("documents", &on)) {
    m.docs = on ? toggleDocBoundary({}, Tk, Tk / 2) : std::vector<int>{};
    changed = true;
  }
  helpMarker(
      "Packed sequences: one document id per key position; query i may attend key j only when "
      "doc(p\xe1\xb5\xa2) = doc(j). Type the ids, or tick 'click key axis' and click between "
      "two key labels on the heatmap to add or remove a boundary there.");
  if (!on) return changed;
  if (int(m.docs.size()) != Tk) {  // the text changed length: keep the runs, fit the ids
    m.docs = resizeDocIds(m.docs, Tk);
    changed = true;
  }
  ImGui::SameLine();
  ImGui::Checkbox("click key axis", &e.editDocBoundaries);
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputText("##docs", e.docs, sizeof e.docs)) {
    try {
      std::vector<int> ids = parseDocIds(e.docs);
      if (int(ids.size()) != Tk) {
        e.docsError = std::to_string(ids.size()) + " ids for " + std::to_string(Tk) + " keys";
      } else {
        e.docsError.clear();
        if (ids != m.docs) {
          m.docs = std::move(ids);
          e.docsApplied = formatDocIds(m.docs);
          changed = true;
        }
      }
    } catch (const UsageError& err) {
      e.docsError = err.what();
    }
  }
  if (!e.docsError.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, kErrorText);
    ImGui::TextWrapped("%s (keeping the last good ids)", e.docsError.c_str());
    ImGui::PopStyleColor();
  }
  return changed;
}

bool expressionControls(AppState& s) {
  MaskEditorState& e = s.maskEditor;
  bool changed = false;
  ImGui::TextUnformatted("expression (mask_mod)");
  helpMarker(
      "Nonzero means may attend; an and-term with the others. Variables: q (= p\xe1\xb5\xa2), "
      "k (= j), i, h, Tq, Tk, doc_q, doc_k. Operators: + - * / ^ % // == != < <= > >= && || ! "
      "and c ? a : b; functions abs, min, max, floor, ceil. It applies as you type.");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::BeginCombo("##exprPresets", "presets", ImGuiComboFlags_NoPreview)) {
    for (const MaskExprPreset& p : maskExprPresets()) {
      if (ImGui::Selectable(p.label)) {
        copyText(e.expr, sizeof e.expr, p.text);
        changed |= applyExpression(s);
      }
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", p.text);
    }
    ImGui::EndCombo();
  }
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputTextWithHint("##expr", "e.g. k <= q && q - k < 8", e.expr, sizeof e.expr))
    changed |= applyExpression(s);
  if (!e.exprError.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, kErrorText);
    ImGui::TextWrapped("%s", e.exprError.c_str());
    ImGui::PopStyleColor();
    ImGui::TextDisabled("keeping: %s",
                        e.exprApplied.empty() ? "(no expression)" : e.exprApplied.c_str());
  }
  return changed;
}

bool softcapControls(AppState& s) {
  MaskSpec& m = editedMask(s);
  bool changed = false;
  bool on = m.softcap > 0.0f;
  if (ImGui::Checkbox("softcap c", &on)) {
    m.softcap = on ? 20.0f : 0.0f;
    changed = true;
  }
  helpMarker(
      "Gemma 2: each scaled score s becomes c\xc2\xb7tanh(s / c) before the bias, the mask and "
      "\xcf\x84. Small scores pass; large ones saturate at \xc2\xb1"
      "c. Watch it on the "
      "'cap' stage.");
  if (on) {
    ImGui::SameLine(ImGui::GetFontSize() * 8.5f);
    ImGui::SetNextItemWidth(-1);
    if (ImGui::SliderFloat("##softcap", &m.softcap, 0.1f, 100.0f, "%.2f",
                           ImGuiSliderFlags_Logarithmic)) {
      m.softcap = std::clamp(m.softcap, 0.01f, 1e6f);
      changed = true;
    }
  }
  return changed;
}

void blockControls(AppState& s) {
  MaskEditorState& e = s.maskEditor;
  ImGui::Checkbox("blocks", &e.blocksOn);
  helpMarker(
      "How a FlashAttention-style kernel sees this mask: tiles of B_r query rows by B_c keys. "
      "Empty tiles (pale) are skipped, full ones (green) need no mask, partial ones (orange) are "
      "masked per cell. The work is (full + partial) / all tiles, relative to dense.");
  if (!e.blocksOn) return;
  ImGui::SameLine(ImGui::GetFontSize() * 8.5f);
  ImGui::SetNextItemWidth(-1);
  int size[2] = {e.blockRows, e.blockCols};
  if (ImGui::InputInt2("##blocksize", size)) {
    e.blockRows = std::clamp(size[0], 1, 1 << 16);
    e.blockCols = std::clamp(size[1], 1, 1 << 16);
  }
  for (int b : {16, 32, 64, 128}) {
    char label[16];
    std::snprintf(label, sizeof label, "%d", b);
    if (ImGui::SmallButton(label)) e.blockRows = e.blockCols = b;
    ImGui::SameLine();
  }
  ImGui::NewLine();
  const BlockSparsity* b = currentBlocks(s);
  if (!b) {
    if (!e.blocksError.empty()) ImGui::TextColored(kErrorText, "%s", e.blocksError.c_str());
    return;
  }
  ImGui::Text("%lld tiles: %lld empty, %lld partial, %lld full", b->total(), b->empty, b->partial,
              b->full);
  ImGui::Text("a tiled kernel does %.1f%% of the dense work", 100.0 * b->workFraction());
  ImGui::ProgressBar(float(b->workFraction()), ImVec2(-1, 0), "");
}

}  // namespace

const BlockSparsity* currentBlocks(AppState& s) {
  MaskEditorState& e = s.maskEditor;
  const int Tq = s.tq(), Tk = s.tk(), H = std::max(1, s.heads());
  if (!e.blocksOn || Tq <= 0 || Tk <= 0) return nullptr;
  const AttentionParams& p = shownParams(s);
  const int h = std::clamp(s.view.head, 0, H - 1);
  // Recomputed when the mask, the shape, the head or the tile size change; a custom matrix is
  // followed through the weights version (it can be painted without changing its description).
  char key[160];
  std::snprintf(
      key, sizeof key, "%d %d %d %d %d %d %llu|", Tq, Tk, H, h, e.blockRows, e.blockCols,
      p.mask.customKind != MaskSpec::Custom::None ? (unsigned long long)weightsVersion(s) : 0ull);
  const std::string k = key + describeMask(p.mask) + "|" + formatDocIds(p.mask.docs);
  if (k != e.blocksKey) {
    e.blocksKey = k;
    try {
      e.blocks = classifyBlocks(p.mask, H, h, Tq, Tk, BlockSize{e.blockRows, e.blockCols});
      e.blocksError.clear();
    } catch (const std::exception& err) {
      e.blocks = BlockSparsity{};
      e.blocksError = err.what();
    }
  }
  return e.blocks.total() > 0 ? &e.blocks : nullptr;
}

bool typeMaskExpression(AppState& s, const std::string& text) {
  syncFields(s);
  copyText(s.maskEditor.expr, sizeof s.maskEditor.expr, text);
  return applyExpression(s);
}

bool drawMaskKindsPanel(AppState& s) {
  syncFields(s);
  bool changed = documentControls(s);
  ImGui::Spacing();
  changed |= expressionControls(s);
  ImGui::Spacing();
  changed |= softcapControls(s);
  ImGui::Separator();
  blockControls(s);
  return changed;
}

void drawMaskOverlays(AppState& s, ImDrawList* dl) {
  const ViewState& v = s.view;
  if (!v.geometry.valid || !columnsAreKeys(s)) return;
  const float cellPx = v.geometry.cellPx;
  const ImVec2 p0(v.geometry.x0, v.geometry.y0);
  const ImVec2 p1(p0.x + v.geometry.w, p0.y + v.geometry.h);
  auto colX = [&](float c) { return p0.x + (c - v.panX) * cellPx; };
  auto rowY = [&](float r) { return p0.y + (r - v.panY) * cellPx; };
  dl->PushClipRect(p0, p1, true);
  if (const BlockSparsity* b = currentBlocks(s)) {
    // Each tile outlined inside its own cells by 2-pixel strips on whole pixels, so that
    // neighbouring tiles' outlines sit side by side and never blend.
    const int Tq = s.tq(), Tk = s.tk();
    const float w = 2.0f;
    for (int r = 0; r < b->tileRows; ++r) {
      const float y0 = std::floor(rowY(float(r * b->size.rows)));
      const float y1 = std::floor(rowY(float(std::min(Tq, (r + 1) * b->size.rows))));
      if (y1 < p0.y || y0 > p1.y) continue;
      for (int c = 0; c < b->tileCols; ++c) {
        const float x0 = std::floor(colX(float(c * b->size.cols)));
        const float x1 = std::floor(colX(float(std::min(Tk, (c + 1) * b->size.cols))));
        if (x1 < p0.x || x0 > p1.x) continue;
        const ImU32 col = rgbaU32(blockColor(b->at(r, c)));
        dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y0 + w), col);
        dl->AddRectFilled(ImVec2(x0, y1 - w), ImVec2(x1, y1), col);
        dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + w, y1), col);
        dl->AddRectFilled(ImVec2(x1 - w, y0), ImVec2(x1, y1), col);
      }
    }
  }
  // Document boundaries while they are being edited: a line before each document's first key
  // and above each query whose position starts one.
  const MaskSpec& m = editedMask(s);
  if (s.maskEditor.editDocBoundaries && int(m.docs.size()) == s.tk()) {
    const ImU32 col = IM_COL32(80, 220, 255, 230);
    const int shift = s.tk() - s.tq();
    for (int j = 1; j < s.tk(); ++j) {
      if (m.docs[j] == m.docs[j - 1]) continue;
      dl->AddLine(ImVec2(colX(float(j)), p0.y), ImVec2(colX(float(j)), p1.y), col, 2.0f);
      const int i = j - shift;
      if (i > 0 && i < s.tq())
        dl->AddLine(ImVec2(p0.x, rowY(float(i))), ImVec2(p1.x, rowY(float(i))), col, 1.0f);
    }
  }
  dl->PopClipRect();
}

bool handleKeyAxisClick(AppState& s) {
  MaskEditorState& e = s.maskEditor;
  const ViewState& v = s.view;
  if (!e.editDocBoundaries || !v.geometry.valid || !columnsAreKeys(s)) return false;
  if (!ImGui::IsWindowHovered() || !ImGui::IsMouseClicked(ImGuiMouseButton_Left)) return false;
  const ImVec2 m = ImGui::GetIO().MousePos;
  // Above the matrix (the key labels), within its columns.
  if (m.y >= v.geometry.y0 || m.x < v.geometry.x0 || m.x > v.geometry.x0 + v.geometry.w)
    return false;
  const int edge = int(std::lround((m.x - v.geometry.x0) / v.geometry.cellPx + v.panX));
  const int Tk = s.tk();
  if (edge < 1 || edge >= Tk) return false;
  MaskSpec& mask = editedMask(s);
  mask.docs = toggleDocBoundary(mask.docs, Tk, edge);
  maskChanged(s);
  return true;
}

}  // namespace attnviz::gui
