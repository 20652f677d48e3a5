// attnviz panel: "Why here?" The selected cell's pre-softmax score split over what wrote the
// residual stream the query and the key were read from (attnviz/model/qk_split.h, docs/why-here.md):
// the score and the sum of the parts, the largest pairs as labelled bars (q side x k side), the
// query-side and key-side marginals, the pairs' matrix C as a small diverging heatmap (hover
// names the pair), a button beside a pair to ablate the head that wrote it (the pass re-runs and
// the cell is split again), and the composition map of the shown head against every earlier
// head (q, k or v composition, from the weights alone).
//
// The split needs each earlier layer's head outputs and the layer's q and k, which the view's
// pass does not keep: the panel runs its own pass of the same ids and interventions on a worker,
// with progress in the panel, whenever the cell, the text or the interventions change.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

namespace attnviz::gui {

// The last split shown, for scripted runs (printed by script.cpp).
WhyHereShown g_whyHereShown;

namespace {

// "L3H1" -> (3, 1); anything else (embed, L2mlp, bias, const) -> (-1, -1).
std::pair<int, int> headOf(const std::string& name) {
  int l = -1, h = -1, used = 0;
  if (std::sscanf(name.c_str(), "L%dH%d%n", &l, &h, &used) == 2 && used == int(name.size()))
    return {l, h};
  return {-1, -1};
}

// The key the cell uses: the neuron view's (the one asked for, else the row's largest weight).
int cellKey(const AppState& s, int i, int T, bool causal) {
  int j = s.model.neuronKey;
  if (j >= 0 && j < T && !(causal && j > i)) return j;
  j = 0;
  const Tensor3& w = s.session.result().weights;
  const int h = s.view.head;
  if (w.heads > h && w.rows == T && w.cols == T)
    for (int jj = 0; jj < T; ++jj)
      if (w.at(h, i, jj) > w.at(h, i, j)) j = jj;
  return j;
}

void startSplit(AppState& s, const WhyHereState::Cell& cell) {
  ModelState& m = s.model;
  WhyHereState& w = m.whyHere;
  w.progress = std::make_shared<PassProgress>();
  w.have = cell;
  w.valid = false;
  w.error.clear();
  w.job = std::async(std::launch::async,
                     [model = m.source->sharedModel(), ids = m.source->pass().ids,
                      iv = m.source->interventions(), cell, progress = w.progress] {
                       struct Wake {  // the frame loop takes the result at once
                         ~Wake() { wakeFrameLoop(); }
                       } wake;
                       PassProgress::Scope scope(progress.get());  // closeSources cancels it
                       const ForwardResult r = model->forward(ids, iv, qkSplitCapture(cell.layer));
                       return splitQk(*model, r, cell.layer, cell.head, cell.query, cell.key);
                     });
}

// The pairs' matrix, n x n cells on a diverging scale symmetric about 0; hover names the pair.
void drawMatrix(const QkSplit& q) {
  const int n = q.n();
  double top = 1e-12;
  for (double v : q.c) top = std::max(top, std::fabs(v));
  const float side = std::min(ImGui::GetContentRegionAvail().x, 220.0f);
  const float cell = std::max(2.0f, side / float(n));
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const float t = float(0.5 + 0.5 * q.at(a, b) / top);
      const ImVec2 c0(p0.x + b * cell, p0.y + a * cell);
      dl->AddRectFilled(c0, ImVec2(c0.x + cell, c0.y + cell),
                        colormapU32(ColormapId::Diverging, t));
    }
  ImGui::InvisibleButton("##whyhere-matrix", ImVec2(cell * n, cell * n));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int b = int((mp.x - p0.x) / cell), a = int((mp.y - p0.y) / cell);
    if (a >= 0 && a < n && b >= 0 && b < n)
      ImGui::SetTooltip("q: %s \xc3\x97 k: %s\n%+.4f of %.4f", q.names[std::size_t(a)].c_str(),
                        q.names[std::size_t(b)].c_str(), q.at(a, b), q.score);
  }
  ImGui::TextDisabled("rows: what wrote q \xc2\xb7 columns: what wrote k \xc2\xb7 blue < 0 < red "
                      "(\xc2\xb1%.3g)", top);
}

