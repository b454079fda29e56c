// Tokenizer tests on small synthetic vocabularies (no files needed).
#include "model/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/utf8.h"
#include "model/tokenizer/byte_level.h"

namespace redline::model {
namespace {

// A vocabulary shaped like `redline make-model`'s: <unk>, <s>, </s>, the 256
// byte tokens, then scored pieces; plus chat markers.
TokenizerSpec SyntheticSpm() {
  TokenizerSpec spec;
  spec.model = "llama";
  auto add = [&](std::string text, float score, TokenType type) {
    spec.tokens.push_back(std::move(text));
    spec.scores.push_back(score);
    spec.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    add(hex, 0, TokenType::kByte);
  }
  // Scores decide the merge order: "▁a" first, then "▁ab", then "▁abc".
  add("\xE2\x96\x81", -10, TokenType::kNormal);  // ▁
  add("a", -20, TokenType::kNormal);
  add("b", -20, TokenType::kNormal);
  add("c", -20, TokenType::kNormal);
  add("\xE2\x96\x81"
      "a",
      -1, TokenType::kNormal);
  add("\xE2\x96\x81"
      "ab",
      -2, TokenType::kNormal);
  add("\xE2\x96\x81"
      "abc",
      -3, TokenType::kNormal);
  add("bc", -1.5f, TokenType::kNormal);
  add("<|im_start|>", 0, TokenType::kControl);
  add("<|im_end|>", 0, TokenType::kControl);
  add("<tool>", 0, TokenType::kUserDefined);
  add("\xE4\xBD\xA0", -5, TokenType::kNormal);  // 你
  return spec;
}

std::unique_ptr<Tokenizer> Build(TokenizerSpec spec) {
  auto tok = Tokenizer::FromSpec(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

int32_t Id(const Tokenizer& tok, std::string_view text) {
  auto id = tok.FindToken(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(-1);
}

TEST(SpmTokenizer, MergesByScoreWithSpacePrefix) {
  auto tok = Build(SyntheticSpm());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->Encode("abc", false, false),
            (std::vector<int32_t>{Id(*tok, "▁abc")}));
  // "▁bc" is no token: "▁" then "bc".
  EXPECT_EQ(tok->Encode("abc bc", true, false),
            (std::vector<int32_t>{1, Id(*tok, "▁abc"), Id(*tok, "▁"),
                                  Id(*tok, "bc")}));
  EXPECT_EQ(tok->Decode(tok->Encode("abc bc", true, false), true), "abc bc");
  EXPECT_EQ(tok->Encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok->Encode("", false, false).empty());
}

TEST(SpmTokenizer, ByteFallbackRoundTripsAnything) {
  auto tok = Build(SyntheticSpm());
  ASSERT_NE(tok, nullptr);
  const std::string samples[] = {
      "你好",
      "🦙 emoji \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F",
      "tab\tnew\nline",
      "  two leading",
      "trailing  ",
      "\xFF\xFE invalid \xC3 bytes \xE4\xBD",
      std::string("nul\0in", 6),
  };
  for (const std::string& s : samples) {
    const auto ids = tok->Encode(s, false, false);
    EXPECT_EQ(tok->Decode(ids), s);
  }
  // 你 is a piece; 好 falls back to its three bytes.
  const auto ids = tok->Encode("你好", false, false);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids[0], Id(*tok, "▁"));
  EXPECT_EQ(ids[1], Id(*tok, "你"));
  EXPECT_EQ(tok->token_type(ids[2]), TokenType::kByte);
}

TEST(SpmTokenizer, ParseSpecialControlsMarkers) {
  auto tok = Build(SyntheticSpm());
  ASSERT_NE(tok, nullptr);
  const std::string text = "<|im_start|>abc<|im_end|>";
  const auto parsed = tok->Encode(text, false, true);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0], Id(*tok, "<|im_start|>"));
  EXPECT_EQ(parsed[1], Id(*tok, "▁abc"));  // space prefix after a special token
  EXPECT_EQ(parsed[2], Id(*tok, "<|im_end|>"));
  EXPECT_TRUE(tok->IsEog(parsed[2]));
  EXPECT_FALSE(tok->IsEog(parsed[0]));
  // As text, the markers spell themselves out.
  const auto plain = tok->Encode(text, false, false);
  EXPECT_GT(plain.size(), 3u);
  for (int32_t id : plain) {
    EXPECT_NE(tok->token_type(id), TokenType::kControl);
  }
  EXPECT_EQ(tok->Decode(plain), text);
  // User-defined tokens are matched either way.
  EXPECT_EQ(tok->Encode("<tool>", false, false),
            (std::vector<int32_t>{Id(*tok, "<tool>")}));
  // Decoding renders or skips control tokens.
  EXPECT_EQ(tok->Decode(parsed), "<|im_start|> abc<|im_end|>");
  EXPECT_EQ(tok->Decode(parsed, true),
            "abc");  // nothing before it: prefix dropped
}

TEST(SpmTokenizer, EogAndAccessors) {
  auto tok = Build(SyntheticSpm());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 3 + 256 + 12);
  EXPECT_TRUE(tok->IsEog(2));
  EXPECT_FALSE(tok->IsEog(1));
  EXPECT_FALSE(tok->IsEog(-1));
  EXPECT_FALSE(tok->IsEog(1 << 30));
  EXPECT_EQ(tok->eog_ids(), (std::vector<int32_t>{2, Id(*tok, "<|im_end|>")}));
  EXPECT_EQ(tok->TokenText(5), "<0x02>");
  EXPECT_EQ(tok->TokenToPiece(3 + 0x41), "A");
  EXPECT_EQ(tok->TokenToPiece(Id(*tok, "▁ab")), " ab");
  EXPECT_EQ(tok->TokenText(-7), "");
  EXPECT_EQ(tok->TokenToPiece(99999), "");
  EXPECT_FALSE(tok->FindToken("zzz").has_value());
  // Invalid ids decode to nothing rather than crash.
  const std::vector<int32_t> ids = {-1, 99999, Id(*tok, "▁abc")};
  EXPECT_EQ(tok->Decode(ids), "abc");
}

