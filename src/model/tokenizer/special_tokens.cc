#include "model/tokenizer/special_tokens.h"

#include <algorithm>
#include <utility>

namespace redline::model::tokenizer_internal {
namespace {

// ASCII whitespace as C isspace() sees it in the "C" locale (what llama.cpp
// strips around LSTRIP/RSTRIP tokens).
inline bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
         c == '\r';
}

}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(std::vector<Token> tokens)
    : tokens_(std::move(tokens)) {
  // Drop empty texts: they would match everywhere.
  std::erase_if(tokens_, [](const Token& t) { return t.text.empty(); });
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<uint8_t>(tokens_[i].text[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].text.size() > tokens_[b].text.size();
    });
  }
}

void SpecialTokenMatcher::Split(std::string_view text,
                                std::vector<Segment>* out) const {
  size_t raw_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& candidates = by_first_byte_[static_cast<uint8_t>(text[pos])];
    const Token* match = nullptr;
    for (uint32_t index : candidates) {
      const Token& t = tokens_[index];
      if (text.size() - pos >= t.text.size() &&
          text.compare(pos, t.text.size(), t.text) == 0) {
        match = &t;
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t raw_end = pos;
    if (match->lstrip) {
      while (raw_end > raw_start && IsAsciiSpace(text[raw_end - 1])) --raw_end;
    }
    if (raw_end > raw_start)
      out->push_back(Segment{-1, text.substr(raw_start, raw_end - raw_start)});
    out->push_back(Segment{match->id, {}});
    pos += match->text.size();
    if (match->rstrip) {
      while (pos < text.size() && IsAsciiSpace(text[pos])) ++pos;
    }
    raw_start = pos;
  }
  if (raw_start < text.size())
    out->push_back(Segment{-1, text.substr(raw_start)});
}

}  // namespace redline::model::tokenizer_internal
