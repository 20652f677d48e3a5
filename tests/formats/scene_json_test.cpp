// Scene files (attnviz/formats/scene.h): the JSON round trip, the names, and bad files refused
// naming the file and the field.
#include "attnviz/formats/scene.h"

#include <gtest/gtest.h>

#include <string>
#include <typeinfo>
#include <vector>

namespace attnviz {
namespace {

TEST(SceneText, TokenizeSplitsOnAnyWhitespace) {
  EXPECT_EQ(tokenize("  a\tbb \n c  "), (std::vector<std::string>{"a", "bb", "c"}));
  EXPECT_TRUE(tokenize("   ").empty());
}

TEST(SceneJson, RoundTripKeepsEverySetting) {
  Scene s = defaultScene();
  s.title = "t";
  s.notes = "what the scene teaches";
  s.queryText = "x y z";
  s.keyText = "u v";
  s.mode = Mode::Cross;
  s.heads = 3;
  s.seed = 77;
  s.archetypes = {Archetype::SameToken, Archetype::Broad, Archetype::Random};
  s.params.temperature = 0.5f;
  s.params.mask.window = 2;
  s.params.mask.alibi = true;
  const Scene t = sceneFromJson(sceneToJson(s), "mem.json");
  EXPECT_EQ(t.title, s.title);
  EXPECT_EQ(t.notes, s.notes);
  EXPECT_EQ(t.queryText, s.queryText);
  EXPECT_EQ(t.keyText, s.keyText);
  EXPECT_EQ(t.mode, s.mode);
  EXPECT_EQ(t.heads, s.heads);
  EXPECT_EQ(t.seed, s.seed);
  EXPECT_EQ(t.archetypes, s.archetypes);
  EXPECT_EQ(t.params.temperature, 0.5f);
  EXPECT_EQ(t.params.mask.window, 2);
  EXPECT_TRUE(t.params.mask.alibi);
}

TEST(SceneJson, MalformedJsonIsRefusedNamingTheFile) {
  try {
    sceneFromJson("{\"heads\": ", "broken.json");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json"), std::string::npos) << e.what();
  }
}

TEST(SceneJson, WrongFieldTypeIsRefusedNamingTheField) {
  try {
    sceneFromJson("{\"heads\": \"many\"}", "s.json");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("s.json"), std::string::npos) << m;
    EXPECT_NE(m.find("heads"), std::string::npos) << m;
  }
}

// Found by tests/fuzz/fuzz_scene.cpp: a number too large for a double made nlohmann throw its own
// out_of_range, which escaped sceneFromJson (the app would crash instead of saying why).
TEST(SceneJson, NumberTooLargeForADoubleIsRefusedAsBadInput) {
  for (const char* text : {"1e400", "{\"heads\": 1e400}", "{\"temperature\": -1e999}"}) {
    try {
      sceneFromJson(text, "big.json");
      ADD_FAILURE() << text << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("big.json"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << text << ": escaped as " << typeid(e).name() << ": " << e.what();
    }
  }
}

TEST(SceneJson, UnknownArchetypeNameIsRefused) {
  EXPECT_THROW(archetypeFromName("no-such-head"), InputError);
  for (Archetype a : allArchetypes()) EXPECT_EQ(archetypeFromName(archetypeName(a)), a);
}

}  // namespace
}  // namespace attnviz
