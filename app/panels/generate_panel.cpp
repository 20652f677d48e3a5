// attnviz panel: Generate. Continues the model's text on a worker thread with the KV
// cache (attnviz/model/generate.h) and the model's interventions; with interventions on, also
// without them (Compare). A step slider scrubs back through the steps: the chosen token, the
// candidates it was drawn from and the new token's attention row over the cache.
#include "panels/panels.h"

#include "attnviz/engine/ggml_kernels.h"  // setFastActivations

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <string>

namespace attnviz::gui {

namespace {

void startRun(GenerateState& g, std::shared_ptr<GenerateRun>& slot,
              std::shared_ptr<const Model> model, Interventions iv, GenerateOptions opts) {
  auto run = std::make_shared<GenerateRun>();
  slot = run;
  g.workers.emplace_back([run, model, iv = std::move(iv), opts, prompt = g.prompt] {
    try {
      const Generation gen = generate(*model, prompt, iv, opts, [&](const GeneratedToken& t) {
        {
          std::lock_guard<std::mutex> lock(run->m);
          run->pending.push_back(t);
        }
        wakeFrameLoop();  // a paced window shows each token as it comes
        return !run->cancel.load();
      });
      std::lock_guard<std::mutex> lock(run->m);
      run->seconds = gen.seconds;
      run->stop = gen.stopReason();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(run->m);
      run->error = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(run->m);
      run->done = true;
    }
    wakeFrameLoop();
  });
}

void start(AppState& s, bool greedy) {
  ModelState& m = s.model;
  GenerateState& g = m.gen;
  g.stopAll();
  g.run.reset(), g.plain.reset();
  g.prompt = m.source->pass().ids;
  g.step = 0, g.follow = true;
  GenerateOptions o;
  o.maxNew = g.n;
  if (!greedy && g.sample) {
    o.sampleTemperature = std::max(g.temperature, 0.01f);
    o.topK = g.topK;
    o.seed = std::uint64_t(g.seed);
  }
  const Interventions& iv = m.source->interventions();
  bool intervened = false;
  for (const auto& li : iv.layers) intervened |= li.any();
  startRun(g, g.run, m.source->sharedModel(), iv, o);
  if (intervened) startRun(g, g.plain, m.source->sharedModel(), Interventions{}, o);
}

// Moves the worker's new tokens into the frame's list.
void take(GenerateRun& r, const Model& model) {
  std::vector<GeneratedToken> fresh;
  bool done;
  {
    std::lock_guard<std::mutex> lock(r.m);
    fresh.swap(r.pending);
    done = r.done;
  }
  const Tokenizer& tok = model.tokenizer();
  for (GeneratedToken& t : fresh) {
    const std::string bytes = tok.contains(t.id) ? tok.pieceBytes(t.id) : "";
    r.pieces.push_back(bytes == "\n" ? bytes : tok.contains(t.id) ? tok.printable(t.id) : "?");
    r.tokens.push_back(std::move(t));
  }
  r.finished = done;
}

// The pieces flowed left to right and wrapped: the prompt's tail dim, the continuation bright,
// `mark` (the newest or the selected) highlighted, `diverge` (or -1) underlined in red. Clicking
// a generated token returns its index.
int flowText(const std::string& promptTail, const std::vector<std::string>& pieces, int mark,
             int diverge) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float right = origin.x + ImGui::GetContentRegionAvail().x;
  const float lineH = ImGui::GetTextLineHeight();
  float x = origin.x, y = origin.y;
  int clicked = -1;
  auto put = [&](const std::string& text, ImU32 colour, int index) {
    if (text == "\n") {
      x = origin.x, y += lineH;
      return;
    }
    const ImVec2 size = ImGui::CalcTextSize(text.c_str());
    if (x + size.x > right && x > origin.x) x = origin.x, y += lineH;
    const ImVec2 a(x, y), b(x + size.x, y + lineH);
    if (index >= 0 && index == mark) dl->AddRectFilled(a, b, IM_COL32(200, 150, 40, 150));
    if (index >= 0 && index == diverge) {
      dl->AddRectFilled(a, b, IM_COL32(230, 60, 60, 90));
      dl->AddRectFilled(ImVec2(a.x, b.y - 2), b, IM_COL32(230, 60, 60, 255));
    }
    dl->AddText(a, colour, text.c_str());
    if (index >= 0 && ImGui::IsMouseHoveringRect(a, b) && ImGui::IsWindowHovered()) {
      ImGui::SetTooltip("step %d", index + 1);
      if (ImGui::IsMouseClicked(0)) clicked = index;
    }
    x += size.x;
  };
  for (std::size_t k = 0; k < promptTail.size();) {  // by words, so the tail wraps
    std::size_t e = promptTail.find_first_of(" \n", k);
    e = e == std::string::npos ? promptTail.size() : e + (promptTail[e] == ' ');
    if (promptTail[k] == '\n') e = k + 1;
    put(promptTail.substr(k, e - k), ImGui::GetColorU32(ImGuiCol_TextDisabled), -1);
    k = e;
  }
  for (std::size_t k = 0; k < pieces.size(); ++k)
    put(pieces[k], ImGui::GetColorU32(ImGuiCol_Text), int(k));
  ImGui::Dummy(ImVec2(right - origin.x, y + lineH - origin.y));
  return clicked;
}

}  // namespace

