// attnviz panel: an encoder-decoder's cross attention as an alignment. The source
// strip on top faces the target strip below (the produced target tokens: the decoder's input
// without its start id); a line joins a target unit to each of its strongest source units, its
// alpha and width by the weight, and the predicted links (argmax, or every weight at or above a
// threshold) are drawn bold. "Shift by one" (on by default) reads produced token t on decoder row
// t, the row that produces it. With a gold alignment typed as Pharaoh pairs: the shown head's
// AER and a layers x heads AER map, the best head outlined; a click on a cell shows that head.
// The computation lives in attnviz/session/alignment.h; this file only draws it.
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace attnviz::gui {

namespace {

constexpr int kLinesPerTarget = 3;   // the strongest source units drawn per target unit
constexpr double kLineFloor = 0.05;  // weights below it draw no line

// The cross site the panel reads: the shown site when it is one, else the last cross site.
int crossSite(const AppState& s) {
  if (!s.dump.seq2seq || !s.dump.source) return -1;
  const Dump& d = s.dump.source->dump();
  if (d.layers.empty()) return -1;
  const int cur = std::clamp(s.dump.layer, 0, int(d.layers.size()) - 1);
  if (d.layers[cur].isCross()) return cur;
  for (int i = int(d.layers.size()) - 1; i >= 0; --i)
    if (d.layers[i].isCross()) return i;
  return -1;
}

bool contains(const Alignment& a, AlignLink l) {
  return std::binary_search(a.begin(), a.end(), l);
}

// One strip's labels centred on their units, horizontal when every label fits its unit,
// else rotated (reading upwards). `above`: the labels sit above `y` (the source), else below.
void drawStrip(ImDrawList* dl, const AlignUnits& u, float x0, float unitW, float y, bool above,
               float band, ImU32 colour) {
  float widest = 0;
  for (const std::string& l : u.labels) widest = std::max(widest, ImGui::CalcTextSize(l.c_str()).x);
  const bool rotate = widest > unitW - 6;
  const float fh = ImGui::GetFontSize();
  for (int k = 0; k < u.count(); ++k) {
    const char* t = u.labels[k].c_str();
    const float cx = x0 + (k + 0.5f) * unitW;
    const float w = rotate ? std::min(ImGui::CalcTextSize(t).x, band) : ImGui::CalcTextSize(t).x;
    dl->PushClipRect(ImVec2(x0 + k * unitW, above ? y - band - 4 : y),
                     ImVec2(x0 + (k + 1) * unitW, above ? y : y + band + 4), true);
    if (rotate)
      addVerticalText(dl, cx - fh * 0.5f, above ? y - 4 : y + 4 + w, colour, t);
    else
      dl->AddText(ImVec2(cx - w * 0.5f, above ? y - 4 - fh : y + 4), colour, t);
    dl->PopClipRect();
  }
}

// The strips' label band: the widest label when they must be rotated, else one line.
float bandOf(const AlignUnits& u, float unitW) {
  float widest = 0;
  for (const std::string& l : u.labels) widest = std::max(widest, ImGui::CalcTextSize(l.c_str()).x);
  return widest > unitW - 6 ? std::min(widest, 90.0f * ImGui::GetFontSize() / 13.0f)
                            : ImGui::GetFontSize();
}

void drawFigure(AppState& s) {
  AlignmentState& a = s.dump.align;
  const AlignUnits &src = a.strips.source, &tgt = a.strips.target;
  const float sc = s.ui.uiScale;
  const float width = ImGui::GetContentRegionAvail().x;
  const float srcW = width / float(std::max(1, src.count()));
  const float tgtW = width / float(std::max(1, tgt.count()));
  const float srcBand = bandOf(src, srcW), tgtBand = bandOf(tgt, tgtW);
  const float gapH = std::clamp(width * 0.35f, 70.0f * sc, 140.0f * sc);
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float ys = o.y + srcBand + 8 * sc, yt = ys + gapH;
  const float height = srcBand + 8 * sc + gapH + tgtBand + 8 * sc;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(o, ImVec2(o.x + width, o.y + height), IM_COL32(24, 24, 30, 255));
  const bool hasGold = !a.goldLinks.empty();
  auto sx = [&](int k) { return o.x + (k + 0.5f) * srcW; };
  auto tx = [&](int k) { return o.x + (k + 0.5f) * tgtW; };

  // The weights: each target unit's strongest source units, faint to bright.
  const Eigen::MatrixXd& w = a.unitWeights;
  for (int t = 0; t < int(w.rows()); ++t) {
    std::vector<int> order(std::size_t(w.cols()));
    for (int j = 0; j < int(w.cols()); ++j) order[j] = j;
    std::sort(order.begin(), order.end(), [&](int p, int q) { return w(t, p) > w(t, q); });
    for (int r = 0; r < std::min<int>(kLinesPerTarget, int(order.size())); ++r) {
      const double v = std::clamp(w(t, order[r]), 0.0, 1.0);
      if (v < kLineFloor) break;
      dl->AddLine(ImVec2(sx(order[r]), ys), ImVec2(tx(t), yt),
                  IM_COL32(140, 180, 255, int(40 + 200 * v)), (0.5f + 3.5f * float(v)) * sc);
    }
  }
  // Gold links the prediction missed: thin dashes.
  for (const AlignLink& g : a.goldLinks) {
    if (g.source >= src.count() || g.target >= tgt.count() || contains(a.links, g)) continue;
    const ImVec2 p(sx(g.source), ys), q(tx(g.target), yt);
    for (int k = 0; k < 12; k += 2)
      dl->AddLine(ImVec2(p.x + (q.x - p.x) * k / 12, p.y + (q.y - p.y) * k / 12),
                  ImVec2(p.x + (q.x - p.x) * (k + 1) / 12, p.y + (q.y - p.y) * (k + 1) / 12),
                  IM_COL32(90, 220, 120, 230), 1.5f * sc);
  }
  // The predicted links: green when gold, red when not, orange without a gold alignment.
  for (const AlignLink& l : a.links) {
    const ImU32 c = !hasGold                  ? IM_COL32(255, 170, 30, 255)
                    : contains(a.goldLinks, l) ? IM_COL32(90, 220, 120, 255)
                                               : IM_COL32(240, 80, 80, 255);
    dl->AddLine(ImVec2(sx(l.source), ys), ImVec2(tx(l.target), yt), c, 2.0f * sc);
  }
  const ImU32 text = IM_COL32(230, 230, 235, 255);
  for (int k = 0; k < src.count(); ++k) dl->AddCircleFilled(ImVec2(sx(k), ys), 3 * sc, text);
  for (int k = 0; k < tgt.count(); ++k) dl->AddCircleFilled(ImVec2(tx(k), yt), 3 * sc, text);
  drawStrip(dl, src, o.x, srcW, ys, true, srcBand, text);
  drawStrip(dl, tgt, o.x, tgtW, yt, false, tgtBand, IM_COL32(255, 215, 150, 255));
  ImGui::InvisibleButton("##align-figure", ImVec2(width, height));
  if (ImGui::IsItemHovered()) {
    // The unit under the mouse, on the nearer strip: its index (the gold pairs' numbering).
    const ImVec2 m = ImGui::GetMousePos();
    const bool top = m.y < (ys + yt) * 0.5f;
    const int k = int((m.x - o.x) / (top ? srcW : tgtW));
    const AlignUnits& u = top ? src : tgt;
    if (k >= 0 && k < u.count())
      ImGui::SetTooltip("%s %d: %s", top ? "source" : "target", k, u.labels[k].c_str());
  }
}

// The layers x heads AER map: low AER bright; the best head outlined white, the shown one orange.
void drawMap(AppState& s) {
  AlignmentState& a = s.dump.align;
  const AerMap& m = a.map;
  if (m.layers == 0 || m.heads == 0) return;
  const float sc = s.ui.uiScale;
  const float labelW = ImGui::CalcTextSize("dec 00").x + 4 * sc;
  const float cell = std::floor(std::clamp((ImGui::GetContentRegionAvail().x - labelW) / m.heads,
                                           8.0f * sc, 26.0f * sc));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float x0 = std::floor(o.x + labelW), y0 = std::floor(o.y + ImGui::GetFontSize() + 2 * sc);
  for (int h = 0; h < m.heads; ++h) {
    const std::string t = std::to_string(h);
    dl->AddText(ImVec2(x0 + h * cell + (cell - ImGui::CalcTextSize(t.c_str()).x) * 0.5f, o.y),
                IM_COL32(150, 150, 160, 255), t.c_str());
  }
  const Dump& d = s.dump.source->dump();
  int hoverL = -1, hoverH = -1;
  for (int l = 0; l < m.layers; ++l) {
    const std::string name = "dec " + std::to_string(l);
    dl->AddText(ImVec2(o.x, y0 + l * cell + (cell - ImGui::GetFontSize()) * 0.5f),
                m.sites[l] == a.site ? IM_COL32(255, 170, 30, 255) : IM_COL32(150, 150, 160, 255),
                name.c_str());
    for (int h = 0; h < m.heads; ++h) {
      const ImVec2 p(x0 + h * cell, y0 + l * cell), q(p.x + cell - 1, p.y + cell - 1);
      dl->AddRectFilled(p, q, colormapU32(ColormapId::Viridis, float(1.0 - m.aer(l, h))));
      if (ImGui::IsMouseHoveringRect(p, q) && ImGui::IsWindowHovered()) hoverL = l, hoverH = h;
    }
  }
  auto outline = [&](int l, int h, ImU32 c, float grow) {
    dl->AddRect(ImVec2(x0 + h * cell - grow, y0 + l * cell - grow),
                ImVec2(x0 + (h + 1) * cell - 1 + grow, y0 + (l + 1) * cell - 1 + grow), c, 0, 0,
                1.5f * sc);
  };
  if (m.bestLayer >= 0) outline(m.bestLayer, m.bestHead, IM_COL32(255, 255, 255, 255), 1.0f);
  for (int l = 0; l < m.layers; ++l)
    if (m.sites[l] == a.site && !a.built.meanHeads)
      outline(l, a.head, IM_COL32(255, 170, 30, 255), 3.0f * sc);
  ImGui::SetCursorScreenPos(ImVec2(o.x, y0));
  ImGui::InvisibleButton("##align-map", ImVec2(labelW + m.heads * cell, m.layers * cell));
  if (hoverL >= 0) {
    ImGui::BeginTooltip();
    ImGui::Text("%s head %d: AER %.4f", d.layers[m.sites[hoverL]].name.c_str(), hoverH,
                m.aer(hoverL, hoverH));
    ImGui::TextDisabled("click to show this head");
    ImGui::EndTooltip();
    if (ImGui::IsItemClicked()) {
      if (s.dump.layer != m.sites[hoverL]) s.dump.layerDirty = true;
      s.dump.layer = m.sites[hoverL];
      s.view.head = hoverH;
      s.view.headAverage = false;
      a.meanHeads = false;
    }
  }
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("AER of every cross head (bright: low). Best %d:%d, AER %.4f, outlined white",
                     m.bestLayer, m.bestHead, m.aer(m.bestLayer, m.bestHead));
  ImGui::PopStyleColor();
}

}  // namespace

bool hasCrossSite(const AppState& s) { return crossSite(s) >= 0; }

void updateAlignment(AppState& s) {
  DumpState& d = s.dump;
  AlignmentState& a = d.align;
  const int site = crossSite(s);
  if (site < 0) {
    a.site = -1;
    return;
  }
  const Dump& dump = d.source->dump();
  const int heads = dump.layers[site].weights.heads;
  AlignmentState::Key k;
  k.version = d.version;
  k.site = site;
  k.head = std::clamp(s.view.head, 0, std::max(0, heads - 1));
  k.meanHeads = a.meanHeads;
  k.words = a.words;
  k.options = a.options;
  k.gold = a.goldApplied;
  if (k == a.built) return;
  a.built = k;
  a.site = site;
  a.head = k.head;
  a.error.clear();
  a.links.clear();
  a.goldLinks.clear();
  a.map = AerMap{};
  a.aer = 0;
  try {
    a.strips = alignmentStrips(*d.seq2seq, a.words);
    a.unitWeights =
        unitWeights(dump.layers[site].weights, a.meanHeads ? -1 : k.head, a.strips, a.options.shift);
    a.links = predictAlignment(a.unitWeights, a.options);
    a.goldLinks = parsePharaoh(a.goldApplied, a.strips.source.count(), a.strips.target.count());
    if (!a.goldLinks.empty()) {
      a.aer = alignmentErrorRate(a.links, a.goldLinks);
      a.map = aerMap(dump, a.strips, a.goldLinks, a.options);
    }
  } catch (const InputError& e) {
    a.error = e.what();
    a.goldLinks.clear();
  }
}

bool drawAlignmentPanel(AppState& s) {
  updateAlignment(s);
  AlignmentState& a = s.dump.align;
  if (a.site < 0) return false;
  bool changed = false;
  const Dump& d = s.dump.source->dump();
  const std::string who = a.meanHeads ? "mean of " + std::to_string(d.layers[a.site].weights.heads) + " heads"
                                      : "head " + std::to_string(a.head);
  ImGui::Text("%s, %s", d.layers[a.site].name.c_str(), who.c_str());
  if (a.site != std::clamp(s.dump.layer, 0, int(d.layers.size()) - 1))
    ImGui::TextWrapped("(the site shown is not a cross site: reading the last one)");
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("top: the source; bottom: the target, without the start token");
  ImGui::PopStyleColor();
  if (a.strips.target.count() == 0) {
    ImGui::TextWrapped("No target yet: type the target text in the Target box above to see the "
                       "alignment.");
    return false;
  }
  drawFigure(s);

  changed |= ImGui::Checkbox("Shift by one", &a.options.shift);
  ImGui::SameLine();
  helpMarker(
      "Decoder row t reads target token t-1 (row 0 reads the start token) and produces token t. "
      "On: token t is read on row t, the row that produces it. Off: on row t+1, where it is "
      "already the input - the naive reading, one token late.");
  ImGui::TextDisabled(a.options.shift ? "row t produces token t: read there"
                                      : "token t read on row t+1, one late");
  changed |= ImGui::Checkbox("Mean of the heads", &a.meanHeads);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("Words", &a.words);
  ImGui::SameLine();
  helpMarker("On: pieces grouped into words (a piece starting with a space starts one; special "
             "tokens such as </s> belong to none). Off: one unit per token.");
  bool threshold = a.options.rule == AlignRule::Threshold;
  if (ImGui::Checkbox("Threshold", &threshold)) {
    a.options.rule = threshold ? AlignRule::Threshold : AlignRule::Argmax;
    changed = true;
  }
  ImGui::SameLine();
  if (threshold) {
    ImGui::SetNextItemWidth(-1);
    changed |= ImGui::SliderFloat("##align-threshold", &a.options.threshold, 0.01f, 1.0f, "%.2f");
  } else {
    ImGui::TextDisabled("(argmax)");
  }

  ImGui::TextUnformatted("Gold alignment (source-target)");
  ImGui::SameLine();
  helpMarker("Pharaoh pairs S-T, 0-based over the strips: S a source unit, T a target unit "
             "(target units count the target's tokens without the start token). Hover a strip "
             "to see a unit's index. Sure links only: AER = 1 - 2|A and G| / (|A| + |G|).");
  ImGui::SetNextItemWidth(-1);
  // Applied when the box is left or Enter is pressed (not at every keystroke).
  if (ImGui::InputTextWithHint("##align-gold", "0-2 1-1 2-0", a.gold, sizeof a.gold,
                               ImGuiInputTextFlags_EnterReturnsTrue) ||
      ImGui::IsItemDeactivatedAfterEdit()) {
    a.goldApplied = a.gold;
    changed = true;
  }
  if (ImGui::Button("Reversed order")) {
    // This model family's demo gold (kjv-t5-align): target unit i <-> source unit n-1-i.
    const int n = std::min(a.strips.source.count(), a.strips.target.count());
    std::string g;
    for (int i = 0; i < n; ++i)
      g += (g.empty() ? "" : " ") + std::to_string(a.strips.source.count() - 1 - i) + "-" +
           std::to_string(i);
    std::snprintf(a.gold, sizeof a.gold, "%s", g.c_str());
    a.goldApplied = a.gold;
    changed = true;
  }
  ImGui::SameLine();
  if (ImGui::Button("Clear")) a.gold[0] = 0, a.goldApplied.clear(), changed = true;
  ImGui::SameLine();
  helpMarker("Reversed order: source unit n-1-i with target unit i, the gold of the shipped "
             "kjv-t5-align (its target is the source's words enciphered and reversed).");
  if (changed) updateAlignment(s);
  if (!a.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(240, 90, 90, 255));
    ImGui::TextWrapped("%s", a.error.c_str());
    ImGui::PopStyleColor();
  } else if (!a.goldLinks.empty()) {
    ImGui::Text("AER %.4f  (%zu links, %zu gold)", a.aer, a.links.size(), a.goldLinks.size());
    drawMap(s);
  }
  return changed;
}

