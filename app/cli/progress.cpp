#include "cli/progress.h"

#include <algorithm>
#include <cstdio>

#include <unistd.h>

namespace attnviz::app {

ProgressBar::ProgressBar(std::string prefix)
    : prefix_(std::move(prefix)), tty_(::isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fputc('\n', stderr);
}

void ProgressBar::update(const std::string& what, double fraction) {
  if (!tty_) return;
  const int permille = int(std::clamp(fraction, 0.0, 1.0) * 1000.0);
  if (permille == lastPermille_ && what == lastWhat_) return;  // nothing new to draw
  lastPermille_ = permille, lastWhat_ = what;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::string bar(std::size_t(filled), '#');
  bar.append(std::size_t(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s: %s [%s] %5.1f%%", prefix_.c_str(), what.c_str(), bar.c_str(),
               permille / 10.0);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace attnviz::app
