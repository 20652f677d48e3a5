// attnviz app: entry points of the subcommands. Each returns the process exit status:
// 0 success, 1 bad input, 2 bad usage.
#pragma once

namespace attnviz::app {

int runCompute(int argc, char** argv);  // attnviz compute ...
int runExport(int argc, char** argv);   // attnviz export ...
int runGui(int argc, char** argv);      // attnviz [SCENE.json] [GUI options]

}  // namespace attnviz::app
