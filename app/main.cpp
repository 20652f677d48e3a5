// attnviz: the GUI by default; `compute` and `export` run headless.
#include "attnviz/engine/isa.h"
#include "attnviz/engine/tensor.h"
#include "cli/cli.h"

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  attnviz::prepareHeap();
  if (argc == 2 && (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0)) {
    // The version, and the instruction-set level of the CPU kernels (attnviz/engine/isa.h).
    std::printf("attnviz %s\nCPU kernels: %s\n", ATTNVIZ_VERSION_TEXT,
                attnviz::isaDescription().c_str());
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "compute") == 0)
    return attnviz::app::runCompute(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "export") == 0)
    return attnviz::app::runExport(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "model") == 0)
    return attnviz::app::runModel(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "generate") == 0)
    return attnviz::app::runGenerate(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "score") == 0)
    return attnviz::app::runScore(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "retrieval") == 0)
    return attnviz::app::runRetrieval(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "tokenize") == 0)
    return attnviz::app::runTokenize(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "fill") == 0)
    return attnviz::app::runFill(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "attribute") == 0)
    return attnviz::app::runAttribute(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "heads") == 0)
    return attnviz::app::runHeads(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "qk") == 0)
    return attnviz::app::runQk(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "compose") == 0)
    return attnviz::app::runCompose(argc - 1, argv + 1);
#ifdef ATTNVIZ_HAVE_GUI
  return attnviz::app::runGui(argc, argv);
#else
  std::fprintf(stderr,
               "attnviz: this build has no GUI; use `attnviz compute` or `attnviz export`\n");
  return 2;
#endif
}
