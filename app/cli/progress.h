// attnviz app: a progress bar for long headless work, on stderr so stdout stays clean.
#pragma once

#include <string>

namespace attnviz::app {

// Draws "attnviz export: head 0 [#######.......]  45%" on one stderr line, redrawn in place,
// only when stderr is a terminal (logs and pipes get nothing). The line is ended when the bar
// is destroyed.
class ProgressBar {
 public:
  explicit ProgressBar(std::string prefix);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(const std::string& what, double fraction);

 private:
  std::string prefix_;
  bool tty_ = false;
  bool drawn_ = false;
  int lastPermille_ = -1;
  std::string lastWhat_;
};

}  // namespace attnviz::app
