// Two small open-addressing hash tables for the tokenizer hot paths.
//
// std::unordered_map allocates one node per entry and chases a pointer per
// probe; vocabularies have 30k-260k entries and BPE looks up several pairs
// per byte of input, so flat tables with linear probing are a measurable win.
//
// Both tables are built once (Insert) and then only read (Find), and are then
// safe to share between threads. Neither supports erase.
#ifndef REDLINE_MODEL_TOKENIZER_FLAT_MAPS_H_
#define REDLINE_MODEL_TOKENIZER_FLAT_MAPS_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace redline::model::tokenizer_internal {

// 64-bit hash of a byte string: 8-byte chunks mixed by multiplication. Not
// cryptographic; vocabulary strings are trusted model data.
inline uint64_t HashBytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * kMul);
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * kMul;
  }
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

// Maps strings to ids. Keys are not copied: the table stores ids and compares
// against `keys[id]`, which must outlive the table and not change.
class StringIdIndex {
 public:
  StringIdIndex() = default;

  // Sizes the table for `n` entries (call before inserting).
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
  }

  // Inserts keys[id] -> id unless the key is present; returns false if it was.
  bool Insert(const std::vector<std::string>& keys, int32_t id) {
    const std::string_view key = keys[static_cast<size_t>(id)];
    const uint64_t h = HashBytes(key);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{tag, id};
        return true;
      }
      if (s.tag == tag && keys[static_cast<size_t>(s.id)] == key) return false;
    }
  }

  // Returns the id for `key`, or -1.
  int32_t Find(const std::vector<std::string>& keys,
               std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = HashBytes(key);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && keys[static_cast<size_t>(s.id)] == key) return s.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag;  // high hash bits, to skip most string compares
    int32_t id;    // -1: empty
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Maps a (left id, right id) token pair to its BPE merge: rank (lower merges
// first) and the id of the merged token.
class MergeTable {
 public:
  struct Merge {
    int32_t rank = -1;  // -1: no such merge
    int32_t merged_id = -1;
  };

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{kEmpty, Merge{}});
    mask_ = cap - 1;
    shift_ = 64 - std::countr_zero(cap);
  }

  // Keeps the first (lowest-rank) merge for a pair; returns false on a repeat.
  bool Insert(int32_t left, int32_t right, Merge merge) {
    const uint64_t key = Key(left, right);
    for (size_t i = Index(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == kEmpty) {
        s = Slot{key, merge};
        ++size_;
        return true;
      }
      if (s.key == key) return false;
    }
  }

  Merge Find(int32_t left, int32_t right) const {
    const uint64_t key = Key(left, right);
    for (size_t i = Index(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.merge;
      if (s.key == kEmpty) return Merge{};
    }
  }

  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are never both -1
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t Index(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }

  std::vector<Slot> slots_{Slot{kEmpty, Merge{}}};
  size_t mask_ = 0;
  int shift_ = 63;
  size_t size_ = 0;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_FLAT_MAPS_H_