TEST(SpmTokenizer, WordSplittingMatchesWholeTextMerging) {
  // A token with an inner "▁" turns word splitting off; it is never formed
  // from the texts below (no 'z'), so both tokenizers must agree.
  TokenizerSpec whole = SyntheticSpm();
  whole.tokens.push_back("z\xE2\x96\x81z");
  whole.scores.push_back(-1);
  whole.types.push_back(TokenType::kNormal);
  auto split_tok = Build(SyntheticSpm());
  auto whole_tok = Build(whole);
  ASSERT_NE(split_tok, nullptr);
  ASSERT_NE(whole_tok, nullptr);
  std::mt19937 rng(5);
  const char* parts[] = {"a", "b",  "c",  "ab",           "abc",
                         " ", "  ", "\n", "\xE4\xBD\xA0", "\xFF"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) text += parts[rng() % 10];
    EXPECT_EQ(split_tok->Encode(text, true, false),
              whole_tok->Encode(text, true, false))
        << text;
    EXPECT_EQ(split_tok->Decode(split_tok->Encode(text, false, false)), text);
  }
}

TEST(SpmTokenizer, AddSpacePrefixCanBeTurnedOff) {
  TokenizerSpec spec = SyntheticSpm();
  spec.add_space_prefix = false;
  spec.add_bos = false;
  spec.add_eos = true;
  auto tok = Build(std::move(spec));
  ASSERT_NE(tok, nullptr);
  EXPECT_FALSE(tok->add_bos());
  const auto ids = tok->Encode("bc", true, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{Id(*tok, "bc"), 2}));
}

// A byte-level BPE vocabulary: the 256 byte characters plus a few merges.
TokenizerSpec SyntheticBpe(std::string pre) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) {
    spec.tokens.emplace_back(byte_level::ByteToText(static_cast<uint8_t>(b)));
  }
  for (const char* t : {"ab", "abc",
                        "\xC4\xA0"
                        "a",
                        "xyz", "<|endoftext|>", "<|im_start|>"}) {
    spec.tokens.emplace_back(t);
  }
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.types[spec.tokens.size() - 2] = TokenType::kControl;
  spec.types[spec.tokens.size() - 1] = TokenType::kControl;
  spec.merges = {"a b", "ab c", "\xC4\xA0 a"};
  spec.eos_id = 256 + 4;
  return spec;
}

TEST(BpeTokenizer, MergesByRank) {
  auto tok = Build(SyntheticBpe("gpt-2"));
  ASSERT_NE(tok, nullptr);
  EXPECT_FALSE(tok->add_bos());
  // " abc": "a b" (rank 0) beats "Ġ a" (rank 2); then "ab c".
  EXPECT_EQ(tok->Encode("abc abc", false, false),
            (std::vector<int32_t>{Id(*tok, "abc"), Id(*tok, "\xC4\xA0"),
                                  Id(*tok, "abc")}));
  EXPECT_EQ(tok->Encode(" a", false, false), (std::vector<int32_t>{Id(*tok,
                                                                      "\xC4\xA0"
                                                                      "a")}));
  // Without ignore_merges, "xyz" stays three bytes.
  EXPECT_EQ(tok->Encode("xyz", false, false).size(), 3u);
  EXPECT_TRUE(tok->IsEog(Id(*tok, "<|endoftext|>")));
}

