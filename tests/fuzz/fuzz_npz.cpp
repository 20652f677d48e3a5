// libFuzzer target: attnviz::parseDumpNpz (libzip, .npy entries, dump validation) on arbitrary
// bytes. Any input must either load as a valid dump (every layer's rows sum to 1 or are zero and
// its tokens match its shape) or be refused with InputError; nothing else.
#include "attnviz/formats/dump.h"
#include "fuzz_dump_check.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    attnviz::fuzz::checkDump(
        attnviz::parseDumpNpz(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npz"));
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
