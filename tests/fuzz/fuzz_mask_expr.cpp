// libFuzzer target: attnviz::MaskExpr on arbitrary text (the --mask-expr option and the GUI's
// mask field). Any input must either compile and evaluate over a small grid (every cell 0 or 1),
// or throw UsageError; nothing else.
#include "attnviz/engine/mask_expr.h"
#include "attnviz/engine/tensor.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const attnviz::MaskExpr e(text);
    std::vector<std::uint8_t> cells(5 * 7, 7);
    e.evaluate(1, 5, 7, {0, 0, 1, 1, 1, 2, 2}, cells.data());
    for (std::uint8_t c : cells)
      if (c > 1) std::abort();
  } catch (const attnviz::UsageError&) {
  }
  return 0;
}
