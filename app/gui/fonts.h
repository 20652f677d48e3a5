// attnviz GUI: the ImGui font atlas, from the faces fontconfig finds (through core's Font), with
// glyphs the UI face lacks (CJK tokens, for one) merged in from fallback faces as tokens need them.
#pragma once

#include "attnviz/render/font.h"

#include <imgui.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace attnviz::gui {

struct UiFonts {
  float sizePx = 15;
  std::optional<Font> font;  // core's face chooser; the built-in font when fontconfig finds none
  // Code points outside the base ranges, by the face that draws them (the UI face included).
  std::map<std::string, std::set<char32_t>> byFace;  // key: path + '#' + face index
  std::set<char32_t> seen;  // every code point already placed (or found in no face)
  std::vector<std::vector<ImWchar>> ranges;  // kept alive until the atlas is built
  std::uint64_t inputsVersion = ~std::uint64_t{0};
  bool uploaded = false;  // the backend has made the atlas texture once
};

// Builds the atlas for the UI scale: the system sans-serif ($ATTNVIZ_FONT overrides) for Latin,
// Greek, Cyrillic, arrows and maths, or ImGui's built-in font when there is none. Call before the
// first frame.
void loadFonts(UiFonts& f, float scale);

// Between frames: when the tokens changed (inputsVersion), adds glyphs for their code points that
// the atlas lacks, from whichever face has them, and re-uploads the atlas texture. ImGui 1.86 (as
// Debian builds it) stores 16-bit characters, so code points past U+FFFF (most emoji) stay '?'
// in the GUI; the PNG export draws them when a face has them. Returns whether it rebuilt.
bool addTokenGlyphs(UiFonts& f, const std::vector<std::string>& queryTokens,
                    const std::vector<std::string>& keyTokens, std::uint64_t inputsVersion);

}  // namespace attnviz::gui
