// A model by name: ORG/NAME through a Hugging Face cache tree and ollama:NAME:TAG through an
// Ollama store, both laid out in a temp folder as those tools write them; each name must open
// the same files as the path does (the same tokens and the same attention weights, byte for
// byte), and a name that is not found is one line naming the places looked in.
#include "attnviz/model/model_names.h"
#include "run_binary.h"
#include "temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using attnviz::testing::CliRun;
using attnviz::testing::lineCount;
using attnviz::testing::runBinary;
using attnviz::testing::shellQuote;
using attnviz::testing::slurp;
using attnviz::testing::TempDir;

namespace {

const fs::path kLlama = fs::path(ATTNVIZ_SOURCE_DIR) / "assets/models/kjv-sp-llama";
const fs::path kByte = fs::path(ATTNVIZ_SOURCE_DIR) / "assets/models/kjv-byte-2l";
const fs::path kGguf = fs::path(ATTNVIZ_SOURCE_DIR) / "tests/fuzz/corpus/model/llama_tiny.gguf";
const char* kText = "In the beginning God created the heaven";

void writeText(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

// models--ORG--NAME as huggingface_hub writes it: blobs/<hash> files, snapshots/<commit>/<name>
// symlinks to ../../blobs/<hash>, refs/main naming the commit. A second, older snapshot holds a
// different model, so only refs/main picks the right one.
fs::path makeHubRepo(const fs::path& hub, const std::string& org, const std::string& name,
                     const fs::path& model, const fs::path& olderModel, bool withRef = true) {
  const fs::path repo = hub / ("models--" + org + "--" + name);
  int blob = 0;
  auto snapshot = [&](const std::string& commit, const fs::path& from) {
    fs::create_directories(repo / "snapshots" / commit);
    for (const auto& e : fs::directory_iterator(from)) {
      if (!e.is_regular_file()) continue;
      const std::string hash = "b" + std::to_string(blob++) + "0123456789abcdef";
      fs::create_directories(repo / "blobs");
      fs::copy_file(e.path(), repo / "blobs" / hash);
      fs::create_symlink(fs::path("../../blobs") / hash,
                         repo / "snapshots" / commit / e.path().filename());
    }
  };
  snapshot("1111111111111111111111111111111111111111", model);
  if (!olderModel.empty()) snapshot("0000000000000000000000000000000000000000", olderModel);
  if (withRef) writeText(repo / "refs" / "main", "1111111111111111111111111111111111111111");
  return repo;
}

// Ollama's store: manifests/registry.ollama.ai/NS/NAME/TAG (a JSON manifest) whose layer of media
// type application/vnd.ollama.image.model names blobs/sha256-<hex>; other layers (template,
// params, license) are JSON or text blobs.
void makeOllamaModel(const fs::path& root, const std::string& ns, const std::string& name,
                     const std::string& tag, const fs::path& gguf, const std::string& hex) {
  fs::create_directories(root / "blobs");
  fs::copy_file(gguf, root / "blobs" / ("sha256-" + hex), fs::copy_options::overwrite_existing);
  writeText(root / "blobs" / ("sha256-" + std::string(64, 'e')), "{{ .Prompt }}");
  writeText(root / "manifests" / "registry.ollama.ai" / ns / name / tag,
            R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",)"
            R"("config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:)" +
                std::string(64, 'c') + R"(","size":10},"layers":[)"
            R"({"mediaType":"application/vnd.ollama.image.template","digest":"sha256:)" +
                std::string(64, 'e') + R"(","size":13},)"
            R"({"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" + hex +
                R"(","size":100}]})");
}

// `attnviz tokenize` and `attnviz model --weights` on MODEL, with ENV before the binary.
struct Opened {
  CliRun tokens, pass;
  std::string weights;
};
Opened open(const TempDir& t, const std::string& model, const std::string& env) {
  Opened o;
  o.tokens = runBinary({"tokenize", "--model", model, "--text", kText}, t.path, env);
  const std::string w = t / "w.npy";
  fs::remove(w);
  o.pass = runBinary({"model", "--model", model, "--text", kText, "--layer", "0", "--weights", w},
                     t.path, env);
  o.weights = slurp(w);
  return o;
}

