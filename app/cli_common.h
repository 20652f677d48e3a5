// attnviz app: option handling shared by the headless subcommands.
#pragma once

#include "attnviz/mask.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace attnviz::app {

// --mask (repeatable), --mask-file, --alibi, --temperature, --backend.
struct AttentionCliOptions {
  std::vector<std::string> masks;
  std::string maskFile;
  bool alibi = false;
  double temperature = 1.0;
  std::string backend = "cpu";
};

void addAttentionOptions(CLI::App& app, AttentionCliOptions& o);

// Refuses bad option values before any file is read: a --temperature that is not a finite
// number > 0, a malformed --mask, an unknown --backend. Throws UsageError (exit 2).
void checkAttentionOptions(const AttentionCliOptions& o);

// Turns the options into engine parameters for [H, T_q, T_k] scores. Throws UsageError for a
// bad option value (checkAttentionOptions), InputError for a bad mask file or its shape.
AttentionParams buildParams(const AttentionCliOptions& o, int H, int Tq, int Tk);

// Parses argv; on a CLI11 error prints one line and returns 2, on --help prints help and
// returns 0; otherwise returns -1 (go on).
int parseArgs(CLI::App& app, int argc, char** argv);

// Runs the body of a subcommand: UsageError -> 2, InputError and other errors -> 1, each as
// one line "attnviz <command>: <message>" on stderr. Never lets an exception escape.
int guarded(const char* command, const std::function<int()>& body);

}  // namespace attnviz::app
