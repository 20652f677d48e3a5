// attnviz tests: a shell command's exit code and its output (stdout and stderr together), for
// suites that run commands other than the bare binary (under xvfb-run, from the install root).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace attnviz::testing {

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

}  // namespace attnviz::testing
