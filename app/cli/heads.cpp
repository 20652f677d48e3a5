// attnviz heads: the head finder (docs/design/command-line.md, "Head finder").
#include "cli/cli.h"

#include <cstdio>

namespace attnviz::app {

int runHeads(int, char**) {
  std::fprintf(stderr, "attnviz heads: not available in this build\n");
  return 2;
}

}  // namespace attnviz::app
