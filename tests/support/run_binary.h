// attnviz tests: running the real `attnviz` binary (ATTNVIZ_BINARY) and reading what it wrote.
// Shared by the core, export and GPU suites.
#pragma once

#include "run_shell.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace attnviz::testing {

struct CliRun {
  int exitCode = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `<envPrefix> attnviz <args>` through the shell, with stdout and stderr captured into
// files of `dir` (removed afterwards). A death by signal reads as 128 + the signal number.
inline CliRun runBinary(const std::vector<std::string>& args, const std::filesystem::path& dir,
                        const std::string& envPrefix = "") {
  std::string cmd = envPrefix.empty() ? "" : envPrefix + " ";
  cmd += shellQuote(ATTNVIZ_BINARY);
  for (const std::string& a : args) cmd += " " + shellQuote(a);
  const std::string o = (dir / "cli_stdout.txt").string(), e = (dir / "cli_stderr.txt").string();
  cmd += " >" + shellQuote(o) + " 2>" + shellQuote(e);
  const int status = std::system(cmd.c_str());
  CliRun r;
  if (WIFEXITED(status)) {
    r.exitCode = WEXITSTATUS(status);
  } else {
    r.exitCode = 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  }
  r.out = slurp(o);
  r.err = slurp(e);
  std::filesystem::remove(o);
  std::filesystem::remove(e);
  return r;
}

// Lines of text, counting a last line without its newline.
inline int lineCount(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  if (!s.empty() && s.back() != '\n') ++n;
  return n;
}

}  // namespace attnviz::testing
