// The response cache's values and its in-process tier.
//
// CacheEntry: one stored answer — the full canonical key it was stored
// under (compared on every hit, so a hash collision never serves another
// request's answer), its class and TTL, and the answer: a whole body, or
// a stream's SSE events with the gaps between them (replayed with the same
// event boundaries, optionally at the recorded pace).
//
// EncodeEntry/DecodeEntry: the byte form kept in Redis (zstd-compressed
// above a threshold). DecodeEntry rejects anything malformed (DataLoss).
//
// LocalCache: an LRU bounded by a byte budget. Times are passed in (an
// injectable clock for the tests). Thread-safety: loop thread only. Cost:
// O(1) per Get/Put plus the evictions a Put causes; Purge is O(entries).
#ifndef REDLINE_GATEWAY_RESPONSE_CACHE_H_
#define REDLINE_GATEWAY_RESPONSE_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace redline::gateway {

struct CacheEvent {
  std::string raw;     // one whole SSE event, as the upstream sent it
  int64_t gap_us = 0;  // since the previous event (the first: since start)
};

struct CacheEntry {
  std::string canonical;  // the full canonical key
  std::string cls;
  int64_t stored_unix_ms = 0;
  int64_t ttl_ms = 0;
  int status = 200;
  std::string content_type;
  bool stream = false;
  std::string body;                // !stream
  std::vector<CacheEvent> events;  // stream
  std::string upstream;            // who answered first

  int64_t ExpiresUnixMs() const { return stored_unix_ms + ttl_ms; }
  // Approximate bytes held in memory.
  int64_t Bytes() const;
};

// Bytes for Redis; zstd when the raw form exceeds `compress_above_bytes`.
std::string EncodeEntry(const CacheEntry& e, int64_t compress_above_bytes);
Result<CacheEntry> DecodeEntry(std::string_view bytes);

class LocalCache {
 public:
  explicit LocalCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  enum class Outcome { kHit, kMiss, kExpired, kCollision };
  struct Found {
    Outcome outcome = Outcome::kMiss;
    std::shared_ptr<const CacheEntry> entry;
  };
  // Looks up `key`; a stored entry whose canonical key differs is a
  // kCollision (not returned), one past its TTL is erased (kExpired).
  Found Get(const std::string& key, std::string_view canonical,
            int64_t now_unix_ms);
  // Stores (replacing); an entry larger than the whole budget is dropped.
  void Put(const std::string& key, std::shared_ptr<const CacheEntry> entry);
  // Erases every key starting with `prefix`; returns how many.
  int64_t Purge(std::string_view prefix);

  int64_t bytes() const { return bytes_; }
  size_t size() const { return map_.size(); }
  uint64_t evictions() const { return evictions_; }
  uint64_t expirations() const { return expirations_; }

 private:
  struct Item {
    std::string key;
    std::shared_ptr<const CacheEntry> entry;
    int64_t bytes;
  };
  void Erase(std::list<Item>::iterator it);

  const int64_t max_bytes_;
  int64_t bytes_ = 0;
  uint64_t evictions_ = 0;
  uint64_t expirations_ = 0;
  std::list<Item> lru_;  // front: most recent
  std::unordered_map<std::string, std::list<Item>::iterator> map_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_RESPONSE_CACHE_H_
