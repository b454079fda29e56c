// Golden tests against the real vocabularies in ${RL_SHARED_DIR}/testdata/vocab:
// every .inp string must encode to the .out ids (add_special = false,
// parse_special = false), decode back to itself where the tokenizer is
// lossless, and stream-decode to the same text. Skipped when the shared
// test data is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/gguf/gguf.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/utf8.h"

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
    EXPECT_EQ(Join(ids), Join(expected[i])) << name << " string " << i << ": '" << text << "'";
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
  std::printf("[ vocab    ] %-13s %d/%zu\n", name.c_str(), passed, inputs.size());
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabFileTest,
                         ::testing::Values("bert-bge", "deepseek-llm", "falcon", "gpt-2",
                                           "llama-bpe", "llama-spm", "phi-3", "qwen2", "refact",
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
  for (const std::string& text : ReadInputs(kVocabDir + "ggml-vocab-gpt-2.gguf.inp")) {
    const auto ids = tok->Encode(text, false, false);
    EXPECT_EQ(tok->Decode(ids), text) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Others, VocabLoadOnlyTest, ::testing::Values("baichuan", "gpt-neox"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// Special tokens, BOS/EOS and EOG on real vocabularies.
TEST(VocabSpecialTokens, Llama3ChatMarkers) {
  if (!HaveTestData()) GTEST_SKIP();
  auto tok = Load("llama-bpe");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128001);
  EXPECT_TRUE(tok->add_bos());  // llama.cpp's default for llama-bpe
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  const auto parsed = tok->Encode(text, /*add_special=*/true, /*parse_special=*/true);
  ASSERT_GE(parsed.size(), 5u);
  EXPECT_EQ(parsed[0], 128000);
  EXPECT_EQ(parsed[1], *tok->FindToken("<|start_header_id|>"));
  EXPECT_EQ(parsed.back(), *tok->FindToken("<|eot_id|>"));
  EXPECT_TRUE(tok->IsEog(parsed.back()));
  EXPECT_TRUE(tok->IsEog(128001));
  EXPECT_FALSE(tok->IsEog(parsed[1]));
  // Without parse_special the markers are plain text.
  const auto plain = tok->Encode(text, false, false);
  for (int32_t id : plain) EXPECT_LT(id, 128000);
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
  EXPECT_TRUE(tok->IsEog(151645));                         // <|im_end|>
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
