// attnviz panel: T5's relative position bias as a stage of its own. A T5 adds to every
// self site's scores a learned number per head and per *bucket* of the distance j - i: exact
// buckets for near keys, logarithmic ones further out, one last bucket from the max distance on
// (the encoder's buckets bidirectional, the decoder's over earlier keys only; cross sites have
// none). The panel shows both halves of that: the bias against the distance for the shown head
// (the other heads faint, the bucket edges as ticks), and the bias matrix the shown site adds to
// the current tokens' scores, rows the queries and columns the keys, on the diverging colormap
// centred on 0. The numbers come from Model::positionBias / positionBucket / bucketBias, the
// ones the pass adds; this file only draws them.
#include "panels/panels.h"

#include "attnviz/render/colormap.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace attnviz::gui {

namespace {

// The stack whose bias the panel shows: the shown site's (a cross site has none: the encoder's
// then, said in the panel).
int biasStack(const AppState& s, bool* fromCross = nullptr) {
  const Seq2SeqSource& q = *s.dump.seq2seq;
  const int n = int(q.sites().size());
  const SiteId& site = q.sites().at(std::size_t(std::clamp(s.dump.layer, 0, n - 1)));
  const bool cross = s.dump.source && s.dump.source->dump().layers.at(std::size_t(
                                          std::clamp(s.dump.layer, 0, n - 1))).isCross();
  if (fromCross) *fromCross = cross;
  return cross ? 1 : site.stack;
}

ImU32 toU32(RGBA8 c) { return IM_COL32(c.r, c.g, c.b, c.a); }

// The largest |bias| of stack `stack` over every head and bucket (the colour and plot scale).
float biasScale(const Model& m, int stack) {
  const ModelConfig& c = m.config();
  float big = 1e-6f;
  for (int b = 0; b < c.relBuckets; ++b)
    for (int h = 0; h < c.nHead; ++h) big = std::max(big, std::fabs(m.bucketBias(stack, b, h)));
  return big;
}

// Bias against the distance j - i: the shown head bold, the others faint; the
// bucket edges as ticks on the zero line; the hovered distance's bucket and value in a tooltip.
// The range: twice the tokens shown (the distances this text reaches, and some), at least 16,
// at most past the max distance by a quarter (the last bucket is flat from there on).
void drawCurve(const Model& m, int stack, int head, int tokens, float scale, float sc) {
  const ModelConfig& c = m.config();
  const int reach =
      std::clamp(2 * tokens, 16, std::max(16, c.relMaxDistance + c.relMaxDistance / 4));
  const int lo = -reach, hi = stack == 1 ? reach : 0;
  const float width = ImGui::GetContentRegionAvail().x, height = 120 * sc;
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(o, ImVec2(o.x + width, o.y + height), IM_COL32(24, 24, 30, 255));
  const float pad = 6 * sc;
  auto px = [&](int d) { return o.x + pad + (width - 2 * pad) * float(d - lo) / float(hi - lo); };
  auto py = [&](float v) { return o.y + height * 0.5f - (height * 0.5f - pad) * v / scale; };
  dl->AddLine(ImVec2(o.x, py(0)), ImVec2(o.x + width, py(0)), IM_COL32(90, 90, 100, 255));
  // The query itself (distance 0).
  dl->AddLine(ImVec2(px(0), o.y), ImVec2(px(0), o.y + height), IM_COL32(90, 90, 100, 255));
  const int q = 1 << 20;  // the query's position: far from 0, so every distance is a position
  for (int d = lo + 1; d <= hi; ++d)
    if (m.positionBucket(stack, q, q + d) != m.positionBucket(stack, q, q + d - 1))
      dl->AddLine(ImVec2(px(d) - 0.5f * (px(d) - px(d - 1)), py(0) - 3 * sc),
                  ImVec2(px(d) - 0.5f * (px(d) - px(d - 1)), py(0) + 3 * sc),
                  IM_COL32(170, 170, 180, 255));
  for (int h = 0; h < c.nHead; ++h) {
    if (h == head) continue;
    for (int d = lo + 1; d <= hi; ++d)
      dl->AddLine(ImVec2(px(d - 1), py(m.bucketBias(stack, m.positionBucket(stack, q, q + d - 1), h))),
                  ImVec2(px(d), py(m.bucketBias(stack, m.positionBucket(stack, q, q + d), h))),
                  IM_COL32(120, 120, 140, 90), 1.0f * sc);
  }
  for (int d = lo + 1; d <= hi; ++d)
    dl->AddLine(ImVec2(px(d - 1), py(m.bucketBias(stack, m.positionBucket(stack, q, q + d - 1), head))),
                ImVec2(px(d), py(m.bucketBias(stack, m.positionBucket(stack, q, q + d), head))),
                IM_COL32(255, 190, 90, 255), 2.0f * sc);
  char lab[64];
  std::snprintf(lab, sizeof lab, "%+d", lo);
  dl->AddText(ImVec2(o.x + pad, o.y + height - ImGui::GetFontSize() - 2), IM_COL32(170, 170, 180, 255), lab);
  std::snprintf(lab, sizeof lab, "%+d", hi);
  dl->AddText(ImVec2(o.x + width - pad - ImGui::CalcTextSize(lab).x, o.y + height - ImGui::GetFontSize() - 2),
              IM_COL32(170, 170, 180, 255), lab);
  ImGui::InvisibleButton("##bias-curve", ImVec2(width, height));
  if (ImGui::IsItemHovered()) {
    const float t = (ImGui::GetIO().MousePos.x - o.x - pad) / std::max(1.0f, width - 2 * pad);
    const int d = std::clamp(lo + int(std::lround(t * float(hi - lo))), lo, hi);
    const int b = m.positionBucket(stack, q, q + d);
    ImGui::SetTooltip("key %d position%s %s the query: bucket %d, bias %+.4f (head %d)",
                      std::abs(d), std::abs(d) == 1 ? "" : "s", d < 0 ? "before" : "after", b,
                      double(m.bucketBias(stack, b, head)), head);
  }
}

// The bias the site adds to the current tokens' scores, head `head`, diverging colours. It
// depends on j - i alone, so each frame reads one value per distance (2T - 1 of them, never the
// [H, T, T] tensor), and draws at most kMaxCells x kMaxCells cells: past that, a cell stands for
// a block of tokens and shows the bias at the block's centre.
constexpr int kMaxCells = 96;

void drawMatrix(const Seq2SeqSource& src, int stack, int head, float scale, float sc) {
  const Model& m = src.model();
  const std::vector<int>& ids = stack == 1 ? src.sourceIds() : src.decoderIds();
  const int T = int(ids.size());
  if (T == 0) return;
  const int q = T;  // a query position: the buckets depend on the distance alone
  std::vector<float> byDistance(std::size_t(2 * T - 1));
  for (int d = -(T - 1); d <= T - 1; ++d)
    byDistance[std::size_t(d + T - 1)] = m.bucketBias(stack, m.positionBucket(stack, q, q + d), head);
  auto biasAt = [&](int i, int j) { return byDistance[std::size_t(j - i + T - 1)]; };
  const float side = std::min(ImGui::GetContentRegionAvail().x, 320 * sc);
  const int n = std::min(T, kMaxCells);
  const float cell = side / float(n);
  auto token = [&](int c) { return std::min(T - 1, int((2L * c + 1) * T / (2L * n))); };
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (int ci = 0; ci < n; ++ci)
    for (int cj = 0; cj < n; ++cj) {
      const float v = biasAt(token(ci), token(cj));
      dl->AddRectFilled(ImVec2(o.x + cj * cell, o.y + ci * cell),
                        ImVec2(o.x + (cj + 1) * cell, o.y + (ci + 1) * cell),
                        toU32(colormapLookup(ColormapId::Diverging, 0.5f + 0.5f * v / scale)));
    }
  ImGui::InvisibleButton("##bias-matrix", ImVec2(side, side));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int i = std::clamp(int((mp.y - o.y) / side * float(T)), 0, T - 1);
    const int j = std::clamp(int((mp.x - o.x) / side * float(T)), 0, T - 1);
    ImGui::SetTooltip("query %d '%s', key %d '%s'\nj - i = %+d: bucket %d, bias %+.4f", i,
                      src.tokenLabel(ids[std::size_t(i)]).c_str(), j,
                      src.tokenLabel(ids[std::size_t(j)]).c_str(), j - i,
                      m.positionBucket(stack, i, j), double(biasAt(i, j)));
  }
}

}  // namespace

