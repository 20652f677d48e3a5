// attnviz tests: a shell command's exit code and its output (stdout and stderr together), for
// suites that run commands other than the bare binary (under xvfb-run, from the install root).
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace attnviz::testing {

// One argument for sh: in single quotes, a quote inside written '\''.
inline std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct ShellRun {
  int rc = -1;  // a death by signal reads as 128 + the signal number; -1: could not start
  std::string out;
};

inline ShellRun runShell(const std::string& cmd) {
  ShellRun r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) r.out += buf;
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

// A command under `xvfb-run -a`, run again (three tries in all) when xvfb-run itself failed:
// `-a` can race another test's server for the same display number.
inline ShellRun runUnderXvfb(const std::string& cmd) {
  ShellRun r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = runShell(cmd);
    if (r.out.find("xvfb-run: error") == std::string::npos) break;
  }
  return r;
}

// A folder of this process's own under the temp directory, removed when the object goes. ctest
// runs each test of a binary as its own process, several at once, so a fixture folder made "once
// per binary" must not be a fixed path: one process would rewrite it while another reads it.
struct ProcessTempDir {
  std::string path;
  explicit ProcessTempDir(const std::string& prefix) {
    std::string t = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(t.data())) path = t;
  }
  ~ProcessTempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  ProcessTempDir(const ProcessTempDir&) = delete;
  ProcessTempDir& operator=(const ProcessTempDir&) = delete;
};

}  // namespace attnviz::testing
