// attnviz panel: the residual stream of the model view's pass (massive activations, Sun et al.
// 2024). For one token (the selected row, else the last): |x| of every dimension after the
// embeddings and after each layer, one row a layer, dimensions more than 100x the row's median
// marked; for the token's largest dimension, its |x| at every token and layer. Buttons set that
// dimension, inside the pass, to zero at the token or to its mean over the tokens, in the stream a
// chosen layer writes (ResidualEdit): the later layers and the next-token panel follow live.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace attnviz::gui {

namespace {

// log-scaled |x| in [0, 1] for a colour: log(1 + |x|) / log(1 + top).
ImU32 heat(float a, float top) {
  const float t = std::clamp(std::log1p(a) / std::log1p(std::max(top, 1e-6f)), 0.0f, 1.0f);
  const RGBA8 c = colormapLookup(ColormapId::Magma, t);
  return IM_COL32(c.r, c.g, c.b, 255);
}

float median(std::vector<float> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

// The last drawn token's figures, for scripted runs (printed by script.cpp).
ResidualShown g_residualShown;

bool drawResidualPanel(AppState& s) {
  g_residualShown = ResidualShown{};
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  const ForwardResult& r = m.source->pass();
  const ModelConfig& c = m.source->model().config();
  const int L = int(r.layers.size()), d = c.nEmbd;
  if (L == 0 || r.residualOut.rows() == 0) return false;
  const int T = int(r.residualOut.rows());
  const int t = s.view.selectedRow >= 0 && s.view.selectedRow < T ? s.view.selectedRow : T - 1;
  // Stream k (0: after the embeddings, k: after layer k - 1), token t's row.
  auto stream = [&](int k) -> const MatrixRM& {
    return k < L ? r.layers[k].residualIn : r.residualOut;
  };
  float top = 0;
  int D = 0, Dk = 0;
  std::vector<std::vector<char>> massive(L + 1, std::vector<char>(d, 0));
  std::vector<float> rowMedian(L + 1);
  for (int k = 0; k <= L; ++k) {
    std::vector<float> a(d);
    for (int j = 0; j < d; ++j) a[j] = std::fabs(stream(k)(t, j));
    rowMedian[k] = median(a);
    for (int j = 0; j < d; ++j) {
      if (a[j] > top) top = a[j], D = j, Dk = k;
      massive[k][j] = rowMedian[k] > 0 && a[j] > 100.0f * rowMedian[k];
    }
  }
  const auto& toks = m.source->tokens();
  ImGui::TextWrapped("Token %d '%s': |x| by dimension (across, %d) after the embeddings and "
                     "after each layer (down); red: over 100\xc3\x97 the row's median",
                     t, t < int(toks.size()) ? toks[t].c_str() : "", d);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float W = std::max(60.0f, ImGui::GetContentRegionAvail().x);
  // At most a rectangle a pixel across: a column stands for a block of dimensions (its largest
  // |x|, red when any of them is massive), so a 2048-wide model draws W columns, not 2048.
  const int nCol = std::max(1, std::min(d, int(W)));
  const float cellH = 9 * s.ui.uiScale, colW = W / float(nCol);
  ImVec2 p = ImGui::GetCursorScreenPos();
  int marked = 0;
  for (int k = 0; k <= L; ++k) {
    for (int j = 0; j < d; ++j) marked += massive[k][j];
    for (int c = 0; c < nCol; ++c) {
      const int j0 = int(long(c) * d / nCol), j1 = std::max(j0 + 1, int(long(c + 1) * d / nCol));
      float v = 0;
      bool red = false;
      for (int j = j0; j < j1; ++j) v = std::max(v, std::fabs(stream(k)(t, j))), red = red || massive[k][j];
      const ImVec2 a(p.x + c * colW, p.y + k * cellH), b(a.x + std::max(colW, 1.0f), a.y + cellH);
      dl->AddRectFilled(a, b, heat(v, top));
      if (red) dl->AddRect(ImVec2(a.x - 1, a.y), ImVec2(b.x + 1, b.y), IM_COL32(230, 40, 40, 255));
    }
  }
  ImGui::Dummy(ImVec2(W, (L + 1) * cellH + 2));
  const float ratio = rowMedian[Dk] > 0 ? top / rowMedian[Dk] : 0.0f;
  ImGui::TextWrapped("largest: dim %d = %.2f after %s (%.0f\xc3\x97 the median)", D,
              double(stream(Dk)(t, D)), Dk == 0 ? "the embeddings" : ("layer " + std::to_string(Dk - 1)).c_str(),
              double(ratio));
  g_residualShown = {t, D, Dk, top, ratio, marked};
  // Dimension D at every token (down) and stream (across).
  ImGui::TextDisabled("dim %d: |x| by token (down) and layer (across)", D);
  p = ImGui::GetCursorScreenPos();
  // At most 160 rows: past that, a row is a block of tokens (its largest |x|).
  const int nRow = std::min(T, 160);
  const float tokH = std::clamp(120.0f * s.ui.uiScale / float(nRow), 1.0f, 6.0f * s.ui.uiScale);
  const float layW = std::min(W / float(L + 1), 40.0f * s.ui.uiScale);
  float topD = 0;
  for (int k = 0; k <= L; ++k)
    for (int i = 0; i < T; ++i) topD = std::max(topD, std::fabs(stream(k)(i, D)));
  for (int k = 0; k <= L; ++k)
    for (int ri = 0; ri < nRow; ++ri) {
      const int i0 = int(long(ri) * T / nRow), i1 = std::max(i0 + 1, int(long(ri + 1) * T / nRow));
      float v = 0;
      for (int i = i0; i < i1; ++i) v = std::max(v, std::fabs(stream(k)(i, D)));
      const ImVec2 a(p.x + k * layW, p.y + ri * tokH);
      dl->AddRectFilled(a, ImVec2(a.x + layW - 1, a.y + tokH), heat(v, topD));
    }
  ImGui::Dummy(ImVec2((L + 1) * layW, nRow * tokH + 2));

  // Interventions on D, in the stream a layer writes.
  static int editLayer = 0;
  editLayer = std::clamp(editLayer, 0, L - 1);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  ImGui::SliderInt("##res-layer", &editLayer, 0, L - 1, "after layer %d");
  const int l = editLayer, dim = D, tok = t;
  if (ImGui::SmallButton("zero it at this token"))
    m.actions.push_back([l, dim, tok](AppState& st) {
      Interventions iv = st.model.source->interventions();
      iv.layer(l, st.model.source->layers()).residualEdits.push_back({tok, dim, false});
      st.model.source->setInterventions(iv);
    });
  ImGui::SameLine();
  if (ImGui::SmallButton("its mean, every token"))
    m.actions.push_back([l, dim](AppState& st) {
      Interventions iv = st.model.source->interventions();
      iv.layer(l, st.model.source->layers()).residualEdits.push_back({-1, dim, true});
      st.model.source->setInterventions(iv);
    });
  int edits = 0;
  for (int k = 0; k < L; ++k)
    if (const LayerIntervention* li = m.source->interventions().find(k))
      edits += int(li->residualEdits.size());
  if (edits > 0) {
    ImGui::SameLine();
    if (ImGui::SmallButton("clear edits"))
      m.actions.push_back([](AppState& st) {
        Interventions iv = st.model.source->interventions();
        for (int k = 0; k < st.model.source->layers(); ++k)
          iv.layer(k, st.model.source->layers()).residualEdits.clear();
        st.model.source->setInterventions(iv);
      });
    ImGui::TextDisabled("%d residual edit(s) in the pass; the next-token panel shows before/after",
                        edits);
  }
  return false;
}

}  // namespace attnviz::gui