TEST(BpeTokenizer, IgnoreMergesUsesWholeWordTokens) {
  auto tok = Build(SyntheticBpe("llama-bpe"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("xyz", false, false),
            (std::vector<int32_t>{Id(*tok, "xyz")}));
  EXPECT_TRUE(tok->add_bos() == false);  // no BOS id in this vocabulary
}

// Reference BPE over strings, to check the fast paths (short and long
// words, cached or not) against the textbook definition.
std::vector<std::string> ReferenceBpe(
    const std::string& word,
    const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> parts;
  for (char c : word)
    parts.emplace_back(byte_level::ByteToText(static_cast<uint8_t>(c)));
  while (parts.size() > 1) {
    int best_rank = INT32_MAX;
    size_t best = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find({parts[i], parts[i + 1]});
      if (it != ranks.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank == INT32_MAX) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  return parts;
}

TEST(BpeTokenizer, ShortAndLongWordsMatchReference) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt-2";
  for (int b = 0; b < 256; ++b) {
    spec.tokens.emplace_back(byte_level::ByteToText(static_cast<uint8_t>(b)));
  }
  // Merges over {a, b, c} with overlapping pairs so order matters.
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"},   {"b", "a"},       {"ab", "a"},  {"b", "c"},
      {"c", "c"},   {"a", "bc"},      {"ba", "ba"}, {"cc", "cc"},
      {"ab", "ab"}, {"abab", "abab"}, {"a", "a"}};
  std::map<std::pair<std::string, std::string>, int> ranks;
  for (const auto& [l, r] : merges) {
    if (ranks.count({l, r})) continue;
    ranks[{l, r}] = static_cast<int>(spec.merges.size());
    spec.merges.push_back(l + " " + r);
    bool present = false;
    for (const auto& t : spec.tokens) present = present || t == l + r;
    if (!present) spec.tokens.push_back(l + r);
  }
  auto tok = Build(spec);
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(42);
  for (int round = 0; round < 400; ++round) {
    const size_t len = 1 + rng() % 160;  // both sides of the short-word limit
    std::string word;
    for (size_t i = 0; i < len; ++i) word.push_back("abc"[rng() % 3]);
    std::vector<std::string> expected_text = ReferenceBpe(word, ranks);
    std::vector<int32_t> expected;
    for (const auto& t : expected_text) expected.push_back(Id(*tok, t));
    for (int pass = 0; pass < 2; ++pass) {  // second pass hits the cache
      EXPECT_EQ(tok->Encode(word, false, false), expected) << word;
    }
  }
}

TEST(BpeTokenizer, ConcurrentEncodesAgree) {
  auto tok = Build(SyntheticBpe("gpt-2"));
  ASSERT_NE(tok, nullptr);
  std::vector<std::string> texts;
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s;
    for (int j = 0; j < 40; ++j) s.push_back("abc xyz\n"[rng() % 8]);
    texts.push_back(s);
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : texts) expected.push_back(tok->Encode(s, false, false));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (tok->Encode(texts[i], false, false) != expected[i])
            ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) {
    EXPECT_EQ(m, 0);
  }
}

TEST(BpeTokenizer, HostileBytesDoNotCrash) {
  auto tok = Build(SyntheticBpe("llama-bpe"));
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const auto ids = tok->Encode(s, true, true);
    EXPECT_EQ(tok->Decode(ids), s);  // byte-level BPE is lossless for any bytes
  }
}

TEST(TokenizerErrors, UnknownModelIsNamed) {
  TokenizerSpec spec = SyntheticSpm();
  spec.model = "mystery";
  auto tok = Tokenizer::FromSpec(spec);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tok.status().message().find("mystery"), std::string::npos);

  spec.model = "t5";
  tok = Tokenizer::FromSpec(spec);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(tok.status().message().find("t5"), std::string::npos);
}

TEST(TokenizerErrors, UnknownPreIsNamed) {
  auto tok = Tokenizer::FromSpec(SyntheticBpe("brand-new-pre"));
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kNotFound);
  EXPECT_NE(tok.status().message().find("brand-new-pre"), std::string::npos);
}

TEST(TokenizerErrors, InconsistentArrays) {
  TokenizerSpec spec = SyntheticSpm();
  spec.scores.pop_back();
  EXPECT_EQ(Tokenizer::FromSpec(spec).status().code(),
            StatusCode::kInvalidArgument);
  spec = SyntheticSpm();
  spec.types.push_back(TokenType::kNormal);
  EXPECT_EQ(Tokenizer::FromSpec(spec).status().code(),
            StatusCode::kInvalidArgument);
  spec = TokenizerSpec{};
  spec.model = "llama";
  EXPECT_EQ(Tokenizer::FromSpec(spec).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(TokenizerSpec, OutOfRangeSpecialIdsAreIgnored) {
  TokenizerSpec spec = SyntheticSpm();
  spec.bos_id = 1 << 20;  // ignored: the default (1) stays
  spec.eos_id = -5;
  auto tok = Build(spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
}

TEST(TokenizerSpec, DuplicateAndEmptyPiecesAreTolerated) {
  TokenizerSpec spec = SyntheticSpm();
  spec.tokens.push_back("a");  // duplicate text: lookups find the first id
  spec.scores.push_back(0);
  spec.types.push_back(TokenType::kNormal);
  spec.tokens.push_back("");
  spec.scores.push_back(0);
  spec.types.push_back(TokenType::kNormal);
  auto tok = Build(spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(*tok->FindToken("a"), 3 + 256 + 1);
  EXPECT_EQ(tok->TokenText(static_cast<int32_t>(tok->vocab_size()) - 1),
            "[EMPTY_" + std::to_string(tok->vocab_size() - 1) + "]");
  EXPECT_EQ(tok->Decode(tok->Encode("ab c", false, false)), "ab c");
}

}  // namespace
}  // namespace redline::model
