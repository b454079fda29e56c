// SpecialTokenMatcher: finds special-token texts in input before the model's
// own splitting (internal).
//
// Matching is leftmost-longest, like the Aho-Corasick matcher Hugging Face
// uses for added tokens: scanning left to right, the first position where
// some token text starts wins, and among tokens starting there the longest.
// Tokens may strip whitespace on their left or right (llama.cpp's
// LSTRIP/RSTRIP attributes); the stripped whitespace is dropped.
//
// Thread-safety: immutable after construction. Cost: O(text bytes) scan with
// a per-first-byte candidate list; only bytes that start some token text are
// examined further.
#ifndef REDLINE_MODEL_TOKENIZER_SPECIAL_TOKENS_H_
#define REDLINE_MODEL_TOKENIZER_SPECIAL_TOKENS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redline::model::tokenizer_internal {

// One piece of input: either raw text to tokenize or a matched token.
struct Segment {
  int32_t token = -1;  // >= 0: a matched special token; text is empty
  std::string_view text;
};

class SpecialTokenMatcher {
 public:
  struct Token {
    std::string text;
    int32_t id;
    bool lstrip = false;
    bool rstrip = false;
  };

  explicit SpecialTokenMatcher(std::vector<Token> tokens);

  bool empty() const { return tokens_.empty(); }

  // Appends the segments of `text` to *out (raw segments are never empty).
  void Split(std::string_view text, std::vector<Segment>* out) const;

 private:
  std::vector<Token> tokens_;
  // For each first byte: indices into tokens_, longest text first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_SPECIAL_TOKENS_H_
