// libFuzzer target: attnviz::parseNpy on arbitrary bytes. Any input must either parse into an
// array whose data matches its shape, or throw InputError; nothing else (no crash, no other
// exception, no sanitizer report).
#include "attnviz/formats/npy.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (bool allowBool : {false, true}) {
    try {
      const attnviz::NpyArray a = attnviz::parseNpy(bytes, "fuzz.npy", allowBool);
      std::size_t n = 1;
      for (long long d : a.shape) {
        if (d < 0) std::abort();
        n *= std::size_t(d);
      }
      if (n != a.data.size()) std::abort();  // shape and data disagree
      if (!allowBool && a.kind == attnviz::NpyKind::Bool) std::abort();
    } catch (const attnviz::InputError&) {
    }
  }
  return 0;
}
