// attnviz core: strict integer parsing (text_parse.h).
#include "attnviz/engine/text_parse.h"

#include <exception>
#include <string>

namespace attnviz {

std::optional<int> parseIndex(const std::string& text, long maxValue) {
  std::size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (text.empty() || used != text.size() || v < 0 || v > maxValue) return std::nullopt;
  return static_cast<int>(v);
}

bool parseIntList(const std::string& text, long maxValue, std::vector<int>& out,
                  std::string& badItem) {
  out.clear();
  std::size_t pos = 0;
  while (true) {
    std::size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    const auto first = item.find_first_not_of(' ');
    const auto last = item.find_last_not_of(' ');
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    const std::optional<int> v = parseIndex(item, maxValue);
    if (!v) {
      badItem = item;
      return false;
    }
    out.push_back(*v);
    if (end == text.size()) return true;
    pos = end + 1;
  }
}

}  // namespace attnviz
