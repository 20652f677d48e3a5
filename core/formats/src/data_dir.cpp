#include "attnviz/formats/data_dir.h"

#include <filesystem>
#include <algorithm>
#include <system_error>

namespace attnviz {

namespace fs = std::filesystem;

namespace {

bool isDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

#if defined(ATTNVIZ_BUILD_DIR) && defined(ATTNVIZ_SOURCE_DATA_DIR)
// Whether `p` lies inside `dir` (both absolute, lexically normal).
bool inside(const fs::path& p, const fs::path& dir) {
  const auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return d == dir.end();
}
#endif

}  // namespace

std::string dataDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return "";
  const fs::path installed = exe.parent_path().parent_path() / "share" / "attnviz";
  if (isDir(installed)) return installed.string();
#if defined(ATTNVIZ_BUILD_DIR) && defined(ATTNVIZ_SOURCE_DATA_DIR)
  // Only a binary of this build tree falls back to the sources; an installed one never does.
  if (inside(exe.lexically_normal(), fs::path(ATTNVIZ_BUILD_DIR).lexically_normal()) &&
      isDir(ATTNVIZ_SOURCE_DATA_DIR))
    return ATTNVIZ_SOURCE_DATA_DIR;
#endif
  return "";
}

std::string dataSubdir(const std::string& sub) {
  const std::string root = dataDir();
  if (root.empty()) return "";
  const fs::path p = fs::path(root) / sub;
  return isDir(p) ? p.string() : "";
}

}  // namespace attnviz
