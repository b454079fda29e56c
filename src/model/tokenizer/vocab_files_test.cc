// Golden tests against the real vocabularies in
// ${RL_SHARED_DIR}/testdata/vocab: every .inp string must encode to the .out
// ids (add_special = false, parse_special = false), decode back to itself where
// the tokenizer is lossless, and stream-decode to the same text. Skipped when
// the shared test data is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "model/gguf/gguf.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode_data.h"

namespace redline::model {
namespace {

const std::string kVocabDir = std::string(RL_SHARED_DIR) + "/testdata/vocab/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The .inp format: each string followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> ReadInputs(const std::string& path) {
  const std::string data = ReadFile(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t hit = data.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(data.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> ReadOutputs(const std::string& path) {
  std::vector<std::vector<int32_t>> out;
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int64_t id;
    while (ls >> id) ids.push_back(static_cast<int32_t>(id));
    out.push_back(std::move(ids));
  }
  return out;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

std::unique_ptr<Tokenizer> Load(const std::string& name) {
  auto file = gguf::GgufFile::Open(kVocabDir + "ggml-vocab-" + name + ".gguf",
                                   /*require_supported_types=*/false);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (!tok.ok()) return nullptr;
  return std::move(tok).value();
}

bool HaveTestData() { return std::filesystem::exists(kVocabDir); }

class VocabFileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabFileTest, EncodesDecodesAndStreamsEveryString) {
  if (!HaveTestData()) GTEST_SKIP() << "no shared test data at " << kVocabDir;
  const std::string name = GetParam();
  const std::string base = kVocabDir + "ggml-vocab-" + name + ".gguf";
  auto tok = Load(name);
  ASSERT_NE(tok, nullptr);
  const auto inputs = ReadInputs(base + ".inp");
  const auto expected = ReadOutputs(base + ".out");
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_FALSE(inputs.empty());
  // WordPiece lower-cases and drops accents: not lossless.
  const bool lossless = tok->model() != "bert";

  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& text = inputs[i];
    const std::vector<int32_t> ids = tok->Encode(text, /*add_special=*/false,
                                                 /*parse_special=*/false);
    EXPECT_EQ(Join(ids), Join(expected[i]))
        << name << " string " << i << ": '" << text << "'";
    if (ids == expected[i]) ++passed;

    const std::string decoded = tok->Decode(ids);
    if (lossless) {
      EXPECT_EQ(decoded, text) << name << " decode of string " << i;
    }
    // Streaming equals whole decoding, and no chunk splits a character.
    StreamingDetokenizer stream(*tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string chunk = stream.Push(id);
      EXPECT_TRUE(utf8::IsValid(chunk)) << name << " string " << i;
      streamed += chunk;
    }
    streamed += stream.Flush();
    EXPECT_EQ(streamed, decoded) << name << " streaming of string " << i;
  }
  std::printf("[ vocab    ] %-13s %d/%zu\n", name.c_str(), passed,
              inputs.size());
}

// Random bytes (malformed UTF-8, NULs, stray special-token text) and random
// code points through every vocabulary: never a crash or an id out of range;
// lossless models give valid text back. (Malformed input is not always
// recoverable: some byte-level vocabularies lack the characters of bytes
// that never occur in UTF-8, such as 0xC0, and SentencePiece cannot tell a
// literal "▁" from a space.)
TEST_P(VocabFileTest, HostileInput) {
  if (!HaveTestData()) GTEST_SKIP();
  auto tok = Load(GetParam());
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(99);
  const std::string fragments[] = {
      "<s>",    "</s>", "<|im_start|>", "\xF0\x9F", "[CLS]",
      "<0x41>", "  ",   "\n",           "\r\n",     "\t "};
  int checked = 0;
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const bool valid_only = round % 2 == 0;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const uint32_t r = rng() % 8;
      if (r == 0) {
        text += fragments[rng() % 10];
      } else if (r < 4 || valid_only) {
        uint32_t cp = rng() % (r < 6 ? 0x3000 : 0x110000);
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        utf8::AppendCodepoint(cp, &text);
      } else {
        text.push_back(static_cast<char>(rng()));
      }
    }
    for (bool parse_special : {false, true}) {
      const auto ids = tok->Encode(text, /*add_special=*/true, parse_special);
      for (int32_t id : ids) {
        ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << id;
      }
      const std::string decoded = tok->Decode(ids, /*skip_special=*/true);
      const bool spm = tok->model() == "llama";
      // SentencePiece adds a space after a special (here: user-defined) token.
      const bool spm_special =
          spm && std::any_of(ids.begin(), ids.end(), [&](int32_t id) {
            return tok->token_type(id) == TokenType::kUserDefined;
          });
      // Byte-level vocabularies may lack the characters of rare bytes.
      const bool bpe_gap =
          tok->model() == "gpt2" &&
          std::any_of(text.begin(), text.end(), [&](char c) {
            return !tok->FindToken(
                           byte_level::ByteToText(static_cast<uint8_t>(c)))
                        .has_value();
          });
      if (tok->model() != "bert" && !parse_special && utf8::IsValid(text) &&
          !spm_special && !bpe_gap &&
          !(spm && text.find("\xE2\x96\x81") != std::string::npos)) {
        // Qwen normalizes to NFC, so that is what comes back.
        std::string expected = text;
        if (tok->pre() == "qwen2") {
          expected.clear();
          unicode_data::AppendNfc(text, &expected);
        }
        EXPECT_EQ(decoded, expected) << GetParam();
        ++checked;
      }
    }
  }
  if (tok->model() != "bert") {
    EXPECT_GT(checked, 40);
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabFileTest,
                         ::testing::Values("bert-bge", "deepseek-llm", "falcon",
                                           "gpt-2", "llama-bpe", "llama-spm",
                                           "phi-3", "qwen2", "refact",
                                           "starcoder"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// Vocabularies without test files still load and round-trip the strings.
class VocabLoadOnlyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabLoadOnlyTest, LoadsAndRoundTrips) {
  if (!HaveTestData()) GTEST_SKIP() << "no shared test data at " << kVocabDir;
  auto tok = Load(GetParam());
  ASSERT_NE(tok, nullptr);
  for (const std::string& text :
       ReadInputs(kVocabDir + "ggml-vocab-gpt-2.gguf.inp")) {
    const auto ids = tok->Encode(text, false, false);
    EXPECT_EQ(tok->Decode(ids), text) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Others, VocabLoadOnlyTest,
                         ::testing::Values("baichuan", "gpt-neox"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// Strings beyond the .inp list (CJK, emoji sequences, code, odd whitespace,
// contractions, long digit runs). Expected ids come from the Hugging Face
// tokenizer.json of the same vocabularies (run through transformers.js, whose
// results also match all 46 .out lines).
struct ReferenceCase {
  const char* text;
  std::vector<int32_t> llama3;
  std::vector<int32_t> qwen2;
};

const std::vector<ReferenceCase>& ReferenceCases() {
  static const std::vector<ReferenceCase> cases = {
      {"你好，世界！我想在apple工作。",
       {57668, 53901, 3922, 102616, 6447, 37046, 101067, 19000, 23182, 102301,
        1811},
       {108386, 3837, 99489, 6313, 104100, 18493, 22377, 99257, 1773}},
      {"東京は日本の首都です。",
       {111344, 15682, 102433, 16144, 61075, 72368, 38641, 1811},
       {102356, 46553, 15322, 131888, 106114, 37541, 1773}},
      {"👨‍👩‍👧‍👦 family 👍🏽 ok 🇺🇸",
       {9468, 239,    101,   102470, 9468, 239,  102,   102470, 9468, 239,
        100,  102470, 9468,  239,    99,   3070, 62904, 235,    9468, 237,
        121,  5509,   11410, 229,    118,  9468, 229,   116},
       {145367, 378, 235, 145233, 378, 235, 145665, 378, 235, 145988, 2997,
        61804, 235, 145375, 5394, 11162, 229, 118, 145383}},
      {"def foo(x):\n    return x**2  # square\n",
       {755, 15586, 2120, 997, 262, 471, 865, 334, 17, 220, 674, 9518, 198},
       {750, 15229, 2075, 982, 262, 470, 856, 334, 17, 220, 671, 9334, 198}},
      {"for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
       {2000, 320,  396, 602, 284, 220,   15,   26,  602,  366, 308,
        26,   3526, 72,  8,   341, 32579, 1447, 264, 1004, 947, 534},
       {1958, 320,  396, 600, 284, 220,   15,   26,  600, 366, 308,
        26,   3443, 72,  8,   341, 31479, 1421, 264, 989, 935, 532}},
      {"  leading and trailing  \t\n",
       {220, 6522, 323, 28848, 99351},
       {220, 6388, 323, 27748, 98251}},
      {"\r\n\r\n\t \u00a0\u3000x",
       {881, 197, 17529, 23249, 87},
       {871, 197, 17091, 22441, 87}},
      {"I'M sure YOU'LL see we'VE 1234567 items",
       {40, 28703, 2771, 15334, 6, 4178, 1518, 584, 6, 4592, 220, 4513, 10961,
        22, 3673},
       {40, 27603, 2704, 14985, 6, 4086, 1490, 582, 6, 4491, 220, 16, 17, 18,
        19, 20, 21, 22, 3589}},
  };
  return cases;
}

TEST(VocabReference, Llama3AndQwen2BeyondTheInpList) {
  if (!HaveTestData()) GTEST_SKIP();
  auto llama3 = Load("llama-bpe");
  auto qwen2 = Load("qwen2");
  ASSERT_NE(llama3, nullptr);
  ASSERT_NE(qwen2, nullptr);
  for (const ReferenceCase& c : ReferenceCases()) {
    EXPECT_EQ(Join(llama3->Encode(c.text, false, false)), Join(c.llama3))
        << c.text;
    EXPECT_EQ(Join(qwen2->Encode(c.text, false, false)), Join(c.qwen2))
        << c.text;
    EXPECT_EQ(llama3->Decode(c.llama3), c.text);
    EXPECT_EQ(qwen2->Decode(c.qwen2), c.text);
  }
  // Qwen normalizes to NFC (Hugging Face does); Llama 3 does not.
  const std::string composed =
      "C\xE1\xBB\xAD"
      "a Vi\xE1\xBB\x87t";  // Cửa Việt
  const std::string decomposed =
      "Cu\xCC\x9B\xCC\x89"
      "a Vie\xCC\xA3\xCC\x82t";
  EXPECT_EQ(qwen2->Encode(decomposed, false, false),
            qwen2->Encode(composed, false, false));
  EXPECT_NE(llama3->Encode(decomposed, false, false),
            llama3->Encode(composed, false, false));
  EXPECT_EQ(llama3->Decode(llama3->Encode(decomposed, false, false)),
            decomposed);
  // Chat markup with parse_special, as Hugging Face encodes it.
  EXPECT_EQ(Join(qwen2->Encode("<|im_start|>user\nhi<|im_end|>", false, true)),
            Join({151644, 872, 198, 6023, 151645}));
  // Without parse_special they are text (llama.cpp's parse_special=false).
  EXPECT_EQ(
      Join(llama3->Encode("<|im_start|>user\nhi<|im_end|>", false, false)),
      Join({27, 91, 318, 5011, 91, 29, 882, 198, 6151, 27, 91, 318, 6345, 91,
            29}));
}

// Special tokens, BOS/EOS and EOG on real vocabularies.
TEST(VocabSpecialTokens, Llama3ChatMarkers) {
  if (!HaveTestData()) GTEST_SKIP();
  auto tok = Load("llama-bpe");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128001);
  EXPECT_TRUE(tok->add_bos());  // llama.cpp's default for llama-bpe
  const std::string text =
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  const auto parsed =
      tok->Encode(text, /*add_special=*/true, /*parse_special=*/true);
  ASSERT_GE(parsed.size(), 5u);
  EXPECT_EQ(parsed[0], 128000);
  EXPECT_EQ(parsed[1], *tok->FindToken("<|start_header_id|>"));
  EXPECT_EQ(parsed.back(), *tok->FindToken("<|eot_id|>"));
  EXPECT_TRUE(tok->IsEog(parsed.back()));
  EXPECT_TRUE(tok->IsEog(128001));
  EXPECT_FALSE(tok->IsEog(parsed[1]));
  // Without parse_special the markers are plain text.
  const auto plain = tok->Encode(text, false, false);
  for (int32_t id : plain) {
    EXPECT_LT(id, 128000);
  }
  EXPECT_EQ(tok->Decode(plain), text);
  EXPECT_EQ(tok->Decode(parsed), "<|begin_of_text|>" + text);
  EXPECT_EQ(tok->Decode(parsed, /*skip_special=*/true), "user\n\nHi");
}

TEST(VocabSpecialTokens, QwenUserDefinedAlwaysMatched) {
  if (!HaveTestData()) GTEST_SKIP();
  auto tok = Load("qwen2");
  ASSERT_NE(tok, nullptr);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->eos_id(), 151645);
  EXPECT_TRUE(tok->IsEog(151645));  // <|im_end|>
  EXPECT_TRUE(tok->IsEog(*tok->FindToken("<|endoftext|>")));
  const int32_t think = *tok->FindToken("<think>");
  const auto ids = tok->Encode("<think>\nok</think>", false, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], think);
  EXPECT_EQ(ids.back(), *tok->FindToken("</think>"));
  EXPECT_EQ(tok->Decode(ids), "<think>\nok</think>");
  // <|im_start|> is control: text unless parse_special.
  const auto plain = tok->Encode("<|im_start|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  const auto parsed = tok->Encode("<|im_start|>", false, true);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(tok->TokenText(parsed[0]), "<|im_start|>");
  // Padding entries are unused and render as nothing.
  EXPECT_EQ(tok->TokenToPiece(151935), "");
}

TEST(VocabSpecialTokens, LlamaSpmBosAndSpacePrefix) {
  if (!HaveTestData()) GTEST_SKIP();
  auto tok = Load("llama-spm");
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->add_bos());
  const auto ids = tok->Encode("Hello world", true, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 15043);  // "▁Hello"
  EXPECT_EQ(tok->Decode(ids, /*skip_special=*/true), "Hello world");
  EXPECT_EQ(tok->Decode(ids), "<s> Hello world");
  // Special text: parsed, with a space prefix after it (llama.cpp).
  const auto parsed = tok->Encode("</s>Hi", false, true);
  ASSERT_GE(parsed.size(), 2u);
  EXPECT_EQ(parsed[0], 2);
  EXPECT_TRUE(tok->IsEog(2));
  // Byte fallback for characters outside the vocabulary.
  const auto bytes = tok->Encode("\xF0\x9F\xA6\x99", false, false);  // 🦙
  EXPECT_EQ(tok->Decode(bytes), "\xF0\x9F\xA6\x99");
}

TEST(VocabSpecialTokens, BertAddsClsAndSep) {
  if (!HaveTestData()) GTEST_SKIP();
  auto tok = Load("bert-bge");
  ASSERT_NE(tok, nullptr);
  const auto ids = tok->Encode("Hello world", true, false);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[0], 101);
  EXPECT_EQ(ids[3], 102);
  EXPECT_EQ(tok->Decode(ids, true), "hello world");
}

}  // namespace
}  // namespace redline::model
