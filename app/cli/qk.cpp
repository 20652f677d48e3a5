// attnviz qk and attnviz compose: why a head attends where it does (docs/design/command-line.md,
// "Why here").
#include "cli/cli.h"

#include <cstdio>

namespace attnviz::app {

int runQk(int, char**) {
  std::fprintf(stderr, "attnviz qk: not available in this build\n");
  return 2;
}

int runCompose(int, char**) {
  std::fprintf(stderr, "attnviz compose: not available in this build\n");
  return 2;
}

}  // namespace attnviz::app
