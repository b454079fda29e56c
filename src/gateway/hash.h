// Stable 64-bit hashing for routing keys and hash-ring points. Stable means
// the same bytes give the same value in every process and build (unlike
// std::hash), so several gateways, or one restarted, place a session on the
// same upstream.
//
// Thread-safety: pure functions. Cost: one multiply per byte (FNV-1a) plus
// a finalizer.
#ifndef REDLINE_GATEWAY_HASH_H_
#define REDLINE_GATEWAY_HASH_H_

#include <cstdint>
#include <string_view>

namespace redline::gateway {

inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;

// FNV-1a over `bytes`, continuing from `seed` (kFnvOffset to start).
inline uint64_t Fnv1a(std::string_view bytes, uint64_t seed = kFnvOffset) {
  uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// splitmix64's finalizer: spreads FNV's weak low bits over the whole word,
// which the ring's ordering needs.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_HASH_H_
