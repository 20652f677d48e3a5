// Text rendering for the PNG export: stb_truetype (implemented by Debian's libstb) on faces that
// fontconfig finds (font_lookup.cpp), with the stb_easy_font stroke font as a fallback that needs
// no file.
#include "attnviz/render/font.h"

#include <stb_truetype.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include <stb_easy_font.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace attnviz {

std::u32string decodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0, minCp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, minCp = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, minCp = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, minCp = 0x10000;
    } else {
      out.push_back(0xFFFD);  // stray continuation byte or invalid lead byte
      ++i;
      continue;
    }
    int k = 1;
    for (; k < len && i + k < n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) break;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (k < len) {  // truncated: skip what was consumed, resume at the offending byte
      out.push_back(0xFFFD);
      i += k;
      continue;
    }
    if (cp < minCp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    out.push_back(cp);
    i += len;
  }
  return out;
}

namespace {
// Control characters (a token's newline or tab) take no space and draw nothing.
std::u32string printable(std::string_view s) {
  std::u32string cps = decodeUtf8(s);
  cps.erase(
      std::remove_if(cps.begin(), cps.end(), [](char32_t c) { return c < 0x20 || c == 0x7F; }),
      cps.end());
  return cps;
}
}  // namespace

namespace {

// stb_easy_font draws on a 12-unit line; glyphs stand about 7 units above the baseline.
constexpr float kEasyLine = 12.0f;
constexpr float kEasyAscent = 8.0f;
constexpr float kEasyDescent = 3.0f;

char easyChar(char32_t cp) { return (cp >= 0x20 && cp <= 0x7E) ? char(cp) : '?'; }

struct GlyphBitmap {
  int x0 = 0, y0 = 0, w = 0, h = 0;  // box relative to the pen on the baseline
  std::vector<unsigned char> a;
};

}  // namespace

// One TrueType face.
struct Face {
  FontFile file;
  std::string bytes;  // stb_truetype reads the file in place: keep it alive (Face never moves)
  stbtt_fontinfo info{};
  int unitsAscent = 0, unitsDescent = 0;  // descent is negative in font units
  // Rasterised glyphs keyed by (glyph index, pixel size in 1/64 px). Not thread-safe.
  mutable std::unordered_map<std::uint64_t, GlyphBitmap> cache;

  bool load(const FontFile& f) {
    std::ifstream in(f.path, std::ios::binary);
    if (!in) return false;
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.size() < 12) return false;
    bytes = std::move(data);
    const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
    const int offset = stbtt_GetFontOffsetForIndex(u, f.index);
    if (offset < 0 || !stbtt_InitFont(&info, u, offset)) {
      bytes.clear();
      return false;
    }
    int lineGap = 0;
    stbtt_GetFontVMetrics(&info, &unitsAscent, &unitsDescent, &lineGap);
    if (unitsAscent - unitsDescent <= 0) {
      bytes.clear();
      return false;
    }
    file = f;
    return true;
  }

  float scale(float px) const { return stbtt_ScaleForPixelHeight(&info, px); }

  int glyphIndex(char32_t cp) const { return stbtt_FindGlyphIndex(&info, int(cp)); }

  const GlyphBitmap& glyph(int index, float px) const {
    const std::uint64_t key =
        (std::uint64_t(std::uint32_t(index)) << 32) | std::uint32_t(std::lround(px * 64.0f));
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    GlyphBitmap g;
    const float s = scale(px);
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    stbtt_GetGlyphBitmapBox(&info, index, s, s, &x0, &y0, &x1, &y1);
    g.x0 = x0, g.y0 = y0, g.w = std::max(0, x1 - x0), g.h = std::max(0, y1 - y0);
    if (g.w > 0 && g.h > 0) {
      g.a.assign(std::size_t(g.w) * g.h, 0);
      stbtt_MakeGlyphBitmap(&info, g.a.data(), g.w, g.h, g.w, s, s, index);
    }
    return cache.emplace(key, std::move(g)).first->second;
  }
};

struct Font::Impl {
  std::unique_ptr<Face> primary;  // null: the built-in stroke font
  // Faces consulted, in order, for code points the primary lacks (CJK, for one): each is the
  // face fontconfig found for the first code point that needed it, loaded then.
  mutable std::vector<std::unique_ptr<Face>> extras;
  mutable std::unordered_set<char32_t> asked;  // code points already looked up in fontconfig
  std::string noPath;

  struct Glyph {
    const Face* face;
    int index;  // 0: the primary face's replacement box
  };
  Glyph resolve(char32_t cp) const {
    if (const int g = primary->glyphIndex(cp); g != 0) return {primary.get(), g};
    for (const auto& f : extras)
      if (const int g = f->glyphIndex(cp); g != 0) return {f.get(), g};
    if (asked.insert(cp).second) {
      const FontFile found = fontForCodepoint(cp);
      const bool known =
          found == primary->file || std::any_of(extras.begin(), extras.end(),
                                                [&](const auto& f) { return f->file == found; });
      if (!found.empty() && !known) {
        auto f = std::make_unique<Face>();
        if (f->load(found)) {
          extras.push_back(std::move(f));
          if (const int g = extras.back()->glyphIndex(cp); g != 0) return {extras.back().get(), g};
        }
      }
    }
    return {primary.get(), 0};
  }
};

