// attnviz GUI: --soak SECONDS [--seed S], a long session of random user actions through the
// panels' own code paths, watching the process for leaks (gui/soak.cpp).
#pragma once

#include "gui/app.h"

#include <cstdint>

namespace attnviz::gui {

// Runs the soak for `seconds` (finishing the episode under way) and prints its summary on
// stdout. Returns 0 when the run stayed flat: no RSS slope above 1 MB/min after the warm-up, and
// no growth in open file descriptors, threads or live GL objects between the settled
// checkpoints; 1 otherwise. The actions are a function of the seed alone.
int runSoak(App& app, double seconds, std::uint64_t seed);

}  // namespace attnviz::gui
