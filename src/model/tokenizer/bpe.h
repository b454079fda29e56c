// BpeModel: byte-level BPE merges over one pre-tokenized word (internal).
//
// A word's bytes start as the tokens of their GPT-2 byte characters; the
// adjacent pair with the lowest merge rank (leftmost on ties) is merged
// until no ranked pair remains, as Hugging Face's BPE and llama.cpp do.
// Merges are keyed by token-id pairs in a flat hash table, so merging never
// builds strings. Results for short words are cached.
//
// Ownership: borrows the Vocab (must outlive it); owns the merge table and
// cache. Thread-safety: EncodeWord may be called concurrently (see
// word_cache.h).
// Cost: Create is O(merges). EncodeWord is O(n log n) in the word's bytes
// (O(n^2) with tiny constants for words up to kShortWordBytes).
#ifndef REDLINE_MODEL_TOKENIZER_BPE_H_
#define REDLINE_MODEL_TOKENIZER_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/tokenizer/flat_maps.h"
#include "model/tokenizer/vocab.h"
#include "model/tokenizer/word_cache.h"

namespace redline::model::tokenizer_internal {

class BpeModel {
 public:
  // `merges` are "left right" strings in rank order. Merges whose parts or
  // result are not tokens are skipped (they could never apply).
  static std::unique_ptr<BpeModel> Create(
      const Vocab& vocab, const std::vector<std::string>& merges,
      bool ignore_merges);

  // Appends the tokens of one word (raw bytes, not yet byte-level mapped).
  // A byte whose character is not in the vocabulary is dropped (llama.cpp
  // does the same; Hugging Face drops it when the model has no unk_token).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  size_t num_merges() const { return merges_.size(); }

 private:
  // Words up to this many bytes merge by rescanning a small array; longer
  // ones use a heap so a megabyte-long "word" stays O(n log n).
  static constexpr size_t kShortWordBytes = 48;
  BpeModel(const Vocab& vocab, bool ignore_merges);
  void MergeShort(std::vector<int32_t>* ids) const;
  void MergeLong(std::vector<int32_t>* ids) const;
  void EncodeUncached(std::string_view word, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  MergeTable merges_;
  std::array<int32_t, 256> byte_ids_;  // token of each byte's character, or -1
  bool ignore_merges_;
  mutable WordCache cache_;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_BPE_H_
