// libFuzzer target: the Head finder's tree files on arbitrary bytes. The first byte chooses: even,
// the bytes are a head file (heads/L{l}H{h}.json, parseHeadFile); odd, they are scatter_data.json
// of a tree in a folder of this process (readHeadTree, then each head's rank and neighbours).
// Either the file is read, with every kept entry inside its sequence's matrix, or InputError is
// thrown.
#include "attnviz/model/head_finder.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {
std::string g_tree;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string t = (fs::temp_directory_path() / "attnviz_fuzz_head_tree_XXXXXX").string();
  if (!::mkdtemp(t.data())) std::abort();
  fs::create_directories(fs::path(t) / "heads");
  if (FILE* f = std::fopen((fs::path(t) / "config.json").c_str(), "wb")) {
    std::fputs("{\"metrics\": [\"prev_token_score\", \"induction_score\"], \"n_layers\": 2}", f);
    std::fclose(f);
  }
  g_tree = t;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      const attnviz::HeadDashboardData d = attnviz::parseHeadFile(text, "L0H0.json");
      for (const attnviz::HeadTreeSequence& q : d.sequences) {
        if (q.indices.size() != q.values.size() || int(q.tokens.size()) != q.seqLen) std::abort();
        for (long long i : q.indices)
          if (i < 0 || i >= (long long)q.seqLen * q.seqLen) std::abort();
      }
    } else {
      if (FILE* f = std::fopen((fs::path(g_tree) / "scatter_data.json").c_str(), "wb")) {
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
      }
      const attnviz::HeadTree t = attnviz::readHeadTree(g_tree);
      for (std::size_t r = 0; r < t.rows.size(); ++r) {
        if (t.rows[r].values.size() != t.metrics.size()) std::abort();
        for (std::size_t m = 0; m < t.metrics.size(); ++m) (void)attnviz::headRank(t, r, m);
        (void)attnviz::nearestHeads(t, r, 5);
        (void)attnviz::headFilePath(t, t.rows[r].layer, t.rows[r].head);
      }
    }
  } catch (const attnviz::InputError&) {
  }
  return 0;
}
