// attnviz GUI: saving what the window drew.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnviz::gui {

// Reads the current back buffer (width x height), flips it to row 0 at the top, forces alpha to
// 255 and writes a PNG atomically. Throws InputError naming the path.
void saveScreenshot(const std::string& path, int width, int height);

}  // namespace attnviz::gui
