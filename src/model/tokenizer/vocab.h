// Vocab: the token table every tokenizer model works on (internal to the
// tokenizer folder).
//
// Ownership: owns the token strings, scores and types. Thread-safety:
// immutable after Build; all methods are const and safe to call concurrently.
// Cost: Build is O(vocab size); lookups are O(length of the text).
#ifndef REDLINE_MODEL_TOKENIZER_VOCAB_H_
#define REDLINE_MODEL_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/flat_maps.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::model::tokenizer_internal {

class Vocab {
 public:
  // Takes the token texts; empty texts become "[EMPTY_<id>]" (as llama.cpp
  // does) so every token has a findable text. Duplicate texts are allowed;
  // lookups return the lowest id. `scores` and `types` may be empty (0 and
  // kNormal) or must have one entry per token (checked by the caller).
  void Build(std::vector<std::string> texts, std::vector<float> scores,
             std::vector<TokenType> types);

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool IsValid(int32_t id) const { return id >= 0 && id < size(); }

  const std::string& text(int32_t id) const {
    return texts_[static_cast<size_t>(id)];
  }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  void set_type(int32_t id, TokenType type) {
    types_[static_cast<size_t>(id)] = type;
  }
  const std::vector<std::string>& texts() const { return texts_; }

  // The id of the token whose text is exactly `text`, or -1.
  int32_t Find(std::string_view text) const {
    return index_.Find(texts_, text);
  }

  // Longest token text in bytes.
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  StringIdIndex index_;
  size_t max_token_bytes_ = 0;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_VOCAB_H_