std::string hubEnv(const fs::path& hub) { return "HF_HUB_CACHE=" + shellQuote(hub.string()); }

}  // namespace

TEST(ModelNames, HubNameOpensTheSameFilesAsThePathAndFollowsRefsMain) {
  TempDir t;
  const fs::path hub = t.path / "hub";
  const fs::path repo = makeHubRepo(hub, "attnviz", "kjv-sp-llama", kLlama, kByte);
  const Opened byPath = open(t, kLlama.string(), "");
  ASSERT_EQ(byPath.pass.exitCode, 0) << byPath.pass.err;
  ASSERT_FALSE(byPath.weights.empty());
  const Opened byName = open(t, "attnviz/kjv-sp-llama", hubEnv(hub));
  ASSERT_EQ(byName.tokens.exitCode, 0) << byName.tokens.err;
  ASSERT_EQ(byName.pass.exitCode, 0) << byName.pass.err;
  EXPECT_EQ(byName.tokens.out, byPath.tokens.out);
  EXPECT_EQ(byName.weights, byPath.weights);
  // The repo folder itself, as a path, opens the same.
  const Opened byRepo = open(t, repo.string(), "");
  EXPECT_EQ(byRepo.weights, byPath.weights);
}

TEST(ModelNames, HubCacheIsFoundThroughHfHomeAndHome) {
  TempDir t;
  makeHubRepo(t.path / "hfhome" / "hub", "attnviz", "kjv-sp-llama", kLlama, {});
  makeHubRepo(t.path / "home" / ".cache" / "huggingface" / "hub", "attnviz", "byte", kByte, {});
  const CliRun want = runBinary({"tokenize", "--model", kLlama.string(), "--text", kText}, t.path);
  const CliRun viaHfHome =
      runBinary({"tokenize", "--model", "attnviz/kjv-sp-llama", "--text", kText}, t.path,
                "env -u HF_HUB_CACHE HF_HOME=" + shellQuote(t / "hfhome"));
  ASSERT_EQ(viaHfHome.exitCode, 0) << viaHfHome.err;
  EXPECT_EQ(viaHfHome.out, want.out);
  const CliRun wantByte = runBinary({"tokenize", "--model", kByte.string(), "--text", kText}, t.path);
  const CliRun viaHome = runBinary({"tokenize", "--model", "attnviz/byte", "--text", kText}, t.path,
                                   "env -u HF_HUB_CACHE -u HF_HOME HOME=" + shellQuote(t / "home"));
  ASSERT_EQ(viaHome.exitCode, 0) << viaHome.err;
  EXPECT_EQ(viaHome.out, wantByte.out);
  EXPECT_NE(wantByte.out, want.out);  // the two models tell the stores apart
}

TEST(ModelNames, BareHubNameAndTheOnlySnapshotWithoutRefsMain) {
  TempDir t;
  const fs::path hub = t.path / "hub";
  fs::create_directories(hub);
  // A top-level id ("gpt2", "t5-small") is models--NAME.
  const fs::path repo = hub / "models--kjv";
  fs::create_directories(repo / "snapshots");
  fs::copy(kByte, repo / "snapshots" / "2222222222222222222222222222222222222222");
  const CliRun want = runBinary({"tokenize", "--model", kByte.string(), "--text", kText}, t.path);
  const CliRun got =
      runBinary({"tokenize", "--model", "kjv", "--text", kText}, t.path, hubEnv(hub));
  ASSERT_EQ(got.exitCode, 0) << got.err;
  EXPECT_EQ(got.out, want.out);
}

