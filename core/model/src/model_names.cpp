// A model by name: the Hugging Face hub cache and Ollama's store (docs/models.md).
#include "attnviz/model/model_names.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace attnviz {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// One part of a name: letters, digits, '.', '_', '-', not starting with '.'.
bool namePart(const std::string& s) {
  if (s.empty() || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
  });
}

// "A/B" or "A" with each part a name part.
bool slashName(const std::string& s, bool allowBare) {
  const std::size_t slash = s.find('/');
  if (slash == std::string::npos) return allowBare && namePart(s);
  return namePart(s.substr(0, slash)) && namePart(s.substr(slash + 1));
}

struct OllamaRef {
  std::string ns, name, tag;
};

// "NAME[:TAG]" or "NAMESPACE/NAME[:TAG]" after "ollama:"; false when malformed.
bool parseOllama(const std::string& rest, OllamaRef& r) {
  std::string nameTag = rest;
  r.ns = "library";
  if (const std::size_t slash = rest.find('/'); slash != std::string::npos) {
    r.ns = rest.substr(0, slash);
    nameTag = rest.substr(slash + 1);
  }
  r.tag = "latest";
  r.name = nameTag;
  if (const std::size_t colon = nameTag.find(':'); colon != std::string::npos) {
    r.name = nameTag.substr(0, colon);
    r.tag = nameTag.substr(colon + 1);
  }
  return namePart(r.ns) && namePart(r.name) && namePart(r.tag);
}

// The GGUF blob a manifest names (its layer of media type application/vnd.ollama.image.model),
// or "" with `why` set.
std::string ollamaBlob(const fs::path& root, const fs::path& manifest, std::string& why) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(readFile(manifest.string()));
  } catch (const nlohmann::json::exception& e) {
    why = manifest.string() + ": not valid JSON (" + e.what() + ")";
    return "";
  }
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array()) {
    why = manifest.string() + ": an Ollama manifest without \"layers\"";
    return "";
  }
  for (const auto& layer : j["layers"]) {
    // A field of another type reads as absent (json::value would throw a type error).
    auto text = [&layer](const char* key) {
      const auto it = layer.find(key);
      return it != layer.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (!layer.is_object() || text("mediaType") != "application/vnd.ollama.image.model") continue;
    const std::string digest = text("digest");
    const std::size_t colon = digest.find(':');
    if (colon == std::string::npos || !namePart(digest.substr(0, colon)) ||
        !namePart(digest.substr(colon + 1))) {
      why = manifest.string() + ": the model layer's digest \"" + digest + "\" is malformed";
      return "";
    }
    const fs::path blob =
        root / "blobs" / (digest.substr(0, colon) + "-" + digest.substr(colon + 1));
    std::error_code ec;
    if (!fs::is_regular_file(blob, ec)) {
      why = blob.string() + ": missing (the blob " + manifest.string() + " names)";
      return "";
    }
    return blob.string();
  }
  why = manifest.string() + ": no layer of media type application/vnd.ollama.image.model";
  return "";
}

