// dataDir(): a binary of the build tree finds the source tree's assets/ (the installed layout,
// ../share/attnviz beside bin/, is tested on the unpacked .deb in tests/install).
#include "attnviz/formats/data_dir.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace {

namespace fs = std::filesystem;

TEST(DataDir, FromTheBuildTreeIsTheSourceAssets) {
  const std::string dir = attnviz::dataDir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::equivalent(dir, fs::path(ATTNVIZ_TEST_DATA_DIR) / ".." / "assets")) << dir;
  const std::string scenes = attnviz::dataSubdir("scenes");
  ASSERT_FALSE(scenes.empty());
  EXPECT_TRUE(fs::exists(fs::path(scenes) / "03-causal-triangle.json")) << scenes;
  EXPECT_EQ(attnviz::dataSubdir("no-such-folder"), "");
}

}  // namespace
