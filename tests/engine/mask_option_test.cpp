// --mask values: each kind parses into the spec, and malformed values are usage errors.
#include "attnviz/engine/mask.h"

#include <gtest/gtest.h>

namespace attnviz {
namespace {

TEST(MaskOption, EachKindSetsItsField) {
  MaskSpec m;
  parseMaskOption("causal", m);
  parseMaskOption("window:5", m);
  parseMaskOption("prefix:3", m);
  parseMaskOption("sink:2", m);
  parseMaskOption("pad:4", m);
  EXPECT_TRUE(m.causal);
  EXPECT_EQ(m.window, 5);
  EXPECT_EQ(m.prefix, 3);
  EXPECT_EQ(m.sink, 2);
  EXPECT_EQ(m.pad, 4);
  EXPECT_FALSE(m.alibi);
  EXPECT_TRUE(m.any());
}

TEST(MaskOption, DefaultSpecIsNeutral) {
  MaskSpec m;
  EXPECT_FALSE(m.any());
  EXPECT_EQ(describeMask(m), "none");
}

TEST(MaskOption, MalformedValuesAreUsageErrors) {
  for (const char* bad :
       {"", "diagonal", "window", "window:", "window:abc", "window:0", "window:-3", "window:2x",
        "causal:1", "pad:", "prefix:-1", "sink:1.5", "Causal"}) {
    MaskSpec m;
    EXPECT_THROW(parseMaskOption(bad, m), UsageError) << "'" << bad << "'";
  }
}

TEST(MaskOption, DescriptionNamesEveryActiveKind) {
  MaskSpec m;
  m.causal = true;
  m.window = 4;
  m.alibi = true;
  const std::string d = describeMask(m);
  EXPECT_NE(d.find("causal"), std::string::npos) << d;
  EXPECT_NE(d.find("window:4"), std::string::npos) << d;
  EXPECT_NE(d.find("ALiBi"), std::string::npos) << d;
}

}  // namespace
}  // namespace attnviz
