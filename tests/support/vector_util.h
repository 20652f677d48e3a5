// Shared by the export tests: an SVG read back by python3's XML parser, a PDF rendered by
// poppler's pdftoppm, and the mean difference of two images of one size.
#pragma once

#include "export_util.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace attnviz::exporttest {

// Runs a shell command, capturing stdout; the exit code goes to `rc`.
inline std::string shell(const std::string& cmd, int& rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    rc = -1;
    return out;
  }
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// What python3's XML parser finds in an SVG: one line per <text> element ("T\t" and its whole
// text, tspans included), then "R\t<rects>\tH\t<hatched rects>\tW\t<width>\tX\t<height>".
struct SvgSummary {
  bool parsed = false;
  std::vector<std::string> texts;
  long rects = 0, hatched = 0;
  int width = 0, height = 0;
  std::string error;
};

inline SvgSummary parseSvg(const std::string& path, const TempDir& dir) {
  const std::string script = dir / "svg_summary.py";
  {
    std::ofstream f(script);
    f << "import sys, xml.etree.ElementTree as ET\n"
         "ns = '{http://www.w3.org/2000/svg}'\n"
         "root = ET.parse(sys.argv[1]).getroot()\n"
         "assert root.tag == ns + 'svg', root.tag\n"
         "for t in root.iter(ns + 'text'):\n"
         "    s = ''.join(t.itertext()).replace('\\n', ' ')\n"
         "    sys.stdout.buffer.write(('T\\t' + s + '\\n').encode('utf-8'))\n"
         "rects = [r for r in root.iter(ns + 'rect')]\n"
         "hatched = [r for r in rects if r.get('fill', '').startswith('url(#hatch')]\n"
         "print('R\\t%d\\tH\\t%d\\tW\\t%s\\tX\\t%s' % (len(rects), len(hatched), root.get('width'),"
         " root.get('height')))\n";
  }
  int rc = 0;
  const std::string out = shell(ATTNVIZ_PYTHON " " + testing::shellQuote(script) + " " +
                                    testing::shellQuote(path) + " 2>&1",
                                rc);
  SvgSummary s;
  if (rc != 0) {
    s.error = out;
    return s;
  }
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("T\t", 0) == 0) {
      s.texts.push_back(line.substr(2));
    } else if (line.rfind("R\t", 0) == 0) {
      std::istringstream f(line);
      std::string tag;
      f >> tag >> s.rects >> tag >> s.hatched >> tag >> s.width >> tag >> s.height;
      s.parsed = true;
    }
  }
  return s;
}

inline bool hasText(const SvgSummary& s, const std::string& want) {
  return std::find(s.texts.begin(), s.texts.end(), want) != s.texts.end();
}
inline bool anyTextContains(const SvgSummary& s, const std::string& part) {
  return std::any_of(s.texts.begin(), s.texts.end(),
                     [&](const std::string& t) { return t.find(part) != std::string::npos; });
}

// Renders a PDF with poppler at 72 dpi and returns the decoded page.
inline Image popplerPage(const std::string& pdf, const TempDir& dir) {
  int rc = 0;
  const std::string out = shell("pdftoppm -r 72 -png -singlefile " + testing::shellQuote(pdf) +
                                    " " + testing::shellQuote(dir / "page") + " 2>&1",
                                rc);
  EXPECT_EQ(rc, 0) << "pdftoppm (poppler-utils) failed: " << out;
  return decodePng(dir / "page.png");
}

// The mean over pixels of the largest channel difference (0..255) of two images of one size.
inline double meanChannelDifference(const Image& a, const Image& b) {
  double sum = 0;
  for (int y = 0; y < a.height; ++y)
    for (int x = 0; x < a.width; ++x) {
      const RGBA8 p = a.pixel(x, y), q = b.pixel(x, y);
      sum += std::max({std::abs(p.r - q.r), std::abs(p.g - q.g), std::abs(p.b - q.b)});
    }
  return sum / (double(a.width) * a.height);
}

}  // namespace attnviz::exporttest
