#include "gateway/response_cache.h"

#include <zstd.h>

#include <cstring>

namespace redline::gateway {
namespace {

// "RLC1" + a flags byte (1: zstd) + the payload; the payload is a list of
// length-prefixed fields so a truncated or foreign value fails to decode.
constexpr std::string_view kMagic = "RLC1";
constexpr int64_t kMaxDecodedBytes = 256ll << 20;

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}
void PutStr(std::string* out, std::string_view s) {
  PutU64(out, s.size());
  out->append(s.data(), s.size());
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool U64(uint64_t* v) {
    if (s_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i)
      *v |= static_cast<uint64_t>(static_cast<unsigned char>(s_[i])) << (8 * i);
    s_.remove_prefix(8);
    return true;
  }
  bool I64(int64_t* v) {
    uint64_t u;
    if (!U64(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool Str(std::string* out) {
    uint64_t n;
    if (!U64(&n) || n > s_.size()) return false;
    out->assign(s_.data(), n);
    s_.remove_prefix(n);
    return true;
  }
  bool done() const { return s_.empty(); }

 private:
  std::string_view s_;
};

}  // namespace

int64_t CacheEntry::Bytes() const {
  int64_t n =
      static_cast<int64_t>(sizeof(CacheEntry) + canonical.size() + cls.size() +
                           content_type.size() + body.size() + upstream.size());
  for (const CacheEvent& e : events)
    n += static_cast<int64_t>(sizeof(CacheEvent) + e.raw.size());
  return n;
}

std::string EncodeEntry(const CacheEntry& e, int64_t compress_above_bytes) {
  std::string p;
  PutStr(&p, e.canonical);
  PutStr(&p, e.cls);
  PutU64(&p, static_cast<uint64_t>(e.stored_unix_ms));
  PutU64(&p, static_cast<uint64_t>(e.ttl_ms));
  PutU64(&p, static_cast<uint64_t>(e.status));
  PutStr(&p, e.content_type);
  PutStr(&p, e.upstream);
  PutU64(&p, e.stream ? 1 : 0);
  PutStr(&p, e.body);
  PutU64(&p, e.events.size());
  for (const CacheEvent& ev : e.events) {
    PutStr(&p, ev.raw);
    PutU64(&p, static_cast<uint64_t>(ev.gap_us));
  }
  std::string out(kMagic);
  if (static_cast<int64_t>(p.size()) > compress_above_bytes) {
    std::string z(ZSTD_compressBound(p.size()), '\0');
    const size_t n = ZSTD_compress(z.data(), z.size(), p.data(), p.size(), 3);
    if (!ZSTD_isError(n)) {
      out += '\1';
      PutU64(&out, p.size());
      out.append(z.data(), n);
      return out;
    }
  }
  out += '\0';
  out += p;
  return out;
}

Result<CacheEntry> DecodeEntry(std::string_view bytes) {
  if (bytes.size() < kMagic.size() + 1 || !bytes.starts_with(kMagic))
    return Status::DataLoss("not a cache entry");
  const char flags = bytes[kMagic.size()];
  bytes.remove_prefix(kMagic.size() + 1);
  std::string inflated;
  if (flags == '\1') {
    Reader r(bytes);
    uint64_t n = 0;
    if (!r.U64(&n) || n > static_cast<uint64_t>(kMaxDecodedBytes))
      return Status::DataLoss("bad compressed cache entry");
    inflated.resize(n);
    const size_t got =
        ZSTD_decompress(inflated.data(), n, bytes.data() + 8, bytes.size() - 8);
    if (ZSTD_isError(got) || got != n)
      return Status::DataLoss("cache entry does not decompress");
    bytes = inflated;
  } else if (flags != '\0') {
    return Status::DataLoss("unknown cache entry flags");
  }
  Reader r(bytes);
  CacheEntry e;
  uint64_t status = 0, stream = 0, events = 0;
  if (!r.Str(&e.canonical) || !r.Str(&e.cls) || !r.I64(&e.stored_unix_ms) ||
      !r.I64(&e.ttl_ms) || !r.U64(&status) || !r.Str(&e.content_type) ||
      !r.Str(&e.upstream) || !r.U64(&stream) || !r.Str(&e.body) ||
      !r.U64(&events) || events > bytes.size())
    return Status::DataLoss("truncated cache entry");
  e.status = static_cast<int>(status);
  e.stream = stream != 0;
  e.events.resize(events);
  for (CacheEvent& ev : e.events) {
    if (!r.Str(&ev.raw) || !r.I64(&ev.gap_us))
      return Status::DataLoss("truncated cache entry events");
  }
  if (!r.done()) return Status::DataLoss("trailing bytes in cache entry");
  return e;
}

LocalCache::Found LocalCache::Get(const std::string& key,
                                  std::string_view canonical,
                                  int64_t now_unix_ms) {
  auto it = map_.find(key);
  if (it == map_.end()) return {};
  const std::shared_ptr<const CacheEntry>& e = it->second->entry;
  if (e->canonical != canonical) return {Outcome::kCollision, nullptr};
  if (now_unix_ms >= e->ExpiresUnixMs()) {
    ++expirations_;
    Erase(it->second);
    return {Outcome::kExpired, nullptr};
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return {Outcome::kHit, e};
}

void LocalCache::Put(const std::string& key,
                     std::shared_ptr<const CacheEntry> entry) {
  if (auto it = map_.find(key); it != map_.end()) Erase(it->second);
  const int64_t b = entry->Bytes() + static_cast<int64_t>(key.size() * 2 + 64);
  if (b > max_bytes_) return;
  while (bytes_ + b > max_bytes_ && !lru_.empty()) {
    ++evictions_;
    Erase(std::prev(lru_.end()));
  }
  lru_.push_front(Item{key, std::move(entry), b});
  map_[key] = lru_.begin();
  bytes_ += b;
}

int64_t LocalCache::Purge(std::string_view prefix) {
  int64_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (std::string_view(it->key).starts_with(prefix)) {
      Erase(it);
      ++n;
    }
    it = next;
  }
  return n;
}

void LocalCache::Erase(std::list<Item>::iterator it) {
  bytes_ -= it->bytes;
  map_.erase(it->key);
  lru_.erase(it);
}

}  // namespace redline::gateway
