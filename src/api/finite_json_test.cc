#include "api/finite_json.h"

#include <gtest/gtest.h>

#include <string>

namespace redline::api {
namespace {

namespace json = boost::json;

std::optional<std::string> At(const std::string& text) {
  return FindNonFiniteNumber(json::parse(text));
}

TEST(FiniteJsonTest, NamesThePathOfTheFirstNonFiniteNumber) {
  EXPECT_EQ(At(R"({"a":1,"b":[1.5,-1.7e308,{"c":"1e400"}],"d":null})"),
            std::nullopt);
  EXPECT_EQ(At("1e400"), "");
  EXPECT_EQ(At("[0,[1,-1e400]]"), "[1][1]");
  EXPECT_EQ(At(R"({"a":{"b":[{"c":0e400}]}})"), "a.b[0].c");
  // Member names are taken as they are, an empty one or one that looks
  // like an index included.
  EXPECT_EQ(At(R"({"":{"[0]":1e999}})"), ".[0]");
  // The first in document order.
  EXPECT_EQ(At(R"({"x":1e400,"y":2e400})"), "x");
}

TEST(FiniteJsonTest, DeeperThanTheLimitIsRefused) {
  json::value v = 1;
  for (int i = 0; i < kMaxFiniteCheckDepth + 1; ++i) {
    json::array a;
    a.push_back(std::move(v));
    v = std::move(a);
  }
  const std::optional<std::string> at = FindNonFiniteNumber(v);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->size(), 3u * kMaxFiniteCheckDepth);  // "[0]" per level
  // One level less is fine.
  EXPECT_EQ(FindNonFiniteNumber(v.as_array()[0]), std::nullopt);
}

}  // namespace
}  // namespace redline::api
