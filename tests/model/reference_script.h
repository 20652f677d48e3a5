// attnviz model tests: a float64 reference script's output (random-init folders and .npy
// references written at test time, never committed), generated once per test binary.
#pragma once

#include "model_test_util.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

namespace attnviz::testing {

// Runs `python3 tests/model/SCRIPT OUTDIR` (through ATTNVIZ_PYTHON, support/pyfork.py) and
// reads OUTDIR/cases.json (a list of cases, or {"cases": [...]}); ok is false when the script
// failed.
struct ReferenceScript {
  TempDir tmp;
  nlohmann::json cases;
  bool ok = false;
  explicit ReferenceScript(const std::string& script) {
    const std::string cmd = ATTNVIZ_PYTHON " " + shellQuote((modelDir() / script).string()) +
                            " " + shellQuote(tmp.path.string());
    if (std::system(cmd.c_str()) != 0) return;
    std::ifstream f(tmp.path / "cases.json");
    cases = nlohmann::json::parse(f);
    ok = true;
  }
  fs::path path(const std::string& name) const { return tmp.path / name; }
  // The case called `name` (null when none).
  const nlohmann::json& find(const std::string& name) const {
    const nlohmann::json& list = cases.is_array() ? cases : cases["cases"];
    for (const auto& c : list)
      if (c["name"] == name) return c;
    static const nlohmann::json none;
    return none;
  }
};

}  // namespace attnviz::testing