Font::Font(const std::vector<FontFile>& faces) : impl_(std::make_unique<Impl>()) {
  for (const auto& p : faces.empty() ? defaultFonts() : faces) {
    if (p.empty()) continue;
    auto f = std::make_unique<Face>();
    if (f->load(p)) {
      impl_->primary = std::move(f);
      break;
    }
  }
}

namespace {
std::vector<FontFile> asFaces(const std::vector<std::string>& paths) {
  std::vector<FontFile> out;
  for (const auto& p : paths) out.push_back({p, 0});
  return out;
}
}  // namespace

Font::Font(const std::vector<std::string>& paths) : Font(asFaces(paths)) {}

Font::~Font() = default;
Font::Font(Font&&) noexcept = default;
Font& Font::operator=(Font&&) noexcept = default;

Font Font::builtin() { return Font(std::vector<FontFile>{FontFile{}}); }

bool Font::isFallback() const { return !impl_->primary; }
const std::string& Font::path() const {
  return impl_->primary ? impl_->primary->file.path : impl_->noPath;
}

bool Font::hasGlyph(char32_t cp) const {
  if (!impl_->primary) return cp >= 0x20 && cp <= 0x7E;
  return impl_->resolve(cp).index != 0;
}

FontFile Font::faceFor(char32_t cp) const {
  if (!impl_->primary) return {};
  const Impl::Glyph g = impl_->resolve(cp);
  return g.index != 0 ? g.face->file : FontFile{};
}

int Font::ascent(float px) const {
  if (!impl_->primary) return int(std::ceil(kEasyAscent * px / kEasyLine));
  return int(std::ceil(impl_->primary->unitsAscent * impl_->primary->scale(px)));
}

int Font::descent(float px) const {
  if (!impl_->primary) return int(std::ceil(kEasyDescent * px / kEasyLine));
  return int(std::ceil(-impl_->primary->unitsDescent * impl_->primary->scale(px)));
}

float Font::measure(std::string_view utf8, float px) const {
  const std::u32string cps = printable(utf8);
  if (!impl_->primary) {
    float w = 0;
    for (char32_t cp : cps) {
      const char c = easyChar(cp);
      w += float(stb_easy_font_charinfo[c - 32].advance & 15);
    }
    return w * px / kEasyLine;
  }
  float pen = 0;
  Impl::Glyph prev{nullptr, 0};
  for (char32_t cp : cps) {
    const Impl::Glyph g = impl_->resolve(cp);
    const float s = g.face->scale(px);
    if (prev.face == g.face)
      pen += s * float(stbtt_GetGlyphKernAdvance(&g.face->info, prev.index, g.index));
    int adv = 0, lsb = 0;
    stbtt_GetGlyphHMetrics(&g.face->info, g.index, &adv, &lsb);
    pen += s * float(adv);
    prev = g;
  }
  return pen;
}

TextMask Font::render(std::string_view utf8, float px) const {
  TextMask m;
  m.text = std::string(utf8);
  m.px = px;
  m.ascent = ascent(px);
  m.height = m.ascent + descent(px);
  const std::u32string cps = printable(utf8);

  if (!impl_->primary) {
    // Rasterise stb_easy_font's axis-aligned quads with exact area coverage.
    std::string ascii;
    for (char32_t cp : cps) ascii.push_back(easyChar(cp));
    const float s = px / kEasyLine;
    m.width = std::max(1, int(std::ceil(measure(utf8, px))) + 1);
    m.alpha.assign(std::size_t(m.width) * m.height, 0);
    std::vector<char> vbuf(ascii.size() * 400 + 64);
    const int quads =
        stb_easy_font_print(0, 0, ascii.data(), nullptr, vbuf.data(), int(vbuf.size()));
    // Glyph tops sit at y = 0 in stb_easy_font; shift so its baseline (y = 7) meets ours.
    const float dy = float(m.ascent) - 7.0f * s;
    std::vector<float> cover(m.alpha.size(), 0.0f);
    for (int q = 0; q < quads; ++q) {
      const float* v0 = reinterpret_cast<const float*>(vbuf.data() + q * 64);
      const float* v2 = reinterpret_cast<const float*>(vbuf.data() + q * 64 + 32);
      const float qx0 = v0[0] * s, qy0 = v0[1] * s + dy, qx1 = v2[0] * s, qy1 = v2[1] * s + dy;
      const int px0 = std::max(0, int(std::floor(qx0))),
                px1 = std::min(m.width, int(std::ceil(qx1)));
      const int py0 = std::max(0, int(std::floor(qy0))),
                py1 = std::min(m.height, int(std::ceil(qy1)));
      for (int y = py0; y < py1; ++y) {
        const float oy = std::min(qy1, float(y + 1)) - std::max(qy0, float(y));
        if (oy <= 0) continue;
        for (int x = px0; x < px1; ++x) {
          const float ox = std::min(qx1, float(x + 1)) - std::max(qx0, float(x));
          if (ox > 0) cover[std::size_t(y) * m.width + x] += ox * oy;
        }
      }
    }
    for (std::size_t i = 0; i < cover.size(); ++i)
      m.alpha[i] = std::uint8_t(std::lround(std::min(1.0f, cover[i]) * 255.0f));
    return m;
  }

  // Lay the glyphs out first so that overhangs (a leading 'j', a trailing italic) fit the mask.
  struct Placed {
    const GlyphBitmap* g;
    int x;
  };
  std::vector<Placed> placed;
  placed.reserve(cps.size());
  float pen = 0;
  int minX = 0, maxX = 0;
  Impl::Glyph prev{nullptr, 0};
  for (char32_t cp : cps) {
    const Impl::Glyph gl = impl_->resolve(cp);
    const float s = gl.face->scale(px);
    if (prev.face == gl.face)
      pen += s * float(stbtt_GetGlyphKernAdvance(&gl.face->info, prev.index, gl.index));
    const GlyphBitmap& g = gl.face->glyph(gl.index, px);
    const int x = int(std::lround(pen)) + g.x0;
    placed.push_back({&g, x});
    if (g.w > 0) minX = std::min(minX, x), maxX = std::max(maxX, x + g.w);
    int adv = 0, lsb = 0;
    stbtt_GetGlyphHMetrics(&gl.face->info, gl.index, &adv, &lsb);
    pen += s * float(adv);
    prev = gl;
  }
  maxX = std::max(maxX, int(std::ceil(pen)));
  m.width = std::max(1, maxX - minX);
  m.penX = -minX;
  m.alpha.assign(std::size_t(m.width) * m.height, 0);
  for (const Placed& p : placed) {
    const GlyphBitmap& g = *p.g;
    for (int gy = 0; gy < g.h; ++gy) {
      const int y = m.ascent + g.y0 + gy;
      if (y < 0 || y >= m.height) continue;
      for (int gx = 0; gx < g.w; ++gx) {
        const int x = p.x - minX + gx;
        if (x < 0 || x >= m.width) continue;
        std::uint8_t& dst = m.alpha[std::size_t(y) * m.width + x];
        dst = std::max(dst, g.a[std::size_t(gy) * g.w + gx]);
      }
    }
  }
  return m;
}

std::vector<PlacedGlyph> Font::place(std::string_view utf8, float px) const {
  std::vector<PlacedGlyph> out;
  const std::u32string cps = printable(utf8);
  out.reserve(cps.size());
  if (!impl_->primary) {
    float pen = 0;
    for (char32_t cp : cps) {
      const char c = easyChar(cp);
      out.push_back({FontFile{}, 0, char32_t(c), pen, px});
      pen += float(stb_easy_font_charinfo[c - 32].advance & 15) * px / kEasyLine;
    }
    return out;
  }
  // The pen as render() moves it; each glyph sits at the pen rounded to a whole pixel.
  float pen = 0;
  Impl::Glyph prev{nullptr, 0};
  for (char32_t cp : cps) {
    const Impl::Glyph gl = impl_->resolve(cp);
    const float s = gl.face->scale(px);
    if (prev.face == gl.face)
      pen += s * float(stbtt_GetGlyphKernAdvance(&gl.face->info, prev.index, gl.index));
    const float em = stbtt_ScaleForMappingEmToPixels(&gl.face->info, 1.0f);
    out.push_back({gl.face->file, gl.index, cp, float(std::lround(pen)), s / em});
    int adv = 0, lsb = 0;
    stbtt_GetGlyphHMetrics(&gl.face->info, gl.index, &adv, &lsb);
    pen += s * float(adv);
    prev = gl;
  }
  return out;
}

std::string Font::familyName(const FontFile& face) const {
  const Face* f = nullptr;
  if (impl_->primary && impl_->primary->file == face) f = impl_->primary.get();
  for (const auto& e : impl_->extras)
    if (!f && e->file == face) f = e.get();
  if (!f) return {};
  // Name id 1 (the family), Windows Unicode (UTF-16BE) first, then Macintosh Roman.
  int len = 0;
  if (const char* n = stbtt_GetFontNameString(&f->info, &len, STBTT_PLATFORM_ID_MICROSOFT,
                                              STBTT_MS_EID_UNICODE_BMP, STBTT_MS_LANG_ENGLISH, 1)) {
    std::string out;
    for (int i = 0; i + 1 < len; i += 2) {
      const unsigned u = (unsigned(static_cast<unsigned char>(n[i])) << 8) |
                         static_cast<unsigned char>(n[i + 1]);
      if (u >= 0x20 && u < 0x80) out.push_back(char(u));  // family names the SVG can quote
    }
    if (!out.empty()) return out;
  }
  if (const char* n = stbtt_GetFontNameString(&f->info, &len, STBTT_PLATFORM_ID_MAC,
                                              STBTT_MAC_EID_ROMAN, STBTT_MAC_LANG_ENGLISH, 1)) {
    std::string out;
    for (int i = 0; i < len; ++i)
      if (n[i] >= 0x20 && n[i] < 0x7F) out.push_back(n[i]);
    return out;
  }
  return {};
}

}  // namespace attnviz