bool hasPositionBias(const AppState& s) {
  return s.dump.seq2seq && s.dump.seq2seq->model().config().positions == PositionKind::Relative &&
         s.dump.seq2seq->model().positionBucket(1, 0, 0) >= 0;
}

bool drawPositionBiasPanel(AppState& s) {
  if (!hasPositionBias(s)) return false;
  const Seq2SeqSource& src = *s.dump.seq2seq;
  const Model& m = src.model();
  const ModelConfig& c = m.config();
  bool fromCross = false;
  const int stack = biasStack(s, &fromCross);
  const int head = std::clamp(s.view.head, 0, c.nHead - 1);
  const float sc = s.ui.uiScale;
  const float scale = biasScale(m, stack);
  ImGui::TextWrapped("%s, head %d: added to the scores before the softmax, the same in every "
                     "layer of the stack. %d buckets, exact up to %d, logarithmic to %d.%s",
                     stack == 1 ? "Encoder self-attention (bidirectional buckets)"
                                : "Decoder self-attention (earlier keys only)",
                     head, c.relBuckets, stack == 1 ? c.relBuckets / 4 : c.relBuckets / 2,
                     c.relMaxDistance,
                     fromCross ? " A cross site has no position bias: the encoder's is shown." : "");
  ImGui::TextDisabled("Bias by distance j - i (ticks: bucket edges; grey: the other heads)");
  drawCurve(m, stack, head, int((stack == 1 ? src.sourceIds() : src.decoderIds()).size()), scale,
            sc);
  ImGui::TextDisabled("The matrix on these tokens (rows: queries, columns: keys; scale \xc2\xb1%.3g)",
                      double(scale));
  drawMatrix(src, stack, head, scale, sc);
  return false;
}

void printPositionBias(const AppState& s) {
  if (!hasPositionBias(s)) return;
  const Seq2SeqSource& src = *s.dump.seq2seq;
  const int stack = biasStack(s);
  const int head = std::clamp(s.view.head, 0, src.model().config().nHead - 1);
  const int T = int((stack == 1 ? src.sourceIds() : src.decoderIds()).size());
  const Tensor3 bias = src.model().positionBias(stack, T, T);
  double sum = 0;
  std::string last;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) sum += bias.at(head, i, j);
  for (int j = 0; j < T; ++j) {
    char v[32];
    std::snprintf(v, sizeof v, "%s%.6f", j ? "," : "", double(bias.at(head, T - 1, j)));
    last += v;
  }
  std::printf("position-bias: stack=%s head=%d tokens=%d sum=%.6f last-row=%s\n",
              stack == 1 ? "encoder" : "decoder", head, T, sum, last.c_str());
}

}  // namespace attnviz::gui
