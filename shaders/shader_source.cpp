#include "attnviz/shaders/shader_source.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace attnviz::embedded {
struct File {
  const char* name;
  const unsigned char* data;
  std::size_t size;
};
extern const File kFiles[];
extern const std::size_t kFileCount;
}  // namespace attnviz::embedded

namespace attnviz {

std::string shaderSource(const std::string& name) {
  if (const char* dir = std::getenv("ATTNVIZ_SHADER_DIR"); dir && *dir) {
    std::ifstream in(std::string(dir) + "/" + name, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      return ss.str();
    }
  }
  for (std::size_t i = 0; i < embedded::kFileCount; ++i) {
    if (name == embedded::kFiles[i].name) {
      return std::string(reinterpret_cast<const char*>(embedded::kFiles[i].data),
                         embedded::kFiles[i].size);
    }
  }
  throw std::runtime_error("shader '" + name + "' is neither embedded nor in ATTNVIZ_SHADER_DIR");
}

std::vector<std::string> embeddedShaderNames() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < embedded::kFileCount; ++i)
    names.emplace_back(embedded::kFiles[i].name);
  return names;
}

}  // namespace attnviz
