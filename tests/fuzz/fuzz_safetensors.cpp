// libFuzzer target: attnviz::SafetensorsFile on arbitrary bytes. Any input must either open, with
// every tensor's span inside the data and its shape matching its bytes, and convert (or refuse to
// convert) through InputError; or be refused with InputError. Nothing else.
#include "attnviz/formats/safetensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const attnviz::SafetensorsFile f = attnviz::SafetensorsFile::fromBytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
    for (const attnviz::StTensorInfo& t : f.tensors()) {
      if (f.bytes(t).size() != t.byteSize()) std::abort();
      if (t.elementCount() * attnviz::stDtypeSize(t.dtype) != t.byteSize()) std::abort();
      if (f.find(t.name) != &t) std::abort();
      try {
        if (t.elementCount() <= (1u << 20)) {
          const attnviz::FloatBuffer v = f.toFloat32(t);
          if (v.size() != t.elementCount()) std::abort();
        }
      } catch (const attnviz::InputError&) {
      }
    }
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
