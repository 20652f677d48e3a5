// attnviz core: block sparsity of a mask, as a tiled (FlashAttention-style) kernel sees it.
//
// The [T_q, T_k] mask is cut into tiles of B_r query rows by B_c keys (the last row and column
// of tiles may be smaller). A tile is
//   empty    when no cell in it may attend: a kernel skips it (FlexAttention's BlockMask),
//   full     when every cell may attend: computed with no mask,
//   partial  otherwise: computed, with the mask applied per cell.
// A tiled kernel computes the full and partial tiles, so the work it does relative to a dense
// kernel is (full + partial) / all tiles (every tile costs one tile of work, edge tiles included).
#pragma once

#include "attnviz/engine/mask.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

struct BlockSize {
  int rows = 128;  // B_r, query rows per tile
  int cols = 128;  // B_c, keys per tile
};

// "128" (square) or "64x128" (B_r x B_c), each >= 1. Throws UsageError naming `option`.
BlockSize parseBlockSize(const std::string& text, const std::string& option = "--blocks");

enum class BlockKind : std::uint8_t { Empty = 0, Partial = 1, Full = 2 };

struct BlockSparsity {
  BlockSize size;
  int tileRows = 0, tileCols = 0;  // tiles down and across
  std::vector<BlockKind> kinds;    // [tileRows, tileCols], row-major
  long long empty = 0, partial = 0, full = 0;

  long long total() const { return empty + partial + full; }
  // (full + partial) / total; 0 for an empty grid.
  double workFraction() const;
  BlockKind at(int r, int c) const { return kinds[std::size_t(r) * tileCols + c]; }
};

// Classifies the tiles of head h's mask (params validated for [H, T_q, T_k] first).
BlockSparsity classifyBlocks(const MaskSpec& m, int H, int h, int Tq, int Tk, BlockSize size);

// "blocks 128x128: 6 tiles, 3 empty, 2 partial, 1 full; a tiled kernel does 50.0% of the dense
// work"
std::string describeBlocks(const BlockSparsity& b);

}  // namespace attnviz
