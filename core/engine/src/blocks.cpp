#include "attnviz/engine/blocks.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace attnviz {

namespace {

int parseSide(const std::string& s, const std::string& option, const std::string& whole) {
  std::size_t used = 0;
  long v = 0;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || v < 1 || v > (1 << 24)) {
    throw UsageError(option + " " + whole +
                     ": expected a block size B (B x B) or BrxBc, whole numbers >= 1");
  }
  return static_cast<int>(v);
}

}  // namespace

BlockSize parseBlockSize(const std::string& text, const std::string& option) {
  const std::size_t x = text.find('x');
  if (x == std::string::npos) {
    const int b = parseSide(text, option, text);
    return {b, b};
  }
  return {parseSide(text.substr(0, x), option, text), parseSide(text.substr(x + 1), option, text)};
}

double BlockSparsity::workFraction() const {
  const long long t = total();
  return t == 0 ? 0.0 : double(full + partial) / double(t);
}

BlockSparsity classifyBlocks(const MaskSpec& m, int H, int h, int Tq, int Tk, BlockSize size) {
  BlockSparsity b;
  b.size = size;
  if (Tq <= 0 || Tk <= 0 || size.rows < 1 || size.cols < 1) return b;
  b.tileRows = (Tq + size.rows - 1) / size.rows;
  b.tileCols = (Tk + size.cols - 1) / size.cols;
  const ExprGrid* grid = exprGrid(m, H, Tq, Tk);
  // Allowed cells per tile, one query row at a time.
  std::vector<long long> allowed(std::size_t(b.tileRows) * b.tileCols, 0);
  std::vector<std::uint8_t> row(static_cast<std::size_t>(Tk));
  for (int i = 0; i < Tq; ++i) {
    allowedRow(m, grid, h, i, Tq, Tk, row.data());
    long long* counts = allowed.data() + std::size_t(i / size.rows) * b.tileCols;
    for (int c = 0; c < b.tileCols; ++c) {
      const int j0 = c * size.cols, j1 = std::min(Tk, j0 + size.cols);
      long long n = 0;
      for (int j = j0; j < j1; ++j) n += row[std::size_t(j)];
      counts[c] += n;
    }
  }
  b.kinds.resize(allowed.size());
  for (int r = 0; r < b.tileRows; ++r) {
    const long long rows = std::min(Tq, (r + 1) * size.rows) - r * size.rows;
    for (int c = 0; c < b.tileCols; ++c) {
      const long long cols = std::min(Tk, (c + 1) * size.cols) - c * size.cols;
      const long long n = allowed[std::size_t(r) * b.tileCols + c];
      BlockKind k = BlockKind::Partial;
      if (n == 0) {
        k = BlockKind::Empty;
        ++b.empty;
      } else if (n == rows * cols) {
        k = BlockKind::Full;
        ++b.full;
      } else {
        ++b.partial;
      }
      b.kinds[std::size_t(r) * b.tileCols + c] = k;
    }
  }
  return b;
}

std::string describeBlocks(const BlockSparsity& b) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "blocks %dx%d: %lld %s, %lld empty, %lld partial, %lld full; a tiled kernel "
                "does %.1f%% of the dense work",
                b.size.rows, b.size.cols, b.total(), b.total() == 1 ? "tile" : "tiles", b.empty,
                b.partial, b.full, 100.0 * b.workFraction());
  return buf;
}

}  // namespace attnviz
