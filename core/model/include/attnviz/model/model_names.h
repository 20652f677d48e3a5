// A model by name: the Hugging Face cache's ORG/NAME and Ollama's NAME[:TAG], resolved to the
// files those tools already keep on disk (docs/models.md, "Opening a model by name").
#pragma once

#include <string>
#include <vector>

namespace attnviz {

// Where the two stores are, from the environment: the Hugging Face hub cache ($HF_HUB_CACHE,
// else $HF_HOME/hub, else ~/.cache/huggingface/hub) and Ollama's models folder ($OLLAMA_MODELS,
// else ~/.ollama/models). Empty when neither the variable nor $HOME is set.
std::string huggingFaceHubDir();
std::string ollamaModelsDir();

// MODEL as the user typed it, resolved to a path. A path that exists is returned unchanged (a
// path always wins). "ollama:NAME[:TAG]" (tag "latest" when omitted; NAME may be
// NAMESPACE/NAME) is the GGUF blob its manifest names. "ORG/NAME" or a bare "NAME" is the hub
// cache's models--ORG--NAME folder (locateModelFiles picks its snapshot). Anything else, or a
// name that is not found, throws InputError: one line naming MODEL and every place looked in.
std::string resolveModelName(const std::string& model);

// True when `model` is written as a name (ollama:…, ORG/NAME or NAME) rather than a path.
bool looksLikeModelName(const std::string& model);

// The models the two stores hold, for the GUI's Open dialog: the name to type, the path it
// resolves to, and the store ("Hugging Face" or "Ollama"). Sorted by store, then name.
struct StoredModel {
  std::string name, path, store;
};
std::vector<StoredModel> listStoredModels();

}  // namespace attnviz