TEST(ModelNames, APathAlwaysWins) {
  TempDir t;
  const fs::path hub = t.path / "hub";
  makeHubRepo(hub, "org", "name", kLlama, {});
  // ./org/name exists: it is the byte model, not the cache's llama.
  fs::create_directories(t.path / "cwd" / "org");
  fs::copy(kByte, t.path / "cwd" / "org" / "name");
  const CliRun want = runBinary({"tokenize", "--model", kByte.string(), "--text", kText}, t.path);
  const CliRun got = runBinary({"tokenize", "--model", "org/name", "--text", kText}, t.path,
                               "cd " + shellQuote(t / "cwd") + " && " + hubEnv(hub));
  ASSERT_EQ(got.exitCode, 0) << got.err;
  EXPECT_EQ(got.out, want.out);
}

TEST(ModelNames, AHubRepoOfOneGgufFileOpensIt) {
  TempDir t;
  const fs::path hub = t.path / "hub";
  const fs::path snap = hub / "models--org--tiny-GGUF" / "snapshots" / "3333";
  fs::create_directories(snap);
  fs::copy_file(kGguf, snap / "tiny.Q8_0.gguf");
  writeText(snap / "README.md", "a GGUF repository");
  const CliRun want = runBinary({"tokenize", "--model", kGguf.string(), "--text", kText}, t.path);
  const CliRun got =
      runBinary({"tokenize", "--model", "org/tiny-GGUF", "--text", kText}, t.path, hubEnv(hub));
  ASSERT_EQ(got.exitCode, 0) << got.err;
  EXPECT_EQ(got.out, want.out);
  // Two GGUF files: the user picks one; the message lists them.
  fs::copy_file(kGguf, snap / "tiny.F16.gguf");
  const CliRun two =
      runBinary({"tokenize", "--model", "org/tiny-GGUF", "--text", kText}, t.path, hubEnv(hub));
  EXPECT_EQ(two.exitCode, 1);
  EXPECT_EQ(lineCount(two.err), 1) << two.err;
  EXPECT_NE(two.err.find("tiny.F16.gguf, tiny.Q8_0.gguf"), std::string::npos) << two.err;
}

TEST(ModelNames, OllamaNameOpensTheGgufBlobItsManifestNames) {
  TempDir t;
  const fs::path store = t.path / "ollama";
  const std::string hex(64, 'a');
  makeOllamaModel(store, "library", "tiny", "1b", kGguf, hex);
  makeOllamaModel(store, "someone", "tiny", "latest", kGguf, std::string(64, 'b'));
  const std::string env = "OLLAMA_MODELS=" + shellQuote(store.string());
  const CliRun want = runBinary({"tokenize", "--model", kGguf.string(), "--text", kText}, t.path);
  ASSERT_EQ(want.exitCode, 0) << want.err;
  for (const std::string name : {"ollama:tiny:1b", "ollama:someone/tiny"}) {
    const CliRun got = runBinary({"tokenize", "--model", name, "--text", kText}, t.path, env);
    ASSERT_EQ(got.exitCode, 0) << name << ": " << got.err;
    EXPECT_EQ(got.out, want.out) << name;
  }
  // ~/.ollama/models when $OLLAMA_MODELS is not set.
  makeOllamaModel(t.path / "home" / ".ollama" / "models", "library", "tiny", "latest", kGguf, hex);
  const CliRun home = runBinary({"tokenize", "--model", "ollama:tiny", "--text", kText}, t.path,
                                "env -u OLLAMA_MODELS HOME=" + shellQuote(t / "home"));
  ASSERT_EQ(home.exitCode, 0) << home.err;
  EXPECT_EQ(home.out, want.out);
}

