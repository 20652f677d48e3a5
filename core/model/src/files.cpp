// Locating a model's files: a Hugging Face folder (or cache), or a GGUF file.
#include "attnviz/formats/fileio.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/model/model.h"
#include "attnviz/model/model_names.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace attnviz {

namespace fs = std::filesystem;

namespace {

bool isGgufFile(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return false;
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string(magic, 4) == "GGUF";
}

}  // namespace

std::vector<std::string> parseShardIndex(const std::string& text, const std::string& indexPath) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(indexPath + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() ||
      j["weight_map"].empty()) {
    throw InputError(indexPath + ": expected an object with a non-empty \"weight_map\"");
  }
  std::set<std::string> names;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) {
      throw InputError(indexPath + ": weight_map[\"" + tensor + "\"] must be a file name");
    }
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      throw InputError(indexPath + ": weight_map names \"" + f + "\", not a file in the folder");
    }
    names.insert(f);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

namespace {

// The shards an index names, checked: every file exists inside the folder.
std::vector<std::string> readShardIndex(const fs::path& dir, const std::string& indexPath) {
  std::vector<std::string> shards;
  std::error_code ec;
  for (const std::string& f : parseShardIndex(readFile(indexPath), indexPath)) {
    const fs::path p = dir / f;
    if (!fs::exists(p, ec)) {
      throw InputError(p.string() + ": missing (a shard named in " + indexPath + ")");
    }
    shards.push_back(p.string());
  }
  return shards;
}

}  // namespace

ModelFiles locateModelFiles(const std::string& modelArg, bool needWeights) {
  // A name (ORG/NAME, ollama:NAME:TAG) becomes the path its store keeps; a path stays.
  const std::string dirArg = resolveModelName(modelArg);
  fs::path dir(dirArg);
  std::error_code ec;
  if (isGgufFile(dir)) {
    ModelFiles f;
    f.dir = dir.parent_path().string();
    f.gguf = f.weights = dir.string();
    return f;
  }
  if (fs::is_regular_file(dir, ec) && dir.extension() == ".gguf") {
    throw InputError(dirArg + ": not a GGUF file (it does not start with \"GGUF\")");
  }
  if (!fs::is_directory(dir, ec)) {
    throw InputError(dirArg + ": not a model folder or GGUF file (a model folder holds " +
                     "config.json, model.safetensors and the tokenizer files)");
  }
  // The Hugging Face cache: models--NAME/{refs/main, snapshots/<hash>/ -> ../../blobs/...}.
  if (!fs::exists(dir / "config.json", ec) && fs::is_directory(dir / "snapshots", ec)) {
    fs::path snap;
    const std::string ref =
        fs::exists(dir / "refs" / "main", ec) ? readFile((dir / "refs" / "main").string()) : "";
    const std::string hash = ref.substr(0, ref.find_first_of("\r\n"));
    if (!hash.empty() && fs::is_directory(dir / "snapshots" / hash, ec)) {
      snap = dir / "snapshots" / hash;
    } else {
      int count = 0;
      for (const auto& e : fs::directory_iterator(dir / "snapshots", ec)) {
        if (e.is_directory()) snap = e.path(), ++count;
      }
      if (count != 1) {
        throw InputError(dirArg + ": a Hugging Face cache folder with " + std::to_string(count) +
                         " snapshots and no refs/main; pass one snapshots/<hash> folder");
      }
    }
    dir = snap;
    // A repository of GGUF files: its one .gguf file is the model.
    if (!fs::exists(dir / "config.json", ec)) {
      std::vector<std::string> ggufs;
      for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".gguf") ggufs.push_back(e.path().filename().string());
      std::sort(ggufs.begin(), ggufs.end());
      if (ggufs.size() == 1) return locateModelFiles((dir / ggufs[0]).string(), needWeights);
      if (ggufs.size() > 1) {
        std::string list;
        for (const auto& g : ggufs) list += (list.empty() ? "" : ", ") + g;
        throw InputError(dir.string() + ": " + std::to_string(ggufs.size()) +
                         " GGUF files and no config.json; pass one of them (" + list + ")");
      }
    }
  }
  ModelFiles f;
  f.dir = dir.string();
  f.config = (dir / "config.json").string();
  if (!fs::exists(f.config, ec)) throw InputError(f.config + ": missing (not in the model folder)");
  if (!needWeights) return f;
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  // exists() follows symlinks, so a dangling cache link counts as missing.
  if (fs::exists(single, ec)) {
    f.weights = single.string();
    f.shards = {f.weights};
  } else if (fs::exists(index, ec)) {
    f.weights = index.string();
    f.shards = readShardIndex(dir, f.weights);
  } else if (fs::exists(dir / "pytorch_model.bin", ec)) {
    throw InputError((dir / "pytorch_model.bin").string() +
                     ": attnviz reads model.safetensors, not PyTorch pickles; convert it with "
                     "python3 -c \"from transformers import AutoModelForCausalLM as M; "
                     "M.from_pretrained('" +
                     f.dir + "').save_pretrained('" + f.dir + "', safe_serialization=True)\"");
  } else {
    throw InputError(single.string() + ": missing (not in the model folder, and no " +
                     "model.safetensors.index.json)");
  }
  return f;
}

std::unique_ptr<Tokenizer> loadModelTokenizer(const std::string& path) {
  const ModelFiles f = locateModelFiles(path, false);
  if (!f.gguf.empty()) {
    const auto file = GgufFile::open(f.gguf);
    return loadGgufTokenizer(*file);
  }
  const ModelConfig c = loadModelConfig(f.config);
  return loadFolderTokenizer(f.dir, c.vocabSize);
}

}  // namespace attnviz
