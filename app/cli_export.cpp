#include "cli.h"

#include <cstdio>

namespace attnviz::app {

int runExport(int, char**) {
  std::fprintf(stderr, "attnviz export: not implemented yet\n");
  return 2;
}

}  // namespace attnviz::app
