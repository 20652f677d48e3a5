// Font discovery through fontconfig: which installed face is the system's sans-serif, and which
// one has a glyph the chosen face lacks. Shared by the PNG export (raster_font.cpp) and the GUI's
// ImGui atlas, so both pick the same faces.
#include "attnviz/formats/data_dir.h"
#include "attnviz/render/font.h"

#include <fontconfig/fontconfig.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace attnviz {

namespace {

// stb_truetype draws TrueType and CFF outlines; Type 1, PCF and colour bitmap faces (Noto Color
// Emoji is CBDT) it cannot.
bool drawable(FcPattern* font) {
  FcBool scalable = FcFalse, color = FcFalse;
  if (FcPatternGetBool(font, FC_SCALABLE, 0, &scalable) != FcResultMatch || !scalable) return false;
  if (FcPatternGetBool(font, FC_COLOR, 0, &color) == FcResultMatch && color) return false;
  FcChar8* format = nullptr;
  if (FcPatternGetString(font, FC_FONTFORMAT, 0, &format) != FcResultMatch) return false;
  const char* f = reinterpret_cast<const char*>(format);
  return std::strcmp(f, "TrueType") == 0 || std::strcmp(f, "CFF") == 0;
}

bool hasChar(FcPattern* font, char32_t cp) {
  FcCharSet* cs = nullptr;
  return FcPatternGetCharSet(font, FC_CHARSET, 0, &cs) == FcResultMatch &&
         FcCharSetHasChar(cs, FcChar32(cp));
}

// The best-ranked drawable face for `pattern` that has `cp`; fontconfig's sort order already
// puts the faces that cover the requested charset first.
FontFile bestFace(const std::string& pattern, char32_t cp) {
  static std::once_flag init;
  static bool ok = false;
  std::call_once(init, [] {
    ok = FcInit() == FcTrue;
    // fontconfig's configuration is otherwise never freed (LeakSanitizer reports it); no
    // fontconfig object outlives a lookup, so releasing everything at exit is safe.
    if (ok) std::atexit(FcFini);
    // Fonts shipped with attnviz (share/attnviz/fonts, when there are any) join the system's.
    if (const std::string shipped = dataSubdir("fonts"); ok && !shipped.empty())
      FcConfigAppFontAddDir(nullptr, reinterpret_cast<const FcChar8*>(shipped.c_str()));
  });
  if (!ok) return {};
  FcPattern* pat = FcNameParse(reinterpret_cast<const FcChar8*>(pattern.c_str()));
  if (!pat) return {};
  FcCharSet* want = FcCharSetCreate();
  FcCharSetAddChar(want, FcChar32(cp));
  FcPatternAddCharSet(pat, FC_CHARSET, want);
  FcCharSetDestroy(want);
  FcPatternAddBool(pat, FC_SCALABLE, FcTrue);
  FcConfigSubstitute(nullptr, pat, FcMatchPattern);
  FcDefaultSubstitute(pat);
  FcResult result = FcResultNoMatch;
  FcFontSet* set = FcFontSort(nullptr, pat, FcFalse, nullptr, &result);
  FcPatternDestroy(pat);
  FontFile out;
  if (!set) return out;
  for (int k = 0; k < set->nfont; ++k) {
    FcPattern* font = set->fonts[k];
    FcChar8* file = nullptr;
    if (!drawable(font) || !hasChar(font, cp) ||
        FcPatternGetString(font, FC_FILE, 0, &file) != FcResultMatch)
      continue;
    int index = 0;
    FcPatternGetInteger(font, FC_INDEX, 0, &index);
    out = {reinterpret_cast<const char*>(file), index & 0xFFFF};  // high bits: a named instance
    break;
  }
  FcFontSetDestroy(set);
  return out;
}

}  // namespace

FontFile matchFont(const std::string& pattern) { return bestFace(pattern, U'A'); }

FontFile fontForCodepoint(char32_t cp, const std::string& pattern) { return bestFace(pattern, cp); }

std::vector<FontFile> defaultFonts() {
  if (const char* env = std::getenv("ATTNVIZ_FONT"); env && *env) return {{env, 0}};
  return {matchFont("sans-serif")};
}

}  // namespace attnviz
