// attnviz core: whole-file reads and atomic writes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attnviz {

// Reads a whole file; throws InputError "<path>: cannot open (<reason>)".
std::string readFile(const std::string& path);

// Writes `bytes` to a temp file beside `path`, flushes it to the kernel (no fsync), then renames
// it into place, so an existing file is only ever replaced by a complete new one. Throws InputError naming the path.
void writeFileAtomic(const std::string& path, const std::string& bytes);
// The same for `head` followed by `bodyBytes` bytes at `body` (no copy of the body is made).
void writeFileAtomic(const std::string& path, const std::string& head, const void* body,
                     std::size_t bodyBytes);
// The same for `head` followed by each part in order (no copy of any part is made).
struct FilePart {
  const void* data;
  std::size_t bytes;
};
void writeFileAtomic(const std::string& path, const std::string& head,
                     const std::vector<FilePart>& parts);

// Drops from memory the whole pages of [p, p + bytes), which must lie in a read-only file
// mapping (PROT_READ, MAP_PRIVATE): they leave the resident set and are read again from the file
// if touched. For bytes converted once (BF16 to float32, a quantized tensor dequantized at
// load), so the mapping does not stay resident beside its copy.
void dropMappedPages(const void* p, std::size_t bytes);

}  // namespace attnviz
