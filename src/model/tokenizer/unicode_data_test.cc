#include "model/tokenizer/unicode_data.h"

#include <gtest/gtest.h>

#include <string>

namespace redline::model::unicode_data {
namespace {

std::string Nfc(std::string_view s) {
  std::string out;
  AppendNfc(s, &out);
  return out;
}

TEST(UnicodeData, NfcComposesReordersAndKeepsSingletonsOut) {
  EXPECT_EQ(Nfc("e\xCC\x81"), "\xC3\xA9");              // e + ◌́ -> é
  EXPECT_EQ(Nfc("a\xCC\xA3\xCC\x82"), "\xE1\xBA\xAD");  // ậ
  EXPECT_EQ(Nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");  // reordered first
  EXPECT_EQ(Nfc("\xE2\x84\xAB"), "\xC3\x85");           // Å (U+212B) -> Å
  EXPECT_EQ(Nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // 각
  EXPECT_EQ(Nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");  // ﬁ: compatibility only
  EXPECT_EQ(Nfc("\xCC\x81"
                "e"),
            "\xCC\x81"
            "e");  // leading mark stays
  EXPECT_EQ(Nfc("x\xFF"
                "e\xCC\x81"),
            "x\xFF\xC3\xA9");  // bad bytes pass through
}

TEST(UnicodeData, QuickCheck) {
  EXPECT_FALSE(MayNeedNfc("plain ascii"));
  EXPECT_FALSE(
      MayNeedNfc("\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x99"));  // é 你 🦙
  EXPECT_TRUE(MayNeedNfc("e\xCC\x81"));
  EXPECT_TRUE(MayNeedNfc("\xE2\x84\xAB"));
}

TEST(UnicodeData, Categories) {
  EXPECT_TRUE(IsPunctuation('!'));
  EXPECT_TRUE(IsPunctuation(0x3002));  // 。
  EXPECT_FALSE(IsPunctuation('a'));
  EXPECT_TRUE(IsOther(0x200D));  // ZWJ (Cf)
  EXPECT_TRUE(IsNonspacingMark(0x301));
  EXPECT_TRUE(IsWhitespace(0x3000));
  EXPECT_EQ(CombiningClass(0x301), 230);
  EXPECT_EQ(CombiningClass('a'), 0);
  ASSERT_EQ(Lowercase('A').size(), 1u);
  EXPECT_EQ(Lowercase('A')[0], static_cast<uint32_t>('a'));
  EXPECT_EQ(Lowercase(0x130).size(), 2u);  // İ -> i + ◌̇
}

}  // namespace
}  // namespace redline::model::unicode_data
