// attnviz core: the integers of the command line and of scenes (indices such as --head and
// --layer, comma-separated id lists such as --ids and doc:0,0,1), parsed strictly: a value that
// is not exactly an integer in range is refused, never read as a prefix or clamped.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attnviz {

// A decimal integer in [0, maxValue] and nothing after it (std::stol's syntax); nullopt for
// anything else. The command line's indices (--head, --layer) and parseIntList's items.
std::optional<int> parseIndex(const std::string& text, long maxValue);

// Parses comma-separated integers in [0, maxValue], each with optional spaces around it, into
// `out`. On the first item that is not one, returns false with that item in `badItem` (`out` then
// holds the items before it). Shared by doc:<ids> and `attnviz model --ids`.
bool parseIntList(const std::string& text, long maxValue, std::vector<int>& out,
                  std::string& badItem);

}  // namespace attnviz
