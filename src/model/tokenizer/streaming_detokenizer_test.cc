#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::model {
namespace {

// <unk>, <s>, </s>, byte tokens and a few pieces (SentencePiece style).
std::unique_ptr<Tokenizer> ByteVocab() {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    spec.tokens.push_back(hex);
    spec.types.push_back(TokenType::kByte);
  }
  for (const char* piece : {"\xE2\x96\x81Hello", "\xE2\x96\x81world", "!"}) {
    spec.tokens.push_back(piece);
    spec.types.push_back(TokenType::kNormal);
  }
  auto tok = Tokenizer::FromSpec(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

int32_t Byte(uint8_t b) { return 3 + b; }

TEST(StreamingDetokenizer, HoldsBackSplitCharacters) {
  auto tok = ByteVocab();
  StreamingDetokenizer stream(*tok);
  // 🦙 = F0 9F A6 99, one byte token at a time.
  EXPECT_EQ(stream.Push(Byte(0xF0)), "");
  EXPECT_EQ(stream.Push(Byte(0x9F)), "");
  EXPECT_EQ(stream.Push(Byte(0xA6)), "");
  EXPECT_EQ(stream.Push(Byte(0x99)), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDetokenizer, LeadingSpaceRuleMatchesDecode) {
  auto tok = ByteVocab();
  const int32_t hello = *tok->FindToken("\xE2\x96\x81Hello");
  const int32_t world = *tok->FindToken("\xE2\x96\x81world");
  for (bool skip : {false, true}) {
    const std::vector<int32_t> ids = {1, hello, world, Byte('!'), 2};
    StreamingDetokenizer stream(*tok, skip);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.Push(id);
    streamed += stream.Flush();
    EXPECT_EQ(streamed, tok->Decode(ids, skip));
  }
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, hello, world, 2}, true),
            "Hello world");
  // A continuation keeps the first space, streamed or not.
  EXPECT_EQ(
      tok->Decode(std::vector<int32_t>{world}, false, /*continuation=*/true),
      " world");
  StreamingDetokenizer continued(*tok, false, /*continuation=*/true);
  EXPECT_EQ(continued.Push(world), " world");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, hello, world, 2}, false),
            "<s> Hello world</s>");
}

TEST(StreamingDetokenizer, InvalidBytesPassThroughAndFlushEmitsTail) {
  auto tok = ByteVocab();
  StreamingDetokenizer stream(*tok);
  EXPECT_EQ(stream.Push(Byte(0xFF)), "\xFF");  // can never become valid
  EXPECT_EQ(stream.Push(Byte('a')), "a");
  EXPECT_EQ(stream.Push(Byte(0xE4)), "");
  EXPECT_EQ(stream.Push(Byte(0xBD)), "");
  EXPECT_EQ(stream.Push(Byte('b')),
            "\xE4\xBD"
            "b");  // broken sequence released
  EXPECT_EQ(stream.Push(Byte(0xC3)), "");
  EXPECT_EQ(stream.Flush(), "\xC3");
}

TEST(StreamingDetokenizer, RandomByteStreamsEqualDecode) {
  auto tok = ByteVocab();
  std::mt19937 rng(11);
  const std::string samples[] = {"héllo wörld", "你好，世界",
                                 "🦙🚀😶‍🌫️",
                                 "mixed ascii и кириллица"};
  for (int round = 0; round < 200; ++round) {
    // Valid text as byte tokens interleaved with pieces and specials.
    const std::string& text = samples[round % 4];
    std::vector<int32_t> ids;
    for (char c : text) {
      if (rng() % 7 == 0)
        ids.push_back(static_cast<int32_t>(3 + 256 + rng() % 3));
      ids.push_back(Byte(static_cast<uint8_t>(c)));
    }
    if (round % 5 == 0)
      ids.push_back(Byte(static_cast<uint8_t>(rng())));  // maybe invalid
    for (bool skip : {false, true}) {
      StreamingDetokenizer stream(*tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string chunk = stream.Push(id);
        // Each chunk ends on a character boundary of the decoded text.
        if (utf8::IsValid(tok->Decode(ids, skip))) {
          EXPECT_TRUE(utf8::IsValid(chunk));
        }
        streamed += chunk;
      }
      streamed += stream.Flush();
      EXPECT_EQ(streamed, tok->Decode(ids, skip));
    }
  }
}

}  // namespace
}  // namespace redline::model
