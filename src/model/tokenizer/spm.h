// SpmModel: SentencePiece-style BPE as llama.cpp implements it for
// tokenizer.ggml.model "llama" (internal).
//
// The text (spaces already replaced by "▁") starts as one symbol per UTF-8
// character; the adjacent pair whose concatenation is a token with the
// highest score is merged (leftmost on ties) until no pair forms a token.
// Symbols that are not tokens fall back to their bytes' <0xNN> tokens, then
// to the unknown token.
//
// When no token has "▁" after a non-"▁" character (true for Llama, Phi-3,
// Baichuan and synthetic vocabularies), no merge can cross the start of a
// "▁" run, so the text is encoded one such word at a time: the result is
// identical (merges in different words never interact) but heaps stay small
// and repeated words come from a cache.
//
// Ownership: borrows the Vocab (must outlive it). Thread-safety: Encode may
// be called concurrently (scratch space is per thread; the cache is
// synchronized). Cost: Encode is O(n log n) in the characters of the longest
// word (the whole text when words cannot be split), one hash lookup per
// candidate pair.
#ifndef REDLINE_MODEL_TOKENIZER_SPM_H_
#define REDLINE_MODEL_TOKENIZER_SPM_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/tokenizer/vocab.h"
#include "model/tokenizer/word_cache.h"

namespace redline::model::tokenizer_internal {

class SpmModel {
 public:
  SpmModel(const Vocab& vocab, int32_t unk_id);

  // Appends the tokens of `text` (already escaped: "▁" for spaces).
  void Encode(std::string_view text, std::vector<int32_t>* out) const;

  // Whether Encode splits the text into words (see above).
  bool splits_words() const { return split_words_; }

  // The token for one raw byte (<0xNN>, else the one-byte text), or -1.
  int32_t ByteToken(uint8_t b) const { return byte_ids_[b]; }

 private:
  // Merges and byte fallback over one independent piece of text.
  void EncodePiece(std::string_view text, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  std::array<int32_t, 256> byte_ids_;
  int32_t unk_id_;
  bool split_words_ = false;
  mutable WordCache cache_;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_SPM_H_