std::string hubFolderName(const std::string& name) {
  std::string out = "models--";
  for (char c : name) {
    if (c == '/')
      out += "--";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string huggingFaceHubDir() {
  if (std::string v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = env("HF_HOME"); !v.empty()) return (fs::path(v) / "hub").string();
  if (std::string v = env("HOME"); !v.empty())
    return (fs::path(v) / ".cache" / "huggingface" / "hub").string();
  return "";
}

std::string ollamaModelsDir() {
  if (std::string v = env("OLLAMA_MODELS"); !v.empty()) return v;
  if (std::string v = env("HOME"); !v.empty()) return (fs::path(v) / ".ollama" / "models").string();
  return "";
}

bool looksLikeModelName(const std::string& model) {
  if (model.rfind("ollama:", 0) == 0) return true;
  return slashName(model, true);
}

std::string resolveModelName(const std::string& model) {
  std::error_code ec;
  if (model.empty()) throw InputError("the model is empty (a folder, a .gguf file or a name)");
  if (fs::exists(model, ec)) return model;  // a path always wins
  if (model.rfind("ollama:", 0) == 0) {
    OllamaRef r;
    if (!parseOllama(model.substr(7), r)) {
      throw InputError(model + ": not an Ollama name (ollama:NAME[:TAG] or "
                               "ollama:NAMESPACE/NAME[:TAG])");
    }
    const std::string root = ollamaModelsDir();
    if (root.empty()) throw InputError(model + ": neither $OLLAMA_MODELS nor $HOME is set");
    const fs::path manifest =
        fs::path(root) / "manifests" / "registry.ollama.ai" / r.ns / r.name / r.tag;
    if (!fs::is_regular_file(manifest, ec)) {
      throw InputError(model + ": not in Ollama's store (looked for " + manifest.string() +
                       "; `ollama pull " + (r.ns == "library" ? "" : r.ns + "/") + r.name + ":" +
                       r.tag + "` puts it there)");
    }
    std::string why;
    const std::string blob = ollamaBlob(root, manifest, why);
    if (blob.empty()) throw InputError(why);
    return blob;
  }
  if (!slashName(model, true)) return model;  // a path that does not exist: the caller says so
  const std::string hub = huggingFaceHubDir();
  const fs::path folder = hub.empty() ? fs::path() : fs::path(hub) / hubFolderName(model);
  if (!hub.empty() && fs::is_directory(folder, ec)) return folder.string();
  throw InputError(model + ": no such file or folder, and not in the Hugging Face cache (looked in " +
                   fs::absolute(model, ec).string() + " and " +
                   (hub.empty() ? std::string("no cache: neither $HF_HUB_CACHE, $HF_HOME nor $HOME is set")
                                : folder.string()) +
                   ")");
}

std::vector<StoredModel> listStoredModels() {
  std::vector<StoredModel> out;
  std::error_code ec;
  if (const std::string hub = huggingFaceHubDir(); !hub.empty() && fs::is_directory(hub, ec)) {
    std::vector<StoredModel> found;
    for (const auto& e : fs::directory_iterator(hub, fs::directory_options::skip_permission_denied, ec)) {
      const std::string f = e.path().filename().string();
      if (f.rfind("models--", 0) != 0 || !fs::is_directory(e.path() / "snapshots", ec)) continue;
      std::string name = f.substr(8);
      if (const std::size_t sep = name.find("--"); sep != std::string::npos)
        name.replace(sep, 2, "/");
      found.push_back({name, e.path().string(), "Hugging Face"});
    }
    std::sort(found.begin(), found.end(),
              [](const StoredModel& a, const StoredModel& b) { return a.name < b.name; });
    out.insert(out.end(), found.begin(), found.end());
  }
  if (const std::string root = ollamaModelsDir(); !root.empty()) {
    const fs::path reg = fs::path(root) / "manifests" / "registry.ollama.ai";
    std::vector<StoredModel> found;
    if (fs::is_directory(reg, ec)) {
      for (const auto& ns : fs::directory_iterator(reg, ec)) {
        if (!ns.is_directory(ec)) continue;
        for (const auto& name : fs::directory_iterator(ns.path(), ec)) {
          if (!name.is_directory(ec)) continue;
          for (const auto& tag : fs::directory_iterator(name.path(), ec)) {
            if (!tag.is_regular_file(ec)) continue;
            std::string why;
            const std::string blob = ollamaBlob(root, tag.path(), why);
            if (blob.empty()) continue;
            const std::string nsName = ns.path().filename().string();
            found.push_back({"ollama:" + (nsName == "library" ? "" : nsName + "/") +
                                 name.path().filename().string() + ":" +
                                 tag.path().filename().string(),
                             blob, "Ollama"});
          }
        }
      }
    }
    std::sort(found.begin(), found.end(),
              [](const StoredModel& a, const StoredModel& b) { return a.name < b.name; });
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace attnviz
