#include "model/tokenizer/vocab.h"

#include <algorithm>
#include <utility>

namespace redline::model::tokenizer_internal {

void Vocab::Build(std::vector<std::string> texts, std::vector<float> scores,
                  std::vector<TokenType> types) {
  texts_ = std::move(texts);
  const size_t n = texts_.size();
  scores_ = std::move(scores);
  if (scores_.size() != n) scores_.assign(n, 0.0f);
  types_ = std::move(types);
  if (types_.size() != n) types_.assign(n, TokenType::kNormal);
  max_token_bytes_ = 0;
  index_.Reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (texts_[i].empty()) texts_[i] = "[EMPTY_" + std::to_string(i) + "]";
    max_token_bytes_ = std::max(max_token_bytes_, texts_[i].size());
    index_.Insert(texts_, static_cast<int32_t>(i));  // first id wins
  }
}

}  // namespace redline::model::tokenizer_internal
