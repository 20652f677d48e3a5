// attnviz core tests: running `attnviz compute` and friends through the real binary.
#pragma once

#include "check.h"
#include "run_binary.h"

#include <filesystem>
#include <string>
#include <vector>

namespace attnviz::testing {

inline CliRun runAttnviz(const std::vector<std::string>& args, const std::filesystem::path& dir) {
  return runBinary(args, dir);
}

}  // namespace attnviz::testing