void printAlignment(AppState& s) {
  updateAlignment(s);
  const AlignmentState& a = s.dump.align;
  if (a.site < 0 || !s.dump.seq2seq) return;
  std::string links;
  for (const AlignLink& l : a.links)
    links += (links.empty() ? "" : ",") + std::to_string(l.source) + "-" + std::to_string(l.target);
  const SiteId& site = s.dump.seq2seq->sites().at(std::size_t(a.site));
  char aer[32] = "-", best[32] = "-";
  if (!a.goldLinks.empty()) {
    std::snprintf(aer, sizeof aer, "%.4f", a.aer);
    if (a.map.bestLayer >= 0)
      std::snprintf(best, sizeof best, "%d:%d", a.map.bestLayer, a.map.bestHead);
  }
  std::printf("alignment: site=%s head=%s shift=%d rule=%s units=%s source=%d target=%d "
              "links=%s aer=%s best=%s\n",
              seq2seqSiteName(site).c_str(),
              a.built.meanHeads ? "mean" : std::to_string(a.head).c_str(), int(a.options.shift),
              a.options.rule == AlignRule::Argmax ? "argmax" : "threshold",
              a.words ? "words" : "pieces", a.strips.source.count(), a.strips.target.count(),
              links.empty() ? "-" : links.c_str(), aer, best);
  if (!a.map.counts.empty()) {
    std::string cells;
    for (int l = 0; l < a.map.layers; ++l)
      for (int h = 0; h < a.map.heads; ++h) {
        char c[40];
        std::snprintf(c, sizeof c, "%s%d:%d=%.4f", cells.empty() ? "" : " ", l, h, a.map.aer(l, h));
        cells += c;
      }
    std::printf("alignment-map: %s\n", cells.c_str());
  }
  if (!a.error.empty()) std::printf("alignment-error: %s\n", a.error.c_str());
}

}  // namespace attnviz::gui