// The largest |values| of one side, "name +x.xx".
void marginal(const char* title, const QkSplit& q, const std::vector<double>& sums) {
  std::vector<int> order(sums.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return std::fabs(sums[a]) > std::fabs(sums[b]); });
  ImGui::TextUnformatted(title);
  for (int k = 0; k < std::min<int>(5, int(order.size())); ++k)
    ImGui::Text("  %-10s %+8.3f", q.names[std::size_t(order[k])].c_str(), sums[order[k]]);
}

void compositionTab(AppState& s, int layer, int head) {
  ModelState& m = s.model;
  WhyHereState& w = m.whyHere;
  const char* kinds[] = {"Q", "K", "V"};
  for (int k = 0; k < 3; ++k) {
    if (k) ImGui::SameLine();
    ImGui::RadioButton(kinds[k], &m.whyHereKind, k);
  }
  ImGui::SameLine();
  helpMarker("How much each earlier head's output (its W_OV) feeds this head's query (Q), key (K) "
             "or value (V) input, from the weights alone (|W_OV W_QK| over the two norms, as "
             "Elhage et al. 2021 define it). Rows: earlier layers; columns: their heads.");
  const int kind = std::clamp(m.whyHereKind, 0, 2);
  if (w.compJob.valid() &&
      w.compJob.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    try {
      w.comp[w.compRunning] = w.compJob.get();
    } catch (const std::exception& e) {
      w.compError[w.compRunning] = e.what();
    }
    w.compJob = {};
    w.compRunning = -1;
  }
  if (!w.compError[kind].empty()) {
    ImGui::TextWrapped("%s", w.compError[kind].c_str());
    return;
  }
  if (w.comp[kind].scores.empty()) {
    if (!w.compJob.valid()) {
      w.compRunning = kind;
      w.compJob = std::async(std::launch::async, [model = m.source->sharedModel(), kind] {
        struct Wake {
          ~Wake() { wakeFrameLoop(); }
        } wake;
        const ModelConfig& c = model->config();
        return WhyHereState::Composition{compositionScores(*model, CompositionKind(kind)),
                                         compositionBaseline(c.nEmbd, c.headSize)};
      });
    }
    ImGui::TextDisabled("computing the composition scores\xe2\x80\xa6");
    return;
  }
  const int L = m.source->layers(), H = m.source->heads();
  if (layer == 0) {
    ImGui::TextDisabled("Layer 0 reads no earlier head.");
    return;
  }
  const std::vector<float>& v = w.comp[kind].scores;
  const CompositionBaseline& rnd = w.comp[kind].random;
  float top = 1e-9f;
  for (int l1 = 0; l1 < layer; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      top = std::max(top, v[((std::size_t(layer) * H + head) * L + l1) * H + h1]);
  // Rows labelled by layer at the left; the tooltip names each cell.
  const float labelW = ImGui::CalcTextSize("L00 ").x;
  const float cell =
      std::clamp((ImGui::GetContentRegionAvail().x - labelW) / float(H), 4.0f, 24.0f);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 p0(origin.x + labelW, origin.y);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (cell >= ImGui::GetTextLineHeight() * 0.8f)
    for (int l1 = 0; l1 < layer; ++l1)
      dl->AddText(ImVec2(origin.x, p0.y + l1 * cell + (cell - ImGui::GetTextLineHeight()) * 0.5f),
                  ImGui::GetColorU32(ImGuiCol_TextDisabled), ("L" + std::to_string(l1)).c_str());
  for (int l1 = 0; l1 < layer; ++l1)
    for (int h1 = 0; h1 < H; ++h1) {
      const float x = v[((std::size_t(layer) * H + head) * L + l1) * H + h1];
      const ImVec2 c0(p0.x + h1 * cell, p0.y + l1 * cell);
      dl->AddRectFilled(c0, ImVec2(c0.x + cell - 1, c0.y + cell - 1),
                        colormapU32(ColormapId::Viridis, x / top));
    }
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##whyhere-comp", ImVec2(cell * H, cell * layer));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int h1 = int((mp.x - p0.x) / cell), l1 = int((mp.y - p0.y) / cell);
    if (l1 >= 0 && l1 < layer && h1 >= 0 && h1 < H) {
      const double x = v[((std::size_t(layer) * H + head) * L + l1) * H + h1];
      ImGui::SetTooltip("%s-composition of L%dH%d into L%dH%d: %.4f\n%.1fx the random baseline",
                        kinds[kind], l1, h1, layer, head, x, x / rnd.mean);
    }
  }
  int above = 0;
  for (int l1 = 0; l1 < layer; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      above += v[((std::size_t(layer) * H + head) * L + l1) * H + h1] > 2.0 * rnd.mean;
  ImGui::TextDisabled("largest %.3f (colour scale 0 .. largest)", double(top));
  ImGui::Text("random weights of these shapes: %.4f \xc2\xb1 %.4f", rnd.mean, rnd.sd);
  ImGui::SameLine();
  helpMarker("The score two heads get by chance: W_Q, W_K, W_V and W_O drawn with independent "
             "Gaussian entries, the model's d and d_head, 64 draws (about 1/sqrt(d)). A score "
             "well above it is structure the training put there.");
  ImGui::Text("%d of %d earlier heads above twice the random score", above, layer * H);
}

void drawSplit(AppState& s, int i, int j);

}  // namespace

