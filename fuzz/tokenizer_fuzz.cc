// libFuzzer target for the tokenizers: arbitrary bytes through small
// synthetic vocabularies of each kind (SentencePiece "llama", byte-level BPE
// "gpt2" under every known tokenizer.ggml.pre, WordPiece "bert"), built once
// at start-up the way the tokenizer tests build theirs.
//
// Input: byte 0 picks the tokenizer, byte 1 the flags (add_special,
// parse_special, skip_special, continuation), the rest is the text. Checks:
//   - every id is inside the vocabulary, and encoding is deterministic (the
//     second call goes through the word cache);
//   - EncodeAppend appends exactly what Encode returns;
//   - streaming detokenization concatenates to Decode, for the encoded ids
//     and for the input read as arbitrary (also out-of-range) ids;
//   - Decode(Encode(x)) == x where the tokenizer promises it: not WordPiece
//     (it lower-cases and strips accents), valid UTF-8, special tokens not
//     parsed, no user-defined token matched in SentencePiece (it adds a space
//     after one) and no literal "▁" (SentencePiece cannot tell it from a
//     space); NFC-normalising pre-tokenizers give NFC text back, checked as
//     a fixed point (decoding the round trip again changes nothing).
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target tokenizer_fuzz
//   fuzzer=./build/fuzz/fuzz/tokenizer_fuzz
//   $fuzzer -max_total_time=60 tests/data/tokenizer_seeds
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using redline::model::StreamingDetokenizer;
using redline::model::Tokenizer;
using redline::model::TokenizerSpec;
using redline::model::TokenType;

constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁

struct Subject {
  std::string name;
  std::unique_ptr<Tokenizer> tokenizer;
  // Decode(Encode(x)) == x for valid UTF-8 (with the exceptions above).
  bool lossless = false;
  // The text comes back in NFC, not byte for byte.
  bool nfc = false;
};

std::unique_ptr<Tokenizer> Build(TokenizerSpec spec) {
  auto tok = Tokenizer::FromSpec(std::move(spec));
  RL_CHECK(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

// Shaped like `redline make-model`'s vocabulary: <unk>, <s>, </s>, the 256
// byte tokens, scored pieces whose merges overlap, chat markers and a
// user-defined token.
TokenizerSpec SpmSpec() {
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
  const std::string s(kSpace);
  add(s, -10, TokenType::kNormal);
  add(s + s, -12, TokenType::kNormal);
  for (const char* piece : {"a", "b", "c", "d", "e", "\xC3\xA9"}) {
    add(piece, -20, TokenType::kNormal);
  }
  add(s + "a", -1, TokenType::kNormal);
  add(s + "ab", -2, TokenType::kNormal);
  add(s + "abc", -3, TokenType::kNormal);
  add("bc", -1.5f, TokenType::kNormal);
  add("cd", -1.5f, TokenType::kNormal);
  add("abcd", -4, TokenType::kNormal);
  add("<|im_start|>", 0, TokenType::kControl);
  add("<|im_end|>", 0, TokenType::kControl);
  add("<tool>", 0, TokenType::kUserDefined);
  add("\xE4\xBD\xA0", -5, TokenType::kNormal);      // 你
  add("\xF0\x9F\x98\x80", -6, TokenType::kNormal);  // 😀
  return spec;
}

// Byte-level BPE: the 256 byte characters, merges over a few letters and the
// space character "Ġ", control tokens and a user-defined one.
TokenizerSpec BpeSpec(const std::string& pre) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = pre;
  for (int b = 0; b < 256; ++b) {
    spec.tokens.emplace_back(
        redline::model::byte_level::ByteToText(static_cast<uint8_t>(b)));
  }
  const std::string g = "\xC4\xA0";  // Ġ, the byte-level space
  for (const std::string& t :
       {std::string("ab"), std::string("abc"), g + "a", g + "ab",
        std::string("xyz"), std::string("\n\n"), g + g}) {
    spec.tokens.push_back(t);
  }
  spec.merges = {"a b", "ab c", g + " a",   g + "a b",
                 "x y", "xy z", g + " " + g};
  spec.tokens.emplace_back("xy");
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  for (const char* special : {"<|endoftext|>", "<|im_start|>"}) {
    spec.tokens.emplace_back(special);
    spec.types.push_back(TokenType::kControl);
  }
  spec.tokens.emplace_back("<think>");
  spec.types.push_back(TokenType::kUserDefined);
  spec.eos_id = 256 + 8;
  return spec;
}

// WordPiece as llama.cpp converts it: word-initial pieces start with "▁",
// continuation pieces have no "##".
TokenizerSpec WordPieceSpec() {
  TokenizerSpec spec;
  spec.model = "bert";
  const std::string s(kSpace);
  for (const std::string& t :
       {std::string("[PAD]"), std::string("[UNK]"), std::string("[CLS]"),
        std::string("[SEP]"), std::string("[MASK]"), s + "hello", s + "world",
        s + "a", s + "ab", std::string("b"), std::string("c"),
        std::string("ing"), s + "play", s + ",", s + ".", s + "!",
        s + "\xE4\xBD\xA0", s + "e", std::string("e")}) {
    spec.tokens.push_back(t);
  }
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  for (int i = 0; i < 5; ++i) spec.types[i] = TokenType::kControl;
  spec.types[1] = TokenType::kUnknown;
  spec.pad_id = 0;
  spec.unk_id = 1;
  spec.bos_id = 2;
  spec.sep_id = 3;
  return spec;
}

std::vector<Subject> BuildSubjects() {
  std::vector<Subject> subjects;
  subjects.push_back({"llama", Build(SpmSpec()), true, false});
  subjects.push_back({"bert", Build(WordPieceSpec()), false, false});
  for (const std::string& pre :
       redline::model::tokenizer_internal::KnownPreTokenizers()) {
    auto config = redline::model::tokenizer_internal::FindPreTokenizer(pre);
    RL_CHECK(config.ok()) << config.status().ToString();
    subjects.push_back({"gpt2/" + pre, Build(BpeSpec(pre)), true, config->nfc});
  }
  return subjects;
}

// An oracle of its own rather than the tokenizer's UTF-8 helpers, which are
// part of what is under test.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;  // continuation bytes
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

void CheckIds(const Subject& subject, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    RL_CHECK(id >= 0 && id < subject.tokenizer->vocab_size())
        << subject.name << ": id " << id << " outside the vocabulary";
  }
}

