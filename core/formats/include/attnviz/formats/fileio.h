// attnviz core: whole-file reads and atomic writes.
#pragma once

#include <cstddef>
#include <string>

namespace attnviz {

// Reads a whole file; throws InputError "<path>: cannot open (<reason>)".
std::string readFile(const std::string& path);

// Writes `bytes` to a temp file beside `path`, flushes it to the kernel (no fsync), then renames
// it into place, so an existing file is only ever replaced by a complete new one. Throws InputError naming the path.
void writeFileAtomic(const std::string& path, const std::string& bytes);
// The same for `head` followed by `bodyBytes` bytes at `body` (no copy of the body is made).
void writeFileAtomic(const std::string& path, const std::string& head, const void* body,
                     std::size_t bodyBytes);

}  // namespace attnviz
