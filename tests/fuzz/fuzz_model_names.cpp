// libFuzzer target: models by name on arbitrary bytes. The first byte chooses: even, the bytes are
// an Ollama manifest (manifests/registry.ollama.ai/library/m/latest in a store of this process,
// $OLLAMA_MODELS) resolved as "ollama:m"; odd, they are the name typed (resolveModelName and
// looksLikeModelName against empty stores). Either a path comes back or InputError is thrown.
#include "attnviz/model/model.h"
#include "attnviz/model/model_names.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {
std::string g_manifest;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string t = (fs::temp_directory_path() / "attnviz_fuzz_names_XXXXXX").string();
  if (!::mkdtemp(t.data())) std::abort();
  const fs::path store = fs::path(t) / "ollama";
  fs::create_directories(store / "manifests" / "registry.ollama.ai" / "library" / "m");
  fs::create_directories(store / "blobs");
  // One blob the manifests may name (sha256- and 64 hex digits).
  if (FILE* f = std::fopen((store / "blobs" / ("sha256-" + std::string(64, 'a'))).c_str(), "wb"))
    std::fclose(f);
  fs::create_directories(fs::path(t) / "hub");
  ::setenv("OLLAMA_MODELS", store.c_str(), 1);
  ::setenv("HF_HUB_CACHE", (fs::path(t) / "hub").c_str(), 1);
  g_manifest = (store / "manifests" / "registry.ollama.ai" / "library" / "m" / "latest").string();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      if (FILE* f = std::fopen(g_manifest.c_str(), "wb")) {
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
      }
      const std::string path = attnviz::resolveModelName("ollama:m");
      if (path.empty()) std::abort();
    } else {
      (void)attnviz::looksLikeModelName(text);
      (void)attnviz::resolveModelName(text);
    }
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