bool drawWhyHerePanel(AppState& s) {
  g_whyHereShown = WhyHereShown{};
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  WhyHereState& w = m.whyHere;
  const ModelConfig& c = m.source->model().config();
  if (const std::string why = qkSplitRefusal(c); !why.empty()) {
    ImGui::TextWrapped("%s", why.c_str());
    return false;
  }
  const int T = int(m.source->pass().ids.size());
  const int l = std::clamp(m.layer, 0, m.source->layers() - 1);
  const int h = std::clamp(s.view.head, 0, m.source->heads() - 1);
  const int i = s.display().fullRow(s.view.selectedRow);
  if (ImGui::BeginTabBar("##whyhere-tabs")) {
    // A scene asks for a tab once; after that the user's clicks choose it.
    const int askedTab = m.whyHereTabAsked ? m.whyHereTab : -1;
    const auto asked = [askedTab](int tab) {
      return askedTab == tab ? ImGuiTabItemFlags_SetSelected : 0;
    };
    if (ImGui::BeginTabItem("Score split", nullptr, asked(0))) {
      m.whyHereTab = 0;
      if (i < 0 || i >= T) {
        ImGui::TextDisabled("Click a row of the heatmap: the panel splits its cell (the key of "
                            "the neuron view: the row's largest weight unless one is chosen).");
      } else {
        WhyHereState::Picked& pk = w.picked;
        const bool chosen = s.model.neuronKey >= 0 && s.model.neuronKey < T &&
                            !(c.causal && s.model.neuronKey > i);
        const std::vector<int>& ids = m.source->pass().ids;
        if (chosen || pk.layer != l || pk.head != h || pk.row != i || pk.ids != ids)
          pk = {l, h, i, cellKey(s, i, T, c.causal), ids};
        const int j = pk.key;
        w.want = WhyHereState::Cell{m.passVersion, l, h, i, j};
        // A finished split is taken; a new cell starts once the last job is done.
        if (w.job.valid() &&
            w.job.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
          try {
            w.result = w.job.get();
            w.valid = true;
          } catch (const PassCancelled&) {
          } catch (const std::exception& e) {
            w.error = e.what();
          }
          w.job = {};
        }
        if (!w.job.valid() && !(w.want == w.have) && !m.textBusy()) startSplit(s, w.want);
        drawSplit(s, i, j);
      }
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Composition", nullptr, asked(1))) {
      m.whyHereTab = 1;
      compositionTab(s, l, h);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
    m.whyHereTabAsked = false;
  }
  return false;
}

namespace {

void drawSplit(AppState& s, int i, int j) {
  ModelState& m = s.model;
  WhyHereState& w = m.whyHere;
  const auto tok = [&](int t) {
    return t < int(m.source->tokens().size()) ? m.source->tokens()[t].c_str() : "";
  };
  ImGui::TextWrapped("Layer %d, head %d: query %d '%s' \xc2\xb7 key %d '%s'", w.want.layer,
                     w.want.head, i, tok(i), j, tok(j));
  if (w.job.valid()) {
    ImGui::TextDisabled("splitting the score\xe2\x80\xa6");
    if (!w.valid) return;
  }
  if (!w.error.empty()) {
    ImGui::TextWrapped("%s", w.error.c_str());
    return;
  }
  if (!w.valid) return;
  const QkSplit& q = w.result;
  if (!(w.have == w.want)) ImGui::TextDisabled("(the last cell split; the new one is running)");
  ImGui::Text("score %.4f = the sum of %d \xc3\x97 %d parts (%.4f)", q.score, q.n(), q.n(), q.sum);
  ImGui::SameLine();
  helpMarker("The pre-softmax score scale * q . k, before temperature, softcap, masks and position "
             "biases, split over what wrote the residual stream entering this layer: the "
             "embedding, each earlier head (L{l}H{h}), each earlier MLP, the output biases, and "
             "the path's constant terms (const). Part (a, b) is what a wrote into q times what b "
             "wrote into k.");
  ImGui::TextDisabled("largest parts, q side \xc3\x97 k side (x ablates a head)");
  const int n = q.n();
  std::vector<int> order(q.c.size());
  std::iota(order.begin(), order.end(), 0);
  const int shown = std::min<int>(8, int(order.size()));
  std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                    [&](int a, int b) { return std::fabs(q.c[a]) > std::fabs(q.c[b]); });
  const double top = std::max(1e-12, std::fabs(q.c[std::size_t(order[0])]));
  g_whyHereShown = WhyHereShown{q.layer, q.head, q.query, q.key, q.score, q.sum,
                                q.names[std::size_t(order[0] / n)],
                                q.names[std::size_t(order[0] % n)], q.c[std::size_t(order[0])]};
  const float barW = ImGui::GetContentRegionAvail().x * 0.2f;
  for (int k = 0; k < shown; ++k) {
    const int a = order[k] / n, b = order[k] % n;
    const double v = q.c[std::size_t(order[k])];
    ImGui::PushID(k);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    const float len = float(std::fabs(v) / top) * barW;
    ImGui::GetWindowDrawList()->AddRectFilled(
        ImVec2(p.x, p.y + 2), ImVec2(p.x + len, p.y + h - 1),
        v >= 0 ? IM_COL32(220, 90, 70, 255) : IM_COL32(70, 120, 220, 255));
    ImGui::Dummy(ImVec2(barW, h));
    ImGui::SameLine();
    ImGui::Text("%s \xc3\x97 %s %+.3f", q.names[std::size_t(a)].c_str(),
                q.names[std::size_t(b)].c_str(), v);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("q: %s \xc3\x97 k: %s \xe2\x86\x92 %+.4f of %.4f (%.0f%%)",
                        q.names[std::size_t(a)].c_str(), q.names[std::size_t(b)].c_str(), v,
                        q.score, 100.0 * v / q.score);
    // One click ablates a head that wrote either side (the pass re-runs; the cell splits again).
    for (int side : {a, b}) {
      const auto [hl, hh] = headOf(q.names[std::size_t(side)]);
      if (hl < 0 || m.source->ablated(hl, hh)) continue;
      ImGui::SameLine();
      ImGui::PushID(side);
      const bool scripted = m.whyHereAblate == std::pair<int, int>{hl, hh} &&
                            w.have == w.want && !w.job.valid();
      const bool pressed =
          ImGui::SmallButton(("x L" + std::to_string(hl) + "H" + std::to_string(hh)).c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("Ablate head %d:%d (zero its output in the pass): the pass re-runs and "
                          "this cell is split again",
                          hl, hh);
      if (pressed || scripted) {
        m.whyHereAblate = {-1, -1};
        m.actions.push_back([hl, hh](AppState& st) { st.model.source->setAblated(hl, hh, true); });
      }
      ImGui::PopID();
      if (side == b || a == b) break;
    }
    ImGui::PopID();
  }
  std::vector<double> rowSums(n, 0.0), colSums(n, 0.0);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) rowSums[a] += q.at(a, b), colSums[b] += q.at(a, b);
  if (ImGui::BeginTable("##whyhere-marginals", 2)) {
    ImGui::TableNextColumn();
    marginal("query side (what wrote q)", q, rowSums);
    ImGui::TableNextColumn();
    marginal("key side (what wrote k)", q, colSums);
    ImGui::EndTable();
  }
  drawMatrix(q);
}

}  // namespace

}  // namespace attnviz::gui
