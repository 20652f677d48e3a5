// attnviz core: text for the PNG export (CPU only; no GL, no window).
//
// A TrueType font through stb_truetype (DejaVu Sans when fonts-dejavu-core is installed), with a
// built-in stroke font (stb_easy_font, ASCII only) as the fallback, so text never fails for want
// of a font file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz {

// An 8-bit coverage mask of rendered text: row 0 at the top, the baseline at y = ascent.
struct TextMask {
  int width = 0, height = 0;
  int ascent = 0;                   // pixels from the top row to the baseline
  std::vector<std::uint8_t> alpha;  // width * height
  std::uint8_t at(int x, int y) const { return alpha[std::size_t(y) * width + x]; }
};

// Decodes UTF-8; each malformed or truncated sequence becomes U+FFFD.
std::u32string decodeUtf8(std::string_view text);

// The TTFs tried when no path is given: $ATTNVIZ_FONT alone when set (so ATTNVIZ_FONT=none picks
// the built-in font), otherwise DejaVu Sans in the usual places.
std::vector<std::string> defaultFontPaths();

// Faces consulted for code points the chosen font lacks (DejaVu, Droid Sans Fallback for CJK,
// Noto), each used only when installed.
std::vector<std::string> supplementFontPaths();

class Font {
 public:
  // Loads the first of `paths` that opens and parses as a TrueType font; when none does, uses the
  // built-in fallback. An empty list means defaultFontPaths(). Never throws for a missing font.
  explicit Font(const std::vector<std::string>& paths = {});
  ~Font();
  Font(Font&&) noexcept;
  Font& operator=(Font&&) noexcept;
  Font(const Font&) = delete;
  Font& operator=(const Font&) = delete;

  // The built-in stroke font (ASCII only).
  static Font builtin();

  bool isFallback() const;
  const std::string& path() const;  // the TTF in use; empty for the fallback

  // Whether the font, or one of the supplement faces, draws this code point (the built-in font
  // draws 0x20..0x7E).
  bool hasGlyph(char32_t cp) const;

  // Vertical metrics at a pixel size (ascent + descent = lineHeight).
  int ascent(float px) const;
  int descent(float px) const;
  int lineHeight(float px) const { return ascent(px) + descent(px); }

  // Advance width of a UTF-8 string in pixels.
  float measure(std::string_view utf8, float px) const;

  // Renders one line of UTF-8 text. Missing glyphs draw the font's replacement box.
  TextMask render(std::string_view utf8, float px) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnviz
