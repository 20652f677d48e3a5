// SVG and PDF from a recorded figure (vector_figure.h). SVG is written here as text: a rect per
// cell, a pattern for the hatching, and a text element per label with each glyph's x given, so a
// viewer with the font places the glyphs where the PNG has them. PDF goes through cairo, whose
// PDF surface embeds a subset of the PNG's font file (FreeType reads the same face stb_truetype
// draws from) and writes the labels as text that can be searched and copied.
#include "attnviz/render/vector_figure.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/render/raster.h"

#include <stb_image_write.h>

#include <cairo-ft.h>
#include <cairo-pdf.h>
#include <cairo.h>
#include <ft2build.h>
#include FT_FREETYPE_H

#include <cctype>
#include <charconv>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>

namespace attnviz {

namespace {

// Numbers as SVG wants them whatever the C locale: at most 3 decimals, no trailing zeros.
std::string num(double v) {
  if (std::fabs(v) < 5e-4) v = 0;
  char buf[48];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 3);
  std::string s(buf, r.ptr);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string hex(RGBA8 c) {
  static const char* digits = "0123456789abcdef";
  std::string s = "#";
  for (int v : {c.r, c.g, c.b}) s += digits[v >> 4], s += digits[v & 15];
  return s;
}

void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

// One character of XML text: escaped, and code points XML 1.0 forbids as U+FFFD.
void appendXmlChar(std::string& out, char32_t cp) {
  switch (cp) {
    case '&': out += "&amp;"; return;
    case '<': out += "&lt;"; return;
    case '>': out += "&gt;"; return;
    case '"': out += "&quot;"; return;
    default: break;
  }
  if (cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF) cp = 0xFFFD;
  appendUtf8(out, cp);
}

std::string xmlAttr(const std::string& s) {
  std::string out;
  for (char32_t cp : decodeUtf8(s)) appendXmlChar(out, cp);
  return out;
}

// Glyphs of one text that share a face: SVG tspans, PDF show-text calls.
struct Run {
  std::size_t begin, end;
};
std::vector<Run> runsOf(const VectorText& t) {
  std::vector<Run> runs;
  for (std::size_t i = 0; i < t.glyphs.size(); ++i)
    if (runs.empty() || !(t.glyphs[i].face == t.glyphs[runs.back().begin].face) ||
        t.glyphs[i].em != t.glyphs[runs.back().begin].em)
      runs.push_back({i, i + 1});
    else
      runs.back().end = i + 1;
  return runs;
}

std::string familyOf(const VectorFigure& fig, const FontFile& face) {
  for (const auto& [f, name] : fig.families)
    if (f == face && !name.empty()) return name;
  return {};
}

// The band of one hatch stripe, a <= x + y < b, as a quadrilateral that covers a period x period
// tile (the tile clips it). The PNG inks pixel (x, y) when (x + y) mod p < ink, so a stripe of
// pixel centres spans the sums [k p + 0.5, k p + ink + 0.5).
std::vector<std::pair<double, double>> stripe(double a, double b, double p) {
  return {{a + p, -p}, {b + p, -p}, {-p, b + p}, {-p, a + p}};
}

// A picture as a PNG in base64, for an SVG image element's data URL.
std::string pngBase64(const VectorPicture& pic) {
  std::string png;
  const auto sink = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), std::size_t(size));
  };
  if (!stbi_write_png_to_func(sink, &png, pic.width, pic.height, 3, pic.rgb.data(),
                              pic.width * 3))
    throw InputError("SVG: PNG encoding of the picture failed");
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((png.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < png.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, png.size() - i);
    unsigned v = unsigned(static_cast<unsigned char>(png[i])) << 16;
    if (n > 1) v |= unsigned(static_cast<unsigned char>(png[i + 1])) << 8;
    if (n > 2) v |= unsigned(static_cast<unsigned char>(png[i + 2]));
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += n > 1 ? abc[(v >> 6) & 63] : '=';
    out += n > 2 ? abc[v & 63] : '=';
  }
  return out;
}

}  // namespace

std::string svgDocument(const VectorFigure& fig) {
  std::string out;
  out.reserve(fig.items.size() * 64 + 4096);
  const std::string W = std::to_string(fig.width), H = std::to_string(fig.height);
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += std::string("<svg xmlns=\"http://www.w3.org/2000/svg\"") +
         (fig.pictures.empty() ? "" : " xmlns:xlink=\"http://www.w3.org/1999/xlink\"") +
         " version=\"1.1\" width=\"" + W +
         "\" height=\"" + H + "\" viewBox=\"0 0 " + W + " " + H +
         "\" shape-rendering=\"crispEdges\">\n";
  // One hatch pattern per period, in page phase as the PNG's.
  std::map<int, bool> periods;
  for (const VectorItem& it : fig.items)
    if (it.kind == VectorItem::Hatch) periods[it.period] = true;
  if (!periods.empty()) {
    out += "<defs>\n";
    for (const auto& [p, unused] : periods) {
      (void)unused;
      const std::string P = std::to_string(p);
      out += "<pattern id=\"hatch" + P + "\" patternUnits=\"userSpaceOnUse\" x=\"0\" y=\"0\" width=\"" +
             P + "\" height=\"" + P + "\">";
      out += "<rect width=\"" + P + "\" height=\"" + P + "\" fill=\"" + hex(kMaskedColor) + "\"/>";
      out += "<path fill=\"" + hex(kMaskedHatchColor) + "\" d=\"";
      for (int k = 0; k < 2; ++k) {
        const double a = k * p + 0.5, b = a + hatchInk(p);
        const auto q = stripe(a, b, p);
        out += "M" + num(q[0].first) + " " + num(q[0].second);
        for (std::size_t i = 1; i < q.size(); ++i)
          out += "L" + num(q[i].first) + " " + num(q[i].second);
        out += "Z";
      }
      out += "\"/></pattern>\n";
    }
    out += "</defs>\n";
  }
  out += "<rect width=\"" + W + "\" height=\"" + H + "\" fill=\"#ffffff\"/>\n";
  for (const VectorItem& it : fig.items) {
    if (it.kind == VectorItem::Rect || it.kind == VectorItem::Hatch) {
      out += "<rect x=\"" + std::to_string(it.x) + "\" y=\"" + std::to_string(it.y) +
             "\" width=\"" + std::to_string(it.w) + "\" height=\"" + std::to_string(it.h) +
             "\" fill=\"" +
             (it.kind == VectorItem::Rect ? hex(it.color)
                                          : "url(#hatch" + std::to_string(it.period) + ")") +
             "\"/>\n";
      continue;
    }
    if (it.kind == VectorItem::Picture) {
      // Each pixel a square, no smoothing, as the PNG draws it.
      const std::string data =
          "data:image/png;base64," + pngBase64(fig.pictures[std::size_t(it.text)]);
      out += "<image x=\"" + std::to_string(it.x) + "\" y=\"" + std::to_string(it.y) +
             "\" width=\"" + std::to_string(it.w) + "\" height=\"" + std::to_string(it.h) +
             "\" preserveAspectRatio=\"none\" image-rendering=\"optimizeSpeed\" "
             "style=\"image-rendering:pixelated\" href=\"" +
             data + "\" xlink:href=\"" + data + "\"/>\n";
      continue;
    }
    const VectorText& t = fig.texts[std::size_t(it.text)];
    // Glyph x positions run along the baseline from the pen's start; turned text is drawn in
    // a frame rotated about that start.
    const double ox = t.up ? 0.0 : t.x, oy = t.up ? 0.0 : t.y;
    out += "<text xml:space=\"preserve\" fill=\"" + hex(t.color) + "\"";
    if (t.up) out += " transform=\"translate(" + num(t.x) + " " + num(t.y) + ") rotate(-90)\"";
    const std::vector<Run> runs = runsOf(t);
    const auto runAttrs = [&](const Run& r) {
      const PlacedGlyph& g0 = t.glyphs[r.begin];
      const std::string family = familyOf(fig, g0.face);
      std::string a = " font-family=\"" +
                      (family.empty() ? std::string("sans-serif")
                                      : "'" + xmlAttr(family) + "', sans-serif") +
                      "\" font-size=\"" + num(g0.em) + "\" y=\"" + num(oy) + "\" x=\"";
      for (std::size_t i = r.begin; i < r.end; ++i)
        a += (i > r.begin ? " " : "") + num(ox + t.glyphs[i].x);
      return a + "\"";
    };
    const auto runText = [&](const Run& r) {
      std::string s;
      for (std::size_t i = r.begin; i < r.end; ++i) appendXmlChar(s, t.glyphs[i].cp);
      return s;
    };
    if (runs.size() == 1) {
      out += runAttrs(runs[0]) + ">" + runText(runs[0]) + "</text>\n";
    } else {
      out += ">";
      for (const Run& r : runs) out += "<tspan" + runAttrs(r) + ">" + runText(r) + "</tspan>";
      out += "</text>\n";
    }
  }
  out += "</svg>\n";
  return out;
}

namespace {

FT_Library freetype() {
  static FT_Library lib = [] {
    FT_Library l = nullptr;
    if (FT_Init_FreeType(&l) != 0) l = nullptr;
    return l;
  }();
  return lib;
}

const cairo_user_data_key_t kFaceKey{};

// A cairo face over the font file the PNG drew from; null when FreeType cannot open it.
cairo_font_face_t* cairoFace(const FontFile& f) {
  FT_Library lib = freetype();
  FT_Face face = nullptr;
  if (!lib || f.empty() || FT_New_Face(lib, f.path.c_str(), f.index, &face) != 0) return nullptr;
  cairo_font_face_t* cf = cairo_ft_font_face_create_for_ft_face(face, 0);
  if (cairo_font_face_set_user_data(cf, &kFaceKey, face, [](void* p) {
        FT_Done_Face(static_cast<FT_Face>(p));
      }) != CAIRO_STATUS_SUCCESS) {
    cairo_font_face_destroy(cf);
    FT_Done_Face(face);
    return nullptr;
  }
  return cf;
}

cairo_status_t appendBytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

void setColor(cairo_t* cr, RGBA8 c) {
  cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0);
}

}  // namespace

std::string pdfDocument(const VectorFigure& fig) {
  std::string out;
  cairo_surface_t* surface =
      cairo_pdf_surface_create_for_stream(appendBytes, &out, fig.width, fig.height);
  // The same bytes on every run: a fixed date instead of the clock's.
  cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATOR, "attnviz");
  cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATE_DATE, "2000-01-01T00:00:00Z");
  cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_MOD_DATE, "2000-01-01T00:00:00Z");
  cairo_t* cr = cairo_create(surface);
  cairo_font_options_t* fo = cairo_font_options_create();
  cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
  cairo_set_font_options(cr, fo);
  cairo_font_options_destroy(fo);
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);  // cells meet without seams, as in the PNG

  setColor(cr, RGBA8{255, 255, 255, 255});
  cairo_paint(cr);

  std::map<int, cairo_pattern_t*> hatches;
  const auto hatch = [&](int p) {
    auto it = hatches.find(p);
    if (it != hatches.end()) return it->second;
    const cairo_rectangle_t tileBox{0, 0, double(p), double(p)};
    cairo_surface_t* tile = cairo_recording_surface_create(CAIRO_CONTENT_COLOR, &tileBox);
    cairo_t* t = cairo_create(tile);
    cairo_set_antialias(t, CAIRO_ANTIALIAS_NONE);
    setColor(t, kMaskedColor);
    cairo_paint(t);
    setColor(t, kMaskedHatchColor);
    for (int k = 0; k < 2; ++k) {
      const double a = k * p + 0.5, b = a + hatchInk(p);
      const auto q = stripe(a, b, p);
      cairo_move_to(t, q[0].first, q[0].second);
      for (std::size_t i = 1; i < q.size(); ++i) cairo_line_to(t, q[i].first, q[i].second);
      cairo_close_path(t);
    }
    cairo_fill(t);
    cairo_destroy(t);
    cairo_pattern_t* pat = cairo_pattern_create_for_surface(tile);
    cairo_surface_destroy(tile);
    cairo_pattern_set_extend(pat, CAIRO_EXTEND_REPEAT);
    return hatches[p] = pat;
  };

  std::map<std::pair<std::string, int>, cairo_font_face_t*> faces;
  const auto faceFor = [&](const FontFile& f) -> cairo_font_face_t* {
    const auto key = std::make_pair(f.path, f.index);
    auto it = faces.find(key);
    if (it != faces.end()) return it->second;
    return faces[key] = cairoFace(f);
  };

  for (const VectorItem& it : fig.items) {
    if (it.kind == VectorItem::Rect) {
      setColor(cr, it.color);
      cairo_rectangle(cr, double(it.x), double(it.y), double(it.w), double(it.h));
      cairo_fill(cr);
      continue;
    }
    if (it.kind == VectorItem::Hatch) {
      cairo_set_source(cr, hatch(it.period));
      cairo_rectangle(cr, double(it.x), double(it.y), double(it.w), double(it.h));
      cairo_fill(cr);
      continue;
    }
    if (it.kind == VectorItem::Picture) {
      // The picture as an image, each pixel a square (no interpolation), as the PNG draws it.
      const VectorPicture& pic = fig.pictures[std::size_t(it.text)];
      cairo_surface_t* img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, pic.width, pic.height);
      cairo_surface_flush(img);
      unsigned char* data = cairo_image_surface_get_data(img);
      const int stride = cairo_image_surface_get_stride(img);
      for (int y = 0; y < pic.height; ++y)
        for (int x = 0; x < pic.width; ++x) {
          const std::uint8_t* p = pic.rgb.data() + (std::size_t(y) * pic.width + x) * 3;
          const std::uint32_t v = (std::uint32_t(p[0]) << 16) | (std::uint32_t(p[1]) << 8) | p[2];
          std::memcpy(data + std::size_t(y) * stride + std::size_t(x) * 4, &v, 4);
        }
      cairo_surface_mark_dirty(img);
      cairo_save(cr);
      cairo_translate(cr, double(it.x), double(it.y));
      cairo_scale(cr, double(it.w) / pic.width, double(it.h) / pic.height);
      cairo_set_source_surface(cr, img, 0, 0);
      cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
      cairo_rectangle(cr, 0, 0, pic.width, pic.height);
      cairo_fill(cr);
      cairo_restore(cr);
      cairo_surface_destroy(img);
      continue;
    }
    const VectorText& t = fig.texts[std::size_t(it.text)];
    cairo_save(cr);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);
    cairo_translate(cr, t.x, t.y);
    if (t.up) cairo_rotate(cr, -M_PI / 2);
    setColor(cr, t.color);
    for (const Run& r : runsOf(t)) {
      const PlacedGlyph& g0 = t.glyphs[r.begin];
      cairo_font_face_t* face = g0.face.empty() ? nullptr : faceFor(g0.face);
      if (face) {
        cairo_set_font_face(cr, face);
        cairo_set_font_size(cr, g0.em);
        // Glyph ids of the same file, at the PNG's pen positions, with the text they spell.
        std::vector<cairo_glyph_t> glyphs;
        std::vector<cairo_text_cluster_t> clusters;
        std::string utf8;
        for (std::size_t i = r.begin; i < r.end; ++i) {
          const PlacedGlyph& g = t.glyphs[i];
          glyphs.push_back({static_cast<unsigned long>(g.glyph), double(g.x), 0.0});
          const std::size_t before = utf8.size();
          appendUtf8(utf8, g.cp);
          clusters.push_back({int(utf8.size() - before), 1});
        }
        cairo_show_text_glyphs(cr, utf8.data(), int(utf8.size()), glyphs.data(),
                               int(glyphs.size()), clusters.data(), int(clusters.size()),
                               cairo_text_cluster_flags_t(0));
      } else {
        // The built-in font has no file: cairo's sans-serif, each character at its pen.
        cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                               CAIRO_FONT_WEIGHT_NORMAL);
        cairo_set_font_size(cr, g0.em);
        for (std::size_t i = r.begin; i < r.end; ++i) {
          std::string s;
          appendUtf8(s, t.glyphs[i].cp);
          cairo_move_to(cr, t.glyphs[i].x, 0);
          cairo_show_text(cr, s.c_str());
        }
      }
    }
    cairo_restore(cr);
  }
  cairo_destroy(cr);
  cairo_surface_finish(surface);
  const cairo_status_t st = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  for (auto& [p, pat] : hatches) cairo_pattern_destroy(pat);
  for (auto& [k, f] : faces)
    if (f) cairo_font_face_destroy(f);
  if (st != CAIRO_STATUS_SUCCESS)
    throw InputError(std::string("PDF: cairo failed: ") + cairo_status_to_string(st));
  return out;
}

namespace {
const VectorFigure& recorded(const std::string& path, const Image& img) {
  if (!img.vector || img.vector->width <= 0 || img.vector->height <= 0)
    throw InputError(path + ": the figure was not laid out for SVG or PDF");
  return *img.vector;
}
}  // namespace

void writeSvg(const std::string& path, const Image& img) {
  writeFileAtomic(path, svgDocument(recorded(path, img)));
}

void writePdf(const std::string& path, const Image& img) {
  const VectorFigure& fig = recorded(path, img);
  std::string bytes;
  try {
    bytes = pdfDocument(fig);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  writeFileAtomic(path, bytes);
}

FigureFormat figureFormatOfPath(const std::string& path) {
  const std::size_t dot = path.rfind('.'), slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return FigureFormat::Png;
  std::string ext = path.substr(dot);
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".svg" ? FigureFormat::Svg : ext == ".pdf" ? FigureFormat::Pdf : FigureFormat::Png;
}

void writeFigure(const std::string& path, const Image& img, FigureFormat format) {
  if (format == FigureFormat::Svg)
    writeSvg(path, img);
  else if (format == FigureFormat::Pdf)
    writePdf(path, img);
  else
    writePng(path, img);
}

}  // namespace attnviz
