// attnviz tests: a fresh folder of this process's own under the temp directory, removed with
// everything in it when the object goes. mkdtemp names it, so test processes that ctest runs at
// the same time never share one.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace attnviz::testing {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "attnviz_test_XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed under the temp directory");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // A path inside the folder, as a string (what the command lines take).
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace attnviz::testing
