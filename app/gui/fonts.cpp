#include "gui/fonts.h"

#include <backends/imgui_impl_opengl3.h>

#include <cmath>

namespace attnviz::gui {

namespace {

// Latin-1 and Extended, Greek, Cyrillic, phonetic superscripts (ᵀ), punctuation, sub- and
// superscripts, arrows, mathematical operators, box drawing and geometric shapes: what the UI's
// own text uses, always in the atlas.
const ImWchar kBaseRanges[] = {0x0020, 0x024F, 0x0370, 0x03FF, 0x0400, 0x052F, 0x1D00,
                               0x1DBF, 0x1E00, 0x1EFF, 0x2000, 0x206F, 0x2070, 0x209F,
                               0x20A0, 0x20CF, 0x2100, 0x214F, 0x2190, 0x21FF, 0x2200,
                               0x22FF, 0x2500, 0x25FF, 0x2C60, 0x2C7F, 0};

bool inBaseRanges(char32_t cp) {
  for (const ImWchar* r = kBaseRanges; r[0]; r += 2)
    if (cp >= r[0] && cp <= r[1]) return true;
  return false;
}

std::string faceKey(const FontFile& f) { return f.path + '#' + std::to_string(f.index); }

FontFile faceFromKey(const std::string& key) {
  const auto hash = key.rfind('#');
  return {key.substr(0, hash), std::stoi(key.substr(hash + 1))};
}

// ImGui glyph ranges (pairs, zero-terminated) covering exactly `cps`.
std::vector<ImWchar> rangesOf(const std::set<char32_t>& cps) {
  std::vector<ImWchar> out;
  for (char32_t cp : cps) {
    if (!out.empty() && out.back() + 1u == cp) {
      out.back() = ImWchar(cp);
    } else {
      out.push_back(ImWchar(cp));
      out.push_back(ImWchar(cp));
    }
  }
  out.push_back(0);
  return out;
}

void buildAtlas(UiFonts& f) {
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  f.ranges.clear();
  const FontFile primary = f.font->isFallback() ? FontFile{} : FontFile{f.font->path(), 0};
  ImFontConfig cfg;
  cfg.OversampleH = 2;
  cfg.OversampleV = 1;
  if (primary.empty() ||
      !io.Fonts->AddFontFromFileTTF(primary.path.c_str(), f.sizePx, &cfg, kBaseRanges)) {
    ImFontConfig def;
    def.SizePixels = std::round(f.sizePx * 13.0f / 15.0f);
    io.Fonts->AddFontDefault(&def);
  }
  // Then each face's extra code points, merged into the one UI font.
  for (const auto& [key, cps] : f.byFace) {
    const FontFile face = faceFromKey(key);
    f.ranges.push_back(rangesOf(cps));
    ImFontConfig merge = cfg;
    merge.MergeMode = true;
    merge.FontNo = face.index;
    io.Fonts->AddFontFromFileTTF(face.path.c_str(), f.sizePx, &merge, f.ranges.back().data());
  }
}

}  // namespace

void loadFonts(UiFonts& f, float scale) {
  f.sizePx = std::round(15.0f * scale);
  f.font.emplace();
  buildAtlas(f);
}

bool addTokenGlyphs(UiFonts& f, const std::vector<std::string>& queryTokens,
                    const std::vector<std::string>& keyTokens, std::uint64_t inputsVersion) {
  const bool wasUploaded = f.uploaded;
  f.uploaded = true;  // the frame after this call uploads the atlas if it has not yet
  if (inputsVersion == f.inputsVersion || !f.font || f.font->isFallback()) return false;
  f.inputsVersion = inputsVersion;
  bool added = false;
  for (const auto* list : {&queryTokens, &keyTokens}) {
    for (const std::string& token : *list) {
      for (char32_t cp : decodeUtf8(token)) {
        if (cp < 0x20 || cp > 0xFFFF || inBaseRanges(cp) || !f.seen.insert(cp).second) continue;
        const FontFile face = f.font->faceFor(cp);
        if (face.empty()) continue;  // no installed face has it: ImGui draws '?'
        f.byFace[faceKey(face)].insert(cp);
        added = true;
      }
    }
  }
  if (!added) return false;
  buildAtlas(f);
  if (wasUploaded) {
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
  }
  return true;
}

}  // namespace attnviz::gui
