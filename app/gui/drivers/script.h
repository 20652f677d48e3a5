// attnviz GUI: the scripted-input driver behind --frames, --click-cell, --hover-cell,
// --screenshot, --save-scene and --export (what the app tests and README screenshots use),
// and the interactive loop it falls back to.
#pragma once

#include "gui/app.h"

#include <string>
#include <vector>

namespace attnviz::gui {

struct CellArg {
  int i = -1, j = -1;
};
// "I,J" -> a cell; empty -> none. Throws UsageError naming `option`.
CellArg parseCell(const std::string& text, const char* option);

struct Script {
  int frames = -1;  // < 0: interactive, until the window closes
  CellArg hover, click;
  std::string screenshot, saveScene, exportPath;  // done after the last frame
  bool exportGrid = false;  // --export writes the model's layers x heads figure
  // --drop-while-busy: opened (as if dropped) on the first frame that finds the scripted
  // Retrieval or Loss-by-token job still running.
  std::vector<std::string> dropWhileBusy;
};

// Runs the frames: a scripted run owns the mouse (parked outside the window unless a cell is
// targeted, from frame 2 on, once the heatmap has been laid out), then saves the screenshot,
// the scene and the export of the last frame.
void runScript(App& app, const Script& script);

}  // namespace attnviz::gui
