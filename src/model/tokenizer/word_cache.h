// WordCache: a bounded, thread-safe map from a word (raw bytes) to its token
// ids, shared by the BPE and SentencePiece models (internal).
//
// Natural text repeats words (Zipf), so most words' merges are computed once.
// The cache is sharded by hash, each shard behind its own reader/writer lock
// so concurrent encoders rarely contend. A shard is a flat open-addressing
// table whose keys and ids live in two arenas: a lookup touches one or two
// cache lines instead of chasing std::unordered_map nodes. A shard that
// fills up is cleared, which bounds memory (kShards * kShardEntries = 128k
// words, 4 MiB of slots plus the words and ids, about 10 MB at most).
//
// Thread-safety: all methods may be called concurrently.
#ifndef REDLINE_MODEL_TOKENIZER_WORD_CACHE_H_
#define REDLINE_MODEL_TOKENIZER_WORD_CACHE_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <vector>

#include "model/tokenizer/flat_maps.h"

namespace redline::model::tokenizer_internal {

class WordCache {
 public:
  // Longer words are rarely repeated; caching them would only churn.
  static constexpr size_t kMaxWordBytes = 64;

  // Appends the cached ids of `word` to *out and returns true, or returns
  // false (and leaves *out alone) on a miss.
  bool Lookup(std::string_view word, std::vector<int32_t>* out) const {
    const uint32_t h = Tag(word);
    const Shard& shard = shards_[ShardOf(h)];
    std::shared_lock lock(shard.mu);
    if (shard.slots.empty()) return false;
    for (size_t i = (h >> 1) & kSlotMask;; i = (i + 1) & kSlotMask) {
      const Slot& s = shard.slots[i];
      if (s.hash == 0) return false;
      if (s.hash == h && s.key_bytes == word.size() &&
          std::memcmp(shard.keys.data() + s.key_offset, word.data(),
                      word.size()) == 0) {
        const int32_t* ids = shard.ids.data() + s.ids_offset;
        out->insert(out->end(), ids, ids + s.num_ids);
        return true;
      }
    }
  }

  // Records the ids of `word` (word.size() <= kMaxWordBytes).
  void Insert(std::string_view word, const int32_t* ids, size_t count) {
    if (word.size() > kMaxWordBytes || count > 0xFFFF) return;
    const uint32_t h = Tag(word);
    Shard& shard = shards_[ShardOf(h)];
    std::unique_lock lock(shard.mu);
    if (shard.slots.empty() || shard.used >= kShardEntries) {
      shard.slots.assign(kSlots, Slot{});
      shard.keys.clear();
      shard.ids.clear();
      shard.used = 0;
    }
    size_t i = (h >> 1) & kSlotMask;
    for (;; i = (i + 1) & kSlotMask) {
      const Slot& s = shard.slots[i];
      if (s.hash == 0) break;
      if (s.hash == h && s.key_bytes == word.size() &&
          std::memcmp(shard.keys.data() + s.key_offset, word.data(),
                      word.size()) == 0) {
        return;  // another thread got there first
      }
    }
    Slot& slot = shard.slots[i];
    slot.hash = h;
    slot.key_offset = static_cast<uint32_t>(shard.keys.size());
    slot.ids_offset = static_cast<uint32_t>(shard.ids.size());
    slot.key_bytes = static_cast<uint16_t>(word.size());
    slot.num_ids = static_cast<uint16_t>(count);
    shard.keys.insert(shard.keys.end(), word.begin(), word.end());
    shard.ids.insert(shard.ids.end(), ids, ids + count);
    ++shard.used;
  }

 private:
  static constexpr size_t kShards = 64;
  static constexpr size_t kShardEntries = 2048;  // then the shard is cleared
  static constexpr size_t kSlots = 4096;         // load factor <= 1/2
  static constexpr size_t kSlotMask = kSlots - 1;

  struct Slot {
    uint32_t hash = 0;  // 0: empty
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t key_bytes = 0;
    uint16_t num_ids = 0;
  };
  struct Shard {
    mutable std::shared_mutex mu;
    std::vector<Slot> slots;  // allocated on first insert
    std::vector<char> keys;
    std::vector<int32_t> ids;
    size_t used = 0;
  };
  // 32 hash bits, never 0 (0 marks an empty slot): the top 6 pick the
  // shard, the low bits the slot.
  static uint32_t Tag(std::string_view word) {
    return static_cast<uint32_t>(HashBytes(word) >> 32) | 1u;
  }
  static size_t ShardOf(uint32_t hash) { return hash >> 26; }

  std::array<Shard, kShards> shards_;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_WORD_CACHE_H_
