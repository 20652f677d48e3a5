// attnviz core: where the program's own data lives (preset scenes, shipped models, fonts).
#pragma once

#include <string>

namespace attnviz {

// The folder that holds scenes/, models/ (and fonts/ when shipped), the first that exists of:
//   1. <prefix>/share/attnviz, where <prefix> is the folder above the running executable's
//      (bin/attnviz), so an installed tree works wherever it is moved;
//   2. the source tree's assets/, when the executable lies inside the build tree it was built in.
// Empty when neither exists.
std::string dataDir();

// dataDir()/sub when that folder exists, else empty.
std::string dataSubdir(const std::string& sub);

}  // namespace attnviz
