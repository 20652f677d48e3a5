// attnviz app: option handling shared by the headless subcommands.
#pragma once

#include "attnviz/engine/blocks.h"
#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace attnviz::app {

// --mask (repeatable), --mask-expr, --softcap, --mask-file, --alibi, --temperature, --backend.
struct AttentionCliOptions {
  std::vector<std::string> masks;
  std::string maskExpr;
  std::string softcap;  // text, parsed by checkAttentionUsage (so "0" is refused, not "off")
  std::string maskFile;
  bool alibi = false;
  double temperature = 1.0;
  std::string backend = "cpu";
};

void addAttentionOptions(CLI::App& app, AttentionCliOptions& o);

// Refuses bad option values before any file is read: a --temperature that is not a finite
// number > 0, a malformed --mask, an expression that does not compile, a --softcap that is not a
// number > 0, an unknown --backend. Throws UsageError (exit 2).
void checkAttentionOptions(const AttentionCliOptions& o);

// --blocks B or BrxBc: the tile size of the block-sparsity counts (and the export overlay).
void addBlocksOption(CLI::App& app, std::string& blocks);

// The tiles of every head's mask.
std::vector<BlockSparsity> classifyEveryHead(const AttentionParams& p, int H, int Tq, int Tk,
                                             BlockSize size);

// One line per head "head h: blocks ...", or one line for every head when they agree.
void printBlockCounts(const std::vector<BlockSparsity>& perHead);

// Turns the options into engine parameters for [H, T_q, T_k] scores. Throws UsageError for a
// bad option value (checkAttentionOptions), InputError for a bad mask file or its shape.
AttentionParams buildParams(const AttentionCliOptions& o, int H, int Tq, int Tk);

// Q, K and V from --q, --k, --v .npy files, read at the same time on three threads (each
// file's read, copy and finiteness check is a pass over its bytes). `ndim` receives Q's number
// of dimensions. A bad file throws the InputError loadTensorNpy gives it; when several are bad,
// the first of Q, K, V is reported, as a sequential read would.
struct QkvTensors {
  Tensor3 q, k, v;
  int ndim = 3;
};
QkvTensors loadQkvNpy(const std::string& q, const std::string& k, const std::string& v);

// Parses argv; on a CLI11 error prints one line and returns 2, on --help prints help and
// returns 0; otherwise returns -1 (go on).
int parseArgs(CLI::App& app, int argc, char** argv);

// Runs the body of a subcommand: UsageError -> 2, InputError and other errors -> 1, each as
// one line "attnviz <command>: <message>" on stderr. Never lets an exception escape.
int guarded(const char* command, const std::function<int()>& body);

}  // namespace attnviz::app
