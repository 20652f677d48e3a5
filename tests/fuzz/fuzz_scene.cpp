// libFuzzer target: attnviz::sceneFromJson on arbitrary text. Any input must either give a scene
// that survives a save/load round trip (and, when small and file-free, builds its synthetic
// inputs and runs through the CPU engine), or throw InputError; nothing else.
#include "attnviz/engine/engine.h"
#include "attnviz/formats/scene.h"
#include "attnviz/session/scene_inputs.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const attnviz::Scene s = attnviz::sceneFromJson(text, "fuzz.json");
    const attnviz::Scene t = attnviz::sceneFromJson(attnviz::sceneToJson(s), "roundtrip.json");
    if (t.heads != s.heads || t.mode != s.mode || t.queryText != s.queryText) std::abort();
    // Keep each run small so the fuzzer explores instead of computing big attentions.
    const bool small = attnviz::tokenize(s.queryText).size() <= 48 &&
                       attnviz::tokenize(s.keyText).size() <= 48 && s.dModel <= 256;
    if (small && s.qPath.empty() && s.kPath.empty() && s.vPath.empty()) {
      const attnviz::SceneInputs in = attnviz::buildSceneInputs(s);
      auto engine = attnviz::makeCpuEngine();
      try {
        engine->run(in.q, in.k, in.v, attnviz::effectiveParams(s));
      } catch (const attnviz::UsageError&) {
        // A mask that does not fit these tokens (mask.docs of another length): refused, as
        // validateParams says, not a loader failure.
      }
    }
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
