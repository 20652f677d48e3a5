#include "attnviz/formats/fileio.h"

#include "attnviz/engine/tensor.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include <sys/mman.h>
#include <unistd.h>  // getpid, sysconf

namespace attnviz {

std::string readFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string bytes;
  // One read of the whole file when its size is known (a regular file); otherwise in pieces.
  if (std::fseek(f, 0, SEEK_END) == 0) {
    const long size = std::ftell(f);
    if (size > 0) bytes.reserve(std::size_t(size));
    std::rewind(f);
  }
  char buf[1 << 16];
  std::size_t n = 0;
  if (bytes.capacity() > 0) {
    bytes.resize(bytes.capacity());
    n = std::fread(bytes.data(), 1, bytes.size(), f);
    bytes.resize(n);
  }
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw InputError(path + ": read error");
  return bytes;
}

void writeFileAtomic(const std::string& path, const std::string& bytes) {
  writeFileAtomic(path, bytes, nullptr, 0);
}

void writeFileAtomic(const std::string& path, const std::string& head, const void* body,
                     std::size_t bodyBytes) {
  writeFileAtomic(path, head, std::vector<FilePart>{{body, bodyBytes}});
}

void writeFileAtomic(const std::string& path, const std::string& head,
                     const std::vector<FilePart>& parts) {
  std::random_device rd;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw InputError(path + ": cannot write (" + std::strerror(errno) + ")");
  bool wrote = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  for (const FilePart& part : parts)
    wrote = wrote && (part.bytes == 0 || std::fwrite(part.data, 1, part.bytes, f) == part.bytes);
  // Flushed to the kernel, not fsync'ed: the rename below is what keeps a reader (or a failed
  // write) from ever seeing a partial file; an fsync would only add durability across a power
  // cut, at a disk round trip on every export (about 1 ms for 3 MB here).
  const bool flushed = std::fflush(f) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !flushed || !closed) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError(path + ": write failed (" + why + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot replace (" + why + ")");
  }
}

void dropMappedPages(const void* p, std::size_t bytes) {
  static const std::uintptr_t page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (a + page - 1) & ~(page - 1), end = (a + bytes) & ~(page - 1);
  if (p && end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace attnviz