bool drawGeneratePanel(AppState& s) {
  ModelState& m = s.model;
  if (!m.source || !m.source->ready()) return false;
  GenerateState& g = m.gen;
  const Model& model = m.source->model();
  if (g.scripted > 0 && !m.textBusy() && m.actions.empty()) {
    g.n = g.scripted, g.scripted = 0, g.autoStart = false;
    start(s, true);
  } else if (g.autoStart && !m.textBusy() && m.actions.empty()) {
    g.autoStart = false;  // a model scene's "generate": its own settings
    start(s, false);
  }
  for (GenerateRun* r : {g.run.get(), g.plain.get()})
    if (r && !r->finished) take(*r, model);
  if (g.run && g.run->finished && (!g.plain || g.plain->finished) && !g.workers.empty())
    g.stopAll();  // both are done: join them

  ImGui::SetNextItemWidth(-1);
  ImGui::SliderInt("##gen-n", &g.n, 1, 200, "%d tokens");
  ImGui::Checkbox("Sample", &g.sample);
  if (g.sample) {
    ImGui::SetNextItemWidth(-1);
    ImGui::SliderFloat("##gen-t", &g.temperature, 0.05f, 2.0f, "temperature %.2f");
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.5f);
    ImGui::SliderInt("##gen-k", &g.topK, 0, 100, g.topK ? "top-k %d" : "top-k all");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-1);
    ImGui::InputInt("##gen-seed", &g.seed);
  } else {
    ImGui::SameLine();
    ImGui::TextDisabled("(greedy)");
  }
  const bool running = g.busy();
  // The fast path (engine: setFastActivations): decode's products on Q8_0 and K-quant weights
  // take x rounded to 8 bits per block. Process-wide, so not while a run steps; the status bar
  // says when it is on.
  bool fast = fastActivations();
  ImGui::BeginDisabled(running);
  if (ImGui::Checkbox("Fast activations (8-bit x)", &fast)) setFastActivations(fast);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip(
        "The products on Q4_K, Q5_K and Q6_K weights (and Q8_0's in decode) round x to 8 bits "
        "per block (1/127 of the block's largest |x|), as llama.cpp does: faster, but logits "
        "and attention are no longer exact to float32 rounding. Every later pass and decode "
        "step of the app takes it (views already shown keep their numbers); other weights are "
        "unchanged.");
  if (ImGui::Button("Generate", ImVec2(ImGui::GetContentRegionAvail().x * 0.5f, 0)) && !running)
    start(s, false);
  ImGui::SameLine();
  if (ImGui::Button("Stop", ImVec2(-1, 0)))
    for (GenerateRun* r : {g.run.get(), g.plain.get()})
      if (r) r->cancel = true;
  if (!g.run) return false;

  GenerateRun& r = *g.run;
  const int count = int(r.tokens.size());
  {
    std::lock_guard<std::mutex> lock(r.m);
    ImGui::PushTextWrapPos(0.0f);
    if (!r.error.empty()) ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", r.error.c_str());
    const double tps = r.seconds > 0 ? count / r.seconds : 0.0;
    if (r.done)
      ImGui::TextDisabled("%d tokens \xc2\xb7 %.1f tokens/s \xc2\xb7 stopped: %s", count, tps,
                          r.stop.c_str());
    else
      ImGui::TextDisabled("generating\xe2\x80\xa6 %d of %d", count, g.n);
    ImGui::PopTextWrapPos();
  }
  if (count == 0) return false;
  if (g.follow || g.step < 1) g.step = count;
  g.step = std::clamp(g.step, 1, count);

  // The continuation(s): the prompt's last characters dim, then the generated tokens.
  std::string tail = m.source->text();
  if (tail.size() > 120) tail = "\xe2\x80\xa6" + tail.substr(tail.size() - 120);
  int diverge = -1;
  if (g.plain) {
    const auto& a = r.tokens;
    const auto& b = g.plain->tokens;
    for (std::size_t k = 0; k < std::min(a.size(), b.size()) && diverge < 0; ++k)
      if (a[k].id != b[k].id) diverge = int(k);
    ImGui::TextUnformatted("with the interventions:");
  }
  int clicked = flowText(tail, r.pieces, g.step - 1, diverge);
  if (g.plain) {
    ImGui::TextUnformatted("without (plain model):");
    flowText(tail, g.plain->pieces, -1, diverge);
    if (diverge >= 0)
      ImGui::TextDisabled("first different token: step %d (red)", diverge + 1);
    else
      ImGui::TextDisabled("the same so far");
  }
  if (clicked >= 0) g.step = clicked + 1, g.follow = clicked + 1 == count;

  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderInt("##gen-step", &g.step, 1, count, "step %d")) g.follow = g.step == count;
  const GeneratedToken& t = r.tokens[std::size_t(g.step - 1)];
  ImGui::Text("chose '%s'  p = %.3f", r.pieces[std::size_t(g.step - 1)].c_str(), t.prob);
  ImGui::TextDisabled("top %zu of softmax(logits), \xe2\x96\xb6 chosen", t.candidates.size());
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float w = ImGui::GetContentRegionAvail().x, rowH = ImGui::GetTextLineHeightWithSpacing();
  bool listed = false;
  for (const TokenProb& c : t.candidates) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const bool chosen = c.id == t.id;
    listed |= chosen;
    dl->AddRectFilled(p, ImVec2(p.x + w * std::clamp(c.prob, 0.0f, 1.0f), p.y + rowH - 2),
                      chosen ? IM_COL32(200, 150, 40, 200) : IM_COL32(70, 110, 170, 200));
    ImGui::Text("%s%-10s %5.1f%%", chosen ? "\xe2\x96\xb6 " : "  ",
                ("'" + model.tokenizer().label(c.id) + "'").c_str(), 100.0 * c.prob);
  }
  if (!listed) ImGui::TextDisabled("(the chosen token is not among the top %zu)", t.candidates.size());

  const int layer = m.layer, head = s.view.head;
  if (layer < int(t.rows.size()) && head < t.rows[std::size_t(layer)].heads) {
    const Tensor3& row = t.rows[std::size_t(layer)];
    const float* v = row.data.data() + std::size_t(head) * row.cols;
    ImGui::TextWrapped("attention, layer %d head %d: query = step token, keys = prompt + generated "
                       "so far (the KV cache, %d)", layer, head, row.cols);
    ImGui::PlotHistogram("##gen-row", v, row.cols, 0, nullptr, 0.0f,
                         *std::max_element(v, v + row.cols), ImVec2(ImGui::GetContentRegionAvail().x, 70 * s.ui.uiScale));
  }
  return false;
}

}  // namespace attnviz::gui
