// attnviz core: text for the PNG export (CPU only; no GL, no window).
//
// A TrueType or OpenType font through stb_truetype, chosen by fontconfig (the system's sans-serif),
// with a per-character fallback to other installed faces (CJK, symbols) and a built-in stroke font
// (stb_easy_font, ASCII only) when there is no font at all, so text never fails for want of a file.
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
  // What was drawn, for the vector figures: the text, its pixel size, and the pen's start on the
  // baseline in mask columns (left of 0 only for glyphs that overhang it).
  std::string text;
  float px = 0;
  int penX = 0;
};


// Decodes UTF-8; each malformed or truncated sequence becomes U+FFFD.
std::u32string decodeUtf8(std::string_view text);

// One face of a font file (a .ttc collection holds several, told apart by index).
struct FontFile {
  std::string path;  // empty: none found
  int index = 0;
  bool empty() const { return path.empty(); }
  bool operator==(const FontFile&) const = default;
};

// One glyph of a line as Font::render places it: the face (empty for the built-in font), the
// glyph index in that face, the code point, the pen's x (whole pixels, as the mask rounds it)
// and the face's em size in pixels at this pixel size.
struct PlacedGlyph {
  FontFile face;  // empty: the built-in font
  int glyph = 0;
  char32_t cp = 0;
  float x = 0;
  float em = 0;
};

// fontconfig's choice for a pattern such as "sans-serif" or "DejaVu Sans:bold", restricted to
// scalable outline faces stb_truetype can draw (TrueType or CFF, not colour bitmaps, not Type 1).
// Empty when there is none.
FontFile matchFont(const std::string& pattern = "sans-serif");

// The face fontconfig ranks best for `pattern` among those that have a glyph for `cp`, with the
// same restriction as matchFont. Empty when no installed face has it. Not cached: callers keep
// what they found.
FontFile fontForCodepoint(char32_t cp, const std::string& pattern = "sans-serif");

// The fonts tried when no path is given: $ATTNVIZ_FONT alone when set (so ATTNVIZ_FONT=none picks
// the built-in font), otherwise matchFont("sans-serif").
std::vector<FontFile> defaultFonts();

class Font {
 public:
  // Loads the first of `paths` that opens and parses as a TrueType font; when none does, uses the
  // built-in fallback. An empty list means defaultFonts(). Never throws for a missing font.
  // Code points the chosen face lacks come from the face fontForCodepoint finds, loaded on first
  // use.
  explicit Font(const std::vector<std::string>& paths = {});
  explicit Font(const std::vector<FontFile>& faces);
  ~Font();
  Font(Font&&) noexcept;
  Font& operator=(Font&&) noexcept;
  Font(const Font&) = delete;
  Font& operator=(const Font&) = delete;

  // The built-in stroke font (ASCII only).
  static Font builtin();

  bool isFallback() const;
  const std::string& path() const;  // the TTF in use; empty for the fallback

  // Whether the font, or a fallback face, draws this code point (the built-in font
  // draws 0x20..0x7E).
  bool hasGlyph(char32_t cp) const;
  // The face that draws this code point: the chosen one or the fallback found for it; empty when
  // none does (and for the built-in font). The GUI builds its glyph atlas from these.
  FontFile faceFor(char32_t cp) const;

  // Vertical metrics at a pixel size (ascent + descent = lineHeight).
  int ascent(float px) const;
  int descent(float px) const;
  int lineHeight(float px) const { return ascent(px) + descent(px); }

  // Advance width of a UTF-8 string in pixels.
  float measure(std::string_view utf8, float px) const;

  // Renders one line of UTF-8 text. Missing glyphs draw the font's replacement box.
  TextMask render(std::string_view utf8, float px) const;

  // The glyphs render() draws for a line, where it draws them (for SVG and PDF text). Control
  // characters are left out, as render() leaves them out.
  std::vector<PlacedGlyph> place(std::string_view utf8, float px) const;
  // The family name in the name table of a face place() returned ("DejaVu Sans"); empty when
  // the face has none.
  std::string familyName(const FontFile& face) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnviz
