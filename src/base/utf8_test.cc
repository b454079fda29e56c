#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace redline::utf8 {
namespace {

TEST(Utf8, CharLengthOfWellFormedCharacters) {
  const std::string s =
      "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x99";  // a é 你 🦙
  EXPECT_EQ(CharLength(s, 0), 1u);
  EXPECT_EQ(CharLength(s, 1), 2u);
  EXPECT_EQ(CharLength(s, 3), 3u);
  EXPECT_EQ(CharLength(s, 6), 4u);
}

TEST(Utf8, MalformedBytesAreSingleCharacters) {
  EXPECT_EQ(CharLength("\x80", 0), 1u);              // stray continuation
  EXPECT_EQ(CharLength("\xC0\x80", 0), 1u);          // overlong
  EXPECT_EQ(CharLength("\xED\xA0\x80", 0), 1u);      // surrogate
  EXPECT_EQ(CharLength("\xF4\x90\x80\x80", 0), 1u);  // > U+10FFFF
  EXPECT_EQ(CharLength("\xE4\xBD", 0), 1u);          // truncated
  EXPECT_EQ(CharLength("\xFF", 0), 1u);
  size_t len = 0;
  EXPECT_EQ(DecodeCodepoint("\xFF", 0, &len), kReplacementChar);
  EXPECT_EQ(len, 1u);
}

TEST(Utf8, EncodeDecodeRoundTrip) {
  for (uint32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu,
                      0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendCodepoint(cp, &s);
    size_t len = 0;
    EXPECT_EQ(DecodeCodepoint(s, 0, &len), cp);
    EXPECT_EQ(len, s.size());
    EXPECT_TRUE(IsValid(s));
  }
  EXPECT_FALSE(IsValid("ok\xC3"));
}

TEST(Utf8, CompletePrefixHoldsBackOnlyUnfinishedCharacters) {
  EXPECT_EQ(CompletePrefixLength(""), 0u);
  EXPECT_EQ(CompletePrefixLength("abc"), 3u);
  EXPECT_EQ(CompletePrefixLength("ab\xF0"), 2u);
  EXPECT_EQ(CompletePrefixLength("ab\xF0\x9F"), 2u);
  EXPECT_EQ(CompletePrefixLength("ab\xF0\x9F\xA6"), 2u);
  EXPECT_EQ(CompletePrefixLength("ab\xF0\x9F\xA6\x99"), 6u);
  EXPECT_EQ(CompletePrefixLength("\xE4\xBD"), 0u);
  // Bytes that can never complete are not held back.
  EXPECT_EQ(CompletePrefixLength("a\xFF"), 2u);
  EXPECT_EQ(CompletePrefixLength("a\x80"), 2u);
  EXPECT_EQ(CompletePrefixLength("a\xE0\x80"), 3u);  // E0 needs A0..BF next
  EXPECT_EQ(CompletePrefixLength("a\xC3\x41"), 3u);
}

}  // namespace
}  // namespace redline::utf8
