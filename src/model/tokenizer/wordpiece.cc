#include "model/tokenizer/wordpiece.h"

#include "base/utf8.h"
#include "model/tokenizer/unicode_data.h"

namespace redline::model::tokenizer_internal {
namespace {

// Hugging Face's limit (max_input_chars_per_word).
constexpr size_t kMaxWordChars = 100;

// "▁" (U+2581), llama.cpp's marker for word-initial pieces.
constexpr std::string_view kWordStart = "\xE2\x96\x81";

// The CJK ranges BERT treats as words of their own (Hugging Face's
// is_chinese_char, including its 0x2B920 start).
bool IsChineseChar(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool IsBertPunctuation(uint32_t cp) {
  const bool ascii_punct =
      (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) ||
      (cp >= 0x5B && cp <= 0x60) || (cp >= 0x7B && cp <= 0x7E);
  return ascii_punct || unicode_data::IsPunctuation(cp);
}

}  // namespace

WordPieceModel::WordPieceModel(const Vocab& vocab, int32_t unk_id,
                               bool lowercase, bool strip_accents)
    : vocab_(vocab),
      unk_id_(unk_id),
      lowercase_(lowercase),
      strip_accents_(strip_accents) {}

std::vector<std::string> WordPieceModel::SplitWords(
    std::string_view text) const {
  std::vector<std::string> words(1);
  auto finish_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  // Emits one normalized code point (after cleaning and decomposition).
  auto emit = [&](uint32_t cp) {
    if (strip_accents_ && unicode_data::IsNonspacingMark(cp)) return;
    if (unicode_data::IsWhitespace(cp)) {
      finish_word();
      return;
    }
    if (IsBertPunctuation(cp) || IsChineseChar(cp)) {
      finish_word();
      words.back().clear();
      // Lower-casing never turns punctuation or CJK into anything else.
      utf8::AppendCodepoint(cp, &words.back());
      words.emplace_back();
      return;
    }
    if (lowercase_) {
      const auto lower = unicode_data::Lowercase(cp);
      if (!lower.empty()) {
        for (uint32_t l : lower) utf8::AppendCodepoint(l, &words.back());
        return;
      }
    }
    utf8::AppendCodepoint(cp, &words.back());
  };

  for (size_t pos = 0; pos < text.size();) {
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (byte >= 0x20 && byte < 0x7F) {
      // Printable ASCII: no table lookups (the common case).
      ++pos;
      if (byte == ' ') {
        finish_word();
      } else if (IsBertPunctuation(byte)) {
        finish_word();
        words.back().assign(1, static_cast<char>(byte));
        words.emplace_back();
      } else {
        words.back().push_back(static_cast<char>(
            lowercase_ && byte >= 'A' && byte <= 'Z' ? byte + 32 : byte));
      }
      continue;
    }
    size_t len = 0;
    const uint32_t cp = utf8::DecodeCodepoint(text, pos, &len);
    pos += len;
    // clean_text: NUL, U+FFFD (also what malformed bytes decode to) and
    // control characters other than \t \n \r disappear.
    if (cp == 0 || cp == utf8::kReplacementChar) continue;
    if (cp != '\t' && cp != '\n' && cp != '\r' && unicode_data::IsOther(cp))
      continue;
    if (strip_accents_) {
      uint32_t decomposed[8];
      size_t n = 0;
      if (unicode_data::AppendDecomposition(cp, decomposed, &n)) {
        for (size_t i = 0; i < n; ++i) emit(decomposed[i]);
        continue;
      }
    }
    emit(cp);
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void WordPieceModel::EncodeWord(std::string_view word,
                                std::vector<int32_t>* out) const {
  size_t chars = 0;
  for (size_t pos = 0; pos < word.size(); pos += utf8::CharLength(word, pos))
    ++chars;
  const size_t before = out->size();
  bool ok = chars <= kMaxWordChars;
  std::string candidate;
  for (size_t start = 0; ok && start < word.size();) {
    // Longest piece starting at `start` (ends on character boundaries).
    int32_t found = -1;
    size_t found_end = start;
    size_t end = std::min(word.size(), start + vocab_.max_token_bytes());
    while (end > start) {
      // Move `end` back to a character boundary.
      while (end > start && end < word.size() &&
             (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80) {
        --end;
      }
      if (end == start) break;
      candidate.clear();
      if (start == 0) candidate.append(kWordStart);
      candidate.append(word.substr(start, end - start));
      const int32_t id = vocab_.Find(candidate);
      if (id >= 0) {
        found = id;
        found_end = end;
        break;
      }
      --end;
    }
    if (found < 0) {
      ok = false;
      break;
    }
    out->push_back(found);
    start = found_end;
  }
  if (!ok) {
    out->resize(before);
    if (unk_id_ >= 0) out->push_back(unk_id_);
  }
}

void WordPieceModel::Encode(std::string_view text,
                            std::vector<int32_t>* out) const {
  for (const std::string& word : SplitWords(text)) EncodeWord(word, out);
}

}  // namespace redline::model::tokenizer_internal