TEST(ModelNames, NamesNotFoundAreOneLineNamingThePlacesLookedIn) {
  TempDir t;
  const fs::path hub = t.path / "hub", store = t.path / "ollama";
  fs::create_directories(hub);
  makeOllamaModel(store, "library", "tiny", "1b", kGguf, std::string(64, 'a'));
  struct Case {
    std::string model, mustName;
  } cases[] = {
      {"google/flan-t5-small", (hub / "models--google--flan-t5-small").string()},
      {"t5-small", (hub / "models--t5-small").string()},
      {"ollama:llama3.2:1b",
       (store / "manifests/registry.ollama.ai/library/llama3.2/1b").string()},
      {"ollama:tiny:2b", (store / "manifests/registry.ollama.ai/library/tiny/2b").string()},
      {"ollama:bad name", "ollama:NAME[:TAG]"},
  };
  for (const Case& c : cases) {
    for (const std::string sub : {"tokenize", "model"}) {
      const CliRun r = runBinary({sub, "--model", c.model, "--text", kText}, t.path,
                                 hubEnv(hub) + " OLLAMA_MODELS=" + shellQuote(store.string()));
      EXPECT_EQ(r.exitCode, 1) << sub << " " << c.model << ": " << r.err;
      EXPECT_EQ(lineCount(r.err), 1) << r.err;
      EXPECT_NE(r.err.find(c.mustName), std::string::npos) << c.model << ": " << r.err;
    }
  }
  // A manifest whose model blob is missing, and one that is not JSON.
  fs::remove(store / "blobs" / ("sha256-" + std::string(64, 'a')));
  const CliRun missing = runBinary({"tokenize", "--model", "ollama:tiny:1b", "--text", kText},
                                   t.path, "OLLAMA_MODELS=" + shellQuote(store.string()));
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.err.find("sha256-" + std::string(64, 'a') + ": missing"), std::string::npos)
      << missing.err;
  writeText(store / "manifests/registry.ollama.ai/library/tiny/1b", "{not json");
  const CliRun bad = runBinary({"tokenize", "--model", "ollama:tiny:1b", "--text", kText}, t.path,
                               "OLLAMA_MODELS=" + shellQuote(store.string()));
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_EQ(lineCount(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("not valid JSON"), std::string::npos) << bad.err;
  // Fields of the wrong type read as absent: one line, no uncaught type error.
  writeText(store / "manifests/registry.ollama.ai/library/tiny/1b",
            R"({"layers": [{"mediaType": 7, "digest": "sha256:aa"}, {"mediaType":
                "application/vnd.ollama.image.model", "digest": ["x"]}]})");
  const CliRun typed = runBinary({"tokenize", "--model", "ollama:tiny:1b", "--text", kText},
                                 t.path, "OLLAMA_MODELS=" + shellQuote(store.string()));
  EXPECT_EQ(typed.exitCode, 1) << typed.err;
  EXPECT_EQ(lineCount(typed.err), 1) << typed.err;
  EXPECT_NE(typed.err.find("digest \"\" is malformed"), std::string::npos) << typed.err;
}

TEST(ModelNames, TheOpenDialogListsBothStores) {
  TempDir t;
  const fs::path hub = t.path / "hub", store = t.path / "ollama";
  makeHubRepo(hub, "attnviz", "kjv-sp-llama", kLlama, {});
  fs::create_directories(hub / "models--kjv" / "snapshots" / "4444");  // a top-level id
  fs::create_directories(hub / "not-a-model");
  makeOllamaModel(store, "library", "tiny", "1b", kGguf, std::string(64, 'a'));
  ::setenv("HF_HUB_CACHE", hub.c_str(), 1);
  ::setenv("OLLAMA_MODELS", store.c_str(), 1);
  const auto found = attnviz::listStoredModels();
  ::unsetenv("HF_HUB_CACHE");
  ::unsetenv("OLLAMA_MODELS");
  std::vector<std::string> names;
  for (const auto& m : found) names.push_back(m.store + " " + m.name);
  const std::vector<std::string> want = {"Hugging Face attnviz/kjv-sp-llama", "Hugging Face kjv",
                                         "Ollama ollama:tiny:1b"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(found.back().path, (store / "blobs" / ("sha256-" + std::string(64, 'a'))).string());
}
