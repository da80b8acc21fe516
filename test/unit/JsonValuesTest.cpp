//===- JsonValuesTest.cpp - Integers of untrusted JSON files --------------===//
#include "codegen/plan/JsonValues.h"

#include <gtest/gtest.h>

namespace {

TEST(JsonValuesTest, IntegersOfUntrustedJson) {
  auto read = [](llvm::StringRef text) {
    auto v = llvm::json::parse(text);
    EXPECT_TRUE(bool(v));
    return v ? pax::jsonInteger(*v) : std::nullopt;
  };
  EXPECT_EQ(read("7"), 7);
  EXPECT_EQ(read("-7"), -7);
  EXPECT_EQ(read("8.0"), 8);
  EXPECT_EQ(read("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(read("-9223372036854775808"), INT64_MIN);
  // 2^63 as a double (which INT64_MAX rounds to) is past int64: LLVM's own
  // getAsInteger converts it, undefined.
  EXPECT_EQ(read("9.2233720368547758e+18"), std::nullopt);
  EXPECT_EQ(read("9223372036854775808"), std::nullopt);
  EXPECT_EQ(read("1e300"), std::nullopt);
  EXPECT_EQ(read("2.5"), std::nullopt);
  EXPECT_EQ(read("\"3\""), std::nullopt);
  EXPECT_EQ(read("-9.3e18"), std::nullopt);
}



TEST(JsonValuesTest, DeepNestingIsRefusedBeforeParsing) {
  std::string deep(100000, '[');
  auto v = pax::parseJson(deep);
  ASSERT_FALSE(bool(v));
  EXPECT_NE(llvm::toString(v.takeError()).find("nested deeper than 256"),
            std::string::npos);
  // Brackets inside strings (escaped quotes too) do not count.
  std::string quoted = "[\"" + std::string(1000, '[') + "\\\"\"]";
  EXPECT_TRUE(bool(pax::parseJson(quoted)));
  std::string ok = std::string(256, '[') + std::string(256, ']');
  EXPECT_TRUE(bool(pax::parseJson(ok)));
  std::string over = std::string(257, '[') + std::string(257, ']');
  auto refused = pax::parseJson(over);
  EXPECT_FALSE(bool(refused));
  llvm::consumeError(refused.takeError());
}
} // namespace
