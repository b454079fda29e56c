// WordPieceModel: BERT tokenization for tokenizer.ggml.model "bert"
// (internal).
//
// Follows Hugging Face's BertNormalizer + BertPreTokenizer + WordPiece:
//   1. normalize: drop NUL, U+FFFD and control/format characters, map
//      whitespace to ' ', surround CJK ideographs with spaces, strip accents
//      (NFD, then drop Mn) and lower-case;
//   2. split on whitespace and around every punctuation character;
//   3. each word becomes the longest vocabulary prefix, then the longest
//      continuation pieces; a word that cannot be covered (or is longer than
//      100 characters) becomes the unknown token.
// llama.cpp's converter stores word-initial pieces as "▁piece" and
// continuation pieces without their "##", which is the form looked up here.
//
// Ownership: borrows the Vocab. Thread-safety: Encode may be called
// concurrently. Cost: O(n * max token length) per word.
#ifndef REDLINE_MODEL_TOKENIZER_WORDPIECE_H_
#define REDLINE_MODEL_TOKENIZER_WORDPIECE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/vocab.h"

namespace redline::model::tokenizer_internal {

class WordPieceModel {
 public:
  WordPieceModel(const Vocab& vocab, int32_t unk_id, bool lowercase,
                 bool strip_accents);

  // Appends the tokens of raw (unnormalized) `text`.
  void Encode(std::string_view text, std::vector<int32_t>* out) const;

  // The normalized words of `text` (exposed for tests).
  std::vector<std::string> SplitWords(std::string_view text) const;

 private:
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  int32_t unk_id_;
  bool lowercase_;
  bool strip_accents_;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_WORDPIECE_H_
