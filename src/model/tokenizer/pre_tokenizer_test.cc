#include "model/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redline::model::tokenizer_internal {
namespace {

std::vector<std::string> SplitWith(std::string_view pre,
                                   std::string_view text) {
  auto config = FindPreTokenizer(pre);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto splitter = PreTokenizer::Create(config->patterns);
  EXPECT_TRUE(splitter.ok()) << splitter.status().ToString();
  std::vector<Span> spans;
  (*splitter)->Split(text, &spans);
  std::vector<std::string> out;
  size_t covered = 0;
  for (const Span& s : spans) {
    EXPECT_EQ(s.offset, covered) << "pieces must tile the text";
    covered += s.length;
    out.emplace_back(text.substr(s.offset, s.length));
  }
  EXPECT_EQ(covered, text.size());
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Gpt2SplitsWordsSpacesAndContractions) {
  EXPECT_EQ(SplitWith("gpt-2", "Hello world's  end!"),
            (Pieces{"Hello", " world", "'s", " ", " end", "!"}));
  EXPECT_EQ(SplitWith("gpt-2", "a\t\tb"), (Pieces{"a", "\t", "\t", "b"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(SplitWith("llama-bpe", "1234567 x"),
            (Pieces{"123", "456", "7", " x"}));
  EXPECT_EQ(SplitWith("llama-bpe", "I'M"),
            (Pieces{"I", "'M"}));  // case-insensitive
  EXPECT_EQ(SplitWith("llama-bpe", "a\n\n b"), (Pieces{"a", "\n\n", " b"}));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(SplitWith("qwen2", "x123"), (Pieces{"x", "1", "2", "3"}));
}

TEST(PreTokenizer, ExpressionsApplyInSequence) {
  // starcoder: digits first, then GPT-2 on the pieces between them.
  EXPECT_EQ(SplitWith("starcoder", "ab12 cd"), (Pieces{"ab", "1", "2", " cd"}));
  // deepseek-coder: newlines, letters, punctuation, CJK, digits.
  EXPECT_EQ(SplitWith("deepseek-coder", "ab\n12"),
            (Pieces{"ab", "\n", "1", "2"}));
}

TEST(PreTokenizer, InvalidUtf8NeverFailsAndIsKept) {
  const std::string text = "ab\xFF\xC3 cd\xE4\xBD";
  for (const std::string& pre : KnownPreTokenizers()) {
    std::string joined;
    for (const std::string& piece : SplitWith(pre, text)) joined += piece;
    EXPECT_EQ(joined, text) << pre;
  }
}

TEST(PreTokenizer, EveryKnownConfigurationCompiles) {
  for (const std::string& pre : KnownPreTokenizers()) {
    auto config = FindPreTokenizer(pre);
    ASSERT_TRUE(config.ok()) << pre;
    auto splitter = PreTokenizer::Create(config->patterns);
    EXPECT_TRUE(splitter.ok()) << pre << ": " << splitter.status().ToString();
  }
}

TEST(PreTokenizer, AbsentMeansDefaultAndUnknownIsNamed) {
  auto absent = FindPreTokenizer("");
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->name, "default");
  auto unknown = FindPreTokenizer("no-such-pre");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("no-such-pre"), std::string::npos);
}

TEST(PreTokenizer, BadExpressionIsAnError) {
  auto bad = PreTokenizer::Create({"[unclosed"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(PreTokenizer, LongInputsStayLinear) {
  // A megabyte of one character class and of whitespace: one piece each
  // (guards against backtracking blow-ups and JIT stack exhaustion).
  const std::string letters(1 << 20, 'a');
  EXPECT_EQ(SplitWith("llama-bpe", letters).size(), 1u);
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(SplitWith("gpt-2", spaces).size(), 1u);
  const std::string spaces_then_word = std::string(1 << 16, ' ') + "x";
  EXPECT_EQ(SplitWith("qwen2", spaces_then_word).size(), 2u);
}

}  // namespace
}  // namespace redline::model::tokenizer_internal
