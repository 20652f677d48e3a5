// libFuzzer target: attnviz::parseDumpSafetensors (the safetensors reader plus dump validation)
// on arbitrary bytes. Any input must either load as a valid dump or be refused with InputError.
#include "attnviz/formats/dump.h"
#include "fuzz_dump_check.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    attnviz::fuzz::checkDump(attnviz::parseDumpSafetensors(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors"));
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