// Streaming detokenization must concatenate to Decode.
void CheckStreaming(const Subject& subject, std::span<const int32_t> ids,
                    bool skip_special, bool continuation) {
  const Tokenizer& tok = *subject.tokenizer;
  StreamingDetokenizer stream(tok, skip_special, continuation);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.Push(id);
  streamed += stream.Flush();
  RL_CHECK(streamed == tok.Decode(ids, skip_special, continuation))
      << subject.name << ": streamed text differs from Decode";
}

bool HasUserDefined(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    if (tok.token_type(id) == TokenType::kUserDefined) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Subject>* const subjects =
      new std::vector<Subject>(BuildSubjects());
  if (size < 2) return 0;
  const Subject& subject = (*subjects)[data[0] % subjects->size()];
  const Tokenizer& tok = *subject.tokenizer;
  const uint8_t flags = data[1];
  const bool add_special = flags & 1;
  const bool parse_special = flags & 2;
  const bool skip_special = flags & 4;
  const bool continuation = flags & 8;
  const std::string_view text(reinterpret_cast<const char*>(data + 2),
                              size - 2);

  const std::vector<int32_t> ids = tok.Encode(text, add_special, parse_special);
  CheckIds(subject, ids);
  RL_CHECK(tok.Encode(text, add_special, parse_special) == ids)
      << subject.name << ": encoding is not deterministic";
  std::vector<int32_t> appended = {7};
  tok.EncodeAppend(text, add_special, parse_special, &appended);
  RL_CHECK(appended.size() == ids.size() + 1 && appended[0] == 7 &&
           std::equal(ids.begin(), ids.end(), appended.begin() + 1))
      << subject.name << ": EncodeAppend differs from Encode";
  CheckStreaming(subject, ids, skip_special, continuation);

  // The same bytes read as token ids, in and out of the vocabulary.
  std::vector<int32_t> raw_ids;
  for (size_t i = 2; i + 2 <= size; i += 2) {
    const int v = data[i] | (data[i + 1] << 8);
    raw_ids.push_back(static_cast<int32_t>(v % (tok.vocab_size() + 8)) - 4);
  }
  CheckStreaming(subject, raw_ids, skip_special, continuation);

  if (subject.lossless && !parse_special && IsValidUtf8(text) &&
      !(tok.model() == "llama" &&
        (HasUserDefined(tok, ids) ||
         text.find(kSpace) != std::string_view::npos))) {
    // skip_special drops the BOS/EOS that add_special put in.
    const std::string decoded = tok.Decode(ids, /*skip_special=*/true);
    if (subject.nfc) {
      const std::string again = tok.Decode(
          tok.Encode(decoded, /*add_special=*/false, /*parse_special=*/false),
          /*skip_special=*/true);
      RL_CHECK(again == decoded)
          << subject.name << ": NFC round trip is not a fixed point";
    } else {
      RL_CHECK(decoded == text) << subject.name << ": Decode(Encode(x)) != x";
    }
  }
  return 0;
}
